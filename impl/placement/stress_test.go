package placement

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// Stress tests, one per defect found by the concurrency review (issue 11).
// Each runs many goroutines at GOMAXPROCS 8 (more than this machine's
// cores, so goroutines are preempted inside their compare-and-swap windows)
// for stressFor: 1 s per test by default (make test), longer in the
// campaign (PLACEMENT_STRESS=2m).

// stressFor is how long each stress test runs.
func stressFor() time.Duration {
	if d, err := time.ParseDuration(os.Getenv("PLACEMENT_STRESS")); err == nil && d > 0 {
		return d
	}
	if testing.Short() {
		return 300 * time.Millisecond
	}
	return time.Second
}

// stress runs every worker on its own goroutine at GOMAXPROCS 8 until the
// budget runs out or one of them fails, and reports the seed it used.
func stress(t *testing.T, workers ...func(rng *rand.Rand, stop *atomic.Bool)) {
	t.Helper()
	seed := uint64(time.Now().UnixNano())
	if s, err := fmt.Sscan(os.Getenv("PLACEMENT_STRESS_SEED"), &seed); s == 1 && err == nil {
		t.Logf("seed %d (from PLACEMENT_STRESS_SEED)", seed)
	} else {
		t.Logf("seed %d (rerun with PLACEMENT_STRESS_SEED=%d)", seed, seed)
	}
	prev := runtime.GOMAXPROCS(8)
	defer runtime.GOMAXPROCS(prev)
	var stop atomic.Bool
	var wg sync.WaitGroup
	for i, w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			w(rand.New(rand.NewPCG(seed, uint64(i))), &stop)
		}()
	}
	deadline := time.Now().Add(stressFor())
	for !stop.Load() && time.Now().Before(deadline) && !t.Failed() {
		time.Sleep(time.Millisecond)
	}
	stop.Store(true)
	wg.Wait()
}

// jump moves a manual clock forward without reclaiming anything, the way the
// runtime clock moves between two reaper ticks: expired entries stay in the
// table until something touches them.
func jump(clk *ManualClock, by time.Duration) {
	if err := clk.Set(clk.Now() + by); err != nil {
		panic(err) // only this goroutine moves the clock: it cannot go backwards
	}
}

// resurrection watches one key for a binding version reported gone (Query
// read it as not bound) and later reported alive (a Query reading it Bound,
// or a hit on it). A version that is gone stays gone: expiry, removal and
// supersession are final, so such a history is not linearizable.
type resurrection struct {
	committed atomic.Uint64 // the newest version whose commit returned
	dead      atomic.Uint64 // every version up to this one was seen gone
}

func (r *resurrection) commit(v uint64) {
	for {
		cur := r.committed.Load()
		if v <= cur || r.committed.CompareAndSwap(cur, v) {
			return
		}
	}
}

// gone records that an observation which started when committed read
// before found no binding: every version committed before it is gone.
func (r *resurrection) gone(before uint64) {
	for {
		cur := r.dead.Load()
		if before <= cur || r.dead.CompareAndSwap(cur, before) {
			return
		}
	}
}

