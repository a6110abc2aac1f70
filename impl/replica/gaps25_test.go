package replica

import (
	"context"
	"errors"
	"fmt"
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

// ambiguousTurn places "s" on r1 to w1 and completes it Ambiguous: the
// quarantine's error.
func ambiguousTurn(t *testing.T, r1 *Coordinator) *QuarantinedError {
	t.Helper()
	tu, err := r1.Start(tctx(t), "s", to("w1"))
	require.NoError(t, err)
	var qe *QuarantinedError
	require.ErrorAs(t, tu.Complete(placement.Ambiguous), &qe)
	tu.Done(false)
	return qe
}

// servesSession checks that r serves "s" on w1 (no quarantine refusal),
// within waitFor.
func servesSession(t *testing.T, r *Coordinator) {
	t.Helper()
	var last error
	ok := assert.Eventually(t, func() bool {
		tu, err := r.Start(tctx(t), "s", to("w1"))
		if last = err; err != nil {
			return false
		}
		defer tu.Done(false)
		if !tu.Hit() {
			require.NoError(t, tu.Complete(placement.Accepted))
		}
		return assert.Equal(t, claims.Target{Worker: "w1"}, tu.Target())
	}, waitFor, tick)
	require.True(t, ok, "%s does not serve the session: %v", r.Name(), last)
}

// A quarantine write whose reply was lost (it landed in the store, and
// the replica saw an unavailable error) is settled by reading the store:
// the replica knows the store holds the quarantine, so Resolve settles it
// there, and every replica serves the session again (issue 25, item 1).
func TestGap_LostQuarantineReplySettled(t *testing.T) {
	e := newEnv(t, 1, nil, 0)
	r1, _ := e.replica("r1")
	r2, _ := e.replica("r2")
	e.b.LoseReply("r1", "quarantine", 1, false)
	qe := ambiguousTurn(t, r1)
	require.Equal(t, claims.Quarantined, mustClaim(t, e, "s").State, "the quarantine landed")
	require.NoError(t, r1.Resolve(tctx(t), "s", qe.Attempt, qe.Gen, true))
	r1.Tick(tctx(t)) // the retries
	cl := mustClaim(t, e, "s")
	require.Equal(t, claims.Bound, cl.State, "Resolve returned nil, yet the store keeps the quarantine")
	servesSession(t, r2)
	servesSession(t, r1)
	assert.Equal(t, uint64(1), r1.Stats().QuarantinesWritten)
}

// The same when the connection is cut as the reply is lost: the replica
// cannot read the outcome, so Resolve settles the quarantine locally, and
// once the store is back the replica reads what happened: the
// quarantine landed, and the store learns the outcome (issue 25, item 1).
func TestGap_LostQuarantineReplySettledAfterCut(t *testing.T) {
	e := newEnv(t, 1, nil, 0)
	r1, _ := e.replica("r1")
	r2, _ := e.replica("r2")
	e.b.LoseReply("r1", "quarantine", 1, true)
	qe := ambiguousTurn(t, r1)
	require.Equal(t, claims.Quarantined, mustClaim(t, e, "s").State, "the quarantine landed")
	require.NoError(t, r1.Resolve(tctx(t), "s", qe.Attempt, qe.Gen, false))
	e.b.SetUnavailable("r1", false)
	require.Eventually(t, func() bool {
		_, ok := e.claimOf("s")
		return !ok
	}, waitFor, tick, "the store keeps a quarantine the replica settled not accepted")
	servesSession(t, r2)
}

// A terminal close whose reply was lost is counted by what the store
// shows: the close that deleted the claim counts as deleted, one that
// deferred it (another replica holds it) as deferred; neither as stale,
// and nothing is left to retry (issue 25, item 5).
func TestGap_LostCloseReplyCounted(t *testing.T) {
	e := newEnv(t, 1, nil, 0)
	r1, _ := e.replica("r1")
	r2, _ := e.replica("r2")
	e.b.LoseReply("r1", "close", 1, false)
	serve(t, r1, "s", to("w1"), placement.Accepted, true)
	r1.Tick(tctx(t))
	_, ok := e.claimOf("s")
	require.False(t, ok, "the close deleted the claim")
	st := r1.Stats()
	assert.Equal(t, uint64(1), st.ClosesDeleted, "a close that deleted the claim")
	assert.Zero(t, st.ClosesStale, "a close that deleted the claim counted as stale")
	assert.Zero(t, st.PendingWrites)

	// Deferred: r2 holds the claim as r1's close lands.
	a := open(t, r2, "s", to("w1"))
	defer a.Done(false)
	e.b.LoseReply("r1", "close", 1, true) // and the connection is cut
	serve(t, r1, "s", nil, placement.Accepted, true)
	require.Equal(t, claims.Closing, mustClaim(t, e, "s").State)
	e.b.SetUnavailable("r1", false)
	require.Eventually(t, func() bool { r1.Tick(tctx(t)); return r1.Stats().PendingWrites == 0 }, waitFor, tick)
	st = r1.Stats()
	assert.Equal(t, uint64(1), st.ClosesDeferred, "a close that deferred the claim")
	assert.Zero(t, st.ClosesStale, "a close that deferred the claim counted as stale")
}

// A Resolve whose reply was lost is settled by reading the store: here
// it applied, so it returns nil (the store answers the read), and a
// retried Resolve after one whose outcome could not be read (the
// connection cut) succeeds instead of being fenced by its own first try
// (issue 25, item 5).
func TestGap_LostResolveReplySettled(t *testing.T) {
	e := newEnv(t, 1, nil, 0)
	r1, _ := e.replica("r1")
	r2, _ := e.replica("r2")
	qe := ambiguousTurn(t, r1)
	require.NotZero(t, qe.Rev)
	e.b.LoseReply("r2", "resolve", 1, false)
	require.NoError(t, r2.Resolve(tctx(t), "s", qe.Attempt, qe.Gen, true), "a Resolve that applied")
	require.Equal(t, claims.Bound, mustClaim(t, e, "s").State)
	servesSession(t, r1)

	// Cut: the first try's outcome cannot be read; the retry succeeds.
	e.endClaim("s")
	require.Eventually(t, func() bool { return r1.Stats().Cached == 0 }, waitFor, tick, "r1 still caches the ended claim")
	qe = ambiguousTurn(t, r1)
	require.NotZero(t, qe.Rev)
	e.b.LoseReply("r1", "resolve", 1, true)
	err := r1.Resolve(tctx(t), "s", qe.Attempt, qe.Gen, false)
	require.ErrorIs(t, err, claims.ErrUnavailable, "the outcome is not known")
	_, ok := e.claimOf("s")
	require.False(t, ok, "the Resolve applied")
	e.b.SetUnavailable("r1", false)
	require.NoError(t, r1.Resolve(tctx(t), "s", qe.Attempt, qe.Gen, false), "a retried Resolve whose first try applied")
	servesSession(t, r2)
}

// slowTouchStore makes every Touch take delay (a slow store that still
// answers).
type slowTouchStore struct {
	claims.Store
	delay time.Duration
}

func (s *slowTouchStore) Touch(ctx context.Context, key string, rev int64) error {
	select {
	case <-time.After(s.delay):
	case <-ctx.Done():
		return ctx.Err()
	}
	return s.Store.Touch(ctx, key, rev)
}

// On a slow store (156 ms a Touch, a 3 s idle TTL: the scaled-down
// run), every one of 40 claims in use survives: the keepalive's touches
// run in parallel, so a pass ends well inside the TTL, and Stats reports
// how long it took (issue 25, item 4). One at a time, a pass takes 6.2 s
// and every claim expires.
func TestGap_SlowStoreKeepsClaimsInUse(t *testing.T) {
	const n, ttl = 40, 3 * time.Second
	e := newEnv(t, 1, nil, ttl)
	r1, _ := e.replica("r1", func(c *Config) {
		c.IdleTTL = 0
		c.Store = &slowTouchStore{Store: c.Store, delay: 156 * time.Millisecond}
	})
	turns := make([]Turn, n)
	for i := range turns {
		turns[i] = open(t, r1, fmt.Sprintf("s%d", i), to("w1"))
	}
	defer func() {
		for _, tu := range turns {
			tu.Done(false)
		}
	}()
	deadline := time.Now().Add(2 * ttl)
	for time.Now().Before(deadline) {
		for i := range turns {
			_, ok := e.claimOf(fmt.Sprintf("s%d", i))
			require.True(t, ok, "the claim of s%d, in use, expired", i)
		}
		time.Sleep(50 * time.Millisecond)
	}
	st := r1.Stats()
	assert.Positive(t, st.KeepalivePass, "the last pass's duration")
	assert.Less(t, st.KeepalivePass, ttl/2, "a keepalive pass took half the TTL")
	assert.Less(t, st.OldestTouch, ttl, "the keepalive lags a TTL behind")
	t.Logf("last keepalive pass: %v; oldest touch of a claim in use: %v ago", st.KeepalivePass, st.OldestTouch)
}

// Two replicas dispatch first turns of one session under the same claim
// revision, and both outcomes are ambiguous. The first quarantine wins;
// the second is refused (its revision moved). The second attempt's
// outcome is still unknown, so it must not be dropped: once the first is
// resolved (the claim bound again, same target and generation), the
// second is written, and every replica refuses the session until it is
// resolved too (the claims spec review's finding: "a second ambiguous
// outcome under the same revision is silently dropped").
func TestGap_SecondAmbiguousQuarantineRecorded(t *testing.T) {
	e := newEnv(t, 1, nil, 0)
	r1, _ := e.replica("r1")
	r2, _ := e.replica("r2")
	r3, _ := e.replica("r3")
	t1, err := r1.Start(tctx(t), "s", to("w1"))
	require.NoError(t, err)
	defer t1.Done(false)
	t2, err := r2.Start(tctx(t), "s", to("w1"))
	require.NoError(t, err)
	defer t2.Done(false)
	require.False(t, t2.Hit())
	require.Equal(t, t1.Rev(), t2.Rev(), "both dispatch under the same revision")
	var qe1, qe2 *QuarantinedError
	require.ErrorAs(t, t1.Complete(placement.Ambiguous), &qe1)
	require.ErrorAs(t, t2.Complete(placement.Ambiguous), &qe2)
	require.NotZero(t, qe1.Rev, "the first quarantine is the store's")
	require.NotEqual(t, qe1.Attempt, qe2.Attempt)

	require.NoError(t, r1.Resolve(tctx(t), "s", qe1.Attempt, qe1.Gen, true))
	require.Eventually(t, func() bool {
		r2.Tick(tctx(t))
		cl, ok := e.claimOf("s")
		return ok && cl.State == claims.Quarantined && cl.Attempt == qe2.Attempt
	}, waitFor, tick, "the second ambiguous attempt was dropped: the store holds no quarantine of it")
	for _, r := range []*Coordinator{r1, r3} {
		require.Eventually(t, func() bool {
			tu, err := r.Start(tctx(t), "s", nil)
			if err == nil {
				tu.Done(false)
			}
			return errors.Is(err, ErrQuarantined)
		}, waitFor, tick, "%s serves the session while the second attempt's outcome is unknown", r.Name())
	}
	require.NoError(t, r2.Resolve(tctx(t), "s", qe2.Attempt, qe2.Gen, true))
	servesSession(t, r3)
	servesSession(t, r1)
}

// When the first of two ambiguous attempts under one revision is settled
// not accepted, the claim is deleted and the store cannot record the
// second: it stays quarantined on its replica (refused there until
// resolved) and is counted, not silently dropped.
func TestGap_SecondAmbiguousUnrecordedCounted(t *testing.T) {
	e := newEnv(t, 1, nil, 0)
	r1, _ := e.replica("r1")
	r2, _ := e.replica("r2")
	t1, err := r1.Start(tctx(t), "s", to("w1"))
	require.NoError(t, err)
	defer t1.Done(false)
	t2, err := r2.Start(tctx(t), "s", to("w1"))
	require.NoError(t, err)
	defer t2.Done(false)
	var qe1, qe2 *QuarantinedError
	require.ErrorAs(t, t1.Complete(placement.Ambiguous), &qe1)
	require.ErrorAs(t, t2.Complete(placement.Ambiguous), &qe2)
	require.NoError(t, r1.Resolve(tctx(t), "s", qe1.Attempt, qe1.Gen, false))
	require.Eventually(t, func() bool {
		r2.Tick(tctx(t))
		return r2.Stats().QuarantinesUnrecorded == 1
	}, waitFor, tick, "the second attempt's quarantine was dropped without a count")
	assert.Zero(t, r2.Stats().PendingWrites)
	_, err = r2.Start(tctx(t), "s", nil)
	require.ErrorIs(t, err, ErrQuarantined, "r2 keeps refusing the session while its attempt's outcome is unknown")
	require.NoError(t, r2.Resolve(tctx(t), "s", qe2.Attempt, qe2.Gen, false))
	servesSession(t, r2)
}

// A Hold whose reply was lost may have landed: the replica gives it up
// when its record ends like any hold it made. Here the hold landed, the
// record ended with no lease (the claim was rewritten elsewhere while the
// store was out of reach), and another replica's final request deferred
// the close on it: the replica's unhold lets the claim be deleted instead
// of Closing for good (issue 25, item 1: every write's outcome).
func TestGap_LostHoldReplyGivenUp(t *testing.T) {
	e := newEnv(t, 1, nil, 0)
	r1, _ := e.replica("r1")
	r2, _ := e.replica("r2")
	e.b.LoseReply("r1", "hold", 1, true)
	serve(t, r1, "s", to("w1"), placement.Accepted, false)
	require.Contains(t, e.b.Holders("s"), "r1", "the hold landed")
	ctx := tctx(t)
	cl := mustClaim(t, e, "s")
	q, err := e.workers.Quarantine(ctx, "s", cl.Rev, 99, cl.Gen)
	require.NoError(t, err)
	_, _, err = e.workers.Resolve(ctx, "s", q.Attempt, q.Gen, true)
	require.NoError(t, err)
	resets := r1.Stats().Resets
	e.b.SetUnavailable("r1", false)
	require.Eventually(t, func() bool { return r1.Stats().Resets > resets }, waitFor, tick)
	serve(t, r2, "s", nil, placement.Accepted, true) // r2's final request
	require.Eventually(t, func() bool {
		r1.Tick(tctx(t))
		_, ok := e.claimOf("s")
		return !ok
	}, waitFor, tick, "a hold whose reply was lost is never given up: the claim stays Closing (holders %v)", e.b.Holders("s"))
}

// A CreateOrGet whose reply was lost (the claim written, the replica
// told the store is unavailable) is settled by reading the claim: the
// first turn dispatches under it, not as an unclaimed placement to be
// reconciled later (issue 25, item 1: every write's outcome).
func TestGap_LostCreateReplySettled(t *testing.T) {
	e := newEnv(t, 2, nil, 0)
	r1, _ := e.replica("r1")
	e.b.LoseReply("r1", "create-or-get", 1, false)
	tu, err := r1.Start(tctx(t), "s", to("w1"))
	require.NoError(t, err)
	defer tu.Done(false)
	cl := mustClaim(t, e, "s")
	assert.False(t, tu.Unclaimed(), "placed unclaimed though the claim was written")
	assert.Equal(t, cl.Rev, tu.Rev())
	assert.Equal(t, cl.Target, tu.Target())
	require.NoError(t, tu.Complete(placement.Accepted))
	assert.Zero(t, r1.Stats().UnclaimedPlacements)
}

// PendingWrites counts a write while a keepalive pass retries it: a
// caller that waits for the gauge to read 0 waits for the retry's
// outcome, not only for the pass to take it out of the queue (the CI
// failure of TestGap_LostCloseReplyCounted under -race, where the test's
// Tick found the queue already taken by the background pass).
func TestPendingWritesCountsARetryInFlight(t *testing.T) {
	e := newEnv(t, 1, nil, 0)
	r1, _ := e.replica("r1")
	entered, release := make(chan struct{}), make(chan struct{})
	r1.addRetry("test", func(context.Context) error {
		close(entered)
		<-release
		return nil
	})
	require.Equal(t, 1, r1.Stats().PendingWrites)
	done := make(chan struct{})
	go func() { defer close(done); r1.runRetries(context.Background()) }()
	<-entered
	assert.Equal(t, 1, r1.Stats().PendingWrites, "a write being retried is still pending")
	close(release)
	<-done
	// The background keepalive pass may be the one that took it.
	assert.Eventually(t, func() bool { return r1.Stats().PendingWrites == 0 }, waitFor, tick, "the retry settled")
}
