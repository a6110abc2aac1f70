package router

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"

	"github.com/placementlab/placement/impl/affinity"
	"github.com/placementlab/placement/impl/picker"
	"github.com/placementlab/placement/impl/placement"
)

// DefaultMaxAttempts bounds the sends of one request when
// Config.MaxAttempts is zero.
const DefaultMaxAttempts = 3

// Sentinel errors of the driver. The layer's own errors are returned
// unchanged (match them with the affinity and placement sentinels).
var (
	// ErrRefused: every target the request was sent to refused it
	// (DefinitelyNotAccepted), and no other was left or MaxAttempts was
	// reached. The request never ran: the client may send it again (see
	// *RefusedError). It also matches placement.ErrNotAccepted.
	ErrRefused = errors.New("router: every attempt was refused")
	// ErrRelay: the response was accepted but relaying its body failed
	// (see *RelayError). Placement-wise the request was served.
	ErrRelay = errors.New("router: relaying the response failed")
	// ErrInvalidConfig: New was given an invalid Config.
	ErrInvalidConfig = errors.New("router: invalid config")
)

// RefusedError says every attempt of a request was refused.
type RefusedError struct {
	// Refused lists the targets that refused, in order.
	Refused []affinity.Target
	// Err is the last refusal's reason, as Send gave it (may be nil).
	Err error
}

// Error describes the error.
func (e *RefusedError) Error() string {
	if e.Err != nil {
		return fmt.Sprintf("router: %d attempt(s) refused, the last: %v", len(e.Refused), e.Err)
	}
	return fmt.Sprintf("router: %d attempt(s) refused", len(e.Refused))
}

// Is reports whether target is ErrRefused or placement.ErrNotAccepted.
func (e *RefusedError) Is(target error) bool {
	return target == ErrRefused || target == placement.ErrNotAccepted
}

// Unwrap returns the last refusal's reason.
func (e *RefusedError) Unwrap() error { return e.Err }

// CancelledError says the request's context ended after a refusal, so the
// driver did not try another target. It matches placement.ErrCancelled
// and unwraps to the context's cause.
type CancelledError struct {
	// Refused lists the targets that refused, in order.
	Refused []affinity.Target
	// Cause is context.Cause of the request's context.
	Cause error
}

// Error describes the error.
func (e *CancelledError) Error() string {
	return fmt.Sprintf("router: request cancelled after %d refused attempt(s): %v", len(e.Refused), e.Cause)
}

// Is reports whether target is placement.ErrCancelled.
func (e *CancelledError) Is(target error) bool { return target == placement.ErrCancelled }

// Unwrap returns the context's cause.
func (e *CancelledError) Unwrap() error { return e.Cause }

// RelayError says relaying an accepted response failed (the client left,
// or the worker's stream was cut after its headers).
type RelayError struct {
	Target affinity.Target
	Err    error
}

// Error describes the error.
func (e *RelayError) Error() string {
	return fmt.Sprintf("router: relaying the response of %s: %v", e.Target, e.Err)
}

// Is reports whether target is ErrRelay.
func (e *RelayError) Is(target error) bool { return target == ErrRelay }

// Unwrap returns the relay's error.
func (e *RelayError) Unwrap() error { return e.Err }

// Dispatch is what Send is told about one attempt.
type Dispatch struct {
	// Target is where the request goes: a worker, and a data-parallel rank
	// when Target.HasRank.
	Target affinity.Target
	// AttemptID is the attempt id of a dispatch that places the session
	// (0 otherwise): send it to the worker in a header of your own (never
	// Idempotency-Key: see affinity.Attempt.ID), so a resolver can ask the
	// worker about it.
	AttemptID uint64
	// Hit: the attempt is a later turn on the session's binding.
	Hit bool
	// Attempt counts the request's sends, from 1.
	Attempt int
}

