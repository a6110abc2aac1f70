package httpoutcome_test

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/placementlab/placement/impl/httpoutcome"
	"github.com/placementlab/placement/impl/placement"
)

// doFail runs Do where no response must come and returns its error and the
// one End its release received.
func doFail(t *testing.T, c *httpoutcome.Client, ctx context.Context, req *http.Request, want placement.Outcome) (*httpoutcome.ForwardError, httpoutcome.End) {
	t.Helper()
	rec := newRecorder()
	resp, out, err := c.Do(ctx, req, 7, rec.release)
	require.Nil(t, resp)
	require.Error(t, err)
	assert.Equal(t, want, out, "outcome (err %v)", err)
	e := rec.only(t)
	assert.Equal(t, httpoutcome.EndNoResponse, e.Kind)
	assert.Equal(t, want, e.Outcome)
	assert.Equal(t, err, e.Err)
	var fe *httpoutcome.ForwardError
	require.ErrorAs(t, err, &fe)
	assert.Equal(t, want, fe.Outcome)
	return fe, e
}

// TestFaultRefused: a closed port refuses the connection: nothing was sent,
// DefinitelyNotAccepted.
func TestFaultRefused(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	url := "http://" + ln.Addr().String()
	require.NoError(t, ln.Close())
	c, _ := newClient(t)
	fe, _ := doFail(t, c, context.Background(), post(t, url, `{}`), placement.DefinitelyNotAccepted)
	assert.False(t, fe.Written)
	var op *net.OpError
	assert.ErrorAs(t, err2(fe), &op, "the dial error is kept")
}

func err2(fe *httpoutcome.ForwardError) error { return fe }

// TestFaultHangAfterWrite: the worker reads the request and never answers;
// the context's deadline passes: Ambiguous, written.
func TestFaultHangAfterWrite(t *testing.T) {
	got := make(chan struct{}, 1)
	s := newRawServer(t, func(c net.Conn, br *bufio.Reader) {
		if _, err := readRequest(br); err == nil {
			got <- struct{}{}
		}
		_, _ = io.Copy(io.Discard, br) // hang until the client goes
	})
	c, _ := newClient(t)
	fe, _ := doFail(t, c, ctxTimeout(t, 50*time.Millisecond), post(t, s.URL(), `{"prompt":"x"}`), placement.Ambiguous)
	assert.True(t, fe.Written)
	assert.ErrorIs(t, fe, context.DeadlineExceeded)
	<-got
}

// TestFaultHangResponseHeaderTimeout: the transport's own
// ResponseHeaderTimeout after the write is Ambiguous too.
func TestFaultHangResponseHeaderTimeout(t *testing.T) {
	s := newRawServer(t, func(c net.Conn, br *bufio.Reader) {
		_, _ = readRequest(br)
		_, _ = io.Copy(io.Discard, br)
	})
	c, tr := newClient(t)
	tr.ResponseHeaderTimeout = 30 * time.Millisecond
	fe, _ := doFail(t, c, context.Background(), post(t, s.URL(), `{}`), placement.Ambiguous)
	assert.True(t, fe.Written)
}

// TestFaultDispatchTimeoutCause: a context ended with the dispatch's cause
// (placement.ErrDispatchTimeout, as Attempt.Context ends) after the write is
// Ambiguous.
func TestFaultDispatchTimeoutCause(t *testing.T) {
	got := make(chan struct{})
	s := newRawServer(t, func(c net.Conn, br *bufio.Reader) {
		if _, err := readRequest(br); err == nil {
			close(got)
		}
		_, _ = io.Copy(io.Discard, br)
	})
	ctx, cancel := context.WithCancelCause(context.Background())
	go func() { <-got; cancel(placement.ErrDispatchTimeout) }()
	c, _ := newClient(t)
	fe, _ := doFail(t, c, ctx, post(t, s.URL(), `{}`), placement.Ambiguous)
	assert.True(t, fe.Written)
}

