package queuelin

import (
	"fmt"
	"time"

	"github.com/anishathalye/porcupine"
	"github.com/placementlab/placement/linearizability/histfile"
)

// checker checks and reports this package's runs: "queue" histories,
// the QUEUELIN_* variables.
var checker = histfile.Checker[Plan, Input, Output]{
	What: "queue",
	Env:  "QUEUELIN",
	Dir:  "linearizability/queuelin",
	Seed: func(p Plan) uint64 { return p.Seed },
	Stuck: func(n int) string {
		return fmt.Sprintf("%d Waits waited %v: lost wake-up or leaked slot", n, WaitLimit)
	},
	Model: func(p Plan) porcupine.Model { return NewModel(p.Limits) },
}

// SavedHistory is a history written to disk: enough to re-check it
// deterministically (the plan, and every call with its times).
type SavedHistory = histfile.History[Plan, Input, Output]

// Check checks the history against the model within timeout (a timeout
// gives porcupine.Unknown, which callers count as a failure).
func Check(h *SavedHistory, timeout time.Duration) (porcupine.CheckResult, porcupine.LinearizationInfo, porcupine.Model) {
	return checker.Check(h, timeout)
}

// ReadHistory reads a saved history (a report's history.json, or one in
// testdata/histories).
func ReadHistory(path string) (*SavedHistory, error) {
	return histfile.Read[Plan, Input, Output](path)
}

// Harness is this package's checker as a campaign drives it (and as
// TestLinearizable runs it): a seed's plan on one queue, checked against
// the model.
var Harness = histfile.Layer[Plan, Input, Output]{
	Checker: checker,
	Draw:    DrawPlan,
	Execute: func(p Plan) (histfile.Recorded[Plan], error) {
		run, err := Execute(p)
		if err != nil {
			return histfile.Recorded[Plan]{Plan: p}, err
		}
		return histfile.Recorded[Plan]{Plan: run.Plan, Ops: run.History, Stuck: run.Stuck, Coverage: run.Coverage}, nil
	},
}
