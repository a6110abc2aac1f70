package placement

import (
	"context"
	"fmt"
	"time"
)

// Outcome is what a dispatcher learned about its attempt.
type Outcome uint8

// Outcomes.
const (
	// Accepted: the target accepted the request; the binding commits.
	Accepted Outcome = iota + 1
	// DefinitelyNotAccepted: the target certainly did not accept it; the
	// reservation returns to its holder, who may dispatch again or cancel.
	DefinitelyNotAccepted
	// Ambiguous: the target may or may not have accepted it (a timeout, a
	// dropped stream); the key is quarantined and never silently replayed.
	Ambiguous
)

// String returns the name of o as the spec writes it.
func (o Outcome) String() string {
	switch o {
	case Accepted:
		return "Accepted"
	case DefinitelyNotAccepted:
		return "DefinitelyNotAccepted"
	case Ambiguous:
		return "Ambiguous"
	}
	return fmt.Sprintf("Outcome(%d)", uint8(o))
}

// Resolution settles a quarantined key (see Coordinator.Resolve).
type Resolution uint8

// Resolutions.
const (
	ResolveAccepted Resolution = iota + 1
	ResolveNotAccepted
)

// String returns the name of r as the spec writes it.
func (r Resolution) String() string {
	switch r {
	case ResolveAccepted:
		return "Accepted"
	case ResolveNotAccepted:
		return "NotAccepted"
	}
	return fmt.Sprintf("Resolution(%d)", uint8(r))
}

// Reservation is held by the one request that initializes a session. It
// ends with BeginDispatch (and then the dispatch's outcome), CommitAccepted
// or Cancel; if it outlives the coordinator's ReserveTimeout it is revoked.
// Done ends whatever the request still holds through it.
type Reservation[T comparable] struct {
	c *Coordinator[T]
	e *entry[T]
	// What Done ends, guarded by e.mu: the last dispatch, and the lease a
	// commit (Complete(Accepted), CommitAccepted) returned.
	d     *Dispatch[T]
	lease Lease[T]
	// first and spare come in the reservation's one allocation (a new
	// session allocates it and its entry, nothing else; issue 28): the
	// guard of its first dispatch, and the pending state the key takes
	// if its entry has none (see entry.pendingLocked).
	first Dispatch[T]
	spare pending[T]
}

// Key returns the reserved session key.
func (r *Reservation[T]) Key() string { return r.e.key() }

// heldLocked applies the lazy timeouts at now and reports whether r still
// holds the key's reservation (and not a dispatch).
func (r *Reservation[T]) heldLocked(now int64) bool {
	r.c.timeoutsLocked(r.e, now)
	return !r.e.removed && r.e.st == stReserved && r.e.p.resv == r
}

// Cancel gives the reservation up before dispatching: the key becomes
// absent and one of its waiters becomes the next initializer. A reservation
// that is no longer held returns ErrReservationLost.
func (r *Reservation[T]) Cancel() error {
	e := r.e
	e.mu.Lock()
	defer e.mu.Unlock()
	if !r.heldLocked(r.c.now()) {
		return ErrReservationLost
	}
	r.c.removeLocked(e, Event[T]{Kind: EventRemoved, Key: e.key()}, nil)
	return nil
}

// Done ends whatever the request still holds through r, so that one
// deferred call cleans up every path (see Acquisition.Done):
//
//   - the reservation, before any dispatch or back after
//     DefinitelyNotAccepted: cancelled, so a waiter becomes the key's next
//     initializer at once;
//   - a dispatch in flight (never completed, or refused with ErrClosed):
//     dropped, which quarantines the key, since the target may have
//     accepted it;
//   - the lease that Complete(Accepted) or CommitAccepted returned:
//     released.
//
// Whatever the caller already ended (Cancel, Complete, a lease's Release,
// Abandon, Invalidate or Close), or what ended without it (a timeout, a
// Resolve), is left alone: Done never ends a later reservation, dispatch or
// lease of the same key. Done is idempotent, reports nothing, and works
// after the coordinator's Close.
func (r *Reservation[T]) Done() {
	e := r.e
	e.mu.Lock()
	d, l := r.d, r.lease
	e.mu.Unlock()
	if d != nil {
		d.Drop() // a no-op once the dispatch has an outcome
	}
	if l.b != nil {
		_ = l.Release() // ErrUsed: the caller ended it
	}
	if !mutant("DoneKeepsReservation") {
		_ = r.Cancel() // ErrReservationLost: not held (dispatched, committed, revoked)
	}
}

