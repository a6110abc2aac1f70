package linearizability

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/placementlab/placement/impl/placement"
	"github.com/placementlab/placement/model"
)

// The event-order checker must catch what it promises: an event its key's
// earlier events make impossible (the review's "Reserved, Removed,
// Expired"), and a key's Seq going backwards.
func TestLifecycle_CatchesOutOfOrderEvents(t *testing.T) {
	ev := func(k placement.EventKind, key string, seq uint64) placement.Event[int] {
		e := placement.Event[int]{Kind: k, Key: key, Seq: seq}
		if carriesTarget(k) {
			e.Target, e.HasTarget = 0, true
		}
		return e
	}
	cases := []struct {
		name string
		evs  []placement.Event[int]
		want string // "" for a legal stream
	}{
		{"lifecycle", []placement.Event[int]{ev(placement.EventReserved, "a", 1), ev(placement.EventReserved, "b", 2),
			ev(placement.EventQuarantined, "a", 3), ev(placement.EventResolved, "a", 4), ev(placement.EventExpired, "a", 5),
			ev(placement.EventCommitted, "b", 6), ev(placement.EventRemoved, "b", 7), ev(placement.EventCapacityRejected, "b", 8)}, ""},
		{"review's example", []placement.Event[int]{ev(placement.EventReserved, "a", 1), ev(placement.EventRemoved, "a", 2),
			ev(placement.EventExpired, "a", 3)}, "Expired (attempt 0, seq 3) cannot follow state Absent"},
		{"reserve over a binding", []placement.Event[int]{ev(placement.EventReserved, "a", 1), ev(placement.EventCommitted, "a", 2),
			ev(placement.EventReserved, "a", 3)}, "cannot follow state Bound"},
		{"seq backwards", []placement.Event[int]{ev(placement.EventReserved, "a", 2), ev(placement.EventRemoved, "a", 1)},
			"has seq 1 after seq 2"},
		{"quarantined without its target", []placement.Event[int]{ev(placement.EventReserved, "a", 1),
			{Kind: placement.EventQuarantined, Key: "a", Attempt: 1, Seq: 2}}, "Quarantined (attempt 1, seq 2) names no target"},
	}
	for _, c := range cases {
		var l Lifecycle
		for _, e := range c.evs {
			l.Observe(e)
		}
		err := l.Err()
		if (c.want == "") != (err == nil) || err != nil && !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: %v, want %q", c.name, err, c.want)
		}
	}
}

// A windowed Release that makes its binding idle may take its deadline from
// any clock value between its call and its linearization point, and from no
// other; one that leaves other leases, or has no window, is deterministic.
func TestSteps_ReleaseWindow(t *testing.T) {
	st, err := NewStepper(Shape{Clients: 2, Keys: 1, Targets: 1, Capacity: 1, TTL: 2, ReserveTimeout: 2, DispatchTimeout: 2, QuarantineTTL: 3})
	if err != nil {
		t.Fatal(err)
	}
	s := st.Init()
	step := func(in Input, out Output) []model.State {
		t.Helper()
		next := st.Steps(s, in, out)
		if len(next) == 0 {
			t.Fatalf("%s -> %s refused in\n%s", in, out, st.M.FormatState(&s))
		}
		return next
	}
	s = step(Input{Op: OpTryAcquire}, Output{Kind: OutReserved})[0]
	s = step(Input{Op: OpCommitAccepted, Gen: 1}, Output{Kind: OutCommitted, Gen: 1, Attempt: 1})[0]
	s = step(Input{Op: OpAdvance, By: 3, Lazy: true}, Output{Kind: OutOK})[0]
	release := Input{Op: OpRelease, Window: true, Clock: 1}
	var deadlines []int64
	for _, n := range step(release, Output{Kind: OutOK}) {
		deadlines = append(deadlines, n.Table[0].Deadline)
	}
	// Clock 1..3 plus TTL 2; 3 has passed at now 3, which the model keeps
	// as "passed" (forgetPassed).
	if len(deadlines) != 3 || deadlines[0] != passed || deadlines[1] != 4 || deadlines[2] != 5 {
		t.Fatalf("deadlines %v, want [%d 4 5] (clock 1..3 plus TTL 2)", deadlines, passed)
	}
	if n := st.Steps(s, Input{Op: OpRelease}, Output{Kind: OutOK}); len(n) != 1 || n[0].Table[0].Deadline != 5 {
		t.Fatalf("a Release without a window: %d states", len(n))
	}
	if n := st.Steps(s, Input{Op: OpRelease, Window: true, Clock: 4}, Output{Kind: OutOK}); len(n) != 0 {
		t.Fatalf("a Release that read a clock later than its linearization point was accepted")
	}
}

