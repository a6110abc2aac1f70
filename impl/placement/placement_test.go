package placement

import (
	"context"
	"errors"
	"fmt"
	"go/parser"
	"go/token"
	"math"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"
)

type target struct {
	Worker uint64
	Rank   int32
}

var (
	w1 = target{Worker: 1, Rank: 0}
	w2 = target{Worker: 2, Rank: 1}
)

// noLeaks fails the test if goroutines started during it outlive it.
func noLeaks(t *testing.T) {
	t.Helper()
	before := runtime.NumGoroutine()
	t.Cleanup(func() {
		deadline := time.Now().Add(2 * time.Second)
		for runtime.NumGoroutine() > before {
			if time.Now().After(deadline) {
				buf := make([]byte, 1<<16)
				t.Fatalf("goroutine leak: %d before, %d after\n%s", before, runtime.NumGoroutine(),
					buf[:runtime.Stack(buf, true)])
			}
			time.Sleep(5 * time.Millisecond)
		}
	})
}

func manual(t *testing.T, mutate ...func(*Config[target])) (*Coordinator[target], *ManualClock) {
	t.Helper()
	noLeaks(t)
	clk := NewManualClock(0)
	cfg := Config[target]{IdleTTL: 10 * time.Second, ReserveTimeout: 5 * time.Second, DispatchTimeout: 5 * time.Second, MaxEntries: 4, MaxKeyBytes: 64, Clock: clk}
	for _, m := range mutate {
		m(&cfg)
	}
	c, err := New[target](cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c, clk
}

func reserve(t *testing.T, c *Coordinator[target], key string) *Reservation[target] {
	t.Helper()
	a, err := c.TryAcquire(key)
	if err != nil || a.Reservation == nil {
		t.Fatalf("acquire %q: %v (hit=%v), want a reservation", key, err, a.Hit())
	}
	return a.Reservation
}

func bind(t *testing.T, c *Coordinator[target], key string, to target) Lease[target] {
	t.Helper()
	r := reserve(t, c, key)
	d, err := r.BeginDispatch(to, c.Generation(to))
	if err != nil {
		t.Fatal(err)
	}
	l, err := d.Complete(Accepted)
	if err != nil {
		t.Fatal(err)
	}
	return l
}

func hit(t *testing.T, c *Coordinator[target], key string) Lease[target] {
	t.Helper()
	a, err := c.TryAcquire(key)
	if err != nil || !a.Hit() {
		t.Fatalf("acquire %q: %v, want a hit", key, err)
	}
	return a.Lease
}

func state(t *testing.T, c *Coordinator[target], key string) Info[target] {
	t.Helper()
	i, err := c.Query(key)
	if err != nil {
		t.Fatal(err)
	}
	return i
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

func TestAcquire_AbsentReserves(t *testing.T) {
	c, _ := manual(t)
	r := reserve(t, c, "s")
	if r.Key() != "s" || state(t, c, "s").State != StateReserved {
		t.Fatal("not reserved")
	}
	if _, err := c.TryAcquire("s"); !errors.Is(err, ErrWouldWait) {
		t.Fatalf("second acquire: %v, want ErrWouldWait", err)
	}
}

func TestAcquire_BoundHitTakesLease(t *testing.T) {
	c, _ := manual(t)
	l1 := bind(t, c, "s", w1)
	l2 := hit(t, c, "s")
	if l2.Target() != w1 || l2.Version() != l1.Version() || l2.Generation() != 1 || l2.Key() != "s" {
		t.Fatalf("hit: %+v %d", l2.Target(), l2.Version())
	}
	if i := state(t, c, "s"); i.Leases != 2 || i.State != StateBound {
		t.Fatalf("info %+v", i)
	}
	must(t, l1.Release())
	must(t, l2.Release())
	if s := c.Stats(); s.Hits != 1 || s.Reservations != 1 || s.Live != 1 {
		t.Fatalf("stats %+v", s)
	}
}

func TestAcquire_WaitsForInitializerAndWakes(t *testing.T) {
	c, _ := manual(t)
	r := reserve(t, c, "s")
	got := waiter(c, "s")
	d, err := r.BeginDispatch(w2, 1)
	must(t, err)
	l, err := d.Complete(Accepted)
	must(t, err)
	w := recvWithin(t, got, wakeLimit, "the waiter's answer after Complete(Accepted)")
	must(t, w.err)
	a := w.a
	if !a.Hit() || a.Lease.Target() != w2 {
		t.Fatal("waiter did not get the binding")
	}
	must(t, a.Lease.Release())
	must(t, l.Release())
}

func TestAcquire_WaitCancelledByContext(t *testing.T) {
	c, _ := manual(t)
	reserve(t, c, "s")
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
	defer cancel()
	_, err := c.Acquire(ctx, "s")
	if !errors.Is(err, ErrCancelled) || !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("got %v, want ErrCancelled wrapping DeadlineExceeded", err)
	}
}

func TestCancel_WaiterBecomesInitializer(t *testing.T) {
	c, _ := manual(t)
	r := reserve(t, c, "s")
	got := waiter(c, "s")
	must(t, r.Cancel())
	if w := recvWithin(t, got, wakeLimit, "the waiter's answer after Cancel"); w.a.Reservation == nil {
		t.Fatalf("the waiter did not become the next initializer (err %v)", w.err)
	}
	if err := r.Cancel(); !errors.Is(err, ErrReservationLost) {
		t.Fatalf("second cancel: %v", err)
	}
}

func TestAcquire_CapacityErrorNamesBound(t *testing.T) {
	c, _ := manual(t, func(c *Config[target]) { c.MaxEntries = 2 })
	reserve(t, c, "a")
	reserve(t, c, "b")
	_, err := c.TryAcquire("c")
	var ce *CapacityError
	if !errors.As(err, &ce) || !errors.Is(err, ErrCapacity) || ce.MaxEntries != 2 || !strings.Contains(err.Error(), "2") {
		t.Fatalf("got %v", err)
	}
	if s := c.Stats(); s.CapacityRejections != 1 || s.Live != 2 {
		t.Fatalf("stats %+v", s)
	}
}

func TestAcquire_CapacityReclaimsExpiredFirst(t *testing.T) {
	c, clk := manual(t, func(c *Config[target]) { c.MaxEntries = 1 })
	l := bind(t, c, "a", w1)
	must(t, l.Release())
	if _, err := c.TryAcquire("b"); !errors.Is(err, ErrCapacity) {
		t.Fatalf("got %v, want capacity", err)
	}
	// Make time pass without the Advance sweep, as a runtime clock would.
	clk.t.Store(int64(11 * time.Second))
	reserve(t, c, "b")
	if s := c.Stats(); s.Expirations != 1 || s.Live != 1 {
		t.Fatalf("stats %+v", s)
	}
}

func TestAcquire_QuarantinedIsAmbiguous(t *testing.T) {
	c, _ := manual(t)
	r := reserve(t, c, "s")
	d, err := r.BeginDispatch(w1, 1)
	must(t, err)
	_, err = d.Complete(Ambiguous)
	wantIs(t, err, ErrAmbiguous)
	_, err = c.TryAcquire("s")
	var ae *AmbiguousError[target]
	if !errors.As(err, &ae) || !errors.Is(err, ErrAmbiguous) || ae.Attempt != d.Attempt() || ae.Generation != 1 {
		t.Fatalf("got %v", err)
	}
}

func TestAcquire_ExpiredBindingReusesSlot(t *testing.T) {
	c, clk := manual(t, func(c *Config[target]) { c.MaxEntries = 1 })
	l := bind(t, c, "s", w1)
	must(t, l.Release())
	clk.t.Store(int64(10 * time.Second)) // deadline reached, no sweep
	r := reserve(t, c, "s")
	_ = r
	if s := c.Stats(); s.Live != 1 || s.Expirations != 1 {
		t.Fatalf("stats %+v", s)
	}
}

func TestBump_StaleBindingReinitializes(t *testing.T) {
	c, _ := manual(t)
	l := bind(t, c, "s", w1)
	if g := c.BumpGeneration(w1); g != 2 {
		t.Fatalf("generation %d", g)
	}
	if i := state(t, c, "s"); i.State != StateAbsent {
		t.Fatalf("a stale binding reads as %v", i.State)
	}
	r := reserve(t, c, "s")
	if _, err := r.BeginDispatch(w1, 1); !errors.Is(err, ErrFenced) {
		t.Fatalf("dispatch with the old generation: %v", err)
	}
	d, err := r.BeginDispatch(w1, 2)
	must(t, err)
	l2, err := d.Complete(Accepted)
	must(t, err)
	must(t, l.Release()) // superseded: changes nothing
	if i := state(t, c, "s"); i.Leases != 1 || i.Generation != 2 {
		t.Fatalf("info %+v", i)
	}
	must(t, l2.Release())
}

func TestBeginDispatch_FreshAttemptIDs(t *testing.T) {
	c, _ := manual(t)
	r := reserve(t, c, "s")
	seen := map[uint64]bool{}
	for i := 0; i < 3; i++ {
		d, err := r.BeginDispatch(w1, 1)
		must(t, err)
		if seen[d.Attempt()] || d.Target() != w1 || d.Generation() != 1 || d.Reservation() != r {
			t.Fatalf("attempt %d reused or wrong guard", d.Attempt())
		}
		seen[d.Attempt()] = true
		if i := state(t, c, "s"); i.State != StateDispatching || i.Attempt != d.Attempt() {
			t.Fatalf("info %+v", i)
		}
		_, err = d.Complete(DefinitelyNotAccepted)
		wantIs(t, err, ErrNotAccepted)
	}
	if _, err := r.BeginDispatch(w1, 1); err != nil {
		t.Fatal(err)
	}
	if _, err := r.BeginDispatch(w1, 1); !errors.Is(err, ErrReservationLost) {
		t.Fatalf("dispatching twice: %v", err)
	}
}

func TestComplete_DefinitelyNotAcceptedReturnsReservation(t *testing.T) {
	c, _ := manual(t)
	r := reserve(t, c, "s")
	d, _ := r.BeginDispatch(w1, 1)
	l, err := d.Complete(DefinitelyNotAccepted)
	if !errors.Is(err, ErrNotAccepted) || l.b != nil {
		t.Fatalf("got %v", err)
	}
	if state(t, c, "s").State != StateReserved {
		t.Fatal("not reserved again")
	}
	if _, err := d.Complete(Accepted); !errors.Is(err, ErrUsed) {
		t.Fatalf("second completion: %v", err)
	}
	must(t, r.Cancel())
}

func TestComplete_FencedStaleAttempt(t *testing.T) {
	c, clk := manual(t)
	r := reserve(t, c, "s")
	d, _ := r.BeginDispatch(w1, 1)
	must(t, clk.AdvanceBy(5*time.Second)) // DispatchTimeout: quarantined
	must(t, c.Resolve("s", d.Attempt(), 1, ResolveNotAccepted))
	r2 := reserve(t, c, "s")
	d2, _ := r2.BeginDispatch(w2, 1)
	_, err := d.Complete(Accepted)
	var fe *FencedError
	if !errors.As(err, &fe) || fe.Attempt != d.Attempt() || fe.CurrentAttempt != d2.Attempt() {
		t.Fatalf("got %v", err)
	}
	if i := state(t, c, "s"); i.State != StateDispatching || i.Attempt != d2.Attempt() {
		t.Fatalf("a fenced completion changed the key: %+v", i)
	}
	d2.Drop()
}

func TestComplete_InvalidOutcome(t *testing.T) {
	c, _ := manual(t)
	d, _ := reserve(t, c, "s").BeginDispatch(w1, 1)
	if _, err := d.Complete(Outcome(9)); !errors.Is(err, ErrInvalidArgument) {
		t.Fatalf("got %v", err)
	}
	d.Drop()
}

func TestDispatchTimeout_QuarantinesThenLateAccepted(t *testing.T) {
	c, clk := manual(t)
	d, _ := reserve(t, c, "s").BeginDispatch(w1, 1)
	must(t, clk.AdvanceBy(5*time.Second))
	if i := state(t, c, "s"); i.State != StateQuarantined {
		t.Fatalf("state %v", i.State)
	}
	l, err := d.Complete(Accepted)
	must(t, err)
	if l.Target() != w1 || state(t, c, "s").Leases != 1 {
		t.Fatal("late Accepted did not settle with the dispatcher's lease")
	}
	must(t, l.Release())
	if s := c.Stats(); s.Quarantines != 1 || s.Resolutions != 1 {
		t.Fatalf("stats %+v", s)
	}
}

func TestComplete_LateDefinitelyNotAcceptedSettlesAbsent(t *testing.T) {
	c, clk := manual(t)
	d, _ := reserve(t, c, "s").BeginDispatch(w1, 1)
	must(t, clk.AdvanceBy(5*time.Second))
	_, err := d.Complete(DefinitelyNotAccepted)
	wantIs(t, err, ErrNotAccepted)
	if state(t, c, "s").State != StateAbsent || c.Stats().Live != 0 {
		t.Fatal("not settled")
	}
}

func TestDrop_QuarantinesInFlightDispatch(t *testing.T) {
	c, _ := manual(t)
	d, _ := reserve(t, c, "s").BeginDispatch(w1, 1)
	d.Drop()
	d.Drop()
	if i := state(t, c, "s"); i.State != StateQuarantined || i.Attempt != d.Attempt() {
		t.Fatalf("info %+v", i)
	}
}

func TestResolve_FencedByAttemptAndGeneration(t *testing.T) {
	c, _ := manual(t)
	d, _ := reserve(t, c, "s").BeginDispatch(w1, 1)
	_, _ = d.Complete(Ambiguous)
	for _, bad := range []struct{ a, g uint64 }{{d.Attempt() + 1, 1}, {d.Attempt(), 2}} {
		err := c.Resolve("s", bad.a, bad.g, ResolveAccepted)
		if !errors.Is(err, ErrFenced) {
			t.Fatalf("Resolve(%d, %d): %v", bad.a, bad.g, err)
		}
	}
	if state(t, c, "s").State != StateQuarantined {
		t.Fatal("a fenced resolve changed the key")
	}
	must(t, c.Resolve("s", d.Attempt(), 1, ResolveAccepted))
	if i := state(t, c, "s"); i.State != StateBound || i.Leases != 0 || i.Target != w1 {
		t.Fatalf("info %+v", i)
	}
	if _, err := d.Complete(Accepted); !errors.Is(err, ErrUsed) {
		t.Fatalf("the completed guard: %v", err)
	}
	if err := c.Resolve("s", d.Attempt(), 1, ResolveAccepted); !errors.Is(err, ErrNotQuarantined) {
		t.Fatalf("second resolve: %v", err)
	}
	if err := c.Resolve("nope", 1, 1, ResolveAccepted); !errors.Is(err, ErrNotQuarantined) {
		t.Fatalf("unknown key: %v", err)
	}
	if err := c.Resolve("s", 1, 1, Resolution(7)); !errors.Is(err, ErrInvalidArgument) {
		t.Fatalf("bad resolution: %v", err)
	}
}

func TestResolve_NotAcceptedMakesAbsent(t *testing.T) {
	c, _ := manual(t)
	d, _ := reserve(t, c, "s").BeginDispatch(w1, 1)
	d.Drop()
	must(t, c.Resolve("s", d.Attempt(), 1, ResolveNotAccepted))
	reserve(t, c, "s")
}

func TestRelease_RestartsIdleDeadlineAtZero(t *testing.T) {
	c, clk := manual(t)
	l := bind(t, c, "s", w1)
	must(t, clk.AdvanceBy(9*time.Second))
	must(t, l.Release()) // deadline = 9 + 10
	must(t, clk.AdvanceBy(9*time.Second))
	l = hit(t, c, "s")
	must(t, l.Release())
	if err := l.Release(); !errors.Is(err, ErrUsed) {
		t.Fatalf("double release: %v", err)
	}
	if state(t, c, "s").Leases != 0 {
		t.Fatal("double release decremented twice")
	}
}

func TestAbandon_KeepsDeadline(t *testing.T) {
	c, clk := manual(t)
	l := bind(t, c, "s", w1) // deadline 10
	must(t, clk.AdvanceBy(9*time.Second))
	must(t, l.Abandon())
	must(t, clk.AdvanceBy(time.Second)) // 10: expired and reclaimed
	if state(t, c, "s").State != StateAbsent || c.Stats().Expirations != 1 {
		t.Fatal("abandon refreshed the deadline")
	}
}

func TestExpire_NothingLeasedExpires(t *testing.T) {
	c, clk := manual(t)
	l := bind(t, c, "s", w1)
	must(t, clk.AdvanceBy(time.Hour))
	if state(t, c, "s").State != StateBound {
		t.Fatal("a leased binding expired")
	}
	must(t, l.Release())
	must(t, clk.AdvanceBy(10*time.Second))
	if state(t, c, "s").State != StateAbsent {
		t.Fatal("idle binding did not expire")
	}
}

func TestInvalidate_SupersedesOtherLeases(t *testing.T) {
	c, _ := manual(t)
	l1 := bind(t, c, "s", w1)
	l2 := hit(t, c, "s")
	must(t, l1.Invalidate())
	if state(t, c, "s").State != StateAbsent {
		t.Fatal("not removed")
	}
	must(t, l2.Invalidate()) // superseded: acts as Release
	l3 := bind(t, c, "s", w2)
	if state(t, c, "s").Leases != 1 {
		t.Fatal("a superseded lease touched the new binding")
	}
	must(t, l3.Release())
}

func TestClose_WaitsForLastLease(t *testing.T) {
	c, _ := manual(t)
	l1 := bind(t, c, "s", w1)
	l2 := hit(t, c, "s")
	must(t, l1.Close())
	if i := state(t, c, "s"); i.State != StateBound || !i.Closing || i.Leases != 1 {
		t.Fatalf("close removed the binding while another lease is held: %+v", i)
	}
	l3 := hit(t, c, "s") // a closing binding still answers hits
	must(t, l2.Abandon())
	must(t, l3.Release())
	if state(t, c, "s").State != StateAbsent || c.Stats().Live != 0 {
		t.Fatal("not removed at the last lease")
	}
	if err := l3.Close(); !errors.Is(err, ErrUsed) {
		t.Fatalf("close after release: %v", err)
	}
}

func TestInvalidateKey(t *testing.T) {
	c, _ := manual(t)
	l := bind(t, c, "s", w1)
	ok, err := c.InvalidateKey("s")
	if !ok || err != nil {
		t.Fatal("not invalidated")
	}
	must(t, l.Release())
	reserve(t, c, "s")
	if ok, _ := c.InvalidateKey("s"); ok {
		t.Fatal("InvalidateKey removed a reservation")
	}
	if ok, _ := c.InvalidateKey("none"); ok {
		t.Fatal("InvalidateKey on an absent key")
	}
}

func TestDropStale_ReaperFencesLeasedBindings(t *testing.T) {
	c, clk := manual(t)
	l := bind(t, c, "s", w1)
	c.BumpGeneration(w1)
	must(t, clk.AdvanceBy(time.Second)) // the sweep drops it, leases or not
	if c.Stats().Live != 0 {
		t.Fatal("stale binding kept")
	}
	must(t, l.Release())
}

func TestReservationTimeout_Revokes(t *testing.T) {
	c, clk := manual(t)
	r := reserve(t, c, "s")
	must(t, clk.AdvanceBy(5*time.Second))
	if _, err := r.BeginDispatch(w1, 1); !errors.Is(err, ErrReservationLost) {
		t.Fatalf("revoked reservation dispatched: %v", err)
	}
	if err := r.Cancel(); !errors.Is(err, ErrReservationLost) {
		t.Fatalf("revoked reservation cancelled: %v", err)
	}
	reserve(t, c, "s")
}

func TestReservationTimeout_LazilyOnAccess(t *testing.T) {
	c, clk := manual(t)
	r := reserve(t, c, "s")
	clk.t.Store(int64(5 * time.Second)) // no sweep
	r2 := reserve(t, c, "s")
	if r2 == r {
		t.Fatal("same reservation")
	}
}

func TestCommitAccepted_Bridge(t *testing.T) {
	c, _ := manual(t)
	l, err := reserve(t, c, "s").CommitAccepted(w2, 1)
	must(t, err)
	if l.Target() != w2 || state(t, c, "s").State != StateBound {
		t.Fatal("not committed")
	}
	must(t, l.Release())
}

func TestAdvance_RejectsBackwardsAndOverflow(t *testing.T) {
	c, clk := manual(t)
	must(t, clk.Advance(time.Minute))
	l := bind(t, c, "s", w1)
	for _, bad := range []time.Duration{time.Second, math.MaxInt64, math.MaxInt64 - time.Second} {
		err := clk.Advance(bad)
		var ce *ClockError
		if !errors.As(err, &ce) || !errors.Is(err, ErrInvalidClock) {
			t.Fatalf("Advance(%v): %v", bad, err)
		}
	}
	if err := clk.AdvanceBy(-time.Second); !errors.Is(err, ErrInvalidClock) {
		t.Fatal("negative AdvanceBy accepted")
	}
	if err := clk.AdvanceBy(math.MaxInt64); !errors.Is(err, ErrInvalidClock) {
		t.Fatal("overflowing AdvanceBy accepted")
	}
	if clk.Now() != time.Minute || state(t, c, "s").State != StateBound {
		t.Fatal("a rejected update changed something")
	}
	must(t, clk.Advance(time.Minute)) // same time: no-op
	must(t, l.Release())
	if _, err := New[target](Config[target]{IdleTTL: time.Second, ReserveTimeout: time.Second, DispatchTimeout: time.Second, MaxEntries: 1, MaxKeyBytes: 1,
		Clock: NewManualClock(math.MaxInt64 - 10)}); !errors.Is(err, ErrInvalidConfig) {
		t.Fatalf("a clock whose deadlines overflow: %v", err)
	}
}

func TestConfig_Invalid(t *testing.T) {
	noLeaks(t)
	good := Config[target]{IdleTTL: time.Minute, ReserveTimeout: time.Minute, DispatchTimeout: time.Minute, MaxEntries: 1, MaxKeyBytes: 1}
	for name, mut := range map[string]func(*Config[target]){
		// The default clock ticks every millisecond: a shorter duration
		// cannot be told apart from zero.
		"IdleTTL":         func(c *Config[target]) { c.IdleTTL = 999 * time.Microsecond },
		"ReserveTimeout":  func(c *Config[target]) { c.ReserveTimeout = 366 * 24 * time.Hour },
		"DispatchTimeout": func(c *Config[target]) { c.DispatchTimeout = -time.Second },
		"QuarantineTTL":   func(c *Config[target]) { c.QuarantineTTL = time.Nanosecond },
		"MaxEntries":      func(c *Config[target]) { c.MaxEntries = -1 },
		"MaxKeyBytes":     func(c *Config[target]) { c.MaxKeyBytes = -1 },
		"FirstAttempt":    func(c *Config[target]) { c.FirstAttempt = MaxFirstAttempt + 1 },
	} {
		cfg := good
		mut(&cfg)
		_, err := New[target](cfg)
		var ce *ConfigError
		if !errors.As(err, &ce) || ce.Field != name || !errors.Is(err, ErrInvalidConfig) {
			t.Errorf("%s: got %v", name, err)
		}
	}
}

func TestKeys_Validated(t *testing.T) {
	c, _ := manual(t, func(c *Config[target]) { c.MaxKeyBytes = 8 })
	if _, err := c.TryAcquire(""); !errors.Is(err, ErrKeyEmpty) {
		t.Fatalf("empty: %v", err)
	}
	_, err := c.Acquire(context.Background(), "123456789")
	var ke *KeyTooLongError
	if !errors.As(err, &ke) || ke.Len != 9 || ke.MaxKeyBytes != 8 {
		t.Fatalf("long: %v", err)
	}
	if _, err := c.Query("123456789"); !errors.Is(err, ErrKeyTooLong) {
		t.Fatal("Query accepted a long key")
	}
	if _, err := c.InvalidateKey(""); !errors.Is(err, ErrKeyEmpty) {
		t.Fatal("InvalidateKey accepted an empty key")
	}
	if err := (Lease[target]{}).Release(); !errors.Is(err, ErrInvalidArgument) {
		t.Fatal("zero lease released")
	}
}

func TestClose_WakesWaitersAndRefuses(t *testing.T) {
	c, _ := manual(t)
	reserve(t, c, "s")
	got := waiter(c, "s")
	must(t, c.Close())
	if w := recvWithin(t, got, wakeLimit, "the waiter's answer after Close"); !errors.Is(w.err, ErrClosed) {
		t.Fatalf("waiter: %v", w.err)
	}
	if _, err := c.TryAcquire("t"); !errors.Is(err, ErrClosed) {
		t.Fatalf("after close: %v", err)
	}
	must(t, c.Close())
}

func TestReaper_ExpiresAndRestartsAfterPanic(t *testing.T) {
	noLeaks(t)
	c, err := New[target](Config[target]{IdleTTL: time.Second, ReserveTimeout: time.Second, DispatchTimeout: time.Second, MaxEntries: 8, MaxKeyBytes: 8})
	must(t, err)
	defer c.Close()
	c.testReaperPanic.Store(true)
	l := bind(t, c, "s", w1)
	must(t, l.Release())
	deadline := time.Now().Add(5 * time.Second)
	for c.Stats().Expirations == 0 || c.Stats().ReaperRestarts == 0 {
		if time.Now().After(deadline) {
			t.Fatalf("reaper did not restart and expire: %+v", c.Stats())
		}
		time.Sleep(20 * time.Millisecond)
	}
	if c.Stats().Live != 0 {
		t.Fatal("expired binding still live")
	}
}

func TestObserver_SeesColdPathEvents(t *testing.T) {
	var mu sync.Mutex
	var kinds []EventKind
	c, _ := manual(t, func(c *Config[target]) {
		c.Observer = func(e Event[target]) { mu.Lock(); kinds = append(kinds, e.Kind); mu.Unlock() }
	})
	d, _ := reserve(t, c, "s").BeginDispatch(w1, 1)
	_, _ = d.Complete(Ambiguous)
	must(t, c.Resolve("s", d.Attempt(), 1, ResolveAccepted))
	mu.Lock()
	defer mu.Unlock()
	want := []EventKind{EventReserved, EventQuarantined, EventResolved}
	if len(kinds) != len(want) {
		t.Fatalf("events %v, want %v", kinds, want)
	}
	for i := range want {
		if kinds[i] != want[i] {
			t.Fatalf("events %v, want %v", kinds, want)
		}
	}
}

func TestHotPath_AllocatesNothing(t *testing.T) {
	if raceEnabled {
		t.Skip("the race detector allocates")
	}
	c, _ := manual(t)
	l := bind(t, c, "s", w1)
	defer l.Release()
	allocs := testing.AllocsPerRun(1000, func() {
		a, err := c.TryAcquire("s")
		if err != nil || !a.Hit() {
			t.Fatal("miss")
		}
		if err := a.Lease.Release(); err != nil {
			t.Fatal(err)
		}
	})
	if allocs != 0 {
		t.Fatalf("hit + release allocates %.1f times", allocs)
	}
	allocs = testing.AllocsPerRun(1000, func() {
		a, err := c.TryAcquire("s")
		if err != nil || !a.Hit() {
			t.Fatal("miss")
		}
		a.Done()
	})
	if allocs != 0 {
		t.Fatalf("hit + Done allocates %.1f times", allocs)
	}
}

// TestConcurrentLeasesBalance hammers one binding from many goroutines; the
// lease count must return to zero and never double-decrement.
func TestConcurrentLeasesBalance(t *testing.T) {
	c, _ := manual(t)
	l := bind(t, c, "s", w1)
	must(t, l.Release())
	var wg sync.WaitGroup
	for g := 0; g < 8; g++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			// Every Acquire should hit; one that waits instead gives up
			// after wakeLimit rather than hang the test.
			ctx, cancel := context.WithTimeout(context.Background(), wakeLimit)
			defer cancel()
			for i := 0; i < 2000; i++ {
				a, err := c.Acquire(ctx, "s")
				if err != nil || !a.Hit() {
					t.Error("miss", err)
					return
				}
				_ = a.Lease.Release()
				_ = a.Lease.Release() // second use must not decrement
			}
		}()
	}
	wg.Wait()
	if i := state(t, c, "s"); i.Leases != 0 || i.State != StateBound {
		t.Fatalf("info %+v", i)
	}
}

