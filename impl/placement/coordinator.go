package placement

import (
	"context"
	"crypto/rand"
	"encoding/binary"
	"fmt"
	"math"
	"runtime"
	"sync"
	"sync/atomic"
	"time"
)

// Coordinator places sessions on targets of type T (for example a worker id
// and data-parallel rank). It is safe for concurrent use. Build it with New
// and stop its background work with Close.
type Coordinator[T comparable] struct {
	cfg             Config[T]
	ttl             int64
	reserveTimeout  int64
	dispatchTimeout int64
	quarantineTTL   int64
	// The clock: the shared coarse clock (coarse), the runtime's
	// (PreciseClock: mono) or a manual one. base is the coarse or runtime
	// clock's reading at New, the zero of the coordinator's time; a coarse
	// coordinator reads mono once it is closed (the ticker may be stopped).
	coarse *coarseClock
	mono   func() int64
	base   int64
	manual *ManualClock
	sub    *manualSub

	table    *table[T]
	live     atomic.Int64
	attempts atomic.Uint64 // the last attempt id issued
	catalog  catalog[T]
	leases   sync.Pool // *leaseSlot, for leases taken while a cell is busy

	// nextExpiry is at most the earliest idle or reservation deadline, so
	// the capacity path sweeps only when something may have expired. Every
	// note bumps a striped counter first, so a sweep can tell whether a
	// deadline it did not see was noted while it ran (see sweep).
	nextExpiry atomic.Int64
	sweeping   atomic.Int32 // sweeps in progress
	notes      [16]paddedCounter
	sweptEpoch atomic.Uint64
	// removalsBegun and removalsDone count the removals of live entries
	// begun and finished (see beginRemoval), so that a full table refuses
	// only at an instant when no removal it could be told of was under way.
	removalsBegun atomic.Uint64
	removalsDone  atomic.Uint64

	eventSeq  atomic.Uint64 // the last Event.Seq handed out
	closed    atomic.Bool
	done      chan struct{}
	closeOnce sync.Once
	reaper    sync.WaitGroup
	stats     counters

	// testReaperPanic, when set by tests, makes the reaper panic once.
	testReaperPanic atomic.Bool
	// testAfterUnlink, when set by tests, runs right after an entry leaves
	// the table (with the entry's lock held).
	testAfterUnlink func(key string)
	// testHoldWaiters, while set by tests, keeps woken waiters from
	// running on (as a scheduler that does not run them would).
	testHoldWaiters atomic.Bool
	// testBeforeBind, when set by tests, runs right before a commit reads
	// its target's generation (with the entry's lock held).
	testBeforeBind func()
	// testWalkEntry, when set by tests, runs before Quarantined locks each
	// entry of its walk (with no lock held).
	testWalkEntry func()
	// testAfterHandOffCheck, when set by tests, runs in a woken waiter
	// right after it found no reservation handed to it (no lock held).
	testAfterHandOffCheck func()
	// testBumpStored, when set by tests, runs in BumpGeneration right
	// after the new generation is stored, before the bump is over (no
	// lock held).
	testBumpStored func()
	// testBeforeFree, when set by tests, runs in a live entry's removal
	// once the removal can be seen (its binding dead, its event reported)
	// and before its slot is freed (with the entry's lock held).
	testBeforeFree func(key string)
	// testRemovalWait, when set by tests, runs when a full table's
	// capacity path waits for removals under way (no lock held).
	testRemovalWait func()
}

// New returns a coordinator for cfg (a zero Config gives the defaults, so
// New(Config[Worker]{}) is a working coordinator of Worker targets). With a
// runtime clock (cfg.Clock nil) it starts a reaper goroutine with cadence min(IdleTTL, ReserveTimeout,
// DispatchTimeout, QuarantineTTL, 30s), and, unless cfg.ClockResolution is
// PreciseClock, attaches to the process's coarse clock (starting its shared
// ticker if no other coordinator runs it; see the package's Time section);
// with a *ManualClock it starts none and reclaims on every Advance.
func New[T comparable](cfg Config[T]) (*Coordinator[T], error) {
	return newCoordinator[T](cfg, processClock)
}

// newCoordinator is New with the coarse clock coarse (tests pass their
// own, with a tick source they drive).
func newCoordinator[T comparable](cfg Config[T], coarse *coarseClock) (*Coordinator[T], error) {
	v, err := cfg.validate()
	if err != nil {
		return nil, err
	}
	c := &Coordinator[T]{
		cfg:             v,
		ttl:             int64(v.IdleTTL),
		reserveTimeout:  int64(v.ReserveTimeout),
		dispatchTimeout: int64(v.DispatchTimeout),
		quarantineTTL:   int64(v.QuarantineTTL),
		done:            make(chan struct{}),
		table:           newTable[T](v.MaxEntries),
	}
	var stripes atomic.Uint64
	c.leases.New = func() any { return &leaseSlot{stripe: stripes.Add(1) % uint64(len(c.stats.sharedHits))} }
	c.catalog.owner = c
	c.nextExpiry.Store(math.MaxInt64)
	first := v.FirstAttempt
	if first == 0 {
		first = randomFirstAttempt()
	}
	c.attempts.Store(first - 1)
	if v.Clock != nil {
		c.manual = v.Clock
		sub, err := v.Clock.attach(max(c.ttl, c.reserveTimeout, c.dispatchTimeout, c.quarantineTTL), c.sweep)
		if err != nil {
			return nil, err
		}
		c.sub = sub
		return c, nil
	}
	c.mono = coarse.mono
	if v.ClockResolution == PreciseClock {
		c.base = c.mono()
	} else {
		coarse.attach(v.ClockResolution)
		c.coarse, c.base = coarse, coarse.now()
	}
	cadence := min(v.IdleTTL, v.ReserveTimeout, v.DispatchTimeout, v.QuarantineTTL, 30*time.Second)
	c.reaper.Add(1)
	go c.runReaper(cadence)
	return c, nil
}

