//go:build linux

package router_test

import (
	"net/http"
	"net/http/httptest"
	"net/url"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/placementlab/placement/impl/affinity"
	"github.com/placementlab/placement/impl/httpoutcome"
	"github.com/placementlab/placement/impl/picker"
	"github.com/placementlab/placement/impl/router"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// P9: a worker whose connect hangs (black-holed) was sent nothing: its
// placing dispatch is a refusal, found at the Client's ConnectTimeout, well
// before the dispatch's deadline, and the request goes to another worker;
// no quarantine opens. A later turn on a worker that became black-holed is
// a refusal at ConnectTimeout too (it has no dispatch deadline), and goes
// elsewhere.
func TestProxyBlackHoledWorkerIsRefusal(t *testing.T) {
	const dispatchTimeout = 3 * time.Second
	l, err := affinity.New(affinity.Config{DispatchTimeout: dispatchTimeout})
	require.NoError(t, err)
	defer l.Close()
	for _, id := range []string{"bh", "ok"} {
		_, err := l.Join(affinity.Worker{ID: id, Identity: "boot-1"})
		require.NoError(t, err)
	}
	hole := blackHole(t)
	okSrv := httptest.NewServer(http.HandlerFunc(func(http.ResponseWriter, *http.Request) {}))
	defer okSrv.Close()
	okURL, _ := url.Parse(okSrv.URL)
	var bhURL atomic.Pointer[url.URL]
	bhURL.Store(hole)
	d := newDriver(t, router.Config{Layer: l, Pipeline: &picker.Pipeline{Picker: firstPicker{}},
		Candidates: func(affinity.Phase) []picker.Candidate { // bh first
			return []picker.Candidate{{Target: affinity.WorkerOnly("bh")}, {Target: affinity.WorkerOnly("ok")}}
		}})
	results := make(chan router.Result, 1)
	tr := &http.Transport{} // no dial timeout of its own
	defer tr.CloseIdleConnections()
	srv := httptest.NewServer(&router.Proxy{Driver: d,
		Client: &httpoutcome.Client{Transport: tr, ConnectTimeout: 300 * time.Millisecond},
		Upstream: func(t affinity.Target) *url.URL {
			if t.Worker == "bh" {
				return bhURL.Load()
			}
			return okURL
		},
		Done: func(_ *http.Request, res router.Result, _ error) { results <- res }})
	defer srv.Close()

	start := time.Now()
	resp, _ := post(t, srv.URL, "s1", "{}", nil)
	took := time.Since(start)
	res := <-results
	assert.Equal(t, http.StatusOK, resp.StatusCode, "sent to the other worker")
	assert.Equal(t, []affinity.Target{affinity.WorkerOnly("bh")}, res.Refused)
	assert.Equal(t, affinity.WorkerOnly("ok"), res.Target)
	assert.Empty(t, l.Quarantined(), "nothing was sent: no quarantine")
	assert.Less(t, took, dispatchTimeout, "the connect is bounded apart from the dispatch timeout")

	// A session placed on bh while it answered; then bh is black-holed.
	bhURL.Store(okURL)
	resp, _ = post(t, srv.URL, "s2", "{}", nil)
	require.Equal(t, http.StatusOK, resp.StatusCode)
	require.Equal(t, affinity.WorkerOnly("bh"), (<-results).Target)
	bhURL.Store(hole)
	start = time.Now()
	resp, _ = post(t, srv.URL, "s2", "{}", nil)
	took = time.Since(start)
	res = <-results
	assert.Equal(t, http.StatusOK, resp.StatusCode)
	assert.Equal(t, []affinity.Target{affinity.WorkerOnly("bh")}, res.Refused, "the later turn was refused on bh")
	assert.Equal(t, affinity.WorkerOnly("ok"), res.Target)
	assert.Less(t, took, dispatchTimeout)
	assert.Empty(t, l.Quarantined())
}

// NewHTTP's default connect bound is below the layer's DispatchTimeout
// (half of it here), so with no option set a black-holed worker's placing
// dispatch is a refusal in time, tried elsewhere, with no quarantine.
func TestNewHTTPBlackHoledWorkerDefaults(t *testing.T) {
	const dispatchTimeout = 2 * time.Second
	_, okURL := testWorker(t, func(http.ResponseWriter, *http.Request) {})
	done := make(chan router.Result, 1)
	joined := make(chan struct{})
	var once sync.Once
	r, err := router.NewHTTP(router.HTTPConfig{Layer: affinity.Config{DispatchTimeout: dispatchTimeout},
		Workers: []router.HTTPWorker{{ID: "bh", URL: blackHole(t), Identity: "boot-1"}, {ID: "ok", URL: okURL}},
		Driver: router.Config{Pipeline: &picker.Pipeline{Picker: firstPicker{}},
			Candidates: func(affinity.Phase) []picker.Candidate {
				return []picker.Candidate{{Target: affinity.WorkerOnly("bh")}, {Target: affinity.WorkerOnly("ok")}}
			}},
		// bh's health check hangs too: it is joined by hand, and its
		// failed checks do not fail it here.
		FailAfter: 1000, OnChange: func(c router.Change) {
			if c.Worker == "ok" {
				once.Do(func() { close(joined) })
			}
		},
		Done: func(_ *http.Request, res router.Result, _ error) { done <- res }})
	require.NoError(t, err)
	_, err = r.Layer().Join(affinity.Worker{ID: "bh", Identity: "boot-1"})
	require.NoError(t, err)
	base := serveHTTP(t, r)
	<-joined // Serve's first health pass is over
	start := time.Now()
	resp, _ := post(t, base, "s1", "{}", nil)
	assert.Less(t, time.Since(start), dispatchTimeout)
	assert.Equal(t, http.StatusOK, resp.StatusCode)
	res := <-done // Done runs after the answer is written
	assert.Equal(t, []affinity.Target{affinity.WorkerOnly("bh")}, res.Refused)
	assert.Empty(t, r.Layer().Quarantined())
}
