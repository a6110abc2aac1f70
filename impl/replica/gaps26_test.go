package replica

import (
	"context"
	"errors"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/placementlab/placement/impl/claims"
	"github.com/placementlab/placement/impl/placement"
)

// The gaps linearizability/affinitylin's check of the affinity layer over
// a replica found (issue 26): each test fails under the variant its name
// pairs with in mutant_test.go.

var w1, w2 = claims.Target{Worker: "w1"}, claims.Target{Worker: "w2"}

// bhit begins a turn of key on c that must be a cached hit (as the
// affinity layer begins every turn).
func bhit(t *testing.T, c *Coordinator, key string) Turn {
	t.Helper()
	tu := begin(t, c, key)
	require.True(t, tu.Hit(), "a cached hit expected")
	return tu
}

// A move from a revision ends its lineage: requests still in flight on the
// old binding do not keep the new claim, so the session's final request
// on the new binding closes it at once (as the core's Close does not wait
// for leases on a version a move invalidated).
func TestGap_MoveEndsOldLineageLeases(t *testing.T) {
	e := newEnv(t, 2, nil, 0)
	r1, _ := e.replica("r1")
	serve(t, r1, "s", to("w1"), placement.Accepted, false)
	a := bhit(t, r1, "s") // in flight on the old binding
	b := bhit(t, r1, "s")
	require.NoError(t, b.Dispatch(w2)) // moves the claim
	require.NoError(t, b.Complete(placement.Accepted))
	b.Done(true)
	_, ok := e.claimOf("s")
	assert.False(t, ok, "the final request closed nothing: a lease on the moved-from binding kept the new claim")
	require.NoError(t, a.Complete(placement.Accepted))
	a.Done(false)
}

// closeGate holds every Close until its gate opens (entered says that one
// is waiting).
type closeGate struct {
	claims.Store
	entered chan struct{}
	gate    chan struct{}
}

func (g *closeGate) Close(ctx context.Context, key string, rev int64, replica string) (claims.CloseResult, error) {
	g.entered <- struct{}{}
	<-g.gate
	return g.Store.Close(ctx, key, rev, replica)
}

// A turn that reads the session's claim while this replica's close of it
// is in flight (the final request's last lease ended) waits for the close
// and places the session anew: it does not adopt a claim being deleted.
func TestGap_ReadWaitsForOwnClose(t *testing.T) {
	e := newEnv(t, 2, nil, 0)
	g := &closeGate{entered: make(chan struct{}, 1), gate: make(chan struct{})}
	r1, cs := e.replica("r1", func(c *Config) { g.Store = c.Store; c.Store = g })
	serve(t, r1, "s", to("w1"), placement.Accepted, false)
	a := bhit(t, r1, "s")
	require.NoError(t, a.Complete(placement.Accepted))
	done := make(chan struct{})
	go func() { a.Done(true); close(done) }()
	<-g.entered // the close is in flight
	gets := cs.n("Get")
	read := make(chan Turn, 1)
	go func() {
		tu, err := r1.Begin(tctx(t), "s")
		if err != nil {
			t.Error(err)
		}
		read <- tu
	}()
	require.Eventually(t, func() bool { return cs.n("Get") > gets }, waitFor, tick, "the turn reads the claim")
	close(g.gate)
	<-done
	b := <-read
	require.NotNil(t, b)
	defer b.Done(false)
	_, ok := b.Claim()
	assert.False(t, ok, "the turn adopted the claim this replica was closing")
	assert.False(t, b.Hit())
}

// The final request's lease on a binding a refused later turn ended here
// closes nothing, even after the session was bound again under the same
// revision (a dispatch to the same target adopted it).
func TestGap_FinalOnEndedBindingKeepsReadoptedClaim(t *testing.T) {
	e := newEnv(t, 2, nil, 0)
	r1, _ := e.replica("r1")
	serve(t, r1, "s", to("w1"), placement.Accepted, false)
	a := bhit(t, r1, "s")
	b := bhit(t, r1, "s")
	require.NoError(t, a.Complete(placement.Accepted))
	a.Done(true) // the final request, b still in flight: the close waits
	require.ErrorIs(t, b.Complete(placement.DefinitelyNotAccepted), placement.ErrNotAccepted)
	c := begin(t, r1, "s") // the refused claim reads as none
	_, ok := c.Claim()
	require.False(t, ok)
	require.NoError(t, c.Dispatch(w1)) // adopts the same revision
	require.NoError(t, c.Complete(placement.Accepted))
	c.Done(false)
	b.Done(false) // the last lease of the ended binding
	cl, ok := e.claimOf("s")
	require.True(t, ok, "the close of the ended binding deleted the session's new binding")
	assert.Equal(t, w1, cl.Target)
	h := bhit(t, r1, "s")
	h.Done(false)
	_, ok = e.claimOf("s")
	assert.True(t, ok, "the ended binding's close was handed to the session's new binding")
}

