package affinity_test

// The contract table of doc.go, one test per row (TestContract_<Row>_...),
// with a subtest per mode column the row gives; the anchor router's known
// bugs as regression tests (TestAnchorBug_...); and the rest of the
// package's documented contract: session ids, headers, namespaces, keys,
// sibling groups, membership, phases and Stats.
//
// Every test drives the layer on a manual clock, so time moves only when a
// test moves it.

import (
	"context"
	"fmt"
	"math"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/placementlab/placement/impl/affinity"
	"github.com/placementlab/placement/impl/claims"
	"github.com/placementlab/placement/impl/claims/memstore"
	"github.com/placementlab/placement/impl/placement"
)

// ---------------------------------------------------------------------------
// Harness

type modeCase struct {
	name string
	mode affinity.Mode
}

var (
	modeOff  = modeCase{"off", affinity.ModeOff}
	modeSoft = modeCase{"soft", affinity.ModeSoft}
	modeHard = modeCase{"hard", affinity.ModeHard}
)

// eachMode runs f as a subtest per mode.
func eachMode(t *testing.T, ms []modeCase, f func(t *testing.T, m affinity.Mode)) {
	t.Helper()
	for _, m := range ms {
		t.Run(m.name, func(t *testing.T) { f(t, m.mode) })
	}
}

var (
	allModes   = []modeCase{modeOff, modeSoft, modeHard}
	boundModes = []modeCase{modeSoft, modeHard}
)

type env struct {
	t   *testing.T
	l   *affinity.Layer
	clk *placement.ManualClock
	ns  affinity.Namespace
}

// startLimit bounds how long a test's Start may wait: under a broken
// variant of the core or the layer (the bug zoo), a wait that should not
// happen fails its test instead of hanging the package's run.
const startLimit = 5 * time.Second

// waitCtx returns a context that ends after startLimit (or with the test).
func waitCtx(t testing.TB) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), startLimit)
	t.Cleanup(cancel)
	return ctx
}

// newEnv returns a layer in mode m on a manual clock at 0, with workers a,
// b and c (identity boot-1, no ranks) joined.
func newEnv(t *testing.T, m affinity.Mode, tweak ...func(*affinity.Config)) *env {
	t.Helper()
	e := newBareEnv(t, m, tweak...)
	for _, id := range []string{"a", "b", "c"} {
		e.join(id, "boot-1", 0)
	}
	return e
}

// The backends the contract runs on: the local core, and replicas over a
// claims store (one replica, on an in-memory store on the test's clock).
// eachBackend runs f as a subtest per backend; newBareEnv reads which
// from the subtest's name.
const (
	backendCore     = "core"
	backendReplicas = "replicas"
)

var backends = []string{backendCore, backendReplicas}

// eachBackend runs f as a subtest per backend (the contract table's rows
// hold on both; where a row's meaning differs over replicas, doc.go's
// Replicas section says why and the test says so).
func eachBackend(t *testing.T, f func(t *testing.T)) {
	t.Helper()
	for _, b := range backends {
		t.Run(b, f)
	}
}

// backendOf returns the backend t (a subtest of eachBackend, or deeper)
// runs on.
func backendOf(t testing.TB) string {
	parts := strings.Split(t.Name(), "/")
	if len(parts) > 1 && parts[1] == backendReplicas {
		return backendReplicas
	}
	return backendCore
}

// overReplicas reports whether t runs on the replicas backend.
func overReplicas(t testing.TB) bool { return backendOf(t) == backendReplicas }

// newBareEnv returns a layer with no workers.
func newBareEnv(t *testing.T, m affinity.Mode, tweak ...func(*affinity.Config)) *env {
	t.Helper()
	clk := placement.NewManualClock(0)
	cfg := affinity.Config{Clock: clk, Mode: m, FirstAttempt: 1000}
	for _, f := range tweak {
		f(&cfg)
	}
	if overReplicas(t) {
		ttl := cfg.IdleTTL
		if ttl == 0 {
			ttl = claims.DefaultIdleTTL
		}
		b := memstore.NewBackend(memstore.Config{IdleTTL: ttl, Clock: clk})
		h := b.Open("r1")
		t.Cleanup(func() { _ = h.Shutdown(); _ = b.Close() })
		cfg.Replicas = &affinity.Replicas{Store: h, Name: "r1", StoreTimeout: 2 * time.Second, StoreRetry: 50 * time.Millisecond}
	}
	l, err := affinity.New(cfg)
	require.NoError(t, err)
	t.Cleanup(func() { _ = l.Close() })
	return &env{t: t, l: l, clk: clk, ns: affinity.Namespace{Model: "llama", Group: "g", Tenant: "acme"}}
}

func (e *env) join(id, identity string, ranks int) affinity.JoinKind {
	e.t.Helper()
	k, err := e.l.Join(affinity.Worker{ID: id, Identity: identity, Ranks: ranks})
	require.NoError(e.t, err)
	return k
}

func (e *env) key(id string) affinity.Key {
	e.t.Helper()
	k, err := e.ns.Session(id)
	require.NoError(e.t, err)
	return k
}

func (e *env) req(id string) affinity.Request {
	return affinity.Request{Session: e.key(id), Phase: affinity.PhaseDecode}
}

func (e *env) start(r affinity.Request) affinity.Turn {
	e.t.Helper()
	tr, err := e.l.Start(waitCtx(e.t), r)
	require.NoError(e.t, err)
	require.NotNil(e.t, tr)
	return tr
}

// bind runs one whole request of r that places its session on target and
// checks the binding.
func (e *env) bind(r affinity.Request, target affinity.Target) {
	e.t.Helper()
	tr := e.start(r)
	defer tr.Done()
	require.True(e.t, tr.Placing(), "the request should place the session")
	a, err := tr.Dispatch(target)
	require.NoError(e.t, err)
	require.NotZero(e.t, a.ID(), "a placing dispatch carries an attempt id")
	require.NoError(e.t, a.Complete(placement.Accepted))
	got, ok := e.l.Query(r.Session, r.Phase)
	require.True(e.t, ok, "bound after an accepted placing dispatch")
	require.Equal(e.t, target, got)
}

// hit runs one whole request of r that must be a hit on target.
func (e *env) hit(r affinity.Request, target affinity.Target) {
	e.t.Helper()
	tr := e.start(r)
	defer tr.Done()
	b, ok := tr.Bound()
	require.True(e.t, ok, "the request should be bound")
	require.Equal(e.t, target, b)
	a, err := tr.Dispatch(target)
	require.NoError(e.t, err)
	require.True(e.t, a.Hit())
	require.Zero(e.t, a.ID())
	require.NoError(e.t, a.Complete(placement.Accepted))
}

// query returns the binding of r's session, or the zero Target.
func (e *env) query(r affinity.Request) (affinity.Target, bool) {
	return e.l.Query(r.Session, r.Phase)
}

func (e *env) requireBound(r affinity.Request, want affinity.Target) {
	e.t.Helper()
	got, ok := e.query(r)
	require.True(e.t, ok, "session should be bound to %v", want)
	require.Equal(e.t, want, got)
}

func (e *env) requireUnbound(r affinity.Request) {
	e.t.Helper()
	got, ok := e.query(r)
	require.False(e.t, ok, "session should not be bound (bound to %v)", got)
}

// ambiguous runs a placing request of r dispatched to target whose outcome
// is unknown: the session is quarantined. It returns the attempt id.
func (e *env) ambiguous(r affinity.Request, target affinity.Target) uint64 {
	e.t.Helper()
	tr := e.start(r)
	defer tr.Done()
	require.True(e.t, tr.Placing())
	a, err := tr.Dispatch(target)
	require.NoError(e.t, err)
	id := a.ID()
	require.NotZero(e.t, id)
	err = a.Complete(placement.Ambiguous)
	require.ErrorIs(e.t, err, placement.ErrAmbiguous)
	// The layer's own typed error: the attempt, its target and generation,
	// and when QuarantineTTL ends it (from now).
	var u *affinity.UnknownOutcomeError
	require.ErrorAs(e.t, err, &u)
	require.ErrorIs(e.t, err, affinity.ErrOutcomeUnknown)
	require.NotErrorIs(e.t, err, affinity.ErrQuarantined) // this request may have run: not "come back later"
	require.Equal(e.t, id, u.Attempt)
	require.Equal(e.t, target, u.Target)
	q := u.Quarantine
	require.NotNil(e.t, q)
	require.Equal(e.t, id, q.Attempt)
	require.Equal(e.t, target, q.Target)
	require.Positive(e.t, q.RetryAfter)
	require.Equal(e.t, e.l.Now()+q.RetryAfter, q.Until)
	return id
}

func cands(ts ...affinity.Target) []affinity.Candidate {
	out := make([]affinity.Candidate, len(ts))
	for i, t := range ts {
		out[i] = affinity.Candidate{Target: t}
	}
	return out
}

func targetsOf(cs []affinity.Candidate) []affinity.Target {
	out := make([]affinity.Target, len(cs))
	for i, c := range cs {
		out[i] = c.Target
	}
	return out
}

var (
	wa = affinity.WorkerOnly("a")
	wb = affinity.WorkerOnly("b")
	wc = affinity.WorkerOnly("c")
)

func abc() []affinity.Candidate { return cands(wa, wb, wc) }

// runPinned runs r (which carries a pin) with candidates cs and allow, and
// returns the first error of Start, Eligible or Dispatch (to the first
// eligible candidate, or the pin).
func (e *env) runPinned(r affinity.Request, cs []affinity.Candidate, allow func(string) bool) error {
	e.t.Helper()
	tr, err := e.l.Start(waitCtx(e.t), r)
	if err != nil {
		return err
	}
	defer tr.Done()
	got, err := tr.Eligible(cs, allow)
	if err != nil {
		return err
	}
	target := r.Pin
	if len(got) > 0 {
		target = got[0].Target
	}
	a, err := tr.Dispatch(target)
	if err != nil {
		return err
	}
	return a.Complete(placement.Accepted)
}

// ---------------------------------------------------------------------------
// The contract table

// N1: mode off: every request is routed unpinned; no binding is consulted
// or made.
func TestContract_N1_ModeOffUnpinned(t *testing.T) {
	eachBackend(t, func(t *testing.T) {
		eachMode(t, []modeCase{modeOff}, func(t *testing.T, m affinity.Mode) {
			e := newEnv(t, m)
			r := e.req("conversation-1")
			for turn := 0; turn < 2; turn++ {
				tr := e.start(r)
				require.Equal(t, affinity.CauseOff, tr.Unpinned())
				require.False(t, tr.Placing())
				_, bound := tr.Bound()
				require.False(t, bound)
				got, err := tr.Eligible(abc(), nil)
				require.NoError(t, err)
				require.Equal(t, []affinity.Target{wa, wb, wc}, targetsOf(got))
				a, err := tr.Dispatch(wb)
				require.NoError(t, err)
				require.Zero(t, a.ID(), "an unpinned dispatch carries no attempt id")
				require.False(t, a.Hit())
				require.NoError(t, a.Complete(placement.Accepted))
				tr.Done()
				e.requireUnbound(r)
			}
			s := e.l.Stats()
			require.Equal(t, uint64(2), s.Unpinned[affinity.CauseOff])
			require.Zero(t, s.Binds)
			require.Zero(t, s.Hits)
			require.Zero(t, s.Live)
		})
	})
}

// N2: a request with no session id is routed unpinned (CauseNoSession; in
// mode off N1 decides first: CauseOff).
func TestContract_N2_NoSessionUnpinned(t *testing.T) {
	eachBackend(t, func(t *testing.T) {
		eachMode(t, allModes, func(t *testing.T, m affinity.Mode) {
			e := newEnv(t, m)
			r, err := e.l.RequestFromHeader(e.ns, http.Header{}, affinity.PhaseDecode)
			require.NoError(t, err)
			require.True(t, r.Session.IsZero())
			want := affinity.CauseNoSession
			if m == affinity.ModeOff {
				want = affinity.CauseOff
			}
			tr := e.start(r)
			require.Equal(t, want, tr.Unpinned())
			require.False(t, tr.Placing())
			a, err := tr.Dispatch(wa)
			require.NoError(t, err)
			require.Zero(t, a.ID())
			require.NoError(t, a.Complete(placement.Accepted))
			tr.Done()
			s := e.l.Stats()
			require.Equal(t, uint64(1), s.Unpinned[want])
			require.Zero(t, s.Binds)
			require.Zero(t, s.Live)
		})
	})
}

// P1: a pin that names no worker, or a negative rank, is a *PinError in
// every mode.
func TestContract_P1_InvalidPin(t *testing.T) {
	eachBackend(t, func(t *testing.T) {
		eachMode(t, allModes, func(t *testing.T, m affinity.Mode) {
			for _, pin := range []affinity.Target{
				{},                         // no worker at all
				{Rank: 1, HasRank: true},   // a rank without a worker
				affinity.Ranked("a", -1),   // a negative rank
				{Worker: "", Rank: -3},     // neither
				affinity.Ranked("zzz", -1), // unknown worker and negative rank
			} {
				t.Run(pin.String(), func(t *testing.T) {
					e := newEnv(t, m)
					r := e.req("s")
					r.Pin, r.HasPin = pin, true
					err := e.runPinned(r, abc(), nil)
					var pe *affinity.PinError
					require.ErrorAs(t, err, &pe)
					require.ErrorIs(t, err, affinity.ErrInvalidPin)
					require.NotErrorIs(t, err, affinity.ErrPinConflict)
					require.Equal(t, pin, pe.Pin)
					e.requireUnbound(r)
					require.Zero(t, e.l.Stats().Binds)
				})
			}
		})
	})
}

