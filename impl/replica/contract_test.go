package replica

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/placementlab/placement/impl/claims"
	"github.com/placementlab/placement/impl/placement"
)

// The contract tests (TestContract_*) check docs/claims.md's replica
// rules on the in-memory store, one rule each; the bug zoo runs them under
// the package's broken variants (mutant_off.go), and each variant fails at
// least one of them (see mutant_test.go).

// A later turn of a session this replica holds is served from the local
// table: no store call at all.
func TestContract_CachedTurnMakesNoStoreCall(t *testing.T) {
	e := newEnv(t, 2, nil, 0)
	r1, cs := e.replica("r1")
	first := serve(t, r1, "s", to("w1"), placement.Accepted, false)
	require.False(t, first.Hit())
	require.Equal(t, claims.Target{Worker: "w1"}, first.Target())
	calls := cs.total.Load()
	const n = 200
	for range n {
		tu := serve(t, r1, "s", nil, placement.Accepted, false)
		require.True(t, tu.Hit())
		require.Equal(t, claims.Target{Worker: "w1"}, tu.Target())
		require.Equal(t, first.Rev(), tu.Rev())
	}
	assert.Equal(t, calls, cs.total.Load(), "cached turns made store calls: %v", cs.calls)
	st := r1.Stats()
	assert.EqualValues(t, n, st.CachedTurns)
	assert.EqualValues(t, 1, st.FirstTurns)
	assert.EqualValues(t, 1, st.ClaimsCreated)
	assert.Equal(t, 1, st.Cached)
}

// Concurrent first turns of one session on one replica make one
// CreateOrGet: one places the session, the others wait and hit it.
func TestContract_ConcurrentFirstTurnsOneRoundTrip(t *testing.T) {
	e := newEnv(t, 3, nil, 0)
	r1, cs := e.replica("r1")
	cs.createDelay = 30 * time.Millisecond
	const n = 16
	var wg sync.WaitGroup
	targets := make([]claims.Target, n)
	errs := make([]error, n)
	start := make(chan struct{})
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			tu, err := r1.Start(tctx(t), "s", nil)
			if err != nil {
				errs[i] = err
				return
			}
			defer tu.Done(false)
			targets[i] = tu.Target()
			errs[i] = tu.Complete(placement.Accepted)
		}()
	}
	close(start)
	wg.Wait()
	for i := range n {
		require.NoError(t, errs[i])
		require.Equal(t, targets[0], targets[i])
	}
	assert.Equal(t, 1, cs.n("CreateOrGet"))
	st := r1.Stats()
	assert.EqualValues(t, n, st.FirstTurns+st.CachedTurns)
	assert.EqualValues(t, 1, st.ClaimsCreated)
}

// The singleflight itself: concurrent claim reads of one key on one
// replica (a placing turn and a reconcile, or two turns of a store that
// answers slowly) share one CreateOrGet, and the sharers are counted.
func TestContract_ClaimReadsShared(t *testing.T) {
	e := newEnv(t, 1, nil, 0)
	r1, cs := e.replica("r1")
	cs.createDelay = 50 * time.Millisecond
	const n = 8
	var wg sync.WaitGroup
	got := make([]claims.Claim, n)
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			cl, _, _, err := r1.createOrGet(tctx(t), "s", func() (claims.Target, error) { return claims.Target{Worker: "w1"}, nil })
			assert.NoError(t, err)
			got[i] = cl
		}()
	}
	wg.Wait()
	assert.Equal(t, 1, cs.n("CreateOrGet"))
	for i := range n {
		assert.Equal(t, got[0], got[i])
	}
	assert.EqualValues(t, n-1, r1.Stats().SharedClaimReads)
}

// Replicas agree on a session's target: the first writer's claim wins and
// the others adopt it (their own proposals are not even called).
func TestContract_ReplicasAgree(t *testing.T) {
	e := newEnv(t, 3, nil, 0)
	reps := make([]*Coordinator, 3)
	for i := range reps {
		reps[i], _ = e.replica("r" + string(rune('1'+i)))
	}
	first := serve(t, reps[0], "s", to("w2"), placement.Accepted, false)
	for _, r := range reps[1:] {
		called := false
		tu := serve(t, r, "s", func([]claims.Member, []claims.Target) (claims.Target, error) {
			called = true
			return claims.Target{Worker: "w3"}, nil
		}, placement.Accepted, false)
		assert.False(t, called, "a proposal was asked for although the claim exists")
		assert.Equal(t, first.Target(), tu.Target())
		assert.Equal(t, first.Rev(), tu.Rev())
		assert.Equal(t, first.Gen(), tu.Gen())
		assert.Positive(t, tu.Gen())
		assert.EqualValues(t, 1, r.Stats().ClaimsAdopted)
	}
	assert.Equal(t, []string{"r1", "r2", "r3"}, e.b.Holders("s"))
	// Replica ids differ, so attempt ids never collide.
	ids := map[uint64]bool{}
	for _, r := range reps {
		ids[r.ReplicaID()] = true
	}
	assert.Len(t, ids, 3)
}

