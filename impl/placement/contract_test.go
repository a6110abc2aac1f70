package placement

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"
)

// The contract tests check the rules of the API that no model step can
// see: attempt ids across coordinators, what a request's Done gives back,
// what calls do after Close, and what Stats, Query and the errors report.
// The bug zoo runs them as a checker of its own (TestContract_*), so each
// must fail under the variant that breaks its rule.

// dispatchIDs dispatches n attempts on one reservation of key (each rolled
// back) and returns their ids.
func dispatchIDs(t *testing.T, c *Coordinator[target], key string, n int) []uint64 {
	t.Helper()
	r := reserve(t, c, key)
	var ids []uint64
	for i := 0; i < n; i++ {
		d, err := r.BeginDispatch(w1, c.Generation(w1))
		must(t, err)
		ids = append(ids, d.Attempt())
		_, err = d.Complete(DefinitelyNotAccepted)
		wantIs(t, err, ErrNotAccepted)
	}
	must(t, r.Cancel())
	return ids
}

// Two coordinators, and a third started after the first closed (a
// restart), issue ids that are nonzero, strictly increasing within each
// and shared by none.
func TestContract_AttemptsUniqueAcrossCoordinators(t *testing.T) {
	owner := map[uint64]string{}
	run := func(name string, c *Coordinator[target]) {
		ids := dispatchIDs(t, c, "s", 100)
		for i, id := range ids {
			if id == 0 || i > 0 && id <= ids[i-1] {
				t.Fatalf("%s: ids %d then %d", name, ids[max(i-1, 0)], id)
			}
			if o, ok := owner[id]; ok {
				t.Fatalf("attempt id %d issued by %s and %s", id, o, name)
			}
			owner[id] = name
		}
	}
	c1, _ := manual(t)
	c2, _ := manual(t)
	run("c1", c1)
	run("c2", c2)
	must(t, c1.Close())
	c3, _ := manual(t) // the restart
	run("c3 (restarted c1)", c3)
}

// FirstAttempt pins the ids: the first dispatch gets it and the count goes
// up by one per dispatch, CommitAccepted included; the largest allowed
// value works and one more is refused.
func TestContract_FirstAttemptPinsIDs(t *testing.T) {
	c, _ := manual(t, func(c *Config[target]) { c.FirstAttempt = 41 })
	if ids := dispatchIDs(t, c, "s", 2); ids[0] != 41 || ids[1] != 42 {
		t.Fatalf("ids %v, want [41 42]", ids)
	}
	l, err := reserve(t, c, "t").CommitAccepted(w1, 1)
	must(t, err)
	if l.Version() != 43 {
		t.Fatalf("CommitAccepted's version %d, want 43", l.Version())
	}
	must(t, l.Release())

	top, _ := manual(t, func(c *Config[target]) { c.FirstAttempt = MaxFirstAttempt })
	if ids := dispatchIDs(t, top, "s", 2); ids[0] != MaxFirstAttempt || ids[1] != MaxFirstAttempt+1 {
		t.Fatalf("ids %v from MaxFirstAttempt", ids)
	}
	_, err = New[target](Config[target]{MaxEntries: 1, MaxKeyBytes: 1,
		Clock: NewManualClock(0), FirstAttempt: MaxFirstAttempt + 1})
	var ce *ConfigError
	if !errors.As(err, &ce) || ce.Field != "FirstAttempt" {
		t.Fatalf("FirstAttempt past MaxFirstAttempt: %v", err)
	}
}

// A random start is never 0, leaves 2^63 ids before a wrap, and is drawn
// afresh for every coordinator.
func TestContract_RandomFirstAttempt(t *testing.T) {
	seen := map[uint64]bool{}
	for i := 0; i < 10000; i++ {
		s := randomFirstAttempt()
		if s == 0 || s > MaxFirstAttempt {
			t.Fatalf("random first attempt %d outside [1, 2^63]", s)
		}
		if seen[s] {
			t.Fatalf("random first attempt %d drawn twice in %d draws", s, i+1)
		}
		seen[s] = true
	}
}