// P2: a pin whose worker is gone or failed, not allowed or overloaded is an
// *IneligibleError (ErrPinnedWorker...); a rank its worker does not serve a
// *PinError. In every mode; nothing is bound.
func TestContract_P2_PinIneligible(t *testing.T) {
	eachBackend(t, func(t *testing.T) {
		eachMode(t, allModes, func(t *testing.T, m affinity.Mode) {
			type tc struct {
				name  string
				setup func(e *env)
				pin   affinity.Target
				cands []affinity.Candidate
				allow func(string) bool
				cause error // nil: a *PinError
			}
			for _, c := range []tc{
				{name: "never joined", pin: affinity.WorkerOnly("ghost"), cands: cands(affinity.WorkerOnly("ghost"), wa), cause: affinity.ErrPinnedWorkerGone},
				{name: "left", setup: func(e *env) { require.NoError(e.t, e.l.Leave("b")) }, pin: wb, cands: abc(), cause: affinity.ErrPinnedWorkerGone},
				{name: "failed", setup: func(e *env) { require.NoError(e.t, e.l.Fail("b")) }, pin: wb, cands: abc(), cause: affinity.ErrPinnedWorkerGone},
				{name: "not allowed", pin: wb, cands: abc(), allow: func(w string) bool { return w != "b" }, cause: affinity.ErrPinnedWorkerNotAllowed},
				{name: "overloaded", pin: wb, cands: []affinity.Candidate{{Target: wa}, {Target: wb, Overloaded: true}}, cause: affinity.ErrPinnedWorkerOverloaded},
				{name: "rank not served", setup: func(e *env) { e.join("r", "boot-1", 2) }, pin: affinity.Ranked("r", 5),
					cands: cands(affinity.Ranked("r", 0), affinity.Ranked("r", 1))},
			} {
				t.Run(c.name, func(t *testing.T) {
					e := newEnv(t, m)
					if c.setup != nil {
						c.setup(e)
					}
					r := e.req("s")
					r.Pin, r.HasPin = c.pin, true
					before := e.l.Stats().Errors
					err := e.runPinned(r, c.cands, c.allow)
					if c.cause == nil {
						var pe *affinity.PinError
						require.ErrorAs(t, err, &pe)
						require.ErrorIs(t, err, affinity.ErrInvalidPin)
						require.Equal(t, c.pin, pe.Pin)
					} else {
						var ie *affinity.IneligibleError
						require.ErrorAs(t, err, &ie)
						require.ErrorIs(t, err, c.cause)
						require.Equal(t, c.pin, ie.Target)
						require.False(t, ie.Bound, "a pin, not a binding")
					}
					require.Equal(t, before+1, e.l.Stats().Errors, "the typed error is counted once")
					e.requireUnbound(r)
					require.Zero(t, e.l.Stats().Binds)
				})
			}
		})
	})
}

// P3: a pin that agrees with the live binding is a hit; the dispatch goes
// to the pin.
func TestContract_P3_PinAgreesWithBinding(t *testing.T) {
	eachBackend(t, func(t *testing.T) {
		eachMode(t, boundModes, func(t *testing.T, m affinity.Mode) {
			e := newEnv(t, m)
			r := e.req("s")
			e.bind(r, wb)
			pinned := r
			pinned.Pin, pinned.HasPin = wb, true
			tr := e.start(pinned)
			b, ok := tr.Bound()
			require.True(t, ok)
			require.Equal(t, wb, b)
			got, err := tr.Eligible(abc(), nil)
			require.NoError(t, err)
			require.Equal(t, []affinity.Target{wb}, targetsOf(got))
			a, err := tr.Dispatch(wb)
			require.NoError(t, err)
			require.True(t, a.Hit())
			require.Zero(t, a.ID())
			require.NoError(t, a.Complete(placement.Accepted))
			tr.Done()
			e.requireBound(r, wb)
			s := e.l.Stats()
			require.Equal(t, uint64(1), s.Hits)
			require.Equal(t, uint64(1), s.Binds)
			require.Equal(t, [len(s.Moves)]uint64{}, s.Moves, "no move")
			require.Zero(t, s.Errors)
		})
	})
}

// P3, a pin to a worker with no rank agreeing with a binding to one of its
// ranks: a hit on the binding's rank (issue 25, item 12: Eligible applied
// only the pin and offered every rank of the worker, so the pick of another
// rank was a *MismatchError in hard mode and moved the binding in soft
// mode). When the bound rank is not eligible, the row is B4's.
func TestContract_P3_WorkerPinAgreesWithRankedBinding(t *testing.T) {
	eachBackend(t, func(t *testing.T) {
		eachMode(t, boundModes, func(t *testing.T, m affinity.Mode) {
			e := newBareEnv(t, m)
			e.join("r", "boot-1", 4)
			r := e.req("s")
			bound := affinity.Ranked("r", 2)
			e.bind(r, bound)
			pinned := r
			pinned.Pin, pinned.HasPin = affinity.WorkerOnly("r"), true
			all := cands(affinity.Ranked("r", 0), affinity.Ranked("r", 1), affinity.Ranked("r", 2), affinity.Ranked("r", 3))
			for i := 0; i < 2; i++ {
				tr := e.start(pinned)
				got, err := tr.Eligible(all, nil)
				require.NoError(t, err)
				require.Equal(t, []affinity.Target{bound}, targetsOf(got), "narrowed to the binding's rank")
				a, err := tr.Dispatch(got[0].Target)
				require.NoError(t, err)
				require.True(t, a.Hit())
				require.NoError(t, a.Complete(placement.Accepted))
				tr.Done()
			}
			e.requireBound(r, bound)
			s := e.l.Stats()
			require.Equal(t, uint64(2), s.Hits)
			require.Equal(t, uint64(1), s.Binds)
			require.Equal(t, [len(s.Moves)]uint64{}, s.Moves, "no move")
			require.Zero(t, s.Errors)

			// The bound rank overloaded: soft, the pin's whole worker (the
			// dispatch then moves the binding, B4); hard, the binding's
			// *IneligibleError (B4), the binding kept.
			busy := cands(affinity.Ranked("r", 0), affinity.Ranked("r", 1), affinity.Ranked("r", 2), affinity.Ranked("r", 3))
			busy[2].Overloaded = true
			tr := e.start(pinned)
			defer tr.Done()
			got, err := tr.Eligible(busy, nil)
			if m == affinity.ModeHard {
				var ie *affinity.IneligibleError
				require.ErrorAs(t, err, &ie)
				require.ErrorIs(t, err, affinity.ErrPinnedWorkerOverloaded)
				require.Equal(t, bound, ie.Target)
				require.True(t, ie.Bound)
				return
			}
			require.NoError(t, err)
			require.Equal(t, []affinity.Target{affinity.Ranked("r", 0), affinity.Ranked("r", 1), affinity.Ranked("r", 3)}, targetsOf(got))
		})
	})
}

// P4: a pin that disagrees with the live binding: soft, the dispatch goes
// to the pin and the binding follows (MoveFollow); hard, a *PinError
// (ErrPinConflict) at Start, and the binding is kept.
func TestContract_P4_PinDisagreesWithBinding(t *testing.T) {
	eachBackend(t, func(t *testing.T) {
		t.Run("soft", func(t *testing.T) {
			e := newEnv(t, affinity.ModeSoft)
			r := e.req("s")
			e.bind(r, wa)
			pinned := r
			pinned.Pin, pinned.HasPin = wb, true
			tr := e.start(pinned)
			got, err := tr.Eligible(abc(), nil)
			require.NoError(t, err)
			require.Equal(t, []affinity.Target{wb}, targetsOf(got), "narrowed to the pin")
			a, err := tr.Dispatch(wb)
			require.NoError(t, err)
			require.Equal(t, wb, a.Target())
			require.NotZero(t, a.ID(), "the pin's dispatch places the session anew")
			require.NoError(t, a.Complete(placement.Accepted))
			tr.Done()
			e.requireBound(r, wb)
			e.hit(r, wb)
			s := e.l.Stats()
			require.Equal(t, uint64(1), s.Moves[affinity.MoveFollow])
			require.Equal(t, uint64(2), s.Binds)
			require.Zero(t, s.Errors)
		})
		t.Run("hard", func(t *testing.T) {
			e := newEnv(t, affinity.ModeHard)
			r := e.req("s")
			e.bind(r, wa)
			pinned := r
			pinned.Pin, pinned.HasPin = wb, true
			tr, err := e.l.Start(waitCtx(t), pinned)
			assert.Zero(t, tr, "Start: a Turn is returned only with a nil error")
			var pe *affinity.PinError
			require.ErrorAs(t, err, &pe)
			require.ErrorIs(t, err, affinity.ErrPinConflict)
			require.Equal(t, wb, pe.Pin)
			require.Equal(t, wa, pe.Binding)
			e.requireBound(r, wa)
			e.hit(r, wa)
			s := e.l.Stats()
			require.Equal(t, uint64(1), s.Errors)
			require.Equal(t, uint64(1), s.Binds)
			require.Equal(t, [len(s.Moves)]uint64{}, s.Moves)
		})
	})
}

// P5: a pinned request of an unbound session places it: the pin's
// dispatch binds the session.
func TestContract_P5_PinBindsUnboundSession(t *testing.T) {
	eachBackend(t, func(t *testing.T) {
		eachMode(t, boundModes, func(t *testing.T, m affinity.Mode) {
			e := newEnv(t, m)
			r := e.req("s")
			pinned := r
			pinned.Pin, pinned.HasPin = wc, true
			tr := e.start(pinned)
			require.True(t, tr.Placing())
			got, err := tr.Eligible(abc(), nil)
			require.NoError(t, err)
			require.Equal(t, []affinity.Target{wc}, targetsOf(got))
			_, err = tr.Dispatch(wa)
			require.ErrorIs(t, err, affinity.ErrBindingMismatch, "a pin is exact")
			a, err := tr.Dispatch(wc)
			require.NoError(t, err)
			require.NotZero(t, a.ID())
			require.NoError(t, a.Complete(placement.Accepted))
			tr.Done()
			e.requireBound(r, wc)
			e.hit(r, wc) // a later turn without the pin
			s := e.l.Stats()
			require.Equal(t, uint64(1), s.Binds)
			require.Equal(t, uint64(1), s.Hits)
		})
	})
}

// B1: a binding whose worker left or restarted is fenced: the session is
// placed anew.
func TestContract_B1_BoundWorkerLeftOrRestarted(t *testing.T) {
	eachBackend(t, func(t *testing.T) {
		eachMode(t, boundModes, func(t *testing.T, m affinity.Mode) {
			for _, c := range []struct {
				name  string
				fence func(e *env)
				cands []affinity.Candidate
				next  affinity.Target
			}{
				{"left", func(e *env) { require.NoError(e.t, e.l.Leave("a")) }, cands(wb, wc), wb},
				{"restarted", func(e *env) { require.Equal(e.t, affinity.Restarted, e.join("a", "boot-2", 0)) }, abc(), wa},
			} {
				t.Run(c.name, func(t *testing.T) {
					e := newEnv(t, m)
					r := e.req("s")
					e.bind(r, wa)
					c.fence(e)
					e.requireUnbound(r)
					tr := e.start(r)
					require.True(t, tr.Placing(), "placed anew")
					_, bound := tr.Bound()
					require.False(t, bound)
					got, err := tr.Eligible(abc(), nil)
					require.NoError(t, err)
					require.Equal(t, targetsOf(c.cands), targetsOf(got), "the full set of what is dispatchable")
					a, err := tr.Dispatch(c.next)
					require.NoError(t, err)
					require.NotZero(t, a.ID())
					require.NoError(t, a.Complete(placement.Accepted))
					tr.Done()
					e.requireBound(r, c.next)
					e.hit(r, c.next)
					s := e.l.Stats()
					require.Equal(t, uint64(2), s.Binds)
					require.Equal(t, uint64(1), s.Hits)
					require.Equal(t, 1, s.Live)
				})
			}
		})
	})
}

// B2: a binding whose worker failed, or that no longer serves the bound
// rank, moves: it is invalidated and the session placed anew (a move,
// counted by cause; not restored if the worker comes back).
func TestContract_B2_BoundWorkerFailedOrRankGone(t *testing.T) {
	eachBackend(t, func(t *testing.T) {
		eachMode(t, boundModes, func(t *testing.T, m affinity.Mode) {
			t.Run("failed", func(t *testing.T) {
				e := newEnv(t, m)
				r := e.req("s")
				e.bind(r, wa)
				require.NoError(t, e.l.Fail("a"))
				e.requireUnbound(r)
				tr := e.start(r)
				require.True(t, tr.Placing(), "moved: placed anew")
				got, err := tr.Eligible(abc(), nil)
				require.NoError(t, err)
				require.Equal(t, []affinity.Target{wb, wc}, targetsOf(got))
				a, err := tr.Dispatch(wb)
				require.NoError(t, err)
				require.NoError(t, a.Complete(placement.Accepted))
				tr.Done()
				require.Equal(t, uint64(1), e.l.Stats().Moves[affinity.MoveWorkerFailed])
				// a comes back: the binding moved, it stays on b.
				require.Equal(t, affinity.Recovered, e.join("a", "boot-1", 0))
				e.requireBound(r, wb)
				require.Equal(t, uint64(2), e.l.Stats().Binds)
			})
			t.Run("rank gone", func(t *testing.T) {
				e := newBareEnv(t, m)
				e.join("r", "boot-1", 2)
				r := e.req("s")
				e.bind(r, affinity.Ranked("r", 1))
				// The same instance now serves rank 0 only.
				require.Equal(t, affinity.Recovered, e.join("r", "boot-1", 1))
				e.requireUnbound(r)
				tr := e.start(r)
				require.True(t, tr.Placing())
				_, err := tr.Dispatch(affinity.Ranked("r", 1))
				var ie *affinity.IneligibleError
				require.ErrorAs(t, err, &ie, "rank 1 is not served any more")
				a, err := tr.Dispatch(affinity.Ranked("r", 0))
				require.NoError(t, err)
				require.NoError(t, a.Complete(placement.Accepted))
				tr.Done()
				e.requireBound(r, affinity.Ranked("r", 0))
				s := e.l.Stats()
				require.Equal(t, uint64(1), s.Moves[affinity.MoveRankGone])
				require.Equal(t, uint64(2), s.Binds)
			})
		})
	})
}

