package linearizability

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/anishathalye/porcupine"
)

func envInt(name string, def int) int {
	if v, err := strconv.Atoi(os.Getenv(name)); err == nil && v > 0 {
		return v
	}
	return def
}

// CheckLimit bounds one Porcupine check. A linearizable history of a run
// checks in milliseconds; a check that has not decided by then counts as a
// failure (Unknown), so a broken variant that makes histories hard to
// decide fails here instead of hanging the test.
const CheckLimit = 20 * time.Second

// checkRun checks one run; on Illegal or Unknown it writes the report and
// fails with the seed and the report directory. A failure the run already
// knows (a lost wake-up, events out of order, a client that could not end
// what it held) is reported without waiting for Porcupine.
func checkRun(t *testing.T, run *Run, timeout time.Duration) porcupine.CheckResult {
	t.Helper()
	h := run.Save("", "")
	known := run.known()
	if known != "" {
		timeout = min(timeout, 2*time.Second) // only for the report's annotations
	}
	start := time.Now()
	res, info, m, err := h.Check(timeout)
	t.Logf("seed %d: checked %d operations in %v", run.Plan.Seed, len(run.History), time.Since(start))
	if err != nil {
		t.Fatal(err)
	}
	if known != "" {
		res, h.Note = porcupine.Illegal, known
	}
	if dir := os.Getenv("LINEARIZABILITY_SAVE"); dir != "" && res == porcupine.Ok {
		h.Result = string(res)
		if b, err := json.MarshalIndent(h, "", " "); err == nil {
			_ = os.WriteFile(filepath.Join(dir, fmt.Sprintf("seed%d-ok.json", run.Plan.Seed)), b, 0o644)
		}
	}
	if res != porcupine.Ok {
		h.Result = string(res)
		dir, werr := WriteReport(os.Getenv("LINEARIZABILITY_REPORT_DIR"), h, info, m)
		t.Errorf("seed %d: history of %d operations is %s %s; report: %s (write error: %v); re-check: go test ./linearizability -run TestRecheckSaved with the file copied to testdata/histories (or explain it: testdata/unexplained/README.md)",
			run.Plan.Seed, len(run.History), res, h.Note, dir, werr)
	}
	return res
}

// TestLinearizable runs concurrent plans on the coordinator and checks each
// history with Porcupine against the model. LINEARIZABILITY_SEEDS,
// LINEARIZABILITY_OPS and LINEARIZABILITY_SEED (one seed) scale it. It
// stops at the first failing seed (LINEARIZABILITY_FAILFAST=0 checks them
// all), so under any broken variant it ends within one run (RunLimit) and
// one check (CheckLimit) of that seed.
func TestLinearizable(t *testing.T) {
	seeds := envInt("LINEARIZABILITY_SEEDS", 16)
	ops := envInt("LINEARIZABILITY_OPS", 400)
	first := uint64(envInt("LINEARIZABILITY_SEED", 1))
	failFast := os.Getenv("LINEARIZABILITY_FAILFAST") != "0"
	var cov Coverage
	total, overlapping := 0, 0.0
	start := time.Now()
	for seed := first; seed < first+uint64(seeds); seed++ {
		plan := DrawPlan(seed, ops)
		run, err := Execute(plan, ops)
		if err != nil {
			t.Fatal(err)
		}
		t.Logf("seed %d: %d ops, %d events, shape %+v, partitioned %v, hot %v, GOMAXPROCS %d, overlap %.0f%%",
			seed, len(run.History), run.Events, plan.Shape, plan.Partitioned, plan.Hot, plan.Procs, 100*run.Overlap)
		if checkRun(t, run, CheckLimit) != porcupine.Ok && failFast {
			t.FailNow()
		}
		cov.Add(run.Coverage)
		total += len(run.History)
		overlapping += run.Overlap * float64(len(run.History))
	}
	elapsed := time.Since(start)
	t.Logf("%d operations checked in %v (%.0f ops/s)", total, elapsed, float64(total)/elapsed.Seconds())
	if miss := cov.Missing("Stats", "error"); len(miss) > 0 { // Stats: sequential checks only
		t.Errorf("too thin: never exercised %v", miss)
	}
	t.Logf("%d uses of stale handles, each refused with no change:\n%s", cov.Stale.Total(), &cov.Stale)
	if miss := cov.Stale.Missing(); len(miss) > 0 {
		t.Errorf("too thin: stale handles never used %v", miss)
	}
	if frac := overlapping / float64(total); frac < 0.2 {
		t.Errorf("too thin: only %.0f%% of operations overlap another", 100*frac)
	}
}

// TestRecheckSaved re-checks every saved history deterministically, each
// against the result it must give: every history under testdata/histories
// (the bugs the checker found, and the bug zoo's) must stay Illegal, so a
// model that grew looser than the spec fails here; every one under
// testdata/legal (legal histories, one of which a model stricter than the
// spec once refused) must stay Ok, so one that grew stricter fails here.
// Each is also saved with the result it must give.
func TestRecheckSaved(t *testing.T) {
	for dir, want := range map[string]porcupine.CheckResult{"histories": porcupine.Illegal, "legal": porcupine.Ok} {
		files, _ := filepath.Glob(filepath.Join("testdata", dir, "*.json"))
		if len(files) == 0 {
			t.Fatalf("no saved histories in testdata/%s", dir)
		}
		for _, f := range files {
			h, err := ReadHistory(f)
			if err != nil {
				t.Fatal(err)
			}
			if h.Result != string(want) {
				t.Errorf("%s: saved as %s; every history in testdata/%s must be %s", f, h.Result, dir, want)
			}
			// The longest (a bug history of 10,006 operations) checks in a
			// few seconds, and up to 35 s under -race beside other jobs on
			// 2 cores: an Unknown from a tight limit would be no verdict.
			res, _, _, err := h.Check(2 * time.Minute)
			if err != nil {
				t.Fatal(err)
			}
			if res != want {
				t.Errorf("%s: re-checked %s, must be %s", f, res, want)
			}
		}
	}
}

// TestReportWrittenOnIllegal: an Illegal history (a bug-zoo history saved
// under testdata) produces a report directory with the JSON, which re-checks
// to the same result, and Porcupine's HTML with the failure annotated.
func TestReportWrittenOnIllegal(t *testing.T) {
	h, err := ReadHistory("testdata/histories/mutant-ReplaysQuarantine.json")
	if err != nil {
		t.Fatal(err)
	}
	res, info, m, err := h.Check(time.Minute)
	if err != nil || res != porcupine.Illegal {
		t.Fatalf("check: %v %v", res, err)
	}
	dir, err := WriteReport(t.TempDir(), *h, info, m)
	if err != nil {
		t.Fatal(err)
	}
	html, err := os.ReadFile(filepath.Join(dir, "history.html"))
	if err != nil || len(html) < 1000 || !strings.Contains(string(html), fmt.Sprintf("seed %d", h.Seed)) {
		t.Fatalf("history.html missing or without the annotation (%d bytes, %v)", len(html), err)
	}
	again, err := ReadHistory(filepath.Join(dir, "history.json"))
	if err != nil {
		t.Fatal(err)
	}
	if res2, _, _, _ := again.Check(time.Minute); res2 != porcupine.Illegal || len(again.Ops) != len(h.Ops) {
		t.Fatalf("the written history re-checks %v with %d ops", res2, len(again.Ops))
	}
}
