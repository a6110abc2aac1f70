package queuelin

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/anishathalye/porcupine"
)

// SavedOp is one recorded call in a saved history.
type SavedOp struct {
	Client int    `json:"client"`
	Input  Input  `json:"input"`
	Output Output `json:"output"`
	Call   int64  `json:"call"`
	Return int64  `json:"return"`
}

// SavedHistory is a history written to disk: enough to re-check it
// deterministically (the plan, and every call with its times).
type SavedHistory struct {
	Plan    Plan      `json:"plan"`
	Variant string    `json:"variant,omitempty"` // PLACEMENT_MUTANT when it was recorded
	Result  string    `json:"result"`            // what the check returned: Ok, Illegal or Unknown
	Note    string    `json:"note,omitempty"`
	Ops     []SavedOp `json:"ops"`
}

// Save converts a run to its saved form.
func (r *Run) Save(result porcupine.CheckResult, note string) SavedHistory {
	h := SavedHistory{Plan: r.Plan, Variant: os.Getenv("PLACEMENT_MUTANT"), Result: string(result), Note: note}
	for _, op := range r.History {
		h.Ops = append(h.Ops, SavedOp{Client: op.ClientId, Input: op.Input.(Input), Output: op.Output.(Output),
			Call: op.Call, Return: op.Return})
	}
	return h
}

// Operations returns the saved history as Porcupine operations.
func (h *SavedHistory) Operations() []porcupine.Operation {
	ops := make([]porcupine.Operation, len(h.Ops))
	for i, op := range h.Ops {
		ops[i] = porcupine.Operation{ClientId: op.Client, Input: op.Input, Output: op.Output, Call: op.Call, Return: op.Return}
	}
	return ops
}

// Check checks the history against the model within timeout (a timeout
// gives porcupine.Unknown, which callers count as a failure).
func (h *SavedHistory) Check(timeout time.Duration) (porcupine.CheckResult, porcupine.LinearizationInfo, porcupine.Model) {
	m := NewModel(h.Plan.Limits)
	res, info := porcupine.CheckOperationsVerbose(m, h.Operations(), timeout)
	return res, info, m
}

// ReadHistory reads a saved history.
func ReadHistory(path string) (*SavedHistory, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var h SavedHistory
	if err := json.Unmarshal(b, &h); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return &h, nil
}

// WriteReport writes a failing history into a new directory under dir
// (the system's temporary directory when empty): history.json (re-check it
// with ReadHistory, or copy it to testdata/histories for TestRecheckSaved)
// and history.html, Porcupine's visualization with the run annotated.
func WriteReport(dir string, h SavedHistory, info porcupine.LinearizationInfo, m porcupine.Model) (string, error) {
	if dir == "" {
		dir = os.TempDir()
	}
	out := filepath.Join(dir, fmt.Sprintf("queue-linearizability-seed%d-%s", h.Plan.Seed, time.Now().Format("20060102-150405.000000")))
	if err := os.MkdirAll(out, 0o755); err != nil {
		return "", err
	}
	b, err := json.MarshalIndent(h, "", " ")
	if err != nil {
		return "", err
	}
	if err := os.WriteFile(filepath.Join(out, "history.json"), append(b, '\n'), 0o644); err != nil {
		return "", err
	}
	info.AddAnnotations([]porcupine.Annotation{{ClientId: 0, Tag: "run", Start: 0, End: 0,
		Description:     fmt.Sprintf("seed %d: %s", h.Plan.Seed, h.Result),
		Details:         fmt.Sprintf("plan %+v, variant %q. %s", h.Plan, h.Variant, h.Note),
		BackgroundColor: "#ffd0d0"}})
	if err := porcupine.VisualizePath(m, info, filepath.Join(out, "history.html")); err != nil {
		return "", err
	}
	return out, nil
}