// TestFaultClientCancelAfterWrite: the client's cancel after the worker has
// the request is Ambiguous: the worker may run it.
func TestFaultClientCancelAfterWrite(t *testing.T) {
	got := make(chan struct{})
	s := newRawServer(t, func(c net.Conn, br *bufio.Reader) {
		if _, err := readRequest(br); err == nil {
			close(got)
		}
		_, _ = io.Copy(io.Discard, br)
	})
	ctx, cancel := context.WithCancel(context.Background())
	go func() { <-got; cancel() }()
	c, _ := newClient(t)
	fe, _ := doFail(t, c, ctx, post(t, s.URL(), `{}`), placement.Ambiguous)
	assert.True(t, fe.Written)
	assert.ErrorIs(t, fe, context.Canceled)
}

// TestFaultCancelBeforeWrite: a context that ends before the request is
// written (already cancelled; cancelled or timed out during the dial) is
// DefinitelyNotAccepted, and the worker sees no request.
func TestFaultCancelBeforeWrite(t *testing.T) {
	var requests atomic.Int32
	s := newRawServer(t, func(c net.Conn, br *bufio.Reader) {
		if _, err := readRequest(br); err == nil {
			requests.Add(1)
		}
	})
	t.Run("already-cancelled", func(t *testing.T) {
		ctx, cancel := context.WithCancel(context.Background())
		cancel()
		c, _ := newClient(t)
		fe, _ := doFail(t, c, ctx, post(t, s.URL(), `{}`), placement.DefinitelyNotAccepted)
		assert.False(t, fe.Written)
	})
	for _, name := range []string{"cancelled-in-dial", "deadline-in-dial"} {
		t.Run(name, func(t *testing.T) {
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			if name == "deadline-in-dial" {
				ctx = ctxTimeout(t, 30*time.Millisecond)
			}
			dialing := make(chan struct{})
			c, tr := newClient(t)
			tr.DialContext = func(dctx context.Context, network, addr string) (net.Conn, error) {
				close(dialing)
				<-dctx.Done() // the worker's SYN never answered
				return nil, dctx.Err()
			}
			if name == "cancelled-in-dial" {
				go func() { <-dialing; cancel() }()
			}
			fe, _ := doFail(t, c, ctx, post(t, s.URL(), `{}`), placement.DefinitelyNotAccepted)
			assert.False(t, fe.Written)
		})
	}
	assert.Zero(t, requests.Load())
}

// TestFaultResetAfterRead: the worker reads the request, then resets the
// connection: Ambiguous.
func TestFaultResetAfterRead(t *testing.T) {
	s := newRawServer(t, func(c net.Conn, br *bufio.Reader) {
		if _, err := readRequest(br); err == nil {
			reset(c)
		}
	})
	c, _ := newClient(t)
	fe, _ := doFail(t, c, context.Background(), post(t, s.URL(), `{}`), placement.Ambiguous)
	assert.True(t, fe.Written)
}

// TestFaultResetBeforeRead: the worker resets the connection before reading
// anything. The client cannot tell it from a reset after reading unless the
// transport saw the reset before it took the request: the outcome is
// Ambiguous, or DefinitelyNotAccepted exactly when the request was not
// written; never Accepted. The dialer waits until the client's socket has
// seen the reset, which makes the early case the likely one.
func TestFaultResetBeforeRead(t *testing.T) {
	s := newRawServer(t, func(c net.Conn, br *bufio.Reader) { reset(c) })
	c, tr := newClient(t)
	tr.DialContext = func(ctx context.Context, network, addr string) (net.Conn, error) {
		conn, err := (&net.Dialer{}).DialContext(ctx, network, addr)
		if err != nil {
			return nil, err
		}
		_ = conn.SetReadDeadline(time.Now().Add(time.Second))
		_, rerr := conn.Read(make([]byte, 1)) // returns at the reset
		_ = conn.SetReadDeadline(time.Time{})
		require.Error(t, rerr)
		return conn, nil
	}
	rec := newRecorder()
	resp, out, err := c.Do(context.Background(), post(t, s.URL(), `{}`), 1, rec.release)
	require.Nil(t, resp)
	var fe *httpoutcome.ForwardError
	require.ErrorAs(t, err, &fe)
	assert.NotEqual(t, placement.Accepted, out)
	t.Logf("written %v: %v (%v)", fe.Written, out, fe.Err)
	if fe.Written {
		assert.Equal(t, placement.Ambiguous, out)
	} else {
		assert.Equal(t, placement.DefinitelyNotAccepted, out)
	}
	assert.Equal(t, out, rec.only(t).Outcome)
}