// TestAcquire_FreshKeyFloodStaysBounded: an attacker sending fresh session
// ids fills the table but cannot grow it past MaxEntries.
func TestAcquire_FreshKeyFloodStaysBounded(t *testing.T) {
	c, _ := manual(t, func(c *Config[target]) { c.MaxEntries = 64 })
	var wg sync.WaitGroup
	for g := 0; g < 4; g++ {
		wg.Add(1)
		go func(g int) {
			defer wg.Done()
			for i := 0; i < 5000; i++ {
				a, err := c.TryAcquire(fmt.Sprintf("attacker-%d-%d", g, i))
				if err == nil {
					_, _ = a.Reservation.CommitAccepted(w1, 1)
				} else if !errors.Is(err, ErrCapacity) {
					t.Error(err)
					return
				}
			}
		}(g)
	}
	wg.Wait()
	n := 0
	c.table.each(func(*entry[target]) bool { n++; return true })
	if n > 64 || c.Stats().Live != 64 || c.Stats().CapacityRejections != 4*5000-64 {
		t.Fatalf("table holds %d entries, stats %+v", n, c.Stats())
	}
}

// TestImportsOnlyStandardLibrary: a router vendoring this package pulls in
// nothing else.
func TestImportsOnlyStandardLibrary(t *testing.T) {
	files, err := filepath.Glob("*.go")
	if err != nil {
		t.Fatal(err)
	}
	fset := token.NewFileSet()
	for _, name := range files {
		if strings.HasSuffix(name, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, name, nil, parser.ImportsOnly)
		if err != nil {
			t.Fatal(err)
		}
		for _, imp := range f.Imports {
			path := strings.Trim(imp.Path.Value, `"`)
			if first, _, _ := strings.Cut(path, "/"); strings.Contains(first, ".") {
				t.Errorf("%s imports %s, which is not in the standard library", name, path)
			}
		}
	}
}

