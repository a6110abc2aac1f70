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
// Done, which gives back whatever it still holds.
func Example() {
	c, err := placement.New[Worker](placement.Config{IdleTTL: time.Minute, ReserveTimeout: 10 * time.Second, DispatchTimeout: 10 * time.Second,
		MaxEntries: placement.DefaultMaxEntries, MaxKeyBytes: placement.DefaultMaxKeyBytes})
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
	fmt.Println("leases held:", mustInfo(c, "conversation-42").Leases)
	// Output:
	// bound to worker 7 version == attempt: true
	// hit: worker 7
	// leases held: 0
}

// serve is the request of the README's "Using it": it forwards to the
// bound worker, or initializes the session on w.
func serve(ctx context.Context, c *placement.Coordinator[Worker], session string, w Worker,
	forward func(Worker) placement.Outcome) error {
	a, err := c.Acquire(ctx, session) // waits while another request initializes the session
	if err != nil {
		return err // *AmbiguousError: quarantined until resolved; *CapacityError; ...
	}
	defer a.Done() // gives back whatever the request still holds, on every path
	if a.Hit() {   // bound: reuse the worker
		forward(a.Lease.Target())
		return nil
	}
	d, err := a.Reservation.BeginDispatch(w, c.Generation(w)) // we initialize the session
	if err != nil {
		return err
	}
	_, err = d.Complete(forward(w)) // Accepted / DefinitelyNotAccepted / Ambiguous
	return err                      // ErrStaleAtBirth: w was bumped meanwhile; the session is not bound
}

// The README's request (serve) on every outcome: refused (the reservation
// goes back at Done), accepted (bound), a hit, and an unknown outcome
// (quarantined until resolved).
func Example_request() {
	c, _ := placement.New[Worker](placement.Config{IdleTTL: time.Minute, ReserveTimeout: 10 * time.Second, DispatchTimeout: 10 * time.Second,
		MaxEntries: placement.DefaultMaxEntries, MaxKeyBytes: placement.DefaultMaxKeyBytes})
	defer c.Close()
	ctx := context.Background()
	answer := func(o placement.Outcome) func(Worker) placement.Outcome {
		return func(w Worker) placement.Outcome {
			fmt.Println("worker", w.ID, "answers", o)
			return o
		}
	}

	fmt.Println(serve(ctx, c, "s", Worker{ID: 1}, answer(placement.DefinitelyNotAccepted)))
	fmt.Println(serve(ctx, c, "s", Worker{ID: 2}, answer(placement.Accepted)))
	fmt.Println(serve(ctx, c, "s", Worker{ID: 3}, answer(placement.Accepted))) // a hit: worker 2 answers
	fmt.Println(serve(ctx, c, "t", Worker{ID: 4}, answer(placement.Ambiguous)))
	err := serve(ctx, c, "t", Worker{ID: 5}, answer(placement.Accepted))
	fmt.Println(errors.Is(err, placement.ErrAmbiguous))
	fmt.Println("live:", c.Stats().Live, "leases on s:", mustInfo(c, "s").Leases)
	// Output:
	// worker 1 answers DefinitelyNotAccepted
	// <nil>
	// worker 2 answers Accepted
	// <nil>
	// worker 2 answers Accepted
	// <nil>
	// worker 4 answers Ambiguous
	// <nil>
	// true
	// live: 2 leases on s: 0
}

// While one request initializes a session, others wait for its outcome and
// then reuse the binding.
func Example_waiter() {
	c, _ := placement.New[Worker](placement.Config{IdleTTL: time.Minute, ReserveTimeout: 10 * time.Second, DispatchTimeout: 10 * time.Second,
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
	c, _ := placement.New[Worker](placement.Config{IdleTTL: time.Minute, ReserveTimeout: 10 * time.Second, DispatchTimeout: 10 * time.Second,
		MaxEntries: placement.DefaultMaxEntries, MaxKeyBytes: placement.DefaultMaxKeyBytes})
	defer c.Close()

	a, _ := c.TryAcquire("s")
	d, _ := a.Reservation.BeginDispatch(Worker{ID: 9}, 1)
	a.Done() // the stream dropped mid-flight: Done quarantines the dispatch

	_, err := c.TryAcquire("s")
	var amb *placement.AmbiguousError
	if errors.As(err, &amb) {
		fmt.Println("quarantined: attempt", amb.Attempt == d.Attempt(), "generation", amb.Generation,
			"worker", amb.Target.(Worker).ID)
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
	c, _ := placement.New[Worker](placement.Config{IdleTTL: time.Minute, ReserveTimeout: 5 * time.Second,
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
	c, _ := placement.New[Worker](placement.Config{IdleTTL: 30 * time.Second, ReserveTimeout: 5 * time.Second, DispatchTimeout: 5 * time.Second,
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
	cfg := placement.Config{IdleTTL: time.Minute, ReserveTimeout: 10 * time.Second, DispatchTimeout: 10 * time.Second,
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
// ticks: nothing is reclaimed until something touches the key or Reclaim
// runs a tick. Events carry their order (Seq) and the binding's version; a
// simulation host pins the attempt ids with FirstAttempt.
func ExampleManualClock_Set() {
	clk := placement.NewManualClock(0)
	c, _ := placement.New[Worker](placement.Config{IdleTTL: 30 * time.Second, ReserveTimeout: 5 * time.Second, DispatchTimeout: 5 * time.Second,
		MaxEntries: 1024, MaxKeyBytes: 64, Clock: clk, FirstAttempt: 1,
		Observer: func(ev placement.Event) { fmt.Println("event", ev.Seq, ev.Kind, "version", ev.Attempt) }})
	defer c.Close()

	for _, key := range []string{"a", "b"} {
		a, _ := c.TryAcquire(key)
		a.Reservation.CommitAccepted(Worker{ID: 1}, 1)
		a.Done()
	}
	clk.SetBy(time.Minute) // both idle bindings are past their deadline
	s := c.Stats()
	fmt.Println("live:", s.Live, "reclaimed:", s.Expirations) // expired, not swept yet
	fmt.Println("a:", mustQuery(c, "a"))                      // Query expires it itself
	clk.Reclaim()                                             // one reaper tick: b goes
	fmt.Println("reclaimed:", c.Stats().Expirations)
	// Output:
	// event 1 Reserved version 0
	// event 2 Committed version 1
	// event 3 Reserved version 0
	// event 4 Committed version 2
	// live: 0 reclaimed: 0
	// event 5 Expired version 1
	// a: Absent
	// event 6 Expired version 2
	// reclaimed: 2
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
