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
// transition functions; it is nondeterministic only in the idle deadline a
// windowed Release sets (see Steps), and Porcupine's power-set
// construction turns it into a deterministic model. With partition set,
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
func (st *Stepper) Steps(s model.State, in Input, out Output) []model.State {
	if in.Op == OpAcquire && out.Kind == OutCancelled {
		return []model.State{s} // gave up waiting: no effect
	}
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
	want, next, ok := st.Want(s, in)
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