// Close stops the reaper (or detaches from the manual clock), detaches from
// the coarse clock (the last coordinator to do so stops its ticker) and
// wakes every waiter with ErrClosed. Close is idempotent. A closed
// coordinator's clock reads the runtime clock, on the same timeline.
//
// After Close nothing is reserved, dispatched, committed, resolved or
// invalidated any more: Acquire, TryAcquire, BeginDispatch, CommitAccepted,
// Complete(Accepted), a late Complete(DefinitelyNotAccepted) (one that
// would settle a quarantine), Resolve and InvalidateKey return ErrClosed
// and change nothing. What a request holds can still be ended, so its
// deferred cleanup runs clean: Reservation.Cancel gives a reservation up;
// Dispatch.Drop and Complete(Ambiguous) quarantine a dispatch in flight
// (including one whose Complete was refused with ErrClosed);
// Complete(DefinitelyNotAccepted) of a dispatch in flight returns its
// reservation (to cancel); Lease.Release, Abandon, Invalidate and Close
// end a lease as before (the last two may still remove its binding); and
// Acquisition.Done and Reservation.Done end whatever is left. Query, Stats
// and Generation still read, and BumpGeneration still records a
// generation. Nothing is swept any more, though Query still expires what it
// finds past its deadline. A call that overlaps Close may take effect
// before it.
func (c *Coordinator[T]) Close() error {
	c.closeOnce.Do(func() {
		c.closed.Store(true)
		close(c.done)
		c.reaper.Wait()
		if c.sub != nil {
			c.manual.detach(c.sub)
		}
		if c.coarse != nil {
			c.coarse.detach(c.cfg.ClockResolution)
		}
	})
	return nil
}

// randomFirstAttempt draws a first attempt id uniformly from
// [1, MaxFirstAttempt] with crypto/rand.
func randomFirstAttempt() uint64 {
	var b [8]byte
	_, _ = rand.Read(b[:]) // never fails (crypto/rand.Read's contract)
	if mutant("AttemptsFromOne") {
		return 1
	}
	return binary.LittleEndian.Uint64(b[:])>>1 + 1
}

// Now returns the time on the coordinator's clock, the timeline of
// Info.IdleDeadline: a manual clock's time, or the time elapsed since New
// on the coarse clock (the runtime's monotonic time at its last tick; see
// the package's Time section) or, with PreciseClock, on the runtime's
// monotonic clock.
func (c *Coordinator[T]) Now() time.Duration { return time.Duration(c.now()) }

// closedNow reports whether Close has been called: the calls that would
// reserve, dispatch, commit, resolve or invalidate then refuse.
func (c *Coordinator[T]) closedNow() bool {
	return c.closed.Load() && !mutant("ActsAfterClose")
}

// now reads the coordinator's clock: the coarse clock (one atomic load,
// and the closed flag's), the manual clock, or the runtime's monotonic
// clock, since New. After Close a coarse coordinator reads the runtime
// clock instead, which never reads earlier than the coarse one: the
// readings stay monotonic.
func (c *Coordinator[T]) now() int64 {
	if c.coarse != nil && !c.closed.Load() {
		return c.coarse.now() - c.base
	}
	if c.manual != nil {
		return c.manual.now()
	}
	return c.mono() - c.base
}

func (c *Coordinator[T]) checkKey(key string) error {
	if len(key) == 0 {
		return ErrKeyEmpty
	}
	if len(key) > c.cfg.MaxKeyBytes {
		return &KeyTooLongError{Len: len(key), MaxKeyBytes: c.cfg.MaxKeyBytes}
	}
	return nil
}

// Acquisition is Acquire's answer: a hit with a lease on the session's
// binding, or a reservation: the caller initializes the session.
type Acquisition[T comparable] struct {
	// Lease is the lease on the binding, when Reservation is nil.
	Lease Lease[T]
	// Reservation is non-nil when the caller must dispatch the session.
	Reservation *Reservation[T]
}

// Hit reports whether the session was bound and a lease was taken.
func (a Acquisition[T]) Hit() bool { return a.Reservation == nil && a.Lease.b != nil }

// Done ends whatever the request still holds from this acquisition, on
// every path, so it is the one call to defer right after Acquire: a hit's
// lease is released (unless the caller ended it already); for a
// reservation it does what Reservation.Done does (cancel the reservation,
// drop a dispatch in flight, release the lease the commit returned). A
// panic between two steps leaves nothing held either. Done is idempotent,
// reports nothing (a zero Acquisition, as Acquire returns with an error,
// holds nothing), works after the coordinator's Close, and on a hit
// allocates nothing.
func (a Acquisition[T]) Done() {
	if a.Reservation != nil {
		a.Reservation.Done()
		return
	}
	if a.Lease.b != nil {
		_ = a.Lease.Release() // ErrUsed: the caller ended it
	}
}

// Acquire returns a lease on key's binding, or a reservation when the key is
// unbound (or its binding expired or its target's generation moved on).
// While another request initializes the key, Acquire waits, until that ends
// or ctx is done. A quarantined key returns an *AmbiguousError; a full table
// a *CapacityError.
//
// A hit on a live binding takes no lock and allocates nothing.
func (c *Coordinator[T]) Acquire(ctx context.Context, key string) (Acquisition[T], error) {
	if err := c.checkKey(key); err != nil {
		return Acquisition[T]{}, err
	}
	l, e, h := c.tryHit(key)
	if l.b != nil {
		return Acquisition[T]{Lease: l}, nil
	}
	return c.acquireSlow(ctx, key, true, e, h)
}

// TryAcquire is Acquire without waiting: it returns ErrWouldWait while
// another request initializes the key. (On a full table it may still wait
// a moment for a removal under way to free its slot: see the package's
// Concurrency section.)
func (c *Coordinator[T]) TryAcquire(key string) (Acquisition[T], error) {
	if err := c.checkKey(key); err != nil {
		return Acquisition[T]{}, err
	}
	l, e, h := c.tryHit(key)
	if l.b != nil {
		return Acquisition[T]{Lease: l}, nil
	}
	return c.acquireSlow(context.Background(), key, false, e, h)
}

