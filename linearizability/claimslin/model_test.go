package claimslin

import (
	"testing"

	"github.com/anishathalye/porcupine"
	"github.com/stretchr/testify/assert"
)

func op(client int, call, ret int64, in Input, out Output) porcupine.Operation {
	in.Client = client
	return porcupine.Operation{ClientId: client, Input: in, Output: out, Call: call, Return: ret}
}

// unknown is a call whose outcome is unknown (it returns at the end).
func unknown(client int, call int64, in Input) porcupine.Operation {
	return op(client, call, 1000, in, Output{Err: ErrUnavailable, Unknown: true})
}

func claimOut(c Claim, created bool) Output { return Output{Has: true, Claim: c, Created: created} }

// TestModelRejects: the model refuses the histories a broken store
// produces (unfenced writes, lost first-writer wins, stale reads, a
// deferred close deleted early or never, revisions going back) and
// accepts the right ones, with unknown outcomes taken either way.
func TestModelRejects(t *testing.T) {
	w0, w1 := Tgt{W: 0, R: -1}, Tgt{W: 1, R: -1}
	setup := []porcupine.Operation{
		op(0, 0, 1, Input{Op: OpRegister, Worker: 0}, Output{Gen: 1}),
		op(0, 2, 3, Input{Op: OpRegister, Worker: 1}, Output{Gen: 2}),
	}
	c5 := Claim{Rev: 5, T: w0, Gen: 1, St: StBound}
	created := op(1, 4, 5, Input{Op: OpCreateOrGet, Target: w0}, claimOut(c5, true))
	check := func(p Params, ops ...porcupine.Operation) bool {
		return porcupine.CheckOperations(NewModel(p), append(append(append([]porcupine.Operation(nil), setup...), created), ops...))
	}
	ok := func(ops ...porcupine.Operation) bool { return check(Params{}, ops...) }
	get := func(client int, call int64, c Claim) porcupine.Operation {
		return op(client, call, call+1, Input{Op: OpGet}, claimOut(c, false))
	}
	none := func(client int, call int64) porcupine.Operation {
		return op(client, call, call+1, Input{Op: OpGet}, Output{})
	}
	closeOp := func(client int, call, rev int64, res int) porcupine.Operation {
		return op(client, call, call+1, Input{Op: OpClose, Rev: rev}, Output{Close: res})
	}
	hold := func(client int, call, rev int64, err ErrKind) porcupine.Operation {
		return op(client, call, call+1, Input{Op: OpHold, Rev: rev}, Output{Err: err})
	}

	// First writer wins; the loser reads the winner's claim.
	assert.True(t, ok(op(2, 6, 7, Input{Op: OpCreateOrGet, Target: w1}, claimOut(c5, false))))
	assert.False(t, ok(op(2, 6, 7, Input{Op: OpCreateOrGet, Target: w1}, claimOut(Claim{Rev: 6, T: w1, Gen: 2, St: StBound}, true))), "second writer wins")
	// Concurrent creates: exactly one wins.
	assert.True(t, ok(op(2, 4, 7, Input{Op: OpCreateOrGet, Target: w1}, claimOut(c5, false))))
	// Reads see the last write.
	assert.True(t, ok(get(2, 6, c5)))
	assert.False(t, ok(get(2, 6, Claim{Rev: 4, T: w0, Gen: 1, St: StBound})), "another revision")
	assert.False(t, ok(none(2, 6)), "claim lost")
	// A Close of a revision that is not current changes nothing.
	assert.True(t, ok(closeOp(2, 6, 4, CloseStale), get(2, 8, c5)))
	assert.False(t, ok(closeOp(2, 6, 4, CloseDeleted)), "unfenced close")
	assert.False(t, ok(closeOp(2, 6, 4, CloseStale), none(2, 8)), "a stale close deleted")
	assert.True(t, ok(closeOp(2, 6, 5, CloseDeleted), none(2, 8)))
	assert.False(t, ok(closeOp(2, 6, 5, CloseStale)), "a close of the current revision is not stale")
	// A close under another replica's hold is deferred: the claim is
	// Closing (a new revision) until the last Unhold deletes it.
	held := []porcupine.Operation{hold(2, 6, 5, ErrNone), hold(3, 8, 5, ErrNone), closeOp(1, 10, 5, CloseDeferred)}
	closing := Claim{Rev: 9, T: w0, Gen: 1, St: StClosing}
	unhold := func(client int, call int64) porcupine.Operation {
		return op(client, call, call+1, Input{Op: OpUnhold}, Output{})
	}
	assert.True(t, ok(append(held, get(1, 12, closing), unhold(2, 14), get(1, 16, closing), unhold(3, 18), none(1, 20))...))
	assert.False(t, ok(append(held, unhold(2, 14), none(1, 16))...), "deleted before the last Unhold")
	assert.False(t, ok(append(held, unhold(2, 14), unhold(3, 16), get(1, 18, closing))...), "not deleted by the last Unhold")
	assert.False(t, ok(closeOp(1, 6, 5, CloseDeferred)), "deferred with no other holder")
	assert.False(t, ok(append(held[:2], closeOp(1, 10, 5, CloseDeleted))...), "deleted under another's hold")
	assert.False(t, ok(append(held, get(1, 12, Claim{Rev: 5, T: w0, Gen: 1, St: StClosing}))...), "Closing at the old revision")
	// Hold is fenced by the revision.
	assert.False(t, ok(hold(2, 6, 4, ErrNone)), "hold of an old revision")
	assert.True(t, ok(hold(2, 6, 4, ErrMoved)))
	// A stale claim (its worker registered again) is replaced; a current
	// one is not.
	rereg := op(0, 6, 7, Input{Op: OpRegister, Worker: 0, Ident: 1}, Output{Gen: 8})
	c9 := Claim{Rev: 9, T: w1, Gen: 2, St: StBound}
	assert.True(t, ok(rereg, op(2, 8, 10, Input{Op: OpCreateOrGet, Target: w1}, claimOut(c9, true))))
	assert.False(t, ok(rereg, op(2, 8, 10, Input{Op: OpCreateOrGet, Target: w1}, claimOut(c5, false))), "stale claim returned")
	assert.False(t, ok(op(2, 8, 10, Input{Op: OpCreateOrGet, Target: w1}, claimOut(c9, true))), "current claim replaced")
	assert.False(t, ok(op(0, 6, 7, Input{Op: OpRegister, Worker: 0, Ident: 1}, Output{Gen: 5})), "generation not above the last revision")
	// Quarantine is fenced by revision and generation; Resolve by the
	// attempt and generation, and a fenced Resolve reports the claim.
	q := Claim{Rev: 7, T: w0, Gen: 1, St: StQuarantined, Att: 42}
	quar := op(2, 6, 7, Input{Op: OpQuarantine, Rev: 5, Attempt: 42, Gen: 1}, claimOut(q, false))
	assert.True(t, ok(quar, get(1, 8, q)))
	assert.False(t, ok(op(2, 6, 7, Input{Op: OpQuarantine, Rev: 4, Attempt: 42, Gen: 1}, claimOut(q, false))), "quarantine of an old revision")
	assert.False(t, ok(op(2, 6, 7, Input{Op: OpQuarantine, Rev: 5, Attempt: 42, Gen: 2}, claimOut(Claim{Rev: 7, T: w0, Gen: 2, St: StQuarantined, Att: 42}, false))), "quarantine at another generation")
	resolve := func(att uint64, gen int64, acc bool, out Output) porcupine.Operation {
		return op(3, 8, 9, Input{Op: OpResolve, Attempt: att, Gen: gen, Accepted: acc}, out)
	}
	b10 := Claim{Rev: 10, T: w0, Gen: 1, St: StBound}
	assert.True(t, ok(quar, resolve(42, 1, true, claimOut(b10, false)), get(1, 10, b10)))
	assert.True(t, ok(quar, resolve(42, 1, false, Output{}), none(1, 10)))
	assert.False(t, ok(quar, resolve(41, 1, true, claimOut(b10, false))), "resolve of another attempt")
	assert.False(t, ok(quar, resolve(42, 2, false, Output{})), "resolve at another generation")
	assert.True(t, ok(quar, resolve(41, 1, true, Output{Err: ErrFenced, Has: true, Claim: q})))
	assert.False(t, ok(quar, resolve(41, 1, true, Output{Err: ErrFenced, Has: true, Claim: c5})), "fenced resolve reports an old claim")
	assert.False(t, ok(resolve(42, 1, false, Output{})), "resolve of a bound claim")
	// Idle expiry on the manual clock: a claim not touched for the TTL
	// is gone; a Touch restarts the count.
	p := Params{TTL: 100}
	adv := func(call, d int64) porcupine.Operation {
		return op(8, call, call+1, Input{Op: OpAdvance, D: d}, Output{})
	}
	assert.True(t, check(p, adv(6, 60), adv(8, 60), none(1, 10)))
	assert.False(t, check(p, adv(6, 60), adv(8, 60), get(1, 10, c5)), "claim outlived its TTL")
	assert.True(t, check(p, adv(6, 60), op(1, 8, 9, Input{Op: OpTouch, Rev: 5}, Output{}), adv(10, 60), get(1, 12, c5)))
	assert.False(t, check(p, adv(6, 60), op(1, 8, 9, Input{Op: OpTouch, Rev: 5}, Output{}), adv(10, 60), none(1, 12)), "touched claim expired")
	// A session's end drops its holds: a close then deletes.
	assert.True(t, ok(hold(2, 6, 5, ErrNone), op(8, 8, 9, Input{Op: OpEndSession, Replica: 2}, Output{}), closeOp(1, 10, 5, CloseDeleted)))
	assert.False(t, ok(hold(2, 6, 5, ErrNone), op(8, 8, 9, Input{Op: OpEndSession, Replica: 2}, Output{}), closeOp(1, 10, 5, CloseDeferred)))

	// Unknown outcomes: either way, but nothing else.
	uc := unknown(2, 6, Input{Op: OpClose, Rev: 5})
	assert.True(t, ok(uc, get(1, 8, c5)), "unknown close that did not happen")
	assert.True(t, ok(uc, none(1, 8)), "unknown close that happened")
	assert.True(t, ok(uc, get(1, 8, c5), none(1, 10)), "unknown close that happened late")
	assert.False(t, ok(uc, none(1, 8), get(1, 10, c5)), "the claim came back")
	uq := unknown(2, 6, Input{Op: OpQuarantine, Rev: 5, Attempt: 7, Gen: 1})
	assert.True(t, ok(uq, get(1, 8, Claim{Rev: 11, T: w0, Gen: 1, St: StQuarantined, Att: 7})), "its revision learned from a read")
	assert.False(t, ok(uq, get(1, 8, Claim{Rev: 4, T: w0, Gen: 1, St: StQuarantined, Att: 7})), "an unknown write's revision below the last")
	assert.False(t, ok(uq, get(1, 8, Claim{Rev: 11, T: w0, Gen: 1, St: StQuarantined, Att: 8})), "another attempt")
	ur := unknown(0, 6, Input{Op: OpRegister, Worker: 0, Ident: 1})
	assert.True(t, ok(ur, op(2, 8, 10, Input{Op: OpCreateOrGet, Target: w1}, claimOut(c5, false))), "re-registration not yet")
	assert.True(t, ok(ur, op(2, 8, 10, Input{Op: OpCreateOrGet, Target: w1}, claimOut(c9, true))), "re-registration done")
	assert.True(t, ok(ur, op(2, 8, 10, Input{Op: OpCreateOrGet, Target: w1}, claimOut(c9, true)),
		op(0, 12, 13, Input{Op: OpMembers}, Output{Members: [MaxWorkers]Member{{Gen: 7, Ident: 1}, {Gen: 2}}, Rev: 9})))
	assert.False(t, ok(ur, op(2, 8, 10, Input{Op: OpCreateOrGet, Target: w1}, claimOut(c9, true)),
		op(0, 12, 13, Input{Op: OpMembers}, Output{Members: [MaxWorkers]Member{{Gen: 1}, {Gen: 2}}, Rev: 9})), "replaced although its worker is current")
}

