package replica

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/placementlab/placement/impl/claims"
	"github.com/placementlab/placement/impl/placement"
)

// Regression tests for the gaps linearizability/claimslin found (its
// package doc, "bugs found").

// Leases are the session's, not a cached record's: after a Reset evicts a
// record with a lease in flight and a turn reads the claim again (a second
// record of the same revision), the final request on either record closes
// the claim only when the last lease of both ends.
func TestGap_LeasesCountedPerSession(t *testing.T) {
	e := newEnv(t, 1, nil, 0)
	r1, cs := e.replica("r1")
	a := open(t, r1, "s", to("w1"))
	resets := r1.Stats().Resets
	e.b.InjectReset("r1")
	require.Eventually(t, func() bool { return r1.Stats().Resets > resets }, waitFor, tick)
	b := open(t, r1, "s", nil)
	require.False(t, b.Hit(), "the Reset evicted the cached record")
	require.Equal(t, a.Rev(), b.Rev(), "the same claim read again")
	b.Done(true) // the session's final request, while a's lease is in flight
	_, ok := e.claimOf("s")
	require.True(t, ok, "the claim was closed under a lease of the evicted record")
	assert.Equal(t, 0, cs.n("Close"))
	assert.Contains(t, e.b.Holders("s"), "r1", "the hold was given up under a lease")
	a.Done(false)
	require.Eventually(t, func() bool { _, ok := e.claimOf("s"); return !ok }, waitFor, tick,
		"the last lease did not close the claim")
	assert.Equal(t, 1, cs.n("Close"))

	// The other order: the final request on the evicted record.
	a = open(t, r1, "s", to("w1"))
	resets = r1.Stats().Resets
	e.b.InjectReset("r1")
	require.Eventually(t, func() bool { return r1.Stats().Resets > resets }, waitFor, tick)
	b = open(t, r1, "s", nil)
	a.Done(true)
	_, ok = e.claimOf("s")
	require.True(t, ok, "the claim was closed under a lease of the new record")
	b.Done(false)
	require.Eventually(t, func() bool { _, ok := e.claimOf("s"); return !ok }, waitFor, tick)
}

// A record a Reset evicted while its request is in flight keeps its claim
// alive (touched by its revision) while another record of the key is
// idle: a long request does not lose its claim.
func TestGap_EvictedRecordWithLeasesTouched(t *testing.T) {
	clk := placement.NewManualClock(0)
	e := newEnv(t, 1, clk, time.Minute)
	r1, _ := e.replica("r1")
	long := open(t, r1, "s", to("w1"))
	resets := r1.Stats().Resets
	e.b.InjectReset("r1")
	require.Eventually(t, func() bool { return r1.Stats().Resets > resets }, waitFor, tick)
	// A short turn reads the claim again (a new record, which then makes
	// the replica's hold) and ends; its record goes idle.
	require.False(t, serve(t, r1, "s", nil, placement.Accepted, false).Hit())
	for range 36 { // three minutes
		require.NoError(t, clk.AdvanceBy(5*time.Second))
		r1.Tick(tctx(t))
		e.b.Sweep()
		_, ok := e.claimOf("s")
		require.True(t, ok, "the claim of a request in flight expired at %v", clk.Now())
	}
	assert.Contains(t, e.b.Holders("s"), "r1", "the hold was given up under a request in flight")
	long.Done(false)
}

// Resolve(accepted) of this replica's own quarantine that the store never
// recorded (its write found the store unreachable) binds the session
// again only under a revision the store confirms current: here the claim
// ended meanwhile, so the next turn reads the store, not the cache.
func TestGap_ResolveUnwrittenChecksRevision(t *testing.T) {
	e := newEnv(t, 2, nil, 0)
	hs := &holdHookStore{}
	r1, _ := e.replica("r1", func(c *Config) { hs.Store = c.Store; c.Store = hs })
	tu, err := r1.Start(tctx(t), "s", to("w1"))
	require.NoError(t, err)
	e.b.SetUnavailable("r1", true)
	var qe *QuarantinedError
	require.ErrorAs(t, tu.Complete(placement.Ambiguous), &qe)
	tu.Done(false)
	require.Zero(t, qe.Rev, "the store did not record the quarantine")
	e.endClaim("s") // the claim ends meanwhile (another replica's quarantine, resolved)
	resets := r1.Stats().Resets
	e.b.SetUnavailable("r1", false)
	// A turn that comes while the Resolve asks the store must not route
	// under the revision that ended.
	var during error
	hook := func() {
		// The store's Reset (its events were lost while it was
		// unreachable) is processed before the Hold returns.
		require.Eventually(t, func() bool { return r1.Stats().Resets > resets }, waitFor, tick)
		tu, err := r1.Start(tctx(t), "s", nil)
		if err == nil {
			during = fmt.Errorf("a turn routed to %s under revision %d", tu.Target(), tu.Rev())
			tu.Done(false)
		}
	}
	hs.onHold.Store(&hook)
	require.NoError(t, r1.Resolve(tctx(t), "s", qe.Attempt, qe.Gen, true))
	require.NoError(t, during)
	next := serve(t, r1, "s", to("w2"), placement.Accepted, false)
	assert.False(t, next.Hit(), "bound again under a revision that ended")
	assert.Equal(t, claims.Target{Worker: "w2"}, next.Target())
}

