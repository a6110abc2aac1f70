package etcdstore

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	clientv3 "go.etcd.io/etcd/client/v3"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

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

// lostReplyKV is a client's KV whose next transaction, once armed, is
// committed and its reply lost (the caller gets an unavailable error).
type lostReplyKV struct {
	clientv3.KV
	armed atomic.Bool
}

func (k *lostReplyKV) Txn(ctx context.Context) clientv3.Txn {
	return &lostReplyTxn{Txn: k.KV.Txn(ctx), kv: k}
}

type lostReplyTxn struct {
	clientv3.Txn
	kv *lostReplyKV
}

func (t *lostReplyTxn) If(cs ...clientv3.Cmp) clientv3.Txn   { t.Txn = t.Txn.If(cs...); return t }
func (t *lostReplyTxn) Then(ops ...clientv3.Op) clientv3.Txn { t.Txn = t.Txn.Then(ops...); return t }
func (t *lostReplyTxn) Else(ops ...clientv3.Op) clientv3.Txn { t.Txn = t.Txn.Else(ops...); return t }

func (t *lostReplyTxn) Commit() (*clientv3.TxnResponse, error) {
	resp, err := t.Txn.Commit()
	if err == nil && t.kv.armed.CompareAndSwap(true, false) {
		return nil, status.Error(codes.Unavailable, "injected: the reply was lost")
	}
	return resp, err
}

// The registrations written again on a new session lease survive a try
// whose reply was lost: the store tries again and recognizes its own
// registration on the lease (rather than taking it for another store's
// and forgetting it, or leaving the lease it wrote it on to expire).
func TestReregisterReplyLost(t *testing.T) {
	ctx := testContext(t, 30*time.Second)
	const ttl = 2 * time.Second
	o := newOpener(t, shared, time.Minute, WithSessionTTL(ttl))
	kv := &lostReplyKV{}
	a := o.openWrapped("a", func(cli *clientv3.Client) { kv.KV = cli.KV; cli.KV = kv })
	m1, err := a.Register(ctx, "w", "1")
	require.NoError(t, err)

	kv.armed.Store(true)
	_, err = shared.Client().Revoke(ctx, a.SessionLease())
	require.NoError(t, err)
	member := func() (claims.Member, error) {
		ms, _, err := a.Members(ctx)
		if err == nil && len(ms) != 1 {
			err = fmt.Errorf("members %+v", ms)
		}
		if err != nil {
			return claims.Member{}, err
		}
		return ms[0], nil
	}
	// The registration written again can be read before the wrapper that
	// loses its reply has marked the loss (the write is committed before
	// its Commit returns): wait for both.
	var m2 claims.Member
	require.NoError(t, eventually(5*time.Second, func() (err error) {
		if m2, err = member(); err == nil && kv.armed.Load() {
			err = fmt.Errorf("written again (%+v), the reply not lost yet", m2)
		}
		return err
	}))
	require.False(t, kv.armed.Load(), "the reply of the write was lost")
	require.Equal(t, "1", m2.Identity)
	require.Greater(t, m2.Gen, m1.Gen)
	// Longer than a session TTL later it is still there, on the store's
	// session lease, and the store still owns it: a second lost lease
	// writes it again.
	time.Sleep(2 * ttl)
	m, err := member()
	require.NoError(t, err)
	require.Equal(t, m2, m)
	resp, err := shared.Client().Get(ctx, o.opts.Prefix+"workers/w")
	require.NoError(t, err)
	require.Len(t, resp.Kvs, 1)
	require.Equal(t, int64(a.SessionLease()), resp.Kvs[0].Lease)
	_, err = shared.Client().Revoke(ctx, a.SessionLease())
	require.NoError(t, err)
	require.NoError(t, eventually(5*time.Second, func() error {
		m, err := member()
		if err == nil && m.Gen <= m2.Gen {
			err = fmt.Errorf("not written again yet: %+v", m)
		}
		return err
	}))
}