// tryHit is the hot path: a live, current binding gains a lease with one
// compare-and-swap. On a miss it returns what its lookup found, for the
// slow path to start from without looking again: the key's hash h (0 if
// it did not look) and its entry e (nil if none was linked).
func (c *Coordinator[T]) tryHit(key string) (l Lease[T], e *entry[T], h uint32) {
	if c.closed.Load() {
		return Lease[T]{}, nil, 0
	}
	h = c.table.hash(key)
	e = c.table.loadHashed(h, key)
	if e == nil {
		return Lease[T]{}, nil, h
	}
	b := e.bound.Load()
	if b == nil || b.stale() && !mutant("IgnoresGenerationFence") {
		return Lease[T]{}, e, h
	}
	for {
		w := b.word.Load()
		if w&deadBit != 0 || leases(w) == MaxLeases || (leases(w) == 0 && b.deadline.Load() <= c.now()) {
			return Lease[T]{}, e, h
		}
		if mutant("ExpiryWithoutKill") {
			widenWindow() // between the clock reading and the swap
		}
		if l, ok := c.take(b, w); ok {
			return l, nil, 0
		}
	}
}

func (c *Coordinator[T]) newEntry(h uint32, key string) *entry[T] {
	e := newEntry[T](key)
	e.hash = h
	return e
}

func (c *Coordinator[T]) entryFor(key string) *entry[T] {
	return c.table.loadOrStore(key, func(h uint32) *entry[T] { return c.newEntry(h, key) })
}

// acquireSlow is Acquire's slow path. found and h are what tryHit's lookup
// found: the key's entry (nil: none was linked) and hash (0: it did not
// look); the first round starts from them, so a new session hashes and
// walks its key's chain once before it links its entry, not twice.
func (c *Coordinator[T]) acquireSlow(ctx context.Context, key string, wait bool, found *entry[T], h uint32) (Acquisition[T], error) {
	var (
		w      *waiting[T] // this call's place in its key's queue, once it waits
		we     *entry[T]   // the entry w is queued on
		swept  int         // capacity sweeps this call made
		waited bool
	)
	for {
		if c.closed.Load() {
			return Acquisition[T]{}, c.leaveClosed(we, w)
		}
		if w != nil {
			// Handed the key while waiting: that reservation is this
			// call's answer, even if it timed out (or was handed on)
			// before this goroutine ran: the request reserved the key then,
			// as the spec's head-of-queue Acquire, and its holder learns
			// the loss from BeginDispatch, never by acquiring twice.
			we.mu.Lock()
			r := w.resv
			we.mu.Unlock()
			if r != nil {
				return Acquisition[T]{Reservation: r}, nil
			}
			if c.testAfterHandOffCheck != nil {
				c.testAfterHandOffCheck()
			}
		}
		var e *entry[T]
		switch {
		case found != nil: // tryHit's entry: lock it (removed: look again)
			e, found = found, nil
		case h != 0: // tryHit found none: link one, looking only under the lock
			e = c.table.storeHashed(h, key, func(h uint32) *entry[T] { return c.newEntry(h, key) })
		default:
			e = c.entryFor(key)
		}
		h = 0 // later rounds look afresh
		e.mu.Lock()
		if e.removed {
			e.mu.Unlock()
			continue
		}
		if w != nil && we != e && !mutant("ForgetsLateHandOff") {
			// The queue's entry left the table since the check above. It
			// may have handed this call the key first (and then let it
			// time out): that reservation is the answer. A removed entry
			// hands nothing on, so once that is checked, queue afresh.
			if e.st == stAbsent {
				c.removeLocked(e, Event[T]{}, nil) // linked by this call for nothing
			}
			e.mu.Unlock()
			we.mu.Lock()
			r := w.resv
			we.mu.Unlock()
			if r != nil {
				return Acquisition[T]{Reservation: r}, nil
			}
			w, we = nil, nil
			continue
		}
		if w != nil && we != e {
			w, we = nil, nil // the bug: a reservation handed meanwhile is forgotten
		}
		if c.closed.Load() {
			// Close came after the entry was found or created: an absent
			// entry this call may have linked must not stay in the table.
			if e.st == stAbsent {
				c.removeLocked(e, Event[T]{}, nil)
			}
			e.mu.Unlock()
			return Acquisition[T]{}, c.leaveClosed(we, w)
		}
		now := c.now()
		c.timeoutsLocked(e, now)
		if e.removed {
			// The reservation timed out and the entry left the table:
			// start again on a fresh entry (never reserve a detached one).
			e.mu.Unlock()
			continue
		}
		if w != nil && w.resv != nil { // handed the key by this call's own access
			e.mu.Unlock()
			return Acquisition[T]{Reservation: w.resv}, nil
		}
		switch e.st {
		case stBound:
			b := e.bound.Load()
			if !b.stale() || mutant("IgnoresGenerationFence") {
				word := b.word.Load()
				if word&deadBit == 0 && !b.expiredAt(word, now) {
					if leases(word) == MaxLeases {
						e.leaveLocked(w)
						e.mu.Unlock()
						return Acquisition[T]{}, ErrTooManyLeases
					}
					l, ok := c.take(b, word)
					if !ok {
						e.mu.Unlock()
						continue // a lease changed meanwhile: look again
					}
					e.leaveLocked(w)
					e.mu.Unlock()
					return Acquisition[T]{Lease: l}, nil
				}
				if word&deadBit == 0 && !b.killIfExpired(now) {
					e.mu.Unlock() // a lease came or went: look again
					continue
				}
				c.stats.expirations.Add(1)
				c.emitLocked(Event[T]{Kind: EventExpired, Key: key, Attempt: b.version, Generation: b.g.gen}, &b.g.target)
			} else {
				b.kill()
				c.emitLocked(removedEvent(b), &b.g.target)
			}
			// Expired or stale: the key is free. Re-initialize it in place,
			// reusing the slot, for the longest waiter if one waits ahead.
			e.bound.Store(nil)
			if r := c.reserveForLocked(e, w, now); r != nil {
				e.mu.Unlock()
				return Acquisition[T]{Reservation: r}, nil
			}
			if w == nil && !wait {
				e.mu.Unlock()
				return Acquisition[T]{}, ErrWouldWait
			}
		case stReserved, stDispatching:
			if !wait {
				e.mu.Unlock()
				return Acquisition[T]{}, ErrWouldWait
			}
		case stQuarantined: // a live quarantine (timeoutsLocked ended an over one)
			if mutant("ReplaysQuarantine") {
				r := c.reserveLocked(e, now)
				e.mu.Unlock()
				return Acquisition[T]{Reservation: r}, nil
			}
			e.leaveLocked(w)
			err := &AmbiguousError[T]{Key: key, Attempt: e.p.attempt(), Generation: e.p.g().gen, Target: e.p.g().target,
				Expires: time.Duration(e.p.deadline), DispatchedAt: time.Duration(e.p.dispatched())}
			if mutant("AmbiguousWithoutTarget") {
				var zero T
				err.Target = zero
			}
			e.mu.Unlock()
			return Acquisition[T]{}, err
		default: // absent: a fresh entry
			done, begun := c.removalsDone.Load(), c.removalsBegun.Load()
			if !c.tryTakeSlot() {
				// The refusal happens now: judge it at a reading taken
				// after the table was found full (the clock may have moved
				// since this round's reading, or during an earlier sweep).
				full := c.now()
				if mutant("SweepsOnceWhenFull") {
					full = now
				}
				if swept < maxCapacitySweeps && (swept == 0 || !mutant("SweepsOnceWhenFull")) && c.sweepMayHelp(full) {
					// Reclaim what is over first, without holding this
					// entry's lock (the sweep takes it). The fresh entry
					// leaves the table meanwhile, so nothing (a Close, say)
					// can strand it there; the next round links a new one.
					c.removeLocked(e, Event[T]{}, nil)
					e.mu.Unlock()
					c.sweep(full)
					swept++
					continue
				}
				if latest := c.removalsBegun.Load(); (done != begun || latest != begun) && !mutant("RefusesDuringRemoval") {
					// A removal was under way when the table was found
					// full: its binding may already read as gone (to a
					// lease's Close, Query, Bindings, the Observer) with
					// its slot not yet freed. Wait for it (the fresh entry
					// leaves the table meanwhile, as for a sweep) and look
					// again.
					c.removeLocked(e, Event[T]{}, nil)
					e.mu.Unlock()
					c.awaitRemovals(latest)
					continue
				}
				c.stats.capacity.Add(1)
				c.removeLocked(e, Event[T]{Kind: EventCapacityRejected, Key: key}, nil)
				e.mu.Unlock()
				return Acquisition[T]{}, &CapacityError{MaxEntries: c.cfg.MaxEntries}
			}
			// The slot may have been freed by a timeout that a clock move
			// (after this iteration's reading) let someone apply: the
			// reservation happens now, so its deadline counts from a
			// reading taken after the slot was ours.
			now = c.now()
			r := c.reserveLocked(e, now)
			e.mu.Unlock()
			return Acquisition[T]{Reservation: r}, nil
		}
		// Someone initializes the key (or was just handed it): wait in
		// line until the key changes or is handed to this call.
		if w == nil {
			w, we = &waiting[T]{}, e
			e.joinLocked(w)
		}
		w.ch = make(chan struct{})
		ch := w.ch
		e.mu.Unlock()
		if !waited {
			waited = true
			c.stats.waits.Add(1)
		}
		select {
		case <-ch:
			for c.testHoldWaiters.Load() {
				time.Sleep(time.Millisecond)
			}
		case <-ctx.Done():
			e.mu.Lock()
			if w.resv != nil { // handed the key as the context ended: take it
				e.mu.Unlock()
				return Acquisition[T]{Reservation: w.resv}, nil
			}
			e.leaveLocked(w)
			e.mu.Unlock()
			return Acquisition[T]{}, &cancelledError{cause: ctx.Err()}
		case <-c.done:
			return Acquisition[T]{}, c.leaveClosed(we, w)
		}
	}
}

