package consumer

import (
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/placementlab/placement/impl/affinity"
	"github.com/placementlab/placement/impl/router"
)

// loopbackWorker is a real HTTP worker on a loopback port: it answers with
// its status (200 unless set) and records the placement headers of every
// request it got.
type loopbackWorker struct {
	id  string
	srv *httptest.Server

	mu       sync.Mutex
	status   int
	attempts []string // X-Placement-Attempt of each request
	ranks    []string // X-Data-Parallel-Rank of each request
}

func newLoopbackWorker(t *testing.T, id string) *loopbackWorker {
	w := &loopbackWorker{id: id, status: http.StatusOK}
	w.srv = httptest.NewServer(http.HandlerFunc(func(rw http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		w.mu.Lock()
		w.attempts = append(w.attempts, r.Header.Get("X-Placement-Attempt"))
		w.ranks = append(w.ranks, r.Header.Get(router.DefaultRankHeader))
		status := w.status
		w.mu.Unlock()
		rw.WriteHeader(status)
		fmt.Fprintf(rw, "%s %s", id, r.URL.Path)
	}))
	t.Cleanup(w.srv.Close)
	return w
}

func (w *loopbackWorker) setStatus(s int) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.status = s
}

func (w *loopbackWorker) got() (attempts, ranks []string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return append([]string(nil), w.attempts...), append([]string(nil), w.ranks...)
}

// kit is the router kit as a router composes it: a layer, a driver, and
// the Proxy in front of loopback workers.
type kit struct {
	layer   *affinity.Layer
	proxy   *router.Proxy
	srv     *httptest.Server
	workers map[string]*loopbackWorker
}

func newKit(t *testing.T, cfg affinity.Config, ranks int, ids ...string) *kit {
	t.Helper()
	layer, err := affinity.New(cfg)
	require.NoError(t, err)
	t.Cleanup(func() { _ = layer.Close() })
	k := &kit{layer: layer, workers: map[string]*loopbackWorker{}}
	for _, id := range ids {
		k.workers[id] = newLoopbackWorker(t, id)
		_, err := layer.Join(affinity.Worker{ID: id, Identity: "boot-1", Ranks: ranks})
		require.NoError(t, err)
	}
	d, err := router.New(router.Config{Layer: layer})
	require.NoError(t, err)
	k.proxy = &router.Proxy{Driver: d,
		Namespace: func(*http.Request) affinity.Namespace { return affinity.Namespace{Model: "llama"} },
		Upstream: func(tg affinity.Target) *url.URL {
			u, err := url.Parse(k.workers[tg.Worker].srv.URL)
			if err != nil {
				panic(err)
			}
			return u
		}}
	k.srv = httptest.NewServer(k.proxy)
	t.Cleanup(k.srv.Close)
	return k
}

func (k *kit) post(t *testing.T, session string, hdr ...string) (int, string) {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, k.srv.URL+"/v1/chat/completions", strings.NewReader(`{"messages":[]}`))
	require.NoError(t, err)
	if session != "" {
		req.Header.Set("X-Session-ID", session)
	}
	for i := 0; i+1 < len(hdr); i += 2 {
		req.Header.Set(hdr[i], hdr[i+1])
	}
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	return resp.StatusCode, string(body)
}

// Router kit, Proxy: a session's turns go to one loopback worker (and one
// data-parallel rank); only the placing dispatch carries an attempt id,
// and a client's own attempt header never reaches a worker.
func TestContract_RouterKitProxy_SessionStaysOnWorker(t *testing.T) {
	k := newKit(t, affinity.Config{}, 2, "a", "b")
	code, body := k.post(t, "conversation-1", "X-Placement-Attempt", "999")
	require.Equal(t, http.StatusOK, code)
	worker := strings.Fields(body)[0]
	assert.Equal(t, "/v1/chat/completions", strings.Fields(body)[1], "the path is forwarded")
	for range 4 {
		code, body = k.post(t, "conversation-1", "X-Placement-Attempt", "999")
		require.Equal(t, http.StatusOK, code)
		assert.Equal(t, worker, strings.Fields(body)[0], "later turns stay on the bound worker")
	}
	attempts, ranks := k.workers[worker].got()
	require.Len(t, attempts, 5)
	assert.NotEmpty(t, attempts[0], "the placing dispatch carries its attempt id")
	assert.NotEqual(t, "999", attempts[0], "the client's own attempt header is replaced")
	for i := 1; i < 5; i++ {
		assert.Empty(t, attempts[i], "a later turn carries no attempt id")
		assert.Equal(t, ranks[0], ranks[i], "and goes to the same rank")
	}
	assert.NotEmpty(t, ranks[0], "the rank header names the bound rank")
	assert.Equal(t, uint64(4), k.layer.Stats().Hits)
}

// Router kit, Proxy: a worker's refusal (503 before any body) is retried
// on another worker and the session binds there; the client sees 200.
func TestContract_RouterKitProxy_RefusalRetriedElsewhere(t *testing.T) {
	k := newKit(t, affinity.Config{}, 0, "a", "b")
	k.workers["a"].setStatus(http.StatusServiceUnavailable)
	k.workers["b"].setStatus(http.StatusServiceUnavailable)
	code, _ := k.post(t, "s")
	assert.Equal(t, http.StatusServiceUnavailable, code, "every worker refused: 503")

	k.workers["b"].setStatus(http.StatusOK)
	for range 3 {
		code, body := k.post(t, "s2")
		require.Equal(t, http.StatusOK, code)
		assert.True(t, strings.HasPrefix(body, "b "), body)
	}
	got, ok := k.layer.Query(mustKey(t, affinity.Namespace{Model: "llama"}, "s2"), affinity.PhaseDecode)
	require.True(t, ok)
	assert.Equal(t, "b", got.Worker)
}

// Router kit, Proxy, error values: an ambiguous answer (504 from the
// worker) is never replayed: the client gets 504 and the worker saw one
// request.
func TestContract_RouterKitProxy_UnknownOutcomeNotReplayed(t *testing.T) {
	k := newKit(t, affinity.Config{}, 0, "a")
	k.workers["a"].setStatus(http.StatusGatewayTimeout)
	code, _ := k.post(t, "s")
	assert.Equal(t, http.StatusGatewayTimeout, code)
	attempts, _ := k.workers["a"].got()
	assert.Len(t, attempts, 1, "not replayed")
	assert.Len(t, k.layer.Quarantined(), 1, "the session is quarantined until resolved")
}

// Router kit, Proxy: a request without a session id is routed unpinned,
// never an error; a bad session id is a 400 and reaches no worker.
func TestContract_RouterKitProxy_SessionHeaders(t *testing.T) {
	k := newKit(t, affinity.Config{}, 0, "a")
	code, _ := k.post(t, "")
	assert.Equal(t, http.StatusOK, code)
	code, _ = k.post(t, "has space")
	assert.Equal(t, http.StatusBadRequest, code)
	attempts, _ := k.workers["a"].got()
	assert.Len(t, attempts, 1)
	assert.Equal(t, uint64(1), k.layer.Stats().Unpinned[affinity.CauseNoSession])
}

func mustKey(t *testing.T, ns affinity.Namespace, id string) affinity.Key {
	t.Helper()
	k, err := ns.Session(id)
	require.NoError(t, err)
	return k
}
