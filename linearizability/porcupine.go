package linearizability

import (
	"fmt"
	"hash/fnv"
	"sort"
	"strings"

	"github.com/anishathalye/porcupine"
	"github.com/placementlab/placement/model"
)

// PorcupineModel is the sequential specification Porcupine checks
// histories against. Its Step is the Stepper, i.e. the Go model's own
// transition functions; it is nondeterministic in the deadlines a
// windowed operation sets and in which due timeouts have fired (see
// Steps), and Porcupine's power-set construction turns it into a
// deterministic model over sets of model states. With partition set,
// histories are split by key (valid only when the table never fills and no
// operation touches every key: no Bump, no Advance, no Reap); otherwise
// they are checked whole.
func PorcupineModel(st *Stepper, partition bool) porcupine.Model {
	m := porcupine.NondeterministicModel{
		Init: func() []any { return []any{st.Init()} },
		Step: func(state, input, output any) []any {
			var next []any
			for _, n := range st.Steps(state.(model.State), input.(Input), output.(Output)) {
				next = append(next, n)
			}
			return next
		},
		Equal: func(a, b any) bool {
			x, y := a.(model.State), b.(model.State)
			return x.Equal(&y)
		},
		Hash: func(a any) uint64 {
			s := a.(model.State)
			h := fnv.New64a()
			h.Write([]byte(s.Key()))
			return h.Sum64()
		},
		DescribeOperation: func(input, output any) string {
			return fmt.Sprintf("%s -> %s", input.(Input), output.(Output))
		},
		DescribeState: func(a any) string {
			s := a.(model.State)
			return describeState(st, &s)
		},
	}
	if partition {
		m.Partition = func(h []porcupine.Operation) [][]porcupine.Operation {
			byKey := map[int][]porcupine.Operation{}
			for _, op := range h {
				k := op.Input.(Input).Key
				byKey[k] = append(byKey[k], op)
			}
			keys := make([]int, 0, len(byKey))
			for k := range byKey {
				keys = append(keys, k)
			}
			sort.Ints(keys)
			var out [][]porcupine.Operation
			for _, k := range keys {
				out = append(out, byKey[k])
			}
			return out
		}
	}
	return m.ToModel()
}

// Steps is the Porcupine step: the states that may follow s when in
// returns out (none: out is not a legal result of in in s). Attempt ids are
// fresh but need not be dense (another partition may have used the ids
// between), so an observed id at or above the model's next id is taken as
// the fresh id.
//
// An operation that sets a deadline from its reading of the clock (a
// windowed Input: a reservation, a dispatch, a new binding, a Release that
// makes its binding idle) reads the clock once, before its change takes
// effect: any value the clock held from the call (Input.Clock) to the
// linearization point (s.Now). The spec's actions read now at their step;
// a clock update that lands inside the call may or may not be in the
// reading. So each such value gives a possible next state, in which the
// deadlines the step set (and the start of an initialization it began)
// come from that reading. What the step decides (hit or miss, timed out or
// not) is still decided at s.Now.
//
// Before in takes its step, each timeout that is due on a key in reads
// may have fired or not yet (Fire, and acquireSteps for the places an
// Acquire counts): the spec's ReservationTimeout, DispatchTimeout,
// QuarantineExpire and DropStale of a quarantine are actions of their
// own, which may fire any time once enabled, and no operation sweeps at
// its step here (see Stepper.step). So a due reservation may still hold
// its place, be cancelled or read as reserved (never dispatched), a due
// dispatch may still commit or roll back, and an over quarantine may still
// read as quarantined; once a step has seen one fire, it has fired in
// every state that follows. The states that follow forget the deadlines
// that have passed and tell nothing any more (forgetPassed).
func (st *Stepper) Steps(s model.State, in Input, out Output) []model.State {
	if in.Op == OpAcquire && out.Kind == OutCancelled {
		return []model.State{s} // gave up waiting: no effect
	}
	var states []model.State
	for _, p := range st.Fire(s, in) {
		if in.Op == OpAcquire || in.Op == OpTryAcquire {
			states = append(states, st.acquireSteps(p, in, out)...)
		} else {
			states = append(states, st.stepsFrom(p, in, out)...)
		}
	}
	for i := range states {
		states[i] = forgetPassed(states[i])
	}
	return states
}

// passed is what forgetPassed writes for a deadline that has passed.
const passed = -1

