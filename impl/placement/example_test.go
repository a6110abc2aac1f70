package placement_test

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/placementlab/placement/impl/placement"
)

// Worker is a router's target: a worker and its data-parallel rank.
type Worker struct {
	ID   uint64
	Rank int32
}

// A request's full life: the first turn reserves the session, dispatches,
// commits on Accepted; the next turn hits the binding. Each turn defers
// Done, which gives back whatever it still holds. A zero Config gives the
// defaults (30 min idle TTL, 30 s to dispatch, 1 min per dispatch, 10 min
// quarantines, 65,536 sessions of keys up to 256 bytes).
func Example() {
	c, err := placement.New(placement.Config[Worker]{})
	if err != nil {
		panic(err)
	}
	defer c.Close()
	ctx := context.Background()

	turn := func() {
		a, err := c.Acquire(ctx, "conversation-42")
		if err != nil {
			panic(err)
		}
		defer a.Done() // the lease, the reservation or the dispatch: whatever is left
		if a.Hit() {
			fmt.Println("hit: worker", a.Lease.Target().ID)
			return
		}
		w := Worker{ID: 7, Rank: 1} // chosen by the router's policy
		d, err := a.Reservation.BeginDispatch(w, c.Generation(w))
		if err != nil {
			panic(err)
		}
		// ... forward the request to w, carrying d.Attempt() and d.Generation() ...
		lease, err := d.Complete(placement.Accepted)
		if err != nil {
			panic(err)
		}
		fmt.Println("bound to worker", lease.Target().ID, "version == attempt:", lease.Version() == d.Attempt())
	}
	turn()
	turn()
	fmt.Println("leases held:", mustInfo(c, "conversation-42").Leases, "sessions on worker 7:", c.Bindings(Worker{ID: 7, Rank: 1}))
	// Output:
	// bound to worker 7 version == attempt: true
	// hit: worker 7
	// leases held: 0 sessions on worker 7: 1
}

// serve is the request loop of the README's "Quick start": a hit forwards
// to the bound worker; a new session goes to the least-loaded worker it has
// not tried yet, and to the next one when a worker refuses. forward sends
// the request and returns at the worker's first answer (its response
// headers, or a failure) with the outcome, and with answer, the rest of
// the worker's answer to relay (nil if there is none).
func serve(ctx context.Context, c *placement.Coordinator[Worker], session string, workers []Worker,
	forward func(ctx context.Context, w Worker, attempt uint64) (answer func(), out placement.Outcome)) error {
	a, err := c.Acquire(ctx, session) // waits while another request initializes the session
	if err != nil {
		return err // *AmbiguousError: quarantined until resolved; *CapacityError; ...
	}
	defer a.Done() // gives back whatever the request still holds, on every path
	if a.Hit() {   // bound: reuse the worker (a later turn carries no attempt: 0)
		if answer, _ := forward(ctx, a.Lease.Target(), 0); answer != nil {
			answer()
		}
		return nil
	}
	tried := map[Worker]bool{}
	for {
		w, ok := leastLoaded(c, workers, tried)
		if !ok {
			return errNoWorker
		}
		tried[w] = true
		d, err := a.Reservation.BeginDispatch(w, c.Generation(w))
		if errors.Is(err, placement.ErrFenced) {
			continue // w restarted since Generation was read: try another
		} else if err != nil {
			return err // ErrReservationLost: ReserveTimeout passed, or a late refusal ended it
		}
		dctx, cancel := d.Context(ctx)               // ends if w does not answer by the dispatch's deadline
		answer, out := forward(dctx, w, d.Attempt()) // the attempt id is the worker's idempotency key
		_, err = d.Complete(out)                     // a nil error: bound, and Done releases the lease
		if answer != nil {
			answer() // reported, the dispatch's deadline no longer ends dctx: the body streams on
		}
		cancel()
		if !errors.Is(err, placement.ErrNotAccepted) {
			return err // *AmbiguousError: quarantined; ErrStaleAtBirth: answered, but w restarted: nothing bound
		}
	}
}