// An *AmbiguousError[target] and every Quarantined event carry the quarantined
// attempt's target, however the key was quarantined (Complete(Ambiguous),
// Drop, a dispatch timeout found lazily or by a sweep); the events of an
// attempt or a binding carry its target, the others none.
func TestContract_QuarantineCarriesTarget(t *testing.T) {
	var rec recorder
	c, clk := manual(t, func(c *Config[target]) { c.Observer = rec.observe })
	quarantine := map[string]func(d *Dispatch[target]){
		"ambiguous": func(d *Dispatch[target]) { _, err := d.Complete(Ambiguous); wantIs(t, err, ErrAmbiguous) },
		"drop":      func(d *Dispatch[target]) { d.Drop() },
		"lazy timeout": func(*Dispatch[target]) {
			jump(clk, 5*time.Second)
		},
		"swept timeout": func(*Dispatch[target]) { must(t, clk.AdvanceBy(5*time.Second)) },
	}
	for name, q := range quarantine {
		d, err := reserve(t, c, "s").BeginDispatch(w2, 1)
		must(t, err)
		q(d)
		_, err = c.TryAcquire("s")
		var ae *AmbiguousError[target]
		if !errors.As(err, &ae) || ae.Target != w2 || ae.Attempt != d.Attempt() {
			t.Fatalf("%s: %v, want an *AmbiguousError[target] naming target %v", name, err, w2)
		}
		if !strings.Contains(err.Error(), fmt.Sprint(w2)) {
			t.Errorf("%s: the error text %q does not name the target", name, err)
		}
		must(t, c.Resolve("s", ae.Attempt, ae.Generation, ResolveNotAccepted))
	}
	rec.mu.Lock()
	defer rec.mu.Unlock()
	n := 0
	for _, ev := range rec.evs {
		switch ev.Kind {
		case EventQuarantined, EventResolved:
			n++
			if ev.Target != w2 {
				t.Errorf("%v event of attempt %d has target %v, want %v", ev.Kind, ev.Attempt, ev.Target, w2)
			}
		case EventReserved:
			if ev.HasTarget {
				t.Errorf("Reserved event with target %v", ev.Target)
			}
		}
	}
	if n != 2*len(quarantine) {
		t.Fatalf("%d Quarantined and Resolved events, want %d", n, 2*len(quarantine))
	}
}

// The events of a binding's life carry its target; a reservation's none.
func TestContract_EventsCarryTarget(t *testing.T) {
	var rec recorder
	c, clk := manual(t, func(c *Config[target]) { c.Observer = rec.observe })
	r := reserve(t, c, "s")
	d, err := r.BeginDispatch(w1, 1)
	must(t, err)
	_, err = d.Complete(DefinitelyNotAccepted) // RolledBack
	wantIs(t, err, ErrNotAccepted)
	d, err = r.BeginDispatch(w2, 1)
	must(t, err)
	l, err := d.Complete(Accepted) // Committed
	must(t, err)
	must(t, l.Release())
	must(t, clk.AdvanceBy(10*time.Second)) // Expired
	must(t, reserve(t, c, "s").Cancel())   // Reserved, Removed (of a reservation)
	must(t, bind(t, c, "s", w1).Invalidate())
	wantKinds(t, &rec, EventReserved, EventRolledBack, EventCommitted, EventExpired, EventReserved, EventRemoved,
		EventReserved, EventCommitted, EventRemoved)
	want := []any{nil, w1, w2, w2, nil, nil, nil, w1, w1}
	for i, ev := range rec.evs {
		if got := any(nil); ev.HasTarget {
			got = ev.Target
			if got != want[i] {
				t.Errorf("event %d (%v) has target %v, want %v", i, ev.Kind, got, want[i])
			}
		} else if want[i] != nil || ev.Target != (target{}) {
			t.Errorf("event %d (%v) has no target (%v), want %v", i, ev.Kind, ev.Target, want[i])
		}
	}
	outcomes := []Outcome{0, DefinitelyNotAccepted, Accepted, 0, 0, 0, 0, Accepted, 0}
	for i, ev := range rec.evs {
		if ev.Outcome != outcomes[i] {
			t.Errorf("event %d (%v) has outcome %v, want %v", i, ev.Kind, ev.Outcome, outcomes[i])
		}
	}
}

