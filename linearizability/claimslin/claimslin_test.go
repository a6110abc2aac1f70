package claimslin

import (
	"testing"
	"time"

	"github.com/placementlab/placement/linearizability/histfile"
	"github.com/stretchr/testify/require"
)

// TestLinearizable runs concurrent plans on one claim store each (memstore
// with its faults; etcd, one member and three, with theirs) and checks
// every history with Porcupine against the model. CLAIMSLIN_SEED (the
// first seed), CLAIMSLIN_SEEDS and CLAIMSLIN_OPS (calls per replica) scale
// it (LINEARIZABILITY_SEED and LINEARIZABILITY_SEEDS, as the bug zoo sets
// them, too). It stops at the first failing seed.
func TestLinearizable(t *testing.T) {
	t.Run("mem", func(t *testing.T) { linearizable(t, BackendMem, 12, 200) })
	t.Run("etcd1", func(t *testing.T) { linearizable(t, BackendEtcd1, 2, 90) })
	t.Run("etcd3", func(t *testing.T) { linearizable(t, BackendEtcd3, 2, 90) })
}

func linearizable(t *testing.T, backend string, seeds, ops int) {
	ops = histfile.EnvInt(ops, "CLAIMSLIN_OPS")
	var cov Coverage
	var tr Transitions
	began := time.Now()
	more := func() bool { return len(thin(backend, cov, tr)) > 0 }
	Harness(backend).CheckSeeds(t, seeds, ops, more, func(rec histfile.Recorded[Plan]) {
		cov.Add(rec.Coverage.(Coverage))
		if x, ok := replay(rec.Plan, rec.Ops); ok {
			tr.Add(x)
		}
	}, nil)
	t.Logf("%s: %d operations checked in %v; coverage %+v; transitions %+v", backend, cov.Operations,
		time.Since(began).Round(time.Millisecond), cov, tr)
	for _, m := range thin(backend, cov, tr) {
		t.Errorf("too thin: %s", m)
	}
}

// thin returns the coverage minimums cov and tr do not reach on backend:
// every call with each of its outcomes (fenced in and fenced out), the
// transitions only a replay shows, unknown outcomes, and calls
// overlapping others.
func thin(backend string, cov Coverage, tr Transitions) []string {
	ms := []histfile.Minimum{
		{Name: "CreateOrGet created", Got: cov.Created, N: 20},
		{Name: "CreateOrGet got the current claim", Got: cov.Got, N: 20},
		{Name: "CreateOrGet refused (worker not registered)", Got: cov.UnknownWorker, N: 3},
		{Name: "Get found", Got: cov.GetFound, N: 20},
		{Name: "Get found none", Got: cov.GetNone, N: 10},
		{Name: "Hold fenced in", Got: cov.HoldOK, N: 20},
		{Name: "Hold fenced out", Got: cov.HoldMoved, N: 10},
		{Name: "Unholds", Got: cov.Unholds, N: 20},
		{Name: "Close deleted", Got: cov.CloseDeleted, N: 10},
		{Name: "Close deferred", Got: cov.CloseDeferred, N: 3},
		{Name: "Close stale (fenced out)", Got: cov.CloseStale, N: 10},
		{Name: "Quarantine fenced in", Got: cov.QuarantineOK, N: 10},
		{Name: "Quarantine fenced out", Got: cov.QuarantineMoved, N: 10},
		{Name: "Resolve accepted", Got: cov.ResolveAccepted, N: 2},
		{Name: "Resolve not accepted", Got: cov.ResolveNot, N: 2},
		{Name: "Resolve fenced out", Got: cov.Fenced, N: 10},
		{Name: "Touch fenced in", Got: cov.TouchOK, N: 10},
		{Name: "Touch fenced out", Got: cov.TouchMoved, N: 10},
		{Name: "Move moved", Got: cov.MoveOK, N: 10},
		{Name: "Move fenced out", Got: cov.MoveMoved, N: 5},
		{Name: "Move refused (not bound)", Got: cov.MoveNotBound, N: 2},
		{Name: "Registers", Got: cov.Registers, N: 10},
		{Name: "Deregisters", Got: cov.Deregisters, N: 3},
		{Name: "Members", Got: cov.Members, N: 10},
		{Name: "deferred closes deleted by the last Unhold", Got: tr.UnholdDeleted, N: 1},
		{Name: "stale claims replaced", Got: tr.StaleReplaced, N: 3},
		{Name: "unknown revisions pinned by a later read", Got: tr.Pinned, N: 3},
		{Name: "unknown outcomes", Got: cov.Unknown, N: 3},
		{Name: "calls overlapping another client's", Got: cov.Overlapping, N: 100},
	}
	if backend != BackendMem {
		// etcd runs are a few hundred calls: a fifth of each minimum, and
		// every fault at least once.
		for i := range ms {
			ms[i].N = max(1, ms[i].N/5)
		}
		ms = append(ms,
			histfile.Minimum{Name: "members stopped and restarted", Got: cov.MemberStops, N: 1},
			histfile.Minimum{Name: "clients cut off through the proxy", Got: cov.Disconnects, N: 1},
			histfile.Minimum{Name: "compactions under live watches", Got: cov.Compactions, N: 1},
			histfile.Minimum{Name: "Resets delivered", Got: cov.Resets, N: 2},
		)
	}
	if backend == BackendMem {
		ms = append(ms,
			histfile.Minimum{Name: "calls refused by an unreachable store", Got: cov.Unreachable, N: 10},
			histfile.Minimum{Name: "store unreachable spells", Got: cov.Outages, N: 5},
			histfile.Minimum{Name: "Resets delivered", Got: cov.Resets, N: 5},
			histfile.Minimum{Name: "Deletes delivered", Got: cov.Deletes, N: 20},
			histfile.Minimum{Name: "lost responses", Got: cov.UnknownTookEffect, N: 10},
			histfile.Minimum{Name: "sessions ended", Got: cov.EndSessions, N: 10},
			histfile.Minimum{Name: "claims expired", Got: tr.Expired, N: 5},
			histfile.Minimum{Name: "deferred closes deleted by a session's end", Got: tr.SessionDeleted, N: 1},
		)
	}
	return histfile.Thin(ms)
}

// TestRecheckSaved re-checks every history saved under testdata/histories
// deterministically: each must give the result it was saved with (the
// bug-*.json ones, recorded from a broken store, Illegal).
func TestRecheckSaved(t *testing.T) {
	checker.RecheckSaved(t, "testdata/histories/*.json")
}

// TestExplainSaved runs the explainer on a committed failing history: it
// finds the partition that is not linearizable and replays the longest
// linearization Porcupine found without the model refusing a step.
func TestExplainSaved(t *testing.T) {
	h, err := ReadHistory("testdata/histories/bug-unfenced-close.json")
	require.NoError(t, err)
	require.Equal(t, "Illegal", h.Result)
	require.GreaterOrEqual(t, explainHistory(t, h), 1)
}
