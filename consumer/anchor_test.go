package consumer

// The anchor router's eleven public API contract tests
// (/work/shared/reference/anchor-router-behaviour.md, seed 004), each
// written again against placement's exported API and named by what it
// checks.

import (
	"context"
	"math"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/placementlab/placement/impl/affinity"
	"github.com/placementlab/placement/impl/picker"
	"github.com/placementlab/placement/impl/placement"
	"github.com/placementlab/placement/impl/router"
)

func targets(cs []affinity.Candidate) []affinity.Target {
	var ts []affinity.Target
	for _, c := range cs {
		ts = append(ts, c.Target)
	}
	return ts
}

// 1. Availability order: eligibility's affinity narrowing is evaluated
// against the final availability set whatever order the constraints were
// given in, and a binding whose worker becomes available again is
// narrowed to again.
func TestAnchor_AvailabilityOrder(t *testing.T) {
	e := newEnv(t, affinity.Config{})
	e.join(t, "a", "boot-1", 0)
	e.join(t, "b", "boot-1", 0)
	cands := e.candidates()
	bound := affinity.WorkerOnly("a")
	down := map[string]bool{"a": true}
	avail := func(w string) bool { return !down[w] }

	availFirst, err := e.l.Eligibility().WithAvailable(avail).WithBinding(bound).Select(cands)
	require.NoError(t, err)
	affinityFirst, err := e.l.Eligibility().WithBinding(bound).WithAvailable(avail).Select(cands)
	require.NoError(t, err)
	assert.Equal(t, []affinity.Target{affinity.WorkerOnly("b")}, targets(availFirst), "an unavailable binding is never chosen")
	assert.Equal(t, targets(availFirst), targets(affinityFirst), "the builder order does not matter")

	down["a"] = false
	again, err := e.l.Eligibility().WithBinding(bound).WithAvailable(avail).Select(cands)
	require.NoError(t, err)
	assert.Equal(t, []affinity.Target{bound}, targets(again), "availability restored: narrowed to the binding again")

	down["a"], down["b"] = true, true
	_, err = e.l.Eligibility().WithBinding(bound).WithAvailable(avail).Select(cands)
	assert.ErrorIs(t, err, affinity.ErrNoCandidates)
}

// 2. An explicit pin against a live binding: a disallowed pin is refused;
// a valid pin that conflicts with the binding is refused in hard mode
// (binding kept) and moves it in soft mode; a pin that matches is
// accepted as a hit.
func TestAnchor_ExplicitPinAgainstLiveBinding(t *testing.T) {
	for _, mode := range []affinity.Mode{affinity.ModeSoft, affinity.ModeHard} {
		t.Run(mode.String(), func(t *testing.T) {
			e := newEnv(t, affinity.Config{Mode: mode})
			e.join(t, "a", "boot-1", 0)
			e.join(t, "b", "boot-1", 0)
			req := affinity.Request{Session: e.key(t, "s")}
			e.ok(t, req, first) // bound to a
			pin := func(w string) affinity.Request {
				r := req
				r.Pin, r.HasPin = affinity.WorkerOnly(w), true
				return r
			}

			notA := func(w string) bool { return w != "a" }
			_, err := e.serveLayer(context.Background(), pin("a"), e.candidates(), notA, first, placement.Accepted)
			assert.ErrorIs(t, err, affinity.ErrPinnedWorkerNotAllowed, "a disallowed pin")

			s, err := e.serveLayer(context.Background(), pin("b"), e.candidates(), nil, first, placement.Accepted)
			got, _ := e.l.Query(req.Session, affinity.PhaseDecode)
			if mode == affinity.ModeHard {
				assert.ErrorIs(t, err, affinity.ErrPinConflict)
				var pe *affinity.PinError
				require.ErrorAs(t, err, &pe)
				assert.Equal(t, affinity.WorkerOnly("a"), pe.Binding)
				assert.Equal(t, affinity.WorkerOnly("a"), got, "a pin never moves a hard binding")
			} else {
				require.NoError(t, err)
				assert.Equal(t, affinity.WorkerOnly("b"), s.Target, "the pin is exact")
				assert.Equal(t, affinity.WorkerOnly("b"), got, "the soft binding follows the pin")
			}

			s, err = e.serveLayer(context.Background(), pin(got.Worker), e.candidates(), nil, last, placement.Accepted)
			require.NoError(t, err)
			assert.True(t, s.Hit, "a pin that matches the binding is a hit")
		})
	}
}

