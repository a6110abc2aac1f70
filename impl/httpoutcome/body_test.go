package httpoutcome_test

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/placementlab/placement/impl/httpoutcome"
	"github.com/placementlab/placement/impl/placement"
)

// sseWorker is a worker that streams events: n of them and then the end,
// or, with n < 0, one event and then nothing until the client goes.
// started receives the requests' contexts (the first 16).
func sseWorker(t *testing.T, n int) (*httptest.Server, chan context.Context) {
	t.Helper()
	started := make(chan context.Context, 16)
	s := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		w.Header().Set("Content-Type", "text/event-stream")
		rc := http.NewResponseController(w)
		select {
		case started <- r.Context():
		default: // nobody is watching
		}
		if n < 0 {
			_, _ = io.WriteString(w, "data: 0\n\n")
			_ = rc.Flush()
			<-r.Context().Done()
			return
		}
		for i := 0; i < n; i++ {
			_, _ = fmt.Fprintf(w, "data: %d\n\n", i)
			_ = rc.Flush()
		}
		_, _ = io.WriteString(w, "data: [DONE]\n\n")
	}))
	t.Cleanup(s.Close)
	return s, started
}

// TestReleaseOnce: the release runs exactly once, with the right End,
// whatever the client does with the body.
func TestReleaseOnce(t *testing.T) {
	t.Run("reads-all", func(t *testing.T) {
		s, _ := sseWorker(t, 3)
		c, _ := newClient(t)
		rec := newRecorder()
		resp, out, err := c.Do(context.Background(), post(t, s.URL, `{}`), 1, rec.release)
		require.NoError(t, err)
		assert.Equal(t, placement.Accepted, out)
		b, err := io.ReadAll(resp.Body)
		require.NoError(t, err)
		assert.Equal(t, "data: 0\n\ndata: 1\n\ndata: 2\n\ndata: [DONE]\n\n", string(b))
		assert.Equal(t, 1, rec.count(), "released at io.EOF, before Close")
		require.NoError(t, resp.Body.Close())
		require.NoError(t, resp.Body.Close())
		e := rec.only(t)
		assert.Equal(t, httpoutcome.End{Outcome: placement.Accepted, Kind: httpoutcome.EndComplete, Status: 200, Bytes: int64(len(b))}, e)
		n, err := resp.Body.Read(make([]byte, 4))
		assert.Zero(t, n)
		assert.Equal(t, io.EOF, err)
	})
	t.Run("closes-early", func(t *testing.T) {
		s, started := sseWorker(t, -1)
		c, _ := newClient(t)
		rec := newRecorder()
		resp, _, err := c.Do(context.Background(), post(t, s.URL, `{}`), 1, rec.release)
		require.NoError(t, err)
		wctx := <-started
		_, err = io.ReadFull(resp.Body, make([]byte, 9))
		require.NoError(t, err)
		require.NoError(t, resp.Body.Close())
		e := rec.only(t)
		assert.Equal(t, httpoutcome.EndClosed, e.Kind)
		assert.Equal(t, placement.Accepted, e.Outcome, "the caller stopped: not a cut")
		assert.NoError(t, e.Err)
		<-wctx.Done() // the worker saw the connection go: its stream ends
		_, err = resp.Body.Read(make([]byte, 4))
		assert.ErrorIs(t, err, httpoutcome.ErrBodyClosed)
	})
	t.Run("never-reads-ctx-cancelled", func(t *testing.T) {
		s, started := sseWorker(t, -1)
		c, _ := newClient(t)
		rec := newRecorder()
		ctx, cancel := context.WithCancel(context.Background())
		resp, _, err := c.Do(ctx, post(t, s.URL, `{}`), 1, rec.release)
		require.NoError(t, err)
		wctx := <-started
		cancel()
		<-resp.Ended()
		e := rec.only(t)
		assert.Equal(t, httpoutcome.EndCancelled, e.Kind)
		assert.Equal(t, placement.Accepted, e.Outcome)
		assert.ErrorIs(t, e.Err, context.Canceled)
		<-wctx.Done()
		require.NoError(t, resp.Body.Close())
		assert.Equal(t, 1, rec.count())
	})
	t.Run("deadline-mid-body", func(t *testing.T) {
		s, _ := sseWorker(t, -1)
		c, _ := newClient(t)
		rec := newRecorder()
		resp, _, err := c.Do(ctxTimeout(t, 50*time.Millisecond), post(t, s.URL, `{}`), 1, rec.release)
		require.NoError(t, err)
		_, err = io.ReadAll(resp.Body) // blocks until the deadline
		require.Error(t, err)
		e := rec.only(t)
		assert.Equal(t, httpoutcome.EndTimedOut, e.Kind)
		assert.Equal(t, placement.Ambiguous, e.Outcome, "a timeout after the write")
		assert.ErrorIs(t, e.Err, context.DeadlineExceeded)
		assert.Equal(t, int64(9), e.Bytes)
	})
	t.Run("dispatch-timeout-cause", func(t *testing.T) {
		s, _ := sseWorker(t, -1)
		c, _ := newClient(t)
		rec := newRecorder()
		ctx, cancel := context.WithCancelCause(context.Background())
		resp, _, err := c.Do(ctx, post(t, s.URL, `{}`), 1, rec.release)
		require.NoError(t, err)
		cancel(placement.ErrDispatchTimeout)
		<-resp.Ended()
		e := rec.only(t)
		assert.Equal(t, httpoutcome.EndTimedOut, e.Kind)
		assert.Equal(t, placement.Ambiguous, e.Outcome)
		assert.ErrorIs(t, e.Err, placement.ErrDispatchTimeout)
		require.NoError(t, resp.Body.Close())
	})
	t.Run("content-length-read-then-close", func(t *testing.T) {
		s := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Length", "5")
			_, _ = io.WriteString(w, "hello")
		}))
		t.Cleanup(s.Close)
		c, _ := newClient(t)
		rec := newRecorder()
		resp, _, err := c.Do(context.Background(), post(t, s.URL, `{}`), 1, rec.release)
		require.NoError(t, err)
		_, err = io.ReadFull(resp.Body, make([]byte, 5))
		require.NoError(t, err)
		require.NoError(t, resp.Body.Close())
		assert.Equal(t, httpoutcome.EndComplete, rec.only(t).Kind, "all of its Content-Length was read")
	})
	t.Run("no-body", func(t *testing.T) {
		s := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			w.WriteHeader(http.StatusNoContent)
		}))
		t.Cleanup(s.Close)
		c, _ := newClient(t)
		rec := newRecorder()
		resp, _, err := c.Do(context.Background(), post(t, s.URL, `{}`), 1, rec.release)
		require.NoError(t, err)
		require.NoError(t, resp.Body.Close())
		assert.Equal(t, httpoutcome.EndComplete, rec.only(t).Kind)
	})
	t.Run("nil-release", func(t *testing.T) {
		s, _ := sseWorker(t, 1)
		c, _ := newClient(t)
		resp, _, err := c.Do(context.Background(), post(t, s.URL, `{}`), 1, nil)
		require.NoError(t, err)
		_, err = io.ReadAll(resp.Body)
		require.NoError(t, err)
		require.NoError(t, resp.Body.Close())
		e, ok := resp.End()
		assert.True(t, ok)
		assert.Equal(t, httpoutcome.EndComplete, e.Kind)
	})
}