// wantStaleAtBirth fails the test unless err reports that attempt's
// binding to w1 stale at birth (generation 1, now 2), and the key reads as
// absent, holds no slot and can be reserved again.
func wantStaleAtBirth(t *testing.T, c *Coordinator[target], err error, attempt uint64, what string) {
	t.Helper()
	var gm *GenerationMovedError[target]
	if !errors.Is(err, ErrStaleAtBirth) || !errors.As(err, &gm) {
		t.Fatalf("%s: %v, want a *GenerationMovedError[target] matching ErrStaleAtBirth", what, err)
	}
	if gm.Key != "s" || gm.Attempt != attempt || gm.Target != w1 || gm.Generation != 1 || gm.CurrentGeneration != 2 {
		t.Fatalf("%s: %+v, want key s, attempt %d, target %v, generations 1 and 2", what, gm, attempt, w1)
	}
	if i := state(t, c, "s"); i.State != StateAbsent || c.Stats().Live != 0 {
		t.Fatalf("%s: the key reads %v with %d live entries", what, i.State, c.Stats().Live)
	}
	must(t, reserve(t, c, "s").Cancel())
}

// A commit whose target's generation moved on since the dispatch says so:
// Complete(Accepted) in time and a CommitAccepted raced by a Bump return an
// error matching ErrStaleAtBirth and no lease (a lease comes only with a nil
// error: the request holds nothing). A quarantined attempt is dropped when
// its target's generation moves on, so a late result or a Resolve is
// refused instead.
func TestContract_StaleAtBirthIsReported(t *testing.T) {
	c, _ := manual(t)

	d, err := reserve(t, c, "s").BeginDispatch(w1, 1)
	must(t, err)
	c.BumpGeneration(w1)
	l, err := d.Complete(Accepted)
	wantStaleAtBirth(t, c, err, d.Attempt(), "Complete(Accepted)")
	if l != (Lease[target]{}) {
		t.Fatalf("a lease (version %d) came with the error", l.Version())
	}
	if err := l.Release(); !errors.Is(err, ErrInvalidArgument) {
		t.Fatalf("releasing the zero lease: %v", err)
	}

	c, clk := manual(t)
	d, err = reserve(t, c, "s").BeginDispatch(w1, 1)
	must(t, err)
	must(t, clk.AdvanceBy(5*time.Second)) // DispatchTimeout: quarantined
	c.BumpGeneration(w1)
	// A quarantine whose target's generation moved on is dropped: the late
	// result, and a Resolve, find no attempt to settle, and say so.
	if _, err = d.Complete(Accepted); !errors.Is(err, ErrFenced) {
		t.Fatalf("late Complete(Accepted) after a bump: %v, want ErrFenced", err)
	}
	if i := state(t, c, "s"); i.State != StateAbsent {
		t.Fatalf("after the late result the key reads %v", i.State)
	}

	c, _ = manual(t)
	d, err = reserve(t, c, "s").BeginDispatch(w1, 1)
	must(t, err)
	d.Drop()
	c.BumpGeneration(w1)
	if err := c.Resolve("s", d.Attempt(), 1, ResolveAccepted); !errors.Is(err, ErrNotQuarantined) {
		t.Fatalf("Resolve(ResolveAccepted) after a bump: %v, want ErrNotQuarantined", err)
	}

	c, _ = manual(t, func(c *Config[target]) { c.FirstAttempt = 7 })
	c.testBeforeBind = func() { c.BumpGeneration(w1) } // a Bump racing the call
	l, err = reserve(t, c, "s").CommitAccepted(w1, 1)
	c.testBeforeBind = nil
	wantStaleAtBirth(t, c, err, 7, "CommitAccepted")
	if l != (Lease[target]{}) {
		t.Fatalf("CommitAccepted: a lease (version %d) came with the error", l.Version())
	}

	// Without a Bump, the same commits return no error.
	c, _ = manual(t)
	d, err = reserve(t, c, "s").BeginDispatch(w1, 1)
	must(t, err)
	l, err = d.Complete(Accepted)
	must(t, err)
	must(t, l.Release())
}

