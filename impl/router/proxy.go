package router

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/textproto"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/placementlab/placement/impl/affinity"
	"github.com/placementlab/placement/impl/httpoutcome"
	"github.com/placementlab/placement/impl/picker"
	"github.com/placementlab/placement/impl/placement"
)

// DefaultRankHeader is the header the Proxy names a data-parallel rank in
// (vLLM's data-parallel API server reads X-data-parallel-rank; header
// names are case-insensitive).
const DefaultRankHeader = "X-Data-Parallel-Rank"

// DefaultMaxBodyBytes bounds a request body the Proxy buffers (it must
// keep it to send it again after a refusal) when Proxy.MaxBodyBytes is 0.
const DefaultMaxBodyBytes = 16 << 20

// DefaultBodyReadTimeout bounds the reading of a request body when
// Proxy.BodyReadTimeout is 0.
const DefaultBodyReadTimeout = 30 * time.Second

// ErrBodyTooLarge: a request body is over Proxy.MaxBodyBytes (413).
var ErrBodyTooLarge = errors.New("router: request body too large")

// ErrBodyTimeout: a request body was not read within
// Proxy.BodyReadTimeout (408).
var ErrBodyTimeout = errors.New("router: request body too slow")

// hopHeaders are the hop-by-hop headers a proxy does not forward.
var hopHeaders = []string{"Connection", "Proxy-Connection", "Keep-Alive", "Proxy-Authenticate",
	"Proxy-Authorization", "Te", "Trailer", "Transfer-Encoding", "Upgrade"}

// Proxy is an http.Handler that routes each request through a Driver: it
// reads the session from the request's headers (Layer.RequestFromHeader
// under Namespace), forwards the request to the chosen worker with
// impl/httpoutcome (the attempt id in httpoutcome's attempt header, the
// rank in RankHeader), classifies the answer, retries refusals on another
// worker (the body is buffered, up to MaxBodyBytes), streams the accepted
// response back, and answers errors with the status and Retry-After
// httpoutcome maps them to.
//
// Its rules: a client's own attempt or rank header never reaches a worker
// (the Proxy removes them, and sets them only for the dispatch that needs
// them); the request's path (escaped as it came: %2F stays %2F) and query
// are appended to Upstream's URL; hop-by-hop headers, and those the
// client's Connection header names, are not forwarded; a body over
// MaxBodyBytes is a 413, one not read within BodyReadTimeout a 408, and
// nothing is sent; a response whose relay fails after its headers is
// aborted (see ServeHTTP).
type Proxy struct {
	// Driver runs the requests (required).
	Driver *Driver
	// Namespace returns the trusted namespace of a request (its model,
	// tenant: from the route or the authenticated caller, never from the
	// session id). Nil: the zero Namespace.
	Namespace func(*http.Request) affinity.Namespace
	// Phase is the table the Proxy's bindings live in (PhaseDecode, the
	// zero value, for aggregated serving).
	Phase affinity.Phase
	// Upstream returns the base URL of a target's worker (required).
	Upstream func(affinity.Target) *url.URL
	// Client forwards and classifies (nil: an httpoutcome.Client over a
	// shared clone of http.DefaultTransport with a ResponseHeaderTimeout
	// of placement.DefaultDispatchTimeout and an IdleConnTimeout of
	// DefaultIdleConnTimeout, and httpoutcome's default connect bound). A
	// later turn carries no dispatch deadline (only a placing dispatch has
	// one), so a worker that hangs on it would hold the request until the
	// client leaves: a transport of your own needs a ResponseHeaderTimeout
	// (its answer is then Ambiguous: a 504, the binding kept; the layer's
	// DispatchTimeout is the natural value) and an IdleConnTimeout below
	// the workers' keep-alive. NewHTTP sets all of these from its config.
	Client *httpoutcome.Client
	// RankHeader names the data-parallel rank header ("" means
	// DefaultRankHeader).
	RankHeader string
	// MaxBodyBytes bounds the buffered request body (0 means
	// DefaultMaxBodyBytes).
	MaxBodyBytes int64
	// PickerRequest, if set, builds what the pipeline sees of a request
	// (for example its prefix blocks' hashes) from the request, its body
	// and its session key.
	PickerRequest func(r *http.Request, body []byte, key affinity.Key) *picker.Request
	// BodyReadTimeout bounds the reading of a request's body, from when
	// the Proxy starts reading it: a body trickled slower is cut and answered 408, and
	// nothing is sent (0 means DefaultBodyReadTimeout, negative none). It
	// is a deadline on the client's connection (http.ResponseController),
	// lifted once the body is read, so a long streamed answer is not cut.
	BodyReadTimeout time.Duration

	// Health, if set, is told every send's outcome (Health.Observe), for
	// passive ejection: a worker that refuses, or whose connects fail,
	// HealthConfig.EjectAfter times in a row is failed until its check
	// passes. A send cut short because the client left is not told.
	Health *Health
	// Done, if set, is called at the end of every request with what
	// became of it (logging, metrics).
	Done func(r *http.Request, res Result, err error)

	cut atomic.Uint64 // see ProxyStats.Cut
}

