package claimslin

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/anishathalye/porcupine"
	"github.com/placementlab/placement/linearizability/histfile"
	"github.com/stretchr/testify/require"
)

// TestRoutingMem runs routing plans (DrawRoutingPlan) on memstore: impl/replica
// Coordinators sharing one store and a manual clock, under Resets that
// lose Deletes, unreachable stores, lost sessions, worker restarts and
// the clock moving. Each run's store history is checked with Porcupine
// (the model with guarantee 5: a held claim never expires), and each
// replica's routes against the events it processed (CheckGuarantees:
// routing window, agreement, fenced close, quarantine, close under
// leases). CLAIMSLIN_ROUTING_SEED and CLAIMSLIN_ROUTING_SEEDS (or
// LINEARIZABILITY_SEED, as the bug zoo sets it) choose the seeds; it stops
// at the first failing one and names the file that re-checks it.
func TestRoutingMem(t *testing.T) {
	routing(t, BackendMem, 4, histfile.EnvInt(120, "CLAIMSLIN_ROUTING_TURNS"))
}

// TestRoutingEtcd is TestRoutingMem on the embedded etcd, one member and
// three, under a member stopped and restarted, a client cut off, and a
// compaction under the replicas' live watches.
func TestRoutingEtcd(t *testing.T) {
	if testing.Short() {
		t.Skip("embedded etcd: not in -short")
	}
	t.Run("etcd1", func(t *testing.T) { routing(t, BackendEtcd1, 1, 40) })
	t.Run("etcd3", func(t *testing.T) { routing(t, BackendEtcd3, 1, 40) })
}

func routing(t *testing.T, backend string, seeds, turns int) {
	first := uint64(histfile.EnvInt(1, "CLAIMSLIN_ROUTING_SEED", "LINEARIZABILITY_SEED"))
	n := histfile.EnvInt(seeds, "CLAIMSLIN_ROUTING_SEEDS")
	var cov struct{ RoutingCoverage }
	began := time.Now()
	for seed := first; seed < first+uint64(n) || len(thinRouting(backend, cov.RoutingCoverage)) > 0 && seed < first+uint64(3*n); seed++ {
		plan := DrawRoutingPlan(seed, turns, backend)
		start := time.Now()
		run, err := ExecuteRoutes(plan)
		require.NoError(t, err, "seed %d", seed)
		t.Logf("seed %d: plan %+v: %d turns, %d routes, %d store calls in %v", seed, plan, run.Coverage.Turns,
			len(run.Routes), len(run.History), time.Since(start).Round(time.Millisecond))
		cov.RoutingCoverage.Add(run.Coverage)
		violations := CheckRouting(run)
		res := checker.CheckRun(t, plan, run.History, 0)
		if len(violations) > 0 || res != porcupine.Ok {
			path := saveRoutingReport(t, run, res, violations)
			for _, v := range violations {
				t.Errorf("seed %d: %s", seed, v)
			}
			t.Errorf("seed %d: routing run saved to %s; re-check: CLAIMSLIN_ROUTES=%s go test -run TestRecheckRouting ./linearizability/claimslin/",
				seed, path, path)
			t.FailNow()
		}
	}
	t.Logf("%s: %d turns checked in %v; coverage %+v", backend, cov.Turns, time.Since(began).Round(time.Millisecond), cov.RoutingCoverage)
	for _, m := range thinRouting(backend, cov.RoutingCoverage) {
		t.Errorf("too thin: %s", m)
	}
}

// saveRoutingReport writes a failing routing run where failure reports go
// (CLAIMSLIN_REPORT_DIR, else LINEARIZABILITY_REPORT_DIR, else a new
// temporary directory) and returns its path.
func saveRoutingReport(t *testing.T, run *RoutingRun, res porcupine.CheckResult, violations []string) string {
	dir := os.Getenv("CLAIMSLIN_REPORT_DIR")
	if dir == "" {
		dir = os.Getenv("LINEARIZABILITY_REPORT_DIR")
	}
	var err error
	if dir == "" {
		dir, err = os.MkdirTemp("", "claimslin-routing-")
	} else {
		err = os.MkdirAll(dir, 0o755)
	}
	if err != nil {
		t.Logf("no report directory: %v", err)
		return "(not saved)"
	}
	s := SaveRouting(run, res, violations)
	s.Variant = os.Getenv("PLACEMENT_MUTANT")
	path := filepath.Join(dir, fmt.Sprintf("routing-%s-seed%d.json", run.Plan.Backend, run.Plan.Seed))
	if err := WriteRouting(path, s); err != nil {
		t.Logf("saving the routing run: %v", err)
		return "(not saved)"
	}
	return path
}