// TestResolve_AcceptedAfterBumpIsFencedAtBirth: found by the side-by-side
// model test. A quarantined attempt resolved Accepted after its target's
// generation moved on binds a stale binding; it reads as absent and must
// not hold a slot.
// A quarantine whose target's generation moved on is dropped (the binding
// it could produce would be stale at birth): a Resolve finds nothing to
// settle, and the slot is free.
func TestResolve_AfterBumpFindsTheQuarantineDropped(t *testing.T) {
	c, _ := manual(t, func(c *Config[target]) { c.MaxEntries = 1 })
	d, _ := reserve(t, c, "k0").BeginDispatch(w1, 1)
	d.Drop()
	c.BumpGeneration(w1)
	if err := c.Resolve("k0", d.Attempt(), 1, ResolveAccepted); !errors.Is(err, ErrNotQuarantined) {
		t.Fatalf("Resolve of a dropped quarantine: %v", err)
	}
	if state(t, c, "k0").State != StateAbsent || c.Stats().Live != 0 {
		t.Fatal("a quarantine whose generation moved on holds a slot")
	}
	reserve(t, c, "k1")
}

// TestAdvance_ConcurrentAdvanceByAllTakeEffect: found by the Porcupine run.
// AdvanceBy read the time and advanced in two steps, so a concurrent
// AdvanceBy could make it "go backwards".
func TestAdvance_ConcurrentAdvanceByAllTakeEffect(t *testing.T) {
	_, clk := manual(t)
	var wg sync.WaitGroup
	for g := 0; g < 4; g++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < 500; i++ {
				if err := clk.AdvanceBy(time.Second); err != nil {
					t.Error(err)
					return
				}
			}
		}()
	}
	wg.Wait()
	if clk.Now() != 2000*time.Second {
		t.Fatalf("clock at %v, want 2000s", clk.Now())
	}
}

