package claims

import (
	"fmt"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"
)

func testModel(t *testing.T, leases int) *Model {
	t.Helper()
	m, err := New(Config{Replicas: []string{"r1", "r2"}, Sessions: []string{"s1"}, Workers: []string{"w1", "w2"},
		MaxRev: 4, MaxGen: 2, MaxLeases: leases, MaxChan: 3, MaxFaults: 2})
	require.NoError(t, err)
	return m
}

// do applies the steps named by labels, each of which must be enabled.
func do(t *testing.T, m *Model, s State, labels ...Label) State {
	t.Helper()
	for _, l := range labels {
		n, ok := m.Apply(&s, l)
		require.True(t, ok, "%s is not enabled in\n%s", m.Format(l), m.FormatState(&s))
		s = n
	}
	return s
}

func claim(r, s, w int) Label     { return Label{Act: ActClaim, R: r, S: s, W: w} }
func rs(a Action, r, s int) Label { return Label{Act: a, R: r, S: s, W: None} }
func onR(a Action, r int) Label   { return Label{Act: a, R: r, S: None, W: None} }

func TestFirstWriterWinsAndHolds(t *testing.T) {
	m := testModel(t, 1)
	s := do(t, m, m.Init(), claim(0, 0, 0), claim(1, 0, 1), rs(ActRoute, 0, 0), rs(ActRoute, 1, 0))
	require.Equal(t, 0, s.Claim[0].Target, "the second proposal must not replace the first")
	require.Equal(t, 0, s.Cache[m.ix(1, 0)].Target)
	require.Equal(t, uint64(3), s.Holders[0])
	_, ok := m.Apply(&s, Label{Act: ActExpire, R: None, S: 0, W: None})
	require.False(t, ok, "a held claim must not expire")
}

func TestCloseDefersUnderAnothersHold(t *testing.T) {
	m := testModel(t, 1)
	s := do(t, m, m.Init(), claim(0, 0, 0), claim(1, 0, 0), rs(ActRoute, 0, 0), rs(ActRoute, 1, 0), rs(ActClose, 0, 0))
	require.Equal(t, StClosing, s.Claim[0].St)
	require.Equal(t, []Event{{S: 0, Rev: 1}}, s.Chan[1], "r2 learns that revision 1 ended")
	s = do(t, m, s, rs(ActRelease, 1, 0))
	require.Equal(t, StNone, s.Claim[0].St, "the last Unhold deletes a Closing claim")
	require.NotZero(t, s.Ended[0]&(1<<2))
}

func TestStaleCloseChangesNothing(t *testing.T) {
	m := testModel(t, 1)
	s := do(t, m, m.Init(), claim(0, 0, 0), claim(1, 0, 0), rs(ActRoute, 0, 0), rs(ActRoute, 1, 0),
		rs(ActAmbiguous, 1, 0))
	require.Equal(t, StQuarantined, s.Claim[0].St)
	before := s.Claim[0]
	s = do(t, m, s, rs(ActClose, 0, 0))
	require.Equal(t, before, s.Claim[0], "a close of revision 1 must not touch revision 2")
}

func TestResetEvictsButKeepsUnclaimed(t *testing.T) {
	m := testModel(t, 1)
	s := do(t, m, m.Init(), claim(0, 0, 0), onR(ActDisconnect, 0),
		Label{Act: ActExpire, R: None, S: 0, W: None}, onR(ActReconnect, 0))
	require.Equal(t, []Event{ResetEv}, s.Chan[0])
	require.Equal(t, StBound, s.Cache[m.ix(0, 0)].St)
	s = do(t, m, s, onR(ActReceive, 0))
	require.Equal(t, StNone, s.Cache[m.ix(0, 0)].St)
	s = do(t, m, s, onR(ActDisconnect, 0), Label{Act: ActPlaceLocal, R: 0, S: 0, W: 1}, onR(ActReconnect, 0))
	_, ok := m.Apply(&s, rs(ActReconcile, 0, 0))
	require.False(t, ok, "a reconcile waits for the Reset")
	s = do(t, m, s, onR(ActReceive, 0))
	require.Equal(t, StUnclaimed, s.Cache[m.ix(0, 0)].St, "a Reset keeps unclaimed placements")
	s = do(t, m, s, rs(ActReconcile, 0, 0))
	require.Equal(t, StBound, s.Claim[0].St)
	require.Equal(t, 1, s.Claim[0].Target)
}

// TestLineageIsHistory: the ghost lineage follows the claims' history, not
// their born: a resolve that moves born (BugResolveRestartsLineage) leaves
// it, and HoldersCoverLeases, measured with it, sees the hold a reconnect
// then drops.
func TestLineageIsHistory(t *testing.T) {
	resolve1 := Label{Act: ActResolve, R: None, S: 0, W: None, A: 1, Accepted: true}
	steps := []Label{claim(0, 0, 0), rs(ActRoute, 0, 0), rs(ActAmbiguous, 0, 0), resolve1,
		onR(ActDisconnect, 0), onR(ActReconnect, 0)}
	m := testModel(t, 1)
	s := do(t, m, m.Init(), steps...)
	require.Equal(t, 1, s.Claim[0].Born)
	require.Equal(t, 1, s.Lineage[0])
	require.True(t, Invariants["HoldersCoverLeases"].Holds(m, &s))
	bug := testModel(t, 1)
	require.NoError(t, bug.Override("Resolve", "BugResolveRestartsLineage"))
	s = do(t, bug, bug.Init(), steps...)
	require.Equal(t, 3, s.Claim[0].Born, "the variant moved born")
	require.Equal(t, 1, s.Lineage[0], "the ghost did not follow it")
	require.False(t, Invariants["HoldersCoverLeases"].Holds(bug, &s), "r1's requests on revision 1 are unheld")
}