var errNoWorker = errors.New("no worker left to try")

// leastLoaded is the worker with the fewest sessions bound to it, among
// those not tried yet (a router also leaves out those it knows unhealthy).
func leastLoaded(c *placement.Coordinator[Worker], workers []Worker, tried map[Worker]bool) (Worker, bool) {
	best, found := Worker{}, false
	for _, w := range workers {
		if !tried[w] && (!found || c.Bindings(w) < c.Bindings(best)) {
			best, found = w, true
		}
	}
	return best, found
}

// The README's request (serve) on every outcome: a worker refuses and the
// next one accepts (bound), a hit, a dispatch whose outcome is unknown
// (quarantined until resolved), and a session no worker takes.
func Example_request() {
	c, _ := placement.New(placement.Config[Worker]{})
	defer c.Close()
	ctx := context.Background()
	workers := []Worker{{ID: 1}, {ID: 2}, {ID: 3}}
	answers := func(outcomes ...placement.Outcome) func(context.Context, Worker, uint64) (func(), placement.Outcome) {
		return func(_ context.Context, w Worker, _ uint64) (func(), placement.Outcome) {
			o := outcomes[0]
			outcomes = outcomes[1:]
			fmt.Println("  worker", w.ID, "answers", o)
			if o != placement.Accepted {
				return nil, o
			}
			return func() { fmt.Println("  worker", w.ID, "streams its answer") }, o
		}
	}

	fmt.Println("s:", serve(ctx, c, "s", workers, answers(placement.DefinitelyNotAccepted, placement.Accepted)))
	fmt.Println("s:", serve(ctx, c, "s", workers, answers(placement.Accepted))) // a hit
	fmt.Println("t:", serve(ctx, c, "t", workers, answers(placement.Ambiguous)) != nil)
	err := serve(ctx, c, "t", workers, answers(placement.Accepted))
	fmt.Println("t again, quarantined:", errors.Is(err, placement.ErrAmbiguous))
	no := placement.DefinitelyNotAccepted
	fmt.Println("u:", serve(ctx, c, "u", workers, answers(no, no, no)))
	fmt.Println("live:", c.Stats().Live, "leases on s:", mustInfo(c, "s").Leases)
	// Output:
	//   worker 1 answers DefinitelyNotAccepted
	//   worker 2 answers Accepted
	//   worker 2 streams its answer
	// s: <nil>
	//   worker 2 answers Accepted
	//   worker 2 streams its answer
	// s: <nil>
	//   worker 1 answers Ambiguous
	// t: true
	// t again, quarantined: true
	//   worker 1 answers DefinitelyNotAccepted
	//   worker 3 answers DefinitelyNotAccepted
	//   worker 2 answers DefinitelyNotAccepted
	// u: no worker left to try
	// live: 2 leases on s: 0
}

// While one request initializes a session, others wait for its outcome and
// then reuse the binding.
func Example_waiter() {
	c, _ := placement.New[Worker](placement.Config[Worker]{IdleTTL: time.Minute, ReserveTimeout: 10 * time.Second, DispatchTimeout: 10 * time.Second,
		MaxEntries: placement.DefaultMaxEntries, MaxKeyBytes: placement.DefaultMaxKeyBytes})
	defer c.Close()
	// Every request has a deadline; a waiter gives up at it (and this
	// example fails there rather than hang if the wake-up were lost).
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()

	first, _ := c.Acquire(ctx, "s")
	done := make(chan placement.Acquisition[Worker])
	go func() {
		a, err := c.Acquire(ctx, "s") // waits for the initializer
		if err != nil {
			fmt.Println("waiter:", err)
		}
		done <- a
	}()
	for ctx.Err() == nil && c.Stats().Waits == 0 {
		time.Sleep(time.Millisecond)
	}
	d, _ := first.Reservation.BeginDispatch(Worker{ID: 3}, c.Generation(Worker{ID: 3}))
	d.Complete(placement.Accepted)
	first.Done()
	waiter := <-done
	fmt.Println("waiter reuses worker", waiter.Lease.Target().ID)
	waiter.Done()
	// Output: waiter reuses worker 3
}