// TestLineage: Touch accepts any revision of the current claim's lineage
// (Born to Rev), and only those, Hold only the current revision; a
// rewrite keeps the lineage, a new claim starts one; Resolve of a stale
// quarantine is fenced.
func TestLineage(t *testing.T) {
	w0 := Tgt{W: 0, R: -1}
	reg := op(0, 0, 1, Input{Op: OpRegister, Worker: 0}, Output{Gen: 1})
	c2 := Claim{Rev: 2, T: w0, Gen: 1, St: StBound, Born: 2}
	create := op(1, 2, 3, Input{Op: OpCreateOrGet, Target: w0}, claimOut(c2, true))
	q3 := Claim{Rev: 3, T: w0, Gen: 1, St: StQuarantined, Att: 7, Born: 2}
	quar := op(1, 4, 5, Input{Op: OpQuarantine, Rev: 2, Attempt: 7, Gen: 1}, claimOut(q3, false))
	call := func(o Op, rev int64, err ErrKind, at int64) porcupine.Operation {
		return op(2, at, at+1, Input{Op: o, Rev: rev}, Output{Err: err})
	}
	check := func(ops ...porcupine.Operation) bool {
		return porcupine.CheckOperations(NewModel(Params{}), append([]porcupine.Operation{reg, create, quar}, ops...))
	}
	assert.True(t, check(call(OpTouch, 2, ErrNone, 6)), "a touch of the lineage's first revision")
	assert.True(t, check(call(OpTouch, 3, ErrNone, 6)))
	assert.False(t, check(call(OpTouch, 2, ErrMoved, 6)), "refused a revision of the lineage")
	assert.False(t, check(call(OpTouch, 1, ErrNone, 6)), "accepted a revision before the lineage")
	assert.True(t, check(call(OpHold, 2, ErrMoved, 6)), "Hold is fenced by the current revision")
	assert.False(t, check(call(OpHold, 2, ErrNone, 6)))
	// A new claim of the key (the quarantine resolved not accepted, then
	// created again) starts a new lineage: the old one's revisions move.
	resolve := op(3, 6, 7, Input{Op: OpResolve, Attempt: 7, Gen: 1}, Output{})
	c9 := Claim{Rev: 9, T: w0, Gen: 1, St: StBound, Born: 9}
	again := op(1, 8, 9, Input{Op: OpCreateOrGet, Target: w0}, claimOut(c9, true))
	assert.True(t, check(resolve, again, call(OpTouch, 2, ErrMoved, 10)))
	assert.False(t, check(resolve, again, call(OpTouch, 2, ErrNone, 10)))
	// A stale quarantine (its worker registered again) is fenced.
	rereg := op(0, 6, 7, Input{Op: OpRegister, Worker: 0, Ident: 1}, Output{Gen: 8})
	fenced := op(3, 8, 9, Input{Op: OpResolve, Attempt: 7, Gen: 1}, Output{Err: ErrFenced, Has: true, Claim: q3})
	settled := op(3, 8, 9, Input{Op: OpResolve, Attempt: 7, Gen: 1}, Output{})
	assert.True(t, check(rereg, fenced))
	assert.False(t, check(rereg, settled))
}