// Relay streams the rest of an accepted response to the client. The
// driver calls it once, after reporting the outcome, while the attempt's
// context is still live, and cancels that context when it returns.
type Relay func() error

// Send is the transport: it sends the request to d.Target under ctx (the
// attempt's context: bounded by the dispatch's deadline for a dispatch
// that places the session) and returns at the worker's first answer with
// the outcome:
//
//   - placement.Accepted: the worker took the request (its response
//     headers came); relay streams the rest (nil: nothing to stream);
//   - placement.DefinitelyNotAccepted: the worker refused, or the request
//     never reached it; the driver may send it elsewhere;
//   - placement.Ambiguous: a timeout or a cut after the request was
//     written: it is never sent again.
//
// err says why an outcome other than Accepted came (a status, a
// transport error): the driver reports it in Result.SendErr and in a
// *RefusedError. Send releases what it holds for an outcome other than
// Accepted itself; the driver still calls a non-nil relay once, whatever
// the outcome, so give none then. An outcome outside the three counts as
// Ambiguous.
type Send func(ctx context.Context, d Dispatch) (out placement.Outcome, relay Relay, err error)

// Config configures a Driver.
type Config struct {
	// Layer is the affinity layer (required).
	Layer *affinity.Layer
	// Pipeline chooses among several eligible candidates; nil:
	// picker.Default().
	Pipeline *picker.Pipeline
	// Candidates returns the targets of a phase with their load signals,
	// taken as given. Nil: every rank of every member that is up (a worker
	// without ranks as a worker-only target), with InFlight counted by the
	// driver, Bound read from the layer and Overloaded from MaxInFlight.
	Candidates func(affinity.Phase) []picker.Candidate
	// MaxInFlight, with the default Candidates, marks a target overloaded
	// at that many requests in flight (0: never).
	MaxInFlight int
	// Allow restricts the workers a request may go to (nil: all).
	Allow func(worker string) bool
	// MaxAttempts bounds the sends of one request (DefaultMaxAttempts if
	// zero).
	MaxAttempts int
	// MaxPerSession bounds the requests of one session in flight through
	// the driver at once (0: no bound): a request over it waits in line,
	// in the order the session's requests came, until a slot frees or its
	// context ends (placement.ErrCancelled), or, when SessionQueue of the
	// session's requests already wait, is refused at once with a
	// *SessionBusyError (nothing started or sent). MaxPerSession 1 runs a
	// session's turns one at a time. A request without a session id is not
	// bounded.
	MaxPerSession int
	// SessionQueue bounds the requests of one session waiting for a slot
	// (0: none wait; every request over MaxPerSession is refused). It needs
	// MaxPerSession.
	SessionQueue int
}

// Driver runs one request at a time per call to Do: the affinity layer's
// request loop (Start, Eligible, the choice, Dispatch, the send, Complete,
// a retry elsewhere after a refusal, the relay, Done), with in-flight
// counts per target. It is safe for concurrent use.
type Driver struct {
	cfg      Config
	pipe     *picker.Pipeline
	inflight sync.Map // affinity.Target -> *atomic.Int64
	sessions sessionLimit
	stats    driverCounters
}

type driverCounters struct {
	requests, served, retries, refused, unknown, failed, relayFailed atomic.Uint64
}

// DriverStats counts what Do returned. The counters are cumulative.
type DriverStats struct {
	// Requests: calls to Do; Served: requests accepted by a worker.
	Requests, Served uint64
	// Retries: sends after a refusal; Refused: requests every attempt of
	// which was refused (*RefusedError).
	Retries, Refused uint64
	// Unknown: requests whose outcome is unknown (timeouts, cut streams:
	// affinity.ErrOutcomeUnknown; a timed-out placing dispatch whose
	// quarantine a resolver settled before its own outcome came:
	// placement.ErrFenced); Failed: other errors (the layer's typed
	// errors, cancellations).
	Unknown, Failed uint64
	// RelayFailed: served requests whose relay failed (*RelayError).
	RelayFailed uint64
	// InFlight: requests in flight now, over every target.
	InFlight int64
	// SessionWaits: requests that waited for a slot of their session
	// (Config.MaxPerSession); SessionRefused: requests refused by it
	// (*SessionBusyError, not counted in Failed).
	SessionWaits, SessionRefused uint64
	// SessionWaiting: requests waiting for a slot now; Sessions: sessions
	// holding a slot now (the per-session limit's memory).
	SessionWaiting int64
	Sessions       int
}