// 3. Manual-clock overflow: an advance to a time whose t + TTL overflows
// is rejected with a typed error and changes nothing; a layer cannot be
// built on such a clock.
func TestAnchor_ManualClockOverflow(t *testing.T) {
	e := newEnv(t, affinity.Config{IdleTTL: time.Minute})
	e.join(t, "a", "boot-1", 0)
	req := affinity.Request{Session: e.key(t, "s")}
	e.ok(t, req, first)
	for name, move := range map[string]func() error{
		"Advance":   func() error { return e.clk.Advance(math.MaxInt64 - 1) },
		"AdvanceBy": func() error { return e.clk.AdvanceBy(math.MaxInt64 - 1) },
		"Set":       func() error { return e.clk.Set(math.MaxInt64) },
	} {
		err := move()
		assert.ErrorIs(t, err, placement.ErrInvalidClock, name)
		var ce *placement.ClockError
		assert.ErrorAs(t, err, &ce, name)
		assert.Equal(t, time.Duration(0), e.clk.Now(), "%s: the clock is unchanged", name)
	}
	assert.True(t, e.ok(t, req, first).Hit, "the binding is untouched")
	assert.Zero(t, e.l.Stats().Expirations)

	_, err := affinity.New(affinity.Config{Clock: placement.NewManualClock(math.MaxInt64 - 1)})
	assert.ErrorIs(t, err, affinity.ErrInvalidConfig)
	var cfgErr *affinity.ConfigError
	require.ErrorAs(t, err, &cfgErr)
	assert.Equal(t, "Clock", cfgErr.Field)
}

// 4. Sibling keys: an agent's subagents share one sibling-group key, fixed
// and distinct from every session key (no client id produces it), and so
// one binding.
func TestAnchor_SiblingKeys(t *testing.T) {
	e := newEnv(t, affinity.Config{})
	e.join(t, "a", "boot-1", 0)
	e.join(t, "b", "boot-1", 0)
	parent := e.key(t, "agent-1")
	g1, err := e.ns.SiblingGroup(parent)
	require.NoError(t, err)
	g2, err := e.ns.SiblingGroup(parent)
	require.NoError(t, err)
	assert.Equal(t, g1, g2, "deterministic")
	assert.True(t, g1.Sibling())
	assert.False(t, parent.Sibling())
	assert.NotEqual(t, parent, g1)
	other, err := e.ns.SiblingGroup(e.key(t, "agent-2"))
	require.NoError(t, err)
	assert.NotEqual(t, g1, other)
	for _, id := range []string{g1.String(), "agent-1", "sibling:agent-1"} {
		if k, err := e.ns.Session(id); err == nil {
			assert.NotEqual(t, g1, k, "no client id produces the group's key: %q", id)
		}
	}

	s := e.ok(t, affinity.Request{Session: g1}, last)
	for range 3 {
		sub := e.ok(t, affinity.Request{Session: g1}, first)
		assert.True(t, sub.Hit)
		assert.Equal(t, s.Target, sub.Target, "subagents share the group's binding")
	}
	_, bound := e.l.Query(parent, affinity.PhaseDecode)
	assert.False(t, bound, "the parent's own session is a separate binding")
}

