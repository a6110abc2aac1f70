package placement

import (
	"sync/atomic"
	"time"
)

// counters are the coordinator's statistics. Hits are not counted on a
// shared counter on the hot path: a binding's word counts the hits that took
// its lease cell, and that count is added to deadHits when the binding ends
// or its cell epoch wraps (Stats sums the live ones); hits that found the
// cell busy go to sharedHits, striped by lease slot.
type counters struct {
	sharedHits     [16]paddedCounter // hits that found the lease cell busy
	deadHits       atomic.Int64      // hits of dead bindings and of wrapped epochs
	hitsShown      atomic.Int64      // the largest Hits that Stats has returned
	reservations   atomic.Int64
	binds          atomic.Int64
	waits          atomic.Int64
	capacity       atomic.Int64
	quarantines    atomic.Int64
	resolutions    atomic.Int64
	expirations    atomic.Int64
	reaperRestarts atomic.Int64
	// quarantineExpirations counts quarantines ended by QuarantineTTL;
	// quarantinesDropped those ended because their generation moved on.
	quarantineExpirations atomic.Int64
	quarantinesDropped    atomic.Int64
	observerPanics        atomic.Int64
	resolvedAccepted      atomic.Int64
	rolledBack            atomic.Int64
	staleAtBirth          atomic.Int64
}

// Stats are cumulative counts since New, and what the table holds now.
type Stats struct {
	Hits         int64 // acquisitions that found a live binding
	Reservations int64 // acquisitions that reserved the key
	// Binds counts the bindings made: an Accepted dispatch (in time, or
	// CommitAccepted) or a quarantine settled Accepted (a late result, or
	// Resolve); a binding stale at birth is not one. Every binding is
	// counted once here and ends once (Expirations, or an invalidation,
	// a close or its target's bump).
	Binds              int64
	Waits              int64 // acquisitions that waited for an initializer
	CapacityRejections int64 // acquisitions refused by a full table
	// RolledBack counts the dispatches a target refused in time
	// (DefinitelyNotAccepted: the request may try another target).
	RolledBack  int64
	Quarantines int64 // dispatches quarantined (ambiguous, dropped, timed out)
	// Resolutions counts the quarantines settled (Resolve or a late
	// result); ResolvedAccepted those of them settled Accepted (the rest
	// were settled not accepted).
	Resolutions      int64
	ResolvedAccepted int64
	// StaleAtBirth counts the commits whose target was bumped between the
	// dispatch and the commit (ErrStaleAtBirth): answered, nothing bound.
	StaleAtBirth   int64
	Expirations    int64 // idle bindings reclaimed
	ReaperRestarts int64 // reaper sweeps that panicked and were restarted
	// ObserverPanics counts the calls of Config.Observer that panicked
	// (recovered; see Config.Observer).
	ObserverPanics int64
	// Live counts the keys live now, as the spec's Occupies does: reserved,
	// dispatching or quarantined, or bound to a binding neither expired nor
	// stale. It is what every caller sees: Stats first applies each key's
	// due deadlines (see Stats), so nothing over is counted.
	Live int64
	// Quarantined counts the keys quarantined now; they are among Live.
	Quarantined int64
	// QuarantineExpirations counts quarantines that QuarantineTTL ended.
	QuarantineExpirations int64
	// QuarantinesDropped counts quarantines ended because their target's
	// generation moved on (BumpGeneration). Every quarantine ends one way:
	// Quarantines = Resolutions + QuarantineExpirations + QuarantinesDropped
	// + Quarantined, in every Stats taken while no other call is in
	// progress.
	QuarantinesDropped int64
}

