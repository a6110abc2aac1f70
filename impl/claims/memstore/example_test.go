package memstore_test

import (
	"context"
	"fmt"
	"time"

	"github.com/placementlab/placement/impl/claims"
	"github.com/placementlab/placement/impl/claims/memstore"
	"github.com/placementlab/placement/impl/placement"
)

// Two replicas share one in-memory store: the first writer's claim wins,
// a close under another replica's hold is deferred, and the claim idles
// out on the manual clock.
func Example() {
	ctx := context.Background()
	clk := placement.NewManualClock(0)
	b := memstore.NewBackend(memstore.Config{IdleTTL: time.Minute, Clock: clk})
	defer b.Close()
	r1, r2 := b.Open("r1"), b.Open("r2")

	if _, err := r1.Register(ctx, "w1", "boot-1"); err != nil {
		fmt.Println(err)
		return
	}
	c, created, _ := r1.CreateOrGet(ctx, "session", func() (claims.Target, error) {
		return claims.Target{Worker: "w1"}, nil
	})
	fmt.Println("r1:", c.Target, created)
	c2, created, _ := r2.CreateOrGet(ctx, "session", func() (claims.Target, error) {
		return claims.Target{}, fmt.Errorf("not called: the claim exists")
	})
	fmt.Println("r2:", c2.Target, created, c2.Rev == c.Rev)

	_ = r2.Hold(ctx, "session", c.Rev, "r2")
	res, _ := r1.Close(ctx, "session", c.Rev, "r1")
	fmt.Println("close:", res)
	_ = r2.Unhold(ctx, "session", "r2")
	_, ok, _ := r1.Get(ctx, "session")
	fmt.Println("after the last unhold:", ok)

	c, _, _ = r1.CreateOrGet(ctx, "other", func() (claims.Target, error) {
		return claims.Target{Worker: "w1", Rank: 1, HasRank: true}, nil
	})
	_ = clk.AdvanceBy(time.Minute)
	b.Sweep()
	_, ok, _ = r1.Get(ctx, "other")
	fmt.Println(c.Target, "after a minute idle:", ok)
	// Output:
	// r1: w1 true
	// r2: w1 false true
	// close: deferred
	// after the last unhold: false
	// w1/1 after a minute idle: false
}