// 5. Separate prefill and decode tables: one session binds a prefill
// worker and, independently, a decode worker; ending one leaves the other.
func TestAnchor_SeparatePrefillDecodeTables(t *testing.T) {
	e := newEnv(t, affinity.Config{})
	e.join(t, "p", "boot-1", 0)
	e.join(t, "d", "boot-1", 0)
	key := e.key(t, "s")
	only := func(w string) func(string) bool { return func(x string) bool { return x == w } }
	run := func(p affinity.Phase, w string) served {
		s, err := e.serveLayer(context.Background(), affinity.Request{Session: key, Phase: p}, e.candidates(), only(w), first, placement.Accepted)
		require.NoError(t, err)
		return s
	}
	run(affinity.PhasePrefill, "p")
	run(affinity.PhaseDecode, "d")
	pt, ok := e.l.Query(key, affinity.PhasePrefill)
	require.True(t, ok)
	dt, ok := e.l.Query(key, affinity.PhaseDecode)
	require.True(t, ok)
	assert.Equal(t, affinity.WorkerOnly("p"), pt)
	assert.Equal(t, affinity.WorkerOnly("d"), dt)
	st := e.l.Stats()
	assert.Equal(t, 1, st.Tables[affinity.PhasePrefill].Live)
	assert.Equal(t, 1, st.Tables[affinity.PhaseDecode].Live)
	assert.Equal(t, 1, e.l.Bound(affinity.PhasePrefill, pt))
	assert.Equal(t, 0, e.l.Bound(affinity.PhasePrefill, dt))

	// A pin is phase-local: a decode pin does not touch the prefill binding.
	pinned := affinity.Request{Session: key, Phase: affinity.PhaseDecode, Pin: affinity.WorkerOnly("p"), HasPin: true}
	_, err := e.serveLayer(context.Background(), pinned, e.candidates(), nil, first, placement.Accepted)
	require.NoError(t, err)
	pt2, _ := e.l.Query(key, affinity.PhasePrefill)
	assert.Equal(t, pt, pt2)

	require.NoError(t, e.l.Fail("d"))
	assert.True(t, run(affinity.PhasePrefill, "p").Hit, "the decode worker's failure leaves prefill alone")
}

// 6. Virtual TTL: active leases keep a binding alive past its idle TTL on
// virtual time; the last release starts the idle expiry at virtual time.
func TestAnchor_VirtualTTL(t *testing.T) {
	e := newEnv(t, affinity.Config{IdleTTL: time.Minute})
	e.join(t, "a", "boot-1", 0)
	req := affinity.Request{Session: e.key(t, "s")}
	e.ok(t, req, first)

	long, err := e.l.Start(context.Background(), req) // a long request holds a lease
	require.NoError(t, err)
	require.NoError(t, e.clk.AdvanceBy(time.Hour))
	_, bound := e.l.Query(req.Session, affinity.PhaseDecode)
	assert.True(t, bound, "a leased binding outlives its TTL")
	a, err := long.Dispatch(affinity.WorkerOnly("a"))
	require.NoError(t, err)
	require.NoError(t, a.Complete(placement.Accepted))
	long.Done() // idle from now (1h)

	require.NoError(t, e.clk.AdvanceBy(time.Minute-time.Nanosecond))
	_, bound = e.l.Query(req.Session, affinity.PhaseDecode)
	assert.True(t, bound, "idle for less than the TTL")
	require.NoError(t, e.clk.AdvanceBy(time.Nanosecond))
	_, bound = e.l.Query(req.Session, affinity.PhaseDecode)
	assert.False(t, bound, "idle for the TTL: expired")
}

// 7. Wait, abort and drop: a request waits while another places the
// session; the placer's abort (Done with nothing dispatched) hands the
// session to the waiter; a waiter whose context ends gets ErrCancelled; a
// placer that dropped its dispatch quarantines the session.
func TestAnchor_WaitAbortDrop(t *testing.T) {
	e := newEnv(t, affinity.Config{})
	e.join(t, "a", "boot-1", 0)
	req := affinity.Request{Session: e.key(t, "s")}
	placer, err := e.l.Start(context.Background(), req)
	require.NoError(t, err)
	require.True(t, placer.Placing())

	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
	defer cancel()
	_, err = e.l.Start(ctx, req)
	assert.ErrorIs(t, err, placement.ErrCancelled, "a waiter's context ends its wait")

	got := make(chan affinity.Turn, 1)
	go func() {
		w, err := e.l.Start(context.Background(), req)
		assert.NoError(t, err)
		got <- w
	}()
	require.Eventually(t, func() bool { return e.l.Stats().Waits >= 2 }, 5*time.Second, time.Millisecond)
	placer.Done() // abort: nothing dispatched
	var waiter affinity.Turn
	select {
	case waiter = <-got:
	case <-time.After(5 * time.Second):
		t.Fatal("the waiter was not handed the session")
	}
	assert.True(t, waiter.Placing(), "the waiter places the session")
	_, err = waiter.Dispatch(affinity.WorkerOnly("a"))
	require.NoError(t, err)
	waiter.Done() // drop: the dispatch's outcome is unknown
	assert.Len(t, e.l.Quarantined(), 1, "a dropped placing dispatch quarantines the session")
}