// Stats returns the coordinator's statistics, as every caller sees the
// table: it walks the table, locking one entry at a time, and applies each
// entry's deadlines that have passed at one reading of the clock taken when
// the call starts (as Query does for one key, and the reaper's sweep for
// all: an idle binding past its deadline expires, a binding or quarantine
// whose target's generation moved on is dropped, a reservation or dispatch
// past its deadline times out, a quarantine past its QuarantineTTL ends,
// each with its event), then counts it. So the counters include every end
// that has happened by then, and Live and Quarantined count only what is
// still live. It costs O(entries): call it for monitoring, not per request
// (and, like every call, not from the Observer).
//
// Every cumulative counter is monotonic: no call returns a smaller value
// than an earlier call did. Hits may lag the hits that complete during the
// call (a binding that ends while the walk runs moves its count from the
// walk to the dead total, and may be missed by both for that one call).
func (c *Coordinator[T]) Stats() Stats {
	hits := c.stats.deadHits.Load()
	for i := range c.stats.sharedHits {
		hits += int64(c.stats.sharedHits[i].n.Load())
	}
	now := c.now()
	var live, quarantined int64
	count := func(e *entry[T]) {
		switch {
		case e.removed:
		case e.st == stReserved, e.st == stDispatching:
			live++
		case e.st == stQuarantined:
			live++
			quarantined++
		case e.st == stBound:
			// Reclaimed unless a lease came as it looked: then it is live.
			if b := e.bound.Load(); b.word.Load()&deadBit == 0 && !b.stale() {
				live++
			}
		}
	}
	visit := func(e *entry[T], w0 uint64) {
		// The binding's cell hits as the walk found it, before the reclaim
		// could move them to deadHits (read above).
		if w0&deadBit == 0 {
			hits += hitsOf(w0)
		}
		count(e)
	}
	if mutant("StatsSkipsDeadlines") { // counts what the table holds, due or not
		c.table.each(func(e *entry[T]) bool {
			e.mu.Lock()
			var w0 uint64 = deadBit
			if b := e.bound.Load(); b != nil {
				w0 = b.word.Load()
			}
			visit(e, w0)
			e.mu.Unlock()
			return true
		})
	} else {
		c.sweepVisit(now, visit)
	}
	for { // never report fewer hits than before (see above)
		shown := c.stats.hitsShown.Load()
		if hits <= shown {
			hits = shown
			break
		}
		if c.stats.hitsShown.CompareAndSwap(shown, hits) {
			break
		}
	}
	return Stats{
		Hits:               hits,
		Reservations:       c.stats.reservations.Load(),
		Binds:              c.stats.binds.Load(),
		Waits:              c.stats.waits.Load(),
		CapacityRejections: c.stats.capacity.Load(),
		Quarantines:        c.stats.quarantines.Load(),
		Resolutions:        c.stats.resolutions.Load(),
		ResolvedAccepted:   c.stats.resolvedAccepted.Load(),
		RolledBack:         c.stats.rolledBack.Load(),
		StaleAtBirth:       c.stats.staleAtBirth.Load(),
		Expirations:        c.stats.expirations.Load(),
		ReaperRestarts:     c.stats.reaperRestarts.Load(),
		ObserverPanics:     c.stats.observerPanics.Load(),
		Live:               live,
		Quarantined:        quarantined,

		QuarantineExpirations: c.stats.quarantineExpirations.Load(),
		QuarantinesDropped:    c.stats.quarantinesDropped.Load(),
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
	// IdleDeadline is when a Bound key with no leases expires unless a
	// lease is taken first, on the coordinator's clock (see
	// Coordinator.Now): its last lease's Release set it to that time plus
	// IdleTTL (Abandon keeps the earlier one; a binding resolved without a
	// lease has its commit's). It is zero in every other case: a leased
	// binding does not expire (its deadline is set when its last lease
	// ends), and other states have no binding.
	IdleDeadline time.Duration
}

// Query reports key's state without taking a lease or creating an entry.
// An expired or stale binding reads as Absent. An idle binding past its
// deadline is expired by the Query itself (the reaper would have done it),
// with its Expired event: so a binding Query reported gone can never be
// hit again, and a binding it reported bound was bound at one instant of
// the call.
//
// A bound key is read without a lock; other states under the key's lock.
func (c *Coordinator[T]) Query(key string) (Info[T], error) {
	if err := c.checkKey(key); err != nil {
		return Info[T]{}, err
	}
	for {
		e, ok := c.table.load(key)
		if !ok {
			return Info[T]{}, nil
		}
		b := e.bound.Load()
		if b == nil {
			if i, again := c.queryLocked(e); !again {
				return i, nil
			}
			continue
		}
		w := b.word.Load()
		if mutant("TornQueryRead") {
			widenWindow() // between the word and the clock
			if w&deadBit == 0 && !b.stale() && !b.expiredAt(w, c.now()) {
				i := boundInfo(b, w)
				if leases(w) == 0 {
					i.IdleDeadline = time.Duration(b.deadline.Load())
				}
				return i, nil
			}
			return Info[T]{}, nil
		}
		switch {
		case w&deadBit != 0 || b.stale():
			return Info[T]{}, nil // removed, superseded or fenced: final
		case leases(w) > 0:
			return boundInfo(b, w), nil // leased at the word's reading
		}
		// Idle. Its deadline is fixed while the word stays w, so (w,
		// deadline, now) with w read again unchanged is one instant's state.
		d, now := b.deadline.Load(), c.now()
		if b.word.Load() != w {
			continue
		}
		if d > now {
			i := boundInfo(b, w)
			i.IdleDeadline = time.Duration(d)
			return i, nil
		}
		if mutant("ExpiryWithoutKill") {
			return Info[T]{}, nil // the bug: reported gone, yet a hit may still win the word
		}
		// Past its deadline: report it gone only after winning the word
		// (killing it), so no hit that read the clock earlier can still
		// take a lease on it.
		if c.expire(e, b) {
			return Info[T]{}, nil
		}
	}
}

// expire expires b, the binding of e, if it is still idle past its
// deadline; it reports whether b is gone (expired now, or already dead).
// It fails when a lease came or went meanwhile.
func (c *Coordinator[T]) expire(e *entry[T], b *binding[T]) bool {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.removed || e.bound.Load() != b {
		return true // superseded meanwhile: dead
	}
	if c.expireLocked(e, b, c.now()) {
		return true
	}
	return b.word.Load()&deadBit != 0
}

func boundInfo[T comparable](b *binding[T], w uint64) Info[T] {
	return Info[T]{State: StateBound, Target: b.g.target, Generation: b.g.gen, Attempt: b.version,
		Leases: int(leases(w)), Closing: w&closingBit != 0}
}

// queryLocked reads, under its lock, an entry that had no binding; again
// reports that it has been bound since (read it lock-free instead).
func (c *Coordinator[T]) queryLocked(e *entry[T]) (i Info[T], again bool) {
	e.mu.Lock()
	defer e.mu.Unlock()
	// The deadlines of an unsettled key apply as on any access (a timed-out
	// reservation is handed to the next waiter, an over quarantine ends).
	c.timeoutsLocked(e, c.now())
	switch {
	case e.removed:
	case e.st == stBound:
		return Info[T]{}, true
	case e.st == stReserved:
		return Info[T]{State: StateReserved}, false
	case e.st == stDispatching:
		return Info[T]{State: StateDispatching, Target: e.p.g().target, Generation: e.p.g().gen, Attempt: e.p.attempt()}, false
	case e.st == stQuarantined:
		return Info[T]{State: StateQuarantined, Target: e.p.g().target, Generation: e.p.g().gen, Attempt: e.p.attempt()}, false
	}
	return Info[T]{}, false
}
