//go:build linux

package dirstore_test

import (
	"context"
	"fmt"
	"os"
	"time"

	"github.com/placementlab/placement/impl/claims"
	"github.com/placementlab/placement/impl/claims/dirstore"
)

// Two router processes on one host share claims through a directory (here
// two handles in one process): the first writer wins, a close under the
// other's hold is deferred, and each sees the other's writes as events.
func Example() {
	dir, err := os.MkdirTemp("", "claims")
	if err != nil {
		fmt.Println(err)
		return
	}
	defer os.RemoveAll(dir)
	ctx := context.Background()
	cfg := dirstore.Config{Dir: dir, IdleTTL: 10 * time.Minute}
	r1, err := dirstore.Open(cfg, "router-1")
	if err != nil {
		fmt.Println(err)
		return
	}
	defer r1.Shutdown()
	r2, err := dirstore.Open(cfg, "router-2")
	if err != nil {
		fmt.Println(err)
		return
	}
	defer r2.Shutdown()

	events, _ := r2.Events(ctx)
	fmt.Println("r2's first event:", (<-events).Kind)

	_, _ = r1.Register(ctx, "gpu-0", "boot-1")
	fmt.Println("r2 sees:", (<-events).Kind)
	c, created, _ := r1.CreateOrGet(ctx, "session-7", func() (claims.Target, error) {
		return claims.Target{Worker: "gpu-0"}, nil
	})
	same, created2, _ := r2.CreateOrGet(ctx, "session-7", func() (claims.Target, error) {
		return claims.Target{Worker: "gpu-1"}, nil
	})
	fmt.Println(c.Target, created, same.Target, created2)

	_ = r2.Hold(ctx, "session-7", c.Rev, "router-2")
	res, _ := r1.Close(ctx, "session-7", c.Rev, "router-1")
	ev := <-events
	fmt.Println("close:", res, "- r2 sees:", ev.Kind, ev.Key, ev.Rev == c.Rev)
	_ = r2.Unhold(ctx, "session-7", "router-2")
	ev = <-events
	fmt.Println("last unhold - r2 sees:", ev.Kind, ev.Key)
	// Output:
	// r2's first event: reset
	// r2 sees: members-changed
	// gpu-0 true gpu-0 false
	// close: deferred - r2 sees: delete session-7 true
	// last unhold - r2 sees: delete session-7
}