// 8. Invalidation and worker removal: a worker that leaves is never
// dispatched to and its bindings are fenced; EndSession removes a
// binding whoever holds it; Query is read-only (no lease, no entry).
func TestAnchor_InvalidationAndWorkerRemoval(t *testing.T) {
	e := newEnv(t, affinity.Config{})
	e.join(t, "a", "boot-1", 0)
	e.join(t, "b", "boot-1", 0)
	req := affinity.Request{Session: e.key(t, "s")}
	e.ok(t, req, first)
	require.NoError(t, e.l.Leave("a"))
	_, bound := e.l.Query(req.Session, affinity.PhaseDecode)
	assert.False(t, bound, "a departed worker's binding is fenced")
	turn, err := e.l.Start(context.Background(), req)
	require.NoError(t, err)
	_, err = turn.Dispatch(affinity.WorkerOnly("a"))
	assert.ErrorIs(t, err, affinity.ErrPinnedWorkerGone, "never dispatched to a departed worker")
	a, err := turn.Dispatch(affinity.WorkerOnly("b"))
	require.NoError(t, err)
	require.NoError(t, a.Complete(placement.Accepted))
	turn.Done()

	before := e.l.Stats().Live
	_, found := e.l.Query(e.key(t, "never-seen"), affinity.PhaseDecode)
	assert.False(t, found)
	assert.Equal(t, before, e.l.Stats().Live, "Query creates nothing")

	holder, err := e.l.Start(context.Background(), req)
	require.NoError(t, err)
	removed, err := e.l.EndSession(req.Session)
	require.NoError(t, err)
	assert.True(t, removed, "ended while another request holds a lease")
	holder.Done()
	_, bound = e.l.Query(req.Session, affinity.PhaseDecode)
	assert.False(t, bound)
}

// 9. Target fallback: an ineligible soft binding falls back to the
// candidates the host's own constraints allow, never beyond them; a hard
// binding does not fall back.
func TestAnchor_TargetFallbackKeepsHostConstraints(t *testing.T) {
	e := newEnv(t, affinity.Config{})
	for _, w := range []string{"a", "b", "c"} {
		e.join(t, w, "boot-1", 0)
	}
	allowAB := func(w string) bool { return w != "c" }
	el := e.l.Eligibility().WithAllow(allowAB).WithAvailable(func(w string) bool { return w != "a" })
	soft, err := el.WithBinding(affinity.WorkerOnly("a")).Select(e.candidates())
	require.NoError(t, err)
	assert.Equal(t, []affinity.Target{affinity.WorkerOnly("b")}, targets(soft), "fallback keeps allow and availability")

	_, err = el.WithMode(affinity.ModeHard).WithBinding(affinity.WorkerOnly("a")).Select(e.candidates())
	var ie *affinity.IneligibleError
	require.ErrorAs(t, err, &ie)
	assert.True(t, ie.Bound)

	hinted, err := el.WithHint(affinity.WorkerOnly("c")).Select(e.candidates())
	require.NoError(t, err)
	assert.Equal(t, []affinity.Target{affinity.WorkerOnly("b")}, targets(hinted), "a hint outside allow never widens the set")
}

