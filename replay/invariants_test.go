package replay

import (
	"context"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// breakSim sets testBreak for the test.
func breakSim(t *testing.T, name string) {
	t.Helper()
	testBreak = name
	t.Cleanup(func() { testBreak = "" })
}

// invariantConfig is smallConfig with ambiguous dispatches, the placement
// policies and round robin (which has no layer to check).
func invariantConfig(w *Workload, seed uint64) Config {
	cfg := smallConfig(w)
	cfg.Seed = seed
	cfg.AmbiguousProb = 0.02
	cfg.Policies = []Policy{PlacementHard, PlacementSoft, PlacementOff, RoundRobin}
	return cfg
}

// withViolation returns the violations of res that begin with inv.
func withViolation(res *Result, inv string) []string {
	var out []string
	for _, v := range res.Violations {
		if strings.HasPrefix(v, inv+": ") {
			out = append(out, v)
		}
	}
	return out
}

// The invariants hold on correct code: 10 seeds of small workloads with
// the default churn (a flap, a restart, a join, a leave) and ambiguous
// dispatches, closed and open loop, every placement policy checked and
// none violated.
func TestInvariantsHold(t *testing.T) {
	for seed := uint64(1); seed <= 10; seed++ {
		w := small(t, 12, seed)
		cfg := invariantConfig(w, seed)
		if seed%3 == 0 {
			cfg.Loop = Open
		}
		rep, err := Run(context.Background(), cfg, w)
		require.NoError(t, err)
		assert.Empty(t, rep.Violations(), "seed %d %s", seed, cfg.Loop)
		for _, r := range rep.Results {
			assert.Zero(t, r.ViolationCount, "seed %d %s", seed, r.Policy)
			if r.Policy.placement() {
				// A check per dispatch, another per accepted one, the
				// turns and the layer at the end.
				assert.Greater(t, r.InvariantChecks, len(w.Requests)+2, "seed %d %s: the checks ran", seed, r.Policy)
			} else {
				assert.Zero(t, r.InvariantChecks, "seed %d %s: no layer, no checks", seed, r.Policy)
			}
		}
	}
}

// Invariant 3 is not vacuous: sibling fan-outs (and open loop's
// overlapping turns) put accepted requests of one key on the workers at
// the same time, and hard mode keeps them on one worker.
func TestInvariantTwoWorkersExercised(t *testing.T) {
	for _, loop := range []Loop{Closed, Open} {
		w := small(t, 12, 2)
		cfg := invariantConfig(w, 2)
		cfg.Loop = loop
		s, err := newSim(&cfg, PlacementHard, w)
		require.NoError(t, err)
		res, err := s.run(context.Background())
		require.NoError(t, err)
		assert.Zero(t, res.ViolationCount, "%s: %v", loop, res.Violations)
		assert.Positive(t, s.inv.concurrent, "%s: requests of one key at once", loop)
		for k, n := range s.inv.active {
			assert.Zero(t, n, "%s: key %d still active at the end", loop, k)
		}
	}
}

// The invariants hold over router replicas: every consistency policy at
// R = 1 and 3 (claims' store down for a while), hard and soft mode.
func TestInvariantsHoldReplicas(t *testing.T) {
	for _, run := range []struct {
		seed uint64
		mode Policy
	}{{1, PlacementHard}, {2, PlacementHard}, {3, PlacementSoft}} {
		w := small(t, 12, run.seed)
		cfg := replicaConfig(w, 1, 3)
		cfg.Seed = run.seed
		cfg.AmbiguousProb = 0.02
		cfg.Replicas.Mode = run.mode
		rep, err := RunReplicas(context.Background(), cfg, w)
		require.NoError(t, err)
		assert.Empty(t, rep.Violations(), "seed %d %s", run.seed, run.mode)
		for _, r := range rep.Results {
			assert.Greater(t, r.InvariantChecks, len(w.Requests), "seed %d %s %s R=%d", run.seed, run.mode, r.Consistency, r.Replicas)
		}
	}
}

// Invariant 1 catches a turn never ended: the router's bookkeeping names
// the request, and the layer, its clock past every deadline, still holds
// the binding the lease keeps.
func TestInvariantLeakCaught(t *testing.T) {
	w := small(t, 6, 1)
	cfg := invariantConfig(w, 1)
	cfg.Churn = nil
	breakSim(t, "skip-done")
	rep, err := Run(context.Background(), cfg, w)
	require.NoError(t, err)
	for _, r := range rep.Results[:3] {
		leaks := withViolation(&r, InvLeaseLeaked)
		require.NotEmpty(t, leaks, "%s", r.Policy)
		assert.Contains(t, leaks[0], "was never ended", "%s", r.Policy)
		if r.Policy == PlacementOff {
			assert.Len(t, leaks, 1, "mode off: an unpinned turn holds nothing in the layer")
			continue
		}
		require.Len(t, leaks, 2, "%s: %v", r.Policy, leaks)
		assert.Contains(t, leaks[1], "the layer still holds live entries: 1 ", "%s", r.Policy)
	}
	assert.Zero(t, rep.Results[3].ViolationCount, "round robin has no layer")
	assert.NotEmpty(t, rep.Violations())
	assert.True(t, strings.HasPrefix(rep.Violations()[0], "placement-hard: "+InvLeaseLeaked+": "), rep.Violations()[0])
}

// Invariant 2 catches a dispatch to a failed worker (DefaultChurn's flap
// fails w2 for a minute).
func TestInvariantDepartedCaught(t *testing.T) {
	w := small(t, 12, 3)
	cfg := invariantConfig(w, 3)
	breakSim(t, "departed")
	rep, err := Run(context.Background(), cfg, w)
	require.NoError(t, err)
	for _, r := range rep.Results[:3] {
		v := withViolation(&r, InvDepartedWorker)
		require.NotEmpty(t, v, "%s", r.Policy)
		assert.Contains(t, v[0], "to w2#0, which failed at", "%s", r.Policy)
	}
}

// Invariant 2 catches hits on an old instance: a restart the layers are
// not told of leaves them the old instance's bindings, and later turns
// hit them on the new instance.
func TestInvariantOldInstanceCaught(t *testing.T) {
	w := small(t, 12, 1)
	cfg := invariantConfig(w, 1)
	cfg.Policies = []Policy{PlacementHard, PlacementSoft}
	breakSim(t, "unannounced")
	rep, err := Run(context.Background(), cfg, w)
	require.NoError(t, err)
	for _, r := range rep.Results {
		v := withViolation(&r, InvDepartedWorker)
		require.NotEmpty(t, v, "%s", r.Policy)
		assert.Contains(t, v[0], "as a hit on the binding to w4#0, fenced by its restart as w4#1", "%s", r.Policy)
	}
}

// Invariant 3 catches a request sent away from its key's binding while
// another request of the key runs there.
func TestInvariantSplitCaught(t *testing.T) {
	w := small(t, 12, 2)
	cfg := invariantConfig(w, 2)
	cfg.Loop = Open
	cfg.Policies = []Policy{PlacementHard, PlacementSoft}
	breakSim(t, "split")
	rep, err := Run(context.Background(), cfg, w)
	require.NoError(t, err)
	for _, r := range rep.Results {
		v := withViolation(&r, InvTwoWorkers)
		require.NotEmpty(t, v, "%s: %v", r.Policy, r.Violations)
		assert.Contains(t, v[0], "where the binding has been since", "%s", r.Policy)
	}
}

// Report.Violations and ReplicaReport.Violations prefix each violation
// with its run, and say how many were not kept.
func TestInvariantViolationsListed(t *testing.T) {
	res := Result{Policy: PlacementSoft}
	for range MaxViolations + 3 {
		violate(&res, "%s: x", InvTwoWorkers)
	}
	require.Len(t, res.Violations, MaxViolations)
	require.Equal(t, MaxViolations+3, res.ViolationCount)
	out := (&Report{Results: []Result{{Policy: PlacementHard}, res}}).Violations()
	require.Len(t, out, MaxViolations+1)
	assert.Equal(t, "placement-soft: "+InvTwoWorkers+": x", out[0])
	assert.Equal(t, "placement-soft: 3 more violations not kept", out[MaxViolations])
	rout := (&ReplicaReport{Results: []ReplicaResult{{Consistency: Claims, Replicas: 3, Result: res}}}).Violations()
	assert.Equal(t, "claims R=3: "+InvTwoWorkers+": x", rout[0])
	assert.Empty(t, (&ReplicaReport{}).Violations())
}
