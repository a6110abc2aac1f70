package queuelin

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/anishathalye/porcupine"
	"github.com/placementlab/placement/linearizability/histfile"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
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
		res, h.Note = porcupine.Illegal, fmt.Sprintf("%d Waits waited %v: lost wake-up or leaked slot", run.Stuck, WaitLimit)
	}
	if dir := os.Getenv("QUEUELIN_SAVE"); dir != "" {
		h.Result = string(res)
		if b, err := json.MarshalIndent(h, "", " "); err == nil {
			_ = os.WriteFile(filepath.Join(dir, fmt.Sprintf("seed%d-%s.json", run.Plan.Seed, res)), b, 0o644)
		}
	}
	if res != porcupine.Ok {
		h.Result = string(res)
		dir := os.Getenv("QUEUELIN_REPORT_DIR")
		if dir == "" {
			dir = os.Getenv("LINEARIZABILITY_REPORT_DIR")
		}
		out, werr := WriteReport(dir, h, info, m)
		t.Errorf("seed %d: queue history of %d operations is %s %s; report: %s (write error: %v); re-check: copy history.json to linearizability/queuelin/testdata/histories and run TestRecheckSaved",
			run.Plan.Seed, len(run.History), res, h.Note, out, werr)
	}
	return res
}

// TestLinearizable runs concurrent plans on one policyqueue.Queue each and
// checks every history with Porcupine against the model. QUEUELIN_SEED
// (the first seed), QUEUELIN_SEEDS and QUEUELIN_OPS (actions per client)
// scale it (LINEARIZABILITY_SEED and LINEARIZABILITY_SEEDS, as the bug zoo
// sets them, too). It stops at the first failing seed.
func TestLinearizable(t *testing.T) {
	seeds := histfile.EnvInt(12, "QUEUELIN_SEEDS", "LINEARIZABILITY_SEEDS")
	ops := histfile.EnvInt(80, "QUEUELIN_OPS")
	first := uint64(histfile.EnvInt(1, "QUEUELIN_SEED", "LINEARIZABILITY_SEED"))
	var cov Coverage
	began := time.Now()
	for seed := first; seed < first+uint64(seeds); seed++ {
		plan := DrawPlan(seed, ops)
		run, err := Execute(plan)
		require.NoError(t, err)
		t.Logf("seed %d: plan %+v: %d operations", seed, plan, len(run.History))
		if checkRun(t, run) != porcupine.Ok {
			t.FailNow()
		}
		cov.Add(run.Coverage)
	}
	t.Logf("%d operations checked in %v; coverage %+v", cov.Operations, time.Since(began).Round(time.Millisecond), cov)
	for _, m := range []struct {
		name   string
		got, n int
	}{
		{"enqueues", cov.Enqueues, 500},
		{"admitted at once", cov.AdmittedAtOnce, 100},
		{"refused as full", cov.Full, 20},
		{"waits admitted", cov.WaitsAdmitted, 100},
		{"waits ended by a cancel", cov.WaitsCancelled, 3},
		{"releases that admitted", cov.ReleasesAdmitting, 50},
		{"second releases", cov.SecondReleases, 20},
		{"cancels of waiting items", cov.CancelWaiting, 20},
		{"cancels of admitted items", cov.CancelAdmitted, 20},
		{"cancels of ended tickets", cov.CancelNone, 10},
		{"capacity changes that admitted", cov.CapacityAdmitting, 10},
		{"eligibility changes", cov.EligibleChanges, 20},
		{"rechecks", cov.Rechecks, 20},
		{"exact admissions", cov.ExactAdmitted, 100},
		{"ranked admissions", cov.RankedAdmitted, 30},
		{"shared admissions", cov.SharedLaneAd, 100},
		{"shared admissions to a later candidate", cov.OtherCandidate, 10},
		{"closes", cov.Closes, 2},
		{"waits ended by Close", cov.WaitsClosed, 1},
		{"enqueues refused after Close", cov.RefusedClosed, 20},
		{"calls overlapping another client's", cov.Overlapping, 300},
	} {
		if m.got < m.n {
			t.Errorf("too thin: %s: %d, want at least %d", m.name, m.got, m.n)
		}
	}
}

// TestRecheckSaved re-checks every history saved under testdata/histories
// deterministically: each must give the result it was saved with.
func TestRecheckSaved(t *testing.T) {
	files, _ := filepath.Glob("testdata/histories/*.json")
	require.NotEmpty(t, files, "no saved histories in testdata/histories")
	for _, f := range files {
		h, err := ReadHistory(f)
		require.NoError(t, err)
		res, _, _ := Check(h, 60*time.Second)
		assert.Equal(t, h.Result, string(res), f)
	}
}