// waitDeleted waits until c processed the Delete of key's revision rev.
func waitDeleted(t *testing.T, c *Coordinator, key string, rev int64) {
	t.Helper()
	require.Eventually(t, func() bool {
		v, ok := c.slots.Load(key)
		if !ok {
			return false
		}
		s := v.(*slot)
		s.mu.Lock()
		defer s.mu.Unlock()
		return s.maxDeleted >= rev
	}, waitFor, tick, "%s did not process the Delete of %q revision %d", c.Name(), key, rev)
}

// holdHookStore calls onHold (if set) before each Hold.
type holdHookStore struct {
	claims.Store
	onHold atomic.Pointer[func()]
}

func (s *holdHookStore) Hold(ctx context.Context, key string, rev int64, replica string) error {
	if f := s.onHold.Swap(nil); f != nil {
		(*f)()
	}
	return s.Store.Hold(ctx, key, rev, replica)
}

// gateStore blocks Quarantine until gate is closed (entered is closed as
// it is called), and returns it late (after the store's Delete of the
// revision it replaced was delivered): 100 ms later, or, with release
// set, once release is closed (landed is closed when the store wrote it).
type gateStore struct {
	claims.Store
	entered, gate   chan struct{}
	landed, release chan struct{}
}

func (s *gateStore) Quarantine(ctx context.Context, key string, rev int64, attempt uint64, gen int64) (claims.Claim, error) {
	close(s.entered)
	<-s.gate
	cl, err := s.Store.Quarantine(ctx, key, rev, attempt, gen)
	if s.release == nil {
		time.Sleep(100 * time.Millisecond)
		return cl, err
	}
	close(s.landed)
	<-s.release
	return cl, err
}

// resolveWhileQuarantineWrites starts a placing turn of "s" on r1 (whose
// store is gs) and completes it Ambiguous in the background: its
// quarantine write blocks in gs. Meanwhile a turn is refused as locally
// quarantined and the attempt is resolved accepted (the store has not
// recorded the quarantine yet). It returns the placing turn, its
// revision, and the Complete's result to come.
func resolveWhileQuarantineWrites(t *testing.T, r1 *Coordinator, gs *gateStore) (Turn, int64, <-chan error) {
	t.Helper()
	tu, err := r1.Start(tctx(t), "s", to("w1"))
	require.NoError(t, err)
	done := make(chan error, 1)
	go func() { done <- tu.Complete(placement.Ambiguous) }()
	<-gs.entered
	var qe *QuarantinedError
	_, err = r1.Start(tctx(t), "s", nil)
	require.ErrorAs(t, err, &qe)
	require.True(t, qe.Local)
	require.NoError(t, r1.Resolve(tctx(t), "s", qe.Attempt, qe.Gen, true))
	return tu, tu.Rev(), done
}

