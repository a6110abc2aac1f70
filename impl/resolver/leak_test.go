package resolver_test

import (
	"context"
	"fmt"
	"runtime"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/placementlab/placement/impl/affinity"
	"github.com/placementlab/placement/impl/resolver"
)

// TestNoGoroutineLeak: Run with concurrent Status calls, some blocked on
// their context when Run's context ends, leaves no goroutine behind.
func TestNoGoroutineLeak(t *testing.T) {
	before := runtime.NumGoroutine()
	e := newEnv(t)
	for i := 0; i < 12; i++ {
		e.ambiguous(fmt.Sprintf("s%d", i), wa)
	}
	started := make(chan struct{}, 64)
	st := func(ctx context.Context, q affinity.Quarantine) (resolver.Verdict, error) {
		started <- struct{}{}
		if q.Attempt%2 == 0 {
			<-ctx.Done() // blocks until Run's context ends
			return resolver.Unknown, ctx.Err()
		}
		return resolver.Unknown, nil
	}
	r := e.resolver(st, func(c *resolver.Config) {
		c.Concurrency = 4
		c.Interval = time.Millisecond
		c.PerCallTimeout = time.Minute
	})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- r.Run(ctx) }()
	for i := 0; i < 4; i++ {
		<-started
	}
	cancel()
	require.ErrorIs(t, <-done, context.Canceled)
	require.NoError(t, e.l.Close())
	deadline := time.Now().Add(5 * time.Second)
	for runtime.NumGoroutine() > before {
		if time.Now().After(deadline) {
			buf := make([]byte, 1<<16)
			t.Fatalf("goroutine leak: %d before, %d after\n%s", before, runtime.NumGoroutine(), buf[:runtime.Stack(buf, true)])
		}
		time.Sleep(5 * time.Millisecond)
	}
}
