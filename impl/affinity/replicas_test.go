package affinity_test

// The layer over several replicas on one claims store: what the contract
// table says of a session holds across router replicas (doc.go's Replicas
// section).

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/placementlab/placement/impl/affinity"
	"github.com/placementlab/placement/impl/claims/memstore"
	"github.com/placementlab/placement/impl/placement"
)

// cluster is n layers (router replicas r1..rn) over one in-memory claims
// store, on one manual clock, with workers a, b and c joined on each.
type cluster struct {
	t   *testing.T
	b   *memstore.Backend
	clk *placement.ManualClock
	ls  []*env
}

func newCluster(t *testing.T, n int, m affinity.Mode, opts ...func(*affinity.Replicas)) *cluster {
	t.Helper()
	clk := placement.NewManualClock(0)
	b := memstore.NewBackend(memstore.Config{IdleTTL: time.Hour, Clock: clk})
	t.Cleanup(func() { _ = b.Close() })
	c := &cluster{t: t, b: b, clk: clk}
	for i := 1; i <= n; i++ {
		name := fmt.Sprintf("r%d", i)
		h := b.Open(name)
		rc := &affinity.Replicas{Store: h, Name: name, StoreTimeout: 2 * time.Second, StoreRetry: 50 * time.Millisecond}
		for _, o := range opts {
			o(rc)
		}
		l, err := affinity.New(affinity.Config{Mode: m, Clock: clk, Replicas: rc})
		require.NoError(t, err)
		t.Cleanup(func() { _ = l.Close(); _ = h.Shutdown() })
		e := &env{t: t, l: l, clk: clk, ns: affinity.Namespace{Model: "llama", Group: "g", Tenant: "acme"}}
		for _, id := range []string{"a", "b", "c"} {
			e.join(id, "boot-1", 0)
		}
		c.ls = append(c.ls, e)
	}
	return c
}

// eventually waits until f holds (a replica learns what another did at
// the store's event).
func eventually(t *testing.T, f func() bool, msg string) {
	t.Helper()
	require.Eventually(t, f, 5*time.Second, time.Millisecond, msg)
}

// A short session id's claim is named by its raw key; with LegacyKeys, by
// its hashed form (the key every id had before the raw form), which the
// other replicas' turns and EndSession find too.
func TestReplicas_LegacyKeys(t *testing.T) {
	for _, legacy := range []bool{false, true} {
		t.Run(fmt.Sprint("legacy=", legacy), func(t *testing.T) {
			c := newCluster(t, 2, affinity.ModeSoft, func(r *affinity.Replicas) { r.LegacyKeys = legacy })
			e := c.ls[0]
			r := e.req("s")
			e.bind(r, wb)
			raw, hashed := affinity.RawKey(r.Session), affinity.RawKey(affinity.HashedKey(r.Session))
			require.NotEqual(t, raw, hashed, "a short id's key is raw")
			_, byRaw := c.b.Claim("d" + raw)
			_, byHash := c.b.Claim("d" + hashed)
			assert.Equal(t, !legacy, byRaw)
			assert.Equal(t, legacy, byHash)
			tr := c.ls[1].start(r)
			got, ok := tr.Bound()
			require.True(t, ok, "the other replica reads the claim")
			assert.Equal(t, wb, got)
			a, err := tr.Dispatch(wb)
			require.NoError(t, err)
			require.NoError(t, a.Complete(placement.Accepted))
			tr.Done()
			ok, err = c.ls[1].l.EndSession(r.Session)
			require.NoError(t, err)
			require.True(t, ok, "EndSession found the binding by the key")
		})
	}
}

