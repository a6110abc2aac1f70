package affinitylin

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/anishathalye/porcupine"
	"github.com/placementlab/placement/linearizability/histfile"
)

// CheckLimit bounds one Porcupine check: a linearizable history checks in
// well under a second; one that has not decided by then counts as a
// failure (Unknown), so a broken variant fails instead of hanging.
const CheckLimit = 8 * time.Second

// checkRun checks one run; on Illegal or Unknown it writes the report and
// fails naming the seed and the report's directory.
func checkRun(t *testing.T, run *Run) porcupine.CheckResult {
	t.Helper()
	h := run.Save("", "")
	timeout := CheckLimit
	if run.Stuck > 0 {
		timeout = 2 * time.Second // only for the report's annotations
	}
	start := time.Now()
	res, info, m := Check(&h, timeout)
	t.Logf("seed %d: checked %d operations in %v: %s", run.Plan.Seed, len(run.History), time.Since(start).Round(time.Millisecond), res)
	if run.Stuck > 0 {
		res, h.Note = porcupine.Illegal, fmt.Sprintf("%d Starts waited %v: lost wake-up", run.Stuck, WaitLimit)
	}
	if dir := os.Getenv("AFFINITYLIN_SAVE"); dir != "" {
		h.Result = string(res)
		if b, err := json.MarshalIndent(h, "", " "); err == nil {
			_ = os.WriteFile(filepath.Join(dir, fmt.Sprintf("seed%d-%s.json", run.Plan.Seed, res)), b, 0o644)
		}
	}
	if res != porcupine.Ok {
		h.Result = string(res)
		dir := os.Getenv("AFFINITYLIN_REPORT_DIR")
		if dir == "" {
			dir = os.Getenv("LINEARIZABILITY_REPORT_DIR")
		}
		out, werr := WriteReport(dir, h, info, m)
		t.Errorf("seed %d: affinity history of %d operations is %s %s; report: %s (write error: %v); re-check: copy history.json to linearizability/affinitylin/testdata/histories and run TestRecheckSaved",
			run.Plan.Seed, len(run.History), res, h.Note, out, werr)
	}
	return res
}

// TestLinearizable runs concurrent plans on one affinity.Layer each and
// checks every history with Porcupine against the model. AFFINITYLIN_SEED
// (the first seed), AFFINITYLIN_SEEDS and AFFINITYLIN_OPS (actions per
// client) scale it (LINEARIZABILITY_SEED and LINEARIZABILITY_SEEDS, as the
// bug zoo sets them, too). It stops at the first failing seed.
func TestLinearizable(t *testing.T) {
	seeds := histfile.EnvInt(10, "AFFINITYLIN_SEEDS", "LINEARIZABILITY_SEEDS")
	ops := histfile.EnvInt(100, "AFFINITYLIN_OPS")
	first := uint64(histfile.EnvInt(1, "AFFINITYLIN_SEED", "LINEARIZABILITY_SEED"))
	var cov Coverage
	began := time.Now()
	// A loaded machine schedules fewer races: a run too thin for the
	// minimums below runs on with more seeds, up to four times as many,
	// before it fails as thin.
	for seed := first; seed < first+uint64(seeds) || (len(thin(cov)) > 0 && seed < first+4*uint64(seeds)); seed++ {
		plan := DrawPlan(seed, ops)
		run, err := Execute(plan)
		if err != nil {
			t.Fatal(err)
		}
		t.Logf("seed %d: plan %+v: %d operations", seed, plan, len(run.History))
		if checkRun(t, run) != porcupine.Ok {
			if tr := TraceOfLastRun(); len(tr) > 0 {
				f := filepath.Join(os.TempDir(), fmt.Sprintf("affinitylin-trace-seed%d.txt", seed))
				_ = os.WriteFile(f, []byte(strings.Join(tr, "\n")+"\n"), 0o644)
				t.Logf("the core's events: %s", f)
			}
			t.FailNow()
		}
		cov.Add(run.Coverage)
	}
	t.Logf("%d operations checked in %v; coverage %+v", cov.Operations, time.Since(began).Round(time.Millisecond), cov)
	for _, m := range thin(cov) {
		t.Errorf("too thin: %s", m)
	}
}

// thin returns the coverage minimums cov does not reach.
func thin(cov Coverage) []string {
	var out []string
	for _, m := range []struct {
		name   string
		got, n int
	}{
		{"joins of a new worker", cov.Joined, 1},
		{"recoveries (same identity back)", cov.Recovered, 10},
		{"restarts (new identity)", cov.Restarted, 5},
		{"fails", cov.Fails, 10},
		{"leaves", cov.Leaves, 5},
		{"Starts bound", cov.StartBound, 50},
		{"Starts placing", cov.StartPlacing, 50},
		{"soft Starts on a quarantined session", cov.StartQuarantined, 1},
		{"hard pin conflicts", cov.PinConflicts, 1},
		{"hits", cov.Hits, 50},
		{"placing dispatches", cov.Placings, 50},
		{"soft moves won", cov.MovesWon, 10},
		{"soft moves lost", cov.MovesLost, 2},
		{"binds", cov.Binds, 50},
		{"stale at birth", cov.StaleAtBirth, 1},
		{"refusals", cov.Refusals, 10},
		{"ambiguous outcomes", cov.Ambiguous, 5},
		{"final closes", cov.FinalCloses, 10},
		{"closes while another lease was held", cov.ClosesWhileLeased, 3},
		{"membership ops overlapping a begin", cov.MembershipOverlappingBegins, 30},
		{"dispatches racing a membership change of their target", cov.RacyDispatches, 3},
	} {
		if m.got < m.n {
			out = append(out, fmt.Sprintf("%s: %d, want at least %d", m.name, m.got, m.n))
		}
	}
	return out
}

// TestRecheckSaved re-checks every history saved under testdata/histories
// deterministically: each must give the result it was saved with.
func TestRecheckSaved(t *testing.T) {
	files, _ := filepath.Glob("testdata/histories/*.json")
	if len(files) == 0 {
		t.Fatal("no saved histories in testdata/histories")
	}
	for _, f := range files {
		h, err := ReadHistory(f)
		if err != nil {
			t.Fatal(err)
		}
		res, _, _ := Check(h, 60*time.Second)
		if string(res) != h.Result {
			t.Errorf("%s: re-checked %s, saved as %s", f, res, h.Result)
		}
	}
}