// New returns a driver for cfg.
func New(cfg Config) (*Driver, error) {
	switch {
	case cfg.Layer == nil:
		return nil, fmt.Errorf("%w: no Layer", ErrInvalidConfig)
	case cfg.MaxAttempts < 0 || cfg.MaxInFlight < 0 || cfg.MaxPerSession < 0 || cfg.SessionQueue < 0:
		return nil, fmt.Errorf("%w: negative MaxAttempts, MaxInFlight, MaxPerSession or SessionQueue", ErrInvalidConfig)
	case cfg.SessionQueue > 0 && cfg.MaxPerSession == 0:
		return nil, fmt.Errorf("%w: SessionQueue without MaxPerSession", ErrInvalidConfig)
	}
	if cfg.MaxAttempts == 0 {
		cfg.MaxAttempts = DefaultMaxAttempts
	}
	d := &Driver{cfg: cfg, pipe: cfg.Pipeline, sessions: sessionLimit{max: cfg.MaxPerSession, queue: cfg.SessionQueue}}
	if d.pipe == nil {
		d.pipe = picker.Default()
	}
	if err := d.pipe.Validate(); err != nil {
		return nil, fmt.Errorf("%w: %w", ErrInvalidConfig, err)
	}
	return d, nil
}

// Layer returns the driver's affinity layer.
func (d *Driver) Layer() *affinity.Layer { return d.cfg.Layer }

// Result says what became of a request.
type Result struct {
	// Target is the last attempt's target (the zero Target if none was
	// sent).
	Target affinity.Target
	// Served: a worker accepted the request.
	Served bool
	// Hit: the last attempt was a later turn on the session's binding.
	Hit bool
	// Placed: the request bound its session (a placing dispatch accepted).
	Placed bool
	// Attempts: the sends made (refused ones included).
	Attempts int
	// AttemptID: the last attempt's id (0 unless it placed the session).
	AttemptID uint64
	// Unpinned: why the last attempt was routed unpinned (CauseNone if it
	// was not).
	Unpinned affinity.Cause
	// Refused: the targets that refused the request, in order.
	Refused []affinity.Target
	// SendErr: the last Send's error (why its outcome was not Accepted).
	SendErr error
}

