package placement

import (
	"sync/atomic"
)

// counters are the coordinator's statistics. Hits are not counted on a
// shared counter on the hot path: a binding's word counts the hits that took
// its lease cell, and that count is added to deadHits when the binding ends
// (Stats sums the live ones); hits that found the cell busy go to
// sharedHits, striped by lease slot.
type counters struct {
	sharedHits     [16]paddedCounter // hits that found the lease cell busy
	deadHits       atomic.Int64
	reservations   atomic.Int64
	waits          atomic.Int64
	capacity       atomic.Int64
	quarantines    atomic.Int64
	resolutions    atomic.Int64
	expirations    atomic.Int64
	reaperRestarts atomic.Int64
}

// Stats are cumulative counts since New, and the current live entries.
type Stats struct {
	Hits               int64 // acquisitions that found a live binding
	Reservations       int64 // acquisitions that reserved the key
	Waits              int64 // acquisitions that waited for an initializer
	CapacityRejections int64 // acquisitions refused by a full table
	Quarantines        int64 // dispatches quarantined (ambiguous, dropped, timed out)
	Resolutions        int64 // quarantines settled (Resolve or a late result)
	Expirations        int64 // idle bindings reclaimed
	ReaperRestarts     int64 // reaper sweeps that panicked and were restarted
	Live               int64 // entries in the table now
}

// Stats returns the coordinator's statistics. It walks the table to add up
// the hits of live bindings (each binding counts its own, off the hot path),
// so it costs O(entries); call it for monitoring, not per request.
func (c *Coordinator[T]) Stats() Stats {
	hits := c.stats.deadHits.Load()
	for i := range c.stats.sharedHits {
		hits += int64(c.stats.sharedHits[i].n.Load())
	}
	c.table.each(func(e *entry[T]) bool {
		if b := e.bound.Load(); b != nil {
			if w := b.word.Load(); w&deadBit == 0 {
				hits += hitsOf(w)
			}
		}
		return true
	})
	return Stats{
		Hits:               hits,
		Reservations:       c.stats.reservations.Load(),
		Waits:              c.stats.waits.Load(),
		CapacityRejections: c.stats.capacity.Load(),
		Quarantines:        c.stats.quarantines.Load(),
		Resolutions:        c.stats.resolutions.Load(),
		Expirations:        c.stats.expirations.Load(),
		ReaperRestarts:     c.stats.reaperRestarts.Load(),
		Live:               c.live.Load(),
	}
}

// State is a key's state as Query reports it.
type State uint8

// States, as in spec/tla/Placement.tla.
const (
	StateAbsent State = iota
	StateReserved
	StateDispatching
	StateBound
	StateQuarantined
)

// String returns the name of s as the spec writes it.
func (s State) String() string {
	return [...]string{"Absent", "Reserved", "Dispatching", "Bound", "Quarantined"}[s]
}

// Info is what Query reports of a key.
type Info[T comparable] struct {
	State State
	// Target and Generation: the binding's (Bound) or the attempt's
	// (Dispatching, Quarantined).
	Target     T
	Generation uint64
	// Attempt: the binding version (Bound) or the attempt (Dispatching,
	// Quarantined).
	Attempt uint64
	Leases  int  // active leases (Bound)
	Closing bool // the final request arrived (Bound)
}

// Query reports key's state without taking a lease, creating an entry or
// changing anything. An expired or stale binding reads as Absent.
func (c *Coordinator[T]) Query(key string) (Info[T], error) {
	if err := c.checkKey(key); err != nil {
		return Info[T]{}, err
	}
	e, ok := c.table.load(key)
	if !ok {
		return Info[T]{}, nil
	}
	if b := e.bound.Load(); b != nil {
		w := b.word.Load()
		if w&deadBit == 0 && !b.stale() && !b.expiredAt(w, c.now()) {
			return Info[T]{State: StateBound, Target: b.target, Generation: b.gen, Attempt: b.version,
				Leases: int(leases(w)), Closing: w&closingBit != 0}, nil
		}
		return Info[T]{}, nil
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	now := c.now()
	switch {
	case e.removed:
	case e.st == stReserved:
		if e.p.deadline > now { // past it, the reservation has timed out
			return Info[T]{State: StateReserved}, nil
		}
	case e.st == stDispatching, e.st == stQuarantined:
		st := StateQuarantined // a dispatch past its deadline is quarantined
		if e.st == stDispatching && e.p.deadline > now {
			st = StateDispatching
		}
		return Info[T]{State: st, Target: e.p.target, Generation: e.p.tgen, Attempt: e.p.attempt}, nil
	}
	return Info[T]{}, nil
}
