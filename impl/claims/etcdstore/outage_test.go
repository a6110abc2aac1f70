package etcdstore

import (
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/placementlab/placement/impl/claims"
)

// A quorum loss longer than the session TTL, or the whole cluster stopped
// that long, then a heal: the store's session lease outlived the outage
// in etcd (a new leader renews every lease; a restarted cluster recovers
// its leases), so the store takes it up again, and the registrations on it
// survive with their generations: claims made before the outage are
// current after it (nothing is fenced), and holds made before it still
// defer a close.
func TestQuorumLossKeepsRegistrations(t *testing.T) {
	for _, tc := range []struct {
		name string
		stop []int
	}{
		{"TwoOfThree", []int{1, 2}},
		{"WholeCluster", []int{0, 1, 2}},
	} {
		t.Run(tc.name, func(t *testing.T) { testOutageKeepsRegistrations(t, tc.stop) })
	}
}

// testOutageKeepsRegistrations stops the members stop of a three-member
// cluster for three session TTLs, restarts them together from their data
// directories, and checks what survived.
func testOutageKeepsRegistrations(t *testing.T, stop []int) {
	ctx := testContext(t, 90*time.Second)
	const ttl = 2 * time.Second
	c := startCluster(t, 3)
	o := newOpener(t, c, time.Minute, WithSessionTTL(ttl), WithRequestTimeout(time.Second))
	reg, r := o.open("registrar"), o.open("r")
	m, err := reg.Register(ctx, "w", "boot-1")
	require.NoError(t, err)
	cl, _, err := r.CreateOrGet(ctx, "k", to("w"))
	require.NoError(t, err)
	require.NoError(t, reg.Hold(ctx, "k", cl.Rev, "registrar"))
	lease := reg.SessionLease()
	require.NotEqual(t, clientv3.NoLease, lease)

	for _, i := range stop {
		require.NoError(t, c.StopMember(i))
	}
	// The session's keepalives go unanswered for longer than its TTL.
	time.Sleep(3 * ttl)
	require.NoError(t, c.RestartMembers(ctx, stop...))
	healed := time.Now()

	// Wait out the old lease (one TTL after the heal, and some), calling
	// nothing on the registrar: the store keeps its session by itself.
	require.NoError(t, eventually(20*time.Second, func() error { _, _, err := r.Members(ctx); return err }))
	time.Sleep(3*ttl - time.Since(healed))
	ms, _, err := r.Members(ctx)
	require.NoError(t, err)
	require.Equal(t, []claims.Member{m}, ms, "the registration survived with its generation")
	require.Equal(t, lease, reg.SessionLease(), "the store took its session lease up again")
	got, created, err := r.CreateOrGet(ctx, "k", to("w"))
	require.NoError(t, err)
	require.False(t, created, "the claim is not stale")
	require.Equal(t, cl, got)
	res, err := r.Close(ctx, "k", cl.Rev, "r")
	require.NoError(t, err)
	require.Equal(t, claims.CloseDeferred, res, "the registrar's hold survived")
}

// A registration another store replaced is not this store's any more: when
// this store's session lease is lost, it does not write its old identity
// back (it would resurrect a worker instance that restarted).
func TestSessionLostKeepsReplacedRegistration(t *testing.T) {
	ctx := testContext(t, 30*time.Second)
	o := newOpener(t, shared, time.Minute)
	a, b := o.open("a"), o.open("b")
	_, err := a.Register(ctx, "w", "1")
	require.NoError(t, err)
	_, err = a.Register(ctx, "v", "1")
	require.NoError(t, err)
	st := subscribe(t, a)
	st.reset(5 * time.Second)
	mb, err := b.Register(ctx, "w", "2") // w restarted, registered by b
	require.NoError(t, err)
	for seen := false; !seen; { // a's stream saw it
		select {
		case ev := <-st.ch:
			seen = ev.Kind == claims.MembersChanged && ev.Key == "w" && ev.Rev == mb.Gen
		case <-time.After(5 * time.Second):
			t.Fatal("a's stream did not see w registered again")
		}
	}
	require.NoError(t, b.Deregister(ctx, "w"))
	_, err = shared.Client().Revoke(ctx, a.SessionLease())
	require.NoError(t, err)
	var ms []claims.Member
	require.NoError(t, eventually(5*time.Second, func() error {
		ms, _, err = a.Members(ctx)
		if err == nil && len(ms) != 1 {
			err = fmt.Errorf("members %+v", ms)
		}
		return err
	}))
	require.Equal(t, "v", ms[0].Worker, "a's own registration of v was written again, not its replaced one of w")
	time.Sleep(200 * time.Millisecond)
	ms, _, err = a.Members(ctx)
	require.NoError(t, err)
	require.Len(t, ms, 1)
}