// Do runs one request: it starts the request's turn, chooses a target
// among the eligible candidates (the one left, or the pipeline's pick),
// dispatches, sends, reports the outcome and relays the response. On a
// refusal (DefinitelyNotAccepted) it sends the request to another worker,
// never to a worker that refused it already, at most MaxAttempts sends in
// all; an unknown outcome is never sent again. preq is what the pipeline
// sees (nil: the session's key alone).
//
// Its rules:
//
//   - A refused attempt excludes its worker, every rank of it, from the
//     request's later attempts: a refusal is the worker's answer.
//   - The layer's errors come back unchanged (*affinity.PinError,
//     *affinity.QuarantinedError, *affinity.IneligibleError,
//     *affinity.UnknownOutcomeError, placement.ErrCancelled, ...), so
//     errors.Is and errors.As work on them; a later turn's refusal moves
//     the binding by the layer's rule L1 and the request is placed anew.
//   - When every attempt was refused, and no other target is eligible or
//     MaxAttempts is reached, the error is a *RefusedError (ErrRefused,
//     placement.ErrNotAccepted): the request never ran.
//   - A dispatch the layer refuses because the target's worker failed or
//     left since Eligible (*affinity.IneligibleError) excludes that worker
//     and counts toward MaxAttempts, without a send.
//   - A refusal after ctx ended is not tried elsewhere: the error is a
//     *CancelledError (placement.ErrCancelled).
//   - Each attempt counts as in flight to its target from its dispatch
//     until its relay returns (or its outcome, without a relay): once.
//   - The pipeline observes every send's outcome (Pipeline.Observe).
//   - A relay that fails after an Accepted outcome returns a *RelayError
//     with Result.Served true.
//   - With Config.MaxPerSession, a session's request over the bound waits
//     for a slot, in arrival order, before its turn starts, or is refused
//     with a *SessionBusyError (ErrSessionBusy, placement.ErrWouldWait).
func (d *Driver) Do(ctx context.Context, req affinity.Request, preq *picker.Request, send Send) (Result, error) {
	d.stats.requests.Add(1)
	var res Result
	leave, err := d.sessions.enter(ctx, req.Session)
	if err == nil {
		func() {
			defer leave()
			res, err = d.do(ctx, req, preq, send)
		}()
	}
	switch {
	case errors.Is(err, ErrSessionBusy):
		// Counted by the limit (SessionRefused).
	case err == nil:
		d.stats.served.Add(1)
	case errors.Is(err, ErrRelay):
		d.stats.served.Add(1)
		d.stats.relayFailed.Add(1)
	case errors.Is(err, ErrRefused):
		d.stats.refused.Add(1)
	case errors.Is(err, affinity.ErrOutcomeUnknown), errors.Is(err, placement.ErrFenced):
		// Fenced: the dispatch timed out and its quarantine was settled
		// before its own outcome came; for this request it is unknown.
		d.stats.unknown.Add(1)
	default:
		d.stats.failed.Add(1)
	}
	return res, err
}

func (d *Driver) do(ctx context.Context, req affinity.Request, preq *picker.Request, send Send) (Result, error) {
	var res Result
	if send == nil {
		return res, fmt.Errorf("%w: nil Send", placement.ErrInvalidArgument)
	}
	// sc: the request's reused buffers (and its default picker.Request),
	// so that a hit allocates none of them.
	sc := scratchPool.Get().(*scratch)
	defer sc.put()
	if preq == nil {
		sc.preq = picker.Request{Key: req.Session}
		preq = &sc.preq
	}
	turn, err := d.cfg.Layer.Start(ctx, req)
	if err != nil {
		return res, err
	}
	defer turn.Done()
	var excluded []string // workers this request may no longer go to
	for tries := 1; ; tries++ {
		target, err := d.choose(sc, turn, req.Phase, preq, excluded)
		if err != nil {
			if len(res.Refused) > 0 {
				return res, &RefusedError{Refused: res.Refused, Err: res.SendErr}
			}
			return res, err
		}
		a, err := turn.Dispatch(target)
		switch {
		case err != nil && isIneligible(err) && errors.Is(err, affinity.ErrPinnedWorkerGone) && tries < d.cfg.MaxAttempts:
			excluded = append(excluded, target.Worker) // it failed or left since Eligible
			continue
		case err != nil:
			if len(res.Refused) > 0 && errors.Is(err, affinity.ErrPinnedWorkerGone) {
				return res, &RefusedError{Refused: res.Refused, Err: res.SendErr}
			}
			return res, err
		}
		res.Target, res.Hit, res.AttemptID, res.Unpinned = a.Target(), a.Hit(), a.ID(), turn.Unpinned()
		res.Attempts++
		placing := turn.Placing()
		if res.Attempts > 1 {
			d.stats.retries.Add(1)
		}
		refused, err := d.attempt(ctx, a, &res, preq, send)
		if !refused {
			if err == nil || errors.Is(err, ErrRelay) {
				_, bound := turn.Bound()
				res.Placed = placing && bound
			}
			return res, err
		}
		res.Refused = append(res.Refused, a.Target())
		excluded = append(excluded, a.Target().Worker)
		if ctx.Err() != nil {
			// The caller is gone (a refusal then is usually the cut
			// send's): trying elsewhere helps nobody.
			return res, &CancelledError{Refused: res.Refused, Cause: context.Cause(ctx)}
		}
		if tries >= d.cfg.MaxAttempts {
			return res, &RefusedError{Refused: res.Refused, Err: res.SendErr}
		}
	}
}