// expiryRace runs hitters (each holds its lease for up to holdFor yields),
// a clock that jumps without sweeping, and Query observers, and fails on a
// resurrected version or a Query that reads a lease held across its whole
// call as not bound.
func expiryRace(t *testing.T, hitters, holdFor, spin int, step time.Duration) {
	clk := NewManualClock(0)
	c, err := New[target](Config{IdleTTL: time.Second, InitTimeout: time.Hour, MaxEntries: 16,
		MaxKeyBytes: 16, Clock: clk})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	const key = "s"
	var res resurrection
	var hits, gones, rebinds atomic.Int64
	// held is a lease a hitter holds right now (a fresh record per hold).
	type hold struct{ v uint64 }
	var held atomic.Pointer[hold]
	hitter := func(rng *rand.Rand, stop *atomic.Bool) {
		for !stop.Load() {
			dead := res.dead.Load()
			a, err := c.TryAcquire(key)
			switch {
			case errors.Is(err, ErrWouldWait):
				runtime.Gosched()
				continue
			case err != nil:
				t.Error("acquire:", err)
				stop.Store(true)
				return
			case a.Reservation != nil:
				l, err := a.Reservation.CommitAccepted(w1, 1)
				if err != nil {
					continue // the reservation timed out meanwhile
				}
				res.commit(l.Version())
				rebinds.Add(1)
				_ = l.Release()
				continue
			}
			v := a.Lease.Version()
			if v <= dead {
				t.Errorf("a hit took a lease on version %d, which a Query had already read as gone (up to %d)", v, dead)
				stop.Store(true)
			}
			hits.Add(1)
			if holdFor > 0 {
				h := &hold{v: v}
				held.Store(h)
				for i := rng.IntN(holdFor); i > 0; i-- {
					runtime.Gosched()
				}
				held.CompareAndSwap(h, nil)
			}
			_ = a.Lease.Release()
		}
	}
	clock := func(rng *rand.Rand, stop *atomic.Bool) {
		for !stop.Load() {
			for i := rng.IntN(spin); i > 0; i-- {
				runtime.Gosched()
			}
			jump(clk, step)
		}
	}
	observer := func(rng *rand.Rand, stop *atomic.Bool) {
		for !stop.Load() {
			before, dead, leased := res.committed.Load(), res.dead.Load(), held.Load()
			i, err := c.Query(key)
			if err != nil {
				t.Error(err)
				stop.Store(true)
				return
			}
			switch {
			case i.State != StateBound:
				res.gone(before)
				gones.Add(1)
				if leased != nil && held.Load() == leased {
					t.Errorf("Query read %v while version %d was leased across the whole call", i.State, leased.v)
					stop.Store(true)
				}
			case i.Attempt <= dead:
				t.Errorf("Query read version %d as Bound (leases %d) after a Query had read it gone", i.Attempt, i.Leases)
				stop.Store(true)
			}
		}
	}
	workers := []func(*rand.Rand, *atomic.Bool){clock, observer, observer, observer}
	for i := 0; i < hitters; i++ {
		workers = append(workers, hitter)
	}
	stress(t, workers...)
	t.Logf("%d hits, %d rebinds, %d gone observations", hits.Load(), rebinds.Load(), gones.Load())
	if hits.Load() == 0 || rebinds.Load() == 0 || gones.Load() == 0 {
		t.Fatal("too thin: the race was not exercised")
	}
}

// Defect 1: a hit read the clock, then swapped the binding word; an observer
// that read the binding idle and expired in between reported it gone, and
// the hit then took a lease on it.
func TestStress_HitAgainstObservedExpiry(t *testing.T) { expiryRace(t, 2, 0, 100, time.Second) }

// Defect 2: Query read the word, then the clock; a lease taken and the clock
// passing the deadline in between made it read a leased binding as gone.
func TestStress_QueryTornRead(t *testing.T) { expiryRace(t, 1, 200, 5, time.Second/2) }

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

// Defect 4: Stats().Hits must never go backwards, even while bindings that
// carry hits are killed (their count moves from the live word to the dead
// total) during the walk.
func TestStress_StatsHitsMonotonic(t *testing.T) {
	clk := NewManualClock(0)
	c, err := New[target](Config{IdleTTL: time.Hour, InitTimeout: time.Hour, MaxEntries: 64,
		MaxKeyBytes: 16, Clock: clk})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	keys := make([]string, 32)
	for i := range keys {
		keys[i] = fmt.Sprintf("k%d", i)
	}
	var kills atomic.Int64
	worker := func(rng *rand.Rand, stop *atomic.Bool) {
		for !stop.Load() {
			key := keys[rng.IntN(len(keys))]
			a, err := c.TryAcquire(key)
			switch {
			case err != nil:
				continue
			case a.Reservation != nil:
				if l, err := a.Reservation.CommitAccepted(w1, c.Generation(w1)); err == nil {
					_ = l.Release()
				}
			default:
				_ = a.Lease.Release()
				if rng.IntN(16) == 0 {
					if ok, _ := c.InvalidateKey(key); ok {
						kills.Add(1)
					}
				}
			}
		}
	}
	var reads atomic.Int64
	reader := func(_ *rand.Rand, stop *atomic.Bool) {
		var last int64
		for !stop.Load() {
			h := c.Stats().Hits
			reads.Add(1)
			if h < last {
				t.Errorf("Stats().Hits went backwards: %d after %d", h, last)
				stop.Store(true)
			}
			last = max(last, h)
		}
	}
	stress(t, worker, worker, worker, worker, reader, reader)
	t.Logf("%d Stats reads, %d bindings killed", reads.Load(), kills.Load())
	if reads.Load() < 100 || kills.Load() < 100 {
		t.Fatal("too thin")
	}
}

// keyEvents checks, key by key, that the events an Observer received form
// a path through the lifecycle: each event must be possible in the state
// the key's previous events left it in.
type keyEvents struct {
	mu    sync.Mutex
	state map[string]string // Absent, Init (reserved or dispatching), Quarantined, Bound
	err   error
	n     int
}