// leaveClosed takes a waiter out of its queue after Close, giving back a
// reservation it was handed meanwhile, and returns ErrClosed.
func (c *Coordinator[T]) leaveClosed(e *entry[T], w *waiting[T]) error {
	if w == nil {
		return ErrClosed
	}
	e.mu.Lock()
	e.leaveLocked(w)
	if r := w.resv; r != nil && !e.removed && e.st == stReserved && e.p.resv == r {
		c.removeLocked(e, Event[T]{Kind: EventRemoved, Key: e.key()}, nil)
	}
	e.mu.Unlock()
	return ErrClosed
}

// reserveForLocked re-initializes the free entry e at now. If a request
// waits ahead of w (w may be nil: a newcomer), the longest waiter is handed
// the reservation and nil is returned: the caller waits its turn. Otherwise
// the caller leaves the queue and gets the reservation.
func (c *Coordinator[T]) reserveForLocked(e *entry[T], w *waiting[T], now int64) *Reservation[T] {
	if h := e.headLocked(); h != nil && h != w && !mutant("NoHandOff") {
		c.handOffLocked(e, now)
		return nil
	}
	e.leaveLocked(w)
	return c.reserveLocked(e, now)
}

// handOffLocked reserves the free entry e (which keeps its slot) for its
// longest waiter and wakes it: the spec's head-of-queue Acquire, taken at
// once so that no newcomer can come between.
func (c *Coordinator[T]) handOffLocked(e *entry[T], now int64) {
	h := e.headLocked()
	e.leaveLocked(h)
	h.resv = c.reserveLocked(e, now)
	if !mutant("LosesWakeup") {
		h.wake()
	}
}