// A session bound through one replica is bound on the others: their
// first turn reads the claim and is narrowed to it (adopting it), and
// their later turns are cached hits.
func TestReplicas_BindingShared(t *testing.T) {
	eachMode(t, boundModes, func(t *testing.T, m affinity.Mode) {
		c := newCluster(t, 3, m)
		r := c.ls[0].req("s")
		c.ls[0].bind(r, wb)
		for _, e := range c.ls[1:] {
			tr := e.start(r)
			b, ok := tr.Bound()
			require.True(t, ok, "bound through another replica")
			assert.Equal(t, wb, b)
			got, err := tr.Eligible(abc(), nil)
			require.NoError(t, err)
			assert.Equal(t, []affinity.Target{wb}, targetsOf(got))
			a, err := tr.Dispatch(wb)
			require.NoError(t, err)
			assert.False(t, a.Hit(), "this replica's first dispatch of the session")
			assert.NotZero(t, a.ID())
			require.NoError(t, a.Complete(placement.Accepted))
			tr.Done()
			e.hit(r, wb)
		}
		assert.Equal(t, []string{"r1/decode", "r2/decode", "r3/decode"}, c.b.Holders(affinityKey(r)))
	})
}

// affinityKey is r's claim key in the store (the decode phase's).
func affinityKey(r affinity.Request) string { return "d" + affinity.RawKey(r.Session) }

// Of two replicas moving one binding at once (soft mode: each dispatch
// goes elsewhere), the first wins everywhere; the other's request goes
// unpinned, and its next turn follows the winner.
func TestReplicas_MoveFirstWins(t *testing.T) {
	c := newCluster(t, 2, affinity.ModeSoft)
	e1, e2 := c.ls[0], c.ls[1]
	r := e1.req("s")
	e1.bind(r, wa)
	tr := e2.start(r)
	a, err := tr.Dispatch(wa)
	require.NoError(t, err)
	require.NoError(t, a.Complete(placement.Accepted))
	tr.Done()

	t1, t2 := e1.start(r), e2.start(r)
	a1, err := t1.Dispatch(wb)
	require.NoError(t, err)
	require.NotZero(t, a1.ID(), "a move dispatches under a fresh attempt")
	require.NoError(t, a1.Complete(placement.Accepted))
	a2, err := t2.Dispatch(wc)
	require.NoError(t, err)
	assert.Equal(t, affinity.CauseMoveLost, t2.Unpinned(), "the second move lost")
	assert.Zero(t, a2.ID())
	require.NoError(t, a2.Complete(placement.Accepted))
	t1.Done()
	t2.Done()
	e1.requireBound(r, wb)
	eventually(t, func() bool { got, ok := e2.query(r); return !ok || got == wb }, "r2 keeps the old binding")
	tr = e2.start(r)
	b, ok := tr.Bound()
	require.True(t, ok)
	assert.Equal(t, wb, b, "the loser follows the winner")
	tr.Done()
	assert.EqualValues(t, 1, e1.l.Stats().Moves[affinity.MoveFollow])
}

