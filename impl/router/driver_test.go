package router_test

import (
	"context"
	"errors"
	"net/http"
	"sync"
	"testing"
	"time"

	"github.com/placementlab/placement/impl/affinity"
	"github.com/placementlab/placement/impl/httpoutcome"
	"github.com/placementlab/placement/impl/picker"
	"github.com/placementlab/placement/impl/placement"
	"github.com/placementlab/placement/impl/router"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// newLayer returns a layer on a manual clock with workers ids joined
// (worker-only targets unless ranks > 0).
func newLayer(t *testing.T, cfg affinity.Config, ranks int, ids ...string) *affinity.Layer {
	t.Helper()
	if cfg.Clock == nil {
		cfg.Clock = placement.NewManualClock(0)
	}
	l, err := affinity.New(cfg)
	require.NoError(t, err)
	t.Cleanup(func() { _ = l.Close() })
	for _, id := range ids {
		_, err := l.Join(affinity.Worker{ID: id, Identity: "boot-1", Ranks: ranks})
		require.NoError(t, err)
	}
	return l
}

func newDriver(t *testing.T, cfg router.Config) *router.Driver {
	t.Helper()
	d, err := router.New(cfg)
	require.NoError(t, err)
	return d
}

func session(t *testing.T, id string) affinity.Request {
	t.Helper()
	k, err := affinity.Namespace{Model: "m"}.Session(id)
	require.NoError(t, err)
	return affinity.Request{Session: k}
}

// recorder is a fake transport: it answers each send with outcome(d) and
// records what it was sent, checking the in-flight count of the target.
type recorder struct {
	t       *testing.T
	d       *router.Driver
	mu      sync.Mutex
	sent    []router.Dispatch
	outcome func(router.Dispatch) placement.Outcome
	relays  int
}

func (r *recorder) send(ctx context.Context, d router.Dispatch) (placement.Outcome, router.Relay, error) {
	r.mu.Lock()
	r.sent = append(r.sent, d)
	r.mu.Unlock()
	assert.Equal(r.t, 1, r.d.InFlight(d.Target), "in flight during the send")
	o := r.outcome(d)
	if o != placement.Accepted {
		return o, nil, errors.New("worker said no")
	}
	return o, func() error {
		assert.Equal(r.t, 1, r.d.InFlight(d.Target), "in flight during the relay")
		assert.NoError(r.t, ctx.Err(), "the relay runs under a live context")
		r.relays++
		return nil
	}, nil
}

func (r *recorder) workers() []string {
	var ws []string
	for _, d := range r.sent {
		ws = append(ws, d.Target.Worker)
	}
	return ws
}

func accept(router.Dispatch) placement.Outcome { return placement.Accepted }

func assertNoneInFlight(t *testing.T, d *router.Driver, l *affinity.Layer) {
	t.Helper()
	assert.Zero(t, d.Stats().InFlight)
	for _, w := range l.Workers() {
		assert.Zero(t, d.InFlight(affinity.WorkerOnly(w.ID)), w.ID)
		for r := w.FirstRank; r < w.FirstRank+w.Ranks; r++ {
			assert.Zero(t, d.InFlight(affinity.Ranked(w.ID, r)), w.ID)
		}
	}
}

// A refusal (DefinitelyNotAccepted) sends the request to another worker,
// never one that refused it already; the accepting one binds the session.
func TestDoRetriesRefusalElsewhere(t *testing.T) {
	l := newLayer(t, affinity.Config{}, 0, "a", "b", "c")
	d := newDriver(t, router.Config{Layer: l})
	rec := &recorder{t: t, d: d}
	rec.outcome = func(router.Dispatch) placement.Outcome {
		if len(rec.sent) < 3 {
			return placement.DefinitelyNotAccepted
		}
		return placement.Accepted
	}
	req := session(t, "s1")
	res, err := d.Do(context.Background(), req, nil, rec.send)
	require.NoError(t, err)
	require.Len(t, rec.sent, 3)
	ws := rec.workers()
	assert.ElementsMatch(t, []string{"a", "b", "c"}, ws, "three distinct workers")
	assert.Equal(t, 3, res.Attempts)
	assert.True(t, res.Served)
	assert.True(t, res.Placed)
	assert.Equal(t, affinity.WorkerOnly(ws[2]), res.Target)
	assert.Len(t, res.Refused, 2)
	for _, s := range rec.sent {
		assert.NotZero(t, s.AttemptID, "a placing dispatch has an attempt id")
		assert.False(t, s.Hit)
	}
	bound, ok := l.Query(req.Session, affinity.PhaseDecode)
	require.True(t, ok)
	assert.Equal(t, res.Target, bound)
	assert.Equal(t, uint64(2), d.Stats().Retries)
	assertNoneInFlight(t, d, l)

	// The next turn is a hit on the binding.
	rec.sent, rec.outcome = nil, accept
	res, err = d.Do(context.Background(), req, nil, rec.send)
	require.NoError(t, err)
	assert.True(t, res.Hit)
	assert.False(t, res.Placed)
	assert.Equal(t, bound, res.Target)
	assert.Equal(t, uint64(0), rec.sent[0].AttemptID)
	assert.Equal(t, 2, rec.relays)
}

// When every worker refuses, each is tried once and the error is a
// *RefusedError matching ErrRefused and placement.ErrNotAccepted.
func TestDoAllRefusedEachWorkerOnce(t *testing.T) {
	l := newLayer(t, affinity.Config{}, 2, "a", "b", "c")
	d := newDriver(t, router.Config{Layer: l, MaxAttempts: 10})
	rec := &recorder{t: t, d: d, outcome: func(router.Dispatch) placement.Outcome { return placement.DefinitelyNotAccepted }}
	res, err := d.Do(context.Background(), session(t, "s"), nil, rec.send)
	require.Error(t, err)
	var re *router.RefusedError
	require.ErrorAs(t, err, &re)
	assert.ErrorIs(t, err, router.ErrRefused)
	assert.ErrorIs(t, err, placement.ErrNotAccepted)
	assert.EqualError(t, re.Err, "worker said no")
	assert.ElementsMatch(t, []string{"a", "b", "c"}, rec.workers(), "each worker once, none of its other ranks")
	assert.Equal(t, 3, res.Attempts)
	assert.False(t, res.Served)
	assert.Equal(t, uint64(1), d.Stats().Refused)
	assertNoneInFlight(t, d, l)
}

// MaxAttempts bounds the sends.
func TestDoMaxAttempts(t *testing.T) {
	l := newLayer(t, affinity.Config{}, 0, "a", "b", "c", "d")
	d := newDriver(t, router.Config{Layer: l, MaxAttempts: 2})
	rec := &recorder{t: t, d: d, outcome: func(router.Dispatch) placement.Outcome { return placement.DefinitelyNotAccepted }}
	_, err := d.Do(context.Background(), session(t, "s"), nil, rec.send)
	require.ErrorIs(t, err, router.ErrRefused)
	assert.Len(t, rec.sent, 2)
}

// An ambiguous placing dispatch is never sent again: the layer's
// *UnknownOutcomeError comes back unchanged, with its quarantine; the
// session's next request (soft mode) goes unpinned.
func TestDoAmbiguousNotReplayed(t *testing.T) {
	l := newLayer(t, affinity.Config{}, 0, "a", "b")
	d := newDriver(t, router.Config{Layer: l})
	rec := &recorder{t: t, d: d, outcome: func(router.Dispatch) placement.Outcome { return placement.Ambiguous }}
	req := session(t, "s")
	res, err := d.Do(context.Background(), req, nil, rec.send)
	require.Len(t, rec.sent, 1, "not replayed")
	var ue *affinity.UnknownOutcomeError
	require.ErrorAs(t, err, &ue)
	assert.ErrorIs(t, err, affinity.ErrOutcomeUnknown)
	assert.ErrorIs(t, err, placement.ErrAmbiguous)
	require.NotNil(t, ue.Quarantine)
	assert.Equal(t, rec.sent[0].AttemptID, ue.Attempt)
	assert.EqualError(t, res.SendErr, "worker said no")
	assert.Equal(t, uint64(1), d.Stats().Unknown)
	require.Len(t, l.Quarantined(), 1)

	rec.outcome, rec.sent = accept, nil
	res, err = d.Do(context.Background(), req, nil, rec.send)
	require.NoError(t, err)
	assert.Equal(t, affinity.CauseQuarantined, res.Unpinned)
	assert.False(t, res.Placed)
	assertNoneInFlight(t, d, l)
}

// An outcome outside the three counts as Ambiguous: never replayed.
func TestDoInvalidOutcomeIsAmbiguous(t *testing.T) {
	l := newLayer(t, affinity.Config{}, 0, "a", "b")
	d := newDriver(t, router.Config{Layer: l})
	rec := &recorder{t: t, d: d, outcome: func(router.Dispatch) placement.Outcome { return 0 }}
	_, err := d.Do(context.Background(), session(t, "s"), nil, rec.send)
	assert.ErrorIs(t, err, affinity.ErrOutcomeUnknown)
	assert.Len(t, rec.sent, 1)
}

// A later turn that times out keeps its binding and is not replayed.
func TestDoAmbiguousHitKeepsBinding(t *testing.T) {
	l := newLayer(t, affinity.Config{}, 0, "a", "b")
	d := newDriver(t, router.Config{Layer: l})
	rec := &recorder{t: t, d: d, outcome: accept}
	req := session(t, "s")
	res, err := d.Do(context.Background(), req, nil, rec.send)
	require.NoError(t, err)
	bound := res.Target

	rec.outcome, rec.sent = func(router.Dispatch) placement.Outcome { return placement.Ambiguous }, nil
	_, err = d.Do(context.Background(), req, nil, rec.send)
	var ue *affinity.UnknownOutcomeError
	require.ErrorAs(t, err, &ue)
	assert.Nil(t, ue.Quarantine, "a later turn opens no quarantine")
	assert.Len(t, rec.sent, 1)
	assert.True(t, rec.sent[0].Hit)
	got, ok := l.Query(req.Session, affinity.PhaseDecode)
	require.True(t, ok)
	assert.Equal(t, bound, got)
}

// A later turn refused by the bound worker moves the binding (row L1): the
// same request is placed on another worker, which the session binds to.
func TestDoLaterTurnRefusalMovesBinding(t *testing.T) {
	l := newLayer(t, affinity.Config{}, 0, "a", "b")
	d := newDriver(t, router.Config{Layer: l})
	rec := &recorder{t: t, d: d, outcome: accept}
	req := session(t, "s")
	res, err := d.Do(context.Background(), req, nil, rec.send)
	require.NoError(t, err)
	first := res.Target

	rec.sent = nil
	rec.outcome = func(x router.Dispatch) placement.Outcome {
		if x.Target == first {
			return placement.DefinitelyNotAccepted
		}
		return placement.Accepted
	}
	res, err = d.Do(context.Background(), req, nil, rec.send)
	require.NoError(t, err)
	require.Len(t, rec.sent, 2)
	assert.True(t, rec.sent[0].Hit, "the first send was the later turn")
	assert.NotEqual(t, first, res.Target)
	assert.True(t, res.Placed)
	assert.Equal(t, []affinity.Target{first}, res.Refused)
	got, ok := l.Query(req.Session, affinity.PhaseDecode)
	require.True(t, ok)
	assert.Equal(t, res.Target, got)
	assert.Equal(t, uint64(1), l.Stats().Moves[affinity.MoveRefused])
	assertNoneInFlight(t, d, l)
}

// Hard mode: the layer's typed errors come back unchanged.
func TestDoHardModeErrors(t *testing.T) {
	l := newLayer(t, affinity.Config{Mode: affinity.ModeHard}, 0, "a", "b")
	d := newDriver(t, router.Config{Layer: l})
	rec := &recorder{t: t, d: d, outcome: func(router.Dispatch) placement.Outcome { return placement.Ambiguous }}
	req := session(t, "q")
	_, err := d.Do(context.Background(), req, nil, rec.send)
	require.ErrorIs(t, err, affinity.ErrOutcomeUnknown)

	// A quarantined session: *QuarantinedError at Start, nothing sent.
	rec.sent, rec.outcome = nil, accept
	_, err = d.Do(context.Background(), req, nil, rec.send)
	var qe *affinity.QuarantinedError
	require.ErrorAs(t, err, &qe)
	assert.ErrorIs(t, err, affinity.ErrQuarantined)
	assert.Positive(t, qe.RetryAfter)
	assert.Empty(t, rec.sent)

	// A pin that disagrees with the binding: *PinError.
	req = session(t, "p")
	res, err := d.Do(context.Background(), req, nil, rec.send)
	require.NoError(t, err)
	other := "a"
	if res.Target.Worker == "a" {
		other = "b"
	}
	pinned := req
	pinned.Pin, pinned.HasPin = affinity.WorkerOnly(other), true
	_, err = d.Do(context.Background(), pinned, nil, rec.send)
	assert.ErrorIs(t, err, affinity.ErrPinConflict)

	// The bound worker not allowed: *IneligibleError (a hard binding is exact).
	d2 := newDriver(t, router.Config{Layer: l, Allow: func(w string) bool { return w != res.Target.Worker }})
	_, err = d2.Do(context.Background(), req, nil, rec.send)
	var ie *affinity.IneligibleError
	require.ErrorAs(t, err, &ie)
	assert.ErrorIs(t, err, affinity.ErrPinnedWorkerNotAllowed)
	assert.Equal(t, uint64(3), d.Stats().Failed+d2.Stats().Failed)
	assertNoneInFlight(t, d, l)
}

// A pinned request whose pin refuses is a *RefusedError, not the
// eligibility error of the pin being excluded.
func TestDoPinRefused(t *testing.T) {
	l := newLayer(t, affinity.Config{}, 0, "a", "b")
	d := newDriver(t, router.Config{Layer: l})
	rec := &recorder{t: t, d: d, outcome: func(router.Dispatch) placement.Outcome { return placement.DefinitelyNotAccepted }}
	req := session(t, "s")
	req.Pin, req.HasPin = affinity.WorkerOnly("b"), true
	_, err := d.Do(context.Background(), req, nil, rec.send)
	require.ErrorIs(t, err, router.ErrRefused)
	assert.Equal(t, []string{"b"}, rec.workers())
}

// A worker that fails between Eligible and Dispatch is excluded without a
// send, and the request goes elsewhere.
func TestDoWorkerFailsBeforeDispatch(t *testing.T) {
	l := newLayer(t, affinity.Config{}, 0, "a", "b")
	failed := ""
	allow := func(w string) bool {
		if failed == "" {
			failed = w // the first worker asked about fails now: after the membership was read
			require.NoError(t, l.Fail(w))
		}
		return true
	}
	d := newDriver(t, router.Config{Layer: l, Allow: allow,
		Pipeline: &picker.Pipeline{Picker: firstPicker{}}})
	rec := &recorder{t: t, d: d, outcome: accept}
	res, err := d.Do(context.Background(), session(t, "s"), nil, rec.send)
	require.NoError(t, err)
	assert.Equal(t, "a", failed)
	assert.Equal(t, []string{"b"}, rec.workers())
	assert.Equal(t, 1, res.Attempts)
}

// firstPicker picks the first candidate.
type firstPicker struct{}

func (firstPicker) Pick(*picker.Request, []picker.Candidate, []float64) int { return 0 }

// The upstream context of a placing dispatch ends at the dispatch's
// deadline (runtime clock): Send sees placement.ErrDispatchTimeout as the
// cause and reports Ambiguous.
func TestDoDispatchDeadlineReachesSend(t *testing.T) {
	l, err := affinity.New(affinity.Config{DispatchTimeout: 20 * time.Millisecond})
	require.NoError(t, err)
	defer l.Close()
	_, err = l.Join(affinity.Worker{ID: "a", Identity: "1"})
	require.NoError(t, err)
	d := newDriver(t, router.Config{Layer: l})
	var cause error
	send := func(ctx context.Context, _ router.Dispatch) (placement.Outcome, router.Relay, error) {
		select {
		case <-ctx.Done():
			cause = context.Cause(ctx)
			return placement.Ambiguous, nil, cause
		case <-time.After(10 * time.Second):
			return placement.Accepted, nil, nil
		}
	}
	_, err = d.Do(context.Background(), session(t, "s"), nil, send)
	assert.ErrorIs(t, err, affinity.ErrOutcomeUnknown)
	assert.ErrorIs(t, cause, placement.ErrDispatchTimeout)
}

// The pipeline observes every send's outcome; a pick among several
// candidates goes through it, with the driver's loads.
func TestDoPipelineObservesAndPicks(t *testing.T) {
	l := newLayer(t, affinity.Config{}, 2, "a", "b")
	obs := &observer{}
	d := newDriver(t, router.Config{Layer: l, Pipeline: &picker.Pipeline{
		Scorers: []picker.Weighted{{Scorer: obs, Weight: 1}}}})
	n := 0
	send := func(_ context.Context, x router.Dispatch) (placement.Outcome, router.Relay, error) {
		n++
		if n == 1 {
			return placement.DefinitelyNotAccepted, nil, nil
		}
		return placement.Accepted, nil, nil
	}
	preq := &picker.Request{Blocks: []uint64{1, 2}}
	_, err := d.Do(context.Background(), session(t, "s"), preq, send)
	require.NoError(t, err)
	require.Len(t, obs.seen, 2)
	assert.Equal(t, placement.DefinitelyNotAccepted, obs.seen[0])
	assert.Equal(t, placement.Accepted, obs.seen[1])
	assert.Equal(t, 4, obs.scored[0], "the first pick saw every rank")
	assert.Equal(t, 2, obs.scored[1], "the retry saw the other worker's ranks")

	// The next turn is a hit on the ranked binding: one candidate, no pick.
	res, err := d.Do(context.Background(), session(t, "s"), preq, send)
	require.NoError(t, err)
	assert.True(t, res.Hit)
	assert.Len(t, obs.scored, 2, "no pick for the one eligible candidate")
	assert.Len(t, obs.seen, 3, "but its outcome is observed")
}

// observer is a scorer that records its calls and what it observes.
type observer struct {
	scored []int
	seen   []placement.Outcome
}

func (o *observer) Score(_ *picker.Request, cands []picker.Candidate, scores []float64) {
	o.scored = append(o.scored, len(cands))
}

func (o *observer) Observe(r *picker.Request, _ affinity.Target, out placement.Outcome) {
	o.seen = append(o.seen, out)
}

// A relay that fails after an Accepted outcome is a *RelayError; the
// request counts as served and its binding holds.
func TestDoRelayError(t *testing.T) {
	l := newLayer(t, affinity.Config{}, 0, "a")
	d := newDriver(t, router.Config{Layer: l})
	send := func(context.Context, router.Dispatch) (placement.Outcome, router.Relay, error) {
		return placement.Accepted, func() error { return errors.New("client left") }, nil
	}
	req := session(t, "s")
	res, err := d.Do(context.Background(), req, nil, send)
	var re *router.RelayError
	require.ErrorAs(t, err, &re)
	assert.ErrorIs(t, err, router.ErrRelay)
	assert.True(t, res.Served)
	assert.True(t, res.Placed)
	assert.Equal(t, uint64(1), d.Stats().RelayFailed)
	_, ok := l.Query(req.Session, affinity.PhaseDecode)
	assert.True(t, ok)
}

// The default candidates mark a target overloaded at MaxInFlight: a
// session bound to it goes elsewhere (soft mode) while it is busy.
func TestDoMaxInFlightOverloads(t *testing.T) {
	l := newLayer(t, affinity.Config{}, 0, "a", "b")
	d := newDriver(t, router.Config{Layer: l, MaxInFlight: 1})
	req := session(t, "s")
	res, err := d.Do(context.Background(), req, nil, (&recorder{t: t, d: d, outcome: accept}).send)
	require.NoError(t, err)
	bound := res.Target
	// While another request (pinned there) is in flight to the bound
	// worker, the session's turn goes elsewhere and its binding follows.
	var inner router.Result
	send := func(ctx context.Context, x router.Dispatch) (placement.Outcome, router.Relay, error) {
		inner, err = d.Do(ctx, req, nil, func(context.Context, router.Dispatch) (placement.Outcome, router.Relay, error) {
			return placement.Accepted, nil, nil
		})
		return placement.Accepted, nil, nil
	}
	pinned := session(t, "other")
	pinned.Pin, pinned.HasPin = bound, true
	_, err2 := d.Do(context.Background(), pinned, nil, send)
	require.NoError(t, err2)
	require.NoError(t, err)
	assert.NotEqual(t, bound.Worker, inner.Target.Worker, "the busy target was overloaded")
	assert.Equal(t, uint64(1), l.Stats().Moves[affinity.MoveFollow])
	assertNoneInFlight(t, d, l)
}

// Bad input gives an error, never a panic.
func TestNewAndDoBadInput(t *testing.T) {
	_, err := router.New(router.Config{})
	assert.ErrorIs(t, err, router.ErrInvalidConfig)
	l := newLayer(t, affinity.Config{}, 0, "a")
	_, err = router.New(router.Config{Layer: l, MaxAttempts: -1})
	assert.ErrorIs(t, err, router.ErrInvalidConfig)
	_, err = router.New(router.Config{Layer: l, Pipeline: &picker.Pipeline{Scorers: []picker.Weighted{{}}}})
	assert.ErrorIs(t, err, router.ErrInvalidConfig)
	d := newDriver(t, router.Config{Layer: l})
	_, err = d.Do(context.Background(), session(t, "s"), nil, nil)
	assert.ErrorIs(t, err, placement.ErrInvalidArgument)
	_, err = d.Do(context.Background(), affinity.Request{Phase: 9}, nil, (&recorder{t: t, d: d, outcome: accept}).send)
	assert.ErrorIs(t, err, placement.ErrInvalidArgument)
}

// A refusal after the caller's context ended is not tried elsewhere.
func TestDoCancelledAfterRefusal(t *testing.T) {
	l := newLayer(t, affinity.Config{}, 0, "a", "b", "c")
	d := newDriver(t, router.Config{Layer: l})
	ctx, cancel := context.WithCancelCause(context.Background())
	gone := errors.New("client gone")
	sends := 0
	send := func(context.Context, router.Dispatch) (placement.Outcome, router.Relay, error) {
		sends++
		cancel(gone)
		return placement.DefinitelyNotAccepted, nil, nil
	}
	res, err := d.Do(ctx, session(t, "s"), nil, send)
	var ce *router.CancelledError
	require.ErrorAs(t, err, &ce)
	assert.ErrorIs(t, err, placement.ErrCancelled)
	assert.ErrorIs(t, err, gone)
	assert.Equal(t, 1, sends)
	assert.Len(t, res.Refused, 1)
	assertNoneInFlight(t, d, l)
}

// A placing dispatch that times out while a resolver settles its
// quarantine (the worker's ledger said "arrived") gets the core's
// *placement.FencedError from Complete: for this request the outcome is
// unknown, so it counts as Unknown and maps to 504, never 500 (found by the
// second new-user probe).
func TestDriver_FencedAfterResolveIsUnknown(t *testing.T) {
	clk := placement.NewManualClock(0)
	l := newLayer(t, affinity.Config{Clock: clk, DispatchTimeout: time.Second}, 0, "w")
	d := newDriver(t, router.Config{Layer: l})
	send := func(ctx context.Context, x router.Dispatch) (placement.Outcome, router.Relay, error) {
		require.NoError(t, clk.AdvanceBy(2*time.Second)) // the deadline passes: quarantined
		qs := l.Quarantined()
		require.Len(t, qs, 1)
		require.NoError(t, l.Resolve(qs[0], placement.ResolveAccepted)) // the resolver
		return placement.Ambiguous, nil, errors.New("timed out")
	}
	res, err := d.Do(context.Background(), session(t, "s"), nil, send)
	require.ErrorIs(t, err, placement.ErrFenced)
	require.Equal(t, 1, res.Attempts)
	code, _ := httpoutcome.Status(err)
	require.Equal(t, http.StatusGatewayTimeout, code)
	st := d.Stats()
	require.Equal(t, uint64(1), st.Unknown)
	require.Zero(t, st.Failed)
	got, ok := l.Query(session(t, "s").Session, affinity.PhaseDecode)
	require.True(t, ok, "bound by the resolver's settlement")
	require.Equal(t, affinity.WorkerOnly("w"), got)
}