// reserveLocked makes the caller the key's initializer.
func (c *Coordinator[T]) reserveLocked(e *entry[T], now int64) *Reservation[T] {
	r := &Reservation[T]{c: c, e: e}
	d := now + c.reserveTimeout
	p := e.pendingLocked(&r.spare)
	e.st, p.resv, p.deadline, p.resDeadline = stReserved, r, d, d
	c.noteDeadline(d)
	c.stats.reservations.Add(1)
	c.emitLocked(Event[T]{Kind: EventReserved, Key: e.key()}, nil)
	return r
}

// removeLocked reports ev (if it has a Kind) with its target, then makes
// the entry absent: it leaves the table and frees its slot. The event goes
// first: once the entry is unlinked, a fresh entry for the same key can
// report events of its own, and they must come after this one. If requests
// wait on the key (and the coordinator is open), the longest waiter is
// handed the key instead: the entry stays, reserved for it, with its slot.
func (c *Coordinator[T]) removeLocked(e *entry[T], ev Event[T], target *T) {
	if e.removed {
		return
	}
	if e.st != stAbsent {
		c.beginRemoval()
		defer c.endRemoval()
	}
	c.removeBegunLocked(e, ev, target)
}

// removeBegunLocked is removeLocked for a caller that has begun the
// removal itself (beginRemoval before the change that makes the binding
// read as gone, endRemoval after this returns): it announces none of its
// own, which would begin after and end before the caller's.
func (c *Coordinator[T]) removeBegunLocked(e *entry[T], ev Event[T], target *T) {
	if e.removed {
		return
	}
	if ev.Kind != 0 {
		c.emitLocked(ev, target)
	}
	if b := e.bound.Load(); b != nil {
		b.kill()
		e.bound.Store(nil)
	}
	if c.testBeforeFree != nil {
		c.testBeforeFree(e.key())
	}
	wasLive := e.st != stAbsent
	if wasLive && e.hasWaitersLocked() && !c.closed.Load() && !mutant("NoHandOff") {
		c.handOffLocked(e, c.now())
		return
	}
	e.st, e.removed = stAbsent, true
	if e.p != nil {
		e.p.resv = nil
		e.dropPendingLocked()
	}
	// Free the slot before unlinking the entry: a fresh entry for the same
	// key must never see the departed one still counted. (Anyone who finds
	// the departed entry in the map locks it, sees removed, and retries.)
	if wasLive {
		c.live.Add(-1)
	}
	c.table.unlink(e)
	if c.testAfterUnlink != nil {
		c.testAfterUnlink(e.key())
	}
	e.notifyLocked()
}

// timeoutsLocked applies the deadlines of an unsettled key lazily on
// access: ReservationTimeout (reserved too long: absent, or handed to the
// next waiter), DispatchTimeout (dispatching too long: quarantined),
// QuarantineExpire (quarantined for QuarantineTTL: absent) and DropStale
// for a quarantine whose target's generation moved on, and reports the
// change.
func (c *Coordinator[T]) timeoutsLocked(e *entry[T], now int64) {
	switch {
	case e.st == stReserved && e.p.deadline <= now:
		c.removeLocked(e, Event[T]{Kind: EventRemoved, Key: e.key()}, nil)
	case e.st == stDispatching && e.p.deadline <= now:
		// QuarantineTTL counts from the dispatch's deadline, however late
		// this access applies the timeout.
		c.quarantineLocked(e, e.p.deadline)
		c.emitLocked(Event[T]{Kind: EventQuarantined, Key: e.key(), Attempt: e.p.attempt(), Generation: e.p.g().gen, Outcome: Ambiguous},
			quarantinedTarget(e))
	}
	if e.st == stQuarantined && !e.removed {
		switch {
		case e.p.g().slot.gen.Load() != e.p.g().gen && !mutant("QuarantineIgnoresGeneration"):
			c.dropQuarantineLocked(e)
		case e.p.deadline <= now && !mutant("QuarantineNeverExpires"):
			c.stats.quarantineExpirations.Add(1)
			c.removeLocked(e, Event[T]{Kind: EventQuarantineExpired, Key: e.key(), Attempt: e.p.attempt(), Generation: e.p.g().gen}, quarantinedTarget(e))
		}
	}
}

// dropQuarantineLocked ends e's quarantine because its target's generation
// moved on (the spec's DropStale of a quarantine).
func (c *Coordinator[T]) dropQuarantineLocked(e *entry[T]) {
	c.stats.quarantinesDropped.Add(1)
	c.removeLocked(e, Event[T]{Kind: EventQuarantineDropped, Key: e.key(), Attempt: e.p.attempt(), Generation: e.p.g().gen}, quarantinedTarget(e))
}

// commitGen is the one reading of the target's generation that a commit of
// e's attempt happens at (bindLocked decides staleness from it).
func (c *Coordinator[T]) commitGen(e *entry[T]) uint64 {
	if c.testBeforeBind != nil {
		c.testBeforeBind()
	}
	return e.p.g().slot.gen.Load()
}

// quarantinedTarget is the target a Quarantined event of e reports.
func quarantinedTarget[T comparable](e *entry[T]) *T {
	if mutant("AmbiguousWithoutTarget") {
		return nil
	}
	return &e.p.g().target
}

// quarantineLocked quarantines e's attempt, which became ambiguous at
// from, for QuarantineTTL.
func (c *Coordinator[T]) quarantineLocked(e *entry[T], from int64) {
	e.st, e.p.resv = stQuarantined, nil // keeps attempt, target, generation
	e.p.deadline = from + c.quarantineTTL
	c.noteDeadline(e.p.deadline)
	c.stats.quarantines.Add(1)
	e.notifyLocked()
}

// tryTakeSlot counts one more live entry if the table has room. It never
// counts past the bound, not even for an instant: a refused Acquire must
// see a table that really was full.
func (c *Coordinator[T]) tryTakeSlot() bool {
	limit := int64(c.cfg.MaxEntries)
	if mutant("CapacityOffByOne") {
		limit++
	}
	for {
		n := c.live.Load()
		if n >= limit {
			return false
		}
		if c.live.CompareAndSwap(n, n+1) {
			return true
		}
	}
}