// A quarantine opened on one replica is seen on every replica (soft:
// unpinned, narrowed to the attempt's target; hard: an error), settled
// once by a resolver on another replica, and every replica sees the
// outcome.
func TestReplicas_QuarantineSettledOnce(t *testing.T) {
	eachMode(t, boundModes, func(t *testing.T, m affinity.Mode) {
		c := newCluster(t, 3, m)
		e1, e2, e3 := c.ls[0], c.ls[1], c.ls[2]
		r := e1.req("s")
		attempt := e1.ambiguous(r, wa)
		for _, e := range []*env{e2, e3} {
			tr, err := e.l.Start(waitCtx(t), r)
			if m == affinity.ModeHard {
				var qe *affinity.QuarantinedError
				require.ErrorAs(t, err, &qe)
				assert.Equal(t, attempt, qe.Attempt)
				assert.Equal(t, wa, qe.Target)
				continue
			}
			require.NoError(t, err)
			assert.Equal(t, affinity.CauseQuarantined, tr.Unpinned())
			got, err := tr.Eligible(abc(), nil)
			require.NoError(t, err)
			assert.Equal(t, []affinity.Target{wa}, targetsOf(got), "narrowed to the attempt's target")
			tr.Done()
		}
		q2, q3 := e2.l.Quarantined(), e3.l.Quarantined()
		require.Len(t, q2, 1)
		require.Len(t, q3, 1)
		assert.Equal(t, attempt, q2[0].Attempt)
		// Two resolvers race: one settles it, the other is told it is over.
		errs := make(chan error, 2)
		go func() { errs <- e2.l.Resolve(q2[0], placement.ResolveAccepted) }()
		go func() { errs <- e3.l.Resolve(q3[0], placement.ResolveAccepted) }()
		ok := 0
		for range 2 {
			err := <-errs
			if err == nil {
				ok++
				continue
			}
			assert.True(t, errors.Is(err, placement.ErrNotQuarantined) || errors.Is(err, placement.ErrFenced), "%v", err)
		}
		assert.Equal(t, 1, ok, "the quarantine was settled once")
		for _, e := range c.ls {
			eventually(t, func() bool {
				tr, err := e.l.Start(waitCtx(t), r)
				if err != nil {
					return false
				}
				defer tr.Done()
				b, bound := tr.Bound()
				return bound && b == wa
			}, "a replica does not see the accepted outcome")
		}
	})
}

// A worker's restart (a new identity) seen by one replica fences every
// replica's bindings to it; a flap (Fail, then the same identity back)
// fences nothing anywhere.
func TestReplicas_RestartFencesEverywhereFlapNowhere(t *testing.T) {
	c := newCluster(t, 2, affinity.ModeSoft)
	e1, e2 := c.ls[0], c.ls[1]
	flap, restart := e1.req("flap"), e1.req("restart")
	for _, r := range []affinity.Request{flap, restart} {
		e1.bind(r, wa)
		tr := e2.start(r)
		a, err := tr.Dispatch(wa)
		require.NoError(t, err)
		require.NoError(t, a.Complete(placement.Accepted))
		tr.Done()
	}
	require.NoError(t, e2.l.Fail("a"))
	require.Equal(t, affinity.Recovered, e2.join("a", "boot-1", 0))
	e1.hit(flap, wa)
	e2.hit(flap, wa)

	require.Equal(t, affinity.Restarted, e1.join("a", "boot-2", 0))
	e1.requireUnbound(restart)
	eventually(t, func() bool { _, ok := e2.query(restart); return !ok }, "r2 still routes to the restarted worker's old instance")
	tr := e2.start(restart)
	assert.True(t, tr.Placing(), "r2 places the session anew")
	tr.Done()
}

// In hard mode a dispatch that disagrees with a binding another replica
// made is a *MismatchError: nothing dispatched, the binding kept.
func TestReplicas_HardMismatch(t *testing.T) {
	c := newCluster(t, 2, affinity.ModeHard)
	r := c.ls[0].req("s")
	c.ls[0].bind(r, wa)
	tr := c.ls[1].start(r)
	_, err := tr.Dispatch(wb)
	var me *affinity.MismatchError
	require.ErrorAs(t, err, &me)
	tr.Done()
	c.ls[0].requireBound(r, wa)
}

// Start's context bounds Start only, over replicas as over the core: a
// request whose Start context ended still dispatches (the replica writes
// the claim then), completes and ends.
func TestReplicas_StartContextBoundsStartOnly(t *testing.T) {
	c := newCluster(t, 1, affinity.ModeSoft)
	e := c.ls[0]
	r := e.req("s")
	ctx, cancel := context.WithCancel(context.Background())
	tr, err := e.l.Start(ctx, r)
	require.NoError(t, err)
	cancel()
	defer tr.Done()
	require.True(t, tr.Placing())
	a, err := tr.Dispatch(wa)
	require.NoError(t, err, "the dispatch's store write used the ended context")
	require.NoError(t, a.Complete(placement.Accepted))
	e.requireBound(r, wa)
}