// B3: an eligible binding narrows the candidates to it: a hit.
func TestContract_B3_BindingEligibleHit(t *testing.T) {
	eachBackend(t, func(t *testing.T) {
		eachMode(t, boundModes, func(t *testing.T, m affinity.Mode) {
			e := newEnv(t, m)
			r := e.req("s")
			e.bind(r, wb)
			for i := 0; i < 3; i++ {
				tr := e.start(r)
				got, err := tr.Eligible(abc(), nil)
				require.NoError(t, err)
				require.Equal(t, []affinity.Target{wb}, targetsOf(got), "narrowed to the binding")
				a, err := tr.Dispatch(got[0].Target)
				require.NoError(t, err)
				require.True(t, a.Hit())
				require.NoError(t, a.Complete(placement.Accepted))
				tr.Done()
			}
			s := e.l.Stats()
			require.Equal(t, uint64(3), s.Hits)
			require.Equal(t, uint64(1), s.Binds)
			require.Equal(t, [len(s.Moves)]uint64{}, s.Moves)
			require.Equal(t, 1, e.l.Bound(affinity.PhaseDecode, wb))
		})
	})
}

// B4: a bound target that is overloaded or not allowed: soft, the full
// set, and if the dispatch goes elsewhere the binding follows; hard, an
// *IneligibleError, and the binding is kept.
func TestContract_B4_BindingOverloadedOrNotAllowed(t *testing.T) {
	eachBackend(t, func(t *testing.T) {
		type tc struct {
			name     string
			cands    []affinity.Candidate
			allow    func(string) bool
			full     []affinity.Target
			hardWhy  error
			elsewise affinity.Target
		}
		cases := []tc{
			{"overloaded", []affinity.Candidate{{Target: wa, Overloaded: true}, {Target: wb}, {Target: wc}}, nil,
				[]affinity.Target{wa, wb, wc}, affinity.ErrPinnedWorkerOverloaded, wc},
			{"not allowed", abc(), func(w string) bool { return w != "a" }, []affinity.Target{wb, wc}, affinity.ErrPinnedWorkerNotAllowed, wc},
		}
		t.Run("soft", func(t *testing.T) {
			for _, c := range cases {
				t.Run(c.name, func(t *testing.T) {
					e := newEnv(t, affinity.ModeSoft)
					r := e.req("s")
					e.bind(r, wa)
					tr := e.start(r)
					got, err := tr.Eligible(c.cands, c.allow)
					require.NoError(t, err)
					require.Equal(t, c.full, targetsOf(got), "the full set")
					a, err := tr.Dispatch(c.elsewise)
					require.NoError(t, err)
					require.NotZero(t, a.ID(), "the binding follows: a placing dispatch")
					require.NoError(t, a.Complete(placement.Accepted))
					tr.Done()
					e.requireBound(r, c.elsewise)
					s := e.l.Stats()
					require.Equal(t, uint64(1), s.Moves[affinity.MoveFollow])
					require.Equal(t, uint64(2), s.Binds)
					require.Zero(t, s.Errors)
				})
			}
		})
		t.Run("hard", func(t *testing.T) {
			for _, c := range cases {
				t.Run(c.name, func(t *testing.T) {
					e := newEnv(t, affinity.ModeHard)
					r := e.req("s")
					e.bind(r, wa)
					tr := e.start(r)
					_, err := tr.Eligible(c.cands, c.allow)
					var ie *affinity.IneligibleError
					require.ErrorAs(t, err, &ie)
					require.ErrorIs(t, err, c.hardWhy)
					require.True(t, ie.Bound)
					require.Equal(t, wa, ie.Target)
					tr.Done()
					e.requireBound(r, wa)
					e.hit(r, wa)
					s := e.l.Stats()
					require.Equal(t, uint64(1), s.Errors)
					require.Equal(t, [len(s.Moves)]uint64{}, s.Moves)
					require.Equal(t, uint64(1), s.Binds)
				})
			}
		})
	})
}

// B5: a dispatch that disagrees with the binding: soft, the binding
// follows (a fenced move: of concurrent moves the first wins); hard, a
// *MismatchError, nothing dispatched, the binding kept.
func TestContract_B5_DispatchDisagreesWithBinding(t *testing.T) {
	eachBackend(t, func(t *testing.T) {
		t.Run("soft", func(t *testing.T) {
			t.Run("follows", func(t *testing.T) {
				e := newEnv(t, affinity.ModeSoft)
				r := e.req("s")
				e.bind(r, wa)
				tr := e.start(r)
				a, err := tr.Dispatch(wb)
				require.NoError(t, err)
				require.NotZero(t, a.ID())
				require.False(t, a.Hit())
				require.NoError(t, a.Complete(placement.Accepted))
				tr.Done()
				e.requireBound(r, wb)
				e.hit(r, wb)
				s := e.l.Stats()
				require.Equal(t, uint64(1), s.Moves[affinity.MoveFollow])
				require.Equal(t, uint64(2), s.Binds)
			})
			t.Run("first concurrent move wins", func(t *testing.T) {
				e := newEnv(t, affinity.ModeSoft)
				r := e.req("s")
				e.bind(r, wa)
				x, y := e.start(r), e.start(r)
				ax, err := tr2(t, x, wb)
				require.NoError(t, err)
				require.NotZero(t, ax.ID())
				ay, err := tr2(t, y, wc) // x's move came first
				require.NoError(t, err)
				require.Zero(t, ay.ID(), "the losing move is routed unpinned")
				require.Equal(t, affinity.CauseMoveLost, y.Unpinned())
				require.NoError(t, ax.Complete(placement.Accepted))
				require.NoError(t, ay.Complete(placement.Accepted))
				x.Done()
				y.Done()
				e.requireBound(r, wb)
				s := e.l.Stats()
				require.Equal(t, uint64(1), s.Unpinned[affinity.CauseMoveLost])
				require.Equal(t, uint64(2), s.Binds)
			})
			t.Run("a lost move is not counted as a move", func(t *testing.T) {
				// Stats.Moves "counts bindings moved": one binding moved.
				e := newEnv(t, affinity.ModeSoft)
				r := e.req("s")
				e.bind(r, wa)
				x, y := e.start(r), e.start(r)
				ax, err := tr2(t, x, wb)
				require.NoError(t, err)
				ay, err := tr2(t, y, wc)
				require.NoError(t, err)
				require.NoError(t, ax.Complete(placement.Accepted))
				require.NoError(t, ay.Complete(placement.Accepted))
				x.Done()
				y.Done()
				require.Equal(t, uint64(1), e.l.Stats().Moves[affinity.MoveFollow])
			})
		})
		t.Run("hard", func(t *testing.T) {
			e := newEnv(t, affinity.ModeHard)
			r := e.req("s")
			e.bind(r, wa)
			tr := e.start(r)
			a, err := tr.Dispatch(wb)
			require.Zero(t, a, "nothing dispatched")
			var me *affinity.MismatchError
			require.ErrorAs(t, err, &me)
			require.ErrorIs(t, err, affinity.ErrBindingMismatch)
			require.Equal(t, wa, me.Binding)
			require.Equal(t, wb, me.Dispatch)
			// The turn still holds the binding: the router may dispatch to it.
			a, err = tr.Dispatch(wa)
			require.NoError(t, err)
			require.True(t, a.Hit())
			require.NoError(t, a.Complete(placement.Accepted))
			tr.Done()
			e.requireBound(r, wa)
			s := e.l.Stats()
			require.Equal(t, uint64(1), s.Errors)
			require.Equal(t, [len(s.Moves)]uint64{}, s.Moves)
			require.Equal(t, uint64(1), s.Binds)
			require.Equal(t, uint64(1), s.Hits)
		})
	})
}

// tr2 dispatches tr to target (a helper that keeps the test bodies short).
func tr2(t *testing.T, tr affinity.Turn, target affinity.Target) (affinity.Attempt, error) {
	t.Helper()
	return tr.Dispatch(target)
}

// B6: a worker-only binding accepts any rank of its worker (a hit, in
// both modes); a ranked binding and another rank: soft, a move (B5); hard,
// a *MismatchError.
func TestContract_B6_RankedAndWorkerOnlyBindings(t *testing.T) {
	eachBackend(t, func(t *testing.T) {
		eachMode(t, boundModes, func(t *testing.T, m affinity.Mode) {
			t.Run("worker-only binding, any rank", func(t *testing.T) {
				e := newBareEnv(t, m)
				e.join("r", "boot-1", 4)
				r := e.req("s")
				e.bind(r, affinity.WorkerOnly("r"))
				for _, rank := range []int{0, 3} {
					tr := e.start(r)
					got, err := tr.Eligible(cands(affinity.Ranked("r", 0), affinity.Ranked("r", 3)), nil)
					require.NoError(t, err)
					require.Len(t, got, 2, "a worker-only binding accepts every rank")
					a, err := tr.Dispatch(affinity.Ranked("r", rank))
					require.NoError(t, err)
					require.True(t, a.Hit())
					require.NoError(t, a.Complete(placement.Accepted))
					tr.Done()
				}
				e.requireBound(r, affinity.WorkerOnly("r"))
				s := e.l.Stats()
				require.Equal(t, uint64(2), s.Hits)
				require.Equal(t, [len(s.Moves)]uint64{}, s.Moves)
			})
			t.Run("ranked binding, another rank", func(t *testing.T) {
				e := newBareEnv(t, m)
				e.join("r", "boot-1", 4)
				r := e.req("s")
				e.bind(r, affinity.Ranked("r", 0))
				tr := e.start(r)
				a, err := tr.Dispatch(affinity.Ranked("r", 2))
				if m == affinity.ModeHard {
					require.Zero(t, a)
					var me *affinity.MismatchError
					require.ErrorAs(t, err, &me)
					require.Equal(t, affinity.Ranked("r", 0), me.Binding)
					require.Equal(t, affinity.Ranked("r", 2), me.Dispatch)
					tr.Done()
					e.requireBound(r, affinity.Ranked("r", 0))
					require.Equal(t, uint64(1), e.l.Stats().Errors)
					return
				}
				require.NoError(t, err)
				require.NotZero(t, a.ID())
				require.NoError(t, a.Complete(placement.Accepted))
				tr.Done()
				e.requireBound(r, affinity.Ranked("r", 2))
				require.Equal(t, uint64(1), e.l.Stats().Moves[affinity.MoveFollow])
			})
		})
	})
}

// S1: an unbound session nobody is placing: the request places it, its
// dispatch binds.
func TestContract_S1_UnboundSessionPlaced(t *testing.T) {
	eachBackend(t, func(t *testing.T) {
		eachMode(t, boundModes, func(t *testing.T, m affinity.Mode) {
			e := newEnv(t, m)
			r := e.req("s")
			tr := e.start(r)
			require.True(t, tr.Placing())
			require.Equal(t, affinity.CauseNone, tr.Unpinned())
			_, bound := tr.Bound()
			require.False(t, bound)
			got, err := tr.Eligible(abc(), nil)
			require.NoError(t, err)
			require.Equal(t, []affinity.Target{wa, wb, wc}, targetsOf(got))
			e.requireUnbound(r)
			a, err := tr.Dispatch(wc)
			require.NoError(t, err)
			require.NotZero(t, a.ID())
			require.False(t, a.Hit())
			require.NoError(t, a.Complete(placement.Accepted))
			b, ok := tr.Bound()
			require.True(t, ok)
			require.Equal(t, wc, b)
			tr.Done()
			e.requireBound(r, wc)
			s := e.l.Stats()
			require.Equal(t, uint64(1), s.Binds)
			require.Zero(t, s.Hits, "placing is not a hit")
			require.Equal(t, 1, s.Live)
		})
	})
}

// S2: while another request places the session, a request waits (until
// its ctx ends), then hits the binding the first one made.
func TestContract_S2_WaitWhilePlacing(t *testing.T) {
	eachBackend(t, func(t *testing.T) {
		eachMode(t, boundModes, func(t *testing.T, m affinity.Mode) {
			e := newEnv(t, m)
			r := e.req("s")
			first := e.start(r)
			require.True(t, first.Placing())

			type res struct {
				tr  affinity.Turn
				err error
			}
			// A waiter whose context ends.
			ctx, cancel := context.WithCancel(context.Background())
			cancelled := make(chan res, 1)
			go func() {
				tr, err := e.l.Start(ctx, r)
				cancelled <- res{tr, err}
			}()
			require.Eventually(t, func() bool { return e.l.Stats().Waits == 1 }, 5*time.Second, time.Millisecond)
			select {
			case got := <-cancelled:
				t.Fatalf("Start returned while another request places the session: %v", got.err)
			case <-time.After(20 * time.Millisecond):
			}
			cancel()
			select {
			case got := <-cancelled:
				assert.Zero(t, got.tr, "Start: a Turn is returned only with a nil error")
				require.ErrorIs(t, got.err, placement.ErrCancelled)
			case <-time.After(5 * time.Second):
				t.Fatal("a waiter whose ctx ended did not return")
			}

			// A waiter that is served when the first request binds.
			served := make(chan res, 1)
			go func() {
				tr, err := e.l.Start(waitCtx(t), r)
				served <- res{tr, err}
			}()
			require.Eventually(t, func() bool { return e.l.Stats().Waits == 2 }, 5*time.Second, time.Millisecond)
			a, err := first.Dispatch(wb)
			require.NoError(t, err)
			require.NoError(t, a.Complete(placement.Accepted))
			first.Done()
			var got res
			select {
			case got = <-served:
			case <-time.After(5 * time.Second):
				t.Fatal("the waiter was not served after the session was bound")
			}
			require.NoError(t, got.err)
			b, ok := got.tr.Bound()
			require.True(t, ok)
			require.Equal(t, wb, b)
			ah, err := got.tr.Dispatch(wb)
			require.NoError(t, err)
			require.True(t, ah.Hit())
			require.NoError(t, ah.Complete(placement.Accepted))
			got.tr.Done()
			s := e.l.Stats()
			require.Equal(t, uint64(2), s.Waits)
			require.Equal(t, uint64(1), s.Hits)
			require.Equal(t, uint64(1), s.Binds)
		})
	})
}

