package affinity_test

import (
	"errors"
	"testing"

	"github.com/placementlab/placement/impl/affinity"
	"github.com/placementlab/placement/impl/placement"
	"github.com/stretchr/testify/require"
)

// What a router written as a new user would (probe3) tripped over, each
// now a rule with its test.

// TestProbe_InvalidPinBeforeConflict: rows are checked in order, so in hard
// mode a pin to a worker that is gone, or to a rank it does not serve, is
// that error (P1, P2), not a conflict with the binding (P4).
func TestProbe_InvalidPinBeforeConflict(t *testing.T) {
	e := newEnv(t, affinity.ModeHard)
	e.join("r", "boot-1", 2)
	r := e.req("s")
	e.bind(r, affinity.Ranked("r", 1))
	for _, c := range []struct {
		pin  affinity.Target
		want error
	}{
		{affinity.WorkerOnly("ghost"), affinity.ErrPinnedWorkerGone},
		{affinity.Ranked("r", 7), affinity.ErrInvalidPin},
		{affinity.Ranked("a", 0), affinity.ErrInvalidPin}, // a serves no ranks
		{affinity.WorkerOnly("a"), affinity.ErrPinConflict},
	} {
		p := r
		p.Pin, p.HasPin = c.pin, true
		_, err := e.l.Start(waitCtx(t), p)
		require.ErrorIs(t, err, c.want, "pin %v", c.pin)
		if c.want != affinity.ErrPinConflict {
			require.NotErrorIs(t, err, affinity.ErrPinConflict, "pin %v", c.pin)
		}
	}
	e.requireBound(r, affinity.Ranked("r", 1))
}

// TestProbe_RestartCountsMoves: every binding a restart (or a Leave) fences
// is a move of cause worker_gone, counted when it is fenced.
func TestProbe_RestartCountsMoves(t *testing.T) {
	e := newEnv(t, affinity.ModeSoft)
	e.join("r", "boot-1", 2)
	e.bind(e.req("s0"), affinity.Ranked("r", 0))
	e.bind(e.req("s1"), affinity.Ranked("r", 1))
	e.bind(e.req("s2"), affinity.Ranked("r", 1))
	e.bind(e.req("other"), wa)
	require.Equal(t, affinity.Restarted, e.join("r", "boot-2", 2))
	require.Equal(t, uint64(3), e.l.Stats().Moves[affinity.MoveWorkerGone])
	require.NoError(t, e.l.Leave("a"))
	require.Equal(t, uint64(4), e.l.Stats().Moves[affinity.MoveWorkerGone])
}

// TestProbe_FinalQuarantineResolvedAcceptedEnds: a final request whose
// placing dispatch ended ambiguous leaves no binding behind when a
// resolver settles it Accepted: the session is over.
func TestProbe_FinalQuarantineResolvedAcceptedEnds(t *testing.T) {
	e := newEnv(t, affinity.ModeSoft)
	r := e.req("last")
	r.Final = true
	e.ambiguous(r, wb)
	qs := e.l.Quarantined()
	require.Len(t, qs, 1)
	require.True(t, qs[0].Final)
	require.Equal(t, "boot-1", qs[0].Identity)
	require.NoError(t, e.l.Resolve(qs[0], placement.ResolveAccepted))
	e.requireUnbound(r)
	require.Equal(t, 0, e.l.Stats().Live)

	// Not final: the resolved binding stays.
	r2 := e.req("not-last")
	e.ambiguous(r2, wb)
	qs = e.l.Quarantined()
	require.Len(t, qs, 1)
	require.False(t, qs[0].Final)
	require.NoError(t, e.l.Resolve(qs[0], placement.ResolveAccepted))
	e.requireBound(r2, wb)
}

// TestProbe_KeepOnRefusal: with KeepOnRefusal a refused later turn goes
// elsewhere unpinned and the binding stays for the next turn; by default
// one refusal moves it.
func TestProbe_KeepOnRefusal(t *testing.T) {
	for _, keep := range []bool{false, true} {
		e := newEnv(t, affinity.ModeSoft, func(c *affinity.Config) { c.KeepOnRefusal = keep })
		r := e.req("s")
		e.bind(r, wa)
		tr := e.start(r)
		a, err := tr.Dispatch(wa)
		require.NoError(t, err)
		require.ErrorIs(t, a.Complete(placement.DefinitelyNotAccepted), placement.ErrNotAccepted)
		a, err = tr.Dispatch(wb) // the retry elsewhere
		require.NoError(t, err)
		require.NoError(t, a.Complete(placement.Accepted))
		tr.Done()
		s := e.l.Stats()
		if keep {
			e.requireBound(r, wa)
			require.Equal(t, uint64(1), s.Unpinned[affinity.CauseHitRefused])
			require.Zero(t, s.Moves[affinity.MoveRefused])
		} else {
			e.requireBound(r, wb)
			require.Zero(t, s.Unpinned[affinity.CauseHitRefused])
			require.Equal(t, uint64(1), s.Moves[affinity.MoveRefused])
		}
	}
}

// TestProbe_EndSession: a session ended outside its requests loses its
// bindings in both phases; a request holding a lease finishes where it is.
func TestProbe_EndSession(t *testing.T) {
	e := newEnv(t, affinity.ModeSoft)
	r := e.req("s")
	e.bind(r, wa)
	p := r
	p.Phase = affinity.PhasePrefill
	e.bind(p, wb)
	tr := e.start(r) // holds a lease
	ok, err := e.l.EndSession(r.Session)
	require.NoError(t, err)
	require.True(t, ok)
	e.requireUnbound(r)
	e.requireUnbound(p)
	a, err := tr.Dispatch(wa)
	require.NoError(t, err)
	require.NoError(t, a.Complete(placement.Accepted))
	tr.Done()
	e.requireUnbound(r)
	ok, err = e.l.EndSession(r.Session)
	require.NoError(t, err)
	require.False(t, ok)
}

// TestProbe_LateAmbiguousIsFenced: a placing dispatch that timed out and
// whose quarantine a resolver settled first reports a *FencedError when
// its own outcome finally comes: nothing changes.
func TestProbe_LateAmbiguousIsFenced(t *testing.T) {
	e := newEnv(t, affinity.ModeSoft)
	r := e.req("s")
	tr := e.start(r)
	a, err := tr.Dispatch(wa)
	require.NoError(t, err)
	require.NoError(t, e.clk.Advance(e.l.Now()+placement.DefaultDispatchTimeout)) // timed out: quarantined
	qs := e.l.Quarantined()
	require.Len(t, qs, 1)
	require.NoError(t, e.l.Resolve(qs[0], placement.ResolveNotAccepted))
	err = a.Complete(placement.Ambiguous)
	var f *placement.FencedError
	require.True(t, errors.As(err, &f), "%v", err)
	tr.Done()
	e.requireUnbound(r)
}
