package placement

import (
	"context"
	"errors"
	"testing"
	"time"
)

// Deadlines at their boundary. Every deadline is an instant d: one
// nanosecond before it, what it bounds is still alive; at d it is over
// (idle bindings expire at d, reservations are revoked at d, dispatches
// are quarantined at d). Each test moves a manual clock to exact instants:
// with Set (nothing is reclaimed, so the lazy check of the path under test
// decides) and, where a sweep decides, with Advance.

const (
	bTTL   = 10 * time.Second
	bInit  = 5 * time.Second
	bStart = time.Hour + 7*time.Nanosecond // no deadline falls on a round value by accident
)

// boundary returns a coordinator with IdleTTL bTTL and both timeouts bInit
// whose manual clock reads bStart, and the recorder of its events.
func boundary(t *testing.T) (*Coordinator[target], *ManualClock, *recorder) {
	t.Helper()
	rec := &recorder{}
	c, clk := manual(t, func(c *Config[target]) {
		c.IdleTTL, c.ReserveTimeout, c.DispatchTimeout, c.MaxEntries, c.Observer = bTTL, bInit, bInit, 16, rec.observe
	})
	must(t, clk.Set(bStart))
	return c, clk, rec
}

// at moves clk to d without reclaiming anything.
func at(t *testing.T, clk *ManualClock, d time.Duration) {
	t.Helper()
	must(t, clk.Set(d))
}

// The lock-free hit (tryHit), the locked slow path and both Acquire calls
// hit an idle binding one nanosecond before its idle deadline; at the
// deadline each misses, and Acquire and TryAcquire reserve the key (the
// binding expired, reported before the reservation).
func TestBoundary_HitAtIdleDeadline(t *testing.T) {
	c, clk, rec := boundary(t)
	acquires := map[string]func(key string) (Acquisition[target], error){
		"TryAcquire": c.TryAcquire,
		"Acquire":    func(key string) (Acquisition[target], error) { return c.Acquire(context.Background(), key) },
		"the slow path": func(key string) (Acquisition[target], error) {
			return c.acquireSlow(context.Background(), key, false, nil, 0)
		},
	}
	for name := range acquires {
		must(t, bind(t, c, name, w1).Release()) // idle from bStart
	}
	deadline := bStart + bTTL

	at(t, clk, deadline-1)
	for name, acquire := range acquires {
		l, ok := c.hit(name)
		if !ok {
			t.Fatalf("%s: the lock-free hit missed one nanosecond before the idle deadline", name)
		}
		must(t, l.Abandon()) // ends the lease, keeps the deadline
		a, err := acquire(name)
		if err != nil || !a.Hit() {
			t.Fatalf("%s one nanosecond before the idle deadline: %v (hit %v), want a hit", name, err, a.Hit())
		}
		must(t, a.Lease.Abandon())
	}
	if s := c.Stats(); s.Hits != 2*int64(len(acquires)) || s.Expirations != 0 {
		t.Fatalf("before the deadline: %+v", s)
	}

	at(t, clk, deadline)
	for name, acquire := range acquires {
		if _, ok := c.hit(name); ok {
			t.Fatalf("%s: the lock-free hit took a lease at the idle deadline", name)
		}
		rec.mu.Lock()
		rec.evs = nil
		rec.mu.Unlock()
		a, err := acquire(name)
		if err != nil || a.Reservation == nil {
			t.Fatalf("%s at the idle deadline: %v (hit %v), want a reservation", name, err, a.Hit())
		}
		wantKinds(t, rec, EventExpired, EventReserved)
	}
	if s := c.Stats(); s.Expirations != int64(len(acquires)) || s.Live != int64(len(acquires)) {
		t.Fatalf("at the deadline: %+v", s)
	}
}

