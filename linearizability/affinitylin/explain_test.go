package affinitylin

import (
	"fmt"
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
	_, pending := histfile.Explainer[State, Input, Output]{
		Model: NewModel(h.Plan.Hard),
		Init:  Init(h.Plan.Hard),
		Step: func(s State, in Input, out Output) (State, bool) {
			if next := Step(s, in, out); len(next) > 0 {
				return next[0], true
			}
			return s, false
		},
		Describe: Describe,
		State:    State.String,
		Next: func(s State, in Input, _ Output) string {
			var alts []string
			for _, r := range results(s, in) {
				alts = append(alts, Describe(in, r.out))
			}
			return fmt.Sprintf("the model allows %v", alts)
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