// TestModelMove: a Move is fenced by its revision (the first of two
// concurrent moves from one revision wins, the loser is told the
// winner's claim), moves only a Bound claim, to a registered worker; it
// starts a new lineage (Born == Rev) with no holds; an unknown outcome is
// taken either way.
func TestModelMove(t *testing.T) {
	w0, w1 := Tgt{W: 0, R: -1}, Tgt{W: 1, R: 2}
	setup := []porcupine.Operation{
		op(0, 0, 1, Input{Op: OpRegister, Worker: 0}, Output{Gen: 1}),
		op(0, 2, 3, Input{Op: OpRegister, Worker: 1}, Output{Gen: 2}),
		op(1, 4, 5, Input{Op: OpCreateOrGet, Target: w0}, claimOut(Claim{Rev: 5, Born: 5, T: w0, Gen: 1, St: StBound}, true)),
	}
	ok := func(ops ...porcupine.Operation) bool {
		return porcupine.CheckOperations(NewModel(Params{}), append(append([]porcupine.Operation(nil), setup...), ops...))
	}
	move := func(client int, call, ret, rev int64, to Tgt, out Output) porcupine.Operation {
		return op(client, call, ret, Input{Op: OpMove, Rev: rev, Target: to}, out)
	}
	get := func(call int64, c Claim) porcupine.Operation {
		return op(3, call, call+1, Input{Op: OpGet}, claimOut(c, false))
	}
	c5 := Claim{Rev: 5, Born: 5, T: w0, Gen: 1, St: StBound}
	m7 := Claim{Rev: 7, Born: 7, T: w1, Gen: 2, St: StBound}
	m8 := Claim{Rev: 8, Born: 8, T: w0, Gen: 1, St: StBound}

	assert.True(t, ok(move(2, 6, 7, 5, w1, claimOut(m7, false)), get(8, m7)))
	assert.False(t, ok(move(2, 6, 7, 4, w1, claimOut(m7, false))), "a move from an old revision")
	assert.False(t, ok(move(2, 6, 7, 5, w1, claimOut(Claim{Rev: 7, Born: 5, T: w1, Gen: 2, St: StBound}, false))), "the old lineage kept")
	assert.False(t, ok(move(2, 6, 7, 5, w1, claimOut(Claim{Rev: 7, Born: 7, T: w1, Gen: 1, St: StBound}, false))), "not the target's generation")
	assert.False(t, ok(move(2, 6, 7, 5, w1, claimOut(m7, false)), get(8, c5)), "the old revision read after the move")
	// Two concurrent moves from one revision: the first wins, the second
	// is told the winner's claim.
	assert.True(t, ok(move(2, 6, 9, 5, w1, claimOut(m7, false)), move(4, 6, 9, 5, w0, Output{Err: ErrMoved, Has: true, Claim: m7})))
	assert.False(t, ok(move(2, 6, 9, 5, w1, claimOut(m7, false)), move(4, 6, 9, 5, w0, claimOut(m8, false))), "both moves from one revision won")
	assert.False(t, ok(move(4, 6, 7, 5, w0, Output{Err: ErrMoved, Has: true, Claim: c5})), "refused as moved with the revision current")
	// A move ends the old lineage's holds: a Close of the new claim
	// deletes it, the old holder's Close is stale.
	hold := op(4, 5, 6, Input{Op: OpHold, Rev: 5}, Output{})
	assert.True(t, ok(hold, move(2, 7, 8, 5, w1, claimOut(Claim{Rev: 8, Born: 8, T: w1, Gen: 2, St: StBound}, false)),
		op(4, 9, 10, Input{Op: OpClose, Rev: 5}, Output{Close: CloseStale}),
		op(2, 11, 12, Input{Op: OpClose, Rev: 8}, Output{Close: CloseDeleted})))
	assert.False(t, ok(hold, move(2, 7, 8, 5, w1, claimOut(Claim{Rev: 8, Born: 8, T: w1, Gen: 2, St: StBound}, false)),
		op(2, 11, 12, Input{Op: OpClose, Rev: 8}, Output{Close: CloseDeferred})), "the old lineage's hold kept")
	// Only a Bound claim moves.
	q := Claim{Rev: 7, Born: 5, T: w0, Gen: 1, St: StQuarantined, Att: 3}
	quar := op(2, 6, 7, Input{Op: OpQuarantine, Rev: 5, Attempt: 3, Gen: 1}, claimOut(q, false))
	assert.True(t, ok(quar, move(2, 8, 9, 7, w1, Output{Err: ErrNotBound, Has: true, Claim: q}), get(10, q)))
	assert.False(t, ok(quar, move(2, 8, 9, 7, w1, claimOut(Claim{Rev: 9, Born: 9, T: w1, Gen: 2, St: StBound}, false))), "a quarantine moved")
	assert.False(t, ok(move(2, 6, 7, 5, w1, Output{Err: ErrNotBound, Has: true, Claim: c5})), "a bound claim refused as not bound")
	// The target must be registered.
	dereg := op(0, 6, 7, Input{Op: OpDeregister, Worker: 1}, Output{})
	assert.True(t, ok(dereg, move(2, 8, 9, 5, w1, Output{Err: ErrUnknownWorker}), get(10, c5)))
	assert.False(t, ok(move(2, 8, 9, 5, w1, Output{Err: ErrUnknownWorker})), "a registered target refused")
	// An unknown outcome: either way.
	um := unknown(2, 6, Input{Op: OpMove, Rev: 5, Target: w1})
	assert.True(t, ok(um, get(8, c5)))
	assert.True(t, ok(um, get(8, Claim{Rev: 11, Born: 11, T: w1, Gen: 2, St: StBound})))
	assert.False(t, ok(um, get(8, Claim{Rev: 11, Born: 11, T: w0, Gen: 1, St: StBound})), "an unknown move to another target")
}