// Query reads an idle binding as Bound one nanosecond before its deadline
// and as Absent at it, expiring it itself: it is never hit again.
func TestBoundary_QueryAtIdleDeadline(t *testing.T) {
	c, clk, rec := boundary(t)
	must(t, bind(t, c, "s", w1).Release())
	deadline := bStart + bTTL

	at(t, clk, deadline-1)
	if i := state(t, c, "s"); i.State != StateBound || i.Leases != 0 {
		t.Fatalf("one nanosecond before the idle deadline: %+v, want Bound", i)
	}
	at(t, clk, deadline)
	if i := state(t, c, "s"); i.State != StateAbsent {
		t.Fatalf("at the idle deadline: %+v, want Absent", i)
	}
	wantKinds(t, rec, EventReserved, EventCommitted, EventExpired)
	if _, ok := c.hit("s"); ok {
		t.Fatal("a binding Query read as expired was hit")
	}
	if s := c.Stats(); s.Expirations != 1 || s.Live != 0 {
		t.Fatalf("stats %+v", s)
	}
}

// InvalidateKey removes an idle binding one nanosecond before its deadline
// (reporting it removed); at the deadline the binding has expired, so it
// reports nothing removed.
func TestBoundary_InvalidateKeyAtIdleDeadline(t *testing.T) {
	c, clk, rec := boundary(t)
	must(t, bind(t, c, "before", w1).Release())
	must(t, bind(t, c, "at", w1).Release())
	deadline := bStart + bTTL

	at(t, clk, deadline-1)
	if removed, err := c.InvalidateKey("before"); !removed || err != nil {
		t.Fatalf("one nanosecond before the idle deadline: removed %v, %v; want removed", removed, err)
	}
	at(t, clk, deadline)
	if removed, err := c.InvalidateKey("at"); removed || err != nil {
		t.Fatalf("at the idle deadline: removed %v, %v; want an expired binding", removed, err)
	}
	wantKinds(t, rec, EventReserved, EventCommitted, EventReserved, EventCommitted, EventRemoved, EventExpired)
	if s := c.Stats(); s.Expirations != 1 || s.Live != 0 {
		t.Fatalf("stats %+v", s)
	}
}

// A Release sets the idle deadline from its own reading of the clock, and
// a Resolve's binding from the Resolve's: each holds until one nanosecond
// before it and is over at it.
func TestBoundary_IdleDeadlineSetByReleaseAndResolve(t *testing.T) {
	c, clk, _ := boundary(t)
	l := bind(t, c, "released", w1)
	d, err := reserve(t, c, "resolved").BeginDispatch(w1, 1)
	must(t, err)
	d.Drop()
	at(t, clk, bStart+3*time.Second)
	must(t, l.Release())
	must(t, c.Resolve("resolved", d.Attempt(), 1, ResolveAccepted))
	deadline := bStart + 3*time.Second + bTTL

	at(t, clk, deadline-1)
	for _, key := range []string{"released", "resolved"} {
		if i := state(t, c, key); i.State != StateBound {
			t.Fatalf("%s one nanosecond before the idle deadline: %v, want Bound", key, i.State)
		}
	}
	at(t, clk, deadline)
	for _, key := range []string{"released", "resolved"} {
		if i := state(t, c, key); i.State != StateAbsent {
			t.Fatalf("%s at the idle deadline: %v, want Absent", key, i.State)
		}
	}
}

// A reservation one nanosecond before its deadline can still dispatch,
// commit and cancel, and reads as Reserved; at its deadline it is revoked:
// each use reports ErrReservationLost and changes nothing, Query reads the
// key as Absent, and the key can be reserved afresh.
func TestBoundary_ReservationAtItsDeadline(t *testing.T) {
	c, clk, _ := boundary(t)
	uses := map[string]func(r *Reservation[target]) error{
		"BeginDispatch": func(r *Reservation[target]) error {
			d, err := r.BeginDispatch(w1, 1)
			if err == nil {
				d.Drop()
			}
			return err
		},
		"CommitAccepted": func(r *Reservation[target]) error {
			l, err := r.CommitAccepted(w1, 1)
			if err == nil {
				err = l.Release()
			}
			return err
		},
		"Cancel": func(r *Reservation[target]) error { return r.Cancel() },
	}
	before, after := map[string]*Reservation[target]{}, map[string]*Reservation[target]{}
	for name := range uses {
		before[name] = reserve(t, c, "before "+name)
		after[name] = reserve(t, c, "at "+name)
	}
	deadline := bStart + bInit

	at(t, clk, deadline-1)
	for name, use := range uses {
		if i := state(t, c, "at "+name); i.State != StateReserved {
			t.Fatalf("one nanosecond before the reservation deadline: %v, want Reserved", i.State)
		}
		if err := use(before[name]); err != nil {
			t.Fatalf("%s one nanosecond before the reservation deadline: %v", name, err)
		}
	}
	at(t, clk, deadline)
	live := c.Stats().Live
	for name, use := range uses {
		if i := state(t, c, "at "+name); i.State != StateAbsent {
			t.Fatalf("at the reservation deadline Query reads %v, want Absent", i.State)
		}
		if err := use(after[name]); !errors.Is(err, ErrReservationLost) {
			t.Fatalf("%s at the reservation deadline: %v, want ErrReservationLost", name, err)
		}
		// Stats counts what the spec calls live: a reservation past its
		// deadline never counted, so applying its timeout changes nothing.
		if s := c.Stats(); s.Live != live {
			t.Fatalf("after %s at the deadline: %d live, want %d", name, s.Live, live)
		}
		must(t, reserve(t, c, "at "+name).Cancel())
	}
}