// A claim revision refused here stays refused after the keepalive pass
// drops what it can: the slot that remembers the refusal is kept while
// the revision may be current.
func TestGap_RefusalSurvivesKeepalive(t *testing.T) {
	e := newEnv(t, 2, nil, 0)
	r1, _ := e.replica("r1")
	serve(t, r1, "s", to("w1"), placement.Accepted, false)
	a := bhit(t, r1, "s")
	require.ErrorIs(t, a.Complete(placement.DefinitelyNotAccepted), placement.ErrNotAccepted)
	a.Done(false)
	for range 3 {
		r1.Tick(tctx(t))
	}
	readsNoBinding(t, r1, "s", "the refused claim was read as the session's binding again")
}

// A claim adopted from the store (another replica's, or a write of this
// one's whose reply was lost) whose dispatch was refused is remembered as
// refused, as a refused hit is: the next turn here moves it.
func TestGap_AdoptedClaimRefusalRemembered(t *testing.T) {
	e := newEnv(t, 2, nil, 0)
	r1, _ := e.replica("r1")
	r2, _ := e.replica("r2")
	serve(t, r2, "s", to("w1"), placement.Accepted, false)
	a := begin(t, r1, "s")
	_, ok := a.Claim()
	require.True(t, ok)
	require.NoError(t, a.Dispatch(w1))
	require.ErrorIs(t, a.Complete(placement.DefinitelyNotAccepted), placement.ErrNotAccepted)
	a.Done(false)
	readsNoBinding(t, r1, "s", "the refused claim was adopted again")
}

// Leases on a binding a refused later turn ended keep nothing: the final
// request of the session's new binding (the same revision, adopted again)
// closes the claim at once.
func TestGap_RefusedLeasesKeepNothing(t *testing.T) {
	e := newEnv(t, 2, nil, 0)
	r1, _ := e.replica("r1")
	serve(t, r1, "s", to("w1"), placement.Accepted, false)
	a := bhit(t, r1, "s") // stays in flight on the refused binding
	b := bhit(t, r1, "s")
	require.ErrorIs(t, b.Complete(placement.DefinitelyNotAccepted), placement.ErrNotAccepted)
	b.Done(false)
	c := begin(t, r1, "s")
	require.NoError(t, c.Dispatch(w1))
	require.NoError(t, c.Complete(placement.Accepted))
	c.Done(true)
	_, ok := e.claimOf("s")
	assert.False(t, ok, "a lease on the refused binding kept the claim past the final request")
	require.NoError(t, a.Complete(placement.Accepted))
	a.Done(false)
}

// A write whose reply was lost does not mark the store down: the next
// session is claimed in the store, not placed unclaimed.
func TestGap_LostWriteReplyNotDown(t *testing.T) {
	e := newEnv(t, 2, nil, 0)
	r1, _ := e.replica("r1")
	e.b.LoseReply("r1", "hold", 1, false)
	serve(t, r1, "s1", to("w1"), placement.Accepted, false)
	tu, err := r1.Start(tctx(t), "s2", to("w1"))
	require.NoError(t, err)
	assert.False(t, tu.Unclaimed(), "placed unclaimed after one lost reply, with the store up")
	require.NoError(t, tu.Complete(placement.Accepted))
	tu.Done(false)
	assert.Zero(t, r1.Stats().UnclaimedPlacements)
}

// A request that dispatched under the claim it read (the replica's cache
// of it was evicted: a Reset) joins the binding when the session's final
// request ends the old copy's last lease: the claim stays for it, and its
// own lease's end closes it.
func TestGap_AdopterJoinsClosingBinding(t *testing.T) {
	e := newEnv(t, 2, nil, 0)
	r1, _ := e.replica("r1")
	serve(t, r1, "s", to("w1"), placement.Accepted, false)
	a := bhit(t, r1, "s")
	e.b.InjectReset("r1")
	require.Eventually(t, func() bool { return r1.Stats().Resets > 0 }, waitFor, tick)
	b := begin(t, r1, "s")
	_, ok := b.Claim()
	require.True(t, ok, "the claim is read after the Reset")
	require.NoError(t, b.Dispatch(w1)) // adopts it
	require.NoError(t, a.Complete(placement.Accepted))
	a.Done(true)
	_, ok = e.claimOf("s")
	require.True(t, ok, "the final request deleted the claim under the request adopting it")
	require.NoError(t, b.Complete(placement.Accepted))
	b.Done(false)
	_, ok = e.claimOf("s")
	assert.False(t, ok, "the adopter's last lease closes the claim")
}