// Q1: a quarantined session: soft, routed unpinned (CauseQuarantined), no
// binding made, the quarantine kept; hard, a *QuarantinedError with Until
// and RetryAfter.
func TestContract_Q1_Quarantined(t *testing.T) {
	eachBackend(t, func(t *testing.T) {
		const qttl = 10 * time.Minute
		eachMode(t, boundModes, func(t *testing.T, m affinity.Mode) {
			e := newEnv(t, m, func(c *affinity.Config) { c.QuarantineTTL = qttl })
			r := e.req("s")
			attempt := e.ambiguous(r, wa)
			require.NoError(t, e.clk.Advance(time.Minute))
			if m == affinity.ModeHard {
				tr, err := e.l.Start(waitCtx(t), r)
				assert.Zero(t, tr, "Start: a Turn is returned only with a nil error")
				var qe *affinity.QuarantinedError
				require.ErrorAs(t, err, &qe)
				require.ErrorIs(t, err, affinity.ErrQuarantined)
				require.Equal(t, wa, qe.Target)
				require.Equal(t, attempt, qe.Attempt)
				require.Equal(t, qttl, qe.Until, "the ambiguous outcome came at 0")
				require.Equal(t, qttl-time.Minute, qe.RetryAfter)
				require.Equal(t, uint64(1), e.l.Stats().Errors)
			} else {
				tr := e.start(r)
				require.Equal(t, affinity.CauseQuarantined, tr.Unpinned())
				require.False(t, tr.Placing())
				a, err := tr.Dispatch(wb)
				require.NoError(t, err)
				require.Zero(t, a.ID(), "unpinned: no attempt")
				require.NoError(t, a.Complete(placement.Accepted))
				tr.Done()
				require.Equal(t, uint64(1), e.l.Stats().Unpinned[affinity.CauseQuarantined])
				require.Zero(t, e.l.Stats().Errors)
			}
			e.requireUnbound(r)
			qs := e.l.Quarantined()
			require.Len(t, qs, 1, "the quarantine is kept")
			require.Equal(t, r.Session, qs[0].Key)
			require.Equal(t, attempt, qs[0].Attempt)
			require.Equal(t, wa, qs[0].Target)
			require.Equal(t, time.Duration(0), qs[0].Since)
			require.Equal(t, qttl, qs[0].Expires)
			s := e.l.Stats()
			require.Equal(t, 1, s.Quarantined)
			require.Equal(t, uint64(1), s.QuarantinesOpened)
			require.Zero(t, s.Binds)
		})
	})
}

// Q1, soft: a quarantined session's turns are narrowed to the quarantined
// attempt's target while it is eligible (its cache is warm, and the attempt
// may be running there), and go to the full set when it is not; still
// unpinned: no binding made, the quarantine kept (issue 25, item 11).
func TestContract_Q1_SoftPrefersQuarantinedTarget(t *testing.T) {
	eachBackend(t, func(t *testing.T) {
		e := newEnv(t, affinity.ModeSoft)
		r := e.req("s")
		attempt := e.ambiguous(r, wb)
		tr := e.start(r)
		require.Equal(t, affinity.CauseQuarantined, tr.Unpinned())
		got, err := tr.Eligible(abc(), nil)
		require.NoError(t, err)
		require.Equal(t, []affinity.Target{wb}, targetsOf(got), "narrowed to the quarantined attempt's target")
		a, err := tr.Dispatch(wb)
		require.NoError(t, err)
		require.Zero(t, a.ID(), "unpinned: no attempt")
		require.NoError(t, a.Complete(placement.Accepted))
		tr.Done()

		// Not eligible (overloaded, not allowed, failed): the full set, no error.
		busy := abc()
		busy[1].Overloaded = true
		tr = e.start(r)
		got, err = tr.Eligible(busy, nil)
		require.NoError(t, err)
		require.Equal(t, []affinity.Target{wa, wb, wc}, targetsOf(got))
		got, err = tr.Eligible(abc(), func(w string) bool { return w != "b" })
		require.NoError(t, err)
		require.Equal(t, []affinity.Target{wa, wc}, targetsOf(got))
		tr.Done()
		require.NoError(t, e.l.Fail("b"))
		tr = e.start(r)
		require.Equal(t, affinity.CauseQuarantined, tr.Unpinned())
		got, err = tr.Eligible(abc(), nil)
		require.NoError(t, err)
		require.Equal(t, []affinity.Target{wa, wc}, targetsOf(got))
		tr.Done()

		// A pin still wins.
		pinned := r
		pinned.Pin, pinned.HasPin = wc, true
		tr = e.start(pinned)
		got, err = tr.Eligible(abc(), nil)
		require.NoError(t, err)
		require.Equal(t, []affinity.Target{wc}, targetsOf(got))
		tr.Done()

		e.requireUnbound(r)
		qs := e.l.Quarantined()
		require.Len(t, qs, 1, "the quarantine is kept")
		require.Equal(t, attempt, qs[0].Attempt)
		require.Zero(t, e.l.Stats().Binds)
		require.Zero(t, e.l.Stats().Errors)
	})
}

// Q1, the dispatch time: a quarantine says when its attempt was
// dispatched, in Quarantined, the placing request's *UnknownOutcomeError
// and hard mode's *QuarantinedError (a resolver bounds the attempt's age
// by it: issue 25, item 9).
func TestContract_Q1_QuarantineCarriesDispatchTime(t *testing.T) {
	eachBackend(t, func(t *testing.T) {
		e := newEnv(t, affinity.ModeHard)
		r := e.req("s")
		require.NoError(t, e.clk.Set(5*time.Second))
		tr := e.start(r)
		a, err := tr.Dispatch(wa)
		require.NoError(t, err)
		require.NoError(t, e.clk.Set(7*time.Second))
		err = a.Complete(placement.Ambiguous)
		tr.Done()
		var u *affinity.UnknownOutcomeError
		require.ErrorAs(t, err, &u)
		require.Equal(t, 5*time.Second, u.Quarantine.DispatchedAt)
		_, err = e.l.Start(waitCtx(t), r)
		var qe *affinity.QuarantinedError
		require.ErrorAs(t, err, &qe)
		require.Equal(t, 5*time.Second, qe.DispatchedAt)
		qs := e.l.Quarantined()
		require.Len(t, qs, 1)
		require.Equal(t, 5*time.Second, qs[0].DispatchedAt)
		require.Equal(t, 7*time.Second, qs[0].Since)
	})
}

// fill binds n sessions (fill-0 ... fill-n-1) to a.
func (e *env) fill(n int) {
	e.t.Helper()
	for i := 0; i < n; i++ {
		e.bind(e.req(fmt.Sprintf("fill-%d", i)), wa)
	}
}

// C1: a full table: the request is routed unpinned (CauseCapacity), never
// an error. Rows are checked in order, so C1 decides before A1 even for a
// session the layer has not seen.
func TestContract_C1_TableFull(t *testing.T) {
	eachBackend(t, func(t *testing.T) {
		const table = 4
		eachMode(t, boundModes, func(t *testing.T, m affinity.Mode) {
			t.Run("a session seen before", func(t *testing.T) {
				// AdmitAllBelow 1: every session binds until the table is full.
				e := newEnv(t, m, func(c *affinity.Config) { c.MaxEntries = table; c.AdmitAllBelow = 1 })
				e.fill(table - 1)
				// "late" is seen (its first turn finds the table full and is
				// remembered), then its second turn finds it still full.
				e.bind(e.req("filler-last"), wa)
				r := e.req("late")
				for turn := 0; turn < 2; turn++ {
					tr := e.start(r)
					a, err := tr.Dispatch(wb)
					require.NoError(t, err)
					require.NoError(t, a.Complete(placement.Accepted))
					tr.Done()
				}
				tr := e.start(r)
				require.Equal(t, affinity.CauseCapacity, tr.Unpinned())
				a, err := tr.Dispatch(wb)
				require.NoError(t, err)
				require.Zero(t, a.ID())
				require.NoError(t, a.Complete(placement.Accepted))
				tr.Done()
				e.requireUnbound(r)
				s := e.l.Stats()
				require.GreaterOrEqual(t, s.Unpinned[affinity.CauseCapacity], uint64(1))
				require.Equal(t, table, s.Live)
				require.Equal(t, uint64(table), s.Binds)
				require.Zero(t, s.Errors)
			})
			t.Run("a session never seen", func(t *testing.T) {
				e := newEnv(t, m, func(c *affinity.Config) { c.MaxEntries = table; c.AdmitAllBelow = 1 })
				e.fill(table)
				r := e.req("fresh")
				tr := e.start(r)
				require.Equal(t, affinity.CauseCapacity, tr.Unpinned(), "C1 (table full) comes before A1 in the table")
				a, err := tr.Dispatch(wb)
				require.NoError(t, err)
				require.NoError(t, a.Complete(placement.Accepted))
				tr.Done()
				e.requireUnbound(r)
				s := e.l.Stats()
				require.Equal(t, uint64(1), s.Unpinned[affinity.CauseCapacity])
				require.Zero(t, s.Unpinned[affinity.CauseAdmission])
				require.Equal(t, table, s.Live)
				require.Zero(t, s.Errors)
			})
		})
	})
}

// A1: the table at AdmitAllBelow and a session the layer has not seen:
// routed unpinned (CauseAdmission), its target remembered.
// A2: its second turn places the session, narrowed to the first turn's
// target when it is eligible.
func TestContract_A1_AdmissionFirstTurnUnpinned(t *testing.T) {
	eachBackend(t, func(t *testing.T) {
		eachMode(t, boundModes, func(t *testing.T, m affinity.Mode) {
			e := newEnv(t, m, func(c *affinity.Config) { c.MaxEntries = 8 }) // admission from 4 entries
			e.fill(4)
			r := e.req("newcomer")
			tr := e.start(r)
			require.Equal(t, affinity.CauseAdmission, tr.Unpinned())
			require.False(t, tr.Placing())
			got, err := tr.Eligible(abc(), nil)
			require.NoError(t, err)
			require.Equal(t, []affinity.Target{wa, wb, wc}, targetsOf(got))
			a, err := tr.Dispatch(wc)
			require.NoError(t, err)
			require.Zero(t, a.ID())
			require.NoError(t, a.Complete(placement.Accepted))
			tr.Done()
			e.requireUnbound(r)
			s := e.l.Stats()
			require.Equal(t, uint64(1), s.Unpinned[affinity.CauseAdmission])
			require.Equal(t, 4, s.Live, "the first turn takes no entry")
			require.Equal(t, uint64(4), s.Binds)
		})
	})
}

func TestContract_A2_AdmissionSecondTurnPlaced(t *testing.T) {
	eachBackend(t, func(t *testing.T) {
		eachMode(t, boundModes, func(t *testing.T, m affinity.Mode) {
			t.Run("first target eligible", func(t *testing.T) {
				e := newEnv(t, m, func(c *affinity.Config) { c.MaxEntries = 8 })
				e.fill(4)
				r := e.req("newcomer")
				tr := e.start(r)
				require.Equal(t, affinity.CauseAdmission, tr.Unpinned())
				a, err := tr.Dispatch(wc)
				require.NoError(t, err)
				require.NoError(t, a.Complete(placement.Accepted))
				tr.Done()

				tr = e.start(r)
				require.True(t, tr.Placing(), "the second turn places the session")
				got, err := tr.Eligible(abc(), nil)
				require.NoError(t, err)
				require.Equal(t, []affinity.Target{wc}, targetsOf(got), "narrowed to the first turn's target")
				a, err = tr.Dispatch(wc)
				require.NoError(t, err)
				require.NotZero(t, a.ID())
				require.NoError(t, a.Complete(placement.Accepted))
				tr.Done()
				e.requireBound(r, wc)
				e.hit(r, wc)
				s := e.l.Stats()
				require.Equal(t, uint64(1), s.Unpinned[affinity.CauseAdmission])
				require.Equal(t, uint64(5), s.Binds)
			})
			t.Run("first target not eligible", func(t *testing.T) {
				e := newEnv(t, m, func(c *affinity.Config) { c.MaxEntries = 8 })
				e.fill(4)
				r := e.req("newcomer")
				tr := e.start(r)
				a, err := tr.Dispatch(wc)
				require.NoError(t, err)
				require.NoError(t, a.Complete(placement.Accepted))
				tr.Done()
				require.NoError(t, e.l.Fail("c"))

				tr = e.start(r)
				require.True(t, tr.Placing())
				got, err := tr.Eligible(abc(), nil)
				require.NoError(t, err, "a hint never fails, in any mode")
				require.Equal(t, []affinity.Target{wa, wb}, targetsOf(got))
				a, err = tr.Dispatch(wb)
				require.NoError(t, err)
				require.NoError(t, a.Complete(placement.Accepted))
				tr.Done()
				e.requireBound(r, wb)
				require.Zero(t, e.l.Stats().Errors)
			})
		})
	})
}