// The sweep (Advance) leaves a reservation alone one nanosecond before its
// deadline and revokes it at the deadline.
func TestBoundary_SweepRevokesReservationAtItsDeadline(t *testing.T) {
	c, clk, rec := boundary(t)
	r := reserve(t, c, "s")
	must(t, clk.Advance(bStart+bInit-1))
	if i := state(t, c, "s"); i.State != StateReserved || c.Stats().Live != 1 {
		t.Fatalf("one nanosecond before the deadline the sweep left %v, live %d", i.State, c.Stats().Live)
	}
	must(t, clk.Advance(bStart+bInit))
	wantKinds(t, rec, EventReserved, EventRemoved)
	if c.Stats().Live != 0 {
		t.Fatal("the sweep at the deadline kept the reservation's slot")
	}
	if _, err := r.BeginDispatch(w1, 1); !errors.Is(err, ErrReservationLost) {
		t.Fatalf("BeginDispatch after the sweep: %v", err)
	}
}

// A DefinitelyNotAccepted in time returns the reservation with its own
// deadline: one nanosecond before it the holder can dispatch again, at it
// the reservation is revoked however many dispatches it made.
func TestBoundary_RolledBackReservationKeepsItsDeadline(t *testing.T) {
	c, clk, _ := boundary(t)
	r := reserve(t, c, "s")
	deadline := bStart + bInit
	at(t, clk, deadline-1)
	for i := 0; i < 2; i++ {
		d, err := r.BeginDispatch(w1, 1)
		if err != nil {
			t.Fatalf("dispatch %d one nanosecond before the reservation deadline: %v", i, err)
		}
		_, err = d.Complete(DefinitelyNotAccepted)
		wantIs(t, err, ErrNotAccepted)
		if i := state(t, c, "s"); i.State != StateReserved {
			t.Fatalf("after DefinitelyNotAccepted: %v, want Reserved", i.State)
		}
	}
	at(t, clk, deadline)
	if _, err := r.BeginDispatch(w1, 1); !errors.Is(err, ErrReservationLost) {
		t.Fatalf("BeginDispatch at the reservation's own deadline: %v, want ErrReservationLost", err)
	}
}

