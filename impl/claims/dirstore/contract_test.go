//go:build linux

package dirstore_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/placementlab/placement/impl/claims"
	"github.com/placementlab/placement/impl/claims/dirstore"
	"github.com/placementlab/placement/impl/claims/storetest"
	"github.com/placementlab/placement/impl/placement"
)

// harness opens handles on one temporary directory and crashes them by
// name (Abandon: the liveness lock drops, nothing is cleaned up).
func harness(t *testing.T, cfg dirstore.Config) (func(string) claims.Store, func(string)) {
	cfg.Dir = t.TempDir()
	var mu sync.Mutex
	byName := map[string][]*dirstore.Store{}
	open := func(replica string) claims.Store {
		s, err := dirstore.Open(cfg, replica)
		require.NoError(t, err)
		mu.Lock()
		byName[replica] = append(byName[replica], s)
		mu.Unlock()
		t.Cleanup(func() { _ = s.Shutdown() })
		return s
	}
	crash := func(replica string) {
		mu.Lock()
		defer mu.Unlock()
		for _, s := range byName[replica] {
			s.Abandon()
		}
	}
	return open, crash
}

// TestContract runs the backend-neutral suite on a manual clock.
func TestContract(t *testing.T) {
	storetest.Run(t, storetest.Harness{
		Parallel: true,
		New: func(t *testing.T) (func(string) claims.Store, storetest.Controls) {
			clk := placement.NewManualClock(0)
			cfg := dirstore.Config{IdleTTL: time.Minute, Clock: clk, SweepEvery: 20 * time.Millisecond}
			open, crash := harness(t, cfg)
			sweeper := open("storetest-sweeper")
			return open, storetest.Controls{
				IdleTTL: time.Minute,
				Advance: func(d time.Duration) {
					require.NoError(t, clk.AdvanceBy(d))
					require.NoError(t, sweeper.(*dirstore.Store).Sweep(context.Background()))
				},
				Crash: crash,
			}
		},
	})
}

// TestContractRealTime runs the suite on the wall clock with a short TTL.
func TestContractRealTime(t *testing.T) {
	const ttl = time.Second
	storetest.Run(t, storetest.Harness{
		Parallel: true,
		New: func(t *testing.T) (func(string) claims.Store, storetest.Controls) {
			open, crash := harness(t, dirstore.Config{IdleTTL: ttl, SweepEvery: 10 * time.Millisecond})
			return open, storetest.Controls{IdleTTL: ttl, Crash: crash}
		},
	})
}
