package placement

import (
	"sort"
	"time"
)

// Quarantine describes one quarantined session: the attempt whose outcome
// is unknown, which Resolve must name, and how long the quarantine has
// left. Times are on the coordinator's clock (see Coordinator.Now: the
// manual clock's, or time since New on the coarse or the runtime clock).
type Quarantine[T comparable] struct {
	Key        string
	Attempt    uint64
	Target     T
	Generation uint64
	// Since is when the attempt became ambiguous: an Ambiguous outcome (or
	// Drop), or its dispatch deadline when the dispatch timed out.
	Since time.Duration
	// DispatchedAt is when the attempt was dispatched (its BeginDispatch):
	// the request was sent at or after it, so a resolver bounds the
	// attempt's age by Now - DispatchedAt (at most DispatchTimeout before
	// Since).
	DispatchedAt time.Duration
	// Age is how long the session has been quarantined, at the listing
	// (never negative).
	Age time.Duration
	// Expires is when QuarantineTTL ends the quarantine if nothing settles
	// it first (Since + QuarantineTTL).
	Expires time.Duration
}

// Quarantined lists the quarantined sessions, oldest first: the work list
// of a resolver, which asks each Target what became of Attempt and settles
// it with Resolve (a loop that runs every few seconds), and what an
// operator inspects. Quarantines that are over (QuarantineTTL passed, or
// their target's generation moved on) end as the listing meets them, with
// their events, and are not listed. It walks the table, locking one entry
// at a time and reading the clock there, so every listed Age is at least
// zero: it costs O(entries), so call it from such a loop, not per request
// (a request learns its own session's quarantine from Acquire's
// *AmbiguousError).
func (c *Coordinator[T]) Quarantined() []Quarantine[T] {
	var out []Quarantine[T]
	var now int64
	if mutant("QuarantinedReadsClockOnce") {
		now = c.now()
	}
	c.table.each(func(e *entry[T]) bool {
		if c.testWalkEntry != nil {
			c.testWalkEntry()
		}
		e.mu.Lock()
		defer e.mu.Unlock()
		if !mutant("QuarantinedReadsClockOnce") {
			// Under the lock: a quarantine that began during the walk
			// began at a reading no later than this one.
			now = c.now()
		}
		c.timeoutsLocked(e, now)
		if e.removed || e.st != stQuarantined {
			return true
		}
		since := e.p.deadline - c.quarantineTTL
		out = append(out, Quarantine[T]{Key: e.key(), Attempt: e.p.attempt(), Target: e.p.g().target,
			Generation: e.p.g().gen, Since: time.Duration(since), DispatchedAt: time.Duration(e.p.dispatched()), Age: time.Duration(now - since),
			Expires: time.Duration(e.p.deadline)})
		return true
	})
	sort.Slice(out, func(i, j int) bool {
		if out[i].Since != out[j].Since {
			return out[i].Since < out[j].Since
		}
		return out[i].Key < out[j].Key
	})
	return out
}
