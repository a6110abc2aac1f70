package router_test

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/placementlab/placement/impl/affinity"
	"github.com/placementlab/placement/impl/placement"
	"github.com/placementlab/placement/impl/router"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// workerAt runs one loopback worker and returns its Upstream function.
func workerAt(t *testing.T, h http.HandlerFunc) func(affinity.Target) *url.URL {
	t.Helper()
	s := httptest.NewServer(h)
	t.Cleanup(s.Close)
	u, err := url.Parse(s.URL)
	require.NoError(t, err)
	return func(affinity.Target) *url.URL { return u }
}

// P5: a worker whose chunked stream is cut after its headers (it closes
// the connection without the terminating chunk) must not reach the client
// as a clean, complete 200: the Proxy aborts the response, so the client's
// read fails, and counts the cut.
func TestProxyCutStreamAborts(t *testing.T) {
	l := newLayer(t, affinity.Config{}, 0, "a")
	upstream := workerAt(t, func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		fmt.Fprint(w, "data: 1\n\n")
		w.(http.Flusher).Flush()
		panic(http.ErrAbortHandler) // closes the connection mid-stream
	})
	var mu sync.Mutex
	var errs []error
	p := &router.Proxy{Driver: newDriver(t, router.Config{Layer: l}), Upstream: upstream,
		Done: func(_ *http.Request, _ router.Result, err error) {
			mu.Lock()
			errs = append(errs, err)
			mu.Unlock()
		}}
	srv := httptest.NewServer(p)
	defer srv.Close()

	resp, err := http.Post(srv.URL+"/v1/completions", "application/json", strings.NewReader("{}"))
	require.NoError(t, err)
	defer resp.Body.Close()
	assert.Equal(t, http.StatusOK, resp.StatusCode)
	b, err := io.ReadAll(resp.Body)
	assert.Equal(t, "data: 1\n\n", string(b), "what came before the cut is relayed")
	require.ErrorIs(t, err, io.ErrUnexpectedEOF, "the client must see the truncation")
	require.Eventually(t, func() bool { return p.Stats().Cut == 1 }, 5*time.Second, time.Millisecond)
	mu.Lock()
	defer mu.Unlock()
	require.Len(t, errs, 1)
	assert.ErrorIs(t, errs[0], router.ErrRelay)
}

// P6: headers the client's Connection header names are hop-by-hop (RFC
// 9110 section 7.6.1): they do not reach the worker; others do.
func TestProxyConnectionNamedHeadersNotForwarded(t *testing.T) {
	l := newLayer(t, affinity.Config{}, 0, "a")
	got := make(chan http.Header, 1)
	upstream := workerAt(t, func(w http.ResponseWriter, r *http.Request) {
		got <- r.Header.Clone()
	})
	srv := httptest.NewServer(&router.Proxy{Driver: newDriver(t, router.Config{Layer: l}), Upstream: upstream})
	defer srv.Close()
	resp, _ := post(t, srv.URL, "s1", "{}", map[string]string{
		"Connection": "keep-alive, X-Hop-One,x-hop-two", "X-Hop-One": "1", "X-Hop-Two": "2", "X-End-To-End": "3"})
	assert.Equal(t, http.StatusOK, resp.StatusCode)
	h := <-got
	assert.Empty(t, h.Values("X-Hop-One"))
	assert.Empty(t, h.Values("X-Hop-Two"))
	assert.Equal(t, "3", h.Get("X-End-To-End"))
}

// P7: an escaped path reaches the worker as it came: %2F stays %2F.
func TestProxyEscapedPathKept(t *testing.T) {
	l := newLayer(t, affinity.Config{}, 0, "a")
	got := make(chan string, 2)
	s := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		got <- r.RequestURI
	}))
	defer s.Close()
	for _, c := range []struct{ base, path, want string }{
		{s.URL + "/base", "/v1/models/org%2Fmodel?x=%2F", "/base/v1/models/org%2Fmodel?x=%2F"},
		{s.URL + "/b%2Fase/", "/v1/plain", "/b%2Fase/v1/plain"},
	} {
		u, err := url.Parse(c.base)
		require.NoError(t, err)
		srv := httptest.NewServer(&router.Proxy{Driver: newDriver(t, router.Config{Layer: l}),
			Upstream: func(affinity.Target) *url.URL { return u }})
		resp, err := http.Get(srv.URL + c.path)
		require.NoError(t, err)
		resp.Body.Close()
		srv.Close()
		assert.Equal(t, http.StatusOK, resp.StatusCode)
		assert.Equal(t, c.want, <-got)
	}
}

// P8: a request body trickled slower than BodyReadTimeout allows is cut:
// the client gets 408 and the worker nothing, instead of the handler
// waiting as long as the client likes.
func TestProxyBodyReadTimeout(t *testing.T) {
	l := newLayer(t, affinity.Config{}, 0, "a")
	var sent atomic.Int32
	upstream := workerAt(t, func(http.ResponseWriter, *http.Request) { sent.Add(1) })
	srv := httptest.NewServer(&router.Proxy{Driver: newDriver(t, router.Config{Layer: l}), Upstream: upstream,
		BodyReadTimeout: 200 * time.Millisecond})
	defer srv.Close()
	conn, err := net.Dial("tcp", srv.Listener.Addr().String())
	require.NoError(t, err)
	defer conn.Close()
	// One byte of a 100-byte body, then nothing: the client trickles.
	_, err = fmt.Fprint(conn, "POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Length: 100\r\n\r\n{")
	require.NoError(t, err)
	require.NoError(t, conn.SetReadDeadline(time.Now().Add(10*time.Second)))
	resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
	require.NoError(t, err, "the router must answer before the client finishes its body")
	resp.Body.Close()
	assert.Equal(t, http.StatusRequestTimeout, resp.StatusCode)
	assert.Zero(t, sent.Load(), "nothing reaches a worker")
}

// A Proxy without a Client of its own still bounds a later turn's wait
// for the worker's headers (a worker that hangs is a 504 after the
// default dispatch timeout, not a client held forever) and its idle
// connections.
func TestProxyDefaultClientBounds(t *testing.T) {
	c := router.DefaultProxyClient()
	require.Same(t, c, router.DefaultProxyClient(), "one transport, shared")
	tr, ok := c.Transport.(*http.Transport)
	require.True(t, ok)
	assert.Equal(t, placement.DefaultDispatchTimeout, tr.ResponseHeaderTimeout)
	assert.Equal(t, router.DefaultIdleConnTimeout, tr.IdleConnTimeout)
	assert.NotSame(t, http.DefaultTransport, tr)
}