// ProxyStats counts what a Proxy did beyond its Driver's DriverStats.
type ProxyStats struct {
	// Cut: accepted responses whose worker's stream was cut or timed out
	// after their headers were relayed (httpoutcome.EndCut,
	// EndTimedOut). The Proxy aborts such a response (see Proxy), so the
	// client sees the truncation.
	Cut uint64
}

// Stats returns the Proxy's counters (cumulative).
func (p *Proxy) Stats() ProxyStats { return ProxyStats{Cut: p.cut.Load()} }

// ServeHTTP routes one request (see Proxy). When relaying a response
// fails after its headers were written (the worker's stream was cut, or
// the client left), it calls Done, then panics with http.ErrAbortHandler,
// as httputil.ReverseProxy does: the server then closes the connection
// (HTTP/1) or resets the stream (HTTP/2) without ending the response
// properly, so the client sees the truncation instead of a clean,
// complete answer. A middleware around the Proxy must let that panic
// through.
func (p *Proxy) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	var abort bool
	res, err := p.serve(w, r, &abort)
	if p.Done != nil {
		p.Done(r, res, err)
	}
	if abort {
		panic(http.ErrAbortHandler)
	}
}

func (p *Proxy) serve(w http.ResponseWriter, r *http.Request, abort *bool) (Result, error) {
	if p.Driver == nil || p.Upstream == nil {
		err := fmt.Errorf("%w: Proxy needs a Driver and an Upstream", ErrInvalidConfig)
		writeError(w, err)
		return Result{}, err
	}
	var ns affinity.Namespace
	if p.Namespace != nil {
		ns = p.Namespace(r)
	}
	req, err := p.Driver.Layer().RequestFromHeader(ns, r.Header, p.Phase)
	if err != nil {
		writeError(w, err)
		return Result{}, err
	}
	body, err := p.readBody(w, r)
	if err != nil {
		writeError(w, err)
		return Result{}, err
	}
	var preq *picker.Request
	if p.PickerRequest != nil {
		preq = p.PickerRequest(r, body, req.Session)
	}
	var relayed bool
	res, err := p.Driver.Do(r.Context(), req, preq, p.sender(w, r, body, &relayed, abort))
	if err != nil && !relayed {
		writeError(w, err)
	}
	return res, err
}

