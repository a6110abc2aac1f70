package httpoutcome

import (
	"context"
	"errors"
	"io"
	"sync/atomic"

	"github.com/placementlab/placement/impl/placement"
)

// ErrBodyClosed is what a read of a response body returns after it was
// closed.
var ErrBodyClosed = errors.New("httpoutcome: read on a closed response body")

// EndKind says how a forwarded exchange ended.
type EndKind uint8

const (
	// EndNoResponse: no response came (Do returned a *ForwardError).
	EndNoResponse EndKind = iota + 1
	// EndComplete: the body was read to its end (io.EOF), or closed after
	// its Content-Length was read, or the response had no body.
	EndComplete
	// EndClosed: the body was closed before its end (the caller stopped
	// reading; Relay closes it so when the downstream client is gone, and
	// End.Err is then the write error).
	EndClosed
	// EndCut: reading the body failed before its end (the worker reset
	// the connection, a chunked stream ended mid-chunk, a Content-Length
	// body came short, a read timed out).
	EndCut
	// EndCancelled: ctx was cancelled (not by a deadline) before the
	// body's end: typically the downstream client went away.
	EndCancelled
	// EndTimedOut: ctx's deadline passed (context.DeadlineExceeded, or
	// placement.ErrDispatchTimeout as the cause) before the body's end.
	EndTimedOut
)

// String names k.
func (k EndKind) String() string {
	switch k {
	case EndNoResponse:
		return "no-response"
	case EndComplete:
		return "complete"
	case EndClosed:
		return "closed"
	case EndCut:
		return "cut"
	case EndCancelled:
		return "cancelled"
	case EndTimedOut:
		return "timed-out"
	}
	return "unknown"
}

// End says how one Do call's exchange ended: what its release receives.
type End struct {
	// Outcome is the outcome of the whole exchange: Do's outcome, except
	// that an Accepted response whose body was cut or timed out is
	// Ambiguous (the worker ran the request and its answer did not arrive
	// whole; see the package doc's Streams section).
	Outcome placement.Outcome
	Kind    EndKind
	// Status is the response's status (0 with EndNoResponse).
	Status int
	// Bytes counts the body bytes read.
	Bytes int64
	// Err: Do's *ForwardError (EndNoResponse), the read error (EndCut),
	// context.Cause of ctx (EndCancelled, EndTimedOut), the reason Relay
	// closed the body (EndClosed, nil for a plain Close), nil for
	// EndComplete.
	Err error
}

// body wraps a response body so that its end is recorded, and the release
// run, exactly once.
type body struct {
	rc      io.ReadCloser
	ctx     context.Context
	head    placement.Outcome
	status  int
	length  int64
	noBody  bool
	release func(End)
	// stop stops watching ctx. It is stored after context.AfterFunc
	// returns, so the callback may run before it is set (then there is
	// nothing to stop).
	stop atomic.Pointer[func() bool]
	// stopReq ends the request's own context (Do's connect bound), once
	// the transport's body is closed.
	stopReq func()

	n     atomic.Int64
	state atomic.Bool // set by the first end
	done  chan struct{}
	end   End // written before done is closed
}

// Read reads the body, and ends it at io.EOF or an error.
func (b *body) Read(p []byte) (int, error) {
	if b.state.Load() {
		<-b.done
		return 0, b.readErr()
	}
	n, err := b.rc.Read(p)
	b.n.Add(int64(n))
	switch {
	case err == nil:
		return n, nil
	case err == io.EOF:
		b.finish(EndComplete, nil)
	case b.ctx.Err() != nil:
		b.onContextDone()
	default:
		b.finish(EndCut, err)
	}
	<-b.done
	if b.end.Kind == EndComplete {
		return n, io.EOF
	}
	return n, b.readErr()
}

// Close ends the body (EndComplete if it was all read, EndClosed before
// that). It returns after the release has run, and is safe to call
// concurrently and more than once.
func (b *body) Close() error {
	b.closeWith(nil)
	return nil
}

func (b *body) closeWith(reason error) {
	kind := EndClosed
	if b.noBody || b.length >= 0 && b.n.Load() == b.length {
		kind, reason = EndComplete, nil
	}
	b.finish(kind, reason)
}

func (b *body) onContextDone() {
	cause := context.Cause(b.ctx)
	kind := EndCancelled
	if isTimeout(cause) {
		kind = EndTimedOut
	}
	b.finish(kind, cause)
}

// finish ends the body once: it stops watching ctx, closes the transport's
// body (which frees or closes the connection), records the End and runs the
// release. Concurrent callers return once the first is done.
func (b *body) finish(kind EndKind, err error) {
	if !b.state.CompareAndSwap(false, true) {
		<-b.done
		return
	}
	defer close(b.done)
	if stop := b.stop.Load(); stop != nil {
		(*stop)()
	}
	_ = b.rc.Close()
	if b.stopReq != nil {
		b.stopReq()
	}
	b.end = End{Outcome: exchangeOutcome(b.head, kind), Kind: kind, Status: b.status, Bytes: b.n.Load(), Err: err}
	if b.release != nil {
		b.release(b.end)
	}
}

func (b *body) readErr() error {
	switch b.end.Kind {
	case EndComplete:
		return io.EOF
	case EndClosed:
		return ErrBodyClosed
	}
	return b.end.Err
}

// exchangeOutcome is the outcome of the whole exchange, from the outcome at
// the headers and how the body ended.
func exchangeOutcome(head placement.Outcome, kind EndKind) placement.Outcome {
	if head == placement.Accepted && (kind == EndCut || kind == EndTimedOut) {
		return placement.Ambiguous
	}
	return head
}

func isTimeout(cause error) bool {
	return errors.Is(cause, context.DeadlineExceeded) || errors.Is(cause, placement.ErrDispatchTimeout)
}
