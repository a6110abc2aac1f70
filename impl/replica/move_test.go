package replica

import (
	"errors"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/placementlab/placement/impl/claims"
	"github.com/placementlab/placement/impl/placement"
)

// hit starts a turn of key on c that must be a cached hit.
func hit(t *testing.T, c *Coordinator, key string) Turn {
	t.Helper()
	tu, err := c.Start(tctx(t), key, to("w9"))
	require.NoError(t, err)
	require.True(t, tu.Hit(), "a cached hit expected")
	return tu
}

// A move rewrites the claim (a new lineage, on the new target) and makes
// the hit a placing dispatch there; the other replica's cache of the old
// claim is evicted by its Delete and follows the new claim.
func TestContract_MoveRewritesClaim(t *testing.T) {
	e := newEnv(t, 3, nil, 0)
	r1, _ := e.replica("r1")
	r2, _ := e.replica("r2")
	first := serve(t, r1, "s", to("w1"), placement.Accepted, false)
	serve(t, r2, "s", nil, placement.Accepted, false)
	require.Equal(t, []string{"r1", "r2"}, e.b.Holders("s"))

	tu := hit(t, r1, "s")
	require.NoError(t, tu.Move(claims.Target{Worker: "w2"}))
	assert.False(t, tu.Hit())
	assert.Equal(t, claims.Target{Worker: "w2"}, tu.Target())
	assert.NotZero(t, tu.Attempt(), "a moved turn dispatches under a fresh attempt")
	assert.Greater(t, tu.Rev(), first.Rev())
	require.NoError(t, tu.Complete(placement.Accepted))
	tu.Done(false)

	cl, ok := e.claimOf("s")
	require.True(t, ok)
	assert.Equal(t, claims.Target{Worker: "w2"}, cl.Target)
	assert.Equal(t, cl.Rev, cl.Born, "a moved claim begins a lineage")
	assert.Equal(t, claims.Bound, cl.State)
	// The old lineage's holds ended with it: only the mover holds it.
	assert.Equal(t, []string{"r1"}, e.b.Holders("s"))
	assert.EqualValues(t, 1, r1.Stats().Moves)

	// r1's next turn is a hit on the new binding; r2 follows the new
	// claim once its Delete arrived.
	assert.Equal(t, claims.Target{Worker: "w2"}, serve(t, r1, "s", nil, placement.Accepted, false).Target())
	// (its Delete, or a touch that found the lineage ended, evicts it)
	require.Eventually(t, func() bool { return r2.Stats().Cached == 0 }, waitFor, tick, "r2 keeps its cache of the old claim")
	tu2 := serve(t, r2, "s", to("w3"), placement.Accepted, false)
	assert.False(t, tu2.Hit())
	assert.Equal(t, claims.Target{Worker: "w2"}, tu2.Target())
	assert.Equal(t, cl.Rev, tu2.Rev())
}

// Of two replicas moving one claim from the same revision, the first
// wins; the loser learns the winner's claim from the refusal, and its
// next turn follows it without waiting for the Delete event.
func TestContract_MoveFirstWins(t *testing.T) {
	e := newEnv(t, 3, nil, 0)
	r1, _ := e.replica("r1")
	r2, _ := e.replica("r2")
	serve(t, r1, "s", to("w1"), placement.Accepted, false)
	serve(t, r2, "s", nil, placement.Accepted, false)

	a, b := hit(t, r1, "s"), hit(t, r2, "s")
	require.NoError(t, a.Move(claims.Target{Worker: "w2"}))
	err := b.Move(claims.Target{Worker: "w3"})
	require.ErrorIs(t, err, claims.ErrClaimMoved)
	var me *claims.MoveError
	require.ErrorAs(t, err, &me)
	require.True(t, me.Found)
	assert.Equal(t, claims.Target{Worker: "w2"}, me.Current.Target)
	assert.ErrorIs(t, b.Complete(placement.Accepted), ErrTurnState, "a lost move holds nothing")
	b.Done(false)
	require.NoError(t, a.Complete(placement.Accepted))
	a.Done(false)

	cl, _ := e.claimOf("s")
	assert.Equal(t, claims.Target{Worker: "w2"}, cl.Target)
	assert.EqualValues(t, 1, r2.Stats().MovesLost)
	tu := serve(t, r2, "s", to("w3"), placement.Accepted, false)
	assert.Equal(t, claims.Target{Worker: "w2"}, tu.Target(), "the loser follows the winner")
}

// A claim quarantined elsewhere is not moved from a cached binding: the
// move is refused (the revision moved), and the session's next turn sees
// the quarantine.
func TestContract_MoveLeavesQuarantineAlone(t *testing.T) {
	e := newEnv(t, 3, nil, 0)
	r1, _ := e.replica("r1")
	serve(t, r1, "s", to("w1"), placement.Accepted, false)
	cl, _ := e.claimOf("s")
	_, err := e.workers.Quarantine(tctx(t), "s", cl.Rev, 99, cl.Gen)
	require.NoError(t, err)

	tu := hit(t, r1, "s") // the Delete may not have arrived yet
	err = tu.Move(claims.Target{Worker: "w2"})
	if err == nil {
		t.Fatalf("a move over a quarantine was applied: the claim is now %+v", e.mustClaim("s"))
	}
	require.ErrorIs(t, err, claims.ErrClaimMoved)
	tu.Done(false)
	q, _ := e.claimOf("s")
	assert.Equal(t, claims.Quarantined, q.State)
	_, err = r1.Start(tctx(t), "s", to("w2"))
	assert.ErrorIs(t, err, ErrQuarantined)
}

