//go:build linux

package httpoutcome_test

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"runtime"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/placementlab/placement/impl/httpoutcome"
	"github.com/placementlab/placement/impl/placement"
	"github.com/placementlab/placement/internal/blackhole"
)

// blackHole returns the URL of a loopback address whose connects hang
// (blackhole.Addr).
func blackHole(t *testing.T) string {
	t.Helper()
	return "http://" + blackhole.Addr(t)
}

// TestConnectTimeoutIsRefusal: a connect that hangs (a black-holed worker)
// on a transport without a dial timeout ends at ConnectTimeout, not
// whenever ctx ends: nothing was sent, DefinitelyNotAccepted, and the error
// says why (ErrConnectTimeout).
func TestConnectTimeoutIsRefusal(t *testing.T) {
	c, _ := newClient(t)
	c.ConnectTimeout = 100 * time.Millisecond
	ctx := ctxTimeout(t, 20*time.Second)
	start := time.Now()
	fe, _ := doFail(t, c, ctx, post(t, blackHole(t), `{}`), placement.DefinitelyNotAccepted)
	assert.Less(t, time.Since(start), 10*time.Second)
	assert.False(t, fe.Written)
	assert.ErrorIs(t, fe, httpoutcome.ErrConnectTimeout)
	assert.NoError(t, ctx.Err(), "the caller's context is not ended")
}

// TestConnectBoundedBeforeDeadline: with the default ConnectTimeout, a
// connect that hangs ends at half the time ctx had left (a placing
// dispatch learns the refusal before its deadline), as a refusal.
func TestConnectBoundedBeforeDeadline(t *testing.T) {
	c, _ := newClient(t)
	ctx := ctxTimeout(t, 2*time.Second)
	fe, _ := doFail(t, c, ctx, post(t, blackHole(t), `{}`), placement.DefinitelyNotAccepted)
	assert.NoError(t, ctx.Err(), "it ended before ctx's deadline")
	assert.ErrorIs(t, fe, httpoutcome.ErrConnectTimeout)
}

// TestConnectTimeoutEndsAtConnection: the bound is on getting a connection
// only: a worker that answers long after ConnectTimeout is Accepted, and a
// RoundTripper that reports no connection (no httptrace) is never cut.
func TestConnectTimeoutEndsAtConnection(t *testing.T) {
	hs := httptest.NewServer(http.HandlerFunc(func(http.ResponseWriter, *http.Request) {
		time.Sleep(300 * time.Millisecond)
	}))
	t.Cleanup(hs.Close)
	srv := hs.URL
	c, _ := newClient(t)
	c.ConnectTimeout = 30 * time.Millisecond
	resp, out, err := c.Do(context.Background(), post(t, srv, `{}`), 0, nil)
	require.NoError(t, err)
	assert.Equal(t, placement.Accepted, out)
	require.NoError(t, resp.Body.Close())

	c.Transport = roundTripFunc(func(r *http.Request) (*http.Response, error) {
		select {
		case <-time.After(300 * time.Millisecond):
			return &http.Response{StatusCode: 200, Body: http.NoBody, Request: r}, nil
		case <-r.Context().Done():
			return nil, errors.New("cut")
		}
	})
	resp, out, err = c.Do(context.Background(), post(t, srv, `{}`), 0, nil)
	require.NoError(t, err)
	assert.Equal(t, placement.Accepted, out)
	require.NoError(t, resp.Body.Close())
}

type roundTripFunc func(*http.Request) (*http.Response, error)

func (f roundTripFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

// TestConnectTimeoutNoGoroutineLeak: the connect bound's timer and
// context are released on every path (a connect cut, a connection got, a
// RoundTripper without httptrace) once the transports are closed.
func TestConnectTimeoutNoGoroutineLeak(t *testing.T) {
	before := runtime.NumGoroutine()
	t.Run("refusal", TestConnectTimeoutIsRefusal)
	t.Run("deadline", TestConnectBoundedBeforeDeadline)
	t.Run("connected", TestConnectTimeoutEndsAtConnection)
	deadline := time.Now().Add(5 * time.Second)
	for runtime.NumGoroutine() > before {
		if time.Now().After(deadline) {
			buf := make([]byte, 1<<16)
			t.Fatalf("goroutine leak: %d before, %d after\n%s", before, runtime.NumGoroutine(), buf[:runtime.Stack(buf, true)])
		}
		time.Sleep(10 * time.Millisecond)
	}
}
