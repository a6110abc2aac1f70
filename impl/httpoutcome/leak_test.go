package httpoutcome_test

import (
	"context"
	"io"
	"net/http"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// TestNoGoroutineLeak: after the fault tests' scenarios (a hang, a body
// never read whose ctx ends, a downstream client that goes away, a body
// closed early, a refused dial) with their servers and transports closed,
// the goroutine count settles back.
func TestNoGoroutineLeak(t *testing.T) {
	before := runtime.NumGoroutine()
	t.Run("scenarios", func(t *testing.T) {
		t.Run("hang", TestFaultHangAfterWrite)
		t.Run("reset", TestFaultResetAfterRead)
		t.Run("cut", TestFaultCutMidBody)
		t.Run("release", TestReleaseOnce)
		t.Run("relay-gone", TestRelayDownstreamGone)
		t.Run("refused", TestFaultRefused)
		t.Run("never-closed-ctx-ends", func(t *testing.T) {
			s, _ := sseWorker(t, -1)
			c, _ := newClient(t)
			ctx, cancel := context.WithCancel(context.Background())
			resp, _, err := c.Do(ctx, post(t, s.URL, `{}`), 1, nil)
			require.NoError(t, err)
			cancel() // the body is never read nor closed by the caller
			<-resp.Ended()
		})
		t.Run("relay-client-gone", func(t *testing.T) {
			s, _ := sseWorker(t, -1)
			c, _ := newClient(t)
			relayed := make(chan error, 1)
			f := front(t, c, s.URL, newRecorder(), relayed)
			ctx, cancel := context.WithCancel(context.Background())
			req, _ := http.NewRequestWithContext(ctx, http.MethodPost, f.URL, strings.NewReader("{}"))
			tr := &http.Transport{}
			defer tr.CloseIdleConnections()
			resp, err := tr.RoundTrip(req)
			require.NoError(t, err)
			_, _ = io.ReadFull(resp.Body, make([]byte, 9))
			cancel()
			_ = resp.Body.Close()
			<-relayed
		})
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