func (e *env) mustClaim(key string) claims.Claim {
	cl, _ := e.claimOf(key)
	return cl
}

// Requests in flight on the old binding finish unheld, and their end
// gives up no hold of the new claim.
func TestContract_MoveKeepsNewHold(t *testing.T) {
	e := newEnv(t, 3, nil, 0)
	r1, cs := e.replica("r1")
	serve(t, r1, "s", to("w1"), placement.Accepted, false)
	inFlight := hit(t, r1, "s")
	tu := hit(t, r1, "s")
	require.NoError(t, tu.Move(claims.Target{Worker: "w2"}))
	require.NoError(t, tu.Complete(placement.Accepted))
	require.Equal(t, []string{"r1"}, e.b.Holders("s"))
	unholds := cs.n("Unhold")
	require.NoError(t, inFlight.Complete(placement.Accepted))
	inFlight.Done(false)
	assert.Equal(t, unholds, cs.n("Unhold"), "the old binding's end sent an Unhold")
	assert.Equal(t, []string{"r1"}, e.b.Holders("s"), "the new claim's hold was given up")
	tu.Done(false)
	assert.Equal(t, []string{"r1"}, e.b.Holders("s"), "the new binding, idle, is held")
}

// A moved dispatch that is refused closes the moved claim and retries
// on a target not tried (not the one it moved to).
func TestContract_MovedDispatchRefused(t *testing.T) {
	e := newEnv(t, 3, nil, 0)
	r1, _ := e.replica("r1")
	serve(t, r1, "s", to("w1"), placement.Accepted, false)
	tu := hit(t, r1, "s")
	require.NoError(t, tu.Move(claims.Target{Worker: "w2"}))
	require.ErrorIs(t, tu.Complete(placement.DefinitelyNotAccepted), ErrRetry)
	assert.NotEqual(t, claims.Target{Worker: "w2"}, tu.Target())
	require.NoError(t, tu.Complete(placement.Accepted))
	sv := snapshot(tu)
	tu.Done(false)
	cl, _ := e.claimOf("s")
	assert.Equal(t, sv.Target(), cl.Target)
}

// A move whose reply was lost is settled by reading the claim: applied,
// the turn dispatches under it.
func TestGap_LostMoveReplySettled(t *testing.T) {
	e := newEnv(t, 3, nil, 0)
	r1, _ := e.replica("r1")
	serve(t, r1, "s", to("w1"), placement.Accepted, false)
	tu := hit(t, r1, "s")
	e.b.LoseReply("r1", "move", 1, false)
	err := tu.Move(claims.Target{Worker: "w2"})
	require.NoError(t, err, "a move that was applied, its reply lost, failed the turn")
	assert.Equal(t, claims.Target{Worker: "w2"}, tu.Target())
	require.NoError(t, tu.Complete(placement.Accepted))
	sv := snapshot(tu)
	tu.Done(false)
	cl, _ := e.claimOf("s")
	assert.Equal(t, claims.Target{Worker: "w2"}, cl.Target)
	assert.Equal(t, cl.Rev, sv.Rev())
}

// Bad moves: not a hit, the hit's own target, an unknown worker (the hit
// stays), an empty worker.
func TestMoveErrors(t *testing.T) {
	e := newEnv(t, 2, nil, 0)
	r1, _ := e.replica("r1")
	placing, err := r1.Start(tctx(t), "p", to("w1"))
	require.NoError(t, err)
	assert.ErrorIs(t, placing.Move(claims.Target{Worker: "w2"}), ErrTurnState)
	placing.Done(false)

	serve(t, r1, "s", to("w1"), placement.Accepted, false)
	tu := hit(t, r1, "s")
	assert.ErrorIs(t, tu.Move(claims.Target{Worker: "w1"}), claims.ErrInvalidArgument)
	assert.ErrorIs(t, tu.Move(claims.Target{}), claims.ErrInvalidArgument)
	assert.ErrorIs(t, tu.Move(claims.Target{Worker: "w1", HasRank: true, Rank: -1}), claims.ErrInvalidArgument)
	err = tu.Move(claims.Target{Worker: "nobody"})
	assert.ErrorIs(t, err, claims.ErrUnknownWorker)
	assert.True(t, tu.Hit(), "an unknown worker's move changed the hit")
	assert.NoError(t, tu.Complete(placement.Accepted))
	assert.ErrorIs(t, tu.Move(claims.Target{Worker: "w2"}), ErrTurnState, "a move after Complete")
	tu.Done(false)
	assert.False(t, errors.Is(err, claims.ErrClaimMoved))
	cl, _ := e.claimOf("s")
	assert.Equal(t, claims.Target{Worker: "w1"}, cl.Target)
}
