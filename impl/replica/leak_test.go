package replica

import (
	"context"
	"runtime"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/placementlab/placement/impl/claims/memstore"
	"github.com/placementlab/placement/impl/placement"
)

// TestNoGoroutineLeak: replicas that served turns, saw a Reset, an
// unreachable store, a reconcile and a quarantine leave no goroutine
// behind once they, their store handles and the backend are closed.
func TestNoGoroutineLeak(t *testing.T) {
	before := runtime.NumGoroutine()
	func() {
		b := memstore.NewBackend(memstore.Config{IdleTTL: time.Minute})
		defer b.Close()
		ctx := context.Background()
		_, err := b.Open("workers").Register(ctx, "w1", "boot-1")
		require.NoError(t, err)
		var cs []*Coordinator
		for _, name := range []string{"r1", "r2"} {
			h := b.Open(name)
			c, err := New(ctx, Config{Store: h, Name: name, IdleTTL: time.Minute, StoreRetry: 20 * time.Millisecond})
			require.NoError(t, err)
			defer h.Shutdown()
			defer c.Close()
			cs = append(cs, c)
		}
		for i, c := range cs {
			serve(t, c, "s", nil, placement.Accepted, false)
			serve(t, c, "s", nil, placement.Accepted, i == 1)
		}
		b.InjectReset("r1")
		b.SetUnavailable("r1", true)
		serve(t, cs[0], "down", nil, placement.Accepted, false)
		b.SetUnavailable("r1", false)
		require.Eventually(t, func() bool { return cs[0].Stats().Reconciles == 1 }, waitFor, tick)
		tu, err := cs[1].Start(tctx(t), "q", nil)
		require.NoError(t, err)
		_ = tu.Complete(placement.Ambiguous)
		tu.Done(false)
		// A turn left open when the coordinator closes ends harmlessly.
		open(t, cs[0], "left-open", nil)
		// A first turn that stops waiting for a slow store: its shared
		// CreateOrGet goes on, and ends by Close at the latest.
		slow := newCounting(b.Open("r3"))
		slow.createDelay = 100 * time.Millisecond
		defer slow.Shutdown()
		c3, err := New(ctx, Config{Store: slow, Name: "r3"})
		require.NoError(t, err)
		defer c3.Close()
		short, cancel := context.WithTimeout(ctx, 10*time.Millisecond)
		defer cancel()
		_, err = c3.Start(short, "slow", nil)
		require.ErrorIs(t, err, placement.ErrCancelled)
	}()
	settleGoroutines(t, before)
}
