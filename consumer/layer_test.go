package consumer

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/placementlab/placement/impl/affinity"
	"github.com/placementlab/placement/impl/placement"
)

// env is a router's affinity layer on a simulation host's manual clock.
type env struct {
	l   *affinity.Layer
	clk *placement.ManualClock
	ns  affinity.Namespace
}

func newEnv(t *testing.T, cfg affinity.Config) *env {
	t.Helper()
	if cfg.Clock == nil {
		cfg.Clock = placement.NewManualClock(0)
	}
	l, err := affinity.New(cfg)
	require.NoError(t, err)
	t.Cleanup(func() { _ = l.Close() })
	return &env{l: l, clk: cfg.Clock, ns: affinity.Namespace{Model: "llama", Tenant: "t1"}}
}

func (e *env) join(t *testing.T, id, identity string, ranks int) {
	t.Helper()
	_, err := e.l.Join(affinity.Worker{ID: id, Identity: identity, Ranks: ranks})
	require.NoError(t, err)
}

func (e *env) key(t *testing.T, id string) affinity.Key {
	t.Helper()
	k, err := e.ns.Session(id)
	require.NoError(t, err)
	return k
}

// candidates is what a scheduler starts from: every target the layer
// lists, none overloaded unless named.
func (e *env) candidates(overloaded ...affinity.Target) []affinity.Candidate {
	var cs []affinity.Candidate
	for _, t := range e.l.Targets() {
		c := affinity.Candidate{Target: t}
		for _, o := range overloaded {
			c.Overloaded = c.Overloaded || o == t
		}
		cs = append(cs, c)
	}
	return cs
}

// first is the simplest scheduler: the first eligible candidate.
func first(cs []affinity.Candidate) affinity.Target { return cs[0].Target }

// last picks the last eligible candidate: a scheduler that would place a
// new session elsewhere than first does.
func last(cs []affinity.Candidate) affinity.Target { return cs[len(cs)-1].Target }

// served is what one request did.
type served struct {
	Target  affinity.Target
	Hit     bool
	Attempt uint64
	Cause   affinity.Cause
	Cands   []affinity.Target // what Eligible offered
}

// serveLayer is the README's request on the layer: Start, Eligible,
// Dispatch of the scheduler's pick, Complete with out, Done.
func (e *env) serveLayer(ctx context.Context, req affinity.Request, cands []affinity.Candidate,
	allow func(string) bool, pick func([]affinity.Candidate) affinity.Target, out placement.Outcome) (served, error) {
	turn, err := e.l.Start(ctx, req)
	if err != nil {
		return served{}, err
	}
	defer turn.Done()
	el, err := turn.Eligible(cands, allow)
	if err != nil {
		return served{}, err
	}
	s := served{Cause: turn.Unpinned()}
	for _, c := range el {
		s.Cands = append(s.Cands, c.Target)
	}
	a, err := turn.Dispatch(pick(el))
	if err != nil {
		return s, err
	}
	s.Target, s.Hit, s.Attempt = a.Target(), a.Hit(), a.ID()
	actx, cancel := a.Context(ctx)
	defer cancel()
	_ = actx // the upstream call would run under actx
	return s, a.Complete(out)
}

func (e *env) ok(t *testing.T, req affinity.Request, pick func([]affinity.Candidate) affinity.Target) served {
	t.Helper()
	s, err := e.serveLayer(context.Background(), req, e.candidates(), nil, pick, placement.Accepted)
	require.NoError(t, err)
	return s
}

// Layer, request path: the README's request from headers: a first turn
// places the session (an attempt id), a later turn is narrowed to the
// binding and is a hit (no attempt id).
func TestContract_LayerRequestPath_FromHeaders(t *testing.T) {
	e := newEnv(t, affinity.Config{})
	e.join(t, "a", "boot-1", 0)
	e.join(t, "b", "boot-1", 0)
	h := http.Header{}
	h.Set("X-Session-ID", "conversation-1")
	req, err := e.l.RequestFromHeader(e.ns, h, affinity.PhaseDecode)
	require.NoError(t, err)
	require.False(t, req.Session.IsZero())

	s1 := e.ok(t, req, last)
	assert.Equal(t, affinity.WorkerOnly("b"), s1.Target)
	assert.False(t, s1.Hit)
	assert.NotZero(t, s1.Attempt, "a placing dispatch carries an attempt id")

	s2 := e.ok(t, req, first)
	assert.Equal(t, []affinity.Target{affinity.WorkerOnly("b")}, s2.Cands, "narrowed to the binding")
	assert.True(t, s2.Hit)
	assert.Zero(t, s2.Attempt, "a later turn carries no attempt id")

	st := e.l.Stats()
	assert.Equal(t, uint64(1), st.Binds)
	assert.Equal(t, uint64(1), st.Hits)
	got, ok := e.l.Query(req.Session, affinity.PhaseDecode)
	require.True(t, ok)
	assert.Equal(t, affinity.WorkerOnly("b"), got)
}

