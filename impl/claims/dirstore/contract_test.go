//go:build linux

package dirstore_test

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/placementlab/placement/impl/claims"
	"github.com/placementlab/placement/impl/claims/dirstore"
	"github.com/placementlab/placement/impl/claims/storetest"
	"github.com/placementlab/placement/impl/placement"
)

// harness opens handles on one temporary directory, crashes them by name
// (Abandon: the liveness lock drops, nothing is cleaned up) and loses the
// reply of a replica's next applied move (loseReply).
func harness(t *testing.T, cfg dirstore.Config) (open func(string) claims.Store, crash, loseReply func(string)) {
	cfg.Dir = t.TempDir()
	var mu sync.Mutex
	byName := map[string][]*lossy{}
	open = func(replica string) claims.Store {
		s, err := dirstore.Open(cfg, replica)
		require.NoError(t, err)
		l := &lossy{Store: s}
		mu.Lock()
		byName[replica] = append(byName[replica], l)
		mu.Unlock()
		t.Cleanup(func() { _ = s.Shutdown() })
		return l
	}
	crash = func(replica string) {
		mu.Lock()
		defer mu.Unlock()
		for _, l := range byName[replica] {
			l.Abandon()
		}
	}
	loseReply = func(replica string) {
		mu.Lock()
		defer mu.Unlock()
		for _, l := range byName[replica] {
			l.armed.Store(true)
		}
	}
	return open, crash, loseReply
}

// lossy is a handle whose next applied Move, once armed, loses its reply:
// the move is written to the directory, and the call returns a
// *claims.UnavailableError, as a process that lost the shared file
// system's answer after the write would.
type lossy struct {
	*dirstore.Store
	armed atomic.Bool
}

func (l *lossy) Move(ctx context.Context, key string, rev int64, target claims.Target) (claims.Claim, error) {
	c, err := l.Store.Move(ctx, key, rev, target)
	if err == nil && l.armed.CompareAndSwap(true, false) {
		return claims.Claim{}, &claims.UnavailableError{Op: "move", Err: errLostReply}
	}
	return c, err
}

var errLostReply = errors.New("dirstore test: injected lost reply")

// loseMoves is Controls.LoseReply for moves, through loseReply.
func loseMoves(t *testing.T, loseReply func(string)) func(replica, op string) {
	return func(replica, op string) {
		require.Equal(t, "move", op, "the directory harness loses the replies of moves only")
		loseReply(replica)
	}
}

// TestContract runs the backend-neutral suite on a manual clock.
func TestContract(t *testing.T) {
	storetest.Run(t, storetest.Harness{
		Parallel: true,
		New: func(t *testing.T) (func(string) claims.Store, storetest.Controls) {
			clk := placement.NewManualClock(0)
			cfg := dirstore.Config{IdleTTL: time.Minute, Clock: clk, SweepEvery: 20 * time.Millisecond}
			open, crash, loseReply := harness(t, cfg)
			sweeper := open("storetest-sweeper")
			return open, storetest.Controls{
				IdleTTL: time.Minute,
				Advance: func(d time.Duration) {
					require.NoError(t, clk.AdvanceBy(d))
					require.NoError(t, sweeper.(*lossy).Sweep(context.Background()))
				},
				Crash:     crash,
				LoseReply: loseMoves(t, loseReply),
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
			open, crash, loseReply := harness(t, dirstore.Config{IdleTTL: ttl, SweepEvery: 10 * time.Millisecond})
			return open, storetest.Controls{IdleTTL: ttl, Crash: crash, LoseReply: loseMoves(t, loseReply)}
		},
	})
}
