package placement

import (
	"errors"
	"math/rand"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// fakeTicks is a coarse clock's tick source that a test drives: real is
// the underlying monotonic clock, and a tick happens when the test calls
// tickAt (no goroutine). It records every ticker start.
type fakeTicks struct {
	real    atomic.Int64
	mu      sync.Mutex
	periods []time.Duration // every ticker started, in order
	running int
}

func newFakeCoarse(start time.Duration) (*coarseClock, *fakeTicks) {
	f := &fakeTicks{}
	f.real.Store(int64(start))
	k := newCoarseClock(f.real.Load, func(period time.Duration, _ func()) func() {
		f.mu.Lock()
		defer f.mu.Unlock()
		f.periods = append(f.periods, period)
		f.running++
		return func() {
			f.mu.Lock()
			defer f.mu.Unlock()
			f.running--
		}
	})
	return k, f
}

// tickAt moves the underlying clock to at and ticks there.
func (f *fakeTicks) tickAt(k *coarseClock, at int64) {
	f.real.Store(at)
	k.tick()
}

func (f *fakeTicks) started() ([]time.Duration, int) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]time.Duration(nil), f.periods...), f.running
}

// The durations of coarseCoordinator: all different, so that a deadline
// set from the wrong one fails.
const (
	ccIdle     = time.Second
	ccReserve  = 2 * time.Second
	ccDispatch = 3 * time.Second
	ccQuaran   = 4 * time.Second
)