// L1: a later turn refused (DefinitelyNotAccepted on a hit): the binding
// moves at once (one refusal), and the request may dispatch elsewhere.
func TestContract_L1_LaterTurnRefused(t *testing.T) {
	eachBackend(t, func(t *testing.T) {
		eachMode(t, boundModes, func(t *testing.T, m affinity.Mode) {
			e := newEnv(t, m)
			r := e.req("s")
			e.bind(r, wa)
			tr := e.start(r)
			a, err := tr.Dispatch(wa)
			require.NoError(t, err)
			require.True(t, a.Hit())
			require.ErrorIs(t, a.Complete(placement.DefinitelyNotAccepted), placement.ErrNotAccepted)
			e.requireUnbound(r) // at once, before the request ends
			require.Equal(t, uint64(1), e.l.Stats().Moves[affinity.MoveRefused])
			got, err := tr.Eligible(cands(wb, wc), nil)
			require.NoError(t, err)
			require.Equal(t, []affinity.Target{wb, wc}, targetsOf(got))
			a, err = tr.Dispatch(wb)
			require.NoError(t, err)
			require.NotZero(t, a.ID(), "the request places the session anew")
			require.NoError(t, a.Complete(placement.Accepted))
			tr.Done()
			e.requireBound(r, wb)
			s := e.l.Stats()
			require.Equal(t, uint64(2), s.Binds)
			require.Equal(t, uint64(1), s.Moves[affinity.MoveRefused])
			require.Zero(t, s.Errors)
		})
	})
}

// L1, counted: Stats.Moves[MoveRefused] counts a refused hit only when its
// fenced invalidation removes the binding (issue 25, item 13): not a
// refusal on a hold whose version another request's move already ended,
// and once for two refusals of one version.
func TestContract_L1_RefusedStaleHoldMovesNothing(t *testing.T) {
	eachBackend(t, func(t *testing.T) {
		t.Run("the version moved on", func(t *testing.T) {
			e := newEnv(t, affinity.ModeSoft)
			r := e.req("s")
			e.bind(r, wa)
			mover, stale := e.start(r), e.start(r)
			a, err := mover.Dispatch(wb) // the binding follows (B5): a fenced move
			require.NoError(t, err)
			require.NoError(t, a.Complete(placement.Accepted))
			mover.Done()
			e.requireBound(r, wb)
			a, err = stale.Dispatch(wa) // a hit on the version the move ended
			require.NoError(t, err)
			require.True(t, a.Hit())
			require.ErrorIs(t, a.Complete(placement.DefinitelyNotAccepted), placement.ErrNotAccepted)
			stale.Done()
			e.requireBound(r, wb) // the refusal removed nothing
			s := e.l.Stats()
			require.Equal(t, uint64(1), s.Moves[affinity.MoveFollow])
			require.Zero(t, s.Moves[affinity.MoveRefused], "the stale hold's invalidation removed nothing")
		})
		eachMode(t, boundModes, func(t *testing.T, m affinity.Mode) {
			e := newEnv(t, m)
			r := e.req("s")
			e.bind(r, wa)
			t1, t2 := e.start(r), e.start(r)
			for _, tr := range []affinity.Turn{t1, t2} {
				a, err := tr.Dispatch(wa)
				require.NoError(t, err)
				require.True(t, a.Hit())
				require.ErrorIs(t, a.Complete(placement.DefinitelyNotAccepted), placement.ErrNotAccepted)
				tr.Done()
			}
			e.requireUnbound(r)
			require.Equal(t, uint64(1), e.l.Stats().Moves[affinity.MoveRefused], "one binding moved")
		})
	})
}

// L2: a later turn timed out or cut (Ambiguous on a hit): ErrOutcomeUnknown,
// not replayed, the binding kept (and its idle TTL not refreshed);
// timeouts alone never move it.
func TestContract_L2_LaterTurnOutcomeUnknown(t *testing.T) {
	eachBackend(t, func(t *testing.T) {
		const ttl = 10 * time.Minute
		eachMode(t, boundModes, func(t *testing.T, m affinity.Mode) {
			e := newEnv(t, m, func(c *affinity.Config) { c.IdleTTL = ttl })
			r := e.req("s")
			e.bind(r, wa) // idle from 0: expires at 10m unless refreshed
			require.NoError(t, e.clk.Advance(5*time.Minute))
			for i := 0; i < 3; i++ { // timeouts alone never move it
				tr := e.start(r)
				a, err := tr.Dispatch(wa)
				require.NoError(t, err)
				require.True(t, a.Hit())
				err = a.Complete(placement.Ambiguous)
				require.ErrorIs(t, err, affinity.ErrOutcomeUnknown)
				_, err = tr.Dispatch(wb)
				require.ErrorIs(t, err, affinity.ErrTurnEnded, "not replayed")
				_, err = tr.Dispatch(wa)
				require.ErrorIs(t, err, affinity.ErrTurnEnded, "not replayed")
				tr.Done()
				e.requireBound(r, wa)
			}
			s := e.l.Stats()
			require.Equal(t, [len(s.Moves)]uint64{}, s.Moves)
			require.Zero(t, s.QuarantinesOpened, "a later turn is not quarantined")
			require.Equal(t, 1, s.Live)
			// Not refreshed: the binding still expires at 10m.
			require.NoError(t, e.clk.Advance(ttl+time.Second))
			e.requireUnbound(r)
			require.Equal(t, uint64(1), e.l.Stats().Expirations)
		})
	})
}

// F1: the session's final request: the binding closes when the last
// request holding it ends.
func TestContract_F1_FinalRequestCloses(t *testing.T) {
	eachBackend(t, func(t *testing.T) {
		eachMode(t, boundModes, func(t *testing.T, m affinity.Mode) {
			e := newEnv(t, m)
			r := e.req("s")
			e.bind(r, wa)
			other := e.start(r) // holds a lease throughout
			final := r
			final.Final = true
			e.hit(final, wa)
			e.requireBound(r, wa) // other still holds it
			other.Done()
			e.requireUnbound(r)
			require.Zero(t, e.l.Stats().Live)
			tr := e.start(r)
			require.True(t, tr.Placing(), "after the close the session is placed anew")
			tr.Done()
		})
	})
}

// M1: a request that moved its session's binding MaxMoves times is routed
// unpinned (CauseMovesExhausted).
func TestContract_M1_MovesExhausted(t *testing.T) {
	eachBackend(t, func(t *testing.T) {
		eachMode(t, boundModes, func(t *testing.T, m affinity.Mode) {
			e := newEnv(t, m) // MaxMoves: the default, 2
			r := e.req("s")
			e.bind(r, wa)
			x := e.start(r)
			refuse := func(target affinity.Target) {
				t.Helper()
				a, err := x.Dispatch(target)
				require.NoError(t, err)
				require.True(t, a.Hit(), "dispatch to %v should be a hit", target)
				require.ErrorIs(t, a.Complete(placement.DefinitelyNotAccepted), placement.ErrNotAccepted)
			}
			refuse(wa) // move 1
			require.Equal(t, affinity.CauseNone, x.Unpinned())
			e.bind(r, wb) // another request places the session meanwhile
			refuse(wb)    // x finds it there: move 2
			require.Equal(t, affinity.CauseNone, x.Unpinned())
			e.bind(r, wc)
			refuse(wc) // move 3: past MaxMoves
			require.Equal(t, affinity.CauseMovesExhausted, x.Unpinned())
			require.False(t, x.Placing())
			a, err := x.Dispatch(wa)
			require.NoError(t, err)
			require.Zero(t, a.ID())
			require.False(t, a.Hit())
			require.NoError(t, a.Complete(placement.Accepted))
			x.Done()
			e.requireUnbound(r)
			s := e.l.Stats()
			require.Equal(t, uint64(1), s.Unpinned[affinity.CauseMovesExhausted])
			require.Equal(t, uint64(3), s.Moves[affinity.MoveRefused])
			require.Equal(t, uint64(3), s.Binds)
		})
	})
}

// ---------------------------------------------------------------------------
// The anchor router's known bugs

// (1) A Final request finishing while another request of the session holds
// a lease must not remove the binding: the other request's later turn still
// hits, and the binding goes when the last lease ends.
func TestAnchorBug_FinalCloseWhileLeased(t *testing.T) {
	eachBackend(t, func(t *testing.T) {
		eachMode(t, boundModes, func(t *testing.T, m affinity.Mode) {
			e := newEnv(t, m)
			r := e.req("s")
			e.bind(r, wb)
			long := e.start(r) // a long request of the session
			b, ok := long.Bound()
			require.True(t, ok)
			require.Equal(t, wb, b)

			final := r
			final.Final = true
			e.hit(final, wb)
			e.requireBound(r, wb)

			// A later turn while the long one still runs: a hit, not a new
			// placement (the session never splits).
			later := e.start(r)
			lb, ok := later.Bound()
			require.True(t, ok, "a later turn must still hit the closing binding")
			require.Equal(t, wb, lb)
			a, err := later.Dispatch(wb)
			require.NoError(t, err)
			require.True(t, a.Hit())
			require.NoError(t, a.Complete(placement.Accepted))

			a, err = long.Dispatch(wb)
			require.NoError(t, err)
			require.True(t, a.Hit())
			require.NoError(t, a.Complete(placement.Accepted))
			long.Done()
			e.requireBound(r, wb) // later holds the last lease
			later.Done()
			e.requireUnbound(r)
			s := e.l.Stats()
			require.Equal(t, uint64(1), s.Binds)
			require.Equal(t, uint64(3), s.Hits)
			require.Zero(t, s.Live)
		})
	})
}

// (2) A pin against the binding: hard, refused at Start and the binding
// kept, while a pin that agrees is served; soft, the dispatch goes to the
// pin and the binding follows.
func TestAnchorBug_PinAgainstBinding(t *testing.T) {
	eachBackend(t, func(t *testing.T) {
		t.Run("hard", func(t *testing.T) {
			e := newEnv(t, affinity.ModeHard)
			r := e.req("s")
			e.bind(r, wa)
			against := r
			against.Pin, against.HasPin = wc, true
			tr, err := e.l.Start(waitCtx(t), against)
			assert.Zero(t, tr, "Start: a Turn is returned only with a nil error")
			require.ErrorIs(t, err, affinity.ErrPinConflict)
			e.requireBound(r, wa)

			agrees := r
			agrees.Pin, agrees.HasPin = wa, true
			tr = e.start(agrees)
			got, err := tr.Eligible(abc(), nil)
			require.NoError(t, err)
			require.Equal(t, []affinity.Target{wa}, targetsOf(got))
			a, err := tr.Dispatch(wa)
			require.NoError(t, err)
			require.True(t, a.Hit())
			require.NoError(t, a.Complete(placement.Accepted))
			tr.Done()
			e.requireBound(r, wa)
			s := e.l.Stats()
			require.Equal(t, uint64(1), s.Hits)
			require.Equal(t, uint64(1), s.Errors)
			require.Equal(t, uint64(1), s.Binds)
		})
		t.Run("soft", func(t *testing.T) {
			e := newEnv(t, affinity.ModeSoft)
			r := e.req("s")
			e.bind(r, wa)
			against := r
			against.Pin, against.HasPin = wc, true
			tr := e.start(against)
			_, err := tr.Dispatch(wa)
			require.ErrorIs(t, err, affinity.ErrBindingMismatch, "a pin is exact even against the binding")
			a, err := tr.Dispatch(wc)
			require.NoError(t, err)
			require.Equal(t, wc, a.Target())
			require.NoError(t, a.Complete(placement.Accepted))
			tr.Done()
			e.requireBound(r, wc)
			e.hit(r, wc)
			require.Equal(t, uint64(1), e.l.Stats().Moves[affinity.MoveFollow])
		})
	})
}

// (3) Advancing the manual clock to a time whose deadlines would overflow
// is rejected with placement.ErrInvalidClock and changes nothing; a layer
// on a clock that late is refused at construction.
func TestAnchorBug_ManualClockOverflow(t *testing.T) {
	eachBackend(t, func(t *testing.T) {
		e := newEnv(t, affinity.ModeSoft)
		r := e.req("s")
		e.bind(r, wa)
		q := e.req("q")
		e.ambiguous(q, wb)
		for _, c := range []struct {
			name string
			move func() error
		}{
			{"Advance", func() error { return e.clk.Advance(math.MaxInt64 - 1) }},
			{"AdvanceBy", func() error { return e.clk.AdvanceBy(math.MaxInt64 - 1) }},
			{"Set", func() error { return e.clk.Set(math.MaxInt64 - 1) }},
			{"SetBy", func() error { return e.clk.SetBy(math.MaxInt64 - 1) }},
			{"Advance to MaxInt64", func() error { return e.clk.Advance(math.MaxInt64) }},
		} {
			t.Run(c.name, func(t *testing.T) {
				err := c.move()
				require.ErrorIs(t, err, placement.ErrInvalidClock)
				var ce *placement.ClockError
				require.ErrorAs(t, err, &ce)
				require.Equal(t, time.Duration(0), e.clk.Now(), "the clock is unchanged")
				require.Equal(t, time.Duration(0), e.l.Now())
				e.requireBound(r, wa)
				require.Len(t, e.l.Quarantined(), 1)
				s := e.l.Stats()
				require.Zero(t, s.Expirations)
				require.Zero(t, s.QuarantinesExpired)
				require.Equal(t, 2, s.Live)
			})
		}
		// The layer still works on that clock.
		e.hit(r, wa)
		require.NoError(t, e.clk.Advance(time.Hour))
		e.requireUnbound(r)
		require.Equal(t, uint64(1), e.l.Stats().Expirations)

		t.Run("construction", func(t *testing.T) {
			clk := placement.NewManualClock(math.MaxInt64 - 1)
			l, err := affinity.New(affinity.Config{Clock: clk})
			require.Nil(t, l)
			require.ErrorIs(t, err, affinity.ErrInvalidConfig)
			var ce *affinity.ConfigError
			require.ErrorAs(t, err, &ce)
			require.Equal(t, "Clock", ce.Field)
			require.Equal(t, time.Duration(math.MaxInt64-1), clk.Now())
		})
	})
}

