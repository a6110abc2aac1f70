package httpoutcome_test

import (
	"bufio"
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/placementlab/placement/impl/httpoutcome"
	"github.com/placementlab/placement/impl/placement"
)

// front is a router in front of worker: each request is forwarded with Do
// under the request's context and relayed with Relay; relayed receives
// Relay's error and rec the release's End.
func front(t *testing.T, c *httpoutcome.Client, worker string, rec *recorder, relayed chan<- error) *httptest.Server {
	t.Helper()
	s := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		out, err := http.NewRequest(http.MethodPost, worker, r.Body)
		if err != nil {
			relayed <- err
			return
		}
		resp, _, err := c.Do(r.Context(), out, 5, rec.release)
		if err != nil {
			httpoutcome.WriteError(w, err)
			relayed <- err
			return
		}
		relayed <- httpoutcome.Relay(w, resp)
	}))
	t.Cleanup(s.Close)
	return s
}

// TestRelayStreams: Relay forwards the status and headers (without the
// hop-by-hop ones) and flushes every event as it comes: the client reads
// the first event while the worker still holds the second.
func TestRelayStreams(t *testing.T) {
	second := make(chan struct{})
	worker := newRawServer(t, func(c net.Conn, br *bufio.Reader) {
		if _, err := readRequest(br); err != nil {
			return
		}
		_, _ = io.WriteString(c, "HTTP/1.1 201 Created\r\nContent-Type: text/event-stream\r\nConnection: X-Hop\r\nX-Hop: 1\r\nX-Kept: 2\r\nTransfer-Encoding: chunked\r\n\r\n9\r\ndata: a\n\n\r\n")
		<-second
		_, _ = io.WriteString(c, "9\r\ndata: b\n\n\r\n0\r\n\r\n")
	})
	c, _ := newClient(t)
	rec := newRecorder()
	relayed := make(chan error, 1)
	f := front(t, c, worker.URL(), rec, relayed)
	_, tr := newClient(t)
	resp, err := (&http.Client{Transport: tr}).Post(f.URL, "application/json", strings.NewReader(`{}`))
	require.NoError(t, err)
	defer resp.Body.Close()
	assert.Equal(t, http.StatusCreated, resp.StatusCode)
	assert.Equal(t, "text/event-stream", resp.Header.Get("Content-Type"))
	assert.Equal(t, "2", resp.Header.Get("X-Kept"))
	assert.Empty(t, resp.Header.Get("X-Hop"), "named in Connection: hop-by-hop")
	br := bufio.NewReader(resp.Body)
	line, err := br.ReadString('\n')
	require.NoError(t, err)
	assert.Equal(t, "data: a\n", line, "the first event arrives before the worker sends the second")
	close(second)
	rest, err := io.ReadAll(br)
	require.NoError(t, err)
	assert.Equal(t, "\ndata: b\n\n", string(rest))
	require.NoError(t, <-relayed)
	e := rec.only(t)
	assert.Equal(t, httpoutcome.EndComplete, e.Kind)
	assert.Equal(t, placement.Accepted, e.Outcome)
	assert.Equal(t, int64(18), e.Bytes)
}

// TestRelayDownstreamGone: the downstream client goes away mid-stream: Relay
// returns, the body ends once (closed by Relay, or by the request's context
// ending, whichever the server saw first), and the worker's stream ends.
func TestRelayDownstreamGone(t *testing.T) {
	w, started := sseWorker(t, -1)
	c, _ := newClient(t)
	rec := newRecorder()
	relayed := make(chan error, 1)
	f := front(t, c, w.URL, rec, relayed)
	ctx, cancel := context.WithCancel(context.Background())
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, f.URL, strings.NewReader(`{}`))
	require.NoError(t, err)
	_, tr := newClient(t)
	resp, err := tr.RoundTrip(req)
	require.NoError(t, err)
	wctx := <-started
	_, err = io.ReadFull(resp.Body, make([]byte, 9))
	require.NoError(t, err)
	cancel()
	_ = resp.Body.Close()
	assert.Error(t, <-relayed)
	e := rec.only(t)
	assert.Contains(t, []httpoutcome.EndKind{httpoutcome.EndClosed, httpoutcome.EndCancelled}, e.Kind)
	assert.Equal(t, placement.Accepted, e.Outcome, "the client left: not the worker's cut")
	<-wctx.Done()
}

// TestRelayCut: a worker that cuts its stream mid-body: Relay returns the
// read error, the End is a cut, Ambiguous.
func TestRelayCut(t *testing.T) {
	worker := newRawServer(t, func(c net.Conn, br *bufio.Reader) {
		if _, err := readRequest(br); err != nil {
			return
		}
		_, _ = io.WriteString(c, "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n9\r\ndata: a\n\n\r\n")
	})
	c, _ := newClient(t)
	resp, _, err := c.Do(context.Background(), post(t, worker.URL(), `{}`), 0, nil)
	require.NoError(t, err)
	rw := httptest.NewRecorder()
	err = httpoutcome.Relay(rw, resp)
	assert.ErrorIs(t, err, io.ErrUnexpectedEOF)
	assert.Equal(t, "data: a\n\n", rw.Body.String())
	assert.True(t, rw.Flushed)
	e, ok := resp.End()
	require.True(t, ok)
	assert.Equal(t, httpoutcome.EndCut, e.Kind)
	assert.Equal(t, placement.Ambiguous, e.Outcome)
}

// failingWriter fails every body write, as a ResponseWriter whose client
// went away does.
type failingWriter struct{ *httptest.ResponseRecorder }

func (f failingWriter) Write([]byte) (int, error) { return 0, errors.New("client gone") }

// TestRelayWriteError: a failed write before the body's end closes the body
// with the write error as End.Err (EndClosed), and Relay returns it.
func TestRelayWriteError(t *testing.T) {
	w, _ := sseWorker(t, -1)
	c, _ := newClient(t)
	rec := newRecorder()
	resp, _, err := c.Do(context.Background(), post(t, w.URL, `{}`), 0, rec.release)
	require.NoError(t, err)
	err = httpoutcome.Relay(failingWriter{httptest.NewRecorder()}, resp)
	assert.EqualError(t, err, "client gone")
	e := rec.only(t)
	assert.Equal(t, httpoutcome.EndClosed, e.Kind)
	assert.Equal(t, err, e.Err)
}

// TestRelayBadStatus: a status a ResponseWriter cannot write is an error
// before anything is written, and the body is still closed once.
func TestRelayBadStatus(t *testing.T) {
	worker := newRawServer(t, func(c net.Conn, br *bufio.Reader) {
		if _, err := readRequest(br); err != nil {
			return
		}
		_, _ = io.WriteString(c, "HTTP/1.1 099 Odd\r\nContent-Length: 0\r\n\r\n")
	})
	c, _ := newClient(t)
	rec := newRecorder()
	resp, out, err := c.Do(context.Background(), post(t, worker.URL(), `{}`), 0, rec.release)
	require.NoError(t, err)
	assert.Equal(t, placement.Ambiguous, out)
	rw := httptest.NewRecorder()
	assert.Error(t, httpoutcome.Relay(rw, resp))
	assert.False(t, rw.Flushed)
	assert.Empty(t, rw.Body.String())
	assert.Equal(t, 1, rec.count())
	assert.Error(t, httpoutcome.Relay(nil, resp), "a nil ResponseWriter")
	assert.Equal(t, 1, rec.count())
}