// A quarantine write that lands after Resolve(accepted) settled its
// attempt here (the store had not recorded it yet, so the replica bound
// the session again under the revision the store confirmed) is followed
// by the store's Resolve: the session is bound in the store too, and
// neither this replica nor another refuses it as quarantined. The
// binding cached under the revision the write replaced is evicted by its
// Delete; the next turn reads the store's claim.
func TestGap_LateQuarantineWriteResolved(t *testing.T) {
	e := newEnv(t, 2, nil, 0)
	gs := &gateStore{entered: make(chan struct{}), gate: make(chan struct{})}
	r1, _ := e.replica("r1", func(c *Config) { gs.Store = c.Store; c.Store = gs })
	r2, _ := e.replica("r2")
	tu, rev, done := resolveWhileQuarantineWrites(t, r1, gs)
	close(gs.gate)
	require.ErrorIs(t, <-done, ErrQuarantined)
	tu.Done(false)
	require.Eventually(t, func() bool {
		cl, ok := e.claimOf("s")
		return ok && cl.State == claims.Bound
	}, waitFor, tick, "the store's quarantine of an attempt settled here was left: every replica refuses the session")
	cl := mustClaim(t, e, "s")
	assert.Equal(t, claims.Target{Worker: "w1"}, cl.Target)
	assert.Equal(t, uint64(1), r1.Stats().LateQuarantinesResolved)
	for _, r := range []*Coordinator{r1, r2} {
		require.Eventually(t, func() bool {
			next, err := r.Start(tctx(t), "s", nil)
			if err != nil {
				return false
			}
			defer next.Done(false)
			if next.Rev() == rev {
				return false // the replaced revision's Delete is on its way
			}
			if !next.Hit() {
				require.NoError(t, next.Complete(placement.Accepted))
			}
			return assert.Equal(t, cl.Target, next.Target()) && assert.Equal(t, cl.Rev, next.Rev())
		}, waitFor, tick, "%s does not route the session to its claim", r.Name())
	}
}

// The store's Resolve that follows a late quarantine write is retried
// when it finds the store unreachable: once the store is back, the
// session is bound there too.
func TestGap_LateQuarantineResolveRetried(t *testing.T) {
	e := newEnv(t, 2, nil, 0)
	gs := &gateStore{entered: make(chan struct{}), gate: make(chan struct{}),
		landed: make(chan struct{}), release: make(chan struct{})}
	r1, _ := e.replica("r1", func(c *Config) { gs.Store = c.Store; c.Store = gs })
	tu, _, done := resolveWhileQuarantineWrites(t, r1, gs)
	close(gs.gate)
	<-gs.landed
	e.b.SetUnavailable("r1", true) // the follow-up Resolve finds the store unreachable
	close(gs.release)
	require.ErrorIs(t, <-done, ErrQuarantined)
	tu.Done(false)
	require.Equal(t, claims.Quarantined, mustClaim(t, e, "s").State)
	require.Equal(t, 1, r1.Stats().PendingWrites, "the Resolve is queued")
	e.b.SetUnavailable("r1", false)
	require.Eventually(t, func() bool {
		cl, ok := e.claimOf("s")
		return ok && cl.State == claims.Bound && cl.Target == claims.Target{Worker: "w1"}
	}, waitFor, tick, "the queued Resolve never reached the store")
	assert.Equal(t, uint64(1), r1.Stats().LateQuarantinesResolved)
}

// resolveGateStore blocks Resolve until gate is closed (entered is closed
// as it is called).
type resolveGateStore struct {
	claims.Store
	entered, gate chan struct{}
}

func (s *resolveGateStore) Resolve(ctx context.Context, key string, attempt uint64, gen int64, accepted bool) (claims.Claim, bool, error) {
	close(s.entered)
	<-s.gate
	return s.Store.Resolve(ctx, key, attempt, gen, accepted)
}

// The Delete of a quarantine this replica caches, which comes while its
// own Resolve of the key is in flight, waits for that call and is applied
// when it returns (here the call is fenced, and the quarantine was
// settled by its owner meanwhile): the next turn places the session
// anew instead of being refused as quarantined for good.
func TestGap_DeferredDeleteAppliedAfterResolve(t *testing.T) {
	e := newEnv(t, 2, nil, 0)
	r1, _ := e.replica("r1")
	gs := &resolveGateStore{entered: make(chan struct{}), gate: make(chan struct{})}
	r2, _ := e.replica("r2", func(c *Config) { gs.Store = c.Store; c.Store = gs })
	tu, err := r1.Start(tctx(t), "s", to("w1"))
	require.NoError(t, err)
	var qe *QuarantinedError
	require.ErrorAs(t, tu.Complete(placement.Ambiguous), &qe)
	tu.Done(false)
	require.NotZero(t, qe.Rev, "the store recorded the quarantine")
	_, err = r2.Start(tctx(t), "s", nil)
	require.ErrorIs(t, err, ErrQuarantined, "r2 caches r1's quarantine")
	done := make(chan error, 1)
	go func() { done <- r2.Resolve(context.Background(), "s", qe.Attempt, qe.Gen+1, true) }() // fenced
	<-gs.entered
	require.NoError(t, r1.Resolve(tctx(t), "s", qe.Attempt, qe.Gen, false))
	waitDeleted(t, r2, "s", qe.Rev) // deferred: r2's Resolve is in flight
	close(gs.gate)
	require.ErrorIs(t, <-done, claims.ErrFenced)
	next, err := r2.Start(tctx(t), "s", to("w2"))
	require.NoError(t, err, "the quarantine's Delete was dropped: the session is refused for good")
	require.NoError(t, next.Complete(placement.Accepted))
	assert.Equal(t, claims.Target{Worker: "w2"}, next.Target())
	next.Done(false)
}