func op(client int, call, ret int64, in Input, out Output) porcupine.Operation {
	in.Client = client
	return porcupine.Operation{ClientId: client, Input: in, Output: out, Call: call, Return: ret}
}

// TestModelRejects: the model refuses the histories each broken variant
// of the queue produces, and accepts the right ones (so the check can
// fail).
func TestModelRejects(t *testing.T) {
	lim := Limits{MaxQueued: 4}
	w0 := Tgt{W: 0, R: -1}
	setup := op(0, 0, 1, Input{Op: OpSetCapacity, Worker: 0, N: 1}, Output{})
	base := []porcupine.Operation{
		setup,
		op(1, 2, 3, Input{Op: OpEnqueue, Exact: true, Target: w0}, Output{Ticket: 1, Admitted: []Adm{{1, w0}}}),
		op(1, 4, 5, Input{Op: OpEnqueue}, Output{Ticket: 2}),
		op(1, 6, 7, Input{Op: OpEnqueue, Exact: true, Target: w0}, Output{Ticket: 3}),
	}
	check := func(ops ...porcupine.Operation) bool {
		return porcupine.CheckOperations(NewModel(lim), append(append([]porcupine.Operation(nil), base...), ops...))
	}
	// Oldest first: the shared ticket 2 goes before the exact ticket 3.
	assert.True(t, check(op(1, 8, 9, Input{Op: OpRelease, Ticket: 1}, Output{Admitted: []Adm{{2, w0}}})))
	assert.False(t, check(op(1, 8, 9, Input{Op: OpRelease, Ticket: 1}, Output{Admitted: []Adm{{3, w0}}})), "SharedLaneStarves")
	// A second release frees nothing.
	rel := op(1, 8, 9, Input{Op: OpRelease, Ticket: 1}, Output{Admitted: []Adm{{2, w0}}})
	assert.False(t, check(rel, op(1, 10, 11, Input{Op: OpRelease, Ticket: 1}, Output{Admitted: []Adm{{3, w0}}})), "ReleaseTwice")
	assert.True(t, check(rel, op(1, 10, 11, Input{Op: OpRelease, Ticket: 1}, Output{})))
	// A cancel after admission frees the slot.
	assert.False(t, check(op(1, 8, 9, Input{Op: OpCancel, Ticket: 1}, Output{Cancel: CancelAdmitted})), "CancelLeaksSlot")
	// A Wait cannot return before its ticket is admitted, and returns the
	// admission's slot.
	assert.False(t, check(op(2, 8, 9, Input{Op: OpWait, Ticket: 3}, Output{Slot: w0})))
	assert.True(t, check(op(2, 8, 20, Input{Op: OpWait, Ticket: 2}, Output{Slot: w0}), rel))
	assert.False(t, check(op(2, 8, 20, Input{Op: OpWait, Ticket: 2}, Output{Slot: Tgt{W: 1, R: -1}}), rel))
	// Close ends the waiting tickets; nothing is admitted after it.
	cl := op(0, 8, 9, Input{Op: OpClose}, Output{})
	assert.True(t, check(cl, op(2, 10, 11, Input{Op: OpWait, Ticket: 2}, Output{Err: ErrClosed}),
		op(1, 12, 13, Input{Op: OpRelease, Ticket: 1}, Output{})))
	assert.False(t, check(cl, op(1, 12, 13, Input{Op: OpRelease, Ticket: 1}, Output{Admitted: []Adm{{2, w0}}})), "admits after Close")
	assert.False(t, check(cl, op(1, 12, 13, Input{Op: OpEnqueue}, Output{Ticket: 4})), "enqueues after Close")
	assert.True(t, check(cl, op(1, 12, 13, Input{Op: OpEnqueue}, Output{Err: ErrClosed})))
	// A full queue refuses only an item that would wait, and takes no ticket.
	lim = Limits{MaxQueued: 2}
	assert.True(t, check(op(1, 8, 9, Input{Op: OpEnqueue}, Output{Err: ErrFull})))
	assert.False(t, check(op(1, 8, 9, Input{Op: OpEnqueue}, Output{Ticket: 4})))
	assert.False(t, check(op(1, 8, 9, Input{Op: OpEnqueue}, Output{Err: ErrFull, Ticket: 4})))
}