func coarseCoordinator(t *testing.T, k *coarseClock, res time.Duration) *Coordinator[target] {
	t.Helper()
	c, err := newCoordinator[target](Config[target]{IdleTTL: ccIdle, ReserveTimeout: ccReserve, DispatchTimeout: ccDispatch,
		QuarantineTTL: ccQuaran, MaxEntries: 8, MaxKeyBytes: 16, ClockResolution: res}, k)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

func TestCoarseClock_OneTickerAtTheFinestResolution(t *testing.T) {
	noLeaks(t)
	k, f := newFakeCoarse(time.Hour)
	want := func(periods []time.Duration, running int) {
		t.Helper()
		got, r := f.started()
		if len(got) != len(periods) || r != running {
			t.Fatalf("tickers started %v (%d running), want %v (%d running)", got, r, periods, running)
		}
		for i := range got {
			if got[i] != periods[i] {
				t.Fatalf("tickers started %v, want %v", got, periods)
			}
		}
	}
	c1 := coarseCoordinator(t, k, 0) // the default, 1 ms
	if c1.cfg.ClockResolution != DefaultClockResolution || c1.Now() != 0 {
		t.Fatalf("resolution %v, Now %v at New", c1.cfg.ClockResolution, c1.Now())
	}
	want([]time.Duration{time.Millisecond}, 1)
	c2 := coarseCoordinator(t, k, 10*time.Millisecond) // coarser: shares the 1 ms ticker
	c3 := coarseCoordinator(t, k, PreciseClock)        // no ticker
	want([]time.Duration{time.Millisecond}, 1)
	if c3.coarse != nil {
		t.Fatal("a PreciseClock coordinator attached to the coarse clock")
	}

	// A finer coordinator restarts the ticker at its resolution, ticking
	// at once: every coordinator reads the time it was created at.
	f.real.Add(int64(5 * time.Millisecond))
	c4 := coarseCoordinator(t, k, 500*time.Microsecond)
	want([]time.Duration{time.Millisecond, 500 * time.Microsecond}, 1)
	if c1.Now() != 5*time.Millisecond || c2.Now() != 5*time.Millisecond || c4.Now() != 0 {
		t.Fatalf("Now %v %v %v after a restart 5ms in", c1.Now(), c2.Now(), c4.Now())
	}
	if c3.Now() != 5*time.Millisecond {
		t.Fatalf("precise Now %v, want 5ms", c3.Now())
	}

	// Closing slows it to the finest left, then stops it with the last.
	must(t, c4.Close())
	want([]time.Duration{time.Millisecond, 500 * time.Microsecond, time.Millisecond}, 1)
	must(t, c1.Close())
	want([]time.Duration{time.Millisecond, 500 * time.Microsecond, time.Millisecond, 10 * time.Millisecond}, 1)
	must(t, c3.Close())
	want([]time.Duration{time.Millisecond, 500 * time.Microsecond, time.Millisecond, 10 * time.Millisecond}, 1)
	must(t, c2.Close())
	want([]time.Duration{time.Millisecond, 500 * time.Microsecond, time.Millisecond, 10 * time.Millisecond}, 0)
	if k.period != 0 || len(k.users) != 0 {
		t.Fatalf("stopped clock: period %v, users %v", k.period, k.users)
	}

	// A closed coordinator reads the underlying clock: time goes on
	// without the ticker, on the same timeline.
	f.real.Add(int64(time.Millisecond))
	if c1.Now() != 6*time.Millisecond {
		t.Fatalf("closed coordinator's Now %v, want 6ms", c1.Now())
	}
	// A new first coordinator starts a ticker again, fresh.
	f.real.Add(int64(time.Millisecond))
	c5 := coarseCoordinator(t, k, 0)
	want([]time.Duration{time.Millisecond, 500 * time.Microsecond, time.Millisecond, 10 * time.Millisecond, time.Millisecond}, 1)
	if k.now() != int64(time.Hour+7*time.Millisecond) || c5.Now() != 0 {
		t.Fatalf("restarted clock reads %v, Now %v", time.Duration(k.now()), c5.Now())
	}
}

func TestCoarseClock_TickNeverGoesBack(t *testing.T) {
	k, f := newFakeCoarse(time.Hour)
	f.tickAt(k, int64(time.Hour))
	f.tickAt(k, int64(time.Hour-time.Millisecond)) // a late tick that lost a race
	if k.now() != int64(time.Hour) {
		t.Fatalf("the clock went back to %v", time.Duration(k.now()))
	}
}

// Coordinators come and go (restarting the process's ticker at other
// periods, and switching closed ones to the runtime clock) while readers
// check that no coordinator's time goes back.
func TestCoarseClock_MonotonicAcrossRestartsAndClose(t *testing.T) {
	noLeaks(t)
	cfg := Config[target]{IdleTTL: time.Second, ReserveTimeout: time.Second, DispatchTimeout: time.Second, MaxEntries: 1, MaxKeyBytes: 1}
	var wg sync.WaitGroup
	stop := make(chan struct{})
	var failed atomic.Value
	read := func(c *Coordinator[target]) {
		defer wg.Done()
		last := c.Now()
		for {
			select {
			case <-stop:
				return
			default:
			}
			now := c.Now()
			if now < last {
				failed.Store(errors.New("Now went from " + last.String() + " to " + now.String()))
				return
			}
			last = now
		}
	}
	var cs []*Coordinator[target]
	for range 2 {
		c, err := New[target](cfg)
		must(t, err)
		cs = append(cs, c)
		wg.Add(1)
		go read(c)
	}
	resolutions := []time.Duration{MinClockResolution, 0, 10 * time.Millisecond, 0}
	deadline := time.Now().Add(300 * time.Millisecond)
	for i := 0; time.Now().Before(deadline); i++ {
		cfg.ClockResolution = resolutions[i%len(resolutions)]
		c, err := New[target](cfg)
		must(t, err)
		time.Sleep(time.Millisecond)
		must(t, c.Close())
	}
	must(t, cs[0].Close()) // read on, closed: the runtime clock
	time.Sleep(20 * time.Millisecond)
	close(stop)
	wg.Wait()
	must(t, cs[1].Close())
	if err, _ := failed.Load().(error); err != nil {
		t.Fatal(err)
	}
}

// The process's ticker runs while a coordinator uses it, at the finest
// resolution among them, and its goroutine is gone after the last Close.
func TestCoarseClock_ProcessTickerStopsWithTheLastCoordinator(t *testing.T) {
	noLeaks(t)
	period := func() time.Duration {
		processClock.mu.Lock()
		defer processClock.mu.Unlock()
		return processClock.period
	}
	if p := period(); p != 0 {
		t.Fatalf("the process's ticker runs at %v before any coordinator", p)
	}
	cfg := Config[target]{IdleTTL: time.Second, ReserveTimeout: time.Second, DispatchTimeout: time.Second, MaxEntries: 1, MaxKeyBytes: 1}
	c1, err := New[target](cfg)
	must(t, err)
	cfg.ClockResolution = 200 * time.Microsecond
	c2, err := New[target](cfg)
	must(t, err)
	if p := period(); p != 200*time.Microsecond {
		t.Fatalf("ticker period %v, want 200µs", p)
	}
	for deadline := time.Now().Add(5 * time.Second); c1.Now() == 0; time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("the coarse clock did not tick in 5s")
		}
	}
	must(t, c2.Close())
	if p := period(); p != time.Millisecond {
		t.Fatalf("ticker period %v after the finer coordinator closed, want 1ms", p)
	}
	must(t, c1.Close())
	if p := period(); p != 0 {
		t.Fatalf("ticker period %v after the last coordinator closed", p)
	}
	before := c1.Now()
	time.Sleep(2 * time.Millisecond)
	if c1.Now() <= before {
		t.Fatal("a closed coordinator's time stopped")
	}
}