// (4) A flood of fresh ids against a table of 8: no request gets an error
// (they route unpinned, counted by cause), and a session established before
// the flood keeps hitting its binding throughout.
func TestAnchorBug_TableExhaustionByFreshIDs(t *testing.T) {
	eachBackend(t, func(t *testing.T) {
		const flood = 2000
		eachMode(t, boundModes, func(t *testing.T, m affinity.Mode) {
			e := newEnv(t, m, func(c *affinity.Config) { c.MaxEntries = 8 })
			est := e.req("established")
			e.bind(est, wb)
			var placed, unpinned, estTurns uint64
			byCause := map[affinity.Cause]uint64{}
			for i := 0; i < flood; i++ {
				require.NoError(t, e.clk.AdvanceBy(time.Second/18))
				r := e.req(fmt.Sprintf("one-off-%d", i))
				tr, err := e.l.Start(waitCtx(t), r)
				require.NoError(t, err, "fresh id %d", i)
				if tr.Placing() {
					placed++
				} else {
					unpinned++
					byCause[tr.Unpinned()]++
				}
				got, err := tr.Eligible(abc(), nil)
				require.NoError(t, err, "fresh id %d", i)
				a, err := tr.Dispatch(got[i%len(got)].Target)
				require.NoError(t, err, "fresh id %d", i)
				require.NoError(t, a.Complete(placement.Accepted), "fresh id %d", i)
				tr.Done()
				if i%50 == 0 {
					e.hit(est, wb)
					estTurns++
				}
			}
			e.requireBound(est, wb)
			s := e.l.Stats()
			require.Equal(t, estTurns, s.Hits, "every turn of the established session hit")
			require.Equal(t, uint64(flood), placed+unpinned)
			require.GreaterOrEqual(t, unpinned, uint64(flood-8))
			require.Equal(t, unpinned, s.Unpinned[affinity.CauseAdmission]+s.Unpinned[affinity.CauseCapacity],
				"every unpinned fresh id is counted by its cause")
			require.Equal(t, byCause[affinity.CauseAdmission], s.Unpinned[affinity.CauseAdmission])
			require.Equal(t, byCause[affinity.CauseCapacity], s.Unpinned[affinity.CauseCapacity])
			require.Equal(t, 1+placed, s.Binds)
			require.LessOrEqual(t, s.Live, 8)
			require.Zero(t, s.Errors)
		})
	})
}

// ---------------------------------------------------------------------------
// Session identity

func TestSessionID_Validation(t *testing.T) {
	eachBackend(t, func(t *testing.T) {
		ok256 := strings.Repeat("x", 256)
		require.Len(t, ok256, affinity.MaxSessionIDBytes)
		for _, id := range []string{"a", ok256, "0191e6a4-5b0c-7d3e-9f1a-2b3c4d5e6f70", "~!#$%&'*+-.^_`|"} {
			require.NoError(t, affinity.ValidateSessionID(id), "%q", id)
			k, err := affinity.Namespace{}.Session(id)
			require.NoError(t, err)
			require.False(t, k.IsZero())
		}
		for name, id := range map[string]string{
			"empty":        "",
			"257 bytes":    strings.Repeat("x", 257),
			"space":        "a b",
			"control byte": "a\x01b",
			"DEL":          "a\x7fb",
			"tab":          "a\tb",
			"newline":      "a\nb",
			"non-ASCII":    "séance",
			"NUL":          "a\x00",
		} {
			t.Run(name, func(t *testing.T) {
				err := affinity.ValidateSessionID(id)
				var se *affinity.SessionIDError
				require.ErrorAs(t, err, &se)
				require.ErrorIs(t, err, affinity.ErrInvalidSessionID)
				require.NotEmpty(t, se.Reason)
				k, err := affinity.Namespace{Tenant: "t"}.Session(id)
				require.ErrorAs(t, err, &se)
				require.True(t, k.IsZero())
				// Through the header too.
				l := newBareEnv(t, affinity.ModeSoft).l
				h := http.Header{}
				h["X-Session-Id"] = []string{id}
				r, err := l.RequestFromHeader(affinity.Namespace{}, h, affinity.PhaseDecode)
				require.ErrorAs(t, err, &se)
				require.True(t, r.Session.IsZero())
			})
		}
	})
}

func TestHeaders_Precedence(t *testing.T) {
	eachBackend(t, func(t *testing.T) {
		e := newBareEnv(t, affinity.ModeSoft)
		read := func(h http.Header) (affinity.Request, error) {
			return e.l.RequestFromHeader(e.ns, h, affinity.PhaseDecode)
		}
		t.Run("canonical wins over alternates", func(t *testing.T) {
			h := http.Header{}
			h.Set("X-Dynamo-Session-ID", "dynamo")
			h.Set("X-Claude-Code-Session-Id", "claude")
			h.Set("session_id", "codex")
			h.Set("X-Session-ID", "canonical")
			r, err := read(h)
			require.NoError(t, err)
			require.Equal(t, e.key("canonical"), r.Session)
		})
		t.Run("alternates in order", func(t *testing.T) {
			h := http.Header{}
			h.Set("session_id", "codex")
			r, err := read(h)
			require.NoError(t, err)
			require.Equal(t, e.key("codex"), r.Session)
			h.Set("X-Claude-Code-Session-Id", "claude")
			r, err = read(h)
			require.NoError(t, err)
			require.Equal(t, e.key("claude"), r.Session)
			h.Set("X-Dynamo-Session-ID", "dynamo")
			r, err = read(h)
			require.NoError(t, err)
			require.Equal(t, e.key("dynamo"), r.Session)
		})
		t.Run("empty canonical is an error, not a fall-through", func(t *testing.T) {
			h := http.Header{}
			h.Set("X-Session-ID", "")
			h.Set("X-Dynamo-Session-ID", "dynamo")
			r, err := read(h)
			var se *affinity.SessionIDError
			require.ErrorAs(t, err, &se)
			require.True(t, r.Session.IsZero())
		})
		t.Run("duplicated header is an error", func(t *testing.T) {
			h := http.Header{}
			h.Add("X-Session-ID", "one")
			h.Add("X-Session-ID", "two")
			_, err := read(h)
			require.ErrorIs(t, err, affinity.ErrInvalidSessionID)
			h = http.Header{}
			h.Add("X-Dynamo-Session-ID", "one")
			h.Add("X-Dynamo-Session-ID", "one")
			_, err = read(h)
			require.ErrorIs(t, err, affinity.ErrInvalidSessionID, "even with equal values")
		})
		t.Run("no header: no session", func(t *testing.T) {
			r, err := read(http.Header{"X-Other": {"x"}})
			require.NoError(t, err)
			require.True(t, r.Session.IsZero())
			require.False(t, r.Final)
			require.Equal(t, affinity.PhaseDecode, r.Phase)
		})
		t.Run("phase passes through", func(t *testing.T) {
			h := http.Header{}
			h.Set("X-Session-ID", "s")
			r, err := e.l.RequestFromHeader(e.ns, h, affinity.PhasePrefill)
			require.NoError(t, err)
			require.Equal(t, affinity.PhasePrefill, r.Phase)
		})
		t.Run("final", func(t *testing.T) {
			for _, name := range []string{"X-Session-Final", "X-Dynamo-Session-Final"} {
				for v, want := range map[string]bool{"1": true, "true": true, "TRUE": true, "True": true,
					"0": false, "false": false, "yes": false, "": false, "11": false, " true": false} {
					h := http.Header{}
					h.Set("X-Session-ID", "s")
					h.Set(name, v)
					r, err := read(h)
					require.NoError(t, err)
					require.Equal(t, want, r.Final, "%s: %q", name, v)
					require.Equal(t, e.key("s"), r.Session)
				}
			}
			h := http.Header{}
			h.Set("X-Session-Final", "true")
			r, err := read(h)
			require.NoError(t, err)
			require.True(t, r.Final, "final without a session id is still read")
			require.True(t, r.Session.IsZero())
		})
	})
}

func TestNamespace_SeparatesTenants(t *testing.T) {
	eachBackend(t, func(t *testing.T) {
		e := newEnv(t, affinity.ModeSoft)
		acme := affinity.Namespace{Model: "m", Group: "g", Tenant: "acme"}
		globex := affinity.Namespace{Model: "m", Group: "g", Tenant: "globex"}
		ka, err := acme.Session("conversation-1")
		require.NoError(t, err)
		kg, err := globex.Session("conversation-1")
		require.NoError(t, err)
		require.NotEqual(t, ka, kg)
		ka2, err := acme.Session("conversation-1")
		require.NoError(t, err)
		require.Equal(t, ka, ka2, "keys are deterministic")

		ra := affinity.Request{Session: ka}
		rg := affinity.Request{Session: kg}
		e.bind(ra, wa)
		tr := e.start(rg)
		require.True(t, tr.Placing(), "the other tenant's session is not bound")
		tr.Done()
		e.bind(rg, wb)
		e.requireBound(ra, wa)
		e.requireBound(rg, wb)
		s := e.l.Stats()
		require.Equal(t, uint64(2), s.Binds)
		require.Equal(t, 2, s.Live)

		// Every field separates, and fields do not run into each other.
		keys := map[affinity.Key]affinity.Namespace{}
		for _, ns := range []affinity.Namespace{
			{}, {Model: "m"}, {Group: "m"}, {Tenant: "m"},
			{Model: "ab", Group: "c"}, {Model: "a", Group: "bc"},
			{Group: "ab", Tenant: "c"}, {Group: "a", Tenant: "bc"},
		} {
			k, err := ns.Session("id")
			require.NoError(t, err)
			prev, dup := keys[k]
			require.False(t, dup, "%+v and %+v give the same key", ns, prev)
			keys[k] = ns
		}
	})
}

func TestKey_FixedSizeAndOpaque(t *testing.T) {
	eachBackend(t, func(t *testing.T) {
		ns := affinity.Namespace{Model: "m"}
		long1 := strings.Repeat("Z", 255) + "Q"
		long2 := strings.Repeat("Z", 255) + "R"
		ids := []string{"Z", "session-with-a-secret-QWERTY", long1, long2}
		strs := map[string]string{}
		var n int
		for _, id := range ids {
			k, err := ns.Session(id)
			require.NoError(t, err)
			s := k.String()
			if n == 0 {
				n = len(s)
			}
			require.Len(t, s, n, "every key prints the same size, whatever the id's length")
			require.NotContains(t, s, id)
			require.NotContains(t, s, "QWERTY")
			require.NotContains(t, s, "ZZ")
			require.True(t, strings.HasPrefix(s, "s:"), s)
			prev, dup := strs[s]
			require.False(t, dup, "%q and %q print alike", id, prev)
			strs[s] = id
		}
		k1, _ := ns.Session(long1)
		k2, _ := ns.Session(long2)
		require.NotEqual(t, k1, k2, "two long ids that differ in their last byte give distinct keys")
		require.Equal(t, "none", affinity.Key{}.String())
		require.True(t, affinity.Key{}.IsZero())

		// A key of a long id works as any other in the table.
		e := newEnv(t, affinity.ModeSoft)
		e.bind(affinity.Request{Session: k1}, wa)
		e.bind(affinity.Request{Session: k2}, wb)
		require.Equal(t, 2, e.l.Stats().Live)
	})
}

func TestSiblingGroup_Keys(t *testing.T) {
	eachBackend(t, func(t *testing.T) {
		ns := affinity.Namespace{Model: "m", Tenant: "t"}
		parent, err := ns.Session("agent-1")
		require.NoError(t, err)
		require.False(t, parent.Sibling())
		g, err := ns.SiblingGroup(parent)
		require.NoError(t, err)
		require.True(t, g.Sibling())
		require.False(t, g.IsZero())
		require.NotEqual(t, parent, g)
		require.True(t, strings.HasPrefix(g.String(), "g:"), g.String())
		g2, err := ns.SiblingGroup(parent)
		require.NoError(t, err)
		require.Equal(t, g, g2)

		// No session key equals it: not the parent's id, nor any id a client
		// could send, including the parent key's own bytes printed.
		for _, id := range []string{"agent-1", g.String(), parent.String(), "g", "g:agent-1"} {
			k, err := ns.Session(id)
			require.NoError(t, err)
			require.NotEqual(t, g, k, "session id %q", id)
			require.False(t, k.Sibling())
		}
		// Another namespace's group of "the same" parent id differs.
		other := affinity.Namespace{Model: "m", Tenant: "u"}
		op, _ := other.Session("agent-1")
		og, err := other.SiblingGroup(op)
		require.NoError(t, err)
		require.NotEqual(t, g, og)
		// Groups of different parents differ.
		p2, _ := ns.Session("agent-2")
		g3, err := ns.SiblingGroup(p2)
		require.NoError(t, err)
		require.NotEqual(t, g, g3)

		_, err = ns.SiblingGroup(g)
		require.Error(t, err, "a sibling group of a sibling group")
		var se *affinity.SessionIDError
		require.ErrorAs(t, err, &se)
		_, err = ns.SiblingGroup(affinity.Key{})
		require.ErrorAs(t, err, &se, "a sibling group of no session")

		// A group binds apart from its parent.
		e := newEnv(t, affinity.ModeSoft)
		e.bind(affinity.Request{Session: parent}, wa)
		e.bind(affinity.Request{Session: g}, wb)
		e.requireBound(affinity.Request{Session: parent}, wa)
		e.hit(affinity.Request{Session: g}, wb)
	})
}

