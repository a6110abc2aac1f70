package claimslin

import (
	"testing"

	"github.com/anishathalye/porcupine"
	"github.com/placementlab/placement/impl/claims"
	"github.com/stretchr/testify/assert"
)

// TestCheckGuaranteesRejects: the guarantee checker flags each kind of
// broken observation, and passes the right ones.
func TestCheckGuaranteesRejects(t *testing.T) {
	w0, w1 := Tgt{W: 0, R: -1}, Tgt{W: 1, R: -1}
	c5 := Claim{Rev: 5, T: w0, Gen: 1, St: StBound}
	c9 := Claim{Rev: 9, T: w1, Gen: 2, St: StBound}
	store := []porcupine.Operation{
		op(0, 10, 20, Input{Op: OpCreateOrGet, Key: 0, Target: w0}, claimOut(c5, true)),
		op(1, 30, 40, Input{Op: OpClose, Key: 0, Rev: 5}, Output{Close: CloseDeleted}),
		op(1, 50, 60, Input{Op: OpCreateOrGet, Key: 0, Target: w1}, claimOut(c9, true)),
	}
	del5 := Received{At: 45, Event: claims.Event{Kind: claims.Delete, Key: "s0", Rev: 5}}
	route := func(replica int, call int64, c Claim) Route {
		return Route{Replica: replica, Key: 0, Target: c.T, Rev: c.Rev, Gen: c.Gen, Call: call, Return: call + 5, LeaseFrom: call + 5, End: call + 8}
	}
	guarantees := func(vs []Violation) []int {
		var g []int
		for _, v := range vs {
			g = append(g, v.Guarantee)
		}
		return g
	}
	// r1's Close of rev 5 (at [30,40]) needs a turn of r1's under rev 5.
	closer := route(1, 12, c5)
	closer.End = 28
	bare := func(routes []Route, processed ...Processed) []int {
		return guarantees(CheckGuarantees(store, []Received{del5}, routes, processed))
	}
	check := func(routes []Route, processed ...Processed) []int {
		return bare(append(routes, closer), processed...)
	}
	// Routing under rev 5 after it ended, before the Delete was processed:
	// inside the window.
	processedDel := Processed{Replica: 2, Event: del5.Event, Delivered: 45, By: 70}
	assert.Empty(t, check([]Route{route(2, 62, c5)}, processedDel))
	// After the Delete was processed: outside it.
	assert.Equal(t, []int{1}, check([]Route{route(2, 75, c5)}, processedDel))
	// After a Reset delivered once rev 5 had ended.
	reset := Processed{Replica: 2, Event: claims.Event{Kind: claims.Reset, Why: "test"}, Delivered: 64, By: 66}
	assert.Equal(t, []int{1}, check([]Route{route(2, 70, c5)}, reset))
	// A Reset delivered before rev 5 ended does not end its window.
	early := Processed{Replica: 2, Event: claims.Event{Kind: claims.Reset}, Delivered: 25, By: 28}
	assert.Empty(t, check([]Route{route(2, 70, c5)}, early))
	// Another replica's processing says nothing of this one's.
	assert.Empty(t, check([]Route{route(3, 75, c5)}, processedDel))
	// A route to another target than its revision's claim; two replicas
	// disagreeing on one revision.
	wrong := route(2, 22, c5)
	wrong.Target = w1
	assert.Equal(t, []int{1, 2}, check([]Route{route(3, 21, c5), wrong}))
	// A new attempt under a quarantined revision.
	q := Claim{Rev: 7, T: w0, Gen: 1, St: StQuarantined, Att: 3}
	store = append(store, op(2, 22, 24, Input{Op: OpQuarantine, Key: 0, Rev: 5, Attempt: 3, Gen: 1}, claimOut(q, false)))
	disp := route(3, 25, q)
	assert.Empty(t, check([]Route{disp}))
	disp.Attempt = true
	assert.Equal(t, []int{4}, check([]Route{disp}))
	withCloser := func(rs ...Route) []int { return check(rs) }
	assert.Equal(t, []int{3}, bare(nil), "a close of a revision never held")
	// A Close that deleted the claim while another replica's lease on it
	// was held throughout, that replica connected.
	placed := route(2, 11, c5) // r2's placing turn, accepted at 16
	placed.Attempt, placed.End = true, 17
	lease := route(2, 15, c5)
	unheld := store
	store = append(store[:len(store):len(store)], op(2, 13, 15, Input{Op: OpHold, Key: 0, Rev: 5}, Output{}))
	assert.Empty(t, withCloser(placed, lease))
	lease.End = 45
	assert.Equal(t, []int{6}, withCloser(placed, lease))
	// Not while r2's Hold had not reached the store (in flight, or queued
	// after a Reset overtook the placing turn: the one window impl/replica
	// leaves by design).
	assert.Empty(t, guarantees(CheckGuarantees(unheld, []Received{del5}, []Route{closer, placed, lease}, nil)))
	// Once it had, every lease of r2's on the revision counts, a hit's
	// too.
	assert.Equal(t, []int{6}, withCloser(lease))
	// A Reset r2 processed meanwhile does not excuse it: impl/replica
	// holds every leased claim again after one.
	assert.Equal(t, []int{6}, check([]Route{placed, lease}, Processed{Replica: 2, Event: claims.Event{Kind: claims.Reset}, Delivered: 20, By: 22}))
	// Not when r2's session was lost meanwhile, or a call of r2's found
	// the store unreachable.
	lost := op(8, 25, 26, Input{Op: OpEndSession, Replica: 2}, Output{})
	assert.Empty(t, guarantees(CheckGuarantees(append(store, lost), []Received{del5}, []Route{closer, placed, lease}, nil)))
	cut := op(2, 25, 26, Input{Op: OpHold, Key: 0, Rev: 5}, Output{Err: ErrUnavailable})
	assert.Empty(t, guarantees(CheckGuarantees(append(store, cut), []Received{del5}, []Route{closer, placed, lease}, nil)))
	// A reconciled session: the closer's turn routed unclaimed and held
	// rev 5 when it ended.
	reconciled := closer
	reconciled.Rev, reconciled.EndRev = 0, 5
	assert.Empty(t, bare([]Route{reconciled}))
	// Or, made by a final turn's Done, while another turn of the
	// closer's held a lease on the same record.
	lease.Replica = 1
	assert.Empty(t, withCloser(lease), "no final turn's Done made the Close")
	final := closer
	final.Final, final.End, final.DoneAt = true, 29, 41
	assert.Equal(t, []int{6}, bare([]Route{final, lease}))
	// Also when a placing turn of r1's read the claim again between the
	// two (the lease is on another local record: leases are the
	// session's).
	reread := route(1, 17, c5)
	reread.Attempt = true
	assert.Equal(t, []int{6}, bare([]Route{final, lease, reread}))
	// A lease on another revision says nothing.
	lease.Rev = 4
	assert.Empty(t, withCloser(lease))
	// Unless it is of the same lineage: rev 12 rewrote rev 10 (Born 10),
	// and r1's final turn closed rev 12 while another turn of its held a
	// lease under rev 10.
	c10 := Claim{Rev: 10, T: w0, Gen: 1, St: StBound, Born: 10}
	c12 := Claim{Rev: 12, T: w0, Gen: 1, St: StBound, Born: 10}
	other := Claim{Rev: 11, T: w0, Gen: 1, St: StBound, Born: 11}
	lineage := []porcupine.Operation{
		op(0, 10, 20, Input{Op: OpCreateOrGet, Key: 0, Target: w0}, claimOut(c10, true)),
		op(1, 21, 22, Input{Op: OpGet, Key: 0}, claimOut(c12, false)),
		op(1, 30, 40, Input{Op: OpClose, Key: 0, Rev: 12}, Output{Close: CloseDeleted}),
	}
	fin := route(1, 23, c12)
	fin.Final, fin.End, fin.DoneAt = true, 29, 41
	old := route(1, 12, c10)
	old.End = 45
	assert.Equal(t, []int{6}, guarantees(CheckGuarantees(lineage, nil, []Route{fin, old}, nil)))
	old.End = 28
	assert.Empty(t, guarantees(CheckGuarantees(lineage, nil, []Route{fin, old}, nil)))
	old.Rev, old.End = other.Rev, 45
	assert.Empty(t, guarantees(CheckGuarantees(lineage, nil, []Route{fin, old}, nil)), "another lineage")
	// Another replica's lease under rev 10, held in the store, is
	// protected through the rewrite to rev 12 (holds follow the lineage).
	r2 := route(2, 11, c10)
	r2.End = 45
	held := append(lineage[:len(lineage):len(lineage)], op(2, 16, 18, Input{Op: OpHold, Key: 0, Rev: 10}, Output{}))
	assert.Equal(t, []int{6}, guarantees(CheckGuarantees(held, nil, []Route{fin, r2}, nil)))
	assert.Empty(t, guarantees(CheckGuarantees(lineage, nil, []Route{fin, r2}, nil)), "its Hold never reached the store")
}