// An end (expiry or timeout) a test sets with one operation and observes
// with Query.
type endKind struct {
	name string
	d    time.Duration // the duration the operation sets
	// setup prepares the key and returns the operation that sets the
	// deadline and the test for its end.
	setup func(t *testing.T, c *Coordinator[target]) (op func(), ended func(Info[target]) bool)
}

func absent(i Info[target]) bool { return i.State == StateAbsent }

var endKinds = []endKind{
	{"IdleBindingExpires", ccIdle, func(t *testing.T, c *Coordinator[target]) (func(), func(Info[target]) bool) {
		l, err := reserve(t, c, "k").CommitAccepted(w1, c.Generation(w1))
		must(t, err)
		return func() { must(t, l.Release()) }, absent
	}},
	{"ReservationTimesOut", ccReserve, func(t *testing.T, c *Coordinator[target]) (func(), func(Info[target]) bool) {
		return func() { reserve(t, c, "k") }, absent
	}},
	{"DispatchTimesOut", ccDispatch, func(t *testing.T, c *Coordinator[target]) (func(), func(Info[target]) bool) {
		r := reserve(t, c, "k")
		return func() { _, err := r.BeginDispatch(w1, c.Generation(w1)); must(t, err) },
			func(i Info[target]) bool { return i.State == StateQuarantined }
	}},
	{"QuarantineExpires", ccQuaran, func(t *testing.T, c *Coordinator[target]) (func(), func(Info[target]) bool) {
		d, err := reserve(t, c, "k").BeginDispatch(w1, c.Generation(w1))
		must(t, err)
		return func() { _, err := d.Complete(Ambiguous); wantIs(t, err, ErrAmbiguous) }, absent
	}},
	{"TimedOutDispatchsQuarantineExpires", ccDispatch + ccQuaran, func(t *testing.T, c *Coordinator[target]) (func(), func(Info[target]) bool) {
		r := reserve(t, c, "k")
		return func() { _, err := r.BeginDispatch(w1, c.Generation(w1)); must(t, err) }, absent
	}},
}

// runEnd drives one end on a fake coarse clock. Ticks come every res from
// the origin up to the operation, at origin + opAt, and to the next one;
// next gives each tick after that.
// It returns the tick the operation read, the operation's time and the
// tick at which Query first reports the end, checking on the way that
// the end shows at no other tick.
func runEnd(t *testing.T, kind endKind, res time.Duration, opAt int64, next func(prev, deadline int64) int64) (read, t0, end int64) {
	t.Helper()
	const origin = int64(time.Hour)
	k, f := newFakeCoarse(time.Duration(origin))
	c := coarseCoordinator(t, k, res)
	op, ended := kind.setup(t, c)
	tick := origin
	for tick+int64(res) <= origin+opAt {
		tick += int64(res)
		f.tickAt(k, tick)
	}
	read, t0 = tick, origin+opAt
	f.real.Store(t0)
	op()
	deadline := read + int64(kind.d) // D, on the underlying clock
	tick += int64(res)               // the next regular tick, the first after the operation
	for {
		f.tickAt(k, tick)
		if ended(state(t, c, "k")) {
			if tick < deadline {
				t.Fatalf("ended at tick %v, before the deadline %v", time.Duration(tick), time.Duration(deadline))
			}
			return read, t0, tick
		}
		if tick >= deadline {
			t.Fatalf("not ended at tick %v, at or after the deadline %v", time.Duration(tick), time.Duration(deadline))
		}
		tick = next(tick, deadline)
	}
}