// endClaim ends key's current claim from outside the replicas (another
// replica's ambiguous attempt settled not accepted): a Delete of each
// revision it passed through.
func (e *env) endClaim(key string) {
	e.t.Helper()
	ctx := tctx(e.t)
	cl, ok := e.claimOf(key)
	require.True(e.t, ok)
	q, err := e.workers.Quarantine(ctx, key, cl.Rev, 99, cl.Gen)
	require.NoError(e.t, err)
	_, _, err = e.workers.Resolve(ctx, key, q.Attempt, q.Gen, false)
	require.NoError(e.t, err)
}

// A Delete of the revision a replica caches evicts it: the next turn reads
// the store again.
func TestContract_DeleteEvicts(t *testing.T) {
	e := newEnv(t, 2, nil, 0)
	r1, _ := e.replica("r1")
	first := serve(t, r1, "s", to("w1"), placement.Accepted, false)
	e.endClaim("s")
	require.Eventually(t, func() bool { return r1.Stats().DeleteEvictions >= 1 }, waitFor, tick)
	tu := serve(t, r1, "s", to("w2"), placement.Accepted, false)
	assert.False(t, tu.Hit())
	assert.Equal(t, claims.Target{Worker: "w2"}, tu.Target())
	assert.Greater(t, tu.Rev(), first.Rev())
}

// A Reset evicts every cached claim: a replica whose stream lost the end
// of its claim (and the new claim written meanwhile) follows the new
// claim at its next turn.
func TestContract_ResetEvicts(t *testing.T) {
	e := newEnv(t, 2, nil, 0)
	r1, _ := e.replica("r1")
	r2, _ := e.replica("r2")
	serve(t, r1, "s", to("w1"), placement.Accepted, false)
	e.b.HoldEvents("r1", true)
	e.endClaim("s")
	moved := serve(t, r2, "s", to("w2"), placement.Accepted, false)
	require.Equal(t, claims.Target{Worker: "w2"}, moved.Target())
	e.b.InjectReset("r1") // the queued Deletes are lost
	e.b.HoldEvents("r1", false)
	require.Eventually(t, func() bool { return r1.Stats().Resets >= 1 }, waitFor, tick)
	tu := serve(t, r1, "s", to("w1"), placement.Accepted, false)
	assert.False(t, tu.Hit(), "a cached claim survived a Reset")
	assert.Equal(t, claims.Target{Worker: "w2"}, tu.Target())
	assert.EqualValues(t, 1, r1.Stats().ResetEvictions)
}

// A replica's final request ends with a close only when its last local
// lease on the session ends.
func TestContract_CloseWaitsForLocalLeases(t *testing.T) {
	e := newEnv(t, 1, nil, 0)
	r1, cs := e.replica("r1")
	a := open(t, r1, "s", to("w1"))
	b, err := r1.Start(tctx(t), "s", nil)
	require.NoError(t, err)
	require.True(t, b.Hit())
	b.Done(true) // the final request, while a still holds its lease
	_, ok := e.claimOf("s")
	assert.True(t, ok, "the claim was closed under a local lease")
	assert.Equal(t, 0, cs.n("Close"))
	a.Done(false)
	_, ok = e.claimOf("s")
	assert.False(t, ok)
	assert.Equal(t, 1, cs.n("Close"))
	assert.EqualValues(t, 1, r1.Stats().ClosesDeleted)
}

// A close while another replica holds the claim marks it Closing; the
// other replica's last lease ends with its Unhold, which deletes it.
func TestContract_CloseDeferredWhileAnotherHolds(t *testing.T) {
	e := newEnv(t, 1, nil, 0)
	r1, _ := e.replica("r1")
	r2, _ := e.replica("r2")
	serve(t, r1, "s", to("w1"), placement.Accepted, false)
	held := open(t, r2, "s", nil)
	require.Equal(t, []string{"r1", "r2"}, e.b.Holders("s"))
	serve(t, r1, "s", nil, placement.Accepted, true)
	cl, ok := e.claimOf("s")
	require.True(t, ok, "the claim was deleted under another replica's leases")
	assert.Equal(t, claims.Closing, cl.State)
	assert.EqualValues(t, 1, r1.Stats().ClosesDeferred)
	// A new turn elsewhere sees the session closing.
	r3, _ := e.replica("r3")
	_, err := r3.Start(tctx(t), "s", nil)
	assert.ErrorIs(t, err, ErrClosing)
	held.Done(false)
	require.Eventually(t, func() bool { _, ok := e.claimOf("s"); return !ok }, waitFor, tick)
	// The replica that only cached the claim gives its hold up by itself
	// (the Delete of the revision it held), and the last Unhold deleted.
	assert.GreaterOrEqual(t, r2.Stats().Unholds, uint64(1))
}

