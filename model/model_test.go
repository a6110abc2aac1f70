package model

import (
	"testing"
)

func testModel(t *testing.T) *Model {
	t.Helper()
	m, err := New(Config{
		Keys: []string{"k1", "k2"}, Targets: []string{"t1", "t2"}, Requests: []string{"r1", "r2", "r3"},
		MaxGen: 3, Capacity: 1, TTL: 2, ReserveTimeout: 2, DispatchTimeLimit: 2, QuarantineTTL: 2, MaxClock: 100, MaxAttempt: 10,
	})
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// do applies an action that must be enabled and checks the invariants.
func do(t *testing.T, m *Model, s State, l Label, want ResultKind) State {
	t.Helper()
	n, res, ok := m.Apply(&s, l)
	if !ok {
		t.Fatalf("%s is not enabled", m.Format(l))
	}
	if res.Kind != want {
		t.Fatalf("%s: result %s, want %s", m.Format(l), res.Kind, want)
	}
	for name, inv := range Invariants {
		if !inv.Holds(m, &n) {
			t.Fatalf("after %s: invariant %s fails:\n%s", m.Format(l), name, m.FormatState(&n))
		}
	}
	for name, p := range ActionProperties {
		if !p.Holds(m, &s, l, &n) {
			t.Fatalf("%s violates %s", m.Format(l), name)
		}
	}
	return n
}

// commit binds key k to target tg for request r (reserve, dispatch, accept).
func commit(t *testing.T, m *Model, s State, r, k, tg int) State {
	t.Helper()
	s = do(t, m, s, L(ActAcquire, r, k), ResReserved)
	s = do(t, m, s, L(ActBeginDispatch, r, tg), ResDispatched)
	return do(t, m, s, L(ActComplete, r, int(Accepted)), ResCommitted)
}

func L(act Action, args ...int) Label {
	l := Label{Act: act, R: None, K: None, T: None}
	switch act {
	case ActAcquire:
		l.R, l.K = args[0], args[1]
	case ActBeginDispatch:
		l.R, l.T = args[0], args[1]
	case ActComplete:
		l.R, l.O = args[0], args[1]
	case ActResolve:
		l.K, l.A, l.G, l.O = args[0], args[1], args[2], args[3]
	case ActCancel, ActRelease, ActAbandon, ActInvalidate, ActClose:
		l.R = args[0]
	case ActBump:
		l.T = args[0]
	case ActAdvance:
		l.Time = int64(args[0])
	default:
		l.K = args[0]
	}
	return l
}

func TestAcquireReserveDispatchAcceptHit(t *testing.T) {
	m := testModel(t)
	s := m.Init()
	s = do(t, m, s, L(ActAcquire, 0, 0), ResReserved)
	s = do(t, m, s, L(ActAcquire, 1, 0), ResWait)
	s = do(t, m, s, L(ActBeginDispatch, 0, 1), ResDispatched)
	if s.Table[0].Attempt != 1 || s.Table[0].TGen != 1 || s.NextAttempt != 2 {
		t.Fatalf("dispatch: %+v", s.Table[0])
	}
	s = do(t, m, s, L(ActComplete, 0, int(Accepted)), ResCommitted)
	s = do(t, m, s, L(ActAcquire, 1, 0), ResHit)
	if s.Table[0].Leases != 2 {
		t.Fatalf("leases %d, want 2", s.Table[0].Leases)
	}
	s = do(t, m, s, L(ActRelease, 0), ResEnded)
	s = do(t, m, s, L(ActAdvance, 5), ResAdvanced)
	s = do(t, m, s, L(ActRelease, 1), ResEnded)
	if s.Table[0].Deadline != 5+m.Cfg.TTL {
		t.Fatalf("release at zero leases: deadline %d, want %d", s.Table[0].Deadline, 5+m.Cfg.TTL)
	}
	s = do(t, m, s, L(ActAdvance, 7), ResAdvanced)
	do(t, m, s, L(ActExpire, 0), ResRemoved)
}

func TestCompleteDefinitelyNotAcceptedRollsBack(t *testing.T) {
	m := testModel(t)
	s := m.Init()
	s = do(t, m, s, L(ActAcquire, 0, 0), ResReserved)
	s = do(t, m, s, L(ActBeginDispatch, 0, 0), ResDispatched)
	s = do(t, m, s, L(ActComplete, 0, int(DefinitelyNotAccepted)), ResRolledBack)
	if s.Table[0].St != Reserved || s.Req[0].Pc != PcReserved {
		t.Fatal("not reserved again")
	}
	s = do(t, m, s, L(ActBeginDispatch, 0, 1), ResDispatched)
	if s.Table[0].Attempt != 2 {
		t.Fatalf("retry attempt %d, want a fresh id 2", s.Table[0].Attempt)
	}
	s = do(t, m, s, L(ActComplete, 0, int(DefinitelyNotAccepted)), ResRolledBack)
	do(t, m, s, L(ActCancel, 0), ResCancelled)
}

func TestAmbiguousQuarantinesUntilResolved(t *testing.T) {
	m := testModel(t)
	s := m.Init()
	s = do(t, m, s, L(ActAcquire, 0, 0), ResReserved)
	s = do(t, m, s, L(ActBeginDispatch, 0, 0), ResDispatched)
	s = do(t, m, s, L(ActComplete, 0, int(Ambiguous)), ResQuarantined)
	n, res, _ := m.Acquire(&s, 1, 0)
	if res.Kind != ResAmbiguous || res.Attempt != 1 || res.Gen != 1 || n.Table[0] != s.Table[0] {
		t.Fatalf("acquire while quarantined: %+v", res)
	}
	// Fenced: wrong attempt, wrong generation.
	s = do(t, m, s, L(ActResolve, 0, 2, 1, int(ResolvedAccepted)), ResFenced)
	s = do(t, m, s, L(ActResolve, 0, 1, 2, int(ResolvedAccepted)), ResFenced)
	if s.Table[0].St != Quarantined {
		t.Fatal("fenced resolve changed the entry")
	}
	s = do(t, m, s, L(ActResolve, 0, 1, 1, int(ResolvedAccepted)), ResCommitted)
	if s.Table[0].St != Bound || s.Table[0].Leases != 0 || s.Table[0].Deadline != m.Cfg.TTL {
		t.Fatalf("resolved: %+v", s.Table[0])
	}
	do(t, m, s, L(ActAcquire, 1, 0), ResHit)
}

func TestDispatchTimeoutThenLateResult(t *testing.T) {
	m := testModel(t)
	s := m.Init()
	s = do(t, m, s, L(ActAcquire, 0, 0), ResReserved)
	s = do(t, m, s, L(ActBeginDispatch, 0, 0), ResDispatched)
	if _, _, ok := m.DispatchTimeout(&s, 0); ok {
		t.Fatal("dispatch timed out before its deadline")
	}
	s = do(t, m, s, L(ActAdvance, 2), ResAdvanced)
	s = do(t, m, s, L(ActDispatchTimeout, 0), ResQuarantined)
	if s.Req[0].Pc != PcLate {
		t.Fatal("guard not late")
	}
	late := do(t, m, s, L(ActComplete, 0, int(Accepted)), ResCommitted)
	if late.Table[0].Leases != 1 || late.Req[0].Pc != PcHolding {
		t.Fatal("late Accepted did not bind with the dispatcher's lease")
	}
	gone := do(t, m, s, L(ActComplete, 0, int(DefinitelyNotAccepted)), ResSettledAbsent)
	if gone.Table[0].St != Absent {
		t.Fatal("late DefinitelyNotAccepted did not settle")
	}
	still := do(t, m, s, L(ActComplete, 0, int(Ambiguous)), ResQuarantined)
	if still.Table[0] != s.Table[0] {
		t.Fatal("late Ambiguous changed the quarantine")
	}
	// Resolved by someone else first: the late result is fenced.
	r := do(t, m, s, L(ActResolve, 0, 1, 1, int(ResolvedNotAccepted)), ResSettledAbsent)
	do(t, m, r, L(ActComplete, 0, int(Accepted)), ResFenced)
}

func TestReservationTimeoutRevokes(t *testing.T) {
	m := testModel(t)
	s := m.Init()
	s = do(t, m, s, L(ActAcquire, 0, 0), ResReserved)
	s = do(t, m, s, L(ActAdvance, 2), ResAdvanced)
	s = do(t, m, s, L(ActReservationTimeout, 0), ResRemoved)
	s = do(t, m, s, L(ActAcquire, 1, 0), ResReserved)
	do(t, m, s, L(ActBeginDispatch, 0, 0), ResLost)
	do(t, m, s, L(ActCancel, 0), ResLost)
}

func TestCapacityCountsOnlyLiveEntries(t *testing.T) {
	m := testModel(t)
	s := m.Init()
	s = do(t, m, s, L(ActAcquire, 0, 0), ResReserved)
	s = do(t, m, s, L(ActAcquire, 1, 1), ResCapacity)
	s = do(t, m, s, L(ActBeginDispatch, 0, 0), ResDispatched)
	s = do(t, m, s, L(ActComplete, 0, int(Accepted)), ResCommitted)
	s = do(t, m, s, L(ActRelease, 0), ResEnded)
	s = do(t, m, s, L(ActAcquire, 1, 1), ResCapacity)
	s = do(t, m, s, L(ActAdvance, 2), ResAdvanced) // k1's binding expires
	s = do(t, m, s, L(ActAcquire, 1, 1), ResReserved)
	if s.Table[0].St != Bound {
		t.Fatal("the expired binding was removed eagerly; it is only discounted")
	}
}

func TestGenerationBumpFencesBinding(t *testing.T) {
	m := testModel(t)
	s := commit(t, m, m.Init(), 0, 0, 1)
	s = do(t, m, s, L(ActBump, 1), ResBumped)
	// Stale: a new request re-initializes; the old lease is superseded.
	s2 := do(t, m, s, L(ActAcquire, 1, 0), ResReserved)
	do(t, m, s2, L(ActRelease, 0), ResSuperseded)
	// Or the reaper drops it, leases or not.
	do(t, m, s, L(ActDropStale, 0), ResRemoved)
}

func TestCloseWaitsForLastLease(t *testing.T) {
	m := testModel(t)
	s := commit(t, m, m.Init(), 0, 0, 0)
	s = do(t, m, s, L(ActAcquire, 1, 0), ResHit)
	s = do(t, m, s, L(ActClose, 0), ResEnded)
	if s.Table[0].St != Bound || !s.Table[0].Closing {
		t.Fatal("close removed the binding while another lease is held")
	}
	s = do(t, m, s, L(ActAcquire, 2, 0), ResHit) // a closing binding still answers hits
	s = do(t, m, s, L(ActAbandon, 1), ResEnded)
	s = do(t, m, s, L(ActRelease, 2), ResEnded)
	if s.Table[0].St != Absent {
		t.Fatal("not removed at the last lease")
	}
}

func TestInvalidateSupersedesOtherLeases(t *testing.T) {
	m := testModel(t)
	s := commit(t, m, m.Init(), 0, 0, 0)
	s = do(t, m, s, L(ActAcquire, 1, 0), ResHit)
	s = do(t, m, s, L(ActInvalidate, 0), ResEnded)
	do(t, m, s, L(ActInvalidate, 1), ResSuperseded)
	s = do(t, m, s, L(ActAcquire, 2, 0), ResReserved)
	if n, _, _ := m.InvalidateKey(&s, 0); n.Table != nil {
		t.Fatal("InvalidateKey is enabled on a reserved key")
	}
}

func TestAdvanceRejectsBackwardsAndOverflow(t *testing.T) {
	m := testModel(t)
	s := m.Init()
	s = do(t, m, s, L(ActAdvance, 10), ResAdvanced)
	for _, bad := range []int64{10, 9, 0, -1, m.Cfg.MaxClock - 1, m.Cfg.MaxClock, 1<<63 - 1} {
		if _, _, ok := m.Advance(&s, bad); ok {
			t.Errorf("Advance(%d) from %d accepted", bad, s.Now)
		}
	}
	do(t, m, s, L(ActAdvance, int(m.Cfg.MaxClock-2)), ResAdvanced)
}

func TestStateKeyAndTLAFormatRoundTrip(t *testing.T) {
	m := testModel(t)
	s := m.Init()
	s = do(t, m, s, L(ActAcquire, 0, 0), ResReserved)
	s = do(t, m, s, L(ActBeginDispatch, 0, 1), ResDispatched)
	s = do(t, m, s, L(ActAcquire, 2, 0), ResWait)
	d, err := DecodeKey(s.Key())
	if err != nil || !d.Equal(&s) {
		t.Fatalf("key round trip: %v", err)
	}
	p, err := m.ParseState(m.FormatState(&s))
	if err != nil || !p.Equal(&s) {
		t.Fatalf("TLA round trip: %v\n%s", err, m.FormatState(&s))
	}
	if _, err := DecodeKey(s.Key()[:5]); err == nil {
		t.Fatal("a truncated key decoded")
	}
	if _, err := m.ParseState(`/\ now = 0`); err == nil {
		t.Fatal("a partial state parsed")
	}
}

func TestInvalidConfigs(t *testing.T) {
	for _, c := range []Config{
		{},
		{Keys: []string{"k"}, Targets: []string{"t"}, Requests: []string{"r"}, TTL: 0, ReserveTimeout: 1, DispatchTimeLimit: 1, QuarantineTTL: 1},
		{Keys: []string{"k"}, Targets: []string{"t"}, Requests: []string{"r"}, TTL: 1, ReserveTimeout: 1, DispatchTimeLimit: 1, QuarantineTTL: 1, Capacity: -1},
	} {
		if _, err := New(c); err == nil {
			t.Errorf("New(%+v) accepted", c)
		}
	}
	m := testModel(t)
	if err := m.Override("Acquire", "BugNoSuchThing"); err == nil {
		t.Error("unknown variant accepted")
	}
	if err := m.Override("Close", "BugAcquireReplaysQuarantine"); err == nil {
		t.Error("variant applied to the wrong definition")
	}
	if _, err := ParseTLCConfig("x.cfg", "CONSTANTS\n Keys = {k}\nSPECIFICATION Next\n"); err == nil {
		t.Error("config without SPECIFICATION Spec accepted")
	}
}
