package router_test

import (
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/placementlab/placement/impl/affinity"
	"github.com/placementlab/placement/impl/httpoutcome"
	"github.com/placementlab/placement/impl/picker"
	"github.com/placementlab/placement/impl/router"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// seen is what a fake worker received.
type seen struct {
	worker, path, query, body, attempt, rank, session string
}

// upstreams runs fake workers on httptest servers; behave(id, r) returns
// the status a worker answers (0: 200 with a streamed body).
type upstreams struct {
	mu     sync.Mutex
	got    []seen
	srvs   map[string]*httptest.Server
	behave func(id string, r *http.Request) int
}

func newUpstreams(t *testing.T, behave func(string, *http.Request) int, ids ...string) *upstreams {
	t.Helper()
	u := &upstreams{srvs: map[string]*httptest.Server{}, behave: behave}
	for _, id := range ids {
		u.srvs[id] = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			b, _ := io.ReadAll(r.Body)
			u.mu.Lock()
			u.got = append(u.got, seen{worker: id, path: r.URL.Path, query: r.URL.RawQuery, body: string(b),
				attempt: r.Header.Get(httpoutcome.DefaultAttemptHeader), rank: r.Header.Get(router.DefaultRankHeader),
				session: r.Header.Get("X-Session-ID")})
			u.mu.Unlock()
			if code := u.behave(id, r); code != 0 {
				w.WriteHeader(code)
				fmt.Fprintf(w, "status %d from %s", code, id)
				return
			}
			w.Header().Set("X-Served-By", id)
			for i := range 3 {
				fmt.Fprintf(w, "data: %s %d\n\n", id, i)
				w.(http.Flusher).Flush()
			}
		}))
		t.Cleanup(u.srvs[id].Close)
	}
	return u
}

func (u *upstreams) url(t affinity.Target) *url.URL {
	s, ok := u.srvs[t.Worker]
	if !ok {
		return nil
	}
	p, _ := url.Parse(s.URL + "/base")
	return p
}

func (u *upstreams) sent() []seen {
	u.mu.Lock()
	defer u.mu.Unlock()
	return append([]seen(nil), u.got...)
}

func (u *upstreams) reset() {
	u.mu.Lock()
	u.got = nil
	u.mu.Unlock()
}

func post(t *testing.T, base, session, body string, h map[string]string) (*http.Response, string) {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, base+"/v1/completions?stream=1", strings.NewReader(body))
	require.NoError(t, err)
	if session != "" {
		req.Header.Set("X-Session-ID", session)
	}
	for k, v := range h {
		req.Header.Set(k, v)
	}
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	return resp, string(b)
}

// The Proxy end to end: the first turn places the session (the worker
// gets the attempt id and the rank), the second is a hit (no attempt id);
// the path, query, body and session header reach the worker; the client's
// forged attempt and rank headers do not; the body streams back.
func TestProxyEndToEnd(t *testing.T) {
	l := newLayer(t, affinity.Config{}, 2, "a", "b")
	up := newUpstreams(t, func(string, *http.Request) int { return 0 }, "a", "b")
	d := newDriver(t, router.Config{Layer: l})
	var results []router.Result
	var mu sync.Mutex
	p := &router.Proxy{Driver: d, Upstream: up.url,
		Namespace: func(*http.Request) affinity.Namespace { return affinity.Namespace{Model: "m"} },
		Done: func(_ *http.Request, res router.Result, err error) {
			mu.Lock()
			results = append(results, res)
			mu.Unlock()
			assert.NoError(t, err)
		}}
	srv := httptest.NewServer(p)
	defer srv.Close()

	forged := map[string]string{httpoutcome.DefaultAttemptHeader: "666", router.DefaultRankHeader: "9"}
	resp, body := post(t, srv.URL, "conv-1", `{"prompt":"hi"}`, forged)
	require.Equal(t, http.StatusOK, resp.StatusCode)
	got := up.sent()
	require.Len(t, got, 1)
	first := got[0]
	assert.Equal(t, "/base/v1/completions", first.path)
	assert.Equal(t, "stream=1", first.query)
	assert.Equal(t, `{"prompt":"hi"}`, first.body)
	assert.Equal(t, "conv-1", first.session)
	assert.NotEmpty(t, first.attempt)
	assert.NotEqual(t, "666", first.attempt, "a client cannot forge the attempt id")
	assert.Contains(t, []string{"0", "1"}, first.rank)
	assert.Equal(t, fmt.Sprintf("data: %s 0\n\ndata: %s 1\n\ndata: %s 2\n\n", first.worker, first.worker, first.worker), body)
	assert.Equal(t, first.worker, resp.Header.Get("X-Served-By"))

	up.reset()
	resp, _ = post(t, srv.URL, "conv-1", `{"prompt":"again"}`, forged)
	require.Equal(t, http.StatusOK, resp.StatusCode)
	got = up.sent()
	require.Len(t, got, 1)
	assert.Equal(t, first.worker, got[0].worker)
	assert.Equal(t, first.rank, got[0].rank, "the hit goes to the bound rank")
	assert.Empty(t, got[0].attempt, "a later turn carries no attempt id, and the forged one is removed")
	mu.Lock()
	require.Len(t, results, 2)
	assert.True(t, results[0].Placed)
	assert.True(t, results[1].Hit)
	mu.Unlock()
	assert.Equal(t, uint64(1), l.Stats().Hits)
	assertNoneInFlight(t, d, l)
}

