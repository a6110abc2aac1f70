package router_test

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"runtime"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/placementlab/placement/impl/affinity"
	"github.com/placementlab/placement/impl/router"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// testWorker is a worker on loopback with a health check at /health;
// answer serves everything else.
func testWorker(t *testing.T, answer http.HandlerFunc) (*httptest.Server, *url.URL) {
	t.Helper()
	s := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/health" {
			fmt.Fprint(w, `{"identity":"boot-1"}`)
			return
		}
		answer(w, r)
	}))
	t.Cleanup(s.Close)
	u, err := url.Parse(s.URL)
	require.NoError(t, err)
	return s, u
}

// serveHTTP serves r on a loopback listener until the test ends (then it
// stops Serve and closes r) and returns its base URL.
func serveHTTP(t *testing.T, r *router.HTTP) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- r.Serve(ctx, ln, nil) }()
	t.Cleanup(func() {
		cancel()
		assert.NoError(t, <-done)
		assert.NoError(t, r.Close())
	})
	return "http://" + ln.Addr().String()
}

// NewHTTP's defaults bound a later turn's wait for the worker's headers
// (the transport's ResponseHeaderTimeout is the layer's DispatchTimeout):
// a worker that hangs on it is a 504, not a client held forever.
func TestNewHTTPLaterTurnHangIsBounded(t *testing.T) {
	hang := make(chan struct{})
	var turns atomic.Int32
	_, u := testWorker(t, func(w http.ResponseWriter, r *http.Request) {
		if turns.Add(1) > 1 {
			select {
			case <-hang:
			case <-r.Context().Done():
			}
			return
		}
		fmt.Fprint(w, "first turn")
	})
	defer close(hang)
	r, err := router.NewHTTP(router.HTTPConfig{Layer: affinity.Config{DispatchTimeout: 300 * time.Millisecond},
		Workers: []router.HTTPWorker{{ID: "w", URL: u}}})
	require.NoError(t, err)
	base := serveHTTP(t, r)
	client := &http.Client{Timeout: 10 * time.Second}
	defer client.CloseIdleConnections()
	for i, want := range []int{http.StatusOK, http.StatusGatewayTimeout} {
		req, _ := http.NewRequest(http.MethodPost, base+"/v1/completions", strings.NewReader("{}"))
		req.Header.Set("X-Session-ID", "s")
		resp, err := client.Do(req)
		require.NoError(t, err, "turn %d must be answered", i+1)
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		assert.Equal(t, want, resp.StatusCode, "turn %d", i+1)
	}
	key, err := affinity.Namespace{}.Session("s")
	require.NoError(t, err)
	bound, ok := r.Layer().Query(key, affinity.PhaseDecode)
	assert.True(t, ok, "the binding is kept")
	assert.Equal(t, "w", bound.Worker)
}

// NewHTTP's server bounds a client's headers (ReadHeaderTimeout) and its
// body (the Proxy's BodyReadTimeout): a client that trickles either is
// cut, and nothing reaches a worker.
func TestNewHTTPReadTimeouts(t *testing.T) {
	var sent atomic.Int32
	_, u := testWorker(t, func(http.ResponseWriter, *http.Request) { sent.Add(1) })
	r, err := router.NewHTTP(router.HTTPConfig{Workers: []router.HTTPWorker{{ID: "w", URL: u}},
		ReadHeaderTimeout: 200 * time.Millisecond, BodyReadTimeout: 200 * time.Millisecond})
	require.NoError(t, err)
	addr := strings.TrimPrefix(serveHTTP(t, r), "http://")

	for _, c := range []struct{ name, send string }{
		{"headers", "POST /v1/completions HTTP/1.1\r\nHost: x\r\n"},
		{"body", "POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Length: 100\r\n\r\n{"},
	} {
		conn, err := net.Dial("tcp", addr)
		require.NoError(t, err)
		_, err = fmt.Fprint(conn, c.send)
		require.NoError(t, err)
		require.NoError(t, conn.SetReadDeadline(time.Now().Add(10*time.Second)))
		got, err := io.ReadAll(bufio.NewReader(conn)) // until the router closes the connection
		conn.Close()
		require.NoError(t, err, "%s: the router must close the connection", c.name)
		if c.name == "body" {
			assert.Contains(t, string(got), "408", c.name)
		}
	}
	assert.Zero(t, sent.Load())
}

