package claimsconf

import (
	"github.com/placementlab/placement/impl/claims"
	"testing"

	mc "github.com/placementlab/placement/model/claims"
	"github.com/stretchr/testify/require"
)

// Labels for the scenarios (replicas r0..r2, sessions s0 s1, workers w0 w1).
func claimL(r, s, w int) mc.Label { return mc.Label{Act: mc.ActClaim, R: r, S: s, W: w} }
func rs(a mc.Action, r, s int) mc.Label {
	return mc.Label{Act: a, R: r, S: s, W: mc.None}
}
func onR(a mc.Action, r int) mc.Label {
	return mc.Label{Act: a, R: r, S: mc.None, W: mc.None}
}
func bump(w int) mc.Label { return mc.Label{Act: mc.ActBumpGeneration, R: mc.None, S: mc.None, W: w} }
func resolveL(s, a int, acc bool) mc.Label {
	return mc.Label{Act: mc.ActResolve, R: mc.None, S: s, W: mc.None, A: a, Accepted: acc}
}

// run applies steps to both sides and returns the first mismatch (nil if
// none) and the outcome counts.
func run(t *testing.T, opt options, steps ...mc.Label) (map[string]int, error) {
	t.Helper()
	e, err := newEnv(opt)
	require.NoError(t, err)
	defer e.close()
	for _, l := range steps {
		if err := e.step(l); err != nil {
			return e.cov, err
		}
	}
	return e.cov, nil
}

// TestScenarios pins the rare outcomes the random runs reach only a few
// times: a deferred close whose Closing claim the store deletes when its
// last holder crashes, or gives its hold up at a reconnect (F1).
func TestScenarios(t *testing.T) {
	deferred := []mc.Label{claimL(0, 0, 0), claimL(1, 0, 0), rs(mc.ActRoute, 0, 0), rs(mc.ActRoute, 1, 0), rs(mc.ActClose, 0, 0)}
	t.Run("CrashDeletesClosing", func(t *testing.T) {
		cov, err := run(t, options{}, append(deferred, onR(mc.ActCrash, 1))...)
		require.NoError(t, err)
		require.Equal(t, 1, cov["Close/deferred"])
		require.Equal(t, 1, cov["Crash/closing-deleted"])
	})
	t.Run("ReconnectDeletesClosing", func(t *testing.T) {
		cov, err := run(t, options{}, append(deferred, onR(mc.ActDisconnect, 1), rs(mc.ActRelease, 1, 0), onR(mc.ActReconnect, 1))...)
		require.NoError(t, err)
		require.Equal(t, 1, cov["Reconnect/closing-deleted"])
	})
	t.Run("QuarantineResolved", func(t *testing.T) {
		cov, err := run(t, options{}, claimL(0, 0, 0), rs(mc.ActRoute, 0, 0), rs(mc.ActAmbiguous, 0, 0),
			resolveL(0, 2, true), resolveL(0, 1, true), rs(mc.ActClose, 0, 0))
		require.NoError(t, err)
		require.Equal(t, 1, cov["Resolve/fenced"])
		require.Equal(t, 1, cov["Resolve/accepted"])
		require.Equal(t, 1, cov["Close/stale"]) // the lease is on revision 1, the claim at 3
	})
}

// TestStaleResolveFenced pins finding D1 (doc.go, fixed): the model's
// Resolve of a quarantine whose worker's generation moved on changes
// nothing, and the store's Resolve, given the quarantine's own attempt
// and generation (as impl/replica passes them), is fenced as stale.
func TestStaleResolveFenced(t *testing.T) {
	for _, acc := range []bool{true, false} {
		cov, err := run(t, options{}, claimL(0, 0, 0), rs(mc.ActRoute, 0, 0), rs(mc.ActAmbiguous, 0, 0), bump(0), resolveL(0, 1, acc))
		require.NoError(t, err, "accepted=%v", acc)
		require.Equal(t, 1, cov["Resolve/stale"], "accepted=%v", acc)
	}
}

// TestLineageRehold pins finding D2 (doc.go, fixed): the model's
// Reconnect makes a replica with leases on an earlier revision of the
// claim's lineage a holder again; the store does too, through
// claims.HoldLineage by the lease's revision, so another replica's
// Close defers instead of deleting the claim under the request in
// flight.
func TestLineageRehold(t *testing.T) {
	steps := []mc.Label{
		claimL(0, 0, 0),                        // r0 caches revision 1
		onR(mc.ActDisconnect, 0),               // r0 loses the store
		claimL(1, 0, 0), rs(mc.ActRoute, 1, 0), // r1 holds revision 1
		rs(mc.ActAmbiguous, 1, 0), // quarantined: revision 2, same lineage
		rs(mc.ActRoute, 0, 0),     // r0 routes from its cache (revision 1)
		onR(mc.ActReconnect, 0),   // model: r0 holds the lineage again
	}
	e, err := newEnv(options{})
	require.NoError(t, err)
	defer e.close()
	for _, l := range steps[:len(steps)-1] {
		require.NoError(t, e.step(l))
	}
	require.True(t, e.rehold(0), "the scenario must reach a lineage re-hold")
	require.NoError(t, e.step(steps[len(steps)-1]), "the store's holders must be the model's")
	require.Equal(t, 1, e.cov["Reconnect/lineage-rehold"])
	require.Equal(t, []string{"r0", "r1"}, e.b.Holders("s0"))

	// What it buys: r1's lease ends, r2 closes the session, and the
	// store defers (r0 holds the lineage) while r0's request is in
	// flight; r0's release then deletes the Closing claim.
	c, cancel := ctx()
	defer cancel()
	require.NoError(t, e.h[1].Unhold(c, "s0", "r1"))
	cl, _, err := e.h[2].CreateOrGet(c, "s0", func() (claims.Target, error) { return claims.Target{Worker: "w1"}, nil })
	require.NoError(t, err)
	require.NoError(t, e.h[2].Hold(c, "s0", cl.Rev, "r2"))
	res, err := e.h[2].Close(c, "s0", cl.Rev, "r2")
	require.NoError(t, err)
	require.Equal(t, claims.CloseDeferred, res, "r0 holds the lineage: the close waits for its request")
	require.NoError(t, e.h[0].Unhold(c, "s0", "r0"))
	_, ok, err := e.h[2].Get(c, "s0")
	require.NoError(t, err)
	require.False(t, ok, "the last holder's release deletes the Closing claim")
}