// TestFaultStatusBeforeBody: explicit statuses, over a real server, get the
// Table's outcome; Do returns the response (to close or relay) with no
// error, and the release runs at Close.
func TestFaultStatusBeforeBody(t *testing.T) {
	cases := []struct {
		code int
		want placement.Outcome
	}{
		{200, placement.Accepted},
		{400, placement.Accepted},
		{429, placement.DefinitelyNotAccepted},
		{500, placement.Accepted},
		{502, placement.Ambiguous},
		{503, placement.DefinitelyNotAccepted},
		{504, placement.Ambiguous},
	}
	s := newRawServer(t, func(c net.Conn, br *bufio.Reader) {
		for {
			req, err := readRequest(br)
			if err != nil {
				return
			}
			code := req.URL.Query().Get("code")
			_, _ = fmt.Fprintf(c, "HTTP/1.1 %s Whatever\r\nContent-Length: 2\r\nRetry-After: 3\r\n\r\nok", code)
		}
	})
	c, _ := newClient(t)
	for _, tc := range cases {
		t.Run(fmt.Sprint(tc.code), func(t *testing.T) {
			req := withCode(t, s.URL(), tc.code)
			rec := newRecorder()
			resp, out, err := c.Do(context.Background(), req, 0, rec.release)
			require.NoError(t, err)
			assert.Equal(t, tc.want, out)
			assert.Equal(t, tc.want, resp.Outcome)
			assert.Equal(t, "3", resp.Header.Get("Retry-After"))
			assert.Zero(t, rec.count(), "no release before the body ends")
			require.NoError(t, resp.Body.Close())
			e := rec.only(t)
			assert.Equal(t, tc.want, e.Outcome)
			assert.Equal(t, tc.code, e.Status)
			assert.Equal(t, httpoutcome.EndClosed, e.Kind)
		})
	}
	t.Run("override", func(t *testing.T) {
		tab, err := httpoutcome.Table{}.With(503, placement.Ambiguous)
		require.NoError(t, err)
		oc := *c
		oc.Table = tab
		resp, out, err := oc.Do(context.Background(), withCode(t, s.URL(), 503), 0, nil)
		require.NoError(t, err)
		assert.Equal(t, placement.Ambiguous, out)
		require.NoError(t, resp.Body.Close())
	})
	t.Run("not-http", func(t *testing.T) {
		resp, out, err := c.Do(context.Background(), withCode(t, s.URL(), 999), 0, nil)
		require.NoError(t, err)
		assert.Equal(t, placement.Ambiguous, out)
		require.NoError(t, resp.Body.Close())
	})
}

func withCode(t *testing.T, url string, code int) *http.Request {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, fmt.Sprintf("%s/?code=%d", url, code), bytes.NewReader([]byte(`{}`)))
	require.NoError(t, err)
	return req
}

