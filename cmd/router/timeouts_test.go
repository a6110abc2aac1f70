package main

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/placementlab/placement/impl/router"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// A worker that answers a session's first turn and hangs on a later one
// (it never sends its headers) must not hold the client forever: the
// router's transport bounds the wait for the headers (its
// ResponseHeaderTimeout, the layer's dispatch timeout by default), and the
// client gets a 504.
func TestLaterTurnHangIsBounded(t *testing.T) {
	hang := make(chan struct{})
	var turns atomic.Int32
	w := httptest.NewServer(http.HandlerFunc(func(rw http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/health" {
			fmt.Fprint(rw, `{"identity":"boot-1"}`)
			return
		}
		if turns.Add(1) > 1 {
			select { // a later turn: hang
			case <-hang:
			case <-r.Context().Done():
			}
			return
		}
		fmt.Fprint(rw, "first turn")
	}))
	defer w.Close()
	defer close(hang)
	o := fast()
	o.dispatchTimeout = 300 * time.Millisecond
	u, _ := url.Parse(w.URL)
	k, err := newKit([]router.HTTPWorker{{ID: "w", URL: u}}, nil, o)
	require.NoError(t, err)
	defer k.Close()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- serveUntil(ctx, k, ln) }()
	defer func() { cancel(); <-done }()

	client := &http.Client{Timeout: 10 * time.Second}
	defer client.CloseIdleConnections()
	for i, want := range []int{http.StatusOK, http.StatusGatewayTimeout} {
		req, _ := http.NewRequest(http.MethodPost, "http://"+ln.Addr().String()+"/v1/completions", strings.NewReader("{}"))
		req.Header.Set("X-Session-ID", "s")
		resp, err := client.Do(req)
		require.NoError(t, err, "turn %d must be answered", i+1)
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		assert.Equal(t, want, resp.StatusCode, "turn %d", i+1)
	}
}