// 10. Data-parallel rank rules: a worker-only binding accepts any rank of
// its worker; a ranked binding another rank only as a move (soft) or a
// mismatch (hard); a pin with a rank but no worker is invalid.
func TestAnchor_DPRankRules(t *testing.T) {
	assert.True(t, affinity.WorkerOnly("a").Accepts(affinity.Ranked("a", 3)))
	assert.True(t, affinity.Ranked("a", 1).Accepts(affinity.Ranked("a", 1)))
	assert.False(t, affinity.Ranked("a", 1).Accepts(affinity.Ranked("a", 0)))
	assert.False(t, affinity.Ranked("a", 1).Accepts(affinity.WorkerOnly("a")))
	assert.False(t, affinity.WorkerOnly("a").Accepts(affinity.WorkerOnly("b")))

	e := newEnv(t, affinity.Config{Mode: affinity.ModeHard})
	e.join(t, "a", "boot-1", 2)
	req := affinity.Request{Session: e.key(t, "s")}
	e.ok(t, req, first) // a/0
	turn, err := e.l.Start(context.Background(), req)
	require.NoError(t, err)
	_, err = turn.Dispatch(affinity.Ranked("a", 1))
	assert.ErrorIs(t, err, affinity.ErrBindingMismatch, "hard: another rank of a ranked binding")
	turn.Done()

	_, err = e.l.Start(context.Background(), affinity.Request{Session: e.key(t, "x"), Pin: affinity.Target{Rank: 1, HasRank: true}, HasPin: true})
	assert.ErrorIs(t, err, affinity.ErrInvalidPin, "a rank without a worker")
	_, err = e.l.Start(context.Background(), affinity.Request{Session: e.key(t, "x"), Pin: affinity.Ranked("a", -1), HasPin: true})
	assert.ErrorIs(t, err, affinity.ErrInvalidPin, "a negative rank")
}

// lastPicker is a custom policy: always the last candidate it is offered.
type lastPicker struct{ offered *[][]affinity.Target }

func (p lastPicker) Pick(_ *picker.Request, cands []picker.Candidate, _ []float64) int {
	var ts []affinity.Target
	for _, c := range cands {
		ts = append(ts, c.Target)
	}
	*p.offered = append(*p.offered, ts)
	return len(cands) - 1
}

// 11. A custom policy: the router's own picker chooses a new session's
// worker, and is not consulted for a bound session's later turns (the
// binding is eligible); when the binding is not eligible the policy sees
// the full set and its choice is kept (affinity stays advisory in soft
// mode).
func TestAnchor_CustomPolicy(t *testing.T) {
	layer, err := affinity.New(affinity.Config{Clock: placement.NewManualClock(0)})
	require.NoError(t, err)
	defer layer.Close()
	for _, id := range []string{"a", "b", "c"} {
		_, err := layer.Join(affinity.Worker{ID: id, Identity: "boot-1"})
		require.NoError(t, err)
	}
	overloaded := map[string]bool{}
	var offered [][]affinity.Target
	d, err := router.New(router.Config{Layer: layer, Pipeline: &picker.Pipeline{
		Filters: []picker.Filter{picker.DropOverloaded{}}, Picker: lastPicker{&offered}},
		Candidates: func(affinity.Phase) []picker.Candidate {
			var cs []picker.Candidate
			for _, id := range []string{"a", "b", "c"} {
				cs = append(cs, picker.Candidate{Target: affinity.WorkerOnly(id), Overloaded: overloaded[id]})
			}
			return cs
		}})
	require.NoError(t, err)
	send := func(context.Context, router.Dispatch) (placement.Outcome, router.Relay, error) {
		return placement.Accepted, func() error { return nil }, nil
	}
	key, err := affinity.Namespace{Model: "m"}.Session("s")
	require.NoError(t, err)
	do := func() router.Result {
		res, err := d.Do(context.Background(), affinity.Request{Session: key}, nil, send)
		require.NoError(t, err)
		return res
	}
	res := do()
	assert.Equal(t, affinity.WorkerOnly("c"), res.Target, "the custom policy placed the session")
	assert.True(t, res.Placed)
	res = do()
	assert.True(t, res.Hit)
	assert.Len(t, offered, 1, "a hit does not consult the policy")

	overloaded["c"] = true
	res = do()
	assert.Equal(t, affinity.WorkerOnly("b"), res.Target, "the binding is overloaded: the policy chooses from the full set")
	assert.Equal(t, []affinity.Target{affinity.WorkerOnly("a"), affinity.WorkerOnly("b")}, offered[len(offered)-1],
		"the policy's own filter dropped the overloaded binding")
	got, _ := layer.Query(key, affinity.PhaseDecode)
	assert.Equal(t, res.Target, got, "soft mode: the binding follows the policy's choice")
}