// The precision bounds of the Time section, at their extremes, with
// ticks g = 1 ms apart: an operation that reads a tick g-1ns old ends
// g-1ns early; one whose deadline falls 1 ns after a tick ends g-1ns late.
// Never earlier than d after the tick it read.
func TestCoarseClock_EndsWithinOneTick(t *testing.T) {
	const g = int64(time.Millisecond)
	for _, kind := range endKinds {
		d := int64(kind.d)
		t.Run(kind.name+"/Early", func(t *testing.T) {
			noLeaks(t)
			// The operation comes 1 ns before the 6th tick: it reads the
			// 5th, g-1ns old. Ticks go on every g.
			read, t0, end := runEnd(t, kind, time.Millisecond, 6*g-1, func(prev, _ int64) int64 { return prev + g })
			if end-t0 != d-g+1 || end-read != d {
				t.Fatalf("ended %v after the operation (want %v), %v after its tick (want %v)",
					time.Duration(end-t0), time.Duration(d-g+1), time.Duration(end-read), kind.d)
			}
		})
		t.Run(kind.name+"/Late", func(t *testing.T) {
			noLeaks(t)
			// The operation comes at a tick; a tick comes 1 ns before
			// its deadline, and the next one g later.
			_, t0, end := runEnd(t, kind, time.Millisecond, 6*g, func(prev, deadline int64) int64 {
				if prev+g >= deadline && prev < deadline-1 {
					return deadline - 1
				}
				return prev + g
			})
			if end-t0 != d+g-1 {
				t.Fatalf("ended %v after the operation, want %v", time.Duration(end-t0), time.Duration(d+g-1))
			}
		})
	}
}

// The same bounds on random tick schedules (gaps of 1 ns to g) and
// operation times: every end comes strictly within g of t0 + d, at the
// first tick at or after the deadline (runEnd checks that), never before d
// has passed since the tick the operation read.
func TestCoarseClock_EndsWithinOneTickOfRandomSchedules(t *testing.T) {
	noLeaks(t)
	const res = 10 * time.Millisecond
	g := int64(res)
	rng := rand.New(rand.NewSource(1))
	for round := range 6 {
		for _, kind := range endKinds {
			d := int64(kind.d)
			opAt := rng.Int63n(20 * g)
			read, t0, end := runEnd(t, kind, res, opAt, func(prev, _ int64) int64 { return prev + 1 + rng.Int63n(g) })
			if end-t0 <= d-g || end-t0 >= d+g || end-read < d {
				t.Fatalf("round %d %s: ended %v after the operation, %v after its tick; d=%v g=%v",
					round, kind.name, time.Duration(end-t0), time.Duration(end-read), kind.d, res)
			}
		}
	}
}