// A dispatch whose outcome is unknown quarantines the session: nothing is
// replayed until someone who knows the outcome resolves it, fenced by the
// attempt id and generation. The error names the attempt's target, the
// worker to ask.
func Example_ambiguous() {
	c, _ := placement.New[Worker](placement.Config[Worker]{IdleTTL: time.Minute, ReserveTimeout: 10 * time.Second, DispatchTimeout: 10 * time.Second,
		MaxEntries: placement.DefaultMaxEntries, MaxKeyBytes: placement.DefaultMaxKeyBytes})
	defer c.Close()

	a, _ := c.TryAcquire("s")
	d, _ := a.Reservation.BeginDispatch(Worker{ID: 9}, 1)
	a.Done() // the stream dropped mid-flight: Done quarantines the dispatch

	_, err := c.TryAcquire("s")
	var amb *placement.AmbiguousError[Worker]
	if errors.As(err, &amb) {
		fmt.Println("quarantined: attempt", amb.Attempt == d.Attempt(), "generation", amb.Generation,
			"worker", amb.Target.ID)
	}
	// Later the forwarding owner learns the worker did accept it.
	if err := c.Resolve("s", amb.Attempt, amb.Generation, placement.ResolveAccepted); err != nil {
		panic(err)
	}
	a, _ = c.TryAcquire("s")
	fmt.Println("resolved; next turn hits worker", a.Lease.Target().ID)
	a.Done()
	// Output:
	// quarantined: attempt true generation 1 worker 9
	// resolved; next turn hits worker 9
}

// A quarantine ends by itself after QuarantineTTL, the operator's bound on
// how long a request the worker may have accepted blocks a replay; until
// then a resolver finds it with Quarantined, which names everything
// Resolve needs.
func ExampleCoordinator_Quarantined() {
	clk := placement.NewManualClock(0)
	c, _ := placement.New[Worker](placement.Config[Worker]{IdleTTL: time.Minute, ReserveTimeout: 5 * time.Second,
		DispatchTimeout: 30 * time.Second, QuarantineTTL: 2 * time.Minute,
		MaxEntries: 1024, MaxKeyBytes: 64, Clock: clk})
	defer c.Close()

	a, _ := c.TryAcquire("s")
	a.Reservation.BeginDispatch(Worker{ID: 4}, 1)
	clk.Advance(time.Minute) // no outcome within DispatchTimeout: quarantined at 30 s
	for _, q := range c.Quarantined() {
		fmt.Println(q.Key, "worker", q.Target.ID, "quarantined for", q.Age, "until", q.Expires)
	}
	clk.Advance(150 * time.Second) // QuarantineTTL after the dispatch's deadline
	a.Done()                       // the late guard: nothing left to end
	b, _ := c.TryAcquire("s")
	fmt.Println("quarantines left:", len(c.Quarantined()), "next request reserves:", b.Reservation != nil)
	b.Done()
	// Output:
	// s worker 4 quarantined for 30s until 2m30s
	// quarantines left: 0 next request reserves: true
}

// A simulation host drives time with a ManualClock: no reaper goroutine;
// each Advance reclaims what expired.
func Example_manualClock() {
	clk := placement.NewManualClock(0)
	c, _ := placement.New[Worker](placement.Config[Worker]{IdleTTL: 30 * time.Second, ReserveTimeout: 5 * time.Second, DispatchTimeout: 5 * time.Second,
		MaxEntries: 1024, MaxKeyBytes: 64, Clock: clk})
	defer c.Close()

	a, _ := c.TryAcquire("s")
	a.Reservation.CommitAccepted(Worker{ID: 1}, 1)
	clk.Advance(time.Hour) // a long request: leased bindings never expire
	fmt.Println("after an hour, leased:", mustQuery(c, "s"))
	a.Done() // releases the lease: idle from now, expires 30 simulated seconds later
	clk.AdvanceBy(29 * time.Second)
	fmt.Println("idle 29s:", mustQuery(c, "s"))
	clk.AdvanceBy(time.Second)
	fmt.Println("idle 30s:", mustQuery(c, "s"))
	fmt.Println("going back:", clk.Advance(time.Minute) != nil)
	// Output:
	// after an hour, leased: Bound
	// idle 29s: Bound
	// idle 30s: Absent
	// going back: true
}