// TestCrashedHoldsAreLeaked: a crash that keeps the replica's holds
// (BugCrashKeepsHolds) breaks HoldsAreLeases; the spec's Crash does not.
func TestCrashedHoldsAreLeaked(t *testing.T) {
	steps := []Label{claim(0, 0, 0), rs(ActRoute, 0, 0), onR(ActCrash, 0)}
	m := testModel(t, 1)
	s := do(t, m, m.Init(), steps...)
	require.True(t, Invariants["HoldsAreLeases"].Holds(m, &s))
	bug := testModel(t, 1)
	require.NoError(t, bug.Override("Crash", "BugCrashKeepsHolds"))
	s = do(t, bug, bug.Init(), steps...)
	require.False(t, Invariants["HoldsAreLeases"].Holds(bug, &s))
}

func moveL(r, s, w int) Label { return Label{Act: ActMove, R: r, S: s, W: w} }

// TestMoveFencedFirstWins: a move is a new lineage fenced by the revision
// the mover caches; the second of two concurrent moves from one revision is
// refused and its replica caches the winner's claim; the other replica
// learns the move through the old revision's Delete.
func TestMoveFencedFirstWins(t *testing.T) {
	m := testModel(t, 1)
	m.Cfg.MaxMoves = 2
	s := do(t, m, m.Init(), claim(0, 0, 0), claim(1, 0, 0), rs(ActRoute, 1, 0), moveL(0, 0, 1))
	require.Equal(t, Claim{St: StBound, Rev: 2, Born: 2, Target: 1, Gen: 1}, s.Claim[0])
	require.Zero(t, s.Holders[0], "the old lineage's holds end with it")
	require.Equal(t, 2, s.Lineage[0])
	require.Equal(t, []Move{{From: 1, To: 2}}, s.Moves[0])
	require.Equal(t, []Event{{S: 0, Rev: 1}}, s.Chan[1], "r2 learns that revision 1 ended")
	s = do(t, m, s, moveL(1, 0, 1))
	require.Equal(t, 2, s.Claim[0].Rev, "the second move from revision 1 changes nothing")
	require.Equal(t, entryOf(s.Claim[0]), s.Cache[m.ix(1, 0)], "the loser caches the winner's claim")
	require.Equal(t, []Move{{From: 1, To: 2}}, s.Moves[0])
	require.Equal(t, 2, s.NMoves)
	_, ok := m.Apply(&s, moveL(0, 0, 0))
	require.False(t, ok, "MaxMoves is spent")
	for _, n := range []string{"OneTargetOnceSeen", "FirstMoveWins"} {
		require.True(t, Invariants[n].Holds(m, &s), n)
	}
}

// TestMoveRefusedOverQuarantine: a quarantined claim does not move; the
// broken variant BugMoveOverQuarantine moves it and QuarantineLifecycle
// fails.
func TestMoveRefusedOverQuarantine(t *testing.T) {
	steps := []Label{claim(0, 0, 0), rs(ActRoute, 0, 0), rs(ActAmbiguous, 0, 0)}
	m := testModel(t, 1)
	m.Cfg.MaxMoves = 1
	s := do(t, m, m.Init(), steps...)
	n := do(t, m, s, moveL(0, 0, 1))
	require.Equal(t, s.Claim, n.Claim)
	bug := testModel(t, 1)
	bug.Cfg.MaxMoves = 1
	require.NoError(t, bug.Override("Move", "BugMoveOverQuarantine"))
	s = do(t, bug, bug.Init(), steps...)
	n, ok := bug.Apply(&s, moveL(0, 0, 1))
	require.True(t, ok)
	require.Equal(t, StBound, n.Claim[0].St)
	require.False(t, ActionProperties["QuarantineLifecycle"].Holds(bug, &s, moveL(0, 0, 1), &n))
}

func TestFaultBudget(t *testing.T) {
	m := testModel(t, 1)
	s := do(t, m, m.Init(), onR(ActCrash, 0), onR(ActCrash, 1))
	require.Equal(t, 2, s.Faults)
	_, ok := m.Apply(&s, onR(ActDisconnect, 0))
	require.False(t, ok, "MaxFaults is spent")
}

func TestInvalidConfigs(t *testing.T) {
	for _, c := range []Config{
		{},
		{Replicas: []string{"r"}, Sessions: []string{"s"}, Workers: []string{"w"}, MaxRev: 99, MaxGen: 1, MaxLeases: 1, MaxChan: 1},
		{Replicas: []string{"r"}, Sessions: []string{"s"}, Workers: []string{"w"}, MaxRev: 1, MaxGen: 0, MaxLeases: 1, MaxChan: 1},
	} {
		_, err := New(c)
		require.ErrorIs(t, err, ErrConfig)
	}
	m := testModel(t, 1)
	require.ErrorIs(t, m.Override("Close", "BugNoSuchThing"), ErrUnknownOverride)
	require.ErrorIs(t, m.Override("Expire", "BugUnfencedClose"), ErrUnknownOverride)
	_, _, err := ReadConfig(filepath.Join(specDir, "no-such.cfg"))
	require.Error(t, err)
}

// Example explores the hot-path claims config and prints what TLC also
// reported for it (spec/tla/results/MCClaimsHotPath.json).
func Example() {
	m, opts, err := ReadConfig("../../spec/tla/MCClaimsHotPath.cfg")
	if err != nil {
		fmt.Println(err)
		return
	}
	rep, err := m.Explore(opts)
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(rep.Distinct, rep.Generated, rep.Depth, rep.Violation == nil)
	// Output: 27878 170859 18 true
}