// After Close nothing is reserved, dispatched, committed, resolved or
// invalidated: each such call returns ErrClosed and changes nothing; what
// the requests hold can still be ended; Query and Stats still read.
func TestContract_CloseFencesEverything(t *testing.T) {
	var rec recorder
	c, clk := manual(t, func(c *Config[target]) { c.MaxEntries = 8; c.Observer = rec.observe })
	late, err := reserve(t, c, "late").BeginDispatch(w1, 1)
	must(t, err)
	must(t, clk.AdvanceBy(5*time.Second)) // DispatchTimeout: quarantined, a late result may come
	quarantined, err := reserve(t, c, "quarantined").BeginDispatch(w2, 1)
	must(t, err)
	quarantined.Drop()
	lease := bind(t, c, "bound", w1)
	reserved := reserve(t, c, "reserved")
	committer := reserve(t, c, "committer")
	inFlight, err := reserve(t, c, "in-flight").BeginDispatch(w1, 1)
	must(t, err)
	rollback, err := reserve(t, c, "rollback").BeginDispatch(w1, 1)
	must(t, err)
	before := len(rec.kinds())
	live := c.Stats().Live

	must(t, c.Close())

	closed := func(what string, err error) {
		t.Helper()
		if !errors.Is(err, ErrClosed) {
			t.Errorf("%s after Close: %v, want ErrClosed", what, err)
		}
	}
	reads := func(key string, want State) {
		t.Helper()
		if got := state(t, c, key).State; got != want {
			t.Errorf("after Close %s reads %v, want %v", key, got, want)
		}
	}
	_, err = reserved.BeginDispatch(w1, 1)
	closed("BeginDispatch", err)
	reads("reserved", StateReserved)
	_, err = committer.CommitAccepted(w1, 1)
	closed("CommitAccepted", err)
	reads("committer", StateReserved)
	_, err = inFlight.Complete(Accepted)
	closed("Complete(Accepted)", err)
	reads("in-flight", StateDispatching)
	_, err = late.Complete(Accepted)
	closed("late Complete(Accepted)", err)
	_, err = late.Complete(DefinitelyNotAccepted)
	closed("late Complete(DefinitelyNotAccepted)", err)
	reads("late", StateQuarantined)
	closed("Resolve", c.Resolve("quarantined", quarantined.Attempt(), 1, ResolveAccepted))
	closed("Resolve(ResolveNotAccepted)", c.Resolve("quarantined", quarantined.Attempt(), 1, ResolveNotAccepted))
	closed("Resolve of an unknown key", c.Resolve("nowhere", 1, 1, ResolveAccepted))
	reads("quarantined", StateQuarantined)
	removed, err := c.InvalidateKey("bound")
	closed("InvalidateKey", err)
	if removed {
		t.Error("InvalidateKey removed a binding after Close")
	}
	reads("bound", StateBound)
	_, err = c.TryAcquire("bound")
	closed("TryAcquire", err)
	if got := rec.kinds()[before:]; len(got) != 0 {
		t.Errorf("refused calls reported events %v", got)
	}
	if s := c.Stats(); s.Live != live {
		t.Errorf("Stats after Close: %d live, want %d", s.Live, live)
	}

	// What the requests hold still ends, without errors.
	inFlight.Drop()
	reads("in-flight", StateQuarantined)
	late.Drop()
	must(t, reserved.Cancel())
	must(t, committer.Cancel())
	reads("reserved", StateAbsent)
	_, err = rollback.Complete(DefinitelyNotAccepted)
	wantIs(t, err, ErrNotAccepted)
	reads("rollback", StateReserved)
	must(t, rollback.Reservation().Cancel())
	must(t, lease.Release())
	if i := state(t, c, "bound"); i.Leases != 0 {
		t.Errorf("the released lease still counts: %+v", i)
	}
}

// promptly fails the test unless the waiter's Acquire returns a
// reservation within a second (the manual clock never moves, so only a
// wake-up makes it return).
func promptly(t *testing.T, got <-chan waited, what string) Acquisition[target] {
	t.Helper()
	select {
	case w := <-got:
		if w.err != nil || w.a.Reservation == nil {
			t.Fatalf("%s: the waiter got %v (hit %v), want a reservation", what, w.err, w.a.Hit())
		}
		return w.a
	case <-time.After(time.Second):
		t.Fatalf("%s: the waiter is still waiting: the reservation was not given back", what)
	}
	return Acquisition[target]{}
}

