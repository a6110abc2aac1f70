package memstore_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/placementlab/placement/impl/claims"
	"github.com/placementlab/placement/impl/claims/memstore"
	"github.com/placementlab/placement/impl/claims/storetest"
	"github.com/placementlab/placement/impl/placement"
)

// TestContract runs the backend-neutral suite on the manual clock.
func TestContract(t *testing.T) {
	storetest.Run(t, storetest.Harness{
		New: func(t *testing.T) (func(string) claims.Store, storetest.Controls) {
			clk := placement.NewManualClock(0)
			b := memstore.NewBackend(memstore.Config{IdleTTL: time.Minute, Clock: clk})
			t.Cleanup(func() { _ = b.Close() })
			return b.Open, storetest.Controls{
				IdleTTL: time.Minute,
				Advance: func(d time.Duration) {
					require.NoError(t, clk.AdvanceBy(d))
					b.Sweep()
				},
				Crash:     b.Crash,
				LoseReply: func(replica, op string) { b.LoseReply(replica, op, 1, false) },
			}
		},
	})
}

// TestContractRealTime runs the suite on real time (the background
// sweep), as a real-time backend's harness does.
func TestContractRealTime(t *testing.T) {
	const ttl = 500 * time.Millisecond
	storetest.Run(t, storetest.Harness{
		Parallel: true,
		New: func(t *testing.T) (func(string) claims.Store, storetest.Controls) {
			b := memstore.NewBackend(memstore.Config{IdleTTL: ttl})
			t.Cleanup(func() { _ = b.Close() })
			return b.Open, storetest.Controls{IdleTTL: ttl, Crash: b.Crash,
				LoseReply: func(replica, op string) { b.LoseReply(replica, op, 1, false) }}
		},
	})
}
