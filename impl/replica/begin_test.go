package replica

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/placementlab/placement/impl/claims"
	"github.com/placementlab/placement/impl/placement"
)

func begin(t *testing.T, c *Coordinator, key string) Turn {
	t.Helper()
	tu, err := c.Begin(tctx(t), key)
	require.NoError(t, err)
	return tu
}

// A begun turn of a new session reads no claim; its Dispatch writes one
// to the target the caller chose.
func TestBegin_NewSessionClaimedAtDispatch(t *testing.T) {
	e := newEnv(t, 3, nil, 0)
	r1, cs := e.replica("r1")
	tu := begin(t, r1, "s")
	assert.False(t, tu.Hit())
	_, ok := tu.Claim()
	assert.False(t, ok)
	assert.Equal(t, 0, cs.n("CreateOrGet"), "Begin writes nothing")
	require.NoError(t, tu.Dispatch(claims.Target{Worker: "w3"}))
	assert.Equal(t, claims.Target{Worker: "w3"}, tu.Target())
	assert.NotZero(t, tu.Attempt())
	require.NoError(t, tu.Complete(placement.Accepted))
	tu.Done(false)
	cl, ok := e.claimOf("s")
	require.True(t, ok)
	assert.Equal(t, claims.Target{Worker: "w3"}, cl.Target)
	// The next turn is a cached hit; Dispatch to its own target is a no-op.
	h := begin(t, r1, "s")
	require.True(t, h.Hit())
	require.NoError(t, h.Dispatch(claims.Target{Worker: "w3"}))
	require.NoError(t, h.Complete(placement.Accepted))
	h.Done(false)
}

// Another replica's claim is read by Begin (the caller narrows to it),
// adopted by a Dispatch to its target, and moved by a Dispatch elsewhere.
func TestBegin_ClaimAdoptedOrMoved(t *testing.T) {
	e := newEnv(t, 3, nil, 0)
	r1, _ := e.replica("r1")
	r2, _ := e.replica("r2")
	r3, _ := e.replica("r3")
	serve(t, r1, "s", to("w1"), placement.Accepted, false)

	tu := begin(t, r2, "s")
	cl, ok := tu.Claim()
	require.True(t, ok)
	assert.Equal(t, claims.Target{Worker: "w1"}, cl.Target)
	require.NoError(t, tu.Dispatch(claims.Target{Worker: "w1"}))
	assert.Equal(t, cl.Rev, tu.Rev(), "adopted, not rewritten")
	require.NoError(t, tu.Complete(placement.Accepted))
	tu.Done(false)
	assert.EqualValues(t, 1, r2.Stats().ClaimsAdopted)

	mv := begin(t, r3, "s")
	require.NoError(t, mv.Dispatch(claims.Target{Worker: "w2"}))
	assert.Equal(t, claims.Target{Worker: "w2"}, mv.Target())
	assert.Greater(t, mv.Rev(), cl.Rev)
	require.NoError(t, mv.Complete(placement.Accepted))
	mv.Done(false)
	now, _ := e.claimOf("s")
	assert.Equal(t, claims.Target{Worker: "w2"}, now.Target)
	assert.Equal(t, now.Rev, now.Born)
	assert.EqualValues(t, 1, r3.Stats().Moves)
}

// A refused dispatch of a begun turn keeps its claim as the turn's Claim:
// the next Dispatch moves it (no close and re-create); a turn that gives
// up after its own claim was refused closes it.
func TestBegin_RefusedDispatchMovesOrCloses(t *testing.T) {
	e := newEnv(t, 3, nil, 0)
	r1, cs := e.replica("r1")
	tu := begin(t, r1, "s")
	require.NoError(t, tu.Dispatch(claims.Target{Worker: "w1"}))
	err := tu.Complete(placement.DefinitelyNotAccepted)
	require.ErrorIs(t, err, placement.ErrNotAccepted)
	refused, ok := tu.Claim()
	require.True(t, ok)
	assert.Equal(t, claims.Target{Worker: "w1"}, refused.Target)
	require.NoError(t, tu.Dispatch(claims.Target{Worker: "w2"}))
	require.NoError(t, tu.Complete(placement.Accepted))
	tu.Done(false)
	assert.Equal(t, 0, cs.n("Close"))
	cl, _ := e.claimOf("s")
	assert.Equal(t, claims.Target{Worker: "w2"}, cl.Target)

	g := begin(t, r1, "gives-up")
	require.NoError(t, g.Dispatch(claims.Target{Worker: "w1"}))
	require.Error(t, g.Complete(placement.DefinitelyNotAccepted))
	g.Done(false)
	_, ok = e.claimOf("gives-up")
	assert.False(t, ok, "a refused claim of a turn that gave up was left in the store")
}