// Layer, error values: a bad session id is a *SessionIDError
// (ErrInvalidSessionID, a 400); no session id routes unpinned
// (CauseNoSession), never an error.
func TestContract_LayerErrors_SessionIDs(t *testing.T) {
	e := newEnv(t, affinity.Config{})
	e.join(t, "a", "boot-1", 0)
	for _, bad := range []string{"", "has space", string(make([]byte, affinity.MaxSessionIDBytes+1))} {
		h := http.Header{"X-Session-Id": {bad}}
		_, err := e.l.RequestFromHeader(e.ns, h, affinity.PhaseDecode)
		assert.ErrorIs(t, err, affinity.ErrInvalidSessionID, "%q", bad)
		var se *affinity.SessionIDError
		assert.ErrorAs(t, err, &se)
	}
	req, err := e.l.RequestFromHeader(e.ns, http.Header{}, affinity.PhaseDecode)
	require.NoError(t, err)
	assert.True(t, req.Session.IsZero())
	s := e.ok(t, req, first)
	assert.Equal(t, affinity.CauseNoSession, s.Cause)
}

// Layer, eligibility: the scheduler's allow function and overload signal
// hold for a soft binding: an overloaded or disallowed binding falls back
// to the full (still allowed) set and the binding follows the dispatch.
func TestContract_LayerEligibility_SoftBindingFallsBack(t *testing.T) {
	e := newEnv(t, affinity.Config{})
	e.join(t, "a", "boot-1", 0)
	e.join(t, "b", "boot-1", 0)
	e.join(t, "c", "boot-1", 0)
	req := affinity.Request{Session: e.key(t, "s")}
	e.ok(t, req, first) // bound to a

	s, err := e.serveLayer(context.Background(), req, e.candidates(affinity.WorkerOnly("a")), nil, last, placement.Accepted)
	require.NoError(t, err)
	assert.Len(t, s.Cands, 3, "overloaded binding: the full set")
	assert.Equal(t, affinity.WorkerOnly("c"), s.Target)
	got, _ := e.l.Query(req.Session, affinity.PhaseDecode)
	assert.Equal(t, affinity.WorkerOnly("c"), got, "the binding follows the dispatch")

	notC := func(w string) bool { return w != "c" }
	s, err = e.serveLayer(context.Background(), req, e.candidates(), notC, last, placement.Accepted)
	require.NoError(t, err)
	assert.Equal(t, []affinity.Target{affinity.WorkerOnly("a"), affinity.WorkerOnly("b")}, s.Cands,
		"a disallowed binding falls back to the allowed set, never beyond it")
}

// Layer, eligibility: in hard mode an ineligible binding is an
// *IneligibleError (binding kept), and a dispatch elsewhere a
// *MismatchError (nothing dispatched).
func TestContract_LayerEligibility_HardBindingIsExact(t *testing.T) {
	e := newEnv(t, affinity.Config{Mode: affinity.ModeHard})
	e.join(t, "a", "boot-1", 0)
	e.join(t, "b", "boot-1", 0)
	req := affinity.Request{Session: e.key(t, "s")}
	e.ok(t, req, first)

	_, err := e.serveLayer(context.Background(), req, e.candidates(affinity.WorkerOnly("a")), nil, first, placement.Accepted)
	var ie *affinity.IneligibleError
	require.ErrorAs(t, err, &ie)
	assert.True(t, ie.Bound)
	assert.ErrorIs(t, err, affinity.ErrPinnedWorkerOverloaded)

	turn, err := e.l.Start(context.Background(), req)
	require.NoError(t, err)
	defer turn.Done()
	_, err = turn.Dispatch(affinity.WorkerOnly("b"))
	assert.ErrorIs(t, err, affinity.ErrBindingMismatch)
	var me *affinity.MismatchError
	assert.ErrorAs(t, err, &me)
	got, _ := e.l.Query(req.Session, affinity.PhaseDecode)
	assert.Equal(t, affinity.WorkerOnly("a"), got, "binding kept")
}

