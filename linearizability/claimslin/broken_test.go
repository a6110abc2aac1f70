package claimslin

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/anishathalye/porcupine"
	"github.com/placementlab/placement/impl/claims"
	"github.com/placementlab/placement/linearizability/histfile"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// unfencedClose closes whatever revision is current.
type unfencedClose struct{ claims.Store }

func (s unfencedClose) Close(ctx context.Context, key string, rev int64, replica string) (claims.CloseResult, error) {
	if c, ok, err := s.Get(ctx, key); err == nil && ok {
		rev = c.Rev
	}
	return s.Store.Close(ctx, key, rev, replica)
}

// closeIgnoresHolders deletes the claim whoever holds it.
type closeIgnoresHolders struct{ claims.Store }

func (s closeIgnoresHolders) Close(ctx context.Context, key string, rev int64, replica string) (claims.CloseResult, error) {
	for r := 0; r < MaxReplicas; r++ {
		_ = s.Unhold(ctx, key, replicaName(r))
	}
	return s.Store.Close(ctx, key, rev, replica)
}

// staleGet answers every third Get from this handle's last answer.
type staleGet struct {
	claims.Store
	n    *int
	last map[string]claims.Claim
}

func (s staleGet) Get(ctx context.Context, key string) (claims.Claim, bool, error) {
	*s.n++
	if c, ok := s.last[key]; ok && *s.n%3 == 0 {
		return c, true, nil
	}
	c, ok, err := s.Store.Get(ctx, key)
	if err == nil && ok {
		s.last[key] = c
	}
	return c, ok, err
}

// touchForgotten says it touched the claim but does not.
type touchForgotten struct{ claims.Store }

func (s touchForgotten) Touch(ctx context.Context, key string, rev int64) error {
	if c, ok, err := s.Get(ctx, key); err == nil && ok && c.Rev == rev {
		return nil
	}
	return s.Store.Touch(ctx, key, rev)
}

// unfencedMove moves whatever revision is current.
type unfencedMove struct{ claims.Store }

func (s unfencedMove) Move(ctx context.Context, key string, rev int64, target claims.Target) (claims.Claim, error) {
	if c, ok, err := s.Get(ctx, key); err == nil && ok {
		rev = c.Rev
	}
	return s.Store.Move(ctx, key, rev, target)
}

// moveOverQuarantine settles a quarantine as accepted to move the claim.
type moveOverQuarantine struct{ claims.Store }

func (s moveOverQuarantine) Move(ctx context.Context, key string, rev int64, target claims.Target) (claims.Claim, error) {
	if c, ok, err := s.Get(ctx, key); err == nil && ok && c.Rev == rev && c.State == claims.Quarantined {
		if r, ok, err := s.Resolve(ctx, key, c.Attempt, c.Gen, true); err == nil && ok {
			rev = r.Rev
		}
	}
	return s.Store.Move(ctx, key, rev, target)
}

// catchSeeds is how many seeds a broken store gets to be caught in: most
// are caught within four, but a forgotten touch shows only when the clock
// moves past the idle deadline between the touch and a later read, which
// a run under -race on a loaded machine (fewer calls between clock moves)
// can miss for several seeds.
const catchSeeds = 16

// TestCatchesBrokenStores: the whole check (harness, recording, model)
// finds a memstore whose handles break the contract, each within a few
// seeds: a close not fenced by its revision, a close that ignores other
// replicas' holds, stale reads, a touch that does not restart the idle
// expiry, a move not fenced by its revision, a move over a quarantine
// (settled as accepted to be moved).
func TestCatchesBrokenStores(t *testing.T) {
	for _, tc := range []struct {
		name string
		wrap func(claims.Store) claims.Store
	}{
		{"unfenced close", func(s claims.Store) claims.Store { return unfencedClose{s} }},
		{"close ignores holders", func(s claims.Store) claims.Store { return closeIgnoresHolders{s} }},
		{"stale get", func(s claims.Store) claims.Store { return staleGet{s, new(int), map[string]claims.Claim{}} }},
		{"touch forgotten", func(s claims.Store) claims.Store { return touchForgotten{s} }},
		{"unfenced move", func(s claims.Store) claims.Store { return unfencedMove{s} }},
		{"move over a quarantine", func(s claims.Store) claims.Store { return moveOverQuarantine{s} }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			began := time.Now()
			for seed := uint64(1); seed <= catchSeeds; seed++ {
				run, err := execute(DrawPlan(seed, 200, BackendMem), tc.wrap)
				require.NoError(t, err)
				h := histfile.Record[Plan, Input, Output](run.Plan, run.History, "", "")
				res, _, _ := Check(&h, 10*time.Second)
				if res == porcupine.Illegal {
					t.Logf("caught at seed %d (%d operations) in %v", seed, len(run.History), time.Since(began).Round(time.Millisecond))
					return
				}
				assert.Equal(t, porcupine.Ok, res, fmt.Sprintf("seed %d", seed))
			}
			t.Errorf("%s: not caught in %d seeds", tc.name, catchSeeds)
		})
	}
}