// A refused hit moves its binding at the next Dispatch.
func TestBegin_RefusedHitMoves(t *testing.T) {
	e := newEnv(t, 3, nil, 0)
	r1, _ := e.replica("r1")
	serve(t, r1, "s", to("w1"), placement.Accepted, false)
	h := begin(t, r1, "s")
	require.True(t, h.Hit())
	require.ErrorIs(t, h.Complete(placement.DefinitelyNotAccepted), placement.ErrNotAccepted)
	require.NoError(t, h.Dispatch(claims.Target{Worker: "w2"}))
	assert.False(t, h.Hit())
	require.NoError(t, h.Complete(placement.Accepted))
	h.Done(false)
	cl, _ := e.claimOf("s")
	assert.Equal(t, claims.Target{Worker: "w2"}, cl.Target)
}

// A claim another replica wrote between a begun turn's read and its
// Dispatch to another target: nothing is sent, and the turn is begun
// again under that claim.
func TestBegin_ClaimedMeanwhile(t *testing.T) {
	e := newEnv(t, 3, nil, 0)
	r1, _ := e.replica("r1")
	r2, _ := e.replica("r2")
	tu := begin(t, r1, "s")
	serve(t, r2, "s", to("w2"), placement.Accepted, false)
	err := tu.Dispatch(claims.Target{Worker: "w1"})
	var ce *ClaimedError
	require.ErrorAs(t, err, &ce)
	assert.Equal(t, claims.Target{Worker: "w2"}, ce.Current.Target)
	cl, ok := tu.Claim()
	require.True(t, ok)
	assert.Equal(t, claims.Target{Worker: "w2"}, cl.Target)
	require.NoError(t, tu.Dispatch(claims.Target{Worker: "w2"}))
	require.NoError(t, tu.Complete(placement.Accepted))
	tu.Done(false)
}

// Quarantines and closes refuse Begin as they refuse Start; the store
// unreachable, Dispatch places the session unclaimed.
func TestBegin_RefusalsAndStoreDown(t *testing.T) {
	e := newEnv(t, 3, nil, 0)
	r1, _ := e.replica("r1")
	r2, _ := e.replica("r2")
	tu := begin(t, r1, "q")
	require.NoError(t, tu.Dispatch(claims.Target{Worker: "w1"}))
	require.ErrorIs(t, tu.Complete(placement.Ambiguous), ErrQuarantined)
	tu.Done(false)
	_, err := r2.Begin(tctx(t), "q")
	require.ErrorIs(t, err, ErrQuarantined)
	qs := r2.Quarantined()
	require.Len(t, qs, 1)
	assert.Equal(t, "q", qs[0].Key)
	assert.False(t, qs[0].Local)
	assert.Len(t, r1.Quarantined(), 1)

	e.b.SetUnavailable("r1", true)
	d := begin(t, r1, "down")
	require.NoError(t, d.Dispatch(claims.Target{Worker: "w2"}))
	require.NoError(t, d.Complete(placement.Accepted))
	assert.True(t, d.Unclaimed())
	d.Done(false)
	got, ok := r1.Query("down")
	assert.True(t, ok)
	assert.Equal(t, claims.Target{Worker: "w2"}, got)
}

// An own quarantine that the local core's QuarantineTTL ended is settled
// in the store as not accepted: the session is free on every replica, not
// only on the one that dispatched the attempt.
func TestGap_ExpiredQuarantineSettledInStore(t *testing.T) {
	clock := placement.NewManualClock(0)
	e := newEnv(t, 3, clock, time.Hour)
	qttl := func(c *Config) { c.QuarantineTTL = time.Minute }
	r1, _ := e.replica("r1", qttl)
	r2, _ := e.replica("r2", qttl)
	tu := begin(t, r1, "s")
	require.NoError(t, tu.Dispatch(claims.Target{Worker: "w1"}))
	require.ErrorIs(t, tu.Complete(placement.Ambiguous), ErrQuarantined)
	tu.Done(false)
	_, err := r2.Begin(tctx(t), "s")
	require.ErrorIs(t, err, ErrQuarantined)

	require.NoError(t, clock.Advance(2*time.Minute))
	r1.Tick(tctx(t))
	if cl, ok := e.claimOf("s"); ok {
		t.Fatalf("r1's quarantine ended by its QuarantineTTL, the store still holds %+v", cl)
	}
	assert.Empty(t, r1.Quarantined())
	require.Eventually(t, func() bool {
		tu, err := r2.Begin(tctx(t), "s")
		if err != nil {
			return false
		}
		tu.Done(false)
		return true
	}, waitFor, tick, "r2 still refuses the session")
}