// attempt sends one dispatched attempt, reports its outcome and relays the
// response. refused reports a DefinitelyNotAccepted outcome the request
// may retry elsewhere.
func (d *Driver) attempt(ctx context.Context, a affinity.Attempt, res *Result, preq *picker.Request, send Send) (bool, error) {
	n := d.counter(a.Target())
	n.Add(1)
	// The attempt runs on this goroutine: a flag, not a sync.Once (whose
	// closure would be allocated per attempt), makes the release once.
	released := false
	release := func() {
		if !released {
			released = true
			n.Add(-1)
		}
	}
	defer release()

	actx, cancel := a.Context(ctx)
	defer cancel()
	out, relay, serr := send(actx, Dispatch{Target: a.Target(), AttemptID: a.ID(), Hit: a.Hit(), Attempt: res.Attempts})
	if out < placement.Accepted || out > placement.Ambiguous {
		out = placement.Ambiguous // unknown: never replayed
	}
	if out != placement.Accepted {
		res.SendErr = serr
	} else {
		res.SendErr, res.Served = nil, true
	}
	d.pipe.Observe(preq, a.Target(), out)
	err := a.Complete(out)
	if relay != nil {
		if rerr := relay(); rerr != nil && out == placement.Accepted && err == nil {
			err = &RelayError{Target: a.Target(), Err: rerr}
		}
	}
	release()
	if errors.Is(err, placement.ErrNotAccepted) {
		return true, nil
	}
	return false, err
}

// choose returns the target of the request's next attempt: the one
// eligible candidate left, or the pipeline's pick among several.
func (d *Driver) choose(sc *scratch, turn affinity.Turn, p affinity.Phase, preq *picker.Request, excluded []string) (affinity.Target, error) {
	all := d.candidates(sc, p)
	if len(excluded) > 0 {
		kept := all[:0]
		for _, c := range all {
			if !contains(excluded, c.Target.Worker) {
				kept = append(kept, c)
			}
		}
		all = kept
	}
	acs := sc.acs[:0]
	for _, c := range all {
		acs = append(acs, affinity.Candidate{Target: c.Target, Overloaded: c.Overloaded})
	}
	sc.acs = acs
	el, err := turn.Eligible(acs, d.cfg.Allow)
	if err != nil {
		return affinity.Target{}, err
	}
	if len(el) == 1 {
		return el[0].Target, nil
	}
	// Eligible keeps the candidates' order: walk both to keep the loads.
	cs := make([]picker.Candidate, 0, len(el))
	j := 0
	for _, e := range el {
		for j < len(all) && all[j].Target != e.Target {
			j++
		}
		if j < len(all) {
			cs = append(cs, all[j])
			j++
		}
	}
	d.withBound(p, cs)
	c, err := d.pipe.Pick(preq, cs)
	if err != nil {
		return affinity.Target{}, err
	}
	return c.Target, nil
}

func contains(ws []string, w string) bool {
	for _, x := range ws {
		if x == w {
			return true
		}
	}
	return false
}