// sweepMayHelp reports whether a sweep could free a slot: some deadline may
// have passed, or a generation changed, since the last sweep, or a bump is
// under way (its new generation may be stored already, its epoch not yet
// moved: a check that can see the generation must sweep). An attacker
// filling the table with fresh keys thus cannot make every refusal scan it.
func (c *Coordinator[T]) sweepMayHelp(now int64) bool {
	return now >= c.nextExpiry.Load() || c.catalog.bumping.Load() != 0 ||
		c.catalog.epoch.Load() != c.sweptEpoch.Load()
}

// maxCapacitySweeps bounds the sweeps one Acquire's capacity path makes. A
// full table sweeps before it refuses, and again whenever something became
// due meanwhile (sweepMayHelp at a fresh reading), so a refusal is judged
// with everything over reclaimed; the bound only stops a clock that keeps
// moving from making one call sweep without end.
const maxCapacitySweeps = 8

// beginRemoval announces a removal of a live entry, before anything of it
// can be seen (its binding's death, which a lease's Close, Query, Current
// and Bindings read without the key's lock, or its event); endRemoval ends
// it once its slot is free (or the key handed to a waiter). A capacity
// refusal happens only at an instant with none under way (see
// acquireSlow): the model frees the slot at the instant the removal can
// be seen, the table a moment later.
func (c *Coordinator[T]) beginRemoval() { c.removalsBegun.Add(1) }

func (c *Coordinator[T]) endRemoval() { c.removalsDone.Add(1) }

// awaitRemovals waits, holding no lock, until as many removals have
// finished as had begun when begun was read. Removals under way hold only
// their key's lock and never block (nor may the Observer they call), so
// the wait is short; it yields first, then sleeps briefly.
func (c *Coordinator[T]) awaitRemovals(begun uint64) {
	if c.testRemovalWait != nil {
		c.testRemovalWait()
	}
	for i := 0; c.removalsDone.Load() < begun; i++ {
		if i < 64 {
			runtime.Gosched()
		} else {
			time.Sleep(20 * time.Microsecond)
		}
	}
}

// paddedCounter is a counter on its own cache line.
type paddedCounter struct {
	n atomic.Uint64
	_ [56]byte
}

// noteDeadline records that an entry may expire at d. Callers note after
// the state change that makes the entry expirable (idle, or reserved). The
// note is counted only while a sweep runs: a note that sees no sweep
// announces a change made before any sweep started, which that sweep's
// scan will see. So the hot path only reads a flag.
func (c *Coordinator[T]) noteDeadline(d int64) {
	if c.sweeping.Load() != 0 {
		c.notes[(uint64(d)>>6)&15].n.Add(1)
	}
	c.lowerHint(d)
}

// lowerHint lowers nextExpiry to d.
func (c *Coordinator[T]) lowerHint(d int64) {
	for {
		cur := c.nextExpiry.Load()
		if d >= cur || c.nextExpiry.CompareAndSwap(cur, d) {
			return
		}
	}
}

func (c *Coordinator[T]) noteCount() uint64 {
	var n uint64
	for i := range c.notes {
		n += c.notes[i].n.Load()
	}
	return n
}

// sweep reclaims the whole table at time now: Expire (idle past the
// deadline), DropStale (generation moved on, for bindings and quarantines),
// QuarantineExpire, ReservationTimeout and DispatchTimeout. The reaper, a
// manual clock's Advance, a full table's capacity path and Stats call it.
// It locks one entry at a time; visit, if set, sees each entry after its
// reclaim, still under its lock (see reclaimEntry).
func (c *Coordinator[T]) sweep(now int64) { c.sweepVisit(now, nil) }

func (c *Coordinator[T]) sweepVisit(now int64, visit func(e *entry[T], w0 uint64)) {
	epoch := c.catalog.epoch.Load()
	// nextExpiry keeps its old, conservative value while the scan runs: a
	// capacity check meanwhile must not conclude that nothing expired just
	// because this sweep has not reached an entry yet.
	c.sweeping.Add(1)
	defer c.sweeping.Add(-1)
	notes := c.noteCount()
	earliest := int64(math.MaxInt64)
	c.table.each(func(e *entry[T]) bool {
		earliest = min(earliest, c.reclaimEntry(e, now, visit))
		return true
	})
	c.publishHint(earliest, notes)
	c.sweptEpoch.Store(epoch)
}

// reclaimEntry applies every deadline of e that has passed at now (and the
// generation fence), then calls visit with e and its binding's word as it
// was before (deadBit if it had none), all under e's lock (released on
// every path, a panic's too). It returns e's earliest deadline still ahead
// (math.MaxInt64 if none).
func (c *Coordinator[T]) reclaimEntry(e *entry[T], now int64, visit func(e *entry[T], w0 uint64)) int64 {
	e.mu.Lock()
	defer e.mu.Unlock()
	earliest := int64(math.MaxInt64)
	w0 := uint64(deadBit)
	if b := e.bound.Load(); b != nil && visit != nil {
		w0 = b.word.Load()
	}
	c.timeoutsLocked(e, now)
	switch e.st {
	case stReserved, stDispatching, stQuarantined:
		earliest = e.p.deadline
	case stBound:
		b := e.bound.Load()
		switch {
		case b.stale():
			c.removeBindingLocked(e, b)
		case c.expireLocked(e, b, now):
		default:
			if w := b.word.Load(); leases(w) == 0 {
				earliest = b.deadline.Load()
			}
		}
	}
	if visit != nil {
		visit(e, w0)
	}
	return earliest
}

// expireLocked expires e's binding b if it is idle past its deadline at
// now: it kills b (if no lease came or went meanwhile) and removes e, as
// one removal (see beginRemoval). It reports whether it did.
func (c *Coordinator[T]) expireLocked(e *entry[T], b *binding[T], now int64) bool {
	if w := b.word.Load(); w&deadBit != 0 || !b.expiredAt(w, now) {
		return false
	}
	c.beginRemoval()
	defer c.endRemoval()
	if !b.killIfExpired(now) {
		return false
	}
	c.expiredLocked(e, b)
	return true
}

