package claimslin

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/anishathalye/porcupine"
	"github.com/placementlab/placement/linearizability/histfile"
)

// TestExplain prints, for the history in CLAIMSLIN_EXPLAIN (a saved
// history.json), where each key's partition that is not linearizable
// stops being explainable (histfile.Explainer): the shortest prefix (by
// return time) that is not linearizable, the longest partial
// linearization Porcupine found, the model's states after it, and the
// calls pending there. It is skipped without the variable.
func TestExplain(t *testing.T) {
	h, _ := checker.ReadExplain(t)
	explainHistory(t, h)
}

// explainHistory explains every partition of h that does not check Ok.
func explainHistory(t testing.TB, h *SavedHistory) (explained int) {
	p := h.Plan.Params
	m := PartitionModel(p)
	for i, part := range Partition(h.Operations()) {
		res, info := porcupine.CheckOperationsVerbose(m, part, time.Minute)
		if res == porcupine.Ok {
			continue
		}
		explained++
		t.Logf("partition %d (%s): %d operations, %s", i, partitionName(part), len(part), res)
		histfile.Explainer[[]State, Input, Output]{
			Model: m,
			Init:  []State{Init()},
			Step: func(s []State, in Input, out Output) ([]State, bool) {
				next := stepAll(p, s, in, out)
				return next, len(next) > 0
			},
			Describe: Describe,
			State: func(s []State) string {
				var lines []string
				for _, x := range s {
					lines = append(lines, "  "+x.String())
				}
				if len(lines) == 1 {
					return strings.TrimSpace(lines[0])
				}
				return strings.Join(lines, "\n")
			},
			Next: func(s []State, in Input, out Output) string {
				return fmt.Sprintf("the model accepts it next: %v", len(stepAll(p, s, in, out)) > 0)
			},
			Tail:  30,
			Steps: 15,
		}.Explain(t, part, info)
	}
	return explained
}

// partitionName names a partition by its key.
func partitionName(part []porcupine.Operation) string {
	for _, op := range part {
		if in := op.Input.(Input); in.Op.keyed() {
			return keyName(in.Key)
		}
	}
	return "membership only"
}