// TestAcquire_LazyTimeoutThenReserveKeepsCount: found by the Porcupine run.
// An Acquire that timed out a reservation lazily went on to reserve the
// detached entry, leaking a capacity slot.
func TestAcquire_LazyTimeoutThenReserveKeepsCount(t *testing.T) {
	c, clk := manual(t, func(c *Config[target]) { c.MaxEntries = 1 })
	r := reserve(t, c, "s")
	clk.t.Store(int64(5 * time.Second)) // past the init deadline, without a sweep
	r2 := reserve(t, c, "s")            // times r out lazily, then reserves afresh
	if c.Stats().Live != 1 {
		t.Fatalf("live %d, want 1", c.Stats().Live)
	}
	must(t, r2.Cancel())
	if _, err := r.BeginDispatch(w1, 1); !errors.Is(err, ErrReservationLost) {
		t.Fatal(err)
	}
	if c.Stats().Live != 0 {
		t.Fatalf("live %d after cancel, want 0: a slot leaked", c.Stats().Live)
	}
	reserve(t, c, "other")
}

// TestRemove_FreesSlotBeforeUnlinking: found by Porcupine under -race.
// removeLocked unlinked the entry before freeing its slot; in between, a
// fresh entry for the same key saw a full table. The hook runs at that very
// point: the key must be reservable there.
func TestRemove_FreesSlotBeforeUnlinking(t *testing.T) {
	c, _ := manual(t, func(c *Config[target]) { c.MaxEntries = 1 })
	l := bind(t, c, "s", w1)
	var got error
	c.testAfterUnlink = func(key string) {
		c.testAfterUnlink = nil
		a, err := c.TryAcquire(key)
		if got = err; err == nil {
			got = a.Reservation.Cancel()
		}
	}
	must(t, l.Invalidate())
	if got != nil {
		t.Fatalf("reserving the key right after its entry left the table: %v", got)
	}
}