// The same with the other replica idle: it holds the claim with no lease
// in flight; the Closing rewrite's Delete makes it let go.
func TestContract_CloseDeferredDoneByIdleHolder(t *testing.T) {
	e := newEnv(t, 1, nil, 0)
	r1, _ := e.replica("r1")
	r2, _ := e.replica("r2")
	serve(t, r1, "s", to("w1"), placement.Accepted, false)
	serve(t, r2, "s", nil, placement.Accepted, false)
	serve(t, r1, "s", nil, placement.Accepted, true)
	require.Eventually(t, func() bool { _, ok := e.claimOf("s"); return !ok }, waitFor, tick)
	assert.EqualValues(t, 1, r1.Stats().ClosesDeferred)
}

// A close by a revision that is no longer current never deletes the
// newer claim.
func TestContract_StaleCloseKeepsNewerClaim(t *testing.T) {
	e := newEnv(t, 1, nil, 0)
	r1, _ := e.replica("r1")
	tu := open(t, r1, "s", to("w1"))
	old := tu.Rev()
	// Another replica's ambiguous attempt, settled Accepted: the claim's
	// lineage goes on at a newer revision.
	ctx := tctx(t)
	q, err := e.workers.Quarantine(ctx, "s", old, 7, mustClaim(t, e, "s").Gen)
	require.NoError(t, err)
	_, _, err = e.workers.Resolve(ctx, "s", q.Attempt, q.Gen, true)
	require.NoError(t, err)
	newer := mustClaim(t, e, "s")
	require.Greater(t, newer.Rev, old)
	require.Eventually(t, func() bool { return r1.Stats().DeleteEvictions >= 1 }, waitFor, tick)
	tu.Done(true)
	cl, ok := e.claimOf("s")
	require.True(t, ok, "a close of revision %d deleted the newer claim %d", old, newer.Rev)
	assert.Equal(t, newer.Rev, cl.Rev)
	assert.EqualValues(t, 1, r1.Stats().ClosesStale)
	assert.EqualValues(t, 0, r1.Stats().ClosesDeleted)
}

func mustClaim(t *testing.T, e *env, key string) claims.Claim {
	t.Helper()
	cl, ok := e.claimOf(key)
	require.True(t, ok, "no claim of %q", key)
	return cl
}

// An ambiguous placing dispatch on one replica quarantines the session on
// every replica until Resolve settles it.
func TestContract_QuarantineSeenEverywhere(t *testing.T) {
	e := newEnv(t, 2, nil, 0)
	r1, _ := e.replica("r1")
	r2, _ := e.replica("r2")
	tu, err := r1.Start(tctx(t), "s", to("w1"))
	require.NoError(t, err)
	attempt := tu.Attempt()
	require.NotZero(t, attempt)
	require.Equal(t, claims.FirstAttempt(r1.ReplicaID()), attempt&^(1<<claims.AttemptShift-1))
	err = tu.Complete(placement.Ambiguous)
	var qe *QuarantinedError
	require.ErrorAs(t, err, &qe)
	assert.ErrorIs(t, err, placement.ErrAmbiguous)
	assert.Equal(t, attempt, qe.Attempt)
	assert.True(t, qe.Local)
	tu.Done(false)
	cl := mustClaim(t, e, "s")
	require.Equal(t, claims.Quarantined, cl.State)

	// Every replica refuses the session, the one that dispatched and the
	// others.
	_, err = r1.Start(tctx(t), "s", nil)
	assert.ErrorIs(t, err, ErrQuarantined)
	_, err = r2.Start(tctx(t), "s", nil)
	require.ErrorAs(t, err, &qe)
	assert.False(t, qe.Local)
	assert.Equal(t, attempt, qe.Attempt)
	assert.Equal(t, cl.Rev, qe.Rev)
	assert.EqualValues(t, 1, r2.Stats().QuarantinesShared)
	// Still refused while nothing settles it (the cache answers).
	_, err = r2.Start(tctx(t), "s", nil)
	assert.ErrorIs(t, err, ErrQuarantined)

	// A stale Resolve is fenced.
	err = r2.Resolve(tctx(t), "s", attempt+1, qe.Gen, true)
	assert.ErrorIs(t, err, claims.ErrFenced)

	// The other replica learns the attempt was accepted and settles it.
	require.NoError(t, r2.Resolve(tctx(t), "s", attempt, qe.Gen, true))
	for _, r := range []*Coordinator{r1, r2} {
		require.Eventually(t, func() bool {
			tu, err := r.Start(tctx(t), "s", nil)
			if err != nil {
				return false
			}
			defer tu.Done(false)
			return assert.NoError(t, tu.Complete(placement.Accepted)) && tu.Target() == claims.Target{Worker: "w1"}
		}, waitFor, tick)
	}
}

