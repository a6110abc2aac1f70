package linearizability

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/anishathalye/porcupine"
	"github.com/placementlab/placement/linearizability/histfile"
)

// Harness is the core's checker as a campaign drives it: a seed's plan on
// one coordinator, its history checked against the model (per key for the
// partitioned plans), with the failures a run knows itself (a lost
// wake-up, Observer events out of order, a client that could not end what
// it held). The core's saved histories predate histfile's form (their
// plan's fields stand at the top level), so the core implements the
// skeleton's interface over its own SavedHistory.
var Harness histfile.Harness = coreHarness{}

// CoreCheckLimit bounds one check of a core run in a campaign (as
// TestLinearizable's CheckLimit).
const CoreCheckLimit = 20 * time.Second

type coreHarness struct{}

func (coreHarness) Name() string { return "core" }

// RunSeed implements histfile.Harness.
func (coreHarness) RunSeed(seed uint64, ops int, reportDir string) histfile.Outcome {
	start := time.Now()
	o := histfile.Outcome{Seed: seed}
	run, err := Execute(DrawPlan(seed, ops), ops)
	if err != nil {
		o.Result, o.Note, o.Took = histfile.ResultError, err.Error(), time.Since(start)
		return o
	}
	o.Operations, o.Coverage = len(run.History), coreCounts(run)
	h := run.Save("", "")
	known := run.known()
	timeout := CoreCheckLimit
	if known != "" {
		timeout = 2 * time.Second
	}
	res, info, m, err := h.Check(timeout)
	if err != nil {
		o.Result, o.Note, o.Took = histfile.ResultError, err.Error(), time.Since(start)
		return o
	}
	if known != "" {
		res, h.Note = porcupine.Illegal, known
	}
	o.Result, o.Note, h.Result = string(res), h.Note, string(res)
	if res != porcupine.Ok {
		dir, werr := WriteReport(reportDir, h, info, m)
		if werr != nil {
			o.Note += fmt.Sprintf(" (report not written: %v)", werr)
		} else {
			o.Report = dir
			if res == porcupine.Illegal && known == "" {
				o.Trimmed = trimCore(h, m, filepath.Join(dir, "history.min.json"))
			}
		}
	}
	o.Took = time.Since(start)
	return o
}

// known is the failure a run knows without Porcupine, or "".
func (r *Run) known() string {
	switch {
	case r.Stuck > 0:
		return fmt.Sprintf("%d blocking Acquires waited %v: lost wake-up", r.Stuck, WaitLimit)
	case r.EventErr != nil:
		return fmt.Sprintf("Observer events out of order: %v", r.EventErr)
	case r.Unfinished != "":
		return "a client could not end what it held: " + r.Unfinished
	}
	return ""
}

// trimCore writes the shortest prefix of h that m still refuses; it
// returns its length, or 0 when none was written.
func trimCore(h SavedHistory, m porcupine.Model, path string) int {
	prefix := histfile.ShortestIllegalPrefix(m, h.Operations())
	t := h
	t.Ops, t.Note = nil, fmt.Sprintf("trimmed from %d operations", len(h.Ops))
	for _, op := range prefix {
		t.Ops = append(t.Ops, SavedOp{Client: op.ClientId, Input: op.Input.(Input), Output: op.Output.(Output), Call: op.Call, Return: op.Return})
	}
	if res, _, _, err := t.Check(CoreCheckLimit); err != nil || res != porcupine.Illegal {
		return 0
	}
	if writeSaved(path, t) != nil {
		return 0
	}
	return len(t.Ops)
}

func writeSaved(path string, h SavedHistory) error {
	b, err := json.MarshalIndent(h, "", " ")
	if err != nil {
		return err
	}
	return os.WriteFile(path, append(b, '\n'), 0o644)
}

// coreCounts names the run's coverage: operations and outputs by kind,
// stale handles used, and the operations that overlapped another.
func coreCounts(r *Run) map[string]int {
	out := map[string]int{}
	for k, n := range r.Coverage.Ops {
		out["op "+OpKind(k).String()] = n
	}
	for k, n := range r.Coverage.Outs {
		out["out "+OutKind(k).String()] = n
	}
	out["stale handles used"] = r.Coverage.Stale.Total()
	out["overlapping"] = int(r.Overlap * float64(len(r.History)))
	return out
}

// Recheck implements histfile.Harness.
func (coreHarness) Recheck(path string, timeout time.Duration) (porcupine.CheckResult, error) {
	h, err := ReadHistory(path)
	if err != nil {
		return porcupine.Unknown, err
	}
	res, _, _, err := h.Check(timeout)
	return res, err
}

// Promote implements histfile.Harness: a real failure goes to
// testdata/histories (TestRecheckSaved requires Illegal there), a false
// alarm to testdata/legal (required Ok).
func (coreHarness) Promote(path, root string, falseAlarm bool) (string, error) {
	h, err := ReadHistory(path)
	if err != nil {
		return "", err
	}
	dir := filepath.Join(root, "linearizability", "testdata", "histories")
	if falseAlarm {
		dir = filepath.Join(root, "linearizability", "testdata", "legal")
	}
	return histfile.PromoteFile(path, dir, "core", h.Seed, falseAlarm, func(result string) error {
		h.Result = result
		if falseAlarm {
			return nil
		}
		res, _, _, err := h.Check(time.Minute)
		if err != nil {
			return err
		}
		if string(res) != result {
			return fmt.Errorf("%s re-checks %s, not %s", path, res, result)
		}
		return nil
	}, func(dst string) error { return writeSaved(dst, *h) })
}