// TestFaultCutMidBody: the worker sends its headers and part of the body,
// then the connection ends: Accepted at the headers; the whole exchange
// Ambiguous (EndCut). A chunked stream closed cleanly or reset mid-stream,
// and a Content-Length body that comes short, are cuts; a body delimited by
// the connection's close cannot be told from a cut when the close is clean.
func TestFaultCutMidBody(t *testing.T) {
	cases := []struct {
		name     string
		response string
		rst      bool
		kind     httpoutcome.EndKind
		outcome  placement.Outcome
	}{
		{"chunked-close", "HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nTransfer-Encoding: chunked\r\n\r\n9\r\ndata: a\n\n\r\n", false, httpoutcome.EndCut, placement.Ambiguous},
		{"chunked-reset", "HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nTransfer-Encoding: chunked\r\n\r\n9\r\ndata: a\n\n\r\n", true, httpoutcome.EndCut, placement.Ambiguous},
		{"short-length", "HTTP/1.1 200 OK\r\nContent-Length: 100\r\n\r\ndata: a\n\n", false, httpoutcome.EndCut, placement.Ambiguous},
		{"close-delimited", "HTTP/1.1 200 OK\r\nConnection: close\r\n\r\ndata: a\n\n", false, httpoutcome.EndComplete, placement.Accepted},
		{"refusal-cut", "HTTP/1.1 503 Busy\r\nContent-Length: 100\r\n\r\ndata: a\n\n", false, httpoutcome.EndCut, placement.DefinitelyNotAccepted},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			proceed := make(chan struct{})
			s := newRawServer(t, func(c net.Conn, br *bufio.Reader) {
				if _, err := readRequest(br); err != nil {
					return
				}
				_, _ = io.WriteString(c, tc.response)
				<-proceed // the client has read the first event
				if tc.rst {
					reset(c)
				}
			})
			c, _ := newClient(t)
			rec := newRecorder()
			resp, out, err := c.Do(context.Background(), post(t, s.URL(), `{}`), 3, rec.release)
			require.NoError(t, err)
			head := placement.Accepted
			if tc.name == "refusal-cut" {
				head = placement.DefinitelyNotAccepted
			}
			assert.Equal(t, head, out)
			first := make([]byte, 9)
			_, err = io.ReadFull(resp.Body, first)
			require.NoError(t, err)
			assert.Equal(t, "data: a\n\n", string(first))
			assert.Zero(t, rec.count(), "the body has not ended")
			close(proceed)
			rest, rerr := io.ReadAll(resp.Body)
			assert.Empty(t, rest)
			if tc.kind == httpoutcome.EndComplete {
				assert.NoError(t, rerr)
			} else {
				assert.Error(t, rerr)
			}
			require.NoError(t, resp.Body.Close())
			e := rec.only(t)
			assert.Equal(t, tc.kind, e.Kind)
			assert.Equal(t, tc.outcome, e.Outcome)
			assert.Equal(t, int64(9), e.Bytes)
			if tc.kind == httpoutcome.EndCut {
				assert.Equal(t, rerr, e.Err)
			}
			got, ok := resp.End()
			assert.True(t, ok)
			assert.Equal(t, e, got)
		})
	}
}

// keepAliveThenDrop answers the first request of its first connection and
// then reads the second and closes the connection without answering (the
// keep-alive race, or a crash after reading); every later connection is
// answered. It counts the requests it read.
func keepAliveThenDrop(t *testing.T) (*rawServer, *atomic.Int32) {
	var requests, conns atomic.Int32
	s := newRawServer(t, func(c net.Conn, br *bufio.Reader) {
		first := conns.Add(1) == 1
		for i := 0; ; i++ {
			if _, err := readRequest(br); err != nil {
				return
			}
			requests.Add(1)
			if first && i == 1 {
				return // read, then a clean close: no answer
			}
			_, _ = io.WriteString(c, "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok")
		}
	})
	return s, &requests
}

// TestNoSilentReplay: a request written on a reused keep-alive connection
// that the worker closes without answering. Go's transport alone re-sends a
// request it takes for idempotent (the control: the worker reads it twice);
// through Do it is never re-sent: the worker reads it once and the outcome
// is Ambiguous.
func TestNoSilentReplay(t *testing.T) {
	kinds := []struct {
		name string
		req  func(t *testing.T, url string) *http.Request
	}{
		{"get", func(t *testing.T, url string) *http.Request { return get(t, url) }},
		{"post-idempotency-key-no-body", func(t *testing.T, url string) *http.Request {
			req, err := http.NewRequest(http.MethodPost, url, nil)
			require.NoError(t, err)
			req.Header.Set("Idempotency-Key", "k")
			return req
		}},
		{"post-idempotency-key-getbody", func(t *testing.T, url string) *http.Request {
			req, err := http.NewRequest(http.MethodPost, url, bytes.NewReader([]byte(`{"x":1}`)))
			require.NoError(t, err)
			require.NotNil(t, req.GetBody)
			req.Header.Set("X-Idempotency-Key", "k")
			return req
		}},
	}
	warm := func(t *testing.T, rt http.RoundTripper, url string) {
		resp, err := rt.RoundTrip(get(t, url))
		require.NoError(t, err)
		_, _ = io.Copy(io.Discard, resp.Body)
		require.NoError(t, resp.Body.Close())
	}
	for _, k := range kinds {
		t.Run(k.name+"/transport-alone", func(t *testing.T) {
			s, requests := keepAliveThenDrop(t)
			_, tr := newClient(t)
			warm(t, tr, s.URL())
			resp, err := tr.RoundTrip(k.req(t, s.URL()))
			require.NoError(t, err, "the transport replays it and the replay is answered")
			require.NoError(t, resp.Body.Close())
			assert.Equal(t, int32(3), requests.Load(), "the worker read the request twice")
		})
		t.Run(k.name+"/do", func(t *testing.T) {
			s, requests := keepAliveThenDrop(t)
			c, tr := newClient(t)
			warm(t, tr, s.URL())
			fe, _ := doFail(t, c, context.Background(), k.req(t, s.URL()), placement.Ambiguous)
			assert.True(t, fe.Written)
			assert.False(t, fe.Replayed)
			assert.Equal(t, int32(2), requests.Load(), "the worker read the request once")
		})
	}
}