// The replica that dispatched settles its own quarantine: the session is
// bound there at once (a hit), and not accepted deletes the claim.
func TestContract_ResolveOwnQuarantine(t *testing.T) {
	e := newEnv(t, 2, nil, 0)
	r1, _ := e.replica("r1")
	for _, accepted := range []bool{true, false} {
		key := "s-accepted"
		if !accepted {
			key = "s-refused"
		}
		tu, err := r1.Start(tctx(t), key, to("w1"))
		require.NoError(t, err)
		var qe *QuarantinedError
		require.ErrorAs(t, tu.Complete(placement.Ambiguous), &qe)
		tu.Done(false)
		require.NoError(t, r1.Resolve(tctx(t), key, qe.Attempt, qe.Gen, accepted))
		if accepted {
			cl := mustClaim(t, e, key)
			assert.Equal(t, claims.Bound, cl.State)
			hit := serve(t, r1, key, nil, placement.Accepted, false)
			assert.True(t, hit.Hit())
			assert.Equal(t, cl.Rev, hit.Rev())
			continue
		}
		_, ok := e.claimOf(key)
		assert.False(t, ok)
		tu2 := serve(t, r1, key, to("w2"), placement.Accepted, false)
		assert.False(t, tu2.Hit())
		assert.Equal(t, claims.Target{Worker: "w2"}, tu2.Target())
	}
	assert.EqualValues(t, 2, r1.Stats().Resolves)
}

// A refused placing dispatch closes its claim (fenced) and retries on a
// target not tried.
func TestContract_RefusedRetriesElsewhere(t *testing.T) {
	e := newEnv(t, 2, nil, 0)
	r1, _ := e.replica("r1")
	tu, err := r1.Start(tctx(t), "s", nil)
	require.NoError(t, err)
	defer tu.Done(false)
	first := tu.Target()
	require.ErrorIs(t, tu.Complete(placement.DefinitelyNotAccepted), ErrRetry)
	assert.NotEqual(t, first, tu.Target())
	require.NoError(t, tu.Complete(placement.Accepted))
	assert.Equal(t, tu.Target(), mustClaim(t, e, "s").Target)
	assert.EqualValues(t, 1, r1.Stats().Refusals)
	assert.EqualValues(t, 1, r1.Stats().ClosesDeleted)
}

// With the store unreachable a replica serves its cached sessions, places
// new ones locally (unclaimed), and reconciles them when the store is
// back: first writer wins, a lost one follows the winner's claim.
func TestContract_StoreDownServesCachedAndReconciles(t *testing.T) {
	e := newEnv(t, 2, nil, 0)
	r1, cs := e.replica("r1")
	r2, _ := e.replica("r2")
	serve(t, r1, "cached", to("w1"), placement.Accepted, false)

	e.b.SetUnavailable("r1", true)
	before := cs.total.Load()
	hit := serve(t, r1, "cached", nil, placement.Accepted, false)
	assert.True(t, hit.Hit())
	assert.Equal(t, before, cs.total.Load())

	mine := serve(t, r1, "mine", to("w1"), placement.Accepted, false)
	assert.True(t, mine.Unclaimed())
	assert.Equal(t, claims.Target{Worker: "w1"}, mine.Target())
	lost := serve(t, r1, "contested", to("w1"), placement.Accepted, false)
	assert.True(t, lost.Unclaimed())
	// Another replica, connected, writes the contested session's claim
	// first.
	won := serve(t, r2, "contested", to("w2"), placement.Accepted, false)
	require.Equal(t, claims.Target{Worker: "w2"}, won.Target())
	// The unclaimed sessions are served from the cache meanwhile.
	assert.True(t, serve(t, r1, "mine", nil, placement.Accepted, false).Hit())
	st := r1.Stats()
	assert.EqualValues(t, 2, st.UnclaimedPlacements)
	assert.Equal(t, 2, st.Unclaimed)

	e.b.SetUnavailable("r1", false)
	require.Eventually(t, func() bool { return r1.Stats().Reconciles == 2 }, waitFor, tick)
	st = r1.Stats()
	assert.EqualValues(t, 1, st.ReconcilesWon)
	assert.EqualValues(t, 1, st.ReconcilesLost)
	assert.Equal(t, claims.Target{Worker: "w1"}, mustClaim(t, e, "mine").Target)
	assert.Equal(t, claims.Target{Worker: "w2"}, mustClaim(t, e, "contested").Target)

	tu := serve(t, r1, "contested", nil, placement.Accepted, false)
	assert.Equal(t, claims.Target{Worker: "w2"}, tu.Target(), "the loser did not adopt the winner's claim")
	assert.False(t, tu.Unclaimed())
	tu = serve(t, r1, "mine", nil, placement.Accepted, false)
	assert.True(t, tu.Hit())
	assert.False(t, tu.Unclaimed())
	assert.Equal(t, mustClaim(t, e, "mine").Rev, tu.Rev())
	require.Eventually(t, func() bool { return len(e.b.Holders("mine")) == 1 }, waitFor, tick)
}