// A quarantine whose write found the store unreachable and that Resolve
// then settled on this replica is never written to the store afterwards:
// a settled quarantine is not re-opened when the store comes back.
func TestGap_SettledQuarantineNotReopened(t *testing.T) {
	e := newEnv(t, 2, nil, 0)
	r1, cs := e.replica("r1")
	tu := begin(t, r1, "s")
	require.NoError(t, tu.Dispatch(claims.Target{Worker: "w1"}))
	cl, ok := e.claimOf("s")
	require.True(t, ok)
	e.b.SetUnavailable("r1", true)
	var qe *QuarantinedError
	require.ErrorAs(t, tu.Complete(placement.Ambiguous), &qe)
	tu.Done(false)
	require.Zero(t, qe.Rev, "the store did not record it")
	require.NoError(t, r1.Resolve(tctx(t), "s", qe.Attempt, qe.Gen, false))
	e.b.SetUnavailable("r1", false)
	writes := cs.n("Quarantine")
	// Past StoreRetry (the retries wait that long after the store was
	// found unreachable), the keepalive's passes run the queued writes.
	time.Sleep(100 * time.Millisecond)
	for range 3 {
		r1.Tick(tctx(t))
	}
	after, ok := e.claimOf("s")
	require.True(t, ok)
	assert.Equal(t, cl.Rev, after.Rev, "the store was written after the quarantine was settled: %+v", after)
	assert.Equal(t, writes, cs.n("Quarantine"), "a settled quarantine was written again")
}

// A begun turn whose claim ended between its read and its Dispatch (a
// final request closed it, it expired) places the session anew: it holds
// the reservation, and there is nothing left to move.
func TestBegin_ClaimEndedBeforeDispatch(t *testing.T) {
	e := newEnv(t, 3, nil, 0)
	r1, _ := e.replica("r1")
	r2, _ := e.replica("r2")
	serve(t, r2, "s", to("w1"), placement.Accepted, false)
	tu := begin(t, r1, "s")
	_, ok := tu.Claim()
	require.True(t, ok)
	e.endClaim("s")
	require.NoError(t, tu.Dispatch(claims.Target{Worker: "w2"}), "a claim that ended is no lost move")
	require.NoError(t, tu.Complete(placement.Accepted))
	tu.Done(false)
	cl, ok := e.claimOf("s")
	require.True(t, ok)
	assert.Equal(t, claims.Target{Worker: "w2"}, cl.Target)
}

// A claim whose later turn was refused here reads as none to the turns
// begun after it, until a dispatch binds the session under it again (to
// the same target): from then on it is the session's binding, also for a
// turn that reads it from the store after an eviction.
func TestBegin_RefusedClaimBoundAgain(t *testing.T) {
	e := newEnv(t, 3, nil, 0)
	r1, _ := e.replica("r1")
	serve(t, r1, "s", to("w1"), placement.Accepted, false)
	cl, _ := e.claimOf("s")
	h := begin(t, r1, "s")
	require.True(t, h.Hit())
	require.ErrorIs(t, h.Complete(placement.DefinitelyNotAccepted), placement.ErrNotAccepted)
	h.Done(false)
	p := begin(t, r1, "s")
	_, ok := p.Claim()
	require.False(t, ok, "the refused claim reads as a binding")
	require.NoError(t, p.Dispatch(claims.Target{Worker: "w1"}))
	assert.Equal(t, cl.Rev, p.Rev(), "the same target adopts the claim")
	require.NoError(t, p.Complete(placement.Accepted))
	p.Done(false)
	// The revision is the session's binding again: no later read of it
	// (after an eviction) takes it for a refused one.
	v, ok := r1.slots.Load("s")
	require.True(t, ok)
	sl := v.(*slot)
	sl.mu.Lock()
	refused := sl.refusedRev
	sl.mu.Unlock()
	assert.Zero(t, refused, "the revision bound again is still marked refused")
}

// A final request whose lease is on a binding that a refused later turn
// ended here closes nothing: the claim's revision may be the session's
// binding again (a dispatch to the same target adopted it), as the core's
// Close of a lease on an invalidated binding ends nothing.
func TestBegin_FinalOnRefusedBindingClosesNothing(t *testing.T) {
	e := newEnv(t, 3, nil, 0)
	r1, _ := e.replica("r1")
	serve(t, r1, "s", to("w1"), placement.Accepted, false)
	final := begin(t, r1, "s") // the session's final request, in flight on the binding
	require.True(t, final.Hit())
	h := begin(t, r1, "s")
	require.ErrorIs(t, h.Complete(placement.DefinitelyNotAccepted), placement.ErrNotAccepted)
	h.Done(false)
	p := begin(t, r1, "s")
	require.NoError(t, p.Dispatch(claims.Target{Worker: "w1"}))
	require.NoError(t, p.Complete(placement.Accepted))
	p.Done(false)
	require.NoError(t, final.Complete(placement.Accepted))
	final.Done(true)
	cl, ok := e.claimOf("s")
	require.True(t, ok, "the final request's close of the ended binding deleted the session's new binding")
	assert.Equal(t, claims.Bound, cl.State)
	got, ok := r1.Query("s")
	assert.True(t, ok)
	assert.Equal(t, claims.Target{Worker: "w1"}, got)
}
