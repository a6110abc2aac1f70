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
// transition functions. With partition set, histories are split by key
// (valid only when the table never fills and no operation touches every
// key: no Bump, no Advance); otherwise they are checked whole.
func PorcupineModel(st *Stepper, partition bool) porcupine.Model {
	m := porcupine.Model{
		Init: func() any { return st.Init() },
		Step: func(state, input, output any) (bool, any) {
			s := state.(model.State)
			in, out := input.(Input), output.(Output)
			return st.Step(s, in, out)
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
	return m
}

// Step is the Porcupine step: is out a legal result of in in state s, and
// what state follows. Attempt ids are fresh but need not be dense (another
// partition may have used the ids between), so an observed id at or above
// the model's next id is taken as the fresh id.
func (st *Stepper) Step(s model.State, in Input, out Output) (bool, model.State) {
	if in.Op == OpAcquire && out.Kind == OutCancelled {
		return true, s // gave up waiting: no effect
	}
	if (out.Kind == OutDispatched || out.Kind == OutCommitted) &&
		(in.Op == OpBeginDispatch || in.Op == OpCommitAccepted) {
		if out.Attempt < uint64(s.NextAttempt) {
			return false, s // an attempt id reused
		}
		s = s.Clone()
		s.NextAttempt = int(out.Attempt)
	}
	want, next, ok := st.Expect(s, in)
	if !ok || want != out {
		return false, s
	}
	if in.Op == OpAcquire && want.Kind == OutWouldWait {
		return false, s // a blocking Acquire returns only once the key is free
	}
	return true, next
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
