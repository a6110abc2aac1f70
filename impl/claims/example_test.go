package claims_test

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/placementlab/placement/impl/claims"
	"github.com/placementlab/placement/impl/claims/memstore"
	"github.com/placementlab/placement/impl/placement"
)

// A replica's use of a Store (here the in-memory backend): the first turn
// of a session claims it, an ambiguous dispatch quarantines the claim,
// Resolve settles it, and the session's final request closes it.
func Example() {
	ctx := context.Background()
	b := memstore.NewBackend(memstore.Config{IdleTTL: time.Minute, Clock: placement.NewManualClock(0)})
	defer b.Close()
	var store claims.Store = b.Open("replica-a")
	defer store.Shutdown()

	id, _ := store.ReplicaID(ctx, "replica-a")
	attempt := claims.FirstAttempt(id) + 1
	w, _ := store.Register(ctx, "worker-1", "boot-1")

	c, created, _ := store.CreateOrGet(ctx, "session-42", func() (claims.Target, error) {
		return claims.Target{Worker: w.Worker}, nil
	})
	fmt.Println("claimed:", c.Target, c.State, created)

	q, _ := store.Quarantine(ctx, "session-42", c.Rev, attempt, c.Gen)
	fmt.Println("after an ambiguous dispatch:", q.State)
	_, _, err := store.Resolve(ctx, "session-42", attempt+1, q.Gen, true)
	fmt.Println("another attempt's resolve is fenced:", errors.Is(err, claims.ErrFenced))
	r, _, _ := store.Resolve(ctx, "session-42", attempt, q.Gen, true)
	fmt.Println("resolved:", r.State, r.Rev > q.Rev)

	res, _ := store.Close(ctx, "session-42", c.Rev, "replica-a")
	fmt.Println("close by the first revision:", res)
	res, _ = store.Close(ctx, "session-42", r.Rev, "replica-a")
	fmt.Println("close by the current revision:", res)
	// Output:
	// claimed: worker-1 bound true
	// after an ambiguous dispatch: quarantined
	// another attempt's resolve is fenced: true
	// resolved: bound true
	// close by the first revision: stale
	// close by the current revision: deleted
}

// A replica that lost the store while its request ran under revision c.Rev
// re-holds the claim when the store returns, although another replica
// quarantined it meanwhile (a new revision of the same lineage): Hold
// refuses the old revision, HoldLineage holds the lineage by it.
func ExampleHoldLineage() {
	ctx := context.Background()
	b := memstore.NewBackend(memstore.Config{IdleTTL: time.Minute, Clock: placement.NewManualClock(0)})
	defer b.Close()
	a, other := b.Open("replica-a"), b.Open("replica-b")
	defer a.Shutdown()
	defer other.Shutdown()
	w, _ := a.Register(ctx, "worker-1", "boot-1")
	c, _, _ := a.CreateOrGet(ctx, "session-42", func() (claims.Target, error) {
		return claims.Target{Worker: w.Worker}, nil
	})
	q, _ := other.Quarantine(ctx, "session-42", c.Rev, 7, c.Gen)
	fmt.Println("same lineage:", q.Born == c.Born, q.InLineage(c.Rev))

	err := a.Hold(ctx, "session-42", c.Rev, "replica-a")
	fmt.Println("Hold of the old revision moved:", errors.Is(err, claims.ErrClaimMoved))
	rev, err := claims.HoldLineage(ctx, a, "session-42", c.Rev, "replica-a")
	fmt.Println("HoldLineage:", err, rev == q.Rev, b.Holders("session-42"))
	// Output:
	// same lineage: true true
	// Hold of the old revision moved: true
	// HoldLineage: <nil> true [replica-a]
}

// A quarantine whose worker restarted is stale: Resolve is fenced and
// changes nothing; the next CreateOrGet replaces the claim.
func ExampleFencedError_stale() {
	ctx := context.Background()
	b := memstore.NewBackend(memstore.Config{IdleTTL: time.Minute, Clock: placement.NewManualClock(0)})
	defer b.Close()
	s := b.Open("replica-a")
	defer s.Shutdown()
	w, _ := s.Register(ctx, "worker-1", "boot-1")
	c, _, _ := s.CreateOrGet(ctx, "session-42", func() (claims.Target, error) {
		return claims.Target{Worker: w.Worker}, nil
	})
	q, _ := s.Quarantine(ctx, "session-42", c.Rev, 7, c.Gen)
	_, _ = s.Register(ctx, "worker-1", "boot-2") // the worker restarts

	_, _, err := s.Resolve(ctx, "session-42", 7, q.Gen, true)
	var fe *claims.FencedError
	fmt.Println(errors.As(err, &fe), errors.Is(err, claims.ErrFenced), fe.Stale)
	// Output:
	// true true true
}

// Registering a worker again with the identity it is registered with
// changes nothing (a flap of the same instance fences no claim); another
// identity is a restart, a new generation. The registration stays with
// the session that made it.
func ExampleMember_identity() {
	ctx := context.Background()
	b := memstore.NewBackend(memstore.Config{IdleTTL: time.Minute, Clock: placement.NewManualClock(0)})
	defer b.Close()
	agent, other := b.Open("worker-1-agent"), b.Open("replica-b")
	defer agent.Shutdown()
	defer other.Shutdown()

	first, _ := agent.Register(ctx, "worker-1", "boot-1")
	again, _ := other.Register(ctx, "worker-1", "boot-1")
	fmt.Println(first.Gen == again.Gen)

	_ = other.Shutdown() // the registration is the agent's: it stays
	ms, _, _ := agent.Members(ctx)
	fmt.Println(len(ms), ms[0].Gen == first.Gen)

	restarted, _ := agent.Register(ctx, "worker-1", "boot-2")
	fmt.Println(restarted.Gen > first.Gen)
	// Output:
	// true
	// 1 true
	// true
}
