package router_test

import (
	"context"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/placementlab/placement/impl/affinity"
	"github.com/placementlab/placement/impl/claims/memstore"
	"github.com/placementlab/placement/impl/router"
)

// Over replicas, a worker's registration lives with the store session
// that wrote it: when its registrar (here another replica) stops, the
// worker drops out of the store, and the next health pass of a replica
// that still has it up registers it again, so it is dispatched to again.
func TestHealthRegistersAgainOverReplicas(t *testing.T) {
	b := memstore.NewBackend(memstore.Config{})
	defer b.Close()
	layer := func(name string) (*affinity.Layer, func()) {
		h := b.Open(name)
		l, err := affinity.New(affinity.Config{Replicas: &affinity.Replicas{Store: h, Name: name,
			StoreTimeout: 2 * time.Second, StoreRetry: 10 * time.Millisecond}})
		require.NoError(t, err)
		return l, func() { _ = l.Close(); _ = h.Shutdown() }
	}
	l1, stop1 := layer("r1")
	l2, stop2 := layer("r2")
	defer stop2()
	w := &fakeHealth{status: 200, identity: "boot-1"}
	sw := httptest.NewServer(w)
	defer sw.Close()
	eps := []router.Endpoint{{ID: "w", URL: sw.URL}}
	h1, err := router.NewHealth(router.HealthConfig{Layer: l1, Endpoints: eps})
	require.NoError(t, err)
	h2, err := router.NewHealth(router.HealthConfig{Layer: l2, Endpoints: eps})
	require.NoError(t, err)
	ctx := context.Background()
	assert.Equal(t, []string{"w:joined"}, kinds(h1.Pass(ctx))) // r1 registers w first
	assert.Equal(t, []string{"w:joined"}, kinds(h2.Pass(ctx))) // r2's Join changes nothing
	assert.True(t, l2.Registered("w"))
	assert.Empty(t, h2.Pass(ctx), "nothing changed")

	stop1() // r1's session ends, and with it w's registration
	require.Eventually(t, func() bool { return !l2.Registered("w") }, 5*time.Second, time.Millisecond)
	assert.Equal(t, []string{"w:recovered"}, kinds(h2.Pass(ctx)), "the pass registers w again")
	assert.True(t, l2.Registered("w"))
	ns := affinity.Namespace{Model: "m"}
	k, err := ns.Session("s")
	require.NoError(t, err)
	tr, err := l2.Start(ctx, affinity.Request{Session: k})
	require.NoError(t, err)
	defer tr.Done()
	_, err = tr.Dispatch(affinity.Ranked("w", 1))
	require.NoError(t, err, "w is dispatched to again")
}