// writeError answers err: httpoutcome's mapping, and 413 for a body over
// the limit, 408 for one too slow, 400 for one that could not be read.
func writeError(w http.ResponseWriter, err error) {
	var code int
	switch {
	case errors.Is(err, ErrBodyTooLarge):
		code = http.StatusRequestEntityTooLarge
	case errors.Is(err, ErrBodyTimeout):
		code = http.StatusRequestTimeout
		w.Header().Set("Connection", "close")
	case errors.Is(err, errBadBody):
		code = http.StatusBadRequest
	default:
		httpoutcome.WriteError(w, err)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	_, _ = fmt.Fprintf(w, `{"error":{"message":%q,"type":"invalid_request_error","code":%d}}`+"\n", http.StatusText(code), code)
}

// errBadBody: the request's body could not be read.
var errBadBody = errors.New("router: reading the request body failed")

func (p *Proxy) readBody(w http.ResponseWriter, r *http.Request) ([]byte, error) {
	if r.Body == nil || r.Body == http.NoBody {
		return nil, nil
	}
	defer r.Body.Close()
	limit := p.MaxBodyBytes
	if limit <= 0 {
		limit = DefaultMaxBodyBytes
	}
	timeout := p.BodyReadTimeout
	if timeout == 0 {
		timeout = DefaultBodyReadTimeout
	}
	rc := http.NewResponseController(w)
	// Unsupported (a ResponseWriter that is no server's): no bound.
	bounded := timeout > 0 && rc.SetReadDeadline(time.Now().Add(timeout)) == nil
	body, err := io.ReadAll(io.LimitReader(r.Body, limit+1))
	if bounded && err == nil {
		// Lifted only once the body is read: after a timeout it stays, so
		// that closing the body does not wait for the rest (the server
		// closes the connection after the 408).
		_ = rc.SetReadDeadline(time.Time{})
	}
	var ne net.Error
	switch {
	case err != nil && errors.As(err, &ne) && ne.Timeout():
		return nil, fmt.Errorf("%w: not read within %v: %w", ErrBodyTimeout, timeout, err)
	case err != nil:
		return nil, fmt.Errorf("%w: %w", errBadBody, err)
	case int64(len(body)) > limit:
		return nil, fmt.Errorf("%w: over %d bytes", ErrBodyTooLarge, limit)
	}
	return body, nil
}

// sender returns the Send that forwards r (with body) and relays the
// worker's answer to w: an accepted one, or an ambiguous one that came with
// a response (a 502 or 504 from a proxy in front of the engine); it sets
// *relayed when it relays, and *abort when the relay failed.
func (p *Proxy) sender(w http.ResponseWriter, r *http.Request, body []byte, relayed, abort *bool) Send {
	client := p.Client
	if client == nil {
		client = defaultClient()
	}
	rankHeader := p.RankHeader
	if rankHeader == "" {
		rankHeader = DefaultRankHeader
	}
	return func(ctx context.Context, d Dispatch) (placement.Outcome, Relay, error) {
		base := p.Upstream(d.Target)
		if base == nil {
			return placement.DefinitelyNotAccepted, nil, fmt.Errorf("router: no upstream URL for %s", d.Target)
		}
		u := *base
		u.Path, u.RawPath = joinURLPath(base, r.URL)
		u.RawQuery = r.URL.RawQuery
		out, err := http.NewRequestWithContext(ctx, r.Method, u.String(), bytes.NewReader(body))
		if err != nil {
			return placement.DefinitelyNotAccepted, nil, err
		}
		out.Header = r.Header.Clone()
		removeHopHeaders(out.Header)
		out.Header.Del(rankHeader)
		if d.Target.HasRank {
			out.Header.Set(rankHeader, strconv.Itoa(d.Target.Rank))
		}
		out.GetBody = nil // never re-sent by the transport
		resp, o, err := client.Do(ctx, out, d.AttemptID, nil)
		if p.Health != nil && r.Context().Err() == nil {
			p.Health.Observe(d.Target.Worker, o)
		}
		if err != nil {
			return o, nil, err
		}
		relay := func() error {
			*relayed = true
			err := httpoutcome.Relay(w, resp)
			if err != nil {
				*abort = true
				if e, ok := resp.End(); ok && (e.Kind == httpoutcome.EndCut || e.Kind == httpoutcome.EndTimedOut) {
					p.cut.Add(1)
				}
			}
			return err
		}
		switch o {
		case placement.Accepted:
			return o, relay, nil
		case placement.Ambiguous:
			return o, relay, fmt.Errorf("router: %s answered %s", d.Target, resp.Status)
		}
		resp.Body.Close() // a refusal: the request goes elsewhere
		return o, nil, fmt.Errorf("router: %s refused: %s", d.Target, resp.Status)
	}
}

// removeHopHeaders removes the hop-by-hop headers from h: those the
// Connection header names (RFC 9110 section 7.6.1), then the fixed ones.
func removeHopHeaders(h http.Header) {
	for _, f := range h.Values("Connection") {
		for _, name := range strings.Split(f, ",") {
			if name = textproto.TrimString(name); name != "" {
				h.Del(name)
			}
		}
	}
	for _, k := range hopHeaders {
		h.Del(k)
	}
}

// joinURLPath joins a's and b's paths, keeping their escaped forms (a %2F
// stays %2F): the Path and RawPath of the upstream URL (as
// httputil.ReverseProxy does).
func joinURLPath(a, b *url.URL) (path, rawpath string) {
	if a.RawPath == "" && b.RawPath == "" {
		return singleJoiningSlash(a.Path, b.Path), ""
	}
	apath, bpath := a.EscapedPath(), b.EscapedPath()
	aslash, bslash := strings.HasSuffix(apath, "/"), strings.HasPrefix(bpath, "/")
	switch {
	case aslash && bslash:
		return a.Path + b.Path[1:], apath + bpath[1:]
	case !aslash && !bslash:
		return a.Path + "/" + b.Path, apath + "/" + bpath
	}
	return a.Path + b.Path, apath + bpath
}

// defaultClient is a Proxy's Client when it has none (see Proxy.Client).
var defaultClient = sync.OnceValue(func() *httpoutcome.Client {
	tr := http.DefaultTransport.(*http.Transport).Clone()
	tr.ResponseHeaderTimeout = placement.DefaultDispatchTimeout
	tr.IdleConnTimeout = DefaultIdleConnTimeout
	return &httpoutcome.Client{Transport: tr}
})

func singleJoiningSlash(a, b string) string {
	switch as, bs := len(a) > 0 && a[len(a)-1] == '/', len(b) > 0 && b[0] == '/'; {
	case as && bs:
		return a + b[1:]
	case !as && !bs && b != "":
		return a + "/" + b
	}
	return a + b
}
