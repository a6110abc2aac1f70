package queuelin

import (
	"fmt"
	"testing"

	"github.com/placementlab/placement/linearizability/histfile"
)

// TestExplain prints, for the history in QUEUELIN_EXPLAIN (a saved
// history.json), the shortest prefix (by return time) that is not
// linearizable, the longest partial linearization Porcupine found, the
// model's state after it, and the calls pending there: where the history
// stops being explainable (histfile.Explainer). It is skipped without the
// variable.
func TestExplain(t *testing.T) {
	h, info := checker.ReadExplain(t)
	lim := h.Plan.Limits
	histfile.Explainer[State, Input, Output]{
		Model: NewModel(lim),
		Init:  Init(),
		Step: func(s State, in Input, out Output) (State, bool) {
			ok, next := Step(lim, s, in, out)
			return next, ok
		},
		Describe: Describe,
		State:    DescribeState,
		Next: func(s State, in Input, out Output) string {
			ok, _ := Step(lim, s, in, out)
			return fmt.Sprintf("the model accepts it next: %v", ok)
		},
		Tail: 30,
	}.Explain(t, h.Operations(), info)
}
