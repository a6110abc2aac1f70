package httpoutcome_test

import (
	"bufio"
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/placementlab/placement/impl/affinity"
	"github.com/placementlab/placement/impl/httpoutcome"
	"github.com/placementlab/placement/impl/placement"
)

// TestLayerErrorsOverTCP: the affinity layer's own errors from a real
// fault. A worker that reads the placing request and hangs: Do reports
// Ambiguous, Complete returns an *UnknownOutcomeError (504, no
// Retry-After), and in hard mode the session's next request gets a
// *QuarantinedError (503, Retry-After the quarantine's remaining time).
// The worker saw the attempt id.
func TestLayerErrorsOverTCP(t *testing.T) {
	attempts := make(chan string, 1)
	s := newRawServer(t, func(c net.Conn, br *bufio.Reader) {
		req, err := readRequest(br)
		if err != nil {
			return
		}
		attempts <- req.Header.Get(httpoutcome.DefaultAttemptHeader)
		_, _ = io.Copy(io.Discard, br)
	})
	layer, err := affinity.New(affinity.Config{Mode: affinity.ModeHard, Clock: placement.NewManualClock(0), QuarantineTTL: 90 * time.Second})
	require.NoError(t, err)
	defer layer.Close()
	_, err = layer.Join(affinity.Worker{ID: s.URL(), Identity: "1"})
	require.NoError(t, err)
	key, err := affinity.Namespace{}.Session("s")
	require.NoError(t, err)

	turn, err := layer.Start(context.Background(), affinity.Request{Session: key})
	require.NoError(t, err)
	a, err := turn.Dispatch(affinity.WorkerOnly(s.URL()))
	require.NoError(t, err)
	require.NotZero(t, a.ID())
	actx, cancel := a.Context(context.Background())
	dctx, dcancel := context.WithTimeout(actx, 50*time.Millisecond) // the manual clock adds no deadline
	defer dcancel()
	c, _ := newClient(t)
	resp, out, derr := c.Do(dctx, post(t, s.URL(), `{}`), a.ID(), func(httpoutcome.End) { cancel() })
	require.Nil(t, resp)
	require.Error(t, derr)
	assert.Equal(t, placement.Ambiguous, out)
	cerr := a.Complete(out)
	turn.Done()
	var uo *affinity.UnknownOutcomeError
	require.ErrorAs(t, cerr, &uo)
	code, retry := httpoutcome.Status(cerr)
	assert.Equal(t, http.StatusGatewayTimeout, code)
	assert.Zero(t, retry)
	assert.Equal(t, a.ID(), mustParse(t, <-attempts))

	_, err = layer.Start(context.Background(), affinity.Request{Session: key})
	var q *affinity.QuarantinedError
	require.True(t, errors.As(err, &q), "hard mode: %v", err)
	code, retry = httpoutcome.Status(err)
	assert.Equal(t, http.StatusServiceUnavailable, code)
	assert.Equal(t, 90*time.Second, retry)
}

func mustParse(t *testing.T, s string) uint64 {
	t.Helper()
	var n uint64
	for _, c := range s {
		require.True(t, c >= '0' && c <= '9', s)
		n = n*10 + uint64(c-'0')
	}
	return n
}