// retryingTransport re-sends a request once after an error, as retry
// middleware does.
type retryingTransport struct{ rt http.RoundTripper }

func (r retryingTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	resp, err := r.rt.RoundTrip(req)
	if err == nil {
		return resp, nil
	}
	return r.rt.RoundTrip(req)
}

// TestReplayByRoundTripperIsAmbiguous: a RoundTripper that re-sends a
// written request is seen through httptrace: the answer to the replay is
// Ambiguous, not Accepted.
func TestReplayByRoundTripperIsAmbiguous(t *testing.T) {
	s, requests := keepAliveThenDrop(t)
	c, tr := newClient(t)
	resp, err := tr.RoundTrip(get(t, s.URL()))
	require.NoError(t, err)
	_, _ = io.Copy(io.Discard, resp.Body)
	require.NoError(t, resp.Body.Close())
	c.Transport = retryingTransport{tr}
	rec := newRecorder()
	// A bodyless GET, so the middleware can re-send it.
	got, out, err := c.Do(context.Background(), get(t, s.URL()), 0, rec.release)
	require.NoError(t, err)
	assert.Equal(t, http.StatusOK, got.StatusCode)
	assert.Equal(t, placement.Ambiguous, out, "the answer came from a replay")
	assert.Equal(t, int32(3), requests.Load())
	require.NoError(t, got.Body.Close())
	assert.Equal(t, placement.Ambiguous, rec.only(t).Outcome)
}

// TestReplayedErrorIsAmbiguous: a replay that fails before its write does
// not hide that the first copy was written.
func TestReplayedErrorIsAmbiguous(t *testing.T) {
	s := newRawServer(t, func(c net.Conn, br *bufio.Reader) {
		_, _ = readRequest(br)
		reset(c)
	})
	c, tr := newClient(t)
	first := true
	base := tr.DialContext
	if base == nil {
		base = (&net.Dialer{}).DialContext
	}
	tr.DialContext = func(ctx context.Context, network, addr string) (net.Conn, error) {
		if first {
			first = false
			return base(ctx, network, addr)
		}
		return nil, errors.New("refused")
	}
	c.Transport = retryingTransport{tr}
	fe, _ := doFail(t, c, context.Background(), get(t, s.URL()), placement.Ambiguous)
	assert.True(t, fe.Written)
}

// TestWire: what the worker receives. A GET keeps its wire form (no body,
// no Transfer-Encoding) although Do gives it an empty body; the attempt id
// is in X-Placement-Attempt, a client's own X-Placement-Attempt is removed,
// attempt 0 sends none; the caller's request is not modified; a custom
// AttemptHeader is used; Idempotency-Key is refused as one.
func TestWire(t *testing.T) {
	seen := make(chan *http.Request, 4)
	s := newRawServer(t, func(c net.Conn, br *bufio.Reader) {
		for {
			req, err := readRequest(br)
			if err != nil {
				return
			}
			seen <- req
			_, _ = io.WriteString(c, "HTTP/1.1 204 No Content\r\n\r\n")
		}
	})
	c, _ := newClient(t)
	req := get(t, s.URL())
	req.Header.Set("X-Placement-Attempt", "666")
	resp, out, err := c.Do(context.Background(), req, 42, nil)
	require.NoError(t, err)
	assert.Equal(t, placement.Accepted, out)
	require.NoError(t, resp.Body.Close())
	w := <-seen
	assert.Equal(t, "42", w.Header.Get("X-Placement-Attempt"))
	assert.Empty(t, w.TransferEncoding)
	assert.Zero(t, w.ContentLength)
	assert.Empty(t, w.Header.Get("Content-Length"))
	assert.Equal(t, "666", req.Header.Get("X-Placement-Attempt"), "the caller's request is not modified")
	assert.Nil(t, req.Body)

	resp, _, err = c.Do(context.Background(), post(t, s.URL(), `{"a":1}`), 0, nil)
	require.NoError(t, err)
	require.NoError(t, resp.Body.Close())
	w = <-seen
	assert.Empty(t, w.Header.Values("X-Placement-Attempt"))
	assert.Equal(t, int64(7), w.ContentLength)

	cc := *c
	cc.AttemptHeader = "x-my-attempt"
	resp, _, err = cc.Do(context.Background(), post(t, s.URL(), `{}`), 9, nil)
	require.NoError(t, err)
	require.NoError(t, resp.Body.Close())
	assert.Equal(t, "9", (<-seen).Header.Get("X-My-Attempt"))

	for _, h := range []string{"Idempotency-Key", "x-idempotency-key", "bad header"} {
		cc.AttemptHeader = h
		rec := newRecorder()
		resp, out, err := cc.Do(context.Background(), post(t, s.URL(), `{}`), 9, rec.release)
		assert.Nil(t, resp)
		assert.Equal(t, placement.DefinitelyNotAccepted, out)
		assert.ErrorIs(t, err, placement.ErrInvalidArgument, h)
		assert.Equal(t, httpoutcome.EndNoResponse, rec.only(t).Kind)
	}
}

