package claims_test

import (
	"errors"
	"fmt"
	"math"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/placementlab/placement/impl/claims"
)

func TestStrings(t *testing.T) {
	require.Equal(t, "w1", claims.Target{Worker: "w1", Rank: 3}.String(), "a rank without HasRank is not shown")
	require.Equal(t, "w1/0", claims.Target{Worker: "w1", HasRank: true}.String())
	require.Equal(t, "w1/3", claims.Target{Worker: "w1", Rank: 3, HasRank: true}.String())
	for s, want := range map[claims.State]string{
		claims.Bound: "bound", claims.Quarantined: "quarantined", claims.Closing: "closing", 0: "State(0)", 9: "State(9)",
	} {
		require.Equal(t, want, s.String())
	}
	for k, want := range map[claims.EventKind]string{
		claims.Delete: "delete", claims.Reset: "reset", claims.MembersChanged: "members-changed", 0: "EventKind(0)",
	} {
		require.Equal(t, want, k.String())
	}
	for r, want := range map[claims.CloseResult]string{
		claims.CloseDeleted: "deleted", claims.CloseDeferred: "deferred", claims.CloseStale: "stale", 7: "CloseResult(7)",
	} {
		require.Equal(t, want, r.String())
	}
}

func TestTypedErrors(t *testing.T) {
	fe := &claims.FencedError{Key: "s", Attempt: 4, Gen: 2}
	var err error = fmt.Errorf("wrapped: %w", fe)
	require.ErrorIs(t, err, claims.ErrFenced)
	require.NotErrorIs(t, err, claims.ErrClaimMoved)
	var got *claims.FencedError
	require.ErrorAs(t, err, &got)
	require.Same(t, fe, got)
	require.Contains(t, fe.Error(), "no claim")
	fe.Found = true
	fe.Current = claims.Claim{Key: "s", Rev: 9, State: claims.Quarantined, Attempt: 5, Gen: 2}
	require.Equal(t, `claims: resolve of "s" attempt 4 gen 2: claim is quarantined attempt 5 gen 2 at rev 9`, fe.Error())

	cause := errors.New("dial tcp: refused")
	ue := &claims.UnavailableError{Op: "get", Err: cause}
	err = fmt.Errorf("wrapped: %w", ue)
	require.ErrorIs(t, err, claims.ErrUnavailable)
	require.ErrorIs(t, err, cause, "Unwrap reaches the backend's error")
	require.NotErrorIs(t, err, claims.ErrFenced)
	require.Equal(t, "claims: get: store unavailable: dial tcp: refused", ue.Error())

	sentinels := []error{claims.ErrUnavailable, claims.ErrClaimMoved, claims.ErrFenced, claims.ErrUnknownWorker, claims.ErrClosed, claims.ErrInvalidArgument}
	for i, a := range sentinels {
		for j, b := range sentinels {
			require.Equal(t, i == j, errors.Is(a, b), "%v is %v", a, b)
		}
	}
}

func TestAttemptSpace(t *testing.T) {
	require.Equal(t, uint64(1)<<40, claims.FirstAttempt(1))
	require.Equal(t, uint64(math.MaxUint64)>>claims.AttemptShift, uint64(claims.MaxReplicaID))
	// The largest replica id's attempts still fit: no two replicas' ranges
	// overlap and none wraps.
	last := claims.FirstAttempt(claims.MaxReplicaID)
	require.Equal(t, uint64(math.MaxUint64), last|(1<<claims.AttemptShift-1))
	require.Less(t, claims.FirstAttempt(claims.MaxReplicaID-1), last)
	require.Zero(t, claims.FirstAttempt(0), "0 is never a replica id: its range holds attempt 0")
}

func TestInLineage(t *testing.T) {
	c := claims.Claim{Born: 5, Rev: 9}
	for rev, want := range map[int64]bool{4: false, 5: true, 7: true, 9: true, 10: false, 0: false, -1: false} {
		require.Equal(t, want, c.InLineage(rev), "rev %d in [5, 9]", rev)
	}
	require.False(t, claims.Claim{}.InLineage(0), "no claim, no lineage")
}

func TestFencedErrorStale(t *testing.T) {
	e := &claims.FencedError{Key: "s", Attempt: 3, Gen: 4, Found: true, Stale: true,
		Current: claims.Claim{Rev: 9, Target: claims.Target{Worker: "w"}, State: claims.Quarantined}}
	require.ErrorIs(t, e, claims.ErrFenced)
	require.Contains(t, e.Error(), "stale")
	require.Contains(t, e.Error(), `"w"`)
}

// A *MoveError is ErrClaimMoved when the revision moved from is not
// current (no claim, or another revision) and ErrNotBound when it is
// current but the claim is not Bound; never both.
func TestMoveError(t *testing.T) {
	to := claims.Target{Worker: "w1"}
	for _, tc := range []struct {
		name string
		me   *claims.MoveError
		is   error
		text string
	}{
		{"no claim", &claims.MoveError{Key: "s", Rev: 4, Target: to}, claims.ErrClaimMoved,
			`claims: move of "s" rev 4 to w1: no claim: claims: claim revision is not current`},
		{"another revision", &claims.MoveError{Key: "s", Rev: 4, Target: to, Found: true,
			Current: claims.Claim{Key: "s", Rev: 7, Born: 7, Target: claims.Target{Worker: "w2"}, State: claims.Bound}}, claims.ErrClaimMoved,
			`claims: move of "s" rev 4 to w1: current rev is 7 (bound to w2): claims: claim revision is not current`},
		{"quarantined", &claims.MoveError{Key: "s", Rev: 4, Target: to, Found: true,
			Current: claims.Claim{Key: "s", Rev: 4, State: claims.Quarantined}}, claims.ErrNotBound,
			`claims: move of "s" rev 4 to w1: the claim is quarantined: claims: claim is not bound`},
		{"closing", &claims.MoveError{Key: "s", Rev: 4, Target: to, Found: true,
			Current: claims.Claim{Key: "s", Rev: 4, State: claims.Closing}}, claims.ErrNotBound,
			`claims: move of "s" rev 4 to w1: the claim is closing: claims: claim is not bound`},
	} {
		err := fmt.Errorf("wrapped: %w", tc.me)
		require.ErrorIs(t, err, tc.is, tc.name)
		other := claims.ErrNotBound
		if tc.is == claims.ErrNotBound {
			other = claims.ErrClaimMoved
		}
		require.NotErrorIs(t, err, other, tc.name)
		require.Equal(t, tc.is == claims.ErrNotBound, tc.me.NotBound(), tc.name)
		var got *claims.MoveError
		require.ErrorAs(t, err, &got, tc.name)
		require.Same(t, tc.me, got, tc.name)
		require.Equal(t, tc.text, tc.me.Error(), tc.name)
	}
}
