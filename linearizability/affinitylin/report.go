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

// Harness is this package's checker over the local core as a campaign
// drives it (and as TestLinearizable runs it).
var Harness = layer("affinity", DrawPlan)

// ReplicasHarness is the checker over a replica on an in-memory claims
// store, half the seeds with store faults (TestLinearizableReplicas).
var ReplicasHarness = layer("affinity-replicas", DrawReplicaPlan)

func layer(label string, draw func(seed uint64, ops int) Plan) histfile.Layer[Plan, Input, Output] {
	return histfile.Layer[Plan, Input, Output]{
		Checker: checker,
		Label:   label,
		Draw:    draw,
		Execute: func(p Plan) (histfile.Recorded[Plan], error) {
			run, err := Execute(p)
			if err != nil {
				return histfile.Recorded[Plan]{Plan: p}, err
			}
			return histfile.Recorded[Plan]{Plan: run.Plan, Ops: run.History, Stuck: run.Stuck, Coverage: run.Coverage}, nil
		},
	}
}