// A refusal (503) is retried on another worker with the same body; when
// every worker refuses, the client gets 503 with Retry-After.
func TestProxyRefusalRetriedThenAllRefused(t *testing.T) {
	l := newLayer(t, affinity.Config{}, 0, "a", "b")
	refuse := map[string]bool{"a": true}
	var mu sync.Mutex
	up := newUpstreams(t, func(id string, _ *http.Request) int {
		mu.Lock()
		defer mu.Unlock()
		if refuse[id] {
			return http.StatusServiceUnavailable
		}
		return 0
	}, "a", "b")
	d := newDriver(t, router.Config{Layer: l, Pipeline: &picker.Pipeline{Picker: firstPicker{}}})
	srv := httptest.NewServer(&router.Proxy{Driver: d, Upstream: up.url})
	defer srv.Close()

	resp, body := post(t, srv.URL, "s", "payload", nil)
	assert.Equal(t, http.StatusOK, resp.StatusCode)
	assert.Contains(t, body, "data: b 0")
	got := up.sent()
	require.Len(t, got, 2)
	assert.Equal(t, []string{"a", "b"}, []string{got[0].worker, got[1].worker})
	assert.Equal(t, "payload", got[1].body, "the retry carries the whole body")
	assert.NotEqual(t, got[0].attempt, got[1].attempt, "each dispatch its own attempt id")

	mu.Lock()
	refuse["b"] = true
	mu.Unlock()
	up.reset()
	resp, body = post(t, srv.URL, "other", "payload", nil)
	assert.Equal(t, http.StatusServiceUnavailable, resp.StatusCode)
	assert.Equal(t, "1", resp.Header.Get("Retry-After"))
	assert.NotContains(t, body, "status 503 from", "the refusal's body is not relayed")
	assert.Len(t, up.sent(), 2, "each worker once")
	assertNoneInFlight(t, d, l)
}

// A placing dispatch that hangs past the dispatch deadline is a 504 and is
// not sent again; a worker's own 502 (ambiguous) is relayed as it came.
func TestProxyTimeoutAndAmbiguousAnswer(t *testing.T) {
	l, err := affinity.New(affinity.Config{DispatchTimeout: 300 * time.Millisecond}) // the request reaches the worker in time on a loaded machine
	require.NoError(t, err)
	defer l.Close()
	for _, id := range []string{"slow", "bad"} {
		_, err := l.Join(affinity.Worker{ID: id, Identity: "1"})
		require.NoError(t, err)
	}
	release := make(chan struct{})
	up := newUpstreams(t, func(id string, r *http.Request) int {
		if id == "bad" {
			return http.StatusBadGateway
		}
		select {
		case <-r.Context().Done():
		case <-release:
		}
		return 0
	}, "slow", "bad")
	defer close(release)
	d := newDriver(t, router.Config{Layer: l, Allow: func(w string) bool { return w == "slow" }})
	srv := httptest.NewServer(&router.Proxy{Driver: d, Upstream: up.url})
	defer srv.Close()
	resp, _ := post(t, srv.URL, "s", "x", nil)
	assert.Equal(t, http.StatusGatewayTimeout, resp.StatusCode)
	assert.Len(t, up.sent(), 1, "not replayed")
	assert.Len(t, l.Quarantined(), 1)

	up.reset()
	d2 := newDriver(t, router.Config{Layer: l, Allow: func(w string) bool { return w == "bad" }})
	srv2 := httptest.NewServer(&router.Proxy{Driver: d2, Upstream: up.url})
	defer srv2.Close()
	resp, body := post(t, srv2.URL, "t", "x", nil)
	assert.Equal(t, http.StatusBadGateway, resp.StatusCode)
	assert.Equal(t, "status 502 from bad", body, "the worker's answer is relayed")
	assert.Len(t, up.sent(), 1)
	// The client may read the whole (Content-Length) answer before the
	// handler returns and the driver releases the attempt.
	require.Eventually(t, func() bool { return d.Stats().InFlight == 0 && d2.Stats().InFlight == 0 },
		5*time.Second, time.Millisecond)
	assertNoneInFlight(t, d, l)
	assertNoneInFlight(t, d2, l)
}

// Bad input: an invalid session id is a 400, a body over the limit a 413,
// a Proxy without an Upstream a 500; nothing is sent.
func TestProxyBadInput(t *testing.T) {
	l := newLayer(t, affinity.Config{}, 0, "a")
	up := newUpstreams(t, func(string, *http.Request) int { return 0 }, "a")
	d := newDriver(t, router.Config{Layer: l})
	srv := httptest.NewServer(&router.Proxy{Driver: d, Upstream: up.url, MaxBodyBytes: 8})
	defer srv.Close()
	resp, _ := post(t, srv.URL, "", "x", map[string]string{"X-Session-ID": "has space"})
	assert.Equal(t, http.StatusBadRequest, resp.StatusCode)
	resp, _ = post(t, srv.URL, "s", "123456789", nil)
	assert.Equal(t, http.StatusRequestEntityTooLarge, resp.StatusCode)
	bad := httptest.NewServer(&router.Proxy{Driver: d})
	defer bad.Close()
	resp, _ = post(t, bad.URL, "s", "x", nil)
	assert.Equal(t, http.StatusInternalServerError, resp.StatusCode)
	assert.Empty(t, up.sent())

	// No session id: routed unpinned, served.
	resp, _ = post(t, srv.URL, "", "x", nil)
	assert.Equal(t, http.StatusOK, resp.StatusCode)
	assert.Equal(t, uint64(1), l.Stats().Unpinned[affinity.CauseNoSession])
}