// A worker's new registration (a restart) moves its generation: every
// replica fences its bindings on it, and the stale claim is replaced.
func TestContract_GenerationBumpFences(t *testing.T) {
	e := newEnv(t, 2, nil, 0)
	r1, _ := e.replica("r1")
	r2, _ := e.replica("r2")
	first := serve(t, r1, "s", to("w1"), placement.Accepted, false)
	serve(t, r2, "s", nil, placement.Accepted, false)
	oldGen := mustClaim(t, e, "s").Gen
	m, err := e.workers.Register(tctx(t), "w1", "boot-2")
	require.NoError(t, err)
	require.Greater(t, m.Gen, oldGen)
	for _, r := range []*Coordinator{r1, r2} {
		require.Eventually(t, func() bool { return r.Stats().MemberEvictions >= 1 }, waitFor, tick)
		assert.EqualValues(t, 1, r.Stats().GenerationBumps)
		var g int64
		for _, mm := range r.Members() {
			if mm.Worker == "w1" {
				g = mm.Gen
			}
		}
		assert.Equal(t, m.Gen, g)
	}
	tu := serve(t, r2, "s", to("w1"), placement.Accepted, false)
	assert.False(t, tu.Hit())
	assert.Greater(t, tu.Rev(), first.Rev())
	assert.Equal(t, m.Gen, mustClaim(t, e, "s").Gen)
	tu = serve(t, r1, "s", to("w2"), placement.Accepted, false)
	assert.Equal(t, claims.Target{Worker: "w1"}, tu.Target())
	assert.Equal(t, mustClaim(t, e, "s").Rev, tu.Rev())
}

// A crashed replica's holds vanish with its store session: a close that
// was deferred for it completes, and later closes delete at once.
func TestContract_CrashedReplicaHoldsVanish(t *testing.T) {
	e := newEnv(t, 1, nil, 0)
	r1, _ := e.replica("r1")
	r2, _ := e.replica("r2")
	r3, _ := e.replica("r3")
	for _, key := range []string{"a", "b"} {
		serve(t, r1, key, to("w1"), placement.Accepted, false)
		serve(t, r2, key, nil, placement.Accepted, false)
	}
	open(t, r3, "a", nil) // holds a lease forever (r3 crashes)
	serve(t, r1, "a", nil, placement.Accepted, true)
	cl := mustClaim(t, e, "a")
	require.Equal(t, claims.Closing, cl.State)
	// r3 crashes: no Unhold, its Coordinator is never closed cleanly; its
	// store session ends.
	e.b.Crash("r3")
	require.Eventually(t, func() bool { _, ok := e.claimOf("a"); return !ok }, waitFor, tick)

	e.b.Crash("r2")
	require.Equal(t, []string{"r1"}, e.b.Holders("b"))
	serve(t, r1, "b", nil, placement.Accepted, true)
	_, ok := e.claimOf("b")
	assert.False(t, ok)
	assert.EqualValues(t, 1, r1.Stats().ClosesDeleted)
}