// Done on a hit releases the lease, once: after the caller's own Release
// (or a second Done) it changes no count.
func TestContract_DoneReleasesAHit(t *testing.T) {
	c, _ := manual(t)
	must(t, bind(t, c, "s", w1).Release())
	other := hit(t, c, "s")
	a, err := c.TryAcquire("s")
	must(t, err)
	a.Done()
	if i := state(t, c, "s"); i.Leases != 1 {
		t.Fatalf("after Done %d leases, want 1 (the other request's)", i.Leases)
	}
	a.Done()
	b, err := c.TryAcquire("s")
	must(t, err)
	must(t, b.Lease.Release())
	b.Done()
	if i := state(t, c, "s"); i.Leases != 1 {
		t.Fatalf("Done after Release: %d leases, want 1", i.Leases)
	}
	must(t, other.Release())
	Acquisition[target]{}.Done() // what Acquire returns with an error: nothing held
}

// Done on a reservation that was never dispatched cancels it, and a waiter
// becomes the next initializer; after the caller's own Cancel it leaves
// alone the reservation another request has taken since.
func TestContract_DoneCancelsAReservation(t *testing.T) {
	c, _ := manual(t)
	a, err := c.TryAcquire("s")
	must(t, err)
	got := waiter(c, "s")
	a.Done()
	next := promptly(t, got, "reserve then Done")
	a.Done()
	if i := state(t, c, "s"); i.State != StateReserved {
		t.Fatalf("a second Done touched the next reservation: %v", i.State)
	}
	must(t, next.Reservation.Cancel())
	next.Done() // after the caller's own Cancel
	mine := reserve(t, c, "s")
	next.Done()
	a.Done()
	if _, err := mine.BeginDispatch(w1, 1); err != nil {
		t.Fatalf("an old request's Done ended a later reservation: %v", err)
	}
}

// Done on a dispatch in flight quarantines the key (the target may have
// accepted it); on a dispatch completed DefinitelyNotAccepted it gives the
// reservation back at once, so a waiter proceeds.
func TestContract_DoneEndsDispatches(t *testing.T) {
	c, _ := manual(t)
	a, err := c.TryAcquire("q")
	must(t, err)
	d, err := a.Reservation.BeginDispatch(w1, 1)
	must(t, err)
	a.Done()
	if i := state(t, c, "q"); i.State != StateQuarantined || i.Attempt != d.Attempt() {
		t.Fatalf("dispatch then Done: %+v, want quarantined", i)
	}
	a.Done()

	a, err = c.TryAcquire("s")
	must(t, err)
	d, err = a.Reservation.BeginDispatch(w1, 1)
	must(t, err)
	got := waiter(c, "s")
	_, err = d.Complete(DefinitelyNotAccepted)
	wantIs(t, err, ErrNotAccepted)
	a.Done()
	promptly(t, got, "DefinitelyNotAccepted then Done").Done()
	if s := c.Stats(); s.Live != 1 {
		t.Fatalf("live %d, want 1 (the quarantine)", s.Live)
	}
}

// Done after Accepted releases the lease Complete (or CommitAccepted)
// returned, unless the caller ended it: then it changes nothing.
func TestContract_DoneReleasesTheCommittedLease(t *testing.T) {
	c, _ := manual(t)
	a, err := c.TryAcquire("s")
	must(t, err)
	d, err := a.Reservation.BeginDispatch(w1, 1)
	must(t, err)
	_, err = d.Complete(Accepted)
	must(t, err)
	a.Done()
	if i := state(t, c, "s"); i.State != StateBound || i.Leases != 0 {
		t.Fatalf("Accepted then Done: %+v, want bound with no lease", i)
	}
	other := hit(t, c, "s")
	a.Done()
	a, err = c.TryAcquire("t")
	must(t, err)
	l, err := a.Reservation.CommitAccepted(w2, 1)
	must(t, err)
	must(t, l.Close()) // the final request: ended by the caller
	a.Done()
	if i := state(t, c, "t"); i.State != StateAbsent {
		t.Fatalf("CommitAccepted, Close, Done: %v", i.State)
	}
	if i := state(t, c, "s"); i.Leases != 1 {
		t.Fatalf("a later Done touched another lease: %+v", i)
	}
	must(t, other.Release())
}