// A dispatch completed Accepted one nanosecond before its deadline commits
// in time (no quarantine, no resolution). At its deadline it is
// quarantined (Query and Acquire report it with its attempt), and its late
// result settles the quarantine: Accepted binds with the dispatcher's
// lease, DefinitelyNotAccepted makes the key absent (its reservation is
// not held again).
func TestBoundary_DispatchAtItsDeadline(t *testing.T) {
	c, clk, rec := boundary(t)
	dispatch := func(key string) *Dispatch[target] {
		d, err := reserve(t, c, key).BeginDispatch(w1, 1)
		must(t, err)
		return d
	}
	at(t, clk, bStart+time.Second) // the dispatch deadline counts from BeginDispatch
	inTime, lateYes, lateNo := dispatch("in time"), dispatch("late accepted"), dispatch("late not accepted")
	deadline := bStart + time.Second + bInit

	at(t, clk, deadline-1)
	if i := state(t, c, "late accepted"); i.State != StateDispatching {
		t.Fatalf("one nanosecond before the dispatch deadline: %v, want Dispatching", i.State)
	}
	l, err := inTime.Complete(Accepted)
	if err != nil || l.Target() != w1 {
		t.Fatalf("Complete(Accepted) one nanosecond before the dispatch deadline: %v", err)
	}
	must(t, l.Release())
	if s := c.Stats(); s.Quarantines != 0 || s.Resolutions != 0 {
		t.Fatalf("a completion in time was counted late: %+v", s)
	}

	at(t, clk, deadline)
	if i := state(t, c, "late accepted"); i.State != StateQuarantined || i.Attempt != lateYes.Attempt() {
		t.Fatalf("Query at the dispatch deadline: %+v, want Quarantined for attempt %d", i, lateYes.Attempt())
	}
	_, err = c.TryAcquire("late not accepted")
	var amb *AmbiguousError[target]
	if !errors.As(err, &amb) || amb.Attempt != lateNo.Attempt() || amb.Generation != 1 {
		t.Fatalf("TryAcquire at the dispatch deadline: %v, want an *AmbiguousError[target] for attempt %d", err, lateNo.Attempt())
	}
	rec.mu.Lock()
	rec.evs = nil
	rec.mu.Unlock()
	l, err = lateYes.Complete(Accepted)
	if err != nil || l.Version() != lateYes.Attempt() {
		t.Fatalf("the late Accepted: %v", err)
	}
	if i := state(t, c, "late accepted"); i.State != StateBound || i.Leases != 1 {
		t.Fatalf("after the late Accepted: %+v, want Bound with the dispatcher's lease", i)
	}
	must(t, l.Release())
	_, err = lateNo.Complete(DefinitelyNotAccepted)
	wantIs(t, err, ErrNotAccepted)
	if i := state(t, c, "late not accepted"); i.State != StateAbsent {
		t.Fatalf("after the late DefinitelyNotAccepted: %v, want Absent", i.State)
	}
	if _, err := lateNo.Reservation().BeginDispatch(w1, 1); !errors.Is(err, ErrReservationLost) {
		t.Fatalf("the reservation of a late DefinitelyNotAccepted: %v, want ErrReservationLost", err)
	}
	// Query applied the timeout (Quarantined, before the recorder was
	// reset), as TryAcquire applied the other one's: the late results
	// only settle them (a late result settling a quarantine is Resolved,
	// with its outcome).
	wantKinds(t, rec, EventResolved, EventResolved)
	if a, n := rec.evs[0].Outcome, rec.evs[1].Outcome; a != Accepted || n != DefinitelyNotAccepted {
		t.Fatalf("the late results' events have outcomes %v and %v", a, n)
	}
	if s := c.Stats(); s.Quarantines != 2 || s.Resolutions != 2 {
		t.Fatalf("stats %+v, want 2 quarantines settled by 2 late results", s)
	}
}

// The sweep (Advance) leaves a dispatch in flight one nanosecond before its
// deadline and quarantines it at the deadline; the late result settles it.
func TestBoundary_SweepQuarantinesDispatchAtItsDeadline(t *testing.T) {
	c, clk, _ := boundary(t)
	d, err := reserve(t, c, "s").BeginDispatch(w1, 1)
	must(t, err)
	must(t, clk.Advance(bStart+bInit-1))
	if i := state(t, c, "s"); i.State != StateDispatching || c.Stats().Quarantines != 0 {
		t.Fatalf("one nanosecond before the deadline the sweep left %v (%+v)", i.State, c.Stats())
	}
	must(t, clk.Advance(bStart+bInit))
	if i := state(t, c, "s"); i.State != StateQuarantined || c.Stats().Quarantines != 1 {
		t.Fatalf("at the deadline the sweep left %v (%+v)", i.State, c.Stats())
	}
	l, err := d.Complete(Accepted)
	must(t, err)
	if i := state(t, c, "s"); i.State != StateBound || i.Attempt != d.Attempt() {
		t.Fatalf("after the late Accepted: %+v", i)
	}
	must(t, l.Release())
}