// thinRouting returns the coverage minimums cov does not reach on backend.
func thinRouting(backend string, cov RoutingCoverage) []string {
	ms := []histfile.Minimum{
		{Name: "turns", Got: cov.Turns, N: 200},
		{Name: "cached hits", Got: cov.Hits, N: 50},
		{Name: "placing turns", Got: cov.Placing, N: 20},
		{Name: "final turns", Got: cov.Finals, N: 10},
		{Name: "turns overlapping another replica's on the same session", Got: cov.SameKeyOverlaps, N: 20},
		{Name: "claims created", Got: cov.Created, N: 10},
		{Name: "claims read (another's)", Got: cov.Got, N: 10},
		{Name: "closes deleted", Got: cov.ClosesDeleted, N: 3},
		{Name: "holds", Got: cov.Holds, N: 10},
		{Name: "Resets delivered", Got: cov.Coverage.Resets, N: 3},
		{Name: "Deletes delivered", Got: cov.Deletes, N: 10},
		{Name: "cached claims evicted by a Delete", Got: cov.DeleteEvictions, N: 3},
		{Name: "store calls overlapping another replica's", Got: cov.Overlapping, N: 50},
	}
	if backend == BackendMem {
		ms = append(ms,
			histfile.Minimum{Name: "retries elsewhere (refused)", Got: cov.Retries, N: 3},
			histfile.Minimum{Name: "ambiguous dispatches", Got: cov.Ambiguous, N: 3},
			histfile.Minimum{Name: "quarantines written", Got: cov.QuarantinesWritten, N: 2},
			histfile.Minimum{Name: "turns refused as quarantined", Got: cov.Quarantined, N: 2},
			histfile.Minimum{Name: "closes deferred (another replica held)", Got: cov.ClosesDeferred, N: 1},
			histfile.Minimum{Name: "touches", Got: cov.Touches, N: 10},
			histfile.Minimum{Name: "turns holding a lease longer than the idle TTL", Got: cov.LongTurns, N: 3},
			histfile.Minimum{Name: "clock advances", Got: cov.Advances, N: 10},
			histfile.Minimum{Name: "Resets losing Deletes (held events replaced)", Got: cov.Resets, N: 2},
			histfile.Minimum{Name: "cached claims evicted by a Reset", Got: cov.ResetEvictions, N: 3},
			histfile.Minimum{Name: "store unreachable spells", Got: cov.Outages, N: 2},
			histfile.Minimum{Name: "calls refused by an unreachable store", Got: cov.Unreachable, N: 2},
			histfile.Minimum{Name: "sessions lost", Got: cov.EndSessions, N: 1},
		)
	} else {
		// etcd runs are a few hundred turns: a quarter of each minimum,
		// and every fault at least once.
		for i := range ms {
			ms[i].N = max(1, ms[i].N/4)
		}
		ms = append(ms,
			histfile.Minimum{Name: "members stopped and restarted", Got: cov.MemberStops, N: 1},
			histfile.Minimum{Name: "clients cut off through the proxy", Got: cov.Disconnects, N: 1},
			histfile.Minimum{Name: "compactions under live watches", Got: cov.Compactions, N: 1},
		)
	}
	return histfile.Thin(ms)
}

// TestRecheckRouting re-checks saved routing runs deterministically: the
// one CLAIMSLIN_ROUTES names (a failing run's report), else every one in
// testdata/routing; each must give the Porcupine result and the
// violations it was saved with.
func TestRecheckRouting(t *testing.T) {
	files, _ := filepath.Glob("testdata/routing/*.json")
	if p := os.Getenv("CLAIMSLIN_ROUTES"); p != "" {
		files = []string{p}
	}
	require.NotEmpty(t, files, "no saved routing runs")
	for _, f := range files {
		s, err := ReadRouting(f)
		require.NoError(t, err)
		res, violations := RecheckRouting(s, time.Minute)
		t.Logf("%s (seed %d, variant %q): %s, %d violations", f, s.Plan.Seed, s.Variant, res, len(violations))
		for _, v := range violations {
			t.Logf("  %s", v)
		}
		require.Equal(t, s.Result, string(res), f)
		require.Equal(t, s.Violations, violations, f)
	}
}