// TestSweep_HintNotRaisedOverConcurrentNote: found by Porcupine under
// -race. A sweep passed a leased binding; the lease was then abandoned with
// a deadline already past; the sweep then raised the next-expiry hint over
// it, so a full table refused although the binding had expired. A sweep now
// raises the hint only if no deadline was noted while it ran.
func TestSweep_HintNotRaisedOverConcurrentNote(t *testing.T) {
	c, clk := manual(t, func(c *Config[target]) { c.MaxEntries = 1 })
	l := bind(t, c, "a", w1) // deadline 10s, leased
	clk.t.Store(int64(20 * time.Second))
	c.sweeping.Add(1) // a sweep is in progress
	defer c.sweeping.Add(-1)
	notes := c.noteCount()
	// The sweep's scan happens here and sees "a" leased: nothing expirable.
	must(t, l.Abandon()) // idle now, deadline 10s <= now 20s: expired, noted
	c.publishHint(math.MaxInt64, notes)
	if !c.sweepMayHelp(c.now()) {
		t.Fatal("the hint hides an expired binding")
	}
	reserve(t, c, "b") // the capacity path reclaims "a"
}

// TestLeaseCell_SingleUseAcrossCellAndSlotLeases: the first hit on an idle
// binding owns its lease cell, a concurrent one gets a pooled slot. Each
// ends exactly once, whatever the order and whoever owns the cell next; a
// second end (of the lease or a copy) is ErrUsed and changes no count.
func TestLeaseCell_SingleUseAcrossCellAndSlotLeases(t *testing.T) {
	c, a, b := cellAndSlot(t)
	if a.s != nil || b.s == nil {
		t.Fatalf("cell owner %v, slot lease %v", a.s, b.s)
	}
	aCopy := a
	must(t, a.Release())
	c2 := hit(t, c, "s") // the freed cell, a new epoch
	if c2.s != nil || c2.t == a.t {
		t.Fatalf("second cell lease %+v after %+v", c2, a)
	}
	for name, end := range map[string]func() error{
		"Release": aCopy.Release, "Abandon": aCopy.Abandon, "Close": aCopy.Close, "Invalidate": aCopy.Invalidate,
	} {
		wantUsed(t, end(), name+" of an ended cell lease")
	}
	if i := state(t, c, "s"); i.Leases != 2 {
		t.Fatalf("leases %d, want 2 (b and c2)", i.Leases)
	}
	must(t, b.Release())
	wantUsed(t, b.Release(), "double release of a slot lease")
	must(t, c2.Release())
	wantUsed(t, c2.Abandon(), "double end of the second cell lease")
	if i := state(t, c, "s"); i.Leases != 0 || i.State != StateBound {
		t.Fatalf("info %+v", i)
	}
	wantHits(t, c, 3)
}