// A claim some replica holds leases on does not expire: the keepalive
// touches it; it expires IdleTTL after its last use.
func TestContract_NoExpiryInUse(t *testing.T) {
	clk := placement.NewManualClock(0)
	e := newEnv(t, 1, clk, time.Minute)
	r1, _ := e.replica("r1")
	r2, _ := e.replica("r2")
	tu := open(t, r1, "s", to("w1"))
	serve(t, r2, "s", nil, placement.Accepted, false)
	step := func() {
		require.NoError(t, clk.AdvanceBy(5*time.Second))
		r1.Tick(tctx(t))
		r2.Tick(tctx(t))
		e.b.Sweep()
	}
	for range 36 { // three minutes
		step()
		_, ok := e.claimOf("s")
		require.True(t, ok, "a claim in use expired at %v", clk.Now())
		// Touched at least every TouchInterval (IdleTTL/3).
		dl, ok := e.b.Deadline("s")
		require.True(t, ok)
		require.GreaterOrEqual(t, dl-clk.Now(), time.Minute-time.Minute/3, "at %v", clk.Now())
	}
	// The idle replica let its hold go when its local binding expired; the
	// one in use still holds.
	require.Equal(t, []string{"r1"}, e.b.Holders("s"))
	tu.Done(false)
	for range 36 {
		step()
	}
	_, ok := e.claimOf("s")
	assert.False(t, ok, "an idle claim did not expire")
	assert.Positive(t, r1.Stats().Touches)
}

// Bad input is an error value, never a panic.
func TestConfigErrors(t *testing.T) {
	e := newEnv(t, 1, nil, 0)
	h := e.b.Open("x")
	for _, cfg := range []Config{
		{Name: "x"},
		{Store: h},
		{Store: h, Name: "x", IdleTTL: -1},
		{Store: h, Name: "x", MaxAttempts: -1},
		{Store: h, Name: "x", IdleTTL: time.Minute, TouchInterval: time.Minute},
	} {
		_, err := New(context.Background(), cfg)
		var ce *ConfigError
		assert.ErrorAs(t, err, &ce)
		assert.ErrorIs(t, err, ErrInvalidConfig)
	}
	r1, _ := e.replica("r1")
	_, err := r1.Start(tctx(t), "", nil)
	assert.Error(t, err)
	_, err = r1.Start(tctx(t), "s", func([]claims.Member, []claims.Target) (claims.Target, error) {
		return claims.Target{Worker: "nobody"}, nil
	})
	assert.ErrorIs(t, err, claims.ErrUnknownWorker)
	tu, err := r1.Start(tctx(t), "s", to("w1"))
	require.NoError(t, err)
	require.NoError(t, tu.Complete(placement.Accepted))
	assert.ErrorIs(t, tu.Complete(placement.Accepted), ErrTurnState)
	tu.Done(false)
	assert.ErrorIs(t, tu.Complete(placement.Accepted), ErrTurnState)
	tu.Done(false) // idempotent
}

// A Turn is a handle on pooled state: once Done it is inert (ErrTurnState,
// zero values, Done a no-op), even while its state serves another
// request, which it never acts on.
func TestTurnStaleHandleAfterDone(t *testing.T) {
	e := newEnv(t, 2, nil, 0)
	r1, cs := e.replica("r1")
	serve(t, r1, "s", to("w1"), placement.Accepted, false)
	old, err := r1.Start(tctx(t), "s", nil)
	require.NoError(t, err)
	require.True(t, old.Hit())
	old.Done(false)
	calls := cs.total.Load()
	var live []Turn
	for range 4 {
		tu, err := r1.Start(tctx(t), "s", nil)
		require.NoError(t, err)
		live = append(live, tu)
	}
	for range 2 {
		assert.False(t, old.Hit())
		assert.Equal(t, claims.Target{}, old.Target())
		assert.Zero(t, old.Rev())
		assert.ErrorIs(t, old.Complete(placement.DefinitelyNotAccepted), ErrTurnState)
		assert.ErrorIs(t, old.Dispatch(claims.Target{Worker: "w2"}), ErrTurnState)
		assert.ErrorIs(t, old.Move(claims.Target{Worker: "w2"}), ErrTurnState)
		assert.False(t, old.EndBinding())
		ctx, cancel := old.Context(context.Background())
		assert.Equal(t, context.Background(), ctx)
		cancel()
		old.Done(true) // a no-op: it closes nothing
	}
	for _, tu := range live {
		require.True(t, tu.Hit())
		require.Equal(t, claims.Target{Worker: "w1"}, tu.Target())
		require.NoError(t, tu.Complete(placement.Accepted))
		tu.Done(false)
	}
	assert.Equal(t, calls, cs.total.Load(), "the stale handle made no store call")
	cl, ok := e.claimOf("s")
	require.True(t, ok, "the stale Done(true) closed nothing")
	assert.Equal(t, claims.Target{Worker: "w1"}, cl.Target)
	var zero Turn
	zero.Done(false)
	assert.ErrorIs(t, zero.Complete(placement.Accepted), ErrTurnState)
}

