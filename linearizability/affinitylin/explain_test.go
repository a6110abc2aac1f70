package affinitylin

import (
	"fmt"
	"sort"
	"strings"
	"testing"

	"github.com/placementlab/placement/linearizability/histfile"
)

// TestExplain prints, for the history in AFFINITYLIN_EXPLAIN (a saved
// history.json), the shortest prefix (by return time) that is not
// linearizable, the longest prefix Porcupine could linearize, the model's
// state after it, the calls pending there and each one's client's calls
// before it: where the history stops being explainable
// (histfile.Explainer). It is skipped without the variable.
func TestExplain(t *testing.T) {
	h, info := checker.ReadExplain(t)
	ops := h.Operations()
	// The model is nondeterministic: the explainer follows the set of
	// states the linearization can be in.
	_, pending := histfile.Explainer[[]State, Input, Output]{
		Model: NewModel(h.Plan.Hard, h.Plan.Replica),
		Init:  []State{Init(h.Plan.Hard, h.Plan.Replica)},
		Step: func(set []State, in Input, out Output) ([]State, bool) {
			var next []State
			seen := map[State]bool{}
			for _, s := range set {
				for _, n := range Step(s, in, out) {
					if !seen[n] {
						seen[n] = true
						next = append(next, n)
					}
				}
			}
			return next, len(next) > 0
		},
		Describe: Describe,
		State: func(set []State) string {
			var b strings.Builder
			for i, s := range set {
				fmt.Fprintf(&b, "possible state %d of %d:\n%s", i+1, len(set), s.String())
			}
			return b.String()
		},
		Next: func(set []State, in Input, _ Output) string {
			alts := map[string]bool{}
			for _, s := range set {
				for _, r := range results(s, in) {
					alts[Describe(in, r.out)] = true
				}
			}
			var l []string
			for a := range alts {
				l = append(l, a)
			}
			sort.Strings(l)
			return fmt.Sprintf("the model allows %v", l)
		},
		Tail:  40,
		Steps: 15,
	}.Explain(t, ops, info)
	// The calls of each client just before the pending ones.
	for _, id := range pending[:min(len(pending), 8)] {
		c := ops[id].ClientId
		for j := id - 1; j >= 0 && j >= id-4; j-- {
			if ops[j].ClientId == c {
				t.Logf("  c%d before: op %d [%d,%d] %s", c, j, ops[j].Call, ops[j].Return, Describe(ops[j].Input.(Input), ops[j].Output.(Output)))
			}
		}
	}
}