func (k *keyEvents) observe(ev Event) {
	k.mu.Lock()
	defer k.mu.Unlock()
	if k.state == nil {
		k.state = map[string]string{}
	}
	k.n++
	from := k.state[ev.Key]
	if from == "" {
		from = "Absent"
	}
	to := ""
	switch {
	case ev.Kind == EventReserved && from == "Absent":
		to = "Init"
	case ev.Kind == EventCommitted && (from == "Init" || from == "Quarantined"):
		to = "Bound"
	case ev.Kind == EventRolledBack && from == "Init":
		to = "Init"
	case ev.Kind == EventQuarantined && from == "Init":
		to = "Quarantined"
	case ev.Kind == EventResolved && from == "Quarantined":
		to = "Settled" // Bound or Absent: the next event tells
	case ev.Kind == EventRemoved && from != "Absent":
		to = "Absent"
	case ev.Kind == EventExpired && (from == "Bound" || from == "Settled"):
		to = "Absent"
	case ev.Kind == EventCapacityRejected && from == "Absent":
		to = "Absent"
	case from == "Settled" && ev.Kind == EventReserved:
		to = "Init" // settled absent, or a settled binding ended by expiry/staleness
	case from == "Settled" && (ev.Kind == EventRemoved || ev.Kind == EventCapacityRejected):
		to = "Absent"
	}
	if to == "" && k.err == nil {
		k.err = fmt.Errorf("key %s: event %d %v (attempt %d) cannot follow state %s", ev.Key, k.n, ev.Kind, ev.Attempt, from)
	}
	if to != "" {
		k.state[ev.Key] = to
	}
}

// Defect 5: events for one key must arrive in the order the changes
// happened. Sweeps (Advance), lazy expiry, commits, removals and rollbacks
// race on a few keys; every key's event stream must be a lifecycle path.
func TestStress_ObserverOrderPerKey(t *testing.T) {
	var ev keyEvents
	clk := NewManualClock(0)
	c, err := New[target](Config{IdleTTL: time.Second, InitTimeout: time.Second, MaxEntries: 3,
		MaxKeyBytes: 16, Clock: clk, Observer: ev.observe})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	keys := []string{"a", "b", "c", "d"}
	worker := func(rng *rand.Rand, stop *atomic.Bool) {
		for !stop.Load() {
			key := keys[rng.IntN(len(keys))]
			ctx, cancel := context.WithTimeout(context.Background(), time.Millisecond)
			a, err := c.Acquire(ctx, key)
			cancel()
			switch {
			case err != nil:
				continue
			case a.Reservation != nil:
				switch rng.IntN(4) {
				case 0:
					_ = a.Reservation.Cancel()
				case 1:
					d, err := a.Reservation.BeginDispatch(w1, c.Generation(w1))
					if err == nil {
						if _, err := d.Complete(DefinitelyNotAccepted); err == nil {
							_ = d.Reservation().Cancel()
						}
					}
				default:
					if l, err := a.Reservation.CommitAccepted(w1, c.Generation(w1)); err == nil {
						_ = l.Release()
					}
				}
			default:
				switch rng.IntN(4) {
				case 0:
					_ = a.Lease.Invalidate()
				case 1:
					_ = a.Lease.Close()
				default:
					_ = a.Lease.Release()
				}
			}
		}
	}
	clock := func(rng *rand.Rand, stop *atomic.Bool) {
		for !stop.Load() {
			for i := rng.IntN(32); i > 0; i-- {
				runtime.Gosched()
			}
			if rng.IntN(2) == 0 {
				_ = clk.AdvanceBy(time.Second / 2) // sweeps
			} else {
				jump(clk, time.Second/2) // lazy: the next access expires
			}
		}
	}
	stress(t, worker, worker, worker, worker, clock)
	ev.mu.Lock()
	defer ev.mu.Unlock()
	t.Logf("%d events", ev.n)
	if ev.err != nil {
		t.Fatal(ev.err)
	}
	if ev.n < 1000 {
		t.Fatal("too thin")
	}
}

// Defect 6: Close during the capacity path's sweep must not leave the fresh
// entry that Acquire created linked in the table.
func TestAcquire_CloseDuringCapacitySweepUnlinksFreshEntry(t *testing.T) {
	noLeaks(t)
	clk := NewManualClock(0)
	var c *Coordinator[target]
	closeOnExpiry := func(ev Event) {
		if ev.Kind == EventExpired {
			c.Close() // Close needs no entry lock, so this is safe here
		}
	}
	c, err := New[target](Config{IdleTTL: time.Second, InitTimeout: time.Second, MaxEntries: 1,
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
