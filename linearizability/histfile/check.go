package histfile

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/anishathalye/porcupine"
)

// CheckLimit bounds one Porcupine check of a run: a linearizable history
// checks in well under a second; one that has not decided by then counts
// as a failure (Unknown), so a broken variant fails instead of hanging.
const CheckLimit = 8 * time.Second

// stuckCheckLimit bounds the check of a run that fails anyway (a call
// waited its bound): that check only annotates the report.
const stuckCheckLimit = 2 * time.Second

// Checker is how one layer's checker package checks its histories and
// reports a run that fails: what CheckRun needs to know about it.
type Checker[P, I, O any] struct {
	// What names the layer in the failure message ("queue history of 80
	// operations is Illegal") and in the report's directory (WriteReport).
	What string
	// Env is the prefix of the test's environment variables: Env+"_SAVE"
	// names a directory in which to save every checked history (as
	// seed<N>-<result>.json), Env+"_REPORT_DIR" (else
	// LINEARIZABILITY_REPORT_DIR) where failure reports go, Env+"_SEED"
	// and Env+"_SEEDS" the seeds to run (Seeds), and Env+"_EXPLAIN" the
	// history to explain (ReadExplain).
	Env string
	// Dir is the package's directory from the module's root, for the
	// failure message's re-check hint (copy history.json to
	// Dir/testdata/histories and run TestRecheckSaved).
	Dir string
	// Seed returns the seed a plan was drawn from.
	Seed func(plan P) uint64
	// Stuck is the note of a run in which n calls waited their bound (a
	// lost wake-up): the run fails whatever the check says.
	Stuck func(n int) string
	// Model returns the model a plan's histories are checked against.
	Model func(plan P) porcupine.Model
}

// Check checks h against its plan's model within timeout (a timeout gives
// porcupine.Unknown, which callers count as a failure), and returns the
// model too (for WriteReport).
func (c Checker[P, I, O]) Check(h *History[P, I, O], timeout time.Duration) (porcupine.CheckResult, porcupine.LinearizationInfo, porcupine.Model) {
	m := c.Model(h.Plan)
	res, info := porcupine.CheckOperationsVerbose(m, h.Operations(), timeout)
	return res, info, m
}

// CheckRun checks the history ops that a run of plan recorded, logs how
// long that took, and returns the result. When stuck calls (more than
// none) waited their bound, the run fails whatever the check finds: the
// check then has only a short while, for the report's annotations, and the
// result is Illegal with Stuck(stuck) as the note. With Env+"_SAVE" set it saves
// the history there. On any result but Ok it writes the report
// (WriteReport) and fails t with "seed N: <What> history of N operations
// is <result> <note>; report: <dir> ...": the bug zoo
// (linearizability/cmd/mutants) reads "is Illegal" and the note from that
// line.
func (c Checker[P, I, O]) CheckRun(t testing.TB, plan P, ops []porcupine.Operation, stuck int) porcupine.CheckResult {
	t.Helper()
	start := time.Now()
	dir := os.Getenv(c.Env + "_REPORT_DIR")
	if dir == "" {
		dir = os.Getenv("LINEARIZABILITY_REPORT_DIR")
	}
	o, h := c.judge(Recorded[P]{Plan: plan, Ops: ops, Stuck: stuck}, dir, false)
	t.Logf("seed %d: checked %d operations in %v: %s", o.Seed, len(ops), time.Since(start).Round(time.Millisecond), o.Result)
	if o.Failed() {
		t.Errorf("seed %d: %s history of %d operations is %s %s; report: %s; re-check: copy history.json to %s/testdata/histories and run TestRecheckSaved",
			o.Seed, c.What, len(ops), o.Result, h.Note, o.Report, c.Dir)
	}
	return porcupine.CheckResult(o.Result)
}