// TestLeaseCell_EndsOnSupersededBinding: a cell lease on a binding that was
// invalidated ends once (nil), then is ErrUsed; the key's next binding is
// untouched by it.
func TestLeaseCell_EndsOnSupersededBinding(t *testing.T) {
	c, a, b := cellAndSlot(t)
	must(t, b.Invalidate()) // removes the binding; a is superseded
	l := bind(t, c, "s", w2)
	must(t, a.Release())
	wantUsed(t, a.Release(), "double release on a superseded binding")
	if i := state(t, c, "s"); i.Leases != 1 || i.Target != w2 {
		t.Fatalf("info %+v", i)
	}
	must(t, l.Release())
	wantHits(t, c, 2)
}

// TestLeaseCell_CloseByCellOwnerWaitsForSlotLease: the final request owns
// the cell; Close frees the cell at once but removes the binding only when
// the slot lease ends.
func TestLeaseCell_CloseByCellOwnerWaitsForSlotLease(t *testing.T) {
	c, a, b := cellAndSlot(t)
	must(t, a.Close())
	if i := state(t, c, "s"); i.State != StateBound || i.Leases != 1 {
		t.Fatalf("closed early: %+v", i)
	}
	d := hit(t, c, "s") // a closing binding still answers hits: d owns the cell
	must(t, b.Release())
	if i := state(t, c, "s"); i.State != StateBound {
		t.Fatalf("removed while d holds a lease: %+v", i)
	}
	must(t, d.Release())
	if i := state(t, c, "s"); i.State != StateAbsent {
		t.Fatalf("not removed at the last lease: %+v", i)
	}
	wantUsed(t, a.Release(), "release after close")
}

