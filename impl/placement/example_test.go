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
// commits on Accepted; the next turn hits the binding.
func Example() {
	c, err := placement.New[Worker](placement.Config{IdleTTL: time.Minute, InitTimeout: 10 * time.Second,
		MaxEntries: placement.DefaultMaxEntries, MaxKeyBytes: placement.DefaultMaxKeyBytes})
	if err != nil {
		panic(err)
	}
	defer c.Close()
	ctx := context.Background()

	a, _ := c.Acquire(ctx, "conversation-42")
	if r := a.Reservation; r != nil { // first turn: we initialize
		w := Worker{ID: 7, Rank: 1} // chosen by the router's policy
		d, _ := r.BeginDispatch(w, c.Generation(w))
		defer d.Drop() // quarantines the session if we never learn the outcome
		// ... forward the request to w, carrying d.Attempt() and d.Generation() ...
		lease, _ := d.Complete(placement.Accepted)
		fmt.Println("turn 1 bound to worker", lease.Target().ID, "version", lease.Version())
		lease.Release()
	}

	a, _ = c.Acquire(ctx, "conversation-42")
	fmt.Println("turn 2 hit:", a.Hit(), "worker", a.Lease.Target().ID)
	a.Lease.Release()
	// Output:
	// turn 1 bound to worker 7 version 1
	// turn 2 hit: true worker 7
}

// While one request initializes a session, others wait for its outcome and
// then reuse the binding.
func Example_waiter() {
	c, _ := placement.New[Worker](placement.Config{IdleTTL: time.Minute, InitTimeout: 10 * time.Second,
		MaxEntries: placement.DefaultMaxEntries, MaxKeyBytes: placement.DefaultMaxKeyBytes})
	defer c.Close()
	// Every request has a deadline; a waiter gives up at it (and this
	// example fails there rather than hang if the wake-up were lost).
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()

	first, _ := c.Acquire(ctx, "s")
	done := make(chan placement.Lease[Worker])
	go func() {
		a, err := c.Acquire(ctx, "s") // waits for the initializer
		if err != nil {
			fmt.Println("waiter:", err)
		}
		done <- a.Lease
	}()
	for ctx.Err() == nil && c.Stats().Waits == 0 {
		time.Sleep(time.Millisecond)
	}
	d, _ := first.Reservation.BeginDispatch(Worker{ID: 3}, 1)
	lease, _ := d.Complete(placement.Accepted)
	waiter := <-done
	fmt.Println("waiter reuses worker", waiter.Target().ID)
	waiter.Release()
	lease.Release()
	// Output: waiter reuses worker 3
}

// A dispatch whose outcome is unknown quarantines the session: nothing is
// replayed until someone who knows the outcome resolves it, fenced by the
// attempt id and generation.
func Example_ambiguous() {
	c, _ := placement.New[Worker](placement.Config{IdleTTL: time.Minute, InitTimeout: 10 * time.Second,
		MaxEntries: placement.DefaultMaxEntries, MaxKeyBytes: placement.DefaultMaxKeyBytes})
	defer c.Close()

	a, _ := c.TryAcquire("s")
	d, _ := a.Reservation.BeginDispatch(Worker{ID: 9}, 1)
	d.Complete(placement.Ambiguous) // the stream dropped mid-flight

	_, err := c.TryAcquire("s")
	var amb *placement.AmbiguousError
	if errors.As(err, &amb) {
		fmt.Println("quarantined: attempt", amb.Attempt, "generation", amb.Generation)
	}
	// Later the forwarding owner learns the worker did accept it.
	if err := c.Resolve("s", amb.Attempt, amb.Generation, placement.ResolveAccepted); err != nil {
		panic(err)
	}
	a, _ = c.TryAcquire("s")
	fmt.Println("resolved; next turn hits worker", a.Lease.Target().ID)
	a.Lease.Release()
	// Output:
	// quarantined: attempt 1 generation 1
	// resolved; next turn hits worker 9
}

// A simulation host drives time with a ManualClock: no reaper goroutine;
// each Advance reclaims what expired.
func Example_manualClock() {
	clk := placement.NewManualClock(0)
	c, _ := placement.New[Worker](placement.Config{IdleTTL: 30 * time.Second, InitTimeout: 5 * time.Second,
		MaxEntries: 1024, MaxKeyBytes: 64, Clock: clk})
	defer c.Close()

	a, _ := c.TryAcquire("s")
	lease, _ := a.Reservation.CommitAccepted(Worker{ID: 1}, 1)
	clk.Advance(time.Hour) // a long request: leased bindings never expire
	fmt.Println("after an hour, leased:", mustQuery(c, "s"))
	lease.Release() // idle from now: expires 30 simulated seconds later
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

// Set moves a manual clock the way the runtime clock moves between reaper
// ticks: nothing is reclaimed until something touches the key or Reclaim
// runs a tick. Events carry their order (Seq) and the binding's version.
func ExampleManualClock_Set() {
	clk := placement.NewManualClock(0)
	c, _ := placement.New[Worker](placement.Config{IdleTTL: 30 * time.Second, InitTimeout: 5 * time.Second,
		MaxEntries: 1024, MaxKeyBytes: 64, Clock: clk,
		Observer: func(ev placement.Event) { fmt.Println("event", ev.Seq, ev.Kind, "version", ev.Attempt) }})
	defer c.Close()

	for _, key := range []string{"a", "b"} {
		a, _ := c.TryAcquire(key)
		lease, _ := a.Reservation.CommitAccepted(Worker{ID: 1}, 1)
		lease.Release()
	}
	clk.SetBy(time.Minute)               // both idle bindings are past their deadline
	fmt.Println("live:", c.Stats().Live) // not swept yet
	fmt.Println("a:", mustQuery(c, "a")) // Query expires it itself
	clk.Reclaim()                        // one reaper tick: b goes
	fmt.Println("live:", c.Stats().Live)
	// Output:
	// event 1 Reserved version 0
	// event 2 Committed version 1
	// event 3 Reserved version 0
	// event 4 Committed version 2
	// live: 2
	// event 5 Expired version 1
	// a: Absent
	// event 6 Expired version 2
	// live: 0
}

func mustQuery(c *placement.Coordinator[Worker], key string) placement.State {
	i, err := c.Query(key)
	if err != nil {
		panic(err)
	}
	return i.State
}