// The Delete of a revision that this replica's quarantine write replaced
// evicts the binding a Resolve(accepted) cached under that revision as
// soon as it is processed, not when the write returns: only the write's
// own record (the quarantine) waits for it. (claimslin's routing runs on
// etcd found turns routed under the ended revision in between.)
func TestGap_DeleteDuringQuarantineWriteEvictsBinding(t *testing.T) {
	e := newEnv(t, 2, nil, 0)
	gs := &gateStore{entered: make(chan struct{}), gate: make(chan struct{}),
		landed: make(chan struct{}), release: make(chan struct{})}
	r1, _ := e.replica("r1", func(c *Config) { gs.Store = c.Store; c.Store = gs })
	tu, rev, done := resolveWhileQuarantineWrites(t, r1, gs)
	hit := serve(t, r1, "s", nil, placement.Accepted, false)
	require.True(t, hit.Hit(), "Resolve(accepted) cached the binding")
	close(gs.gate)
	<-gs.landed // the store replaced rev by the quarantine; the write is still out
	defer func() {
		close(gs.release)
		require.ErrorIs(t, <-done, ErrQuarantined)
		tu.Done(false)
	}()
	require.Eventually(t, func() bool {
		tu, err := r1.Start(tctx(t), "s", nil)
		if err != nil {
			return errors.Is(err, ErrQuarantined)
		}
		moved := tu.Rev() != rev // read before Done: the Turn is inert after it
		tu.Done(false)
		return moved
	}, waitFor, tick, "turns still routed under revision %d after its Delete came", rev)
}

// A record an earlier Reset evicted keeps its lease in flight; when the
// replica's store session is lost later (its holds vanish, a second
// Reset), that record is held again too, not only the key's current
// record and the holder: another replica's close must not delete the
// claim under its lease.
func TestGap_ResetReholdsEveryLeasedRecord(t *testing.T) {
	e := newEnv(t, 1, nil, 0)
	r1, _ := e.replica("r1")
	r2, _ := e.replica("r2")
	a := open(t, r1, "s", to("w1"))
	defer a.Done(false)
	resets := r1.Stats().Resets
	e.b.InjectReset("r1")
	require.Eventually(t, func() bool { return r1.Stats().Resets > resets }, waitFor, tick)
	r1.Tick(tctx(t))
	// A short turn reads the claim again: its record makes the hold.
	require.False(t, serve(t, r1, "s", nil, placement.Accepted, false).Hit())
	resets = r1.Stats().Resets
	e.b.HoldEvents("r1", true) // r1 learns of it (a Reset) only once the holds are seen gone
	e.b.LoseSession("r1")
	require.NotContains(t, e.b.Holders("s"), "r1")
	e.b.HoldEvents("r1", false)
	require.Eventually(t, func() bool { return r1.Stats().Resets > resets }, waitFor, tick)
	r1.Tick(tctx(t))
	require.Contains(t, e.b.Holders("s"), "r1", "the lease in flight is not held in the store")
	serve(t, r2, "s", nil, placement.Accepted, true) // r2's final request
	_, ok := e.claimOf("s")
	require.True(t, ok, "another replica's close deleted the claim under a lease")
}

// A placing turn's Hold that finds the claim rewritten in its lineage
// meanwhile (quarantined and resolved elsewhere) holds the lineage by the
// revision its request is on (HoldLineage) at the next pass: a replica
// with a lease in flight is a holder in the store.
func TestGap_MovedHoldWithLeaseHoldsLineage(t *testing.T) {
	e := newEnv(t, 1, nil, 0)
	hs := &holdHookStore{}
	r1, _ := e.replica("r1", func(c *Config) { hs.Store = c.Store; c.Store = hs })
	r2, _ := e.replica("r2")
	hook := func() {
		ctx := tctx(t)
		cl := mustClaim(t, e, "s")
		q, err := e.workers.Quarantine(ctx, "s", cl.Rev, 99, cl.Gen)
		require.NoError(t, err)
		_, _, err = e.workers.Resolve(ctx, "s", q.Attempt, q.Gen, true)
		require.NoError(t, err)
	}
	hs.onHold.Store(&hook)
	a := open(t, r1, "s", to("w1"))
	defer a.Done(false)
	r1.Tick(tctx(t))
	require.Contains(t, e.b.Holders("s"), "r1", "the lease in flight is not held in the store")
	serve(t, r2, "s", nil, placement.Accepted, true) // r2's final request
	_, ok := e.claimOf("s")
	require.True(t, ok, "another replica's close deleted the claim under a lease")
}