// Layer, pins: a pin is exact in every mode: its dispatch binds an
// unbound session; a pin to a worker that is not a member is an
// *IneligibleError at Start; a pin with a rank its worker does not serve
// is a *PinError (ErrInvalidPin).
func TestContract_LayerPins_Exact(t *testing.T) {
	e := newEnv(t, affinity.Config{})
	e.join(t, "a", "boot-1", 2)
	e.join(t, "b", "boot-1", 2)
	req := affinity.Request{Session: e.key(t, "s"), Pin: affinity.Ranked("b", 1), HasPin: true}
	s := e.ok(t, req, first)
	assert.Equal(t, []affinity.Target{affinity.Ranked("b", 1)}, s.Cands)
	got, _ := e.l.Query(req.Session, affinity.PhaseDecode)
	assert.Equal(t, affinity.Ranked("b", 1), got, "the pin's dispatch binds the session")

	_, err := e.l.Start(context.Background(), affinity.Request{Session: e.key(t, "x"), Pin: affinity.WorkerOnly("zz"), HasPin: true})
	assert.ErrorIs(t, err, affinity.ErrPinnedWorkerGone)
	var ie *affinity.IneligibleError
	assert.ErrorAs(t, err, &ie)

	_, err = e.l.Start(context.Background(), affinity.Request{Session: e.key(t, "x"), Pin: affinity.Ranked("a", 7), HasPin: true})
	assert.ErrorIs(t, err, affinity.ErrInvalidPin)
	var pe *affinity.PinError
	assert.ErrorAs(t, err, &pe)

	// A pinned dispatch elsewhere is refused before anything is sent.
	turn, err := e.l.Start(context.Background(), affinity.Request{Session: e.key(t, "y"), Pin: affinity.WorkerOnly("a"), HasPin: true})
	require.NoError(t, err)
	defer turn.Done()
	_, err = turn.Dispatch(affinity.Ranked("b", 0))
	assert.ErrorIs(t, err, affinity.ErrBindingMismatch)
}

// Layer, pins: a Pin without HasPin is refused with an error value, never
// silently ignored (the request would otherwise route unpinned).
func TestContract_LayerPins_PinWithoutHasPinIsAnError(t *testing.T) {
	e := newEnv(t, affinity.Config{})
	e.join(t, "a", "boot-1", 1)
	_, err := e.l.Start(context.Background(), affinity.Request{Session: e.key(t, "s"), Pin: affinity.WorkerOnly("a")})
	assert.ErrorIs(t, err, placement.ErrInvalidArgument)
	got, ok := e.l.Query(e.key(t, "s"), affinity.PhaseDecode)
	assert.False(t, ok, "nothing was bound (%v)", got)
}

// Layer, DP ranks: Targets lists every rank of every member; a session
// binds one rank; a worker-only pin on a ranked binding is narrowed to the
// binding's rank.
func TestContract_LayerDPRanks_BindOneRank(t *testing.T) {
	e := newEnv(t, affinity.Config{})
	e.join(t, "a", "boot-1", 2)
	e.join(t, "b", "boot-1", 0)
	assert.Equal(t, []affinity.Target{affinity.Ranked("a", 0), affinity.Ranked("a", 1), affinity.WorkerOnly("b")}, e.l.Targets())

	req := affinity.Request{Session: e.key(t, "s")}
	pickA1 := func(cs []affinity.Candidate) affinity.Target { return affinity.Ranked("a", 1) }
	e.ok(t, req, pickA1)
	assert.Equal(t, 1, e.l.Bound(affinity.PhaseDecode, affinity.Ranked("a", 1)))
	assert.Equal(t, 1, e.l.Bound(affinity.PhaseDecode, affinity.WorkerOnly("a")), "worker-only counts every rank")

	pinned := req
	pinned.Pin, pinned.HasPin = affinity.WorkerOnly("a"), true
	s := e.ok(t, pinned, first)
	assert.Equal(t, []affinity.Target{affinity.Ranked("a", 1)}, s.Cands)
	assert.True(t, s.Hit)

	// The worker stops serving rank 1: the binding moves at the next request.
	_, err := e.l.Join(affinity.Worker{ID: "a", Identity: "boot-1", Ranks: 1})
	require.NoError(t, err)
	s = e.ok(t, req, first)
	assert.False(t, s.Hit)
	assert.Equal(t, uint64(1), e.l.Stats().Moves[affinity.MoveRankGone])
}

// Layer, membership: a new identity is a restart (bindings fenced), the
// same identity after Fail is a flap (nothing fenced).
func TestContract_LayerMembership_RestartFencesFlapDoesNot(t *testing.T) {
	e := newEnv(t, affinity.Config{})
	e.join(t, "a", "boot-1", 0)
	req := affinity.Request{Session: e.key(t, "s")}
	e.ok(t, req, first)

	require.NoError(t, e.l.Fail("a"))
	kind, err := e.l.Join(affinity.Worker{ID: "a", Identity: "boot-1"})
	require.NoError(t, err)
	assert.Equal(t, affinity.Recovered, kind)
	assert.True(t, e.ok(t, req, first).Hit, "a flap fences nothing")

	kind, err = e.l.Join(affinity.Worker{ID: "a", Identity: "boot-2"})
	require.NoError(t, err)
	assert.Equal(t, affinity.Restarted, kind)
	_, bound := e.l.Query(req.Session, affinity.PhaseDecode)
	assert.False(t, bound, "a restart fences the binding")
	assert.False(t, e.ok(t, req, first).Hit)

	assert.ErrorIs(t, e.l.Fail("nobody"), affinity.ErrUnknownWorker)
	_, err = e.l.Join(affinity.Worker{ID: ""})
	assert.ErrorIs(t, err, affinity.ErrInvalidWorker)
}

