package router_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"runtime"
	"testing"
	"time"

	"github.com/placementlab/placement/impl/affinity"
	"github.com/placementlab/placement/impl/httpoutcome"
	"github.com/placementlab/placement/impl/router"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestNoGoroutineLeak: a layer on the runtime clock, a health poller
// running, a Proxy serving a request that is accepted, one that is
// refused and one that times out: once the servers, the poller and the
// layer are closed, the goroutine count settles back.
func TestNoGoroutineLeak(t *testing.T) {
	before := runtime.NumGoroutine()
	func() {
		// Long enough that the refused request is answered before it on a loaded machine.
		l, err := affinity.New(affinity.Config{DispatchTimeout: time.Second})
		require.NoError(t, err)
		defer l.Close()
		hang := make(chan struct{})
		defer close(hang)
		up := newUpstreams(t, func(id string, r *http.Request) int {
			switch r.Header.Get("X-Session-ID") {
			case "refused":
				return http.StatusServiceUnavailable
			case "hangs":
				select {
				case <-r.Context().Done():
				case <-hang:
				}
			}
			return 0
		}, "a", "b")
		defer func() {
			for _, s := range up.srvs {
				s.Close()
			}
		}()
		hs := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
			w.Header().Set(router.HeaderIdentity, "boot-1")
		}))
		defer hs.Close()
		tr := &http.Transport{}
		defer tr.CloseIdleConnections()
		h, err := router.NewHealth(router.HealthConfig{Layer: l, Interval: time.Millisecond, Client: &http.Client{Transport: tr},
			Endpoints: []router.Endpoint{{ID: "a", URL: hs.URL}, {ID: "b", URL: hs.URL}}})
		require.NoError(t, err)
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan error, 1)
		go func() { done <- h.Run(ctx) }()
		require.Eventually(t, func() bool { return len(l.Workers()) == 2 }, 5*time.Second, time.Millisecond)

		d := newDriver(t, router.Config{Layer: l})
		srv := httptest.NewServer(&router.Proxy{Driver: d, Upstream: up.url, Client: &httpoutcome.Client{Transport: tr}})
		defer srv.Close()
		for _, s := range []struct {
			session string
			code    int
		}{{"ok", 200}, {"refused", 503}, {"hangs", 504}} {
			resp, _ := post(t, srv.URL, s.session, "x", nil)
			assert.Equal(t, s.code, resp.StatusCode, s.session)
		}
		cancel()
		assert.ErrorIs(t, <-done, context.Canceled)
		http.DefaultClient.CloseIdleConnections()
	}()
	deadline := time.Now().Add(5 * time.Second)
	for runtime.NumGoroutine() > before {
		if time.Now().After(deadline) {
			buf := make([]byte, 1<<16)
			t.Fatalf("goroutine leak: %d before, %d after\n%s", before, runtime.NumGoroutine(), buf[:runtime.Stack(buf, true)])
		}
		time.Sleep(10 * time.Millisecond)
	}
}
