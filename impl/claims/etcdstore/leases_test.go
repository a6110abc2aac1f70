package etcdstore

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/placementlab/placement/impl/claims"
)

// claimLeaseOf returns the lease etcd has key's claim on (0: no claim).
func claimLeaseOf(ctx context.Context, t *testing.T, s *handle, key string) clientv3.LeaseID {
	t.Helper()
	resp, err := shared.Client().Get(ctx, s.ClaimKey(key))
	require.NoError(t, err)
	if len(resp.Kvs) == 0 {
		return clientv3.NoLease
	}
	return clientv3.LeaseID(resp.Kvs[0].Lease)
}

// oneTurn makes key's claim, holds and closes it (deleted).
func oneTurn(ctx context.Context, t *testing.T, s *handle, key string) clientv3.LeaseID {
	t.Helper()
	c, created, err := s.CreateOrGet(ctx, key, to("w"))
	require.NoError(t, err)
	require.True(t, created)
	lease := claimLeaseOf(ctx, t, s, key)
	require.NotEqual(t, clientv3.NoLease, lease)
	require.NoError(t, s.Hold(ctx, key, c.Rev, s.Replica()))
	res, err := s.Close(ctx, key, c.Rev, s.Replica())
	require.NoError(t, err)
	require.Equal(t, claims.CloseDeleted, res)
	return lease
}

// A claim deleted by the store's Close leaves its lease to the store's
// next new claim, which still lives IdleTTL; a lease that still holds a
// claim (deferred Close), or too old to give a claim IdleTTL, or gone, is
// not reused.
func TestClaimLeasesReused(t *testing.T) {
	ctx := testContext(t, 30*time.Second)
	const idle = 30 * time.Minute
	o := newOpener(t, shared, idle)
	a, b := o.open("a"), o.open("b")
	_, err := a.Register(ctx, "w", "boot-1")
	require.NoError(t, err)
	window := (idle / leaseSlack).Truncate(time.Second)
	require.Equal(t, window, a.leases.window)

	l1 := oneTurn(ctx, t, a, "k1")
	ttl, err := shared.Client().TimeToLive(ctx, l1)
	require.NoError(t, err)
	require.Equal(t, int64((idle+window)/time.Second), ttl.GrantedTTL, "IdleTTL plus the reuse window")

	c2, _, err := a.CreateOrGet(ctx, "k2", to("w"))
	require.NoError(t, err)
	require.Equal(t, l1, claimLeaseOf(ctx, t, a, "k2"), "the deleted claim's lease is reused")
	ttl, err = shared.Client().TimeToLive(ctx, l1)
	require.NoError(t, err)
	require.GreaterOrEqual(t, ttl.TTL, int64(idle/time.Second), "the reused lease gives the claim IdleTTL")
	_, _, err = b.CreateOrGet(ctx, "k-b", to("w"))
	require.NoError(t, err)
	require.NotEqual(t, l1, claimLeaseOf(ctx, t, b, "k-b"), "another store's claims are on their own leases")

	// A deferred Close leaves the claim (Closing) on its lease: not reused.
	c3, _, err := a.CreateOrGet(ctx, "k3", to("w"))
	require.NoError(t, err)
	l3 := claimLeaseOf(ctx, t, a, "k3")
	require.NotEqual(t, l1, l3, "k2 is on l1")
	require.NoError(t, a.Hold(ctx, "k3", c3.Rev, "a"))
	require.NoError(t, b.Hold(ctx, "k3", c3.Rev, "b"))
	res, err := a.Close(ctx, "k3", c3.Rev, "a")
	require.NoError(t, err)
	require.Equal(t, claims.CloseDeferred, res)
	_, _, err = a.CreateOrGet(ctx, "k4", to("w"))
	require.NoError(t, err)
	require.NotEqual(t, l3, claimLeaseOf(ctx, t, a, "k4"), "the closing claim still holds its lease")

	// A lease granted too long ago to give a new claim IdleTTL is not
	// reused.
	require.NoError(t, a.Hold(ctx, "k2", c2.Rev, "a"))
	res, err = a.Close(ctx, "k2", c2.Rev, "a")
	require.NoError(t, err)
	require.Equal(t, claims.CloseDeleted, res)
	a.leases.mu.Lock()
	require.Contains(t, a.leases.free, l1)
	a.leases.granted[l1] = time.Now().Add(-window)
	a.leases.mu.Unlock()
	_, _, err = a.CreateOrGet(ctx, "k5", to("w"))
	require.NoError(t, err)
	l5 := claimLeaseOf(ctx, t, a, "k5")
	require.NotEqual(t, l1, l5, "an aged lease is not reused")

	// A free lease revoked meanwhile: the claim is written on a new one.
	lr := oneTurn(ctx, t, a, "k6")
	_, err = shared.Client().Revoke(ctx, lr)
	require.NoError(t, err)
	c7, created, err := a.CreateOrGet(ctx, "k7", to("w"))
	require.NoError(t, err)
	require.True(t, created)
	l7 := claimLeaseOf(ctx, t, a, "k7")
	require.NotEqual(t, lr, l7)
	require.NotEqual(t, clientv3.NoLease, l7)
	got, ok, err := b.Get(ctx, "k7")
	require.NoError(t, err)
	require.True(t, ok)
	require.Equal(t, c7.Rev, got.Rev)
}

// Short idle TTLs (a reuse window not beyond the request timeout) keep a
// lease per claim, of IdleTTL.
func TestClaimLeasesNotReusedUnderShortTTL(t *testing.T) {
	ctx := testContext(t, 20*time.Second)
	o := newOpener(t, shared, time.Minute)
	a := o.open("a")
	_, err := a.Register(ctx, "w", "boot-1")
	require.NoError(t, err)
	require.Zero(t, a.leases.window)
	l1 := oneTurn(ctx, t, a, "k1")
	l2 := oneTurn(ctx, t, a, "k2")
	require.NotEqual(t, l1, l2)
	ttl, err := shared.Client().TimeToLive(ctx, l2)
	require.NoError(t, err)
	require.Equal(t, int64(60), ttl.GrantedTTL)
}