// A request that panics between two steps leaves nothing held: its
// deferred Done ends the reservation or the dispatch.
func TestContract_DoneAfterPanic(t *testing.T) {
	c, _ := manual(t)
	request := func(key string, dispatch bool) (attempt uint64) {
		defer func() { _ = recover() }()
		a, err := c.TryAcquire(key)
		must(t, err)
		defer a.Done()
		if dispatch {
			d, err := a.Reservation.BeginDispatch(w1, 1)
			must(t, err)
			attempt = d.Attempt()
		}
		panic("the router failed between two steps")
	}
	request("r", false)
	if i := state(t, c, "r"); i.State != StateAbsent {
		t.Fatalf("panic after Acquire: %v, want the reservation given back", i.State)
	}
	attempt := request("d", true)
	if i := state(t, c, "d"); i.State != StateQuarantined || i.Attempt != attempt {
		t.Fatalf("panic after BeginDispatch: %+v, want quarantined", i)
	}
}

// Done after Close ends what the request holds, without a panic: a
// dispatch whose Accepted was refused is quarantined, a reservation freed.
func TestContract_DoneAfterClose(t *testing.T) {
	c, _ := manual(t)
	a, err := c.TryAcquire("d")
	must(t, err)
	d, err := a.Reservation.BeginDispatch(w1, 1)
	must(t, err)
	b, err := c.TryAcquire("r")
	must(t, err)
	must(t, c.Close())
	if _, err := d.Complete(Accepted); !errors.Is(err, ErrClosed) {
		t.Fatalf("Complete(Accepted) after Close: %v", err)
	}
	a.Done()
	b.Done()
	if i := state(t, c, "d"); i.State != StateQuarantined {
		t.Fatalf("refused dispatch after Done: %v", i.State)
	}
	if i := state(t, c, "r"); i.State != StateAbsent {
		t.Fatalf("reservation after Done: %v", i.State)
	}
}

// Stats counts the keys live as the spec does (reserved, dispatching,
// quarantined, or bound neither expired nor stale), whether or not the
// expired, stale and timed-out entries have been swept yet, and the keys
// quarantined now; Query gives an idle binding's deadline.
func TestContract_StatsAndIdleDeadlineAreTruthful(t *testing.T) {
	c, clk := manual(t, func(c *Config[target]) { c.MaxEntries = 16 })
	must(t, bind(t, c, "expired", w1).Release()) // idle deadline 10s
	reserve(t, c, "timed-out")                   // deadline 5s
	_, err := reserve(t, c, "late").BeginDispatch(w1, 1)
	must(t, err)
	must(t, clk.Set(6*time.Second))           // nothing swept: "timed-out" and "late" are past their deadline
	must(t, bind(t, c, "idle", w1).Release()) // idle deadline 16s
	leased := bind(t, c, "leased", w1)
	must(t, bind(t, c, "stale", w2).Release())
	c.BumpGeneration(w2)
	reserve(t, c, "reserved") // deadline 11s
	_, err = reserve(t, c, "dispatching").BeginDispatch(w1, 1)
	must(t, err)
	q, err := reserve(t, c, "quarantined").BeginDispatch(w1, 1)
	must(t, err)
	q.Drop()
	must(t, clk.Set(10*time.Second)) // "expired" expires; nothing swept

	s := c.Stats()
	if s.Live != 6 || s.Quarantined != 2 {
		t.Fatalf("Stats: %d live, %d quarantined; want 6 (late, idle, leased, reserved, dispatching, quarantined) and 2 (late, quarantined)",
			s.Live, s.Quarantined)
	}
	if c.Now() != 10*time.Second {
		t.Fatalf("Now %v, want the manual clock's 10s", c.Now())
	}
	for key, want := range map[string]time.Duration{"idle": 16 * time.Second, "leased": 0, "expired": 0, "stale": 0,
		"reserved": 0, "late": 0} {
		if got := state(t, c, key).IdleDeadline; got != want {
			t.Errorf("%s: IdleDeadline %v, want %v", key, got, want)
		}
	}
	must(t, leased.Release()) // idle from now: 10s + IdleTTL
	if got := state(t, c, "leased").IdleDeadline; got != 20*time.Second {
		t.Errorf("after Release: IdleDeadline %v, want 20s", got)
	}
	must(t, hit(t, c, "idle").Abandon()) // Abandon keeps the deadline
	if got := state(t, c, "idle").IdleDeadline; got != 16*time.Second {
		t.Errorf("after Abandon: IdleDeadline %v, want 16s", got)
	}
	must(t, c.Resolve("quarantined", q.Attempt(), 1, ResolveAccepted)) // bound at 10s, no lease
	if i := state(t, c, "quarantined"); i.IdleDeadline != 20*time.Second {
		t.Errorf("resolved binding: IdleDeadline %v, want 20s", i.IdleDeadline)
	}
	if s := c.Stats(); s.Live != 6 || s.Quarantined != 1 {
		t.Fatalf("Stats after Resolve: %+v", s)
	}
	clk.Reclaim()
	if s := c.Stats(); s.Live != 6 || s.Quarantined != 1 || c.live.Load() != 6 {
		t.Fatalf("Stats after a sweep: %+v (%d slots held)", s, c.live.Load())
	}
}