// New fails with the store's error when the store cannot be reached.
func TestNewStoreUnavailable(t *testing.T) {
	e := newEnv(t, 1, nil, 0)
	h := e.b.Open("r1")
	e.b.SetUnavailable("r1", true)
	_, err := New(context.Background(), Config{Store: h, Name: "r1"})
	assert.ErrorIs(t, err, claims.ErrUnavailable)
	assert.False(t, errors.Is(err, ErrInvalidConfig))
}

// Guarantee 1's window: a replica whose events are delayed keeps routing
// a session to the claim that ended (it cannot know), and the window ends
// when it processes the Delete.
func TestContract_DelayedDeleteWindowEnds(t *testing.T) {
	e := newEnv(t, 2, nil, 0)
	r1, _ := e.replica("r1")
	r2, _ := e.replica("r2")
	serve(t, r1, "s", to("w1"), placement.Accepted, false)
	e.b.HoldEvents("r1", true)
	e.endClaim("s")
	serve(t, r2, "s", to("w2"), placement.Accepted, false)
	e.b.DuplicateNext("r1")
	stale := serve(t, r1, "s", nil, placement.Accepted, false)
	assert.True(t, stale.Hit())
	assert.Equal(t, claims.Target{Worker: "w1"}, stale.Target(), "inside the window")
	e.b.HoldEvents("r1", false)
	require.Eventually(t, func() bool { return r1.Stats().DeleteEvictions >= 1 }, waitFor, tick)
	tu := serve(t, r1, "s", nil, placement.Accepted, false)
	assert.False(t, tu.Hit())
	assert.Equal(t, claims.Target{Worker: "w2"}, tu.Target())
	// The duplicated Delete changed nothing more: the new claim is cached.
	assert.True(t, serve(t, r1, "s", nil, placement.Accepted, false).Hit())
}

// A replica whose store session is lost (its holds vanish; its stream
// gets a Reset) reads its claims again and holds them again.
func TestContract_LostSessionHoldsAgain(t *testing.T) {
	e := newEnv(t, 1, nil, 0)
	r1, _ := e.replica("r1")
	first := serve(t, r1, "s", to("w1"), placement.Accepted, false)
	require.Equal(t, []string{"r1"}, e.b.Holders("s"))
	e.b.LoseSession("r1")
	require.Empty(t, e.b.Holders("s"))
	require.Eventually(t, func() bool { return r1.Stats().Resets >= 1 }, waitFor, tick)
	tu := serve(t, r1, "s", nil, placement.Accepted, false)
	assert.False(t, tu.Hit())
	assert.Equal(t, first.Rev(), tu.Rev(), "the claim itself lives on")
	assert.Equal(t, []string{"r1"}, e.b.Holders("s"))
}

// The spec's Reconnect (docs/claims.md; linearizability/claimsconf's
// finding D2): a replica that regains the store holds again, by the
// revision its requests in flight are on, a claim another replica
// rewrote meanwhile in the same lineage (quarantined, then resolved), so
// that the other's final close is deferred, not a delete under those
// requests; the last request's end then deletes the Closing claim. Two
// ways the replica can be without its hold: its store session was lost
// while the store was unreachable (an etcd lease that expired in a long
// partition), or its first hold found the store unreachable.
func TestContract_ReconnectHoldsLineageAgain(t *testing.T) {
	for _, how := range []string{"session lost", "hold failed"} {
		t.Run(how, func(t *testing.T) {
			e := newEnv(t, 1, nil, 0)
			a, _ := e.replica("a")
			b, _ := e.replica("b")
			var inflight Turn
			if how == "session lost" {
				serve(t, a, "s", to("w1"), placement.Accepted, false) // a caches (and holds) the claim
				e.b.SetUnavailable("a", true)
				e.b.LoseSession("a")
				var err error
				inflight, err = a.Start(tctx(t), "s", nil) // served from the cache
				require.NoError(t, err)
				require.True(t, inflight.Hit())
			} else {
				var err error
				inflight, err = a.Start(tctx(t), "s", to("w1")) // the claim is read...
				require.NoError(t, err)
				e.b.SetUnavailable("a", true)
				require.NoError(t, inflight.Complete(placement.Accepted)) // ...and the hold fails
			}
			defer inflight.Done(false)
			first := mustClaim(t, e, "s")
			require.NotContains(t, e.b.Holders("s"), "a")

			// b's request is ambiguous: the claim is quarantined, then
			// resolved accepted (b caches and holds the new revision).
			bt, err := b.Start(tctx(t), "s", nil)
			require.NoError(t, err)
			var qe *QuarantinedError
			require.ErrorAs(t, bt.Complete(placement.Ambiguous), &qe)
			bt.Done(false)
			require.NoError(t, b.Resolve(tctx(t), "s", qe.Attempt, qe.Gen, true))
			cur := mustClaim(t, e, "s")
			require.Equal(t, first.Born, cur.Born, "a rewrite of the same lineage")
			require.Greater(t, cur.Rev, first.Rev)

			// a's store comes back: after its Reset, a keepalive pass holds
			// the lineage again by the revision a's request is on.
			resets := a.Stats().Resets
			e.b.SetUnavailable("a", false)
			require.Eventually(t, func() bool { return a.Stats().Resets > resets }, waitFor, tick)
			a.Tick(tctx(t))
			require.Contains(t, e.b.Holders("s"), "a", "a did not hold again the claim its request is in flight on")
			assert.EqualValues(t, 1, a.Stats().Reholds)

			// b's final request: deferred while a's request is in flight.
			serve(t, b, "s", nil, placement.Accepted, true)
			cl, ok := e.claimOf("s")
			require.True(t, ok, "b's close deleted the claim under a's request in flight")
			assert.Equal(t, claims.Closing, cl.State)
			assert.EqualValues(t, 1, b.Stats().ClosesDeferred)
			inflight.Done(false)
			require.Eventually(t, func() bool { _, ok := e.claimOf("s"); return !ok }, waitFor, tick,
				"a's last request did not let the Closing claim go")
		})
	}
}