// A use of a kept handle (Input.Again) is refused and changes nothing in
// every state of its client, including the sharpest one: a guard whose
// successor from the same reservation is in flight, where the client's pc
// is Dispatching (only the handle is stale). A kept handle is saved with
// its reason by name.
func TestSteps_StaleHandlesChangeNothing(t *testing.T) {
	st, err := NewStepper(Shape{Clients: 1, Keys: 1, Targets: 1, Capacity: 1, TTL: 2, ReserveTimeout: 2, DispatchTimeout: 2, QuarantineTTL: 3})
	if err != nil {
		t.Fatal(err)
	}
	s := st.Init()
	step := func(in Input, out Output) {
		t.Helper()
		next := st.Steps(s, in, out)
		if len(next) != 1 {
			t.Fatalf("%s -> %s: %d next states in\n%s", in, out, len(next), st.M.FormatState(&s))
		}
		s = next[0]
	}
	stale := func(why Why) {
		t.Helper()
		for _, u := range []struct {
			in  Input
			out OutKind
		}{
			{Input{Op: OpBeginDispatch, Gen: 1}, OutLost}, {Input{Op: OpCommitAccepted, Gen: 1}, OutLost},
			{Input{Op: OpCancel}, OutLost}, {Input{Op: OpComplete, Outcome: 0}, OutUsed},
			{Input{Op: OpComplete, Outcome: 1}, OutUsed}, {Input{Op: OpComplete, Outcome: 2}, OutUsed},
			{Input{Op: OpDrop}, OutOK}, {Input{Op: OpRelease}, OutUsed}, {Input{Op: OpClose}, OutUsed},
		} {
			in := u.in
			in.Again, in.Stale = true, why
			next := st.Steps(s, in, Output{Kind: u.out})
			if len(next) != 1 || !next[0].Equal(&s) {
				t.Fatalf("%s -> %s: %d next states, or a changed one, in\n%s", in, u.out, len(next), st.M.FormatState(&s))
			}
			for _, wrong := range []OutKind{OutOK, OutLost, OutUsed, OutFenced, OutDispatched} {
				if wrong != u.out && len(st.Steps(s, in, Output{Kind: wrong})) != 0 {
					t.Fatalf("%s -> %s accepted", in, wrong)
				}
			}
		}
	}
	step(Input{Op: OpTryAcquire}, Output{Kind: OutReserved})
	step(Input{Op: OpBeginDispatch, Gen: 1}, Output{Kind: OutDispatched, Attempt: 1, Gen: 1})
	stale(WhyDispatched)
	step(Input{Op: OpComplete, Outcome: 1}, Output{Kind: OutOK}) // DefinitelyNotAccepted: reserved again
	stale(WhyNotAccepted)
	step(Input{Op: OpBeginDispatch, Gen: 1}, Output{Kind: OutDispatched, Attempt: 2, Gen: 1})
	stale(WhyRedispatched)
	step(Input{Op: OpComplete, Outcome: 0}, Output{Kind: OutCommitted, Gen: 1, Attempt: 2})
	stale(WhyAccepted)
	step(Input{Op: OpRelease}, Output{Kind: OutOK})
	stale(WhyRelease)

	b, err := json.Marshal(Input{Op: OpComplete, Again: true, Stale: WhyRedispatched})
	if err != nil || !strings.Contains(string(b), `"stale":"DefinitelyNotAccepted, redispatched"`) {
		t.Fatalf("saved as %s (%v)", b, err)
	}
	var in Input
	if err := json.Unmarshal(b, &in); err != nil || in.Stale != WhyRedispatched {
		t.Fatalf("read back as %+v (%v)", in, err)
	}
	if b, _ := json.Marshal(Input{Op: OpRelease}); strings.Contains(string(b), "stale") {
		t.Fatalf("a fresh handle saved with a reason: %s", b)
	}
}

// stepSet steps every state of states by in -> out, as Porcupine's
// power-set construction does: the states that may follow (none: refused).
func stepSet(st *Stepper, states []model.State, in Input, out Output) []model.State {
	var next []model.State
	seen := map[string]bool{}
	for _, s := range states {
		for _, n := range st.Steps(s, in, out) {
			if k := n.Key(); !seen[k] {
				seen[k] = true
				next = append(next, n)
			}
		}
	}
	return next
}

