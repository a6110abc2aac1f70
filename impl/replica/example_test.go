package replica_test

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/placementlab/placement/impl/claims"
	"github.com/placementlab/placement/impl/claims/memstore"
	"github.com/placementlab/placement/impl/placement"
	"github.com/placementlab/placement/impl/replica"
)

// Two router replicas share one claim store (here in memory; etcdstore in
// production): the session's first turn on replica a writes its claim,
// replica b's first turn adopts it, and later turns are served from each
// replica's local table with no store round trip.
func Example() {
	ctx := context.Background()
	store := memstore.NewBackend(memstore.Config{IdleTTL: time.Minute})
	defer store.Close()
	workers := store.Open("workers")
	_, _ = workers.Register(ctx, "worker-1", "boot-1")
	_, _ = workers.Register(ctx, "worker-2", "boot-1")

	a, err := replica.New(ctx, replica.Config{Store: store.Open("a"), Name: "a", IdleTTL: time.Minute})
	if err != nil {
		fmt.Println(err)
		return
	}
	defer a.Close()
	b, err := replica.New(ctx, replica.Config{Store: store.Open("b"), Name: "b", IdleTTL: time.Minute})
	if err != nil {
		fmt.Println(err)
		return
	}
	defer b.Close()

	turn := func(c *replica.Coordinator, final bool) {
		t, err := c.Start(ctx, "session-42", nil)
		if err != nil {
			fmt.Println(err)
			return
		}
		defer t.Done(final)
		// ... send the request to t.Target(), with t.Attempt() ...
		if err := t.Complete(placement.Accepted); err != nil {
			fmt.Println(err)
			return
		}
		fmt.Printf("%s: hit=%v target=%s\n", c.Name(), t.Hit(), t.Target())
	}
	turn(a, false)
	turn(b, false)
	turn(a, false)
	turn(b, false)
	fmt.Println("a's cached turns:", a.Stats().CachedTurns, "claims created:", a.Stats().ClaimsCreated)
	fmt.Println("b's cached turns:", b.Stats().CachedTurns, "claims adopted:", b.Stats().ClaimsAdopted)
	// Output:
	// a: hit=false target=worker-1
	// b: hit=false target=worker-1
	// a: hit=true target=worker-1
	// b: hit=true target=worker-1
	// a's cached turns: 1 claims created: 1
	// b's cached turns: 1 claims adopted: 1
}

// New asks the store for the replica's id (its attempt ids start at
// claims.FirstAttempt(id), disjoint from every other replica's) and its
// view of the registered workers.
func ExampleNew() {
	ctx := context.Background()
	store := memstore.NewBackend(memstore.Config{})
	defer store.Close()
	_, _ = store.Open("workers").Register(ctx, "worker-1", "boot-1")

	c, err := replica.New(ctx, replica.Config{Store: store.Open("router-0"), Name: "router-0"})
	if err != nil {
		fmt.Println(err)
		return
	}
	defer c.Close()
	fmt.Println("replica id:", c.ReplicaID())
	for _, m := range c.Members() {
		fmt.Println("member:", m.Worker, m.Identity)
	}

	_, err = replica.New(ctx, replica.Config{Name: "router-1"})
	fmt.Println(errors.Is(err, replica.ErrInvalidConfig), err)
	// Output:
	// replica id: 1
	// member: worker-1 boot-1
	// true replica: invalid config: Store is required
}

// A placing turn whose target refuses it (DefinitelyNotAccepted) closes
// the refused claim and carries a new one: Complete says ErrRetry, and the
// request is sent again to the turn's new target. An ambiguous outcome
// quarantines the session on every replica until Resolve.
func ExampleCoordinator_Start() {
	ctx := context.Background()
	store := memstore.NewBackend(memstore.Config{})
	defer store.Close()
	workers := store.Open("workers")
	_, _ = workers.Register(ctx, "worker-1", "boot-1")
	_, _ = workers.Register(ctx, "worker-2", "boot-1")
	c, err := replica.New(ctx, replica.Config{Store: store.Open("router-0"), Name: "router-0"})
	if err != nil {
		fmt.Println(err)
		return
	}
	defer c.Close()

	t, err := c.Start(ctx, "session-1", nil)
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println("send to", t.Target())
	err = t.Complete(placement.DefinitelyNotAccepted)
	fmt.Println(errors.Is(err, replica.ErrRetry), "send again to", t.Target())
	fmt.Println(t.Complete(placement.Accepted))
	t.Done(false)

	t, err = c.Start(ctx, "session-2", func([]claims.Member, []claims.Target) (claims.Target, error) {
		return claims.Target{Worker: "worker-1"}, nil
	})
	if err != nil {
		fmt.Println(err)
		return
	}
	err = t.Complete(placement.Ambiguous)
	t.Done(false)
	var qe *replica.QuarantinedError
	if errors.As(err, &qe) {
		fmt.Println("quarantined attempt on", qe.Target)
		_, err = c.Start(ctx, "session-2", nil)
		fmt.Println(errors.Is(err, replica.ErrQuarantined))
		// The worker says it never ran the attempt.
		fmt.Println(c.Resolve(ctx, "session-2", qe.Attempt, qe.Gen, false))
	}
	// Output:
	// send to worker-1
	// true send again to worker-2
	// <nil>
	// quarantined attempt on worker-1
	// true
	// <nil>
}

// The session's final request closes its claim when the replica's last
// local lease on it ends (fenced by the revision held): deleted, or
// Closing while another replica still holds it.
func ExampleTurn_Done() {
	ctx := context.Background()
	store := memstore.NewBackend(memstore.Config{})
	defer store.Close()
	_, _ = store.Open("workers").Register(ctx, "worker-1", "boot-1")
	c, err := replica.New(ctx, replica.Config{Store: store.Open("router-0"), Name: "router-0"})
	if err != nil {
		fmt.Println(err)
		return
	}
	defer c.Close()

	for _, final := range []bool{false, true} {
		t, err := c.Start(ctx, "session-1", nil)
		if err != nil {
			fmt.Println(err)
			return
		}
		_ = t.Complete(placement.Accepted)
		t.Done(final)
	}
	_, ok := store.Claim("session-1")
	fmt.Println("claim left:", ok, "closes:", c.Stats().ClosesDeleted)
	// Output:
	// claim left: false closes: 1
}

// Close stops the coordinator's goroutines; the store handle is the
// caller's to shut down (its holds vanish with it).
func ExampleCoordinator_Close() {
	ctx := context.Background()
	store := memstore.NewBackend(memstore.Config{})
	defer store.Close()
	h := store.Open("router-0")
	c, err := replica.New(ctx, replica.Config{Store: h, Name: "router-0"})
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(c.Close(), c.Close())
	_, err = c.Start(ctx, "session-1", nil)
	fmt.Println(errors.Is(err, placement.ErrClosed))
	fmt.Println(h.Shutdown())
	// Output:
	// <nil> <nil>
	// true
	// <nil>
}