// BeginDispatch fixes the provisional target and its generation under a
// fresh attempt id. Pass the generation the router saw when it chose the
// target (Generation, read with its view of the workers): if the target has
// left or rejoined since (BumpGeneration), a *FencedError is returned and
// the reservation is kept, to choose again. The returned guard must be
// completed (or dropped).
// After the coordinator's Close it returns ErrClosed and the reservation
// is kept (Cancel or Done gives it up).
func (r *Reservation[T]) BeginDispatch(target T, generation uint64) (*Dispatch[T], error) {
	c, e := r.c, r.e
	slot := c.catalog.slot(target) // a lookup the router's Generation just made: cheap (see catalog)
	e.mu.Lock()
	defer e.mu.Unlock()
	if c.closedNow() {
		return nil, ErrClosed
	}
	now := c.now() // read once, under the lock: the operation happens at now
	held := r.heldLocked(now)
	if !held && mutant("DispatchesLostReservation") && !e.removed && e.st == stReserved {
		held = true // the bug: another request's reservation of the key is taken as this one's
	}
	if !held {
		return nil, ErrReservationLost
	}
	if cur := slot.gen.Load(); generation != cur {
		return nil, &FencedError{Generation: generation, CurrentGeneration: cur}
	}
	return c.dispatchLocked(e, r, slot.at(generation), now), nil
}

// dispatchLocked begins r's dispatch of e to generation g of its target,
// at now. The reservation's first dispatch uses the guard allocated with
// it; a retry (after DefinitelyNotAccepted) allocates its own.
func (c *Coordinator[T]) dispatchLocked(e *entry[T], r *Reservation[T], g *generation[T], now int64) *Dispatch[T] {
	d := &r.first
	if r.d != nil {
		d = new(Dispatch[T])
	}
	d.r, d.attempt, d.g, d.deadline = r, c.attempts.Add(1), g, now+c.dispatchTimeout
	r.d = d
	e.st = stDispatching
	e.p.cur, e.p.deadline = d, d.deadline
	if !mutant("DispatchDeadlineUnnoted") {
		// The dispatch may time out (and its quarantine end) before the
		// reservation's deadline: a full table must know to sweep then.
		c.noteDeadline(e.p.deadline)
	}
	e.notifyLocked()
	return d
}

// CommitAccepted is the compatibility bridge for routers that learn
// acceptance only after a response stream is chosen: it dispatches to target
// and commits the accepted result in one atomic step (one lock, one reading
// of the clock), returning the dispatcher's lease.
//
// A generation that is not target's current one is refused with a
// *FencedError. If target is bumped after that check and before the
// binding is made (a Bump racing the call), the binding is stale at birth:
// CommitAccepted returns a zero Lease and a *GenerationMovedError
// (matching ErrStaleAtBirth), and the key reads as absent. As everywhere
// in this package, a Lease is returned only with a nil error, and then it
// is a lease on a live binding. After the coordinator's Close it returns
// ErrClosed and the reservation is kept (Cancel or Done gives it up).
func (r *Reservation[T]) CommitAccepted(target T, generation uint64) (Lease[T], error) {
	c, e := r.c, r.e
	slot := c.catalog.slot(target)
	e.mu.Lock()
	defer e.mu.Unlock()
	if c.closedNow() {
		return Lease[T]{}, ErrClosed
	}
	now := c.now()
	if !r.heldLocked(now) {
		return Lease[T]{}, ErrReservationLost
	}
	if cur := slot.gen.Load(); generation != cur {
		return Lease[T]{}, &FencedError{Generation: generation, CurrentGeneration: cur}
	}
	d := c.dispatchLocked(e, r, slot.at(generation), now)
	d.settledLocked()
	c.emitLocked(Event[T]{Kind: EventCommitted, Key: e.key(), Attempt: d.attempt, Generation: generation, Outcome: Accepted},
		&e.p.g().target)
	return c.commitLocked(e, r, now, c.commitGen(e))
}