// The spec's ReservationTimeout, DispatchTimeout and QuarantineExpire are
// actions of their own, which may fire any time after they are due: the
// Porcupine model lets each be fired or not yet at every later step, and no
// more. A due reservation still holds its place and may be cancelled, but
// never dispatched; a due dispatch may still commit or roll back; a due
// quarantine may still read as quarantined; once an operation has seen a
// timeout fire, it has fired for every later one; nothing fires early.
func TestSteps_TimeoutsMayFireLate(t *testing.T) {
	st, err := NewStepper(Shape{Clients: 2, Keys: 2, Targets: 1, Capacity: 1, TTL: 2, ReserveTimeout: 1, DispatchTimeout: 1, QuarantineTTL: 1})
	if err != nil {
		t.Fatal(err)
	}
	type op struct {
		in  Input
		out Output
	}
	q := func(k int, state string) op { return op{Input{Op: OpQuery, Key: k}, Output{Kind: OutOK, State: state}} }
	qd := func(k int, state string) op { // a key dispatching or quarantined under attempt 1
		return op{Input{Op: OpQuery, Key: k}, Output{Kind: OutOK, State: state, Gen: 1, Attempt: 1}}
	}
	reserve := func(r, k int) op { return op{Input{Op: OpTryAcquire, Client: r, Key: k}, Output{Kind: OutReserved}} }
	refused := func(r, k int) op { return op{Input{Op: OpTryAcquire, Client: r, Key: k}, Output{Kind: OutCapacity}} }
	dispatch := op{Input{Op: OpBeginDispatch, Gen: 1}, Output{Kind: OutDispatched, Attempt: 1, Gen: 1}}
	lost := op{Input{Op: OpBeginDispatch, Gen: 1}, Output{Kind: OutLost}}
	tick := op{Input{Op: OpAdvance, By: 1, Lazy: true}, Output{Kind: OutOK}}
	advance := op{Input{Op: OpAdvance, By: 1}, Output{Kind: OutOK}}
	commit := op{Input{Op: OpComplete, Outcome: int(model.Accepted)}, Output{Kind: OutCommitted, Gen: 1, Attempt: 1}}
	notAccepted := op{Input{Op: OpComplete, Outcome: int(model.DefinitelyNotAccepted)}, Output{Kind: OutOK}}
	ambiguous := op{Input{Op: OpComplete, Outcome: int(model.Ambiguous)}, Output{Kind: OutOK}}
	cases := []struct {
		name  string
		ops   []op
		legal bool
	}{
		{"a due reservation holds its place", []op{reserve(0, 0), tick, refused(1, 1)}, true},
		{"a due reservation may have timed out", []op{reserve(0, 0), tick, reserve(1, 1), q(0, "Absent")}, true},
		{"a due reservation may be cancelled", []op{reserve(0, 0), tick, {Input{Op: OpCancel}, Output{Kind: OutOK}}}, true},
		{"a due reservation may be lost", []op{reserve(0, 0), tick, lost}, true},
		{"a due reservation is never dispatched", []op{reserve(0, 0), tick, dispatch}, false},
		{"a due reservation reads as reserved, then absent", []op{reserve(0, 0), tick, tick, q(0, "Reserved"), q(0, "Absent")}, true},
		{"a fired timeout stays fired", []op{reserve(0, 0), tick, q(0, "Absent"), q(0, "Reserved")}, false},
		{"a fired timeout frees the place for good", []op{reserve(0, 0), tick, reserve(1, 1), refused(1, 1)}, false},
		{"a sweeping Advance need not have swept yet", []op{reserve(0, 0), advance, q(0, "Reserved")}, true},
		{"nothing times out early", []op{reserve(0, 0), q(0, "Absent")}, false},
		{"nothing times out early, full table", []op{reserve(0, 0), reserve(1, 1)}, false},
		{"a due dispatch may still commit", []op{reserve(0, 0), dispatch, tick, qd(0, "Dispatching"), commit}, true},
		{"a due dispatch may still roll back", []op{reserve(0, 0), dispatch, tick, notAccepted, q(0, "Reserved")}, true},
		{"a due dispatch may have been quarantined", []op{reserve(0, 0), dispatch, tick, qd(0, "Quarantined"), tick, q(0, "Absent")}, true},
		{"a quarantine holds its QuarantineTTL", []op{reserve(0, 0), dispatch, tick, qd(0, "Quarantined"), q(0, "Absent")}, false},
		{"a late DispatchTimeout's quarantine counts from the deadline", []op{reserve(0, 0), dispatch, tick, tick, ambiguous, q(0, "Absent")}, true},
		{"a quarantine never reads as dispatching again", []op{reserve(0, 0), dispatch, tick, qd(0, "Quarantined"), qd(0, "Dispatching")}, false},
		{"an over quarantine may still read as quarantined", []op{reserve(0, 0), dispatch, tick, ambiguous, tick, qd(0, "Quarantined")}, true},
		{"an over quarantine holds no place", []op{reserve(0, 0), dispatch, tick, ambiguous, tick, refused(1, 1)}, false},
	}
	for _, c := range cases {
		states := []model.State{st.Init()}
		for i, o := range c.ops {
			states = stepSet(st, states, o.in, o.out)
			if len(states) == 0 {
				if c.legal || i != len(c.ops)-1 {
					t.Errorf("%s: step %d (%s -> %s) refused", c.name, i, o.in, o.out)
				}
				break
			}
			if i == len(c.ops)-1 && !c.legal {
				t.Errorf("%s: the last step (%s -> %s) was allowed", c.name, o.in, o.out)
			}
		}
	}
}
