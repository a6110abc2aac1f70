package httpoutcome

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptrace"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/placementlab/placement/impl/placement"
)

// DefaultAttemptHeader is the header Do sends a placing dispatch's attempt
// id in when Client.AttemptHeader is empty.
const DefaultAttemptHeader = "X-Placement-Attempt"

// ErrConnectTimeout: no connection to the worker was had within the
// Client's connect bound (see Client.ConnectTimeout). Nothing was sent.
var ErrConnectTimeout = errors.New("httpoutcome: connect timed out")

// Client forwards requests to workers and classifies what happened to each
// (see the package doc). The zero Client is ready to use: http.DefaultTransport,
// the default Table, DefaultAttemptHeader. A Client is safe for concurrent use
// once set up; do not change its fields while requests run.
type Client struct {
	// Transport sends the request (nil: http.DefaultTransport). Do calls
	// it directly, not through an http.Client: redirects are not followed
	// (a redirect re-sends the request; the router relays the 3xx), no
	// cookie jar is used, and no client-wide timeout cuts a long stream.
	// Set the transport's IdleConnTimeout below the workers' keep-alive
	// timeout (see the package doc's Keep-alive section).
	Transport http.RoundTripper
	// Table maps response statuses to outcomes (zero: the default table).
	Table Table
	// AttemptHeader names the header that carries the attempt id
	// (empty: DefaultAttemptHeader). It must not be Idempotency-Key or
	// X-Idempotency-Key: Go's transport re-sends a request carrying one of
	// those by itself.
	AttemptHeader string
	// ConnectTimeout bounds how long Do waits for a connection to the
	// worker (from Do's start to the transport's GotConn: a dial, a pool
	// slot, TLS), apart from ctx: a connect that does not complete in time
	// (a black-holed worker) sent nothing, so it is cancelled and reported
	// DefinitelyNotAccepted with ErrConnectTimeout. The bound is also at
	// most half the time ctx has left, so that a placing dispatch learns
	// of the refusal before its deadline. Zero means
	// DefaultConnectTimeout; negative means no bound but ctx. It applies
	// only to a transport that reports its connections through httptrace
	// (GetConn, GotConn), as net/http's does: another is never cut by it.
	ConnectTimeout time.Duration
}

// DefaultConnectTimeout bounds getting a connection to a worker when
// Client.ConnectTimeout is zero.
const DefaultConnectTimeout = 5 * time.Second

// connectBound returns how long Do may wait for a connection under ctx (0:
// no bound).
func (c *Client) connectBound(ctx context.Context) time.Duration {
	bound := c.ConnectTimeout
	switch {
	case bound < 0:
		return 0
	case bound == 0:
		bound = DefaultConnectTimeout
	}
	if dl, ok := ctx.Deadline(); ok {
		if half := time.Until(dl) / 2; half < bound {
			bound = half
		}
	}
	return max(bound, 0)
}

// connectWatch cancels a request that got no connection within its bound.
type connectWatch struct {
	bound  time.Duration
	cancel context.CancelCauseFunc
	state  atomic.Int32 // watchIdle, watchGetting, watchGot, watchFired
	timer  *time.Timer
}

const (
	watchIdle    = iota // the transport reported nothing yet
	watchGetting        // GetConn: getting a connection
	watchGot            // GotConn: disarmed for good
	watchFired          // the bound passed first: the request is cancelled
)

func (w *connectWatch) getConn(string) { w.state.CompareAndSwap(watchIdle, watchGetting) }

func (w *connectWatch) gotConn() {
	if !w.state.CompareAndSwap(watchGetting, watchGot) {
		w.state.CompareAndSwap(watchIdle, watchGot)
	}
}

func (w *connectWatch) fire() {
	if w.state.CompareAndSwap(watchGetting, watchFired) {
		w.cancel(fmt.Errorf("%w after %v", ErrConnectTimeout, w.bound))
	}
}

func (w *connectWatch) fired() bool { return w.state.Load() == watchFired }

// Response is a worker's response as Do returns it: its Body is wrapped so
// that the release given to Do runs exactly once, when the body ends (see
// EndKind for how).
type Response struct {
	*http.Response
	// Outcome is the attempt's outcome at the response headers (the
	// Table's row for the status, or Ambiguous after a replay).
	Outcome placement.Outcome
	b       *body
}