// ---------------------------------------------------------------------------
// Membership

func TestMembership_JoinKinds(t *testing.T) {
	eachBackend(t, func(t *testing.T) {
		e := newBareEnv(t, affinity.ModeSoft)
		require.Equal(t, affinity.Joined, e.join("a", "boot-1", 2))
		require.Equal(t, affinity.Recovered, e.join("a", "boot-1", 2), "a repeated Join")
		require.NoError(t, e.l.Fail("a"))
		require.Equal(t, affinity.Recovered, e.join("a", "boot-1", 2), "back after Fail")
		require.Equal(t, affinity.Restarted, e.join("a", "boot-2", 2))
		require.NoError(t, e.l.Leave("a"))
		require.Equal(t, affinity.Joined, e.join("a", "boot-2", 2), "after Leave: a new member")

		for _, w := range []affinity.Worker{
			{Identity: "x"}, {ID: "w"}, {ID: "w", Identity: "x", Ranks: -1}, {ID: "w", Identity: "x", FirstRank: -1},
		} {
			_, err := e.l.Join(w)
			var we *affinity.WorkerError
			require.ErrorAs(t, err, &we, "%+v", w)
			require.ErrorIs(t, err, affinity.ErrInvalidWorker)
		}
		require.ErrorIs(t, e.l.Fail("nobody"), affinity.ErrUnknownWorker)
		require.ErrorIs(t, e.l.Leave("nobody"), affinity.ErrUnknownWorker)

		ws := e.l.Workers()
		require.Len(t, ws, 1)
		require.Equal(t, "a", ws[0].ID)
		require.Equal(t, "boot-2", ws[0].Identity)
		require.Equal(t, affinity.WorkerUp, ws[0].State)
		require.NoError(t, e.l.Fail("a"))
		require.Equal(t, affinity.WorkerFailed, e.l.Workers()[0].State)
	})
}

// A restart fences the bindings of every rank of the worker in one call.
func TestMembership_RestartFencesEveryRank(t *testing.T) {
	eachBackend(t, func(t *testing.T) {
		e := newBareEnv(t, affinity.ModeSoft)
		e.join("a", "boot-1", 4)
		e.join("b", "boot-1", 4)
		var onA []affinity.Request
		for rank := 0; rank < 4; rank++ {
			r := e.req(fmt.Sprintf("ranked-%d", rank))
			e.bind(r, affinity.Ranked("a", rank))
			onA = append(onA, r)
		}
		wo := e.req("worker-only")
		e.bind(wo, affinity.WorkerOnly("a"))
		onA = append(onA, wo)
		pre := affinity.Request{Session: e.key("ranked-0"), Phase: affinity.PhasePrefill}
		e.bind(pre, affinity.Ranked("a", 3))
		onA = append(onA, pre)
		onB := e.req("on-b")
		e.bind(onB, affinity.Ranked("b", 1))
		require.Equal(t, 5, e.l.Bound(affinity.PhaseDecode, affinity.WorkerOnly("a")))
		require.Equal(t, 1, e.l.Bound(affinity.PhasePrefill, affinity.WorkerOnly("a")))

		require.Equal(t, affinity.Restarted, e.join("a", "boot-2", 4))
		for _, r := range onA {
			e.requireUnbound(r)
		}
		e.requireBound(onB, affinity.Ranked("b", 1))
		require.Zero(t, e.l.Bound(affinity.PhaseDecode, affinity.WorkerOnly("a")))
		require.Zero(t, e.l.Bound(affinity.PhasePrefill, affinity.WorkerOnly("a")))
		for _, w := range e.l.Workers() {
			switch w.ID {
			case "a":
				require.Zero(t, w.Bound)
				require.Equal(t, "boot-2", w.Identity)
			case "b":
				require.Equal(t, 1, w.Bound)
			}
		}
		for _, r := range onA {
			tr := e.start(r)
			require.True(t, tr.Placing(), "placed anew after the restart")
			tr.Done()
		}
	})
}

// Fail, then Join with the same identity before any request: the binding
// serves again.
func TestMembership_FlapServesAgain(t *testing.T) {
	eachBackend(t, func(t *testing.T) {
		eachMode(t, boundModes, func(t *testing.T, m affinity.Mode) {
			e := newEnv(t, m)
			r := e.req("s")
			e.bind(r, wb)
			require.NoError(t, e.l.Fail("b"))
			e.requireUnbound(r)
			require.Equal(t, affinity.Recovered, e.join("b", "boot-1", 0))
			e.requireBound(r, wb)
			e.hit(r, wb)
			s := e.l.Stats()
			require.Equal(t, uint64(1), s.Hits)
			require.Equal(t, uint64(1), s.Binds)
			require.Equal(t, [len(s.Moves)]uint64{}, s.Moves)
			require.Zero(t, s.QuarantinesDropped)
		})
	})
}

// Leave: the worker is never dispatched to again.
func TestMembership_LeaveNeverDispatched(t *testing.T) {
	eachBackend(t, func(t *testing.T) {
		eachMode(t, allModes, func(t *testing.T, m affinity.Mode) {
			e := newEnv(t, m)
			r := e.req("s")
			if m != affinity.ModeOff {
				e.bind(r, wa)
			}
			require.NoError(t, e.l.Leave("a"))
			for _, rr := range []affinity.Request{r, {}, e.req("other")} {
				tr := e.start(rr)
				got, err := tr.Eligible(abc(), nil)
				require.NoError(t, err)
				require.Equal(t, []affinity.Target{wb, wc}, targetsOf(got))
				a, err := tr.Dispatch(wa)
				require.Zero(t, a)
				var ie *affinity.IneligibleError
				require.ErrorAs(t, err, &ie)
				require.ErrorIs(t, err, affinity.ErrPinnedWorkerGone)
				tr.Done()
			}
			e.requireUnbound(r)
			for _, w := range e.l.Workers() {
				require.NotEqual(t, "a", w.ID)
			}
		})
	})
}

// A quarantine of an attempt on a worker ends when the worker restarts or
// leaves (QuarantinesDropped), not when it fails.
func TestMembership_QuarantineEndsOnRestartOrLeave(t *testing.T) {
	eachBackend(t, func(t *testing.T) {
		for _, c := range []struct {
			name  string
			act   func(e *env)
			ends  bool
			fresh affinity.Target // where the session is placed next
		}{
			{"restart", func(e *env) { require.Equal(e.t, affinity.Restarted, e.join("a", "boot-2", 0)) }, true, wa},
			{"leave", func(e *env) { require.NoError(e.t, e.l.Leave("a")) }, true, wb},
			{"fail", func(e *env) { require.NoError(e.t, e.l.Fail("a")) }, false, wb},
		} {
			t.Run(c.name, func(t *testing.T) {
				eachMode(t, boundModes, func(t *testing.T, m affinity.Mode) {
					e := newEnv(t, m)
					r := e.req("s")
					e.ambiguous(r, wa)
					require.Equal(t, 1, e.l.Stats().Quarantined)
					c.act(e)
					s := e.l.Stats() // the first look after the change
					if !c.ends {
						assert.Equal(t, 1, s.Quarantined)
						assert.Zero(t, s.QuarantinesDropped)
						require.Len(t, e.l.Quarantined(), 1)
						tr, err := e.l.Start(waitCtx(t), r)
						if m == affinity.ModeHard {
							require.ErrorIs(t, err, affinity.ErrQuarantined)
						} else {
							require.NoError(t, err)
							require.Equal(t, affinity.CauseQuarantined, tr.Unpinned())
							tr.Done()
						}
						return
					}
					assert.Zero(t, s.Quarantined, "the quarantine ended")
					assert.Equal(t, uint64(1), s.QuarantinesDropped, "counted at once")
					require.Empty(t, e.l.Quarantined())
					require.Equal(t, uint64(1), e.l.Stats().QuarantinesDropped)
					e.bind(r, c.fresh)
				})
			})
		}
	})
}

// ---------------------------------------------------------------------------
// Phases

func TestPhases_KeptApart(t *testing.T) {
	eachBackend(t, func(t *testing.T) {
		eachMode(t, boundModes, func(t *testing.T, m affinity.Mode) {
			e := newEnv(t, m)
			dec := e.req("s")
			pre := dec
			pre.Phase = affinity.PhasePrefill
			e.bind(pre, wa)
			e.requireUnbound(dec)
			e.bind(dec, wc)
			e.requireBound(pre, wa)
			e.requireBound(dec, wc)
			e.hit(pre, wa)
			e.hit(dec, wc)
			require.Equal(t, 1, e.l.Bound(affinity.PhasePrefill, wa))
			require.Zero(t, e.l.Bound(affinity.PhaseDecode, wa))
			require.Equal(t, 1, e.l.Bound(affinity.PhaseDecode, wc))
			require.Zero(t, e.l.Bound(affinity.PhasePrefill, wc))
			// Moving one phase leaves the other alone.
			require.NoError(t, e.l.Fail("c"))
			tr := e.start(dec)
			require.True(t, tr.Placing())
			tr.Done()
			e.requireBound(pre, wa)
			s := e.l.Stats()
			require.Equal(t, 1, s.Live, "the decode binding moved, the prefill one stays")
			require.Equal(t, uint64(2), s.Binds)
			require.Equal(t, uint64(2), s.Hits)

			_, err := e.l.Start(waitCtx(t), affinity.Request{Session: dec.Session, Phase: 7})
			require.ErrorIs(t, err, placement.ErrInvalidArgument)
			_, ok := e.l.Query(dec.Session, 7)
			require.False(t, ok)
		})
	})
}

// ---------------------------------------------------------------------------
// Stats

func TestStats_Counters(t *testing.T) {
	eachBackend(t, func(t *testing.T) {
		const (
			idle = 10 * time.Minute
			qttl = 5 * time.Minute
		)
		e := newEnv(t, affinity.ModeSoft, func(c *affinity.Config) { c.IdleTTL = idle; c.QuarantineTTL = qttl })
		want := affinity.Stats{}
		check := func(step string) {
			t.Helper()
			got := e.l.Stats()
			got.Workers = nil
			got.Tables = want.Tables // checked on their own below
			require.Equal(t, want, got, step)
		}
		check("zero")

		s1 := e.req("s1")
		e.bind(s1, wa) // a bind
		want.Binds, want.Live = 1, 1
		check("bind")

		e.hit(s1, wa)
		e.hit(s1, wa)
		want.Hits = 2
		check("hits")

		tr := e.start(affinity.Request{}) // no session
		tr.Done()
		want.Unpinned[affinity.CauseNoSession] = 1
		check("no session")

		// A quarantine resolved Accepted binds.
		q1 := e.req("q1")
		e.ambiguous(q1, wb)
		want.QuarantinesOpened, want.Live, want.Quarantined = 1, 2, 1
		check("quarantine opened")
		qs := e.l.Quarantined()
		require.Len(t, qs, 1)
		require.NoError(t, e.l.Resolve(qs[0], placement.ResolveAccepted))
		e.requireBound(q1, wb)
		want.ResolvedAccepted, want.Binds, want.Quarantined = 1, 2, 0
		check("resolved accepted")

		// One resolved NotAccepted.
		q2 := e.req("q2")
		e.ambiguous(q2, wc)
		qs = e.l.Quarantined()
		require.Len(t, qs, 1)
		require.NoError(t, e.l.Resolve(qs[0], placement.ResolveNotAccepted))
		e.requireUnbound(q2)
		want.QuarantinesOpened, want.ResolvedNotAccepted = 2, 1
		check("resolved not accepted")
		require.ErrorIs(t, e.l.Resolve(qs[0], placement.ResolveAccepted), placement.ErrNotQuarantined)

		// A soft request on a quarantined session, then the quarantine expires.
		q3 := e.req("q3")
		e.ambiguous(q3, wc)
		tr = e.start(q3)
		tr.Done()
		want.QuarantinesOpened, want.Live, want.Quarantined = 3, 3, 1
		want.Unpinned[affinity.CauseQuarantined] = 1
		check("quarantined, unpinned")
		require.NoError(t, e.clk.Advance(qttl))
		want.QuarantinesExpired, want.Live, want.Quarantined = 1, 2, 0
		check("quarantine expired")

		// Typed errors: a hard pin error is not available in soft mode; an
		// ineligible pin and a dispatch to a departed worker are.
		pinned := e.req("pinned")
		pinned.Pin, pinned.HasPin = affinity.WorkerOnly("ghost"), true
		_, err := e.l.Start(waitCtx(t), pinned) // P2 comes before any binding is read
		require.ErrorIs(t, err, affinity.ErrPinnedWorkerGone)
		want.Errors = 1
		check("an ineligible pin")
		tr = e.start(affinity.Request{})
		_, err = tr.Dispatch(affinity.WorkerOnly("ghost"))
		require.ErrorIs(t, err, affinity.ErrPinnedWorkerGone)
		tr.Done()
		want.Errors = 2
		want.Unpinned[affinity.CauseNoSession] = 2
		check("a dispatch to a non-member")

		// A move: the bound worker fails.
		require.NoError(t, e.l.Fail("b"))
		tr = e.start(q1)
		require.True(t, tr.Placing())
		tr.Done()
		want.Moves[affinity.MoveWorkerFailed], want.Live = 1, 1
		check("a move")

		// A refusal move.
		tr = e.start(s1)
		a, err := tr.Dispatch(wa)
		require.NoError(t, err)
		require.ErrorIs(t, a.Complete(placement.DefinitelyNotAccepted), placement.ErrNotAccepted)
		tr.Done()
		want.Moves[affinity.MoveRefused], want.Live = 1, 0 // a refused hit is no hit
		check("a refusal")

		// An idle binding expires.
		e.bind(e.req("idle"), wa)
		want.Binds, want.Live = 3, 1
		check("bind again")
		require.NoError(t, e.clk.AdvanceBy(idle))
		want.Expirations, want.Live = 1, 0
		check("expired")

		// Workers: members, states, bound sessions.
		e.bind(e.req("w1"), wa)
		e.bind(e.req("w2"), wa)
		e.bind(affinity.Request{Session: e.key("w2"), Phase: affinity.PhasePrefill}, wc)
		st := e.l.Stats()
		require.Equal(t, 2, st.Tables[affinity.PhaseDecode].Live)
		require.Equal(t, 1, st.Tables[affinity.PhasePrefill].Live)
		require.Equal(t, placement.DefaultMaxEntries, st.Tables[affinity.PhaseDecode].Capacity)
		require.Equal(t, placement.DefaultMaxEntries/2, st.Tables[affinity.PhasePrefill].AdmitMark)
		ws := st.Workers
		require.Equal(t, []affinity.WorkerInfo{
			{Worker: affinity.Worker{ID: "a", Identity: "boot-1"}, State: affinity.WorkerUp, Bound: 2},
			{Worker: affinity.Worker{ID: "b", Identity: "boot-1"}, State: affinity.WorkerFailed, Bound: 0},
			{Worker: affinity.Worker{ID: "c", Identity: "boot-1"}, State: affinity.WorkerUp, Bound: 1},
		}, ws)

		// The Source interface.
		var src affinity.Source = e.l
		require.Equal(t, uint64(6), src.Stats().Binds)
	})
}

