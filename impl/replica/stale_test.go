package replica

import (
	"context"
	"errors"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/placementlab/placement/impl/claims"
)

// A quarantined claim read before its worker restarted is stale: the
// placing turn reads the claim again, and the store replaces it, instead
// of refusing the session with the old instance's quarantine (the
// campaign of 2026-12-05, affinity-replicas seed 495649184: a CreateOrGet
// begun before a restart's registration answered after it, and every
// later turn of the session was refused from the cached quarantine). The
// spec's Claim writes a stale claim anew, and NeedsClaim holds for a
// stale cached entry.
func TestGap_StaleQuarantineReadIsNotRefused(t *testing.T) {
	e := newEnv(t, 2, nil, 0)
	r1, cs := e.replica("r1")
	r2, _ := e.replica("r2")
	qe := ambiguousTurn(t, r2) // w1 takes the quarantine; r1 caches nothing
	require.Equal(t, claims.Quarantined, mustClaim(t, e, "s").State)

	// The restart lands between the store's answer and the replica's use
	// of it: r1's view moves to w1's new generation.
	var regErr error
	restart := func() { _, regErr = r1.Register(context.Background(), "w1", "boot-2") }
	cs.afterCreate.Store(&restart)
	tu, err := r1.Start(tctx(t), "s", to("w1"))
	require.NoError(t, regErr)
	var stale *QuarantinedError
	if errors.As(err, &stale) {
		t.Fatalf("the session was refused with the old instance's quarantine: %v", err)
	}
	require.NoError(t, err)
	defer tu.Done(false)
	assert.False(t, tu.Hit(), "a placing turn")
	cl := mustClaim(t, e, "s")
	assert.Equal(t, claims.Bound, cl.State, "the stale quarantine replaced")
	assert.Greater(t, cl.Rev, qe.Rev)
	assert.True(t, r1.currentGen(cl.Target, cl.Gen), "the new claim is on w1's new generation")

}