// commitLocked binds e's attempt with the dispatcher's lease (see
// bindLocked) and hands the lease to r's holder. A binding stale at birth
// is born dead: its lease is never handed out (it would act on nothing),
// and the *GenerationMovedError comes alone.
func (c *Coordinator[T]) commitLocked(e *entry[T], r *Reservation[T], now int64, cur uint64) (Lease[T], error) {
	b, err := c.bindLocked(e, 1, now, cur)
	if err != nil {
		return Lease[T]{}, err
	}
	r.lease = c.newLease(b)
	return r.lease, nil
}

// Dispatch is the guard of one dispatch attempt. Complete it with the
// outcome; a guard dropped without an outcome (Drop), or one that outlives
// the DispatchTimeout, quarantines the key. A guard is used once.
type Dispatch[T comparable] struct {
	r       *Reservation[T] // its coordinator and entry are r's
	attempt uint64
	g       *generation[T] // the target and generation
	// deadline is when the dispatch times out (BeginDispatch's reading
	// plus DispatchTimeout), on the coordinator's clock.
	deadline int64
	// timers are Context's deadline timers, stopped by the outcome
	// (guarded by e.mu): nil while there are none, and settled once the
	// guard is used (its outcome reported), so a guard is 40 bytes (and a
	// Reservation, which holds its first, 128).
	timers *[]*time.Timer
}

// settled is the timers of a used guard.
var settled = new([]*time.Timer)

// usedLocked reports whether the guard's outcome was reported (guarded by
// e.mu).
func (d *Dispatch[T]) usedLocked() bool { return d.timers == settled }

// Attempt returns the attempt id, which a router may send to the target as
// an idempotency key. Ids are never 0. Within a coordinator they strictly
// increase in the order dispatches begin (CommitAccepted takes one too) and
// are never reused. Across coordinators (other processes, restarts) nothing
// is coordinated: a coordinator with Config.FirstAttempt 0 starts at a
// point drawn uniformly from [1, 2^63] by crypto/rand and counts up, so two
// coordinators that issue at most n ids each share one only if their
// ranges overlap, with probability at most (2n-1)/2^63; over m
// coordinators, at most m(m-1)/2 * (2n-1)/2^63 (below 5e-4 for 1,000
// coordinators of 2^32 attempts each). Coordinators given the same
// FirstAttempt issue the same ids.
func (d *Dispatch[T]) Attempt() uint64 { return d.attempt }

// Target returns the provisional target.
func (d *Dispatch[T]) Target() T { return d.g.target }

// Generation returns the target's generation at dispatch.
func (d *Dispatch[T]) Generation() uint64 { return d.g.gen }

// Reservation returns the reservation this dispatch came from; after a
// DefinitelyNotAccepted outcome it is held again.
func (d *Dispatch[T]) Reservation() *Reservation[T] { return d.r }

// Deadline returns when the dispatch times out, on the coordinator's clock
// (Coordinator.Now's timeline): the time BeginDispatch read plus
// DispatchTimeout. If no outcome is reported by then, the key is
// quarantined, as if Complete(Ambiguous) had been called at the deadline.
func (d *Dispatch[T]) Deadline() time.Duration { return time.Duration(d.deadline) }

// Remaining returns how long the dispatch has left before its deadline, on
// the coordinator's clock (zero once the deadline has passed).
func (d *Dispatch[T]) Remaining() time.Duration {
	return max(0, time.Duration(d.deadline-d.r.c.now()))
}

