package replica

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/placementlab/placement/impl/claims"
	"github.com/placementlab/placement/impl/placement"
)

// Regression tests for issue 25's items on the claims and the replica.

// A replica left at its default IdleTTL (zero) works with the store's
// idle TTL, here a minute, not claims.DefaultIdleTTL (30 minutes): its
// keepalive touches a claim in use often enough, and the claim of a long
// request does not expire in the store (issue 25, item 2).
func TestGap_IdleTTLFromStore(t *testing.T) {
	clk := placement.NewManualClock(0)
	e := newEnv(t, 1, clk, time.Minute)
	r1, _ := e.replica("r1", func(c *Config) { c.IdleTTL = 0 })
	assert.Equal(t, time.Minute, r1.cfg.IdleTTL, "the replica's idle TTL is the store's")
	long := open(t, r1, "s", to("w1"))
	for range 36 { // three minutes, the request in flight throughout
		require.NoError(t, clk.AdvanceBy(5*time.Second))
		r1.Tick(tctx(t))
		e.b.Sweep()
		_, ok := e.claimOf("s")
		require.True(t, ok, "the claim of a request in flight expired at %v", clk.Now())
	}
	long.Done(false)
}

// A Config whose IdleTTL is longer than the store's is refused with a
// typed error: its keepalive would let claims in use expire (issue 25,
// item 2). A shorter one is kept.
func TestGap_IdleTTLLongerThanStoreRefused(t *testing.T) {
	e := newEnv(t, 1, nil, time.Minute)
	s := e.b.Open("r1")
	defer func() { _ = s.Shutdown() }()
	_, err := New(tctx(t), Config{Store: s, Name: "r1", IdleTTL: claims.DefaultIdleTTL})
	var ce *ConfigError
	require.ErrorAs(t, err, &ce, "a replica TTL longer than the store's was accepted")
	assert.Equal(t, "IdleTTL", ce.Field)
	assert.ErrorIs(t, err, ErrInvalidConfig)
	c, err := New(tctx(t), Config{Store: s, Name: "r1", IdleTTL: 30 * time.Second})
	require.NoError(t, err)
	assert.Equal(t, 30*time.Second, c.cfg.IdleTTL)
	require.NoError(t, c.Close())
}