// A re-hold of a lineage that ended lets the request finish unheld: the
// claim was deleted (and a new one written) while the replica was away;
// nothing is held, and the new claim is not touched.
func TestContract_ReholdOfEndedLineage(t *testing.T) {
	e := newEnv(t, 2, nil, 0)
	a, _ := e.replica("a")
	b, _ := e.replica("b")
	serve(t, a, "s", to("w1"), placement.Accepted, false)
	e.b.SetUnavailable("a", true)
	e.b.LoseSession("a")
	inflight, err := a.Start(tctx(t), "s", nil)
	require.NoError(t, err)
	defer inflight.Done(false)
	e.endClaim("s")
	moved := serve(t, b, "s", to("w2"), placement.Accepted, false)
	resets := a.Stats().Resets
	e.b.SetUnavailable("a", false)
	require.Eventually(t, func() bool { return a.Stats().Resets > resets }, waitFor, tick)
	a.Tick(tctx(t))
	assert.Equal(t, []string{"b"}, e.b.Holders("s"))
	assert.EqualValues(t, 0, a.Stats().Reholds)
	assert.EqualValues(t, 1, a.Stats().ReholdsEnded)
	inflight.Done(false)
	assert.Equal(t, moved.Rev(), mustClaim(t, e, "s").Rev)
}

// Resolve of a quarantine whose worker re-registered (the store's
// FencedError.Stale) says the quarantine is over and drops the local
// one: the next turn replaces the stale claim.
func TestContract_ResolveStaleQuarantine(t *testing.T) {
	e := newEnv(t, 2, nil, 0)
	r1, _ := e.replica("r1")
	tu, err := r1.Start(tctx(t), "s", to("w1"))
	require.NoError(t, err)
	var qe *QuarantinedError
	require.ErrorAs(t, tu.Complete(placement.Ambiguous), &qe)
	tu.Done(false)
	// w1 restarts; r1 has not heard of it yet.
	e.b.HoldEvents("r1", true)
	_, err = e.workers.Register(tctx(t), "w1", "boot-2")
	require.NoError(t, err)
	_, err = r1.Start(tctx(t), "s", nil)
	require.ErrorIs(t, err, ErrQuarantined)

	err = r1.Resolve(tctx(t), "s", qe.Attempt, qe.Gen, true)
	require.ErrorIs(t, err, ErrQuarantineOver)
	require.ErrorIs(t, err, claims.ErrFenced)
	var fe *claims.FencedError
	require.ErrorAs(t, err, &fe)
	assert.True(t, fe.Stale)
	assert.Equal(t, claims.Quarantined, mustClaim(t, e, "s").State, "nothing settles a stale quarantine")

	next := serve(t, r1, "s", to("w2"), placement.Accepted, false)
	assert.False(t, next.Hit())
	assert.Equal(t, claims.Target{Worker: "w2"}, next.Target())
	cl := mustClaim(t, e, "s")
	assert.Equal(t, claims.Bound, cl.State)
	assert.Equal(t, cl.Rev, cl.Born, "the stale claim was replaced: a new lineage")
	e.b.HoldEvents("r1", false)
}