// candidates returns the phase's candidates (see Config.Candidates). The
// default ones carry Overloaded (and, with MaxInFlight, InFlight); their
// Bound, and otherwise their InFlight, are filled by withBound, only when
// the pipeline runs (a hit needs no loads).
func (d *Driver) candidates(sc *scratch, p affinity.Phase) []picker.Candidate {
	if d.cfg.Candidates != nil {
		sc.all = append(sc.all[:0], d.cfg.Candidates(p)...)
		return sc.all
	}
	sc.ts = d.cfg.Layer.AppendTargets(sc.ts[:0])
	out := sc.all[:0]
	for _, t := range sc.ts {
		c := picker.Candidate{Target: t}
		if d.cfg.MaxInFlight > 0 {
			// Overloaded needs the count now; otherwise withBound reads
			// it, only when the pipeline runs (a hit needs no loads).
			c.InFlight = d.InFlight(t)
			c.Overloaded = c.InFlight >= d.cfg.MaxInFlight
		}
		out = append(out, c)
	}
	sc.all = out
	return out
}

// scratch is one request's reused buffers: the targets, the candidates
// with their loads, the layer's candidates, and the default
// picker.Request. Do takes one from scratchPool and puts it back when the
// request ends; nothing of it outlives Do (Result holds none of it).
type scratch struct {
	ts   []affinity.Target
	all  []picker.Candidate
	acs  []affinity.Candidate
	preq picker.Request
}

var scratchPool = sync.Pool{New: func() any { return new(scratch) }}

// maxScratch bounds the buffers kept in the pool: a membership of
// thousands of targets does not pin its lists in every pooled scratch.
const maxScratch = 1024

// put returns sc to the pool, dropping what refers to the request.
func (sc *scratch) put() {
	if cap(sc.ts) > maxScratch || cap(sc.all) > maxScratch || cap(sc.acs) > maxScratch {
		return
	}
	sc.preq = picker.Request{}
	clear(sc.all)
	scratchPool.Put(sc)
}

// isIneligible reports whether err is an *affinity.IneligibleError (apart
// from do, so that the variable errors.As needs is allocated only when an
// error came).
func isIneligible(err error) bool {
	var ie *affinity.IneligibleError
	return errors.As(err, &ie)
}

// withBound fills the default candidates' Bound from the layer, and
// their InFlight when candidates left it (MaxInFlight zero).
func (d *Driver) withBound(p affinity.Phase, cs []picker.Candidate) {
	if d.cfg.Candidates != nil {
		return
	}
	for i := range cs {
		cs[i].Bound = d.cfg.Layer.Bound(p, cs[i].Target)
		if d.cfg.MaxInFlight == 0 {
			cs[i].InFlight = d.InFlight(cs[i].Target)
		}
	}
}

func (d *Driver) counter(t affinity.Target) *atomic.Int64 {
	if v, ok := d.inflight.Load(t); ok {
		return v.(*atomic.Int64)
	}
	v, _ := d.inflight.LoadOrStore(t, new(atomic.Int64))
	return v.(*atomic.Int64)
}

// InFlight returns the requests in flight to t now (exactly t: a
// worker-only target's count is its own, apart from its ranks').
func (d *Driver) InFlight(t affinity.Target) int {
	if v, ok := d.inflight.Load(t); ok {
		return int(v.(*atomic.Int64).Load())
	}
	return 0
}

// Stats returns the driver's counters.
func (d *Driver) Stats() DriverStats {
	s := DriverStats{
		Requests: d.stats.requests.Load(), Served: d.stats.served.Load(),
		Retries: d.stats.retries.Load(), Refused: d.stats.refused.Load(),
		Unknown: d.stats.unknown.Load(), Failed: d.stats.failed.Load(),
		RelayFailed:  d.stats.relayFailed.Load(),
		SessionWaits: d.sessions.waits.Load(), SessionRefused: d.sessions.refused.Load(),
		SessionWaiting: d.sessions.waiting.Load(), Sessions: d.sessions.sessions(),
	}
	d.inflight.Range(func(_, v any) bool {
		s.InFlight += v.(*atomic.Int64).Load()
		return true
	})
	return s
}
