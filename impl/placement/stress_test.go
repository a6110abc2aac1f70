package placement

import (
	"context"
	"errors"
	"testing"
	"time"
)

// Regression tests for the concurrency review's defects 3 and 6 (issue 11),
// which need the package's internals; the stress tests for defects 1, 2, 4
// and 5 use only the public API and live in linearizability/stress_test.go.

// jump moves a manual clock forward without reclaiming anything, the way the
// runtime clock moves between two reaper ticks.
func jump(clk *ManualClock, by time.Duration) {
	if err := clk.Set(clk.Now() + by); err != nil {
		panic(err)
	}
}

// Defect 3: the lease cell's epoch wraps. Preset near the wrap, cell leases
// must stay single-use, the cell must be free at zero leases, and the hit
// count must not go backwards.
func TestLeaseCell_EpochWrap(t *testing.T) {
	c, _ := manual(t)
	l := bind(t, c, "s", w1)
	must(t, l.Release())
	b := l.b
	const near = (1<<(64-epochShift) - 3) << epochShift
	b.word.Store(near) // idle, cell free, the epoch three takes from the wrap
	base := c.Stats().Hits
	var last int64
	for i := 0; i < 6; i++ {
		a := hit(t, c, "s")
		if a.s != nil {
			t.Fatalf("take %d: the cell was busy at zero leases (word %#x)", i, b.word.Load())
		}
		must(t, a.Release())
		if err := a.Release(); !errors.Is(err, ErrUsed) {
			t.Fatalf("take %d: a second Release returned %v, want ErrUsed (word %#x)", i, err, b.word.Load())
		}
		w := b.word.Load()
		if leases(w) != 0 || w&cellBit != 0 || w&(closingBit|deadBit) != 0 {
			t.Fatalf("take %d: word %#x after release, want idle with the cell free", i, w)
		}
		h := c.Stats().Hits - base
		if h < last {
			t.Fatalf("take %d: Stats().Hits went backwards (%d after %d)", i, h, last)
		}
		last = h
	}
	if last < 6 {
		t.Fatalf("Stats counted %d of 6 hits across the wrap", last)
	}
}

// Defect 6: Close during the capacity path's sweep must not leave the fresh
// entry that Acquire created linked in the table.
func TestAcquire_CloseDuringCapacitySweepUnlinksFreshEntry(t *testing.T) {
	noLeaks(t)
	clk := NewManualClock(0)
	var c *Coordinator[target]
	closeOnExpiry := func(ev Event[target]) {
		if ev.Kind == EventExpired {
			c.Close() // Close needs no entry lock, so this is safe here
		}
	}
	c, err := New[target](Config[target]{IdleTTL: time.Second, ReserveTimeout: time.Second, DispatchTimeout: time.Second, MaxEntries: 1,
		MaxKeyBytes: 16, Clock: clk, Observer: closeOnExpiry})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	must(t, bind(t, c, "old", w1).Release())
	jump(clk, 2*time.Second) // "old" expired; the table is full until a sweep
	_, err = c.Acquire(context.Background(), "fresh")
	if !errors.Is(err, ErrClosed) {
		t.Fatalf("Acquire: %v, want ErrClosed", err)
	}
	if _, ok := c.table.load("fresh"); ok {
		t.Fatal("the fresh entry stayed linked in the table after Acquire returned ErrClosed")
	}
	n := 0
	c.table.each(func(*entry[target]) bool { n++; return true })
	if n != 0 {
		t.Fatalf("%d entries linked after the sweep and Close, want 0", n)
	}
}