// expiredLocked removes e, whose binding b the caller has just killed as
// expired (killIfExpired), and reports it.
func (c *Coordinator[T]) expiredLocked(e *entry[T], b *binding[T]) {
	c.stats.expirations.Add(1)
	c.removeLocked(e, Event[T]{Kind: EventExpired, Key: e.key(), Attempt: b.version, Generation: b.g.gen}, &b.g.target)
}

// removedEvent reports that binding b left the table (not by expiry).
func removedEvent[T comparable](b *binding[T]) Event[T] {
	return Event[T]{Kind: EventRemoved, Key: b.e.key(), Attempt: b.version, Generation: b.g.gen}
}

// removeBindingLocked removes e, whose binding b ends (not by expiry), and
// reports it.
func (c *Coordinator[T]) removeBindingLocked(e *entry[T], b *binding[T]) {
	c.removeLocked(e, removedEvent(b), &b.g.target)
}

// removeBindingBegunLocked is removeBindingLocked within a removal the
// caller has begun (see removeBegunLocked).
func (c *Coordinator[T]) removeBindingBegunLocked(e *entry[T], b *binding[T]) {
	c.removeBegunLocked(e, removedEvent(b), &b.g.target)
}

// publishHint sets nextExpiry to the earliest deadline a sweep saw. It may
// raise the hint only if no deadline was noted since the sweep started
// (such a note may concern an entry the scan passed before it became
// idle), and it undoes the raise if a note arrives while it raises; a note
// after that lowers the raised hint itself.
func (c *Coordinator[T]) publishHint(earliest int64, notesAtStart uint64) {
	if c.noteCount() != notesAtStart {
		c.lowerHint(earliest)
		return
	}
	cur := c.nextExpiry.Load()
	if earliest <= cur || !c.nextExpiry.CompareAndSwap(cur, earliest) {
		c.lowerHint(earliest)
		return
	}
	if c.noteCount() != notesAtStart {
		c.lowerHint(cur)
	}
}

// emitLocked reports ev to the Observer, with *target (if target is not
// nil) as its Target. Callers hold the lock of ev.Key's entry, so one key's
// events reach the Observer in the order its changes happened; Seq orders
// them across keys (see Event). A panic in the Observer is recovered and
// counted (see Config.Observer): the caller's change goes on.
func (c *Coordinator[T]) emitLocked(ev Event[T], target *T) {
	if c.cfg.Observer == nil {
		return
	}
	if target != nil {
		ev.Target, ev.HasTarget = *target, true
	}
	ev.Seq = c.eventSeq.Add(1)
	c.observe(ev)
}

// observe calls the Observer, recovering (and counting) a panic in it.
func (c *Coordinator[T]) observe(ev Event[T]) {
	if !mutant("ObserverPanicEscapes") {
		defer func() {
			if recover() != nil {
				c.stats.observerPanics.Add(1)
			}
		}()
	}
	c.cfg.Observer(ev)
}

// runReaper sweeps at the cadence until Close; a sweep that panics is
// counted and the reaper restarts.
func (c *Coordinator[T]) runReaper(cadence time.Duration) {
	defer c.reaper.Done()
	for !c.reapLoop(cadence) {
		c.stats.reaperRestarts.Add(1)
	}
}

func (c *Coordinator[T]) reapLoop(cadence time.Duration) (stopped bool) {
	defer func() {
		if r := recover(); r != nil {
			stopped = false
		}
	}()
	t := time.NewTicker(cadence)
	defer t.Stop()
	for {
		select {
		case <-c.done:
			return true
		case <-t.C:
			if c.testReaperPanic.CompareAndSwap(true, false) {
				panic("placement: test-injected reaper panic")
			}
			c.sweep(c.now())
		}
	}
}