// Layer, error values: an ambiguous placing dispatch is an
// *UnknownOutcomeError carrying its quarantine; soft mode routes the
// session unpinned meanwhile (CauseQuarantined), hard mode refuses it with
// *QuarantinedError and RetryAfter; Resolve settles it once.
func TestContract_LayerErrors_UnknownOutcomeQuarantines(t *testing.T) {
	for _, mode := range []affinity.Mode{affinity.ModeSoft, affinity.ModeHard} {
		t.Run(mode.String(), func(t *testing.T) {
			e := newEnv(t, affinity.Config{Mode: mode, QuarantineTTL: time.Minute})
			e.join(t, "a", "boot-1", 0)
			e.join(t, "b", "boot-1", 0)
			req := affinity.Request{Session: e.key(t, "s")}
			_, err := e.serveLayer(context.Background(), req, e.candidates(), nil, first, placement.Ambiguous)
			assert.ErrorIs(t, err, affinity.ErrOutcomeUnknown)
			var ue *affinity.UnknownOutcomeError
			require.ErrorAs(t, err, &ue)
			require.NotNil(t, ue.Quarantine)
			assert.Equal(t, time.Minute, ue.Quarantine.RetryAfter)

			s, err := e.serveLayer(context.Background(), req, e.candidates(), nil, last, placement.Accepted)
			if mode == affinity.ModeSoft {
				require.NoError(t, err)
				assert.Equal(t, affinity.CauseQuarantined, s.Cause)
			} else {
				var qe *affinity.QuarantinedError
				require.ErrorAs(t, err, &qe)
				assert.ErrorIs(t, err, affinity.ErrQuarantined)
				assert.Equal(t, time.Minute, qe.RetryAfter)
			}
			qs := e.l.Quarantined()
			require.Len(t, qs, 1)
			require.NoError(t, e.l.Resolve(qs[0], placement.ResolveAccepted))
			err = e.l.Resolve(qs[0], placement.ResolveAccepted)
			assert.True(t, errors.Is(err, placement.ErrNotQuarantined) || errors.Is(err, placement.ErrFenced), "settled once: %v", err)
			assert.True(t, e.ok(t, req, last).Hit, "resolved Accepted: bound to the attempt's target")
		})
	}
}

// Layer, final request: the binding closes when the last request holding
// it ends.
func TestContract_LayerRequestPath_FinalRequestCloses(t *testing.T) {
	e := newEnv(t, affinity.Config{})
	e.join(t, "a", "boot-1", 0)
	req := affinity.Request{Session: e.key(t, "s")}
	e.ok(t, req, first)

	other, err := e.l.Start(context.Background(), req) // another turn still holds the binding
	require.NoError(t, err)
	final := req
	final.Final = true
	assert.True(t, e.ok(t, final, first).Hit)
	_, bound := e.l.Query(req.Session, affinity.PhaseDecode)
	assert.True(t, bound, "still held by the other request")
	other.Done()
	_, bound = e.l.Query(req.Session, affinity.PhaseDecode)
	assert.False(t, bound, "closed with its last request")
}

// Resource bounds, layer: a full table is never an error: the request is
// routed unpinned (CauseCapacity) and established sessions keep hitting;
// client ids are bounded.
func TestContract_ResourceBounds_LayerFullTableRoutesUnpinned(t *testing.T) {
	e := newEnv(t, affinity.Config{MaxEntries: 2, AdmitAllBelow: 1})
	e.join(t, "a", "boot-1", 0)
	s1 := affinity.Request{Session: e.key(t, "s1")}
	e.ok(t, s1, first)
	e.ok(t, affinity.Request{Session: e.key(t, "s2")}, first)
	for i := range 5 {
		s := e.ok(t, affinity.Request{Session: e.key(t, fmt.Sprintf("new-%d", i))}, first)
		assert.Equal(t, affinity.CauseCapacity, s.Cause)
	}
	assert.True(t, e.ok(t, s1, first).Hit, "an established session is never evicted")
	st := e.l.Stats()
	assert.Equal(t, uint64(5), st.Unpinned[affinity.CauseCapacity])
	assert.Equal(t, 2, st.Tables[affinity.PhaseDecode].Capacity)

	_, err := e.ns.Session(strings.Repeat("x", affinity.MaxSessionIDBytes+1))
	assert.ErrorIs(t, err, affinity.ErrInvalidSessionID, "ids are bounded at MaxSessionIDBytes")
}
