package claims_test

import (
	"context"
	"errors"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/placementlab/placement/impl/claims"
)

// scripted is a Store whose Hold and Get answer from a script: the
// claim is rewritten (or replaced) between HoldLineage's calls.
type scripted struct {
	claims.Store                // nil: any other call panics
	cur          []claims.Claim // the claim Get returns, one per call (the last repeats)
	gets, writes int
	refuse       bool // Hold refuses even the current revision
	err          error
}

func (s *scripted) claim() (claims.Claim, bool) {
	c := s.cur[min(s.gets, len(s.cur)-1)]
	return c, c.Rev != 0
}

func (s *scripted) write(rev int64) error {
	s.writes++
	if s.err != nil {
		return s.err
	}
	// The claim at the time of the write is the one the next Get returns
	// (it was rewritten since the previous Get).
	c, ok := s.claim()
	if s.refuse || !ok || c.Rev != rev {
		return claims.ErrClaimMoved
	}
	return nil
}

func (s *scripted) Hold(_ context.Context, _ string, rev int64, _ string) error { return s.write(rev) }
func (s *scripted) Get(context.Context, string) (claims.Claim, bool, error) {
	c, ok := s.claim()
	s.gets++
	return c, ok, nil
}

func TestHoldLineage(t *testing.T) {
	ctx := context.Background()
	lin := func(born, rev int64) claims.Claim { return claims.Claim{Key: "s", Born: born, Rev: rev} }
	t.Run("current", func(t *testing.T) {
		s := &scripted{cur: []claims.Claim{lin(3, 3)}}
		rev, err := claims.HoldLineage(ctx, s, "s", 3, "r")
		require.NoError(t, err)
		require.EqualValues(t, 3, rev)
		require.Equal(t, 0, s.gets, "one round trip when rev is current")
	})
	t.Run("rewritten", func(t *testing.T) {
		s := &scripted{cur: []claims.Claim{lin(3, 5)}}
		rev, err := claims.HoldLineage(ctx, s, "s", 3, "r")
		require.NoError(t, err)
		require.EqualValues(t, 5, rev)
	})
	t.Run("rewritten again between the Get and the Hold", func(t *testing.T) {
		s := &scripted{cur: []claims.Claim{lin(3, 5), lin(3, 7)}}
		rev, err := claims.HoldLineage(ctx, s, "s", 3, "r")
		require.NoError(t, err)
		require.EqualValues(t, 7, rev)
	})
	for name, cur := range map[string]claims.Claim{
		"no claim":        {},
		"newer lineage":   lin(8, 9),
		"future revision": lin(1, 2),
	} {
		t.Run(name, func(t *testing.T) {
			s := &scripted{cur: []claims.Claim{cur}}
			_, err := claims.HoldLineage(ctx, s, "s", 3, "r")
			require.ErrorIs(t, err, claims.ErrClaimMoved)
		})
	}
	t.Run("refused by the current revision ends", func(t *testing.T) {
		s := &scripted{cur: []claims.Claim{lin(3, 5)}, refuse: true}
		_, err := claims.HoldLineage(ctx, s, "s", 3, "r")
		require.ErrorIs(t, err, claims.ErrClaimMoved)
		require.Equal(t, 2, s.writes, "no loop")
	})
	t.Run("other errors as they are", func(t *testing.T) {
		boom := errors.New("boom")
		s := &scripted{cur: []claims.Claim{lin(3, 3)}, err: boom}
		_, err := claims.HoldLineage(ctx, s, "s", 3, "r")
		require.ErrorIs(t, err, boom)
	})
	t.Run("cancelled", func(t *testing.T) {
		c, cancel := context.WithCancel(ctx)
		cancel()
		s := &scripted{cur: []claims.Claim{lin(3, 5)}}
		_, err := claims.HoldLineage(c, s, "s", 3, "r")
		require.ErrorIs(t, err, context.Canceled)
	})
	t.Run("invalid arguments", func(t *testing.T) {
		s := &scripted{cur: []claims.Claim{lin(3, 3)}}
		var nilCtx context.Context
		for _, err := range []error{
			func() error { _, err := claims.HoldLineage(ctx, s, "", 3, "r"); return err }(),
			func() error { _, err := claims.HoldLineage(ctx, s, "s", 0, "r"); return err }(),
			func() error { _, err := claims.HoldLineage(ctx, s, "s", 3, ""); return err }(),
			func() error { _, err := claims.HoldLineage(ctx, nil, "s", 3, "r"); return err }(),
			func() error { _, err := claims.HoldLineage(nilCtx, s, "s", 3, "r"); return err }(),
		} {
			require.ErrorIs(t, err, claims.ErrInvalidArgument)
		}
	})
}