// Resolve settles a quarantined key: Accepted binds it to the quarantined
// attempt's target (with no lease and a fresh idle deadline), NotAccepted
// makes it absent. The attempt id and generation must match the
// quarantined attempt's (as an *AmbiguousError or Quarantined reports
// them), else a *FencedError is returned and nothing changes. A key that
// is not quarantined (any more) returns ErrNotQuarantined and nothing
// changes: absent, initializing or bound, or its quarantine is over (settled
// by a late result or another Resolve, past its QuarantineTTL, or its
// target's generation moved on); a resolver treats both errors as "nothing
// left to settle". After Close it returns ErrClosed and changes nothing.
//
// A binding resolved Accepted holds no lease and lives IdleTTL unless hit;
// a resolver that knows the attempt was its session's final request calls
// InvalidateKey after the Resolve.
//
// If the target's generation has moved on since the dispatch, an Accepted
// resolution still settles the quarantine, but the binding is stale at
// birth: it reads as absent and the next Acquire reserves the key again.
// Resolve then returns a *GenerationMovedError (matching ErrStaleAtBirth)
// with both generations.
func (c *Coordinator[T]) Resolve(key string, attempt, generation uint64, res Resolution) error {
	if err := c.checkKey(key); err != nil {
		return err
	}
	if res != ResolveAccepted && res != ResolveNotAccepted {
		return fmt.Errorf("placement: Resolve: invalid resolution %d: %w", res, ErrInvalidArgument)
	}
	if c.closedNow() {
		return ErrClosed
	}
	e, ok := c.table.load(key)
	if !ok {
		return ErrNotQuarantined
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	now := c.now() // read once, under the lock: the operation happens at now
	c.timeoutsLocked(e, now)
	if e.removed || e.st != stQuarantined {
		return ErrNotQuarantined
	}
	if attempt != e.p.attempt() || generation != e.p.g().gen && !mutant("ResolveIgnoresGeneration") {
		return &FencedError{Attempt: attempt, Generation: generation, CurrentAttempt: e.p.attempt(), CurrentGeneration: e.p.g().gen}
	}
	cur := c.commitGen(e)
	if cur != e.p.g().gen {
		// The target's generation moved on since timeoutsLocked looked:
		// the quarantine is over (its binding would be stale at birth), at
		// the same reading a commit would happen at.
		c.dropQuarantineLocked(e)
		return ErrNotQuarantined
	}
	c.stats.resolutions.Add(1)
	o := DefinitelyNotAccepted
	if res == ResolveAccepted {
		o = Accepted
		c.stats.resolvedAccepted.Add(1)
	}
	c.emitLocked(Event[T]{Kind: EventResolved, Key: key, Attempt: attempt, Generation: generation, Outcome: o}, &e.p.g().target)
	if res == ResolveAccepted {
		_, err := c.bindLocked(e, 0, now, cur)
		return err
	}
	c.removeLocked(e, Event[T]{}, nil)
	return nil
}

// bindLocked commits the entry's attempt as a binding holding n leases, at
// time now (the operation's one reading of the clock). The commit happens
// at its one reading of the target's generation: if that generation moved
// on since the dispatch, the binding is stale at birth. It then reads as
// absent and holds no slot, so it is never published: it is born dead (a
// lease on it ends alone, as on any superseded binding), the entry is
// removed, and a *GenerationMovedError tells the caller. A Bump after the
// reading is an ordinary Bump of a live binding.
func (c *Coordinator[T]) bindLocked(e *entry[T], n uint64, now int64, cur uint64) (*binding[T], error) {
	var b *binding[T]
	if !e.firstUsed {
		e.firstUsed, b = true, &e.first
	} else {
		b = new(binding[T])
	}
	b.e, b.g, b.version = e, e.p.g(), e.p.attempt()
	d := now + c.ttl
	b.deadline.Store(d)
	if cur != b.g.gen {
		b.word.Store(n | deadBit)
		c.stats.staleAtBirth.Add(1)
		c.removeBindingLocked(e, b)
		if mutant("StaleAtBirthSilent") {
			return b, nil
		}
		return b, &GenerationMovedError[T]{Key: e.key(), Attempt: b.version, Target: b.g.target, Generation: b.g.gen,
			CurrentGeneration: cur}
	}
	b.word.Store(n)
	if n == 0 {
		c.noteDeadline(d)
	}
	b.g.slot.counted(b)
	c.stats.binds.Add(1)
	e.bound.Store(b)
	e.st, e.p.resv = stBound, nil
	e.notifyLocked()
	e.dropPendingLocked()
	return b, nil
}

// InvalidateKey removes key's binding, if it has one, superseding its
// leases. It reports whether a live binding was removed; a binding that had
// already expired or gone stale reads as absent, so it is reclaimed (with
// its own event) and false is returned. A key in any other state is left
// alone. After Close it returns ErrClosed and changes nothing.
func (c *Coordinator[T]) InvalidateKey(key string) (bool, error) {
	if err := c.checkKey(key); err != nil {
		return false, err
	}
	if c.closedNow() {
		return false, ErrClosed
	}
	e, ok := c.table.load(key)
	if !ok {
		return false, nil
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.removed || e.st != stBound {
		return false, nil
	}
	// Every way out removes the binding: a removal under way from before
	// the swap that ends it (Lease.Close reads the word without the lock).
	c.beginRemoval()
	defer c.endRemoval()
	b := e.bound.Load()
	for {
		w := b.word.Load()
		switch {
		case b.stale():
			c.removeBindingLocked(e, b)
			return false, nil
		case leases(w) == 0 && b.deadline.Load() <= c.now():
			// Idle past its deadline: it expired, if this call wins the
			// word before a hit does (see Query).
			if c.expireLocked(e, b, c.now()) {
				return false, nil
			}
		default:
			// Live: leased, or idle before its deadline with the word
			// unchanged since that reading. Removing it is one swap that
			// a concurrent hit makes fail.
			if b.word.CompareAndSwap(w, w|deadBit) {
				b.died(w)
				c.removeBindingBegunLocked(e, b)
				return true, nil
			}
		}
	}
}

// Bindings returns how many sessions are bound to target at its current
// generation: bindings committed (or resolved Accepted) and not yet ended,
// kept as one counter per target, so it costs a lookup and an atomic load
// and suits a least-loaded placement policy on every new session. A
// binding leaves the count when it ends: released by its session's final
// request, invalidated, or reclaimed once idle past its deadline (an
// expired binding counts until something reclaims it: an access to its
// key, the reaper's next sweep, Stats). A bump starts the new generation
// at zero: the old generation's bindings are all stale.
func (c *Coordinator[T]) Bindings(target T) int {
	s, ok := c.catalog.lookup(target)
	if !ok {
		return 0
	}
	return int(s.bound.Load().n.Load())
}

// Len returns how many entries the table holds now (bindings,
// reservations, dispatches and quarantines, each holding a slot), with one
// atomic load: a layer above reads it to judge the table's pressure before
// admitting a new session (Acquire refuses a new key with a *CapacityError
// once Len reaches MaxEntries and a sweep frees nothing). An entry that is
// over but not yet reclaimed still counts (see Stats for the swept count).
func (c *Coordinator[T]) Len() int { return int(c.live.Load()) }

// Config returns the coordinator's configuration as New validated it, every
// zero field replaced by its default.
func (c *Coordinator[T]) Config() Config[T] { return c.cfg }

// Generation returns target's current generation (1 for a target never
// bumped).
func (c *Coordinator[T]) Generation(target T) uint64 {
	if s, ok := c.catalog.lookup(target); ok {
		return s.gen.Load()
	}
	return 1 // never seen: no slot is made for a read
}

// BumpGeneration records that target left or rejoined and returns its new
// generation. Every binding to an older generation is fenced at once: hits
// on it miss (and re-initialize), and the reaper removes it, leases or not.
// Every quarantine of an attempt on target ends too (EventQuarantineDropped):
// the binding it could produce would be stale at birth, and the worker that
// might have accepted it is gone. So bump only when the worker really lost
// its state (it left, restarted, or was replaced), never on a health check
// that merely flapped: a bump lets the sessions quarantined on it dispatch
// again.
func (c *Coordinator[T]) BumpGeneration(target T) uint64 { return c.catalog.bump(target) }
