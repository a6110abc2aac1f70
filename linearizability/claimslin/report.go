package claimslin

import (
	"fmt"
	"time"

	"github.com/anishathalye/porcupine"
	"github.com/placementlab/placement/linearizability/histfile"
)

// checker checks and reports this package's runs: "claims" histories,
// the CLAIMSLIN_* variables.
var checker = histfile.Checker[Plan, Input, Output]{
	What: "claims",
	Env:  "CLAIMSLIN",
	Dir:  "linearizability/claimslin",
	Seed: func(p Plan) uint64 { return p.Seed },
	Stuck: func(n int) string {
		return fmt.Sprintf("%d memstore calls waited %v: a call that never returned", n, CallLimit)
	},
	Model: func(p Plan) porcupine.Model { return NewModel(p.Params) },
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

// Harness returns this package's checker on backend (BackendMem,
// BackendEtcd1, BackendEtcd3) as a campaign drives it (and as
// TestLinearizable runs it): the history checked against the model, and
// the event streams against the history (CheckEvents).
func Harness(backend string) histfile.Layer[Plan, Input, Output] {
	return histfile.Layer[Plan, Input, Output]{
		Checker: checker,
		Label:   "claims-" + backend,
		Draw:    func(seed uint64, ops int) Plan { return DrawPlan(seed, ops, backend) },
		Execute: func(p Plan) (histfile.Recorded[Plan], error) {
			run, err := Execute(p)
			if err != nil {
				return histfile.Recorded[Plan]{Plan: p}, err
			}
			var v []string
			for _, e := range CheckEvents(run.History, run.Events) {
				v = append(v, "event streams: "+e)
			}
			return histfile.Recorded[Plan]{Plan: run.Plan, Ops: run.History, Stuck: run.Stuck, Coverage: run.Coverage, Violations: v}, nil
		},
	}
}