// TestBadInput: nil or incomplete arguments are errors matching
// placement.ErrInvalidArgument (DefinitelyNotAccepted: nothing sent), never
// panics, and the release still runs once.
func TestBadInput(t *testing.T) {
	c := &httpoutcome.Client{}
	for name, call := range map[string]func(func(httpoutcome.End)) (*httpoutcome.Response, placement.Outcome, error){
		"nil-request": func(r func(httpoutcome.End)) (*httpoutcome.Response, placement.Outcome, error) {
			return c.Do(context.Background(), nil, 1, r)
		},
		"nil-context": func(r func(httpoutcome.End)) (*httpoutcome.Response, placement.Outcome, error) {
			//lint:ignore SA1012 a nil context is the bad input under test
			return c.Do(nil, get(t, "http://127.0.0.1:1"), 1, r)
		},
		"no-url": func(r func(httpoutcome.End)) (*httpoutcome.Response, placement.Outcome, error) {
			return c.Do(context.Background(), &http.Request{Method: "GET"}, 1, r)
		},
	} {
		t.Run(name, func(t *testing.T) {
			rec := newRecorder()
			resp, out, err := call(rec.release)
			assert.Nil(t, resp)
			assert.Equal(t, placement.DefinitelyNotAccepted, out)
			assert.ErrorIs(t, err, placement.ErrInvalidArgument)
			assert.Equal(t, httpoutcome.EndNoResponse, rec.only(t).Kind)
		})
	}
	assert.Error(t, httpoutcome.Relay(nil, nil))
}

// TestFaultMalformedResponse: the worker reads the request and answers
// something that is not HTTP: Ambiguous (it had the request).
func TestFaultMalformedResponse(t *testing.T) {
	s := newRawServer(t, func(c net.Conn, br *bufio.Reader) {
		if _, err := readRequest(br); err == nil {
			_, _ = io.WriteString(c, "HELLO THERE\r\n\r\n")
		}
	})
	c, _ := newClient(t)
	fe, _ := doFail(t, c, context.Background(), post(t, s.URL(), `{}`), placement.Ambiguous)
	assert.True(t, fe.Written)
}

// TestNoRedirect: a redirect is a final answer, relayed: Do does not follow
// it (following re-sends the request), and the worker saw one request.
func TestNoRedirect(t *testing.T) {
	var requests atomic.Int32
	s := newRawServer(t, func(c net.Conn, br *bufio.Reader) {
		for {
			if _, err := readRequest(br); err != nil {
				return
			}
			requests.Add(1)
			_, _ = io.WriteString(c, "HTTP/1.1 307 Temporary Redirect\r\nLocation: /elsewhere\r\nContent-Length: 0\r\n\r\n")
		}
	})
	c, _ := newClient(t)
	resp, out, err := c.Do(context.Background(), post(t, s.URL(), `{}`), 1, nil)
	require.NoError(t, err)
	assert.Equal(t, http.StatusTemporaryRedirect, resp.StatusCode)
	assert.Equal(t, placement.Accepted, out)
	require.NoError(t, resp.Body.Close())
	assert.Equal(t, int32(1), requests.Load())
}