// TestAcquire_TooManyLeases: a binding holds at most MaxLeases leases (the
// count's bits in the binding word); one more is refused with
// ErrTooManyLeases and changes nothing, and ending one makes room again.
func TestAcquire_TooManyLeases(t *testing.T) {
	c, _ := manual(t)
	ls := make([]Lease[target], 0, MaxLeases)
	ls = append(ls, bind(t, c, "s", w1))
	for len(ls) < MaxLeases {
		l, ok := c.hit("s")
		if !ok {
			t.Fatalf("hit %d missed", len(ls))
		}
		ls = append(ls, l)
	}
	if _, err := c.TryAcquire("s"); !errors.Is(err, ErrTooManyLeases) {
		t.Fatalf("lease %d: %v", MaxLeases+1, err)
	}
	if i := state(t, c, "s"); i.Leases != MaxLeases || i.State != StateBound {
		t.Fatalf("info %+v", i)
	}
	must(t, ls[1].Release()) // the cell's owner
	must(t, hit(t, c, "s").Release())
	for _, l := range append(ls[:1], ls[2:]...) {
		must(t, l.Release())
	}
	if i := state(t, c, "s"); i.Leases != 0 || i.State != StateBound {
		t.Fatalf("info %+v", i)
	}
	wantHits(t, c, MaxLeases)
}

// wantUsed fails the test unless err is ErrUsed (what names the end).
func wantUsed(t *testing.T, err error, what string) {
	t.Helper()
	if !errors.Is(err, ErrUsed) {
		t.Fatalf("%s: %v, want ErrUsed", what, err)
	}
}

// cellAndSlot binds "s" and takes two leases on it: the first owns the
// binding's lease cell, the second gets a pooled slot.
func cellAndSlot(t *testing.T) (*Coordinator[target], Lease[target], Lease[target]) {
	c, _ := manual(t)
	must(t, bind(t, c, "s", w1).Release())
	return c, hit(t, c, "s"), hit(t, c, "s")
}

// wantHits fails the test unless Stats counts n hits, live bindings' and
// dead ones' alike.
func wantHits(t *testing.T, c *Coordinator[target], n int64) {
	t.Helper()
	if s := c.Stats(); s.Hits != n {
		t.Fatalf("hits %d, want %d", s.Hits, n)
	}
}

