package consumer

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/placementlab/placement/impl/affinity"
	"github.com/placementlab/placement/impl/claims/memstore"
	"github.com/placementlab/placement/impl/placement"
)

// replicaEnv opens one layer per replica name over one in-memory claims
// store, as router replicas share etcd.
func replicaEnvs(t *testing.T, mode affinity.Mode, names ...string) []*env {
	t.Helper()
	b := memstore.NewBackend(memstore.Config{})
	t.Cleanup(func() { _ = b.Close() })
	var envs []*env
	for _, name := range names {
		h := b.Open(name)
		l, err := affinity.New(affinity.Config{Mode: mode, Replicas: &affinity.Replicas{Store: h, Name: name,
			StoreTimeout: 2 * time.Second, StoreRetry: 10 * time.Millisecond}})
		require.NoError(t, err)
		t.Cleanup(func() { _ = l.Close(); _ = h.Shutdown() })
		envs = append(envs, &env{l: l, ns: affinity.Namespace{Model: "llama"}})
	}
	return envs
}

// Layer over a replica, request path: the same request code as over the
// core; a session placed through one replica is bound on another (its
// claim read once there): narrowed to the binding, a hit.
func TestContract_LayerOverReplica_BindingSharedAcrossReplicas(t *testing.T) {
	rs := replicaEnvs(t, affinity.ModeSoft, "r1", "r2")
	for _, e := range rs {
		e.join(t, "a", "boot-1", 0)
		e.join(t, "b", "boot-1", 0)
	}
	req := affinity.Request{Session: rs[0].key(t, "s")}
	s1 := rs[0].ok(t, req, last)
	require.Equal(t, affinity.WorkerOnly("b"), s1.Target)
	assert.NotZero(t, s1.Attempt)

	s2 := rs[1].ok(t, req, first)
	assert.Equal(t, []affinity.Target{affinity.WorkerOnly("b")}, s2.Cands, "narrowed to r1's binding")
	assert.Equal(t, affinity.WorkerOnly("b"), s2.Target)
	assert.True(t, rs[0].ok(t, req, first).Hit, "r1's later turn is a cached hit")
	require.NotNil(t, rs[0].l.Replica(affinity.PhaseDecode), "the layer runs over a replica")
}

// Layer over a replica: a restart (a new identity) joined on one replica
// fences every replica's binding to the worker.
func TestContract_LayerOverReplica_RestartFencesEveryReplica(t *testing.T) {
	rs := replicaEnvs(t, affinity.ModeSoft, "r1", "r2")
	for _, e := range rs {
		e.join(t, "a", "boot-1", 0)
	}
	req := affinity.Request{Session: rs[0].key(t, "s")}
	rs[0].ok(t, req, first)
	// r2's first turn reads the claim and adopts it (that first dispatch on
	// r2 carries an attempt id, as the layer's Replicas section says); its
	// next is a cached hit.
	require.Equal(t, affinity.WorkerOnly("a"), rs[1].ok(t, req, first).Target)
	require.True(t, rs[1].ok(t, req, first).Hit)

	rs[0].join(t, "a", "boot-2", 0)
	assert.Eventually(t, func() bool {
		_, bound := rs[1].l.Query(req.Session, affinity.PhaseDecode)
		return !bound
	}, 5*time.Second, 5*time.Millisecond, "r2's binding is fenced by r1's restart")
}

// Layer over a replica, error values: an ambiguous placing dispatch on
// one replica quarantines the session for every replica (hard mode: a
// *QuarantinedError on the other), and it is settled once from any.
func TestContract_LayerOverReplica_QuarantineSeenEverywhere(t *testing.T) {
	rs := replicaEnvs(t, affinity.ModeHard, "r1", "r2")
	for _, e := range rs {
		e.join(t, "a", "boot-1", 0)
	}
	req := affinity.Request{Session: rs[0].key(t, "s")}
	_, err := rs[0].serveLayer(context.Background(), req, rs[0].candidates(), nil, first, placement.Ambiguous)
	require.ErrorIs(t, err, affinity.ErrOutcomeUnknown)

	_, err = rs[1].serveLayer(context.Background(), req, rs[1].candidates(), nil, first, placement.Accepted)
	assert.ErrorIs(t, err, affinity.ErrQuarantined, "r2 sees r1's quarantine")
	qs := rs[1].l.Quarantined()
	require.Len(t, qs, 1)
	require.NoError(t, rs[1].l.Resolve(qs[0], placement.ResolveNotAccepted))
	assert.Error(t, rs[0].l.Resolve(qs[0], placement.ResolveAccepted), "settled once")
	var s served
	assert.Eventually(t, func() bool {
		s, err = rs[0].serveLayer(context.Background(), req, rs[0].candidates(), nil, first, placement.Accepted)
		return err == nil
	}, 5*time.Second, 5*time.Millisecond, "r1 learns of the settlement from the store's events")
	assert.NotZero(t, s.Attempt, "resolved not accepted: placed anew")
}

// Goroutines over a replica: the layer's, the handle's and the backend's
// background work ends with Close, Shutdown and Close.
func TestContract_Goroutines_ReplicaLayerEndsAtClose(t *testing.T) {
	before := settledGoroutines()
	b := memstore.NewBackend(memstore.Config{})
	h := b.Open("r1")
	l, err := affinity.New(affinity.Config{Replicas: &affinity.Replicas{Store: h, Name: "r1"}})
	require.NoError(t, err)
	_, err = l.Join(affinity.Worker{ID: "a", Identity: "boot-1"})
	require.NoError(t, err)
	require.NoError(t, l.Close())
	require.NoError(t, h.Shutdown())
	require.NoError(t, b.Close())
	assertGoroutinesBack(t, before, "every goroutine has ended after the last Close")
}