// CheckSeeds is a TestLinearizable's loop: it runs and checks (CheckRun)
// one plan a seed, for the seeds Seeds(def) returns and then, while more
// (nil: never) says the runs so far are too thin, for more seeds, up to
// four times as many in all (a loaded machine schedules fewer races). run
// executes seed's plan and returns it, the history it recorded and how
// many calls waited their bound; it may fail t. At the first run that
// fails its check, CheckSeeds calls failed (nil: none) with its seed and
// stops t (FailNow).
func (c Checker[P, I, O]) CheckSeeds(t testing.TB, def int, more func() bool,
	run func(seed uint64) (plan P, ops []porcupine.Operation, stuck int), failed func(seed uint64)) {
	t.Helper()
	first, n := c.Seeds(def)
	for seed := first; seed < first+uint64(n) || (more != nil && more() && seed < first+4*uint64(n)); seed++ {
		plan, ops, stuck := run(seed)
		t.Logf("seed %d: plan %+v: %d operations", seed, plan, len(ops))
		if c.CheckRun(t, plan, ops, stuck) != porcupine.Ok {
			if failed != nil {
				failed(seed)
			}
			t.FailNow()
			return
		}
	}
}

// RecheckSaved re-checks every history saved in the files pattern matches
// (a TestRecheckSaved: testdata/histories/*.json) deterministically, each
// within a minute: each must give the result it was saved with. It fails
// t when no file matches or one does not read.
func (c Checker[P, I, O]) RecheckSaved(t testing.TB, pattern string) {
	t.Helper()
	files, _ := filepath.Glob(pattern)
	if len(files) == 0 {
		t.Fatalf("no saved histories in %s", pattern)
		return
	}
	for _, f := range files {
		h, err := Read[P, I, O](f)
		if err != nil {
			t.Fatalf("%v", err)
			return
		}
		if res, _, _ := c.Check(h, time.Minute); string(res) != h.Result {
			t.Errorf("%s: re-checked %s, saved as %s", f, res, h.Result)
		}
	}
}

// ReadExplain reads the history that Env+"_EXPLAIN" names (a saved
// history.json), for a TestExplain: it checks it within a minute, logs the
// result, and returns it with what the check found (for
// Explainer.Explain). It skips t when the variable is empty, and fails t
// when the history does not read.
func (c Checker[P, I, O]) ReadExplain(t testing.TB) (*History[P, I, O], porcupine.LinearizationInfo) {
	t.Helper()
	path := os.Getenv(c.Env + "_EXPLAIN")
	if path == "" {
		t.Skipf("%s_EXPLAIN names no history", c.Env)
		return nil, porcupine.LinearizationInfo{}
	}
	h, err := Read[P, I, O](path)
	if err != nil {
		t.Fatalf("%v", err)
		return nil, porcupine.LinearizationInfo{}
	}
	res, info, _ := c.Check(h, time.Minute)
	t.Logf("result %s", res)
	return h, info
}

// Seeds returns the seeds a TestLinearizable runs: n of them (Env+"_SEEDS",
// else LINEARIZABILITY_SEEDS, else def) from first (Env+"_SEED", else
// LINEARIZABILITY_SEED, else 1). The bug zoo sets the LINEARIZABILITY_
// ones to draw fresh seeds in its later rounds.
func (c Checker[P, I, O]) Seeds(def int) (first uint64, n int) {
	return uint64(EnvInt(1, c.Env+"_SEED", "LINEARIZABILITY_SEED")), EnvInt(def, c.Env+"_SEEDS", "LINEARIZABILITY_SEEDS")
}

// Minimum is one of a TestLinearizable's coverage minimums: runs that
// exercised what Name says Got times, fewer than N, are too thin to judge.
type Minimum struct {
	Name   string
	Got, N int
}

// Thin returns the minimums of ms that are not reached, each as "name:
// got, want at least n", in the order of ms.
func Thin(ms []Minimum) []string {
	var out []string
	for _, m := range ms {
		if m.Got < m.N {
			out = append(out, fmt.Sprintf("%s: %d, want at least %d", m.Name, m.Got, m.N))
		}
	}
	return out
}
