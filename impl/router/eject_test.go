package router_test

import (
	"context"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/placementlab/placement/impl/affinity"
	"github.com/placementlab/placement/impl/placement"
	"github.com/placementlab/placement/impl/router"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// H8: a worker that just crashed (its port refuses connections) is still a
// member until its health checks fail, and has the fewest sessions (they
// moved away), so the default pipeline sends every new session to it
// first. Passive ejection: after EjectAfter refusals in a row the poller
// fails it at once; it is not picked while ejected; a passing check
// brings it back.
func TestHealthEjectsAfterRefusals(t *testing.T) {
	l := newLayer(t, affinity.Config{}, 0)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	dead := &url.URL{Scheme: "http", Host: ln.Addr().String()}
	require.NoError(t, ln.Close()) // c's port refuses: it crashed
	up := newUpstreams(t, func(string, *http.Request) int { return 0 }, "a", "b")
	hs := map[string]*fakeHealth{}
	var eps []router.Endpoint
	for _, id := range []string{"a", "b", "c"} {
		hs[id] = &fakeHealth{status: 200, identity: "boot-1"}
		s := httptest.NewServer(hs[id])
		t.Cleanup(s.Close)
		eps = append(eps, router.Endpoint{ID: id, URL: s.URL})
	}
	var mu sync.Mutex
	var changes []router.Change
	h, err := router.NewHealth(router.HealthConfig{Layer: l, Endpoints: eps, FailAfter: 3, EjectAfter: 3,
		OnChange: func(c router.Change) {
			mu.Lock()
			changes = append(changes, c)
			mu.Unlock()
		}})
	require.NoError(t, err)
	require.Len(t, h.Pass(context.Background()), 3, "all three join")
	mu.Lock()
	changes = nil
	mu.Unlock()

	var triedC int
	p := &router.Proxy{Driver: newDriver(t, router.Config{Layer: l}), Health: h,
		Upstream: func(t affinity.Target) *url.URL {
			if t.Worker == "c" {
				return dead
			}
			return up.url(t)
		},
		Done: func(_ *http.Request, res router.Result, _ error) {
			for _, r := range res.Refused {
				if r.Worker == "c" {
					triedC++
				}
			}
		}}
	srv := httptest.NewServer(p)
	defer srv.Close()
	for i := range 10 {
		resp, _ := post(t, srv.URL, "s"+string(rune('0'+i)), "{}", nil)
		require.Equal(t, http.StatusOK, resp.StatusCode)
	}
	assert.Equal(t, 3, triedC, "c is tried EjectAfter times, then not picked while ejected")
	assert.Equal(t, affinity.WorkerFailed, workerState(t, l, "c"))
	assert.Equal(t, uint64(1), h.Stats().Ejections)
	mu.Lock()
	assert.Equal(t, []string{"c:ejected"}, kinds(changes))
	mu.Unlock()

	// c's check still passes (its health port answers): the next pass
	// brings it back, a flap (same identity).
	assert.Equal(t, []string{"c:recovered"}, kinds(h.Pass(context.Background())))
	assert.Equal(t, affinity.WorkerUp, workerState(t, l, "c"))
}

func workerState(t *testing.T, l *affinity.Layer, id string) affinity.WorkerState {
	t.Helper()
	for _, w := range l.Workers() {
		if w.ID == id {
			return w.State
		}
	}
	t.Fatalf("%s is not a member", id)
	return 0
}

// H8: a check that began before an ejection does not undo it: only a
// check made after the ejection brings the worker back. Accepted and
// ambiguous outcomes reset the count; a negative EjectAfter never ejects.
func TestHealthEjectionRules(t *testing.T) {
	l := newLayer(t, affinity.Config{}, 0)
	inCheck, release := make(chan struct{}), make(chan struct{})
	var blocking atomic.Bool
	s := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		if blocking.Load() {
			inCheck <- struct{}{}
			<-release
		}
		w.Header().Set(router.HeaderIdentity, "boot-1")
	}))
	defer s.Close()
	h, err := router.NewHealth(router.HealthConfig{Layer: l, Endpoints: []router.Endpoint{{ID: "c", URL: s.URL}}, EjectAfter: 2})
	require.NoError(t, err)
	ctx := context.Background()
	assert.Equal(t, []string{"c:joined"}, kinds(h.Pass(ctx)))

	h.Observe("c", placement.DefinitelyNotAccepted)
	h.Observe("c", placement.Accepted) // resets
	h.Observe("c", placement.DefinitelyNotAccepted)
	h.Observe("c", placement.Ambiguous) // resets
	h.Observe("c", placement.DefinitelyNotAccepted)
	h.Observe("other", placement.DefinitelyNotAccepted) // not watched
	h.Observe("other", placement.DefinitelyNotAccepted)
	assert.Equal(t, affinity.WorkerUp, workerState(t, l, "c"))
	assert.Zero(t, h.Stats().Ejections)

	blocking.Store(true)
	passed := make(chan []router.Change, 1)
	go func() { passed <- h.Pass(ctx) }()
	<-inCheck // the pass's check of c is under way
	h.Observe("c", placement.DefinitelyNotAccepted)
	assert.Equal(t, affinity.WorkerFailed, workerState(t, l, "c"), "two refusals in a row eject")
	close(release)
	assert.Empty(t, kinds(<-passed), "a check begun before the ejection does not undo it")
	assert.Equal(t, affinity.WorkerFailed, workerState(t, l, "c"))
	blocking.Store(false)
	assert.Equal(t, []string{"c:recovered"}, kinds(h.Pass(ctx)))
	assert.Equal(t, uint64(1), h.Stats().Ejections)

	never, err := router.NewHealth(router.HealthConfig{Layer: l, Endpoints: []router.Endpoint{{ID: "c", URL: s.URL}}, EjectAfter: -1})
	require.NoError(t, err)
	for range 10 {
		never.Observe("c", placement.DefinitelyNotAccepted)
	}
	assert.Equal(t, affinity.WorkerUp, workerState(t, l, "c"))
}
