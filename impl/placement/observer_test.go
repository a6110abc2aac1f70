package placement

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"
	"time"
)

// within runs f and fails the test, naming what, unless f returns within d
// (a call that blocks on a lock a panic left held). f runs on its own
// goroutine; a panic in it is reported as an error, not re-raised.
func within(t *testing.T, d time.Duration, what string, f func()) {
	t.Helper()
	done := make(chan any, 1)
	go func() {
		defer func() { done <- recover() }()
		f()
	}()
	select {
	case p := <-done:
		if p != nil {
			t.Errorf("%s: a panic reached the caller: %v", what, p)
		}
	case <-time.After(d):
		t.Fatalf("%s: still blocked after %v (a lock left held?)", what, d)
	}
}

// panicky is an Observer that panics on every event of one kind.
type panicky struct {
	kind   EventKind
	panics atomic.Int64
}

func (p *panicky) observe(ev Event[target]) {
	if ev.Kind == p.kind {
		p.panics.Add(1)
		panic(fmt.Sprintf("observer: %v", ev.Kind))
	}
}

// An Observer that panics never leaves a lock held, never reaches the
// caller and never stops the coordinator: for every event kind, an Observer
// that panics on it sees that kind raised on the request paths and by the
// manual clock's sweep; each panic is recovered and counted, the change it
// reported goes ahead, the key stays usable, and Close returns.
func TestContract_ObserverPanicOnEveryEventKind(t *testing.T) {
	const d = time.Second
	for kind := EventReserved; kind <= EventQuarantineDropped; kind++ {
		ok := t.Run(kind.String(), func(t *testing.T) {
			p := &panicky{kind: kind}
			c, clk := manual(t, func(c *Config[target]) {
				c.Observer, c.MaxEntries = p.observe, 2
				c.QuarantineTTL = 30 * time.Second
			})
			step := func(what string, f func()) { t.Helper(); within(t, d, what, f) }
			usable := func(key string) {
				t.Helper()
				step("Query("+key+")", func() { _, _ = c.Query(key) })
				step("Stats", func() { _ = c.Stats() })
			}
			// Reserved, RolledBack, Committed (a request's path), then the
			// binding expires on an Advance (the sweep): Expired.
			var r *Reservation[target]
			step("TryAcquire", func() { r = reserve(t, c, "a") })
			usable("a")
			var dsp *Dispatch[target]
			step("BeginDispatch", func() { dsp, _ = r.BeginDispatch(w1, 1) })
			step("Complete(DefinitelyNotAccepted)", func() { _, _ = dsp.Complete(DefinitelyNotAccepted) })
			usable("a")
			var l Lease[target]
			step("Complete(Accepted)", func() {
				dsp, _ = r.BeginDispatch(w1, 1)
				l, _ = dsp.Complete(Accepted)
			})
			usable("a")
			step("Release", func() { must(t, l.Release()) })
			step("Advance (sweep)", func() { must(t, clk.AdvanceBy(10*time.Second)) })
			usable("a")
			// Removed (a reservation cancelled), then Quarantined and
			// Resolved, then QuarantineExpired by a sweep.
			step("Cancel", func() { must(t, reserve(t, c, "b").Cancel()) })
			usable("b")
			quarantineB := func() *Dispatch[target] {
				var q *Dispatch[target]
				step("quarantine b", func() {
					q, _ = reserve(t, c, "b").BeginDispatch(w1, c.Generation(w1))
					_, _ = q.Complete(Ambiguous)
				})
				return q
			}
			q := quarantineB()
			usable("b")
			step("Resolve", func() { _ = c.Resolve("b", q.Attempt(), q.Generation(), ResolveNotAccepted) })
			usable("b")
			quarantineB()
			step("Advance past QuarantineTTL", func() { must(t, clk.AdvanceBy(30*time.Second)) })
			usable("b")
			// QuarantineDropped by a bump, found by a request.
			quarantineB()
			c.BumpGeneration(w1)
			step("TryAcquire after a bump", func() { _, _ = c.TryAcquire("b") })
			usable("b")
			// CapacityRejected: a full table (b reserved, c bound).
			step("bind c", func() { must(t, bind(t, c, "c", w2).Release()) })
			step("TryAcquire on a full table", func() { _, _ = c.TryAcquire("d") })
			usable("d")
			// Every key still works, and the panics were counted.
			for _, key := range []string{"a", "b", "c", "d"} {
				step("Acquire "+key+" again", func() {
					a, _ := c.TryAcquire(key)
					a.Done()
				})
			}
			if p.panics.Load() == 0 {
				t.Fatalf("no %v event was raised: the scenario does not reach it", kind)
			}
			if got := c.Stats().ObserverPanics; got != p.panics.Load() {
				t.Errorf("Stats.ObserverPanics %d, the Observer panicked %d times", got, p.panics.Load())
			}
			step("Close", func() { must(t, c.Close()) })
		})
		if !ok {
			return // one wedged key is enough: fail fast
		}
	}
}

// The reaper's sweep survives a panicking Observer: it goes on reclaiming,
// the key stays usable, and Close returns (a sweep that left an entry's
// lock held would block the next sweep, and Close waits for the reaper).
func TestContract_ObserverPanicInTheReaper(t *testing.T) {
	noLeaks(t)
	p := &panicky{kind: EventExpired}
	c, err := New(Config[target]{IdleTTL: 20 * time.Millisecond, Observer: p.observe})
	must(t, err)
	for i := 0; i < 3; i++ {
		key := fmt.Sprint("k", i)
		within(t, 2*time.Second, "bind "+key, func() { must(t, bind(t, c, key, w1).Release()) })
		// Wait for the reaper (not Stats, which would sweep itself) to
		// expire the binding, with the Observer panicking.
		for start := time.Now(); p.panics.Load() <= int64(i); {
			if time.Since(start) > 2*time.Second {
				t.Fatalf("the reaper never expired %s (panics so far: %d)", key, p.panics.Load())
			}
			time.Sleep(time.Millisecond)
		}
		within(t, 2*time.Second, "Acquire "+key, func() {
			a, err := c.Acquire(context.Background(), key)
			must(t, err)
			a.Done()
		})
	}
	within(t, 2*time.Second, "Close", func() { must(t, c.Close()) })
	if got := c.Stats().ObserverPanics; got < 3 {
		t.Fatalf("ObserverPanics %d, want at least 3", got)
	}
}
