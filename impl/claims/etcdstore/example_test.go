package etcdstore_test

import (
	"context"
	"fmt"
	"time"

	"github.com/placementlab/placement/impl/claims"
	"github.com/placementlab/placement/impl/claims/etcdstore"
	"github.com/placementlab/placement/impl/claims/etcdstore/embedded"
)

// Two router replicas share a session's claim through etcd (here an
// in-process one): the first writer wins, a close with another holder is
// deferred, and the last Unhold deletes the claim.
func Example() {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cluster, err := embedded.Start(ctx, embedded.Config{Members: 1})
	if err != nil {
		fmt.Println(err)
		return
	}
	defer cluster.Close()

	opts := claims.Options{IdleTTL: time.Minute, Prefix: "example/"}
	a, err := etcdstore.New(ctx, cluster.Client(), "replica-a", opts)
	if err != nil {
		fmt.Println(err)
		return
	}
	defer a.Shutdown()
	b, err := etcdstore.New(ctx, cluster.Client(), "replica-b", opts)
	if err != nil {
		fmt.Println(err)
		return
	}
	defer b.Shutdown()

	events, err := b.Events(ctx)
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println("event:", (<-events).Kind)

	w1, _ := a.Register(ctx, "worker-1", "boot-1")
	_, _ = a.Register(ctx, "worker-2", "boot-1")
	fmt.Println("event:", (<-events).Kind)
	fmt.Println("event:", (<-events).Kind)

	c, created, _ := a.CreateOrGet(ctx, "session-42", func() (claims.Target, error) {
		return claims.Target{Worker: "worker-1"}, nil
	})
	fmt.Println("a:", created, c.Target, c.State, c.Gen == w1.Gen)
	// b proposes another worker, but a's claim stands.
	c2, created, _ := b.CreateOrGet(ctx, "session-42", func() (claims.Target, error) {
		return claims.Target{Worker: "worker-2"}, nil
	})
	fmt.Println("b:", created, c2.Target, c2.Rev == c.Rev)

	_ = a.Hold(ctx, "session-42", c.Rev, "replica-a")
	res, _ := b.Close(ctx, "session-42", c.Rev, "replica-b")
	fmt.Println("b closes:", res)
	ev := <-events
	fmt.Println("event:", ev.Kind, ev.Key, ev.Rev == c.Rev)
	closing, _, _ := a.Get(ctx, "session-42")
	fmt.Println("now:", closing.State)
	_ = a.Unhold(ctx, "session-42", "replica-a")
	ev = <-events
	fmt.Println("event:", ev.Kind, ev.Key, ev.Rev == closing.Rev)
	_, ok, _ := b.Get(ctx, "session-42")
	fmt.Println("claim left:", ok)
	// Output:
	// event: reset
	// event: members-changed
	// event: members-changed
	// a: true worker-1 bound true
	// b: false worker-1 true
	// b closes: deferred
	// event: delete session-42 true
	// now: closing
	// event: delete session-42 true
	// claim left: false
}
