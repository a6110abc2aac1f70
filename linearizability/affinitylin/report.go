package affinitylin

import (
	"fmt"
	"time"

	"github.com/anishathalye/porcupine"
	"github.com/placementlab/placement/linearizability/histfile"
)

// checker checks and reports this package's runs: "affinity" histories,
// the AFFINITYLIN_* variables.
var checker = histfile.Checker[Plan, Input, Output]{
	What:  "affinity",
	Env:   "AFFINITYLIN",
	Dir:   "linearizability/affinitylin",
	Seed:  func(p Plan) uint64 { return p.Seed },
	Stuck: func(n int) string { return fmt.Sprintf("%d Starts waited %v: lost wake-up", n, WaitLimit) },
	Model: func(p Plan) porcupine.Model { return NewModel(p.Hard, p.Replica) },
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