// The default clock is coarse: the runtime's monotonic time at the last
// tick of one ticker that the process's coordinators share (1 ms by
// default; the finest ClockResolution among them), read with one atomic
// load on a hit. A deadline comes from the last tick's time, so an idle
// binding, a reservation, a dispatch or a quarantine ends within one tick
// of its precise time, either way. PreciseClock reads the runtime clock at
// every reading instead.
func Example_clockResolution() {
	cfg := placement.Config[Worker]{IdleTTL: time.Minute, ReserveTimeout: 10 * time.Second, DispatchTimeout: 10 * time.Second,
		MaxEntries: 1024, MaxKeyBytes: 64} // ClockResolution 0: 1 ms ticks
	c, err := placement.New[Worker](cfg)
	if err != nil {
		panic(err)
	}
	defer c.Close() // the last coordinator's Close stops the ticker

	a, _ := c.TryAcquire("s")
	a.Reservation.CommitAccepted(Worker{ID: 1}, 1)
	a.Done() // idle from the last tick's time on
	left := mustInfo(c, "s").IdleDeadline - c.Now()
	fmt.Println("expires in at most IdleTTL on the coordinator's clock:", left <= time.Minute)

	cfg.ClockResolution = 10 * time.Millisecond // coarser: shares the 1 ms ticker
	coarser, _ := placement.New[Worker](cfg)
	defer coarser.Close()
	cfg.ClockResolution = placement.PreciseClock // no ticker: the runtime clock
	precise, _ := placement.New[Worker](cfg)
	defer precise.Close()

	cfg.ClockResolution = 10 * time.Microsecond
	_, err = placement.New[Worker](cfg)
	fmt.Println(err)
	// Output:
	// expires in at most IdleTTL on the coordinator's clock: true
	// placement: invalid config: ClockResolution must be between 100µs and 100ms, 0 (the default) or PreciseClock, got 10µs
}

// Set moves a manual clock the way the runtime clock moves between reaper
// ticks: nothing is reclaimed until something touches the key (Query, an
// Acquire, Stats) or Reclaim runs a tick. Events carry their order (Seq)
// and the binding's version; a simulation host pins the attempt ids with
// FirstAttempt.
func ExampleManualClock_Set() {
	clk := placement.NewManualClock(0)
	c, _ := placement.New(placement.Config[Worker]{IdleTTL: 30 * time.Second, Clock: clk, FirstAttempt: 1,
		Observer: func(ev placement.Event[Worker]) { fmt.Println("event", ev.Seq, ev.Kind, "version", ev.Attempt) }})
	defer c.Close()

	for _, key := range []string{"a", "b"} {
		a, _ := c.TryAcquire(key)
		a.Reservation.CommitAccepted(Worker{ID: 1}, 1)
		a.Done()
	}
	clk.SetBy(time.Minute)               // both idle bindings are past their deadline
	fmt.Println("a:", mustQuery(c, "a")) // Query expires it itself
	clk.Reclaim()                        // one reaper tick: b goes
	fmt.Println("live:", c.Stats().Live, "reclaimed:", c.Stats().Expirations)
	// Output:
	// event 1 Reserved version 0
	// event 2 Committed version 1
	// event 3 Reserved version 0
	// event 4 Committed version 2
	// event 5 Expired version 1
	// a: Absent
	// event 6 Expired version 2
	// live: 0 reclaimed: 2
}

func mustQuery(c *placement.Coordinator[Worker], key string) placement.State {
	return mustInfo(c, key).State
}

func mustInfo(c *placement.Coordinator[Worker], key string) placement.Info[Worker] {
	i, err := c.Query(key)
	if err != nil {
		panic(err)
	}
	return i
}