// Context returns a copy of parent for the whole upstream call that
// forwards this dispatch. If the dispatch's deadline passes while it is
// still in flight (no outcome reported), the context is cancelled with
// cause ErrDispatchTimeout (context.Cause), so the call stops waiting and
// the router reports Ambiguous. Once an outcome is reported (Complete, or
// Drop), the deadline no longer applies: a response accepted in time may
// stream its body for as long as it takes, under parent's own deadline.
// Call the returned cancel when the call ends (the whole body read), as
// with context.WithCancel.
//
// The deadline runs on the runtime's timer, the default coarse clock on
// its ticks: the two see it within one tick of each other. With a
// ManualClock the coordinator's time is the simulation's, not the wall
// clock's, so no deadline is added: the host times dispatches out by
// advancing its clock.
func (d *Dispatch[T]) Context(parent context.Context) (context.Context, context.CancelFunc) {
	ctx, cancel := context.WithCancelCause(parent)
	if d.r.c.manual != nil {
		return ctx, func() { cancel(context.Canceled) }
	}
	e := d.r.e
	e.mu.Lock()
	defer e.mu.Unlock()
	if d.usedLocked() {
		return ctx, func() { cancel(context.Canceled) }
	}
	t := time.AfterFunc(d.Remaining(), func() {
		e.mu.Lock()
		inFlight := !d.usedLocked()
		e.mu.Unlock()
		if inFlight {
			cancel(ErrDispatchTimeout)
		}
	})
	if d.timers == nil {
		d.timers = new([]*time.Timer) // most dispatches have no Context: their guard has no room for it
	}
	*d.timers = append(*d.timers, t)
	return ctx, func() {
		t.Stop()
		cancel(context.Canceled)
	}
}

// settledLocked marks the guard used (its outcome is reported) and stops
// the deadline timers of its contexts.
func (d *Dispatch[T]) settledLocked() {
	if d.timers != nil {
		for _, t := range *d.timers {
			t.Stop()
		}
	}
	d.timers = settled
}

