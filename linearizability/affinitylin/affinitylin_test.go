package affinitylin

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/placementlab/placement/impl/affinity"
	"github.com/placementlab/placement/linearizability/histfile"
)

// TestLinearizable runs concurrent plans on one affinity.Layer each and
// checks every history with Porcupine against the model. AFFINITYLIN_SEED
// (the first seed), AFFINITYLIN_SEEDS and AFFINITYLIN_OPS (actions per
// client) scale it (LINEARIZABILITY_SEED and LINEARIZABILITY_SEEDS, as the
// bug zoo sets them, too). It stops at the first failing seed.
func TestLinearizable(t *testing.T) { checkLinearizable(t, Harness, thin) }

// TestLinearizableReplicas is TestLinearizable over a replica on an
// in-memory claims store (Config.Replicas), half the seeds with store
// faults (lost write replies, cut connections).
func TestLinearizableReplicas(t *testing.T) { checkLinearizable(t, ReplicasHarness, thinReplicas) }

func checkLinearizable(t *testing.T, h histfile.Layer[Plan, Input, Output], thin func(Coverage) []string) {
	ops := histfile.EnvInt(100, "AFFINITYLIN_OPS")
	var cov Coverage
	began := time.Now()
	// A loaded machine schedules fewer races: a run too thin for the
	// minimums below runs on with more seeds, up to four times as many,
	// before it fails as thin.
	more := func() bool { return len(thin(cov)) > 0 }
	h.CheckSeeds(t, 10, ops, more, func(rec histfile.Recorded[Plan]) { cov.Add(rec.Coverage.(Coverage)) }, func(seed uint64) {
		if tr := TraceOfLastRun(); len(tr) > 0 {
			f := filepath.Join(os.TempDir(), fmt.Sprintf("affinitylin-trace-seed%d.txt", seed))
			_ = os.WriteFile(f, []byte(strings.Join(tr, "\n")+"\n"), 0o644)
			t.Logf("the core's events: %s", f)
		}
	})
	t.Logf("%d operations checked in %v; coverage %+v", cov.Operations, time.Since(began).Round(time.Millisecond), cov)
	for _, m := range thin(cov) {
		t.Errorf("too thin: %s", m)
	}
}

// thin returns the coverage minimums cov does not reach.
func thin(cov Coverage) []string {
	return histfile.Thin([]histfile.Minimum{
		{Name: "joins of a new worker", Got: cov.Joined, N: 1},
		{Name: "recoveries (same identity back)", Got: cov.Recovered, N: 10},
		{Name: "restarts (new identity)", Got: cov.Restarted, N: 5},
		{Name: "fails", Got: cov.Fails, N: 10},
		{Name: "leaves", Got: cov.Leaves, N: 5},
		{Name: "Starts bound", Got: cov.StartBound, N: 50},
		{Name: "Starts placing", Got: cov.StartPlacing, N: 50},
		{Name: "soft Starts on a quarantined session", Got: cov.StartQuarantined, N: 1},
		{Name: "hard pin conflicts", Got: cov.PinConflicts, N: 1},
		{Name: "hits", Got: cov.Hits, N: 50},
		{Name: "placing dispatches", Got: cov.Placings, N: 50},
		{Name: "soft moves won", Got: cov.MovesWon, N: 10},
		{Name: "soft moves lost", Got: cov.MovesLost, N: 2},
		{Name: "binds", Got: cov.Binds, N: 50},
		{Name: "stale at birth", Got: cov.StaleAtBirth, N: 1},
		{Name: "refusals", Got: cov.Refusals, N: 10},
		{Name: "ambiguous outcomes", Got: cov.Ambiguous, N: 5},
		{Name: "final closes", Got: cov.FinalCloses, N: 10},
		{Name: "closes while another lease was held", Got: cov.ClosesWhileLeased, N: 3},
		{Name: "membership ops overlapping a begin", Got: cov.MembershipOverlappingBegins, N: 30},
		{Name: "dispatches racing a membership change of their target", Got: cov.RacyDispatches, N: 3},
	})
}

// thinReplicas is thin over a replica: the core's minimums, and the cases
// only a replica has.
func thinReplicas(cov Coverage) []string {
	return append(thin(cov), histfile.Thin([]histfile.Minimum{
		{Name: "restarts registered first", Got: cov.Registers, N: 5},
		{Name: "Leaves deregistered after", Got: cov.Deregisters, N: 3},
		{Name: "store writes whose reply was lost", Got: cov.LostReplies, N: 20},
	})...)
}

// TestRecheckSaved re-checks every history saved under testdata/histories
// deterministically: each must give the result it was saved with.
func TestRecheckSaved(t *testing.T) {
	checker.RecheckSaved(t, "testdata/histories/*.json")
}

// TestCausesAreTheLayers checks that the model's causes are the layer's.
func TestCausesAreTheLayers(t *testing.T) {
	for _, c := range []struct {
		model int
		layer affinity.Cause
	}{{CauseQuarantined, affinity.CauseQuarantined}, {CauseMoveLost, affinity.CauseMoveLost}, {CauseClosing, affinity.CauseClosing}} {
		if c.model != int(c.layer) {
			t.Errorf("the model's cause %d is the layer's %v (%d)", c.model, c.layer, int(c.layer))
		}
	}
}