// TestContract_LenAndAmbiguousExpires: Len counts the slots the table holds,
// Config gives the defaults, and a quarantine's *AmbiguousError says when
// QuarantineTTL ends it (Complete's and a later Acquire's alike).
func TestContract_LenAndAmbiguousExpires(t *testing.T) {
	clk := NewManualClock(0)
	c, err := New(Config[int]{Clock: clk, QuarantineTTL: 7 * time.Second, MaxEntries: 3})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if c.Len() != 0 || c.Config().MaxEntries != 3 || c.Config().IdleTTL != DefaultIdleTTL {
		t.Fatalf("Len %d, Config %+v", c.Len(), c.Config())
	}
	a, err := c.Acquire(context.Background(), "k")
	if err != nil || c.Len() != 1 {
		t.Fatalf("Acquire: %v, Len %d", err, c.Len())
	}
	if err := clk.Advance(2 * time.Second); err != nil {
		t.Fatal(err)
	}
	d, err := a.Reservation.BeginDispatch(1, c.Generation(1))
	if err != nil {
		t.Fatal(err)
	}
	_, err = d.Complete(Ambiguous)
	var q *AmbiguousError[int]
	if !errors.As(err, &q) || q.Expires != 9*time.Second {
		t.Fatalf("Complete(Ambiguous): %v (%+v)", err, q)
	}
	_, err = c.Acquire(context.Background(), "k")
	if !errors.As(err, &q) || q.Expires != 9*time.Second || c.Len() != 1 {
		t.Fatalf("Acquire of the quarantined key: %v (%+v), Len %d", err, q, c.Len())
	}
	if err := clk.Advance(9 * time.Second); err != nil {
		t.Fatal(err)
	}
	if c.Len() != 0 {
		t.Fatalf("Len after the quarantine ended: %d", c.Len())
	}
}

// TestContract_LeaseCurrent: a lease is Current while its binding version
// is the session's live binding, and not once it was invalidated, replaced
// or its target bumped; a zero Lease is not Current.
func TestContract_LeaseCurrent(t *testing.T) {
	c, err := New(Config[int]{Clock: NewManualClock(0)})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	bind := func(key string, target int) Lease[int] {
		a, err := c.Acquire(context.Background(), key)
		if err != nil {
			t.Fatal(err)
		}
		if a.Hit() {
			return a.Lease
		}
		d, err := a.Reservation.BeginDispatch(target, c.Generation(target))
		if err != nil {
			t.Fatal(err)
		}
		l, err := d.Complete(Accepted)
		if err != nil {
			t.Fatal(err)
		}
		return l
	}
	if (Lease[int]{}).Current() {
		t.Fatal("a zero Lease is Current")
	}
	l1 := bind("k", 1)
	l2 := bind("k", 1) // a hit on the same version
	if !l1.Current() || !l2.Current() {
		t.Fatal("leases on the live binding are not Current")
	}
	if err := l1.Invalidate(); err != nil {
		t.Fatal(err)
	}
	if l2.Current() {
		t.Fatal("a lease on an invalidated version is Current")
	}
	_ = l2.Release()
	l3 := bind("k", 2)
	if !l3.Current() {
		t.Fatal("the new binding's lease is not Current")
	}
	c.BumpGeneration(2)
	if l3.Current() {
		t.Fatal("a lease whose target was bumped is Current")
	}
	_ = l3.Release()
}