// Ended returns a channel closed once the body has ended and the release has
// returned.
func (r *Response) Ended() <-chan struct{} { return r.b.done }

// End returns how the body ended, and false while it has not ended yet.
func (r *Response) End() (End, bool) {
	select {
	case <-r.b.done:
		return r.b.end, true
	default:
		return End{}, false
	}
}

// ForwardError is Do's error when no response came: Outcome says what the
// router reports (DefinitelyNotAccepted when the request was never written
// whole, Ambiguous when it was), Err is the transport's error.
type ForwardError struct {
	Outcome placement.Outcome
	// Written: the transport reported the request written whole
	// (httptrace's WroteRequest with no error), on any connection.
	Written bool
	// Replayed: something (a retrying RoundTripper) got a connection again
	// after the request had been written: the request may have run twice.
	Replayed bool
	Err      error
}

// Error describes the error.
func (e *ForwardError) Error() string {
	what := "not sent"
	switch {
	case e.Replayed:
		what = "replayed, outcome unknown"
	case e.Written:
		what = "sent, outcome unknown"
	}
	return fmt.Sprintf("httpoutcome: forward failed (%s: %v): %v", what, e.Outcome, e.Err)
}

// Unwrap returns the transport's error.
func (e *ForwardError) Unwrap() error { return e.Err }

// Do sends req under ctx (which replaces req's context) and returns at the
// worker's first answer: its response headers, with the Table's outcome for
// the status, or a *ForwardError when no response came. attempt, when not
// zero, is sent in the AttemptHeader (a header of that name the caller set is
// removed either way, so a client cannot forge it). req is not modified; its
// Body is always closed, as a RoundTripper closes it.
//
// release, when not nil, runs exactly once per call: before Do returns when
// there is no response (with EndNoResponse), otherwise when the response's
// body ends (read to its end, cut, closed, or ctx ending: see EndKind). It
// runs on the goroutine that ended the body and must not call back into the
// Response. Every returned Response must be closed (or relayed), whatever
// its outcome; after ctx ends it is closed by itself.
//
// Bad input (a nil ctx or req, a request without a URL, an invalid
// AttemptHeader) returns DefinitelyNotAccepted (nothing was sent) and an
// error matching placement.ErrInvalidArgument.
func (c *Client) Do(ctx context.Context, req *http.Request, attempt uint64, release func(End)) (*Response, placement.Outcome, error) {
	fail := func(o placement.Outcome, err error) (*Response, placement.Outcome, error) {
		if release != nil {
			release(End{Outcome: o, Kind: EndNoResponse, Err: err})
		}
		return nil, o, err
	}
	if req == nil {
		return fail(placement.DefinitelyNotAccepted, invalid("nil request"))
	}
	if ctx == nil || req.URL == nil {
		if req.Body != nil {
			_ = req.Body.Close()
		}
		what := "nil context"
		if ctx != nil {
			what = "request without a URL"
		}
		return fail(placement.DefinitelyNotAccepted, invalid(what))
	}
	header := c.AttemptHeader
	if header == "" {
		header = DefaultAttemptHeader
	}
	if err := checkAttemptHeader(header); err != nil {
		if req.Body != nil {
			_ = req.Body.Close()
		}
		return fail(placement.DefinitelyNotAccepted, err)
	}

	tr := &trace{}
	ct := &httptrace.ClientTrace{GotConn: tr.gotConn, WroteRequest: tr.wroteRequest}
	rctx, stopConnect := ctx, func() {} // the request's context, and its end
	var watch *connectWatch
	if bound := c.connectBound(ctx); bound > 0 {
		cctx, cancel := context.WithCancelCause(ctx)
		watch = &connectWatch{bound: bound, cancel: cancel}
		watch.timer = time.AfterFunc(bound, watch.fire)
		ct.GetConn = watch.getConn
		ct.GotConn = func(info httptrace.GotConnInfo) {
			watch.gotConn()
			tr.gotConn(info)
		}
		rctx, stopConnect = cctx, func() { watch.timer.Stop(); cancel(nil) }
	}
	out := req.WithContext(httptrace.WithClientTrace(rctx, ct))
	out.Header = req.Header.Clone()
	if out.Header == nil {
		out.Header = http.Header{}
	}
	out.Header.Del(header)
	if attempt != 0 {
		out.Header.Set(header, strconv.FormatUint(attempt, 10))
	}
	out.RequestURI = ""
	// Never replayable by the transport (see the package doc's Replays
	// section): no GetBody, and a request without a body that the
	// transport would take for idempotent gets one it cannot rewind.
	out.GetBody = nil
	if (out.Body == nil || out.Body == http.NoBody) && replayableWithoutBody(out) {
		out.Body = emptyBody{}
		out.ContentLength = 0
	}

	rt := c.Transport
	if rt == nil {
		rt = http.DefaultTransport
	}
	resp, err := rt.RoundTrip(out)
	if watch != nil {
		watch.timer.Stop()
	}
	if err == nil && resp == nil {
		err = errors.New("httpoutcome: the RoundTripper returned neither a response nor an error")
	}
	if err != nil {
		if resp != nil && resp.Body != nil {
			_ = resp.Body.Close()
		}
		stopConnect()
		if watch != nil && watch.fired() && ctx.Err() == nil {
			err = fmt.Errorf("%w: %w", context.Cause(rctx), err)
		}
		fe := &ForwardError{Outcome: placement.DefinitelyNotAccepted, Written: tr.written(), Replayed: tr.replayed(), Err: err}
		if fe.Written {
			fe.Outcome = placement.Ambiguous
		}
		return fail(fe.Outcome, fe)
	}
	o := c.Table.Outcome(resp.StatusCode)
	if tr.replayed() {
		o = placement.Ambiguous
	}
	if resp.Body == nil {
		resp.Body = http.NoBody
	}
	b := &body{
		rc:      resp.Body,
		ctx:     ctx,
		head:    o,
		status:  resp.StatusCode,
		length:  resp.ContentLength,
		noBody:  resp.Body == http.NoBody,
		release: release,
		done:    make(chan struct{}),
		stopReq: stopConnect,
	}
	resp.Body = b
	stop := context.AfterFunc(ctx, b.onContextDone)
	b.stop.Store(&stop)
	return &Response{Response: resp, Outcome: o, b: b}, o, nil
}