// On the process's real ticker, loosely: an idle binding, a reservation and
// a dispatch (1 s each) end no earlier than 1 s after the tick their
// operation read (exactly: the clock never runs ahead), and within one tick
// plus generous slack (a loaded machine's scheduling, polling) of 1 s after
// the operation.
func TestCoarseClock_RealTimeEndsWithinOneTick(t *testing.T) {
	noLeaks(t)
	const (
		d     = time.Second
		g     = DefaultClockResolution
		slack = 500 * time.Millisecond
	)
	c, err := New[target](Config[target]{IdleTTL: d, ReserveTimeout: d, DispatchTimeout: d, MaxEntries: 8, MaxKeyBytes: 16})
	must(t, err)
	defer c.Close()
	deadlineOf := func(key string) int64 { // the pending deadline of key's entry
		e, _ := c.table.load(key)
		e.mu.Lock()
		defer e.mu.Unlock()
		return e.p.deadline
	}
	type end struct {
		key            string
		op             func()
		deadline       func() int64
		ended          func(Info[target]) bool
		before, read   int64 // the operation's start and the tick it read, on sinceProcessEpoch's timeline
		done           bool
		lastLive, seen int64
	}
	l, err := reserve(t, c, "idle").CommitAccepted(w1, c.Generation(w1))
	must(t, err)
	r := reserve(t, c, "dispatch")
	ends := []*end{
		{key: "idle", op: func() { must(t, l.Release()) }, ended: absent,
			deadline: func() int64 { return int64(state(t, c, "idle").IdleDeadline) }},
		{key: "reserve", op: func() { reserve(t, c, "reserve") }, ended: absent,
			deadline: func() int64 { return deadlineOf("reserve") }},
		{key: "dispatch", op: func() { _, err := r.BeginDispatch(w1, c.Generation(w1)); must(t, err) },
			ended:    func(i Info[target]) bool { return i.State == StateQuarantined },
			deadline: func() int64 { return deadlineOf("dispatch") }},
	}
	for _, e := range ends {
		e.before = sinceProcessEpoch()
		e.op()
		after := sinceProcessEpoch()
		e.read = e.deadline() - int64(d) + c.base
		if e.read > after {
			t.Fatalf("%s: the clock read %v, ahead of the runtime clock's %v", e.key, time.Duration(e.read), time.Duration(after))
		}
		if e.before-e.read >= int64(g+slack) {
			t.Fatalf("%s: the clock read %v, %v before the operation", e.key, time.Duration(e.read), time.Duration(e.before-e.read))
		}
	}
	for left := len(ends); left > 0; time.Sleep(200 * time.Microsecond) {
		for _, e := range ends {
			if e.done {
				continue
			}
			pb := sinceProcessEpoch()
			i := state(t, c, e.key)
			pa := sinceProcessEpoch()
			if !e.ended(i) {
				e.lastLive = pb
				if pb-(e.before+int64(d)) >= int64(g+slack) {
					t.Fatalf("%s: not ended %v after the operation", e.key, time.Duration(pb-e.before))
				}
				continue
			}
			e.done, e.seen = true, pa
			left--
			if pa < e.read+int64(d) {
				t.Fatalf("%s: ended %v after the tick its operation read, before %v", e.key, time.Duration(pa-e.read), d)
			}
			t.Logf("%s: ended by %v after the operation began (live at %v); its reading was %v old",
				e.key, time.Duration(pa-e.before), time.Duration(e.lastLive-e.before), time.Duration(e.before-e.read))
		}
	}
}

func TestConfig_ClockResolution(t *testing.T) {
	noLeaks(t)
	base := Config[target]{IdleTTL: time.Minute, ReserveTimeout: time.Minute, DispatchTimeout: time.Minute, MaxEntries: 1, MaxKeyBytes: 1}
	for _, r := range []time.Duration{0, PreciseClock, MinClockResolution, MaxClockResolution} {
		cfg := base
		cfg.ClockResolution = r
		c, err := New[target](cfg)
		if err != nil {
			t.Fatalf("%v refused: %v", r, err)
		}
		if want := r; c.cfg.ClockResolution != want && (r != 0 || c.cfg.ClockResolution != DefaultClockResolution) {
			t.Fatalf("resolution %v became %v", r, c.cfg.ClockResolution)
		}
		must(t, c.Close())
	}
	for _, mut := range []func(*Config[target]){
		func(c *Config[target]) { c.ClockResolution = MinClockResolution - 1 },
		func(c *Config[target]) { c.ClockResolution = MaxClockResolution + 1 },
		func(c *Config[target]) { c.ClockResolution = -2 },
		func(c *Config[target]) { c.ClockResolution, c.Clock = time.Millisecond, NewManualClock(0) },
		func(c *Config[target]) { c.ClockResolution, c.Clock = PreciseClock, NewManualClock(0) },
	} {
		cfg := base
		mut(&cfg)
		_, err := New[target](cfg)
		var ce *ConfigError
		if !errors.As(err, &ce) || ce.Field != "ClockResolution" || !errors.Is(err, ErrInvalidConfig) {
			t.Errorf("ClockResolution %v (manual clock: %v): got %v", cfg.ClockResolution, cfg.Clock != nil, err)
		}
	}
}