// waited is what a waiter's Acquire returned.
type waited struct {
	a   Acquisition[target]
	err error
}

// waiter starts Acquire(key) in a goroutine and returns once it waits (the
// key is being initialized), or after wakeLimit if it never does; its
// answer arrives on the channel (receive it with recvWithin).
func waiter(c *Coordinator[target], key string) <-chan waited {
	before := c.Stats().Waits
	got := make(chan waited, 1)
	go func() {
		a, err := c.Acquire(context.Background(), key)
		got <- waited{a, err}
	}()
	for start := time.Now(); c.Stats().Waits == before && time.Since(start) < wakeLimit; {
		time.Sleep(time.Millisecond)
	}
	return got
}

// recorder is an Observer that keeps every event.
type recorder struct {
	mu  sync.Mutex
	evs []Event[target]
}

func (r *recorder) observe(ev Event[target]) { r.mu.Lock(); r.evs = append(r.evs, ev); r.mu.Unlock() }

func (r *recorder) kinds() []EventKind {
	r.mu.Lock()
	defer r.mu.Unlock()
	var ks []EventKind
	for i, ev := range r.evs {
		if i > 0 && ev.Seq != r.evs[i-1].Seq+1 {
			panic(fmt.Sprintf("event %d has Seq %d after %d", i, ev.Seq, r.evs[i-1].Seq))
		}
		ks = append(ks, ev.Kind)
	}
	return ks
}

func wantKinds(t *testing.T, r *recorder, want ...EventKind) {
	t.Helper()
	got := r.kinds()
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("events %v, want %v", got, want)
	}
}

// With a clock that moves without sweeping (Set), every reader that finds an
// idle binding past its deadline expires it itself, with its event, before
// it reports it gone; an in-place re-initialization reports the expiry
// before the new reservation.
func TestSet_LazyExpiryIsReportedByWhoeverFindsIt(t *testing.T) {
	var rec recorder
	c, clk := manual(t, func(c *Config[target]) { c.Observer = rec.observe })
	must(t, bind(t, c, "q", w1).Release())
	must(t, bind(t, c, "i", w1).Release())
	must(t, bind(t, c, "a", w1).Release())
	rec.mu.Lock()
	rec.evs = nil
	rec.mu.Unlock()
	must(t, clk.Set(20*time.Second)) // past every idle deadline; nothing swept
	if n := c.live.Load(); n != 3 {
		t.Fatalf("Set swept: %d entries hold a slot", n)
	}
	if i := state(t, c, "q"); i.State != StateAbsent {
		t.Fatalf("Query: %v", i.State)
	}
	if removed, err := c.InvalidateKey("i"); removed || err != nil {
		t.Fatalf("InvalidateKey on an expired binding: %v %v", removed, err)
	}
	r := reserve(t, c, "a")
	wantKinds(t, &rec, EventExpired, EventExpired, EventExpired, EventReserved)
	if c.Stats().Live != 1 || c.Stats().Expirations != 3 || c.live.Load() != 1 {
		t.Fatalf("stats %+v", c.Stats())
	}
	must(t, r.Cancel())
	clk.Reclaim() // nothing left to reclaim
	wantKinds(t, &rec, EventExpired, EventExpired, EventExpired, EventReserved, EventRemoved)
}

func TestReclaim_SweepsAtTheCurrentTime(t *testing.T) {
	c, clk := manual(t)
	must(t, bind(t, c, "s", w1).Release())
	must(t, clk.Set(10*time.Second))
	if c.live.Load() != 1 {
		t.Fatal("Set reclaimed")
	}
	clk.Reclaim()
	if c.live.Load() != 0 || c.stats.expirations.Load() != 1 {
		t.Fatalf("after Reclaim: %d live, %d expired", c.live.Load(), c.stats.expirations.Load())
	}
	if err := clk.Set(5 * time.Second); !errors.Is(err, ErrInvalidClock) || clk.Now() != 10*time.Second {
		t.Fatalf("Set backwards: %v, now %v", err, clk.Now())
	}
}

// InvalidateKey on a live binding removes it and reports it, with the
// binding's version, even while a lease is held.
func TestInvalidateKey_LeasedBindingReportsItsVersion(t *testing.T) {
	var rec recorder
	c, _ := manual(t, func(c *Config[target]) { c.Observer = rec.observe })
	l := bind(t, c, "s", w1)
	if removed, err := c.InvalidateKey("s"); !removed || err != nil {
		t.Fatalf("InvalidateKey: %v %v", removed, err)
	}
	wantKinds(t, &rec, EventReserved, EventCommitted, EventRemoved)
	if ev := rec.evs[2]; ev.Attempt != l.Version() || ev.Generation != 1 {
		t.Fatalf("Removed event %+v, want version %d", ev, l.Version())
	}
	must(t, l.Release()) // superseded: only the lease ends
}

// A binding stale at birth (its target bumped while the attempt was in
// flight) is reported Committed, then Removed, so the next Reserved follows
// an end.
func TestObserver_StaleAtBirthIsReportedRemoved(t *testing.T) {
	var rec recorder
	c, _ := manual(t, func(c *Config[target]) { c.Observer = rec.observe })
	d, err := reserve(t, c, "s").BeginDispatch(w1, 1)
	must(t, err)
	c.BumpGeneration(w1)
	if _, err := d.Complete(Accepted); !errors.Is(err, ErrStaleAtBirth) {
		t.Fatalf("Complete: %v, want ErrStaleAtBirth", err)
	}
	reserve(t, c, "s")
	wantKinds(t, &rec, EventReserved, EventCommitted, EventRemoved, EventReserved)
}

// wantIs fails unless err matches target.
func wantIs(t *testing.T, err, target error) {
	t.Helper()
	if !errors.Is(err, target) {
		t.Fatalf("error %v, want %v", err, target)
	}
}