// Complete reports the attempt's outcome. It returns a Lease only with a
// nil error: a lease on the session's live binding, which the request ends
// (Release, or Done). Every other answer is an error that says what the
// key is now, and the request then holds no lease:
//
//   - Accepted commits the binding (nil error); if the key was quarantined
//     for this attempt (the dispatch timed out), the late result settles
//     it. If the target's generation moved on since BeginDispatch (in time
//     or late), the binding is stale at birth: the key reads as absent and
//     the next Acquire reserves it again. Complete then returns a
//     *GenerationMovedError (matching ErrStaleAtBirth); the request may
//     still use the target's answer, but the session is not bound.
//   - DefinitelyNotAccepted returns ErrNotAccepted: the reservation is held
//     again (with the deadline it was reserved with: retries do not extend
//     it), to dispatch again, to another target, or Cancel. A late one (the
//     dispatch had timed out into a quarantine) settles the quarantine to
//     absent; the reservation is then gone (BeginDispatch answers
//     ErrReservationLost).
//   - Ambiguous quarantines the key and returns an *AmbiguousError naming
//     the quarantined attempt (matching ErrAmbiguous); so does a late
//     Ambiguous, which changes nothing.
//
// An attempt that is no longer current is fenced: a *FencedError, no change
// (a dispatch that timed out is quarantined at its deadline, so a Resolve,
// its QuarantineTTL or a bump of its target may have settled it before its
// request reports the outcome).
// A second Complete of the guard returns ErrUsed; an unknown outcome
// ErrInvalidArgument.
//
// After the coordinator's Close nothing is committed or settled: Accepted,
// and a late DefinitelyNotAccepted, return ErrClosed and change nothing,
// leaving the guard in flight (Drop or Done quarantines it); Ambiguous and
// an in-flight DefinitelyNotAccepted act as before.
func (d *Dispatch[T]) Complete(o Outcome) (Lease[T], error) {
	if o < Accepted || o > Ambiguous {
		return Lease[T]{}, fmt.Errorf("placement: Complete: invalid outcome %d: %w", o, ErrInvalidArgument)
	}
	c, e := d.r.c, d.r.e
	e.mu.Lock()
	if d.usedLocked() {
		e.mu.Unlock()
		return Lease[T]{}, ErrUsed
	}
	now := c.now() // read once, under the lock: the operation happens at now
	c.timeoutsLocked(e, now)
	current := !e.removed && (e.st == stDispatching || e.st == stQuarantined) && e.p.attempt() == d.attempt
	if c.closedNow() && (o == Accepted || o == DefinitelyNotAccepted && current && e.st == stQuarantined) {
		// Nothing is committed or settled after Close; the guard stays
		// in flight, for Drop or Done to end.
		e.mu.Unlock()
		return Lease[T]{}, ErrClosed
	}
	d.settledLocked()
	if !current && mutant("AcceptsStaleAttempt") && o == Accepted && !e.removed {
		if e.p == nil {
			e.p = &pending[T]{}
		}
		e.p.cur = d
		if e.st == stAbsent {
			c.live.Add(1)
		}
		current = true
	}
	if !current {
		e.mu.Unlock()
		a, g := c.currentAttempt(e.key())
		return Lease[T]{}, &FencedError{Attempt: d.attempt, Generation: d.g.gen, CurrentAttempt: a, CurrentGeneration: g}
	}
	defer e.mu.Unlock()
	late := e.st == stQuarantined
	ev := Event[T]{Key: e.key(), Attempt: d.attempt, Generation: d.g.gen, Outcome: o}
	// Built only on the paths that return it: an accepted commit
	// allocates nothing for it.
	ambiguous := func() *AmbiguousError[T] {
		return &AmbiguousError[T]{Key: e.key(), Attempt: d.attempt, Generation: d.g.gen, Target: d.g.target,
			DispatchedAt: time.Duration(d.deadline - c.dispatchTimeout)}
	}
	switch {
	case o == Accepted:
		cur := c.commitGen(e)
		if late && cur != e.p.g().gen {
			// The generation moved on since timeoutsLocked looked: the
			// quarantine is over, at the reading the commit would use.
			c.dropQuarantineLocked(e)
			return Lease[T]{}, &FencedError{Attempt: d.attempt, Generation: d.g.gen}
		}
		ev.Kind = EventCommitted
		if late { // a late result settles the quarantine
			c.stats.resolutions.Add(1)
			c.stats.resolvedAccepted.Add(1)
			ev.Kind = EventResolved
		}
		c.emitLocked(ev, &d.g.target)
		return c.commitLocked(e, d.r, now, cur)
	case o == DefinitelyNotAccepted && !late:
		// The reservation comes back with its own deadline, so retries
		// cannot keep a key initializing for ever: an initialization ends
		// within ReserveTimeout + DispatchTimeout of its reservation.
		e.st = stReserved
		e.p.deadline = e.p.resDeadline
		c.noteDeadline(e.p.deadline)
		e.notifyLocked()
		ev.Kind = EventRolledBack
		c.stats.rolledBack.Add(1)
		c.emitLocked(ev, &d.g.target)
		return Lease[T]{}, ErrNotAccepted
	case o == DefinitelyNotAccepted: // late: settles to absent
		c.stats.resolutions.Add(1)
		ev.Kind = EventResolved
		c.removeLocked(e, ev, &d.g.target)
		return Lease[T]{}, ErrNotAccepted
	case !late: // Ambiguous
		c.quarantineLocked(e, now)
		ev.Kind = EventQuarantined
		ambiguous := ambiguous()
		ambiguous.Expires = time.Duration(e.p.deadline)
		c.emitLocked(ev, quarantinedTarget(e))
		// A quarantine whose target's generation already moved on is over
		// at birth: it is dropped now, so it holds no slot.
		c.timeoutsLocked(e, now)
		if mutant("AmbiguousWithoutTarget") {
			var zero T
			ambiguous.Target = zero
		}
		return Lease[T]{}, ambiguous
	default: // a late Ambiguous: still quarantined, nothing changes
		return Lease[T]{}, ambiguous()
	}
}

// Drop abandons the guard without an outcome: if its attempt is still in
// flight the key is quarantined (the target may have accepted it). After
// Complete, Drop does nothing, so `defer d.Drop()` is safe.
func (d *Dispatch[T]) Drop() {
	e := d.r.e
	e.mu.Lock()
	used := d.usedLocked()
	e.mu.Unlock()
	if !used {
		_, _ = d.Complete(Ambiguous)
	}
}

// currentAttempt returns the attempt in flight or quarantined on key, if any.
func (c *Coordinator[T]) currentAttempt(key string) (attempt, gen uint64) {
	e, ok := c.table.load(key)
	if !ok {
		return 0, 0
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	if !e.removed && (e.st == stDispatching || e.st == stQuarantined) {
		return e.p.attempt(), e.p.g().gen
	}
	return 0, 0
}
