package queuelin

import (
	"testing"
	"time"

	"github.com/anishathalye/porcupine"
	"github.com/placementlab/placement/linearizability/histfile"
	"github.com/stretchr/testify/assert"
)

// TestLinearizable runs concurrent plans on one policyqueue.Queue each and
// checks every history with Porcupine against the model. QUEUELIN_SEED
// (the first seed), QUEUELIN_SEEDS and QUEUELIN_OPS (actions per client)
// scale it (LINEARIZABILITY_SEED and LINEARIZABILITY_SEEDS, as the bug zoo
// sets them, too). It stops at the first failing seed.
func TestLinearizable(t *testing.T) {
	ops := histfile.EnvInt(80, "QUEUELIN_OPS")
	var cov Coverage
	began := time.Now()
	Harness.CheckSeeds(t, 12, ops, nil, func(rec histfile.Recorded[Plan]) { cov.Add(rec.Coverage.(Coverage)) }, nil)
	t.Logf("%d operations checked in %v; coverage %+v", cov.Operations, time.Since(began).Round(time.Millisecond), cov)
	for _, m := range thin(cov) {
		t.Errorf("too thin: %s", m)
	}
}

// thin returns the coverage minimums cov does not reach.
func thin(cov Coverage) []string {
	return histfile.Thin([]histfile.Minimum{
		{Name: "enqueues", Got: cov.Enqueues, N: 500},
		{Name: "admitted at once", Got: cov.AdmittedAtOnce, N: 100},
		{Name: "refused as full", Got: cov.Full, N: 20},
		{Name: "waits admitted", Got: cov.WaitsAdmitted, N: 100},
		{Name: "waits ended by a cancel", Got: cov.WaitsCancelled, N: 3},
		{Name: "releases that admitted", Got: cov.ReleasesAdmitting, N: 50},
		{Name: "second releases", Got: cov.SecondReleases, N: 20},
		{Name: "cancels of waiting items", Got: cov.CancelWaiting, N: 20},
		{Name: "cancels of admitted items", Got: cov.CancelAdmitted, N: 20},
		{Name: "cancels of ended tickets", Got: cov.CancelNone, N: 10},
		{Name: "capacity changes that admitted", Got: cov.CapacityAdmitting, N: 10},
		{Name: "eligibility changes", Got: cov.EligibleChanges, N: 20},
		{Name: "rechecks", Got: cov.Rechecks, N: 20},
		{Name: "exact admissions", Got: cov.ExactAdmitted, N: 100},
		{Name: "ranked admissions", Got: cov.RankedAdmitted, N: 30},
		{Name: "shared admissions", Got: cov.SharedLaneAd, N: 100},
		{Name: "shared admissions to a later candidate", Got: cov.OtherCandidate, N: 10},
		{Name: "closes", Got: cov.Closes, N: 2},
		{Name: "waits ended by Close", Got: cov.WaitsClosed, N: 1},
		{Name: "enqueues refused after Close", Got: cov.RefusedClosed, N: 20},
		{Name: "calls overlapping another client's", Got: cov.Overlapping, N: 300},
	})
}

// TestRecheckSaved re-checks every history saved under testdata/histories
// deterministically: each must give the result it was saved with.
func TestRecheckSaved(t *testing.T) {
	checker.RecheckSaved(t, "testdata/histories/*.json")
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