// trace records what the transport reports through httptrace. Its hooks may
// run after Do returns (a request body still being written while the
// response streams), so its fields are atomic.
type trace struct {
	writes    atomic.Int32 // WroteRequest with no error
	afterSent atomic.Int32 // GotConn after a successful write
	reused    atomic.Bool
}

func (t *trace) gotConn(info httptrace.GotConnInfo) {
	if info.Reused {
		t.reused.Store(true)
	}
	if t.writes.Load() > 0 {
		t.afterSent.Add(1)
	}
}

func (t *trace) wroteRequest(info httptrace.WroteRequestInfo) {
	if info.Err == nil {
		t.writes.Add(1)
	}
}

func (t *trace) written() bool  { return t.writes.Load() > 0 }
func (t *trace) replayed() bool { return t.afterSent.Load() > 0 || t.writes.Load() > 1 }

// replayableWithoutBody reports whether Go's transport would take a request
// without a body for one it may re-send by itself (http.Request's
// isReplayable).
func replayableWithoutBody(r *http.Request) bool {
	switch r.Method {
	case "", http.MethodGet, http.MethodHead, http.MethodOptions, http.MethodTrace:
		return true
	}
	_, a := r.Header["Idempotency-Key"]
	_, b := r.Header["X-Idempotency-Key"]
	return a || b
}

// emptyBody is an empty request body that is not http.NoBody, so the
// transport cannot take the request for replayable; for the methods that
// usually lack a body it probes it, finds it empty and sends no body.
type emptyBody struct{}

func (emptyBody) Read([]byte) (int, error) { return 0, io.EOF }
func (emptyBody) Close() error             { return nil }

func checkAttemptHeader(h string) error {
	for i := 0; i < len(h); i++ {
		if !isTokenByte(h[i]) {
			return invalid(fmt.Sprintf("attempt header %q is not a valid header name", h))
		}
	}
	if k := http.CanonicalHeaderKey(h); k == "Idempotency-Key" || k == "X-Idempotency-Key" {
		return invalid(fmt.Sprintf("attempt header %q makes Go's transport re-send requests by itself", h))
	}
	return nil
}

func isTokenByte(c byte) bool {
	return c >= '0' && c <= '9' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' ||
		strings.IndexByte("!#$%&'*+-.^_`|~", c) >= 0
}

func invalid(what string) error {
	return fmt.Errorf("%w: httpoutcome: %s", placement.ErrInvalidArgument, what)
}