// pause makes *hook block once until the returned release is called;
// reached is closed when it blocks.
func pause(t *testing.T, hook *func()) (reached <-chan struct{}, release func()) {
	r, g := make(chan struct{}), make(chan struct{})
	var once sync.Once
	*hook = func() { once.Do(func() { close(r); <-g }) }
	t.Cleanup(func() { *hook = nil })
	var rel sync.Once
	return r, func() { rel.Do(func() { close(g) }) }
}

// commitPaused starts a placing turn of key on c and completes it
// (Accepted) in the background, paused between the core's commit (its
// binding visible to hits) and the record's binding; release lets it go
// on, and committed gives Complete's result.
func commitPaused(t *testing.T, c *Coordinator, key string) (p Turn, release func(), committed <-chan error) {
	t.Helper()
	p, err := c.Start(tctx(t), key, to("w1"))
	require.NoError(t, err)
	reached, release := pause(t, &testAfterCommit)
	done := make(chan error, 1)
	go func() { done <- p.Complete(placement.Accepted) }()
	<-reached
	return p, release, done
}

// readsNoBinding checks that a turn begun on key reads its claim as no
// binding (a refused claim), with msg if it does not.
func readsNoBinding(t *testing.T, c *Coordinator, key, msg string) {
	t.Helper()
	b := begin(t, c, key)
	defer b.Done(false)
	_, ok := b.Claim()
	assert.False(t, ok, msg)
}

// A hit between the placing turn's commit in the core and its binding's
// record counts the placer's lease too: a final request among such hits
// leaves the claim to the placer's lease's end.
func TestGap_PlacerLeaseCountedBeforeCommit(t *testing.T) {
	e := newEnv(t, 2, nil, 0)
	r1, _ := e.replica("r1")
	p, release, committed := commitPaused(t, r1, "s")
	defer release()
	h := bhit(t, r1, "s")
	require.NoError(t, h.Complete(placement.Accepted))
	h.Done(true)
	release()
	require.NoError(t, <-committed)
	_, ok := e.claimOf("s")
	require.True(t, ok, "the final request closed the claim under the placer's request")
	p.Done(false)
	_, ok = e.claimOf("s")
	assert.False(t, ok, "the placer's lease's end closes the claim")
}

// A refused hit that ends the binding between the placing turn's commit
// and its record's binding stands: the placer's bound does not forget it.
func TestGap_RefusalDuringCommitStands(t *testing.T) {
	e := newEnv(t, 2, nil, 0)
	r1, _ := e.replica("r1")
	p, release, committed := commitPaused(t, r1, "s")
	defer release()
	h := bhit(t, r1, "s")
	require.ErrorIs(t, h.Complete(placement.DefinitelyNotAccepted), placement.ErrNotAccepted)
	h.Done(false)
	release()
	require.NoError(t, <-committed)
	p.Done(false)
	readsNoBinding(t, r1, "s", "the refused claim reads as the session's binding again")
}

// Once the last lease of a closing binding is counted out, no hit takes a
// lease on it (the close that follows would delete the claim under it):
// a turn begun then finds the session closing.
func TestGap_NoHitAfterLastLease(t *testing.T) {
	e := newEnv(t, 2, nil, 0)
	r1, _ := e.replica("r1")
	serve(t, r1, "s", to("w1"), placement.Accepted, false)
	a := bhit(t, r1, "s")
	require.NoError(t, a.Complete(placement.Accepted))
	reached, release := pause(t, &testLeaseEnded)
	defer release()
	done := make(chan struct{})
	go func() { a.Done(true); close(done) }()
	<-reached
	b, err := r1.Begin(tctx(t), "s")
	release()
	<-done
	if err == nil {
		_, claimed := b.Claim()
		hitTurn := b.Hit()
		b.Done(false)
		require.False(t, hitTurn, "a hit took a lease on the binding whose last lease had ended")
		require.False(t, claimed, "the turn read the claim being closed as the session's binding")
		return
	}
	assert.True(t, errors.Is(err, ErrClosing), "Begin: %v", err)
}