// A caller that joins a shared CreateOrGet after a Reset was processed
// gets the Reset count from before it (the claim was read before the
// Reset), so readClaim reads the claim again instead of caching a claim
// whose Delete the lost events may have carried.
func TestGap_SharedReadAcrossResetIsStale(t *testing.T) {
	e := newEnv(t, 1, nil, 0)
	r1, cs := e.replica("r1")
	cs.createDelay = 200 * time.Millisecond
	propose := func() (claims.Target, error) { return claims.Target{Worker: "w1"}, nil }
	before := r1.epoch.Load()
	first := make(chan uint64, 1)
	go func() {
		_, _, ep, err := r1.createOrGet(context.Background(), "s", propose)
		assert.NoError(t, err)
		first <- ep
	}()
	require.Eventually(t, func() bool { return r1.sfRunning.Load() == 1 }, waitFor, tick)
	resets := r1.Stats().Resets
	e.b.InjectReset("r1")
	require.Eventually(t, func() bool { return r1.Stats().Resets > resets }, waitFor, tick)
	require.Equal(t, 1, cs.n("CreateOrGet"))
	_, _, ep, err := r1.createOrGet(tctx(t), "s", propose)
	require.NoError(t, err)
	require.Equal(t, 1, cs.n("CreateOrGet"), "the second caller did not join the shared call")
	assert.Equal(t, before, ep, "a read shared across a Reset looks fresh")
	assert.NotEqual(t, before, r1.epoch.Load())
	assert.Equal(t, before, <-first)
}

// A slot whose records have requests in flight stays in the replica's
// table while it has no current record and no hold: a keepalive pass
// that ran after a Reset evicted the record, before the replica held the
// claim again (its first Hold had found the store unreachable), dropped
// the slot, and no later pass touched the claim, which expired under the
// request (guarantee 5; claimslin's routing run, memstore seed 2248).
func TestGap_SlotKeptWhileLeased(t *testing.T) {
	clk := placement.NewManualClock(0)
	e := newEnv(t, 1, clk, time.Minute)
	r1, _ := e.replica("r1", func(c *Config) { c.StoreRetry = time.Hour })
	tu, err := r1.Start(tctx(t), "s", to("w1"))
	require.NoError(t, err)
	e.b.SetUnavailable("r1", true)
	require.NoError(t, tu.Complete(placement.Accepted)) // its Hold finds the store unreachable
	// A read finds it unreachable too: the replica counts it down (a
	// write's unknown outcome alone does not: noteWrite).
	_, _, gerr := r1.store.Get(tctx(t), "s")
	r1.note(gerr)
	require.True(t, r1.isDown())
	tu.Done(false)
	long, err := r1.Start(tctx(t), "s", nil) // a hit: its request stays in flight
	require.NoError(t, err)
	require.True(t, long.Hit())
	// The cached record is evicted (as a Reset's processing does) while
	// the replica still counts the store down, and a pass runs then.
	v, ok := r1.slots.Load("s")
	require.True(t, ok)
	s := v.(*slot)
	s.mu.Lock()
	r1.evictLocked(s, s.cur.Load())
	// The Hold's outcome is unknown, so the replica counts it as maybe
	// made (its holder) and would keep the slot for that alone: drop it,
	// to reach the state of a record evicted before its Hold was made (a
	// leased record and no hold).
	s.holder = nil
	s.mu.Unlock()
	r1.Tick(tctx(t))
	resets := r1.Stats().Resets
	e.b.SetUnavailable("r1", false) // the store is back: a Reset
	require.Eventually(t, func() bool { return r1.Stats().Resets > resets }, waitFor, tick)
	for range 36 { // three minutes, the request in flight throughout
		r1.Tick(tctx(t))
		require.NoError(t, clk.AdvanceBy(5*time.Second))
		e.b.Sweep()
		_, ok := e.claimOf("s")
		require.True(t, ok, "the claim of a request in flight expired at %v", clk.Now())
	}
	assert.Contains(t, e.b.Holders("s"), "r1")
	long.Done(false)
}