// NewHTTP refuses bad input with ErrInvalidConfig.
func TestNewHTTPBadConfig(t *testing.T) {
	u, _ := url.Parse("http://127.0.0.1:1")
	for _, cfg := range []router.HTTPConfig{
		{Workers: []router.HTTPWorker{{ID: "", URL: u}}},
		{Workers: []router.HTTPWorker{{ID: "a"}}},
		{Workers: []router.HTTPWorker{{ID: "a", URL: &url.URL{Path: "/x"}}}},
		{Workers: []router.HTTPWorker{{ID: "a", URL: u}, {ID: "a", URL: u}}},
		{Interval: -1},
		{ConnectTimeout: -time.Second},
		{Driver: router.Config{MaxAttempts: -1}},
	} {
		_, err := router.NewHTTP(cfg)
		assert.ErrorIs(t, err, router.ErrInvalidConfig, "%+v", cfg)
	}
}

// TestNewHTTPNoGoroutineLeak: a router served, with a request served and
// one whose worker hangs past the dispatch deadline (a quarantine the
// resolver asks about), stopped and closed, leaves no goroutine.
func TestNewHTTPNoGoroutineLeak(t *testing.T) {
	before := runtime.NumGoroutine()
	t.Run("serve", func(t *testing.T) {
		hang := make(chan struct{})
		_, u := testWorker(t, func(w http.ResponseWriter, r *http.Request) {
			if r.Header.Get("X-Session-ID") == "hangs" {
				select {
				case <-hang:
				case <-r.Context().Done():
				}
			}
			fmt.Fprint(w, "ok")
		})
		defer close(hang)
		r, err := router.NewHTTP(router.HTTPConfig{Layer: affinity.Config{DispatchTimeout: 200 * time.Millisecond},
			Workers: []router.HTTPWorker{{ID: "w", URL: u}}, Interval: 10 * time.Millisecond})
		require.NoError(t, err)
		base := serveHTTP(t, r)
		for _, s := range []struct {
			session string
			code    int
		}{{"ok", 200}, {"hangs", 504}} {
			resp, _ := post(t, base, s.session, "x", nil)
			assert.Equal(t, s.code, resp.StatusCode, s.session)
		}
		http.DefaultClient.CloseIdleConnections()
	})
	deadline := time.Now().Add(5 * time.Second)
	for runtime.NumGoroutine() > before {
		if time.Now().After(deadline) {
			buf := make([]byte, 1<<16)
			t.Fatalf("goroutine leak: %d before, %d after\n%s", before, runtime.NumGoroutine(), buf[:runtime.Stack(buf, true)])
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// A whole HTTP router in one constructor: the layer, the driver, the
// Proxy (over a transport with connect, header and body bounds), the
// health poller with passive ejection and the quarantine resolver; Serve
// runs them until its context ends, then Close. Here one worker on
// loopback and two turns of one session.
func ExampleNewHTTP() {
	worker := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/health" {
			fmt.Fprint(w, `{"identity":"boot-1"}`) // its health check
			return
		}
		fmt.Fprintf(w, "hello from the worker (placing dispatch: %v)\n", r.Header.Get("X-Placement-Attempt") != "")
	}))
	defer worker.Close()
	base, _ := url.Parse(worker.URL)
	r, err := router.NewHTTP(router.HTTPConfig{
		Workers:   []router.HTTPWorker{{ID: "w1", URL: base}},
		Namespace: func(*http.Request) affinity.Namespace { return affinity.Namespace{Model: "llama"} },
	})
	if err != nil {
		panic(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		panic(err)
	}
	ctx, stop := context.WithCancel(context.Background())
	served := make(chan error, 1)
	go func() { served <- r.Serve(ctx, ln, nil) }()

	for range 2 {
		req, _ := http.NewRequest(http.MethodPost, "http://"+ln.Addr().String()+"/v1/chat/completions", strings.NewReader(`{}`))
		req.Header.Set("X-Session-ID", "conversation-7")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			panic(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		fmt.Print(resp.Status, ": ", string(body))
	}
	fmt.Println("hits:", r.Layer().Stats().Hits)
	stop()
	fmt.Println("serve:", <-served, "close:", r.Close())
	// Output:
	// 200 OK: hello from the worker (placing dispatch: true)
	// 200 OK: hello from the worker (placing dispatch: false)
	// hits: 1
	// serve: <nil> close: <nil>
}