// TestHeldNoExpiry: with Params.HeldNoExpiry the model refuses a held
// claim's expiry, and accepts an idle one's.
func TestHeldNoExpiry(t *testing.T) {
	w0 := Tgt{W: 0, R: -1}
	c := Claim{Rev: 2, T: w0, Gen: 1, St: StBound}
	p := Params{TTL: 100, HeldNoExpiry: true}
	base := []porcupine.Operation{
		op(0, 0, 1, Input{Op: OpRegister, Worker: 0}, Output{Gen: 1}),
		op(1, 2, 3, Input{Op: OpCreateOrGet, Target: w0}, claimOut(c, true)),
	}
	adv := op(8, 10, 11, Input{Op: OpAdvance, D: 150}, Output{})
	hold := op(1, 4, 5, Input{Op: OpHold, Rev: 2}, Output{})
	unhold := op(1, 6, 7, Input{Op: OpUnhold}, Output{})
	check := func(p Params, ops ...porcupine.Operation) bool {
		return porcupine.CheckOperations(NewModel(p), append(append([]porcupine.Operation(nil), base...), ops...))
	}
	assert.True(t, check(p, adv))
	assert.True(t, check(p, hold, unhold, adv))
	assert.False(t, check(p, hold, adv), "held claim expired")
	assert.True(t, check(Params{TTL: 100}, hold, adv), "the store alone expires it")
}

// TestCheckEventsRejects: a stream not beginning with a Reset, and a read
// of a revision after its Delete was delivered, are flagged.
func TestCheckEventsRejects(t *testing.T) {
	c5 := Claim{Rev: 5, T: Tgt{W: 0, R: -1}, Gen: 1, St: StBound}
	h := []porcupine.Operation{op(1, 50, 60, Input{Op: OpGet}, claimOut(c5, false))}
	reset := Received{At: 1, Event: claims.Event{Kind: claims.Reset}}
	del := func(at int64) Received {
		return Received{At: at, Event: claims.Event{Kind: claims.Delete, Key: "s0", Rev: 5}}
	}
	assert.Empty(t, CheckEvents(h, [][]Received{{reset, del(55)}}))
	assert.Len(t, CheckEvents(h, [][]Received{{reset}, {reset, del(45)}}), 1)
	assert.Len(t, CheckEvents(nil, [][]Received{{del(45)}}), 1)
}