// forgetPassed returns s with the deadlines that have passed, and no longer
// tell anything, set to passed (and the ghost `since` of the phases they
// end with them). Which instant a deadline passed at is observable only
// for a dispatch (its quarantine's QuarantineTTL counts from it); for a
// reservation, a quarantine or an idle binding, a deadline that has passed
// only enables its timeout (or Expire) and disables BeginDispatch and
// hits, forever, since the clock only moves on. Without this, the
// windowed reservations of one history (born with any deadline in their
// window) would keep a state for every deadline they might have had long
// after all of them passed, now that their timeouts may fire late.
func forgetPassed(s model.State) model.State {
	cloned := false
	set := func(k int, f func(e *model.Entry)) {
		if !cloned {
			s, cloned = s.Clone(), true
		}
		f(&s.Table[k])
	}
	for k := range s.Table {
		e := &s.Table[k]
		switch {
		case e.St == model.Reserved && e.Deadline <= s.Now && (e.Deadline != passed || s.Since[k] != passed):
			set(k, func(e *model.Entry) { e.Deadline, e.RDeadline, s.Since[k] = passed, passed, passed })
		case e.St == model.Dispatching && e.RDeadline <= s.Now && e.RDeadline != passed:
			set(k, func(e *model.Entry) { e.RDeadline = passed })
		case e.St == model.Quarantined && e.Deadline <= s.Now && (e.Deadline != passed || s.Since[k] != passed):
			set(k, func(e *model.Entry) { e.Deadline, s.Since[k] = passed, passed })
		case e.St == model.Bound && e.Leases == 0 && e.Deadline <= s.Now && e.Deadline != passed:
			set(k, func(e *model.Entry) { e.Deadline = passed })
		}
	}
	return s
}

// stepsFrom is Steps once the timeouts that fire before in have fired.
func (st *Stepper) stepsFrom(s model.State, in Input, out Output) []model.State {
	if (out.Kind == OutDispatched || out.Kind == OutCommitted) &&
		(in.Op == OpBeginDispatch || in.Op == OpCommitAccepted) {
		if out.Attempt < uint64(s.NextAttempt) {
			return nil // an attempt id reused
		}
		s = s.Clone()
		s.NextAttempt = int(out.Attempt)
	}
	staleCommit := in.Op == OpCommitAccepted && out.Stale
	if staleCommit {
		// The model's CommitAccepted checks the generation and commits in
		// one step, so its binding is never stale at birth; the
		// implementation's reports a Bump that raced it between its fence
		// check and its commit, which linearizes after it, and returns no
		// lease: to the model, the lease it took ends at once (on the
		// binding the Bump makes stale, it changes nothing else).
		// (Sequentially it never reports one: the rapid test checks that.)
		out.Stale = false
	}
	want, next, ok := st.want(s, in, false)
	if !ok || want != out {
		return nil
	}
	if staleCommit {
		next = st.endStaleLease(next, in.Client)
	}
	if in.Op == OpAcquire && want.Kind == OutWouldWait {
		return nil // a blocking Acquire returns only once the key is free
	}
	if !in.Window || in.Again || in.Clock >= s.Now {
		if in.Window && in.Clock > s.Now {
			return nil // it read a clock later than its linearization point
		}
		return []model.State{next}
	}
	set := st.deadlinesSet(&s, &next, in)
	if len(set) == 0 {
		return []model.State{next}
	}
	var states []model.State
	for c := in.Clock; c <= s.Now; c++ {
		n := next.Clone()
		for _, k := range set {
			shift := s.Now - c
			e := &n.Table[k]
			switch e.St {
			case model.Reserved:
				e.Deadline -= shift
				e.RDeadline -= shift
				n.Since[k] -= shift
			case model.Dispatching:
				e.Deadline -= shift // the reservation's own deadline stays
			default:
				e.Deadline -= shift
			}
		}
		states = append(states, n)
	}
	return states
}

// deadlinesSet lists the keys whose deadline the step from s to next set
// from the clock: a key newly reserved, newly dispatching, newly bound, or
// a binding made idle by a Release.
func (st *Stepper) deadlinesSet(s, next *model.State, in Input) []int {
	var keys []int
	for k := range next.Table {
		a, b := &s.Table[k], &next.Table[k]
		switch {
		case b.St == model.Reserved && a.St != model.Reserved && a.St != model.Dispatching:
			keys = append(keys, k) // a fresh reservation (not a rollback: its deadline is the reservation's own)
		case b.St == model.Dispatching && (a.St != model.Dispatching || a.Attempt != b.Attempt):
			keys = append(keys, k)
		case b.St == model.Bound && (a.St != model.Bound || a.Attempt != b.Attempt):
			keys = append(keys, k)
		case in.Op == OpRelease && a.St == model.Bound && b.St == model.Bound && a.Attempt == b.Attempt &&
			a.Leases == 1 && b.Leases == 0:
			keys = append(keys, k)
		}
	}
	return keys
}

func describeState(st *Stepper, s *model.State) string {
	var b strings.Builder
	fmt.Fprintf(&b, "now=%d next attempt=%d gen=%v\n", s.Now, s.NextAttempt, s.Gen)
	for k := range s.Table {
		fmt.Fprintf(&b, "k%d: %+v\n", k, st.Observe(s, k))
	}
	for r, q := range s.Req {
		fmt.Fprintf(&b, "r%d: %s k%d a%d\n", r, q.Pc, q.Key, q.Attempt)
	}
	return b.String()
}
