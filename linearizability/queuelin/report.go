package queuelin

import (
	"time"

	"github.com/anishathalye/porcupine"
	"github.com/placementlab/placement/linearizability/histfile"
)

// SavedHistory is a history written to disk: enough to re-check it
// deterministically (the plan, and every call with its times).
type SavedHistory = histfile.History[Plan, Input, Output]

// Save converts a run to its saved form.
func (r *Run) Save(result porcupine.CheckResult, note string) SavedHistory {
	return histfile.Record[Plan, Input, Output](r.Plan, r.History, result, note)
}

// Check checks the history against the model within timeout (a timeout
// gives porcupine.Unknown, which callers count as a failure).
func Check(h *SavedHistory, timeout time.Duration) (porcupine.CheckResult, porcupine.LinearizationInfo, porcupine.Model) {
	m := NewModel(h.Plan.Limits)
	res, info := porcupine.CheckOperationsVerbose(m, h.Operations(), timeout)
	return res, info, m
}

// ReadHistory reads a saved history.
func ReadHistory(path string) (*SavedHistory, error) {
	return histfile.Read[Plan, Input, Output](path)
}

// WriteReport writes a failing history into a new directory under dir
// (the system's temporary directory when empty): history.json (re-check it
// with ReadHistory, or copy it to testdata/histories for TestRecheckSaved)
// and history.html, Porcupine's visualization with the run annotated.
func WriteReport(dir string, h SavedHistory, info porcupine.LinearizationInfo, m porcupine.Model) (string, error) {
	return histfile.WriteReport(dir, "queue", h.Plan.Seed, h, info, m)
}