// TestReleaseOnceConcurrent: concurrent Close calls, a concurrent reader
// and a concurrent ctx cancel end the body once; every Close returns only
// after the release has returned. Run under -race.
func TestReleaseOnceConcurrent(t *testing.T) {
	s, _ := sseWorker(t, -1)
	c, _ := newClient(t)
	for round := 0; round < 20; round++ {
		var released atomic.Int32
		var releaseDone atomic.Bool
		ctx, cancel := context.WithCancel(context.Background())
		resp, _, err := c.Do(ctx, post(t, s.URL, `{}`), 1, func(httpoutcome.End) {
			released.Add(1)
			releaseDone.Store(true)
		})
		require.NoError(t, err)
		var wg sync.WaitGroup
		start := make(chan struct{})
		for i := 0; i < 4; i++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				<-start
				_ = resp.Body.Close()
				assert.True(t, releaseDone.Load(), "Close returned before the release did")
			}()
		}
		wg.Add(2)
		go func() {
			defer wg.Done()
			<-start
			_, _ = io.Copy(io.Discard, resp.Body)
			assert.True(t, releaseDone.Load(), "a read ended before the release did")
		}()
		go func() {
			defer wg.Done()
			<-start
			cancel()
		}()
		close(start)
		wg.Wait()
		<-resp.Ended()
		assert.Equal(t, int32(1), released.Load())
	}
}