// ---------------------------------------------------------------------------
// Documented Turn behaviour beyond the table

// Attempts live in their Turn (the package's allocations section): after
// a refusal and a second Dispatch, the first Attempt is a stale handle
// (ErrTurnEnded), never an alias of the one in flight.
func TestTurn_StaleFirstAttempt(t *testing.T) {
	eachBackend(t, func(t *testing.T) {
		eachMode(t, boundModes, func(t *testing.T, m affinity.Mode) {
			e := newEnv(t, m)
			tr := e.start(e.req("s"))
			defer tr.Done()
			a1, err := tr.Dispatch(wa)
			require.NoError(t, err)
			require.ErrorIs(t, a1.Complete(placement.DefinitelyNotAccepted), placement.ErrNotAccepted)
			a2, err := tr.Dispatch(wb)
			require.NoError(t, err)
			require.NotEqual(t, a1, a2)
			require.ErrorIs(t, a1.Complete(placement.Accepted), affinity.ErrTurnEnded)
			require.Equal(t, wa, a1.Target(), "a stale Attempt still says what it was")
			require.Equal(t, wb, a2.Target())
			require.NoError(t, a2.Complete(placement.Accepted))
		})
	})
}

// A Turn's state is pooled (the package's allocations section): once
// Done, its handle and its Attempts are inert (ErrTurnEnded, nothing
// reported, Done a no-op) even while the state serves another request,
// which they never act on.
func TestTurn_StaleHandleAfterDone(t *testing.T) {
	eachBackend(t, func(t *testing.T) {
		eachMode(t, boundModes, func(t *testing.T, m affinity.Mode) {
			e := newEnv(t, m)
			r := e.req("s")
			e.bind(r, wa)
			old := e.start(r)
			oa, err := old.Dispatch(wa)
			require.NoError(t, err)
			old.Done()
			// Later turns (one of them likely on old's pooled state).
			var live []affinity.Turn
			for range 4 {
				tr := e.start(r)
				live = append(live, tr)
			}
			for i := 0; i < 2; i++ {
				_, err = old.Dispatch(wa)
				require.ErrorIs(t, err, affinity.ErrTurnEnded)
				_, err = old.Eligible(abc(), nil)
				require.ErrorIs(t, err, affinity.ErrTurnEnded)
				_, bound := old.Bound()
				require.False(t, bound)
				require.False(t, old.Placing())
				require.Equal(t, affinity.CauseNone, old.Unpinned())
				require.ErrorIs(t, oa.Complete(placement.Accepted), affinity.ErrTurnEnded)
				ctx, cancel := oa.Context(context.Background())
				require.Equal(t, context.Background(), ctx)
				cancel()
				old.Done() // a no-op: the live turns keep their leases
			}
			for _, tr := range live {
				b, ok := tr.Bound()
				require.True(t, ok)
				require.Equal(t, wa, b)
				a, err := tr.Dispatch(wa)
				require.NoError(t, err)
				require.True(t, a.Hit())
				require.NoError(t, a.Complete(placement.Accepted))
				tr.Done()
			}
			require.Equal(t, uint64(4), e.l.Stats().Hits)
			var zero affinity.Turn
			zero.Done()
			_, err = zero.Dispatch(wa)
			require.ErrorIs(t, err, affinity.ErrTurnEnded)
			require.ErrorIs(t, affinity.Attempt{}.Complete(placement.Accepted), affinity.ErrTurnEnded)
		})
	})
}

// Dispatch's doc: "after Accepted or an unknown outcome it may not
// (ErrTurnEnded)".
func TestTurn_NoDispatchAfterAccepted(t *testing.T) {
	eachBackend(t, func(t *testing.T) {
		eachMode(t, boundModes, func(t *testing.T, m affinity.Mode) {
			t.Run("placing", func(t *testing.T) {
				e := newEnv(t, m)
				r := e.req("s")
				tr := e.start(r)
				defer tr.Done()
				a, err := tr.Dispatch(wa)
				require.NoError(t, err)
				require.NoError(t, a.Complete(placement.Accepted))
				_, err = tr.Dispatch(wa)
				require.ErrorIs(t, err, affinity.ErrTurnEnded)
				require.ErrorIs(t, a.Complete(placement.Accepted), affinity.ErrTurnEnded)
			})
			t.Run("hit", func(t *testing.T) {
				e := newEnv(t, m)
				r := e.req("s")
				e.bind(r, wa)
				tr := e.start(r)
				defer tr.Done()
				a, err := tr.Dispatch(wa)
				require.NoError(t, err)
				require.NoError(t, a.Complete(placement.Accepted))
				_, err = tr.Dispatch(wa)
				require.ErrorIs(t, err, affinity.ErrTurnEnded)
			})
			t.Run("unpinned", func(t *testing.T) {
				e := newEnv(t, m)
				tr := e.start(affinity.Request{})
				defer tr.Done()
				a, err := tr.Dispatch(wa)
				require.NoError(t, err)
				require.NoError(t, a.Complete(placement.Accepted))
				_, err = tr.Dispatch(wb)
				require.ErrorIs(t, err, affinity.ErrTurnEnded)
			})
			t.Run("after Done", func(t *testing.T) {
				e := newEnv(t, m)
				tr := e.start(e.req("s"))
				tr.Done()
				tr.Done() // idempotent
				_, err := tr.Dispatch(wa)
				require.ErrorIs(t, err, affinity.ErrTurnEnded)
				require.Zero(t, e.l.Stats().Live, "Done cancelled the reservation")
			})
		})
	})
}

// An accepted placing dispatch whose worker restarted before the commit is
// served but not bound: StaleAtBirth counts it, Binds ("new bindings") does
// not.
func TestStats_StaleAtBirthIsNotABind(t *testing.T) {
	eachBackend(t, func(t *testing.T) {
		eachMode(t, boundModes, func(t *testing.T, m affinity.Mode) {
			e := newEnv(t, m)
			sb := e.req("stale")
			tr := e.start(sb)
			a, err := tr.Dispatch(wc)
			require.NoError(t, err)
			require.NotZero(t, a.ID())
			require.Equal(t, affinity.Restarted, e.join("c", "boot-2", 0))
			require.NoError(t, a.Complete(placement.Accepted), "served, though not bound")
			_, bound := tr.Bound()
			require.False(t, bound)
			tr.Done()
			e.requireUnbound(sb)
			s := e.l.Stats()
			require.Equal(t, uint64(1), s.StaleAtBirth)
			require.Zero(t, s.Live)
			require.Zero(t, s.Binds, "Stats.Binds counts new bindings; a commit stale at birth made none")
			// The next request places the session on c's new instance.
			e.bind(sb, wc)
			require.Equal(t, uint64(1), e.l.Stats().Binds)
		})
	})
}

// A final request's ambiguous placing dispatch in one phase does not mark
// the other phase's quarantine of the same attempt id as final: with a
// fixed FirstAttempt both phases' coordinators issue the same ids (found
// by the resolver's tests; the layer kept one map of final attempts).
func TestContract_F1_FinalQuarantineIsPhaseLocal(t *testing.T) {
	eachBackend(t, func(t *testing.T) {
		e := newEnv(t, affinity.ModeSoft)
		ambiguous := func(r affinity.Request) uint64 {
			t.Helper()
			tr := e.start(r)
			defer tr.Done()
			require.True(t, tr.Placing())
			a, err := tr.Dispatch(wa)
			require.NoError(t, err)
			require.ErrorIs(t, a.Complete(placement.Ambiguous), affinity.ErrOutcomeUnknown)
			return a.ID()
		}
		decode := e.req("s")
		final := decode
		final.Final = true
		prefill := e.req("s")
		prefill.Phase = affinity.PhasePrefill
		fa, pa := ambiguous(final), ambiguous(prefill)
		if !overReplicas(t) {
			// Over replicas each phase's coordinator has its own replica id,
			// so their ids never coincide; the rule holds all the same.
			require.Equal(t, fa, pa, "the phases issue the same first attempt id")
		}
		qs := e.l.Quarantined()
		require.Len(t, qs, 2)
		for _, q := range qs {
			require.Equal(t, q.Phase == affinity.PhaseDecode, q.Final, "phase %v", q.Phase)
			if q.Phase == affinity.PhasePrefill {
				require.NoError(t, e.l.Resolve(q, placement.ResolveAccepted))
			}
		}
		e.requireBound(prefill, wa) // not ended as a final request's binding
	})
}

// F1 whatever the final request's fate (found by the router kit's probe):
// refused by its bound worker under KeepOnRefusal, timed out on its hit,
// or arriving while the session is quarantined, the session's final
// request still ends its binding (a later Resolve Accepted of the
// quarantine binds nothing that outlives the session).
func TestContract_F1_FinalRequestClosesWhateverItsFate(t *testing.T) {
	eachBackend(t, func(t *testing.T) {
		t.Run("refused under KeepOnRefusal", func(t *testing.T) {
			e := newEnv(t, affinity.ModeSoft, func(c *affinity.Config) { c.KeepOnRefusal = true })
			r := e.req("s")
			e.bind(r, wa)
			final := r
			final.Final = true
			tr := e.start(final)
			a, err := tr.Dispatch(wa)
			require.NoError(t, err)
			require.True(t, a.Hit())
			require.ErrorIs(t, a.Complete(placement.DefinitelyNotAccepted), placement.ErrNotAccepted)
			require.Equal(t, affinity.CauseHitRefused, tr.Unpinned())
			a, err = tr.Dispatch(wb)
			require.NoError(t, err)
			require.NoError(t, a.Complete(placement.Accepted))
			tr.Done()
			e.requireUnbound(r)
			require.Zero(t, e.l.Stats().Live)
		})
		t.Run("timed out on its hit", func(t *testing.T) {
			e := newEnv(t, affinity.ModeSoft)
			r := e.req("s")
			e.bind(r, wa)
			other := e.start(r) // a lease held throughout
			final := r
			final.Final = true
			tr := e.start(final)
			a, err := tr.Dispatch(wa)
			require.NoError(t, err)
			require.ErrorIs(t, a.Complete(placement.Ambiguous), affinity.ErrOutcomeUnknown)
			tr.Done()
			e.requireBound(r, wa) // other still holds it
			other.Done()
			e.requireUnbound(r)
		})
		t.Run("the session quarantined", func(t *testing.T) {
			e := newEnv(t, affinity.ModeSoft)
			r := e.req("s")
			e.ambiguous(r, wa)
			final := r
			final.Final = true
			tr := e.start(final)
			require.Equal(t, affinity.CauseQuarantined, tr.Unpinned())
			a, err := tr.Dispatch(wb)
			require.NoError(t, err)
			require.NoError(t, a.Complete(placement.Accepted))
			tr.Done()
			qs := e.l.Quarantined()
			require.Len(t, qs, 1)
			require.True(t, qs[0].Final, "the quarantine is now the final request's")
			require.NoError(t, e.l.Resolve(qs[0], placement.ResolveAccepted))
			e.requireUnbound(r)
			require.Zero(t, e.l.Stats().Live)
		})
	})
}

// Targets lists every rank of every member that is up (worker-only for a
// member without ranks), sorted, and follows the membership.
func TestTargets(t *testing.T) {
	eachBackend(t, func(t *testing.T) {
		e := newBareEnv(t, affinity.ModeSoft)
		require.Empty(t, e.l.Targets())
		_, err := e.l.Join(affinity.Worker{ID: "b", Identity: "1", FirstRank: 2, Ranks: 2})
		require.NoError(t, err)
		e.join("a", "1", 0)
		require.Equal(t, []affinity.Target{affinity.WorkerOnly("a"), affinity.Ranked("b", 2), affinity.Ranked("b", 3)}, e.l.Targets())
		ts := e.l.Targets()
		ts[0] = affinity.WorkerOnly("z") // a copy
		require.NoError(t, e.l.Fail("b"))
		require.Equal(t, []affinity.Target{affinity.WorkerOnly("a")}, e.l.Targets())
		e.join("b", "1", 0) // back, same identity, no ranks now
		require.NoError(t, e.l.Leave("a"))
		require.Equal(t, []affinity.Target{affinity.WorkerOnly("b")}, e.l.Targets())
	})
}
