package consumer

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/placementlab/placement/impl/affinity"
	"github.com/placementlab/placement/impl/placement"
)

// Clock behaviour, simulation host: on a manual clock nothing moves until
// the host advances it; an idle binding expires IdleTTL after its last
// release on virtual time (Advance reclaims it synchronously), and the
// layer starts no goroutine of its own.
func TestContract_SimulationHost_VirtualTimeOnly(t *testing.T) {
	before := settledGoroutines()
	e := newEnv(t, affinity.Config{IdleTTL: time.Minute})
	assertGoroutinesBack(t, before, "a layer on a manual clock starts no goroutine")
	e.join(t, "a", "boot-1", 0)
	req := affinity.Request{Session: e.key(t, "s")}
	e.ok(t, req, first)

	time.Sleep(20 * time.Millisecond) // wall time moves nothing
	assert.Equal(t, time.Duration(0), e.l.Now())

	require.NoError(t, e.clk.Advance(time.Minute-time.Nanosecond))
	assert.True(t, e.ok(t, req, first).Hit, "just before IdleTTL: still bound (and the TTL restarts)")
	require.NoError(t, e.clk.AdvanceBy(time.Minute))
	_, bound := e.l.Query(req.Session, affinity.PhaseDecode)
	assert.False(t, bound, "IdleTTL after the last release: expired")
	assert.Equal(t, uint64(1), e.l.Stats().Expirations, "reclaimed by Advance, before it returned")
}

// Clock behaviour, simulation host: the same script on the same virtual
// clock with a fixed FirstAttempt gives the same attempt ids and targets.
func TestContract_SimulationHost_Deterministic(t *testing.T) {
	run := func() []served {
		e := newEnv(t, affinity.Config{FirstAttempt: 1})
		e.join(t, "a", "boot-1", 2)
		e.join(t, "b", "boot-1", 2)
		var out []served
		for i, id := range []string{"s1", "s2", "s1", "s3", "s2"} {
			require.NoError(t, e.clk.AdvanceBy(time.Second))
			pick := first
			if i%2 == 1 {
				pick = last
			}
			out = append(out, e.ok(t, affinity.Request{Session: e.key(t, id)}, pick))
		}
		return out
	}
	a, b := run(), run()
	assert.Equal(t, a, b)
	assert.Equal(t, uint64(1), a[0].Attempt, "ids count up from FirstAttempt")
}

// Clock behaviour, simulation host: a quarantine ends at QuarantineTTL on
// virtual time; its QuarantinedError says when, on the layer's clock.
func TestContract_SimulationHost_QuarantineEndsOnVirtualTime(t *testing.T) {
	e := newEnv(t, affinity.Config{Mode: affinity.ModeHard, QuarantineTTL: 10 * time.Minute})
	e.join(t, "a", "boot-1", 0)
	require.NoError(t, e.clk.Advance(time.Hour))
	req := affinity.Request{Session: e.key(t, "s")}
	_, err := e.serveLayer(context.Background(), req, e.candidates(), nil, first, placement.Ambiguous)
	require.ErrorIs(t, err, affinity.ErrOutcomeUnknown)

	require.NoError(t, e.clk.AdvanceBy(5*time.Minute))
	_, err = e.l.Start(context.Background(), req)
	var qe *affinity.QuarantinedError
	require.ErrorAs(t, err, &qe)
	assert.Equal(t, time.Hour+10*time.Minute, qe.Until)
	assert.Equal(t, 5*time.Minute, qe.RetryAfter)

	require.NoError(t, e.clk.Advance(qe.Until))
	assert.Empty(t, e.l.Quarantined())
	assert.Equal(t, uint64(1), e.l.Stats().QuarantinesExpired)
	assert.NotZero(t, e.ok(t, req, first).Attempt, "placed anew")
}
