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
// A windowed Release (Input.Window) that makes its binding idle sets the
// idle deadline from its one reading of the clock, taken before the lease
// ends: any value the clock held from the call (Input.Clock) to the
// linearization point (s.Now), so each is a possible next state. The spec's
// Release reads now at its step; a clock update that lands inside the call
// may or may not be in the reading.
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
	want, next, ok := st.Expect(s, in)
	if !ok || want != out {
		return nil
	}
	if in.Op == OpAcquire && want.Kind == OutWouldWait {
		return nil // a blocking Acquire returns only once the key is free
	}
	if in.Op != OpRelease || !in.Window || in.Again {
		return []model.State{next}
	}
	k := s.Req[in.Client].Key
	if k == model.None {
		return []model.State{next}
	}
	if e, n := s.Table[k], next.Table[k]; e.St != model.Bound || n.St != model.Bound ||
		e.Attempt != n.Attempt || e.Leases != 1 || n.Leases != 0 {
		return []model.State{next} // not the last lease: no idle deadline set
	}
	var states []model.State
	for c := in.Clock; c <= s.Now; c++ {
		n := next.Clone()
		n.Table[k].Deadline = c + st.M.Cfg.TTL
		states = append(states, n)
	}
	return states
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
