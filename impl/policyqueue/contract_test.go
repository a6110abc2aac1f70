package policyqueue_test

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	"github.com/placementlab/placement/impl/affinity"
	"github.com/placementlab/placement/impl/placement"
	pq "github.com/placementlab/placement/impl/policyqueue"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// waitBound bounds every blocking call in these tests: a Wait that should
// wake does so in microseconds, so one that has not after this long is a
// lost wake-up and fails the test (no test hangs under a broken variant).
const waitBound = 2 * time.Second

// ctxBound is the waiters' own deadline, longer than waitBound: a Wait
// that a broken variant never wakes must still be blocked when the test
// gives up on it (its context's end would wake it and hide the lost
// wake-up).
const ctxBound = 5 * waitBound

var (
	wa = affinity.WorkerOnly("a")
	wb = affinity.WorkerOnly("b")
)

func newQ(t *testing.T, cfg pq.Config, caps ...any) *pq.Queue {
	t.Helper()
	q, err := pq.New(cfg)
	require.NoError(t, err)
	for i := 0; i+1 < len(caps); i += 2 {
		_, err := q.SetCapacity(caps[i].(string), caps[i+1].(int))
		require.NoError(t, err)
	}
	return q
}

func enq(t *testing.T, q *pq.Queue, it pq.Item) (pq.Ticket, []*pq.Slot) {
	t.Helper()
	tk, adm, err := q.Enqueue(it)
	require.NoError(t, err)
	return tk, adm
}

func tickets(s []*pq.Slot) []pq.Ticket {
	out := []pq.Ticket{}
	for _, x := range s {
		out = append(out, x.Ticket())
	}
	return out
}

// waitParked waits until a Wait has parked on tk.
func waitParked(t *testing.T, q *pq.Queue, tk pq.Ticket) {
	t.Helper()
	deadline := time.Now().Add(waitBound)
	for !pq.WaitParked(q, tk) {
		require.False(t, time.Now().After(deadline), "Wait(%d) never parked", tk)
		time.Sleep(50 * time.Microsecond)
	}
}

type waitResult struct {
	slot *pq.Slot
	err  error
}

func waitAsync(q *pq.Queue, ctx context.Context, tk pq.Ticket) chan waitResult {
	ch := make(chan waitResult, 1)
	go func() {
		s, err := q.Wait(ctx, tk)
		ch <- waitResult{s, err}
	}()
	return ch
}

func recv(t *testing.T, ch chan waitResult) waitResult {
	t.Helper()
	select {
	case r := <-ch:
		return r
	case <-time.After(waitBound):
		t.Fatalf("Wait did not return within %v: lost wake-up", waitBound)
		return waitResult{}
	}
}

func inflight(q *pq.Queue, w string) int {
	for _, s := range q.Workers() {
		if s.Worker == w {
			return s.InFlight
		}
	}
	return -1
}

// OldestFirst: a freed slot goes to the oldest item that can use it,
// across the exact lanes and the shared lane.
func TestContract_OldestFirst(t *testing.T) {
	q := newQ(t, pq.Config{}, "a", 1)
	t1, adm := enq(t, q, pq.Exact(wa))
	require.Equal(t, []pq.Ticket{t1}, tickets(adm))
	t2, _ := enq(t, q, pq.Shared(wa))                     // shared, older
	t3, _ := enq(t, q, pq.Exact(wa))                      // exact
	t4, _ := enq(t, q, pq.Shared())                       // shared, any worker
	t5, _ := enq(t, q, pq.Exact(affinity.Ranked("a", 0))) // another exact lane
	slot := adm[0]
	for _, want := range []pq.Ticket{t2, t3, t4, t5} {
		got := slot.Release()
		require.Equal(t, []pq.Ticket{want}, tickets(got), "the oldest item that can use a's slot")
		slot = got[0]
	}
	assert.Equal(t, 0, q.Len())
}

// FIFOWithinLane: an exact lane in ticket order; shared items that can
// use the same worker in ticket order, and a shared item is not stuck
// behind an older one that cannot use the freed worker.
func TestContract_FIFOWithinLane(t *testing.T) {
	q := newQ(t, pq.Config{}, "a", 0, "b", 0)
	var lane, shared []pq.Ticket
	for i := 0; i < 4; i++ {
		tk, _ := enq(t, q, pq.Exact(affinity.Ranked("a", 1)))
		lane = append(lane, tk)
	}
	onlyB, _ := enq(t, q, pq.Shared(wb)) // cannot use a
	for i := 0; i < 3; i++ {
		tk, _ := enq(t, q, pq.Shared(wb, wa))
		shared = append(shared, tk)
	}
	adm, err := q.SetCapacity("a", 7)
	require.NoError(t, err)
	assert.Equal(t, append(append([]pq.Ticket{}, lane...), shared...), tickets(adm),
		"the lane in order, then the shared items that can use a, passing the one that cannot")
	adm, err = q.SetCapacity("b", 1)
	require.NoError(t, err)
	assert.Equal(t, []pq.Ticket{onlyB}, tickets(adm))
}

// NoLaneStarved: under a flood into every lane, each release serves the
// oldest item that can use the worker, so admissions come in ticket order
// and every lane is served.
func TestContract_NoLaneStarved(t *testing.T) {
	q := newQ(t, pq.Config{}, "a", 1)
	items := []pq.Item{pq.Exact(affinity.Ranked("a", 0)), pq.Exact(affinity.Ranked("a", 1)), pq.Exact(wa), pq.Shared(), pq.Shared(wa)}
	_, adm := enq(t, q, items[0])
	slot := adm[0]
	var order []pq.Ticket
	lanes := map[pq.Ticket]int{}
	served := make([]int, len(items))
	for round := 0; round < 60; round++ {
		for i, it := range items {
			tk, _ := enq(t, q, it)
			lanes[tk] = i
		}
		got := slot.Release()
		require.Len(t, got, 1)
		slot = got[0]
		order = append(order, slot.Ticket())
		served[lanes[slot.Ticket()]]++
	}
	for i := 1; i < len(order); i++ {
		require.Less(t, order[i-1], order[i], "admissions in ticket order (oldest first)")
	}
	for i, n := range served {
		assert.GreaterOrEqual(t, n, 10, "lane %d served %d times in 60 releases", i, n)
	}
}

// CanUse: a shared item goes only to a candidate's worker that is known,
// eligible, free and allowed by its Allow.
func TestContract_CanUse(t *testing.T) {
	q := newQ(t, pq.Config{}, "a", 1, "b", 1)
	noA := pq.Shared(wa, wb, affinity.WorkerOnly("ghost"))
	noA.Allow = func(t affinity.Target) bool { return t.Worker != "a" }
	_, adm := enq(t, q, noA)
	require.Len(t, adm, 1)
	assert.Equal(t, wb, adm[0].Target(), "Allow refused a")
	tk, adm := enq(t, q, pq.Shared(affinity.WorkerOnly("ghost"), wb))
	assert.Empty(t, adm, "ghost is unknown (capacity 0) and b is full")
	_, err := q.SetEligible("a", false)
	require.NoError(t, err)
	tk2, adm := enq(t, q, pq.Shared(wa))
	assert.Empty(t, adm, "a is ineligible")
	adm, err = q.SetCapacity("ghost", 1)
	require.NoError(t, err)
	require.Equal(t, []pq.Ticket{tk}, tickets(adm))
	assert.Equal(t, affinity.WorkerOnly("ghost"), adm[0].Target())
	adm, _ = q.SetEligible("a", true)
	assert.Equal(t, []pq.Ticket{tk2}, tickets(adm))
}

// Capacity: at most Capacity slots in flight; lowering revokes nothing.
func TestContract_Capacity(t *testing.T) {
	q := newQ(t, pq.Config{})
	tk, adm := enq(t, q, pq.Exact(wa))
	assert.Empty(t, adm, "an unknown worker has capacity 0")
	adm, _ = q.SetCapacity("a", 2)
	require.Equal(t, []pq.Ticket{tk}, tickets(adm))
	slots := adm
	for i := 0; i < 4; i++ {
		_, adm := enq(t, q, pq.Exact(wa))
		slots = append(slots, adm...)
	}
	require.Len(t, slots, 2)
	adm, _ = q.SetCapacity("a", 3)
	require.Len(t, adm, 1)
	slots = append(slots, adm...)
	assert.Equal(t, 3, inflight(q, "a"))
	adm, _ = q.SetCapacity("a", 1)
	assert.Empty(t, adm)
	assert.Equal(t, 3, inflight(q, "a"), "lowering the capacity revokes nothing")
	assert.Empty(t, slots[0].Release())
	assert.Empty(t, slots[1].Release())
	assert.Len(t, slots[2].Release(), 1, "admits again once in flight is below the capacity")
	assert.Equal(t, 1, inflight(q, "a"))
	assert.Equal(t, 1, q.Len())
}

// Targets: an exact slot's target is the item's; ranks share their
// worker's capacity; a shared item goes to its first usable candidate, or
// the first usable worker by name.
func TestContract_Targets(t *testing.T) {
	q := newQ(t, pq.Config{}, "b", 1, "a", 1)
	_, adm := enq(t, q, pq.Exact(affinity.Ranked("a", 3)))
	require.Len(t, adm, 1)
	assert.Equal(t, affinity.Ranked("a", 3), adm[0].Target())
	_, adm2 := enq(t, q, pq.Exact(affinity.Ranked("a", 4)))
	assert.Empty(t, adm2, "every rank of a shares a's one slot")
	adm[0].Release()
	q2 := newQ(t, pq.Config{}, "b", 1, "a", 1)
	_, adm = enq(t, q2, pq.Shared())
	assert.Equal(t, wa, adm[0].Target(), "no candidates: the first worker by name")
	_, adm = enq(t, q2, pq.Shared())
	assert.Equal(t, wb, adm[0].Target())
	q3 := newQ(t, pq.Config{}, "b", 2, "a", 1)
	_, adm = enq(t, q3, pq.Shared(affinity.Ranked("b", 1), wa))
	assert.Equal(t, affinity.Ranked("b", 1), adm[0].Target(), "the item's own order")
	_, adm = enq(t, q3, pq.Exact(wa))
	assert.Equal(t, wa, adm[0].Target(), "a worker-only exact target: any rank of a")
}

// Passes: an Allow change is seen only by a pass over the worker
// (Recheck, RecheckAll, or a call that runs one there), and each pass
// returns its admissions oldest first.
func TestContract_Passes(t *testing.T) {
	q := newQ(t, pq.Config{}, "a", 2, "b", 1)
	allowed := false
	gated := func(cands ...affinity.Target) pq.Item {
		it := pq.Shared(cands...)
		it.Allow = func(affinity.Target) bool { return allowed }
		return it
	}
	t1, adm := enq(t, q, gated(wa))
	t2, _ := enq(t, q, gated(wa))
	t3, _ := enq(t, q, gated(wb))
	assert.Empty(t, adm)
	allowed = true
	_, adm = enq(t, q, pq.Exact(affinity.Ranked("c", 0)))
	assert.Empty(t, adm, "an Enqueue passes over its own item's workers only")
	assert.Equal(t, []pq.Ticket{t1, t2}, tickets(q.Recheck("a")), "Recheck(a) sees the change on a, oldest first")
	assert.Equal(t, 2, q.Len(), "t3 waits for a pass over b (and c/0 for capacity)")
	assert.Equal(t, []pq.Ticket{t3}, tickets(q.RecheckAll()))
	assert.Empty(t, q.RecheckAll())
	assert.Nil(t, q.Recheck("nobody"))
	// A release is a pass over its worker only.
	q4 := newQ(t, pq.Config{}, "a", 1, "b", 1)
	_, sa := enq(t, q4, pq.Exact(wa))
	_, sb := enq(t, q4, pq.Exact(wb))
	gate := false
	it := pq.Shared(wa)
	it.Allow = func(affinity.Target) bool { return gate }
	tw, _ := enq(t, q4, it)
	gate = true
	assert.Empty(t, sb[0].Release(), "a release on b is no pass over a")
	assert.Equal(t, []pq.Ticket{tw}, tickets(sa[0].Release()))
}

// Eligibility: an ineligible worker's exact lanes wait; shared items go
// elsewhere; SetEligible(true) admits at once.
func TestContract_Eligibility(t *testing.T) {
	q := newQ(t, pq.Config{}, "a", 1, "b", 1)
	_, err := q.SetEligible("a", false)
	require.NoError(t, err)
	te, adm := enq(t, q, pq.Exact(wa))
	assert.Empty(t, adm)
	_, adm = enq(t, q, pq.Shared(wa, wb))
	require.Len(t, adm, 1)
	assert.Equal(t, wb, adm[0].Target())
	adm, err = q.SetEligible("a", true)
	require.NoError(t, err)
	assert.Equal(t, []pq.Ticket{te}, tickets(adm))
	_, adm = enq(t, q, pq.Exact(wa))
	assert.Empty(t, adm, "a is full")
	_, err = q.SetEligible("a", false)
	require.NoError(t, err)
	assert.Equal(t, 1, inflight(q, "a"), "slots in flight stay on an ineligible worker")
}

// Bounded: a waiting item is refused at MaxQueued (or MaxPerLane in its
// lane) with *FullError; one admitted at once never is; a refused item
// takes no ticket.
func TestContract_Bounded(t *testing.T) {
	q := newQ(t, pq.Config{MaxQueued: 2}, "a", 0, "b", 1)
	enq(t, q, pq.Exact(wa))
	enq(t, q, pq.Shared(wa))
	_, _, err := q.Enqueue(pq.Exact(wa))
	var full *pq.FullError
	require.ErrorAs(t, err, &full)
	assert.ErrorIs(t, err, pq.ErrQueueFull)
	assert.Equal(t, pq.FullError{Lane: pq.LaneExact, Target: wa, Waiting: 2, Limit: 2}, *full)
	tk, adm, err := q.Enqueue(pq.Shared(wb))
	require.NoError(t, err, "an item admitted at once is never refused")
	assert.Equal(t, []pq.Ticket{3}, tickets(adm))
	assert.Equal(t, pq.Ticket(3), tk, "the refused item took no ticket")

	q2 := newQ(t, pq.Config{MaxPerLane: 1}, "a", 0)
	enq(t, q2, pq.Exact(wa))
	_, _, err = q2.Enqueue(pq.Exact(wa))
	require.ErrorAs(t, err, &full)
	assert.True(t, full.PerLane)
	assert.Contains(t, err.Error(), "exact a")
	enq(t, q2, pq.Exact(affinity.Ranked("a", 0))) // another lane
	enq(t, q2, pq.Shared())
	_, _, err = q2.Enqueue(pq.Shared(wa))
	assert.ErrorIs(t, err, pq.ErrQueueFull)
	assert.Equal(t, uint64(1), q2.Stats().Lanes[pq.LaneShared].Full)
}

// Tickets: 1, 2, 3, ... in acceptance order.
func TestContract_Tickets(t *testing.T) {
	q := newQ(t, pq.Config{}, "a", 1)
	for want := pq.Ticket(1); want <= 5; want++ {
		tk, _ := enq(t, q, pq.Shared())
		assert.Equal(t, want, tk)
	}
}

// Cancel: a waiting item is removed (its Wait returns ErrCancelled); an
// admitted one's slot is released exactly once and admits the next; an
// ended ticket is CancelNone.
func TestContract_Cancel(t *testing.T) {
	q := newQ(t, pq.Config{}, "a", 1)
	t1, adm := enq(t, q, pq.Exact(wa))
	s1 := adm[0]
	t2, _ := enq(t, q, pq.Exact(wa))
	t3, _ := enq(t, q, pq.Exact(wa))
	t4, _ := enq(t, q, pq.Shared(wa))
	ctx, cancel := context.WithTimeout(context.Background(), ctxBound)
	defer cancel()
	ch := waitAsync(q, ctx, t2)
	waitParked(t, q, t2)
	res, adm := q.Cancel(t2)
	assert.Equal(t, pq.CancelWaiting, res)
	assert.Empty(t, adm)
	r := recv(t, ch)
	assert.ErrorIs(t, r.err, pq.ErrCancelled)
	assert.Equal(t, 2, q.Len())

	res, adm = q.Cancel(t1)
	assert.Equal(t, pq.CancelAdmitted, res)
	require.Equal(t, []pq.Ticket{t3}, tickets(adm), "the cancel released t1's slot and admitted the next")
	assert.Empty(t, s1.Release(), "the slot was released by the cancel")
	assert.Equal(t, 1, inflight(q, "a"))
	res, adm = q.Cancel(t1)
	assert.Equal(t, pq.CancelNone, res)
	assert.Empty(t, adm)
	res, _ = q.Cancel(99)
	assert.Equal(t, pq.CancelNone, res)
	res, adm = q.Cancel(t3)
	assert.Equal(t, pq.CancelAdmitted, res)
	assert.Equal(t, []pq.Ticket{t4}, tickets(adm))
	st := q.Stats()
	assert.Equal(t, uint64(2), st.CancelledAdmitted)
	assert.Equal(t, uint64(1), st.Lanes[pq.LaneExact].Cancelled)
	assert.Equal(t, 1, st.InFlight)
}

// ReleaseOnce: a second Release does nothing.
func TestContract_ReleaseOnce(t *testing.T) {
	q := newQ(t, pq.Config{}, "a", 1)
	_, adm := enq(t, q, pq.Exact(wa))
	s := adm[0]
	t2, _ := enq(t, q, pq.Exact(wa))
	enq(t, q, pq.Shared())
	assert.Equal(t, []pq.Ticket{t2}, tickets(s.Release()))
	assert.Nil(t, s.Release(), "the second Release frees nothing")
	assert.Equal(t, 1, inflight(q, "a"))
	assert.Equal(t, 1, q.Len())
	assert.Equal(t, uint64(1), q.Stats().Released)
}

// Wait: blocks until admitted; an ended context cancels the ticket; an
// unknown ticket is ErrUnknownTicket; Acquire is Enqueue and Wait.
func TestContract_Wait(t *testing.T) {
	q := newQ(t, pq.Config{}, "a", 1)
	_, adm := enq(t, q, pq.Exact(wa))
	t2, _ := enq(t, q, pq.Exact(wa))
	ctx, cancel := context.WithTimeout(context.Background(), ctxBound)
	defer cancel()
	ch := waitAsync(q, ctx, t2)
	waitParked(t, q, t2)
	got := adm[0].Release()
	r := recv(t, ch)
	require.NoError(t, r.err)
	assert.Same(t, got[0], r.slot, "Wait returns the slot the release admitted")
	s, err := q.Wait(ctx, t2)
	require.NoError(t, err)
	assert.Same(t, r.slot, s, "a Wait on an admitted ticket returns its slot at once")
	ended, stop := context.WithCancel(context.Background())
	stop()
	s, err = q.Wait(ended, t2)
	require.NoError(t, err, "even when its context has ended")
	assert.Same(t, r.slot, s)
	assert.Equal(t, 1, inflight(q, "a"))

	// An ended context cancels the waiting ticket.
	t3, _ := enq(t, q, pq.Exact(wa))
	cctx, ccancel := context.WithCancelCause(context.Background())
	ch = waitAsync(q, cctx, t3)
	waitParked(t, q, t3)
	cause := errors.New("client went away")
	ccancel(cause)
	r = recv(t, ch)
	assert.ErrorIs(t, r.err, pq.ErrCancelled)
	assert.ErrorIs(t, r.err, cause)
	assert.Equal(t, 0, q.Len())

	// A slot granted as the context ends is either returned or released.
	for i := 0; i < 20; i++ {
		tk, _ := enq(t, q, pq.Exact(wa))
		c2, cancel2 := context.WithCancel(context.Background())
		ch = waitAsync(q, c2, tk)
		waitParked(t, q, tk)
		cancel2()
		s.Release()
		r = recv(t, ch)
		if r.err == nil {
			s = r.slot
			require.Equal(t, 1, inflight(q, "a"))
		} else {
			require.ErrorIs(t, r.err, pq.ErrCancelled)
			require.Equal(t, 0, inflight(q, "a"), "the slot granted to a cancelled Wait is released")
			_, adm := enq(t, q, pq.Exact(wa))
			require.Len(t, adm, 1)
			s = adm[0]
		}
	}

	_, err = q.Wait(ctx, 12345)
	assert.ErrorIs(t, err, pq.ErrUnknownTicket)
	s.Release()
	a, err := q.Acquire(ctx, pq.Shared())
	require.NoError(t, err)
	assert.Equal(t, wa, a.Target())
	go func() {
		time.Sleep(time.Millisecond)
		a.Release()
	}()
	b, err := q.Acquire(ctx, pq.Shared(wa))
	require.NoError(t, err, "Acquire waits for the release")
	b.Release()
}

// Close: waiting items end with ErrClosed; later calls are refused; slots
// in flight still release and admit nothing.
func TestContract_Close(t *testing.T) {
	q := newQ(t, pq.Config{}, "a", 1)
	_, adm := enq(t, q, pq.Exact(wa))
	ctx, cancel := context.WithTimeout(context.Background(), ctxBound)
	defer cancel()
	var chans []chan waitResult
	for i := 0; i < 3; i++ {
		tk, _ := enq(t, q, pq.Shared())
		chans = append(chans, waitAsync(q, ctx, tk))
		waitParked(t, q, tk)
	}
	require.NoError(t, q.Close())
	for _, ch := range chans {
		r := recv(t, ch)
		require.ErrorIs(t, r.err, pq.ErrClosed, "Close wakes every waiter with ErrClosed")
	}
	require.NoError(t, q.Close())
	_, _, err := q.Enqueue(pq.Shared())
	assert.ErrorIs(t, err, pq.ErrClosed)
	_, err = q.SetCapacity("a", 5)
	assert.ErrorIs(t, err, pq.ErrClosed)
	_, err = q.SetEligible("a", true)
	assert.ErrorIs(t, err, pq.ErrClosed)
	_, err = q.Acquire(ctx, pq.Shared())
	assert.ErrorIs(t, err, pq.ErrClosed)
	assert.Empty(t, adm[0].Release())
	assert.Equal(t, 0, inflight(q, "a"))
	assert.Equal(t, uint64(3), q.Stats().Lanes[pq.LaneShared].Closed)
}

// Deterministic: the same calls give the same tickets, admissions and
// targets; waits come from the manual clock.
func TestContract_Deterministic(t *testing.T) {
	script := func(seed uint64) string {
		clock := placement.NewManualClock(0)
		q := newQ(t, pq.Config{MaxQueued: 8, MaxPerLane: 3, Clock: clock})
		rng := rand.New(rand.NewPCG(seed, 1))
		var log strings.Builder
		var held []*pq.Slot
		note := func(op string, adm []*pq.Slot) {
			fmt.Fprintf(&log, "%s:", op)
			for _, s := range adm {
				fmt.Fprintf(&log, " %d@%s/%v", s.Ticket(), s.Target(), s.Waited())
				held = append(held, s)
			}
			log.WriteString("\n")
		}
		names := []string{"c", "a", "b"}
		for i := 0; i < 300; i++ {
			require.NoError(t, clock.AdvanceBy(time.Duration(rng.IntN(5))*time.Millisecond))
			w := names[rng.IntN(3)]
			switch j := rng.IntN(10); {
			case j < 4:
				var it pq.Item
				switch rng.IntN(3) {
				case 0:
					it = pq.Exact(affinity.Ranked(w, rng.IntN(2)))
				case 1:
					it = pq.Shared(affinity.WorkerOnly(w), affinity.WorkerOnly(names[rng.IntN(3)]))
				}
				tk, adm, err := q.Enqueue(it)
				note(fmt.Sprintf("enqueue %d %v", tk, err), adm)
			case j < 7 && len(held) > 0:
				k := rng.IntN(len(held))
				s := held[k]
				held = append(held[:k], held[k+1:]...)
				note("release", s.Release())
			case j == 7:
				res, adm := q.Cancel(pq.Ticket(1 + rng.IntN(i+1)))
				note("cancel "+res.String(), adm)
			case j == 8:
				adm, _ := q.SetCapacity(w, rng.IntN(3))
				note("capacity", adm)
			default:
				note("recheck", q.RecheckAll())
			}
		}
		return log.String()
	}
	a, b := script(7), script(7)
	assert.Equal(t, a, b)
	assert.NotEqual(t, a, script(8))

	clock := placement.NewManualClock(time.Second)
	q := newQ(t, pq.Config{Clock: clock}, "a", 1)
	_, adm := enq(t, q, pq.Exact(wa))
	assert.Zero(t, adm[0].Waited())
	enq(t, q, pq.Exact(wa))
	require.NoError(t, clock.AdvanceBy(1500*time.Millisecond))
	got := adm[0].Release()
	assert.Equal(t, 1500*time.Millisecond, got[0].Waited())
}

// Stats: the counters by lane kind.
func TestContract_Stats(t *testing.T) {
	clock := placement.NewManualClock(0)
	q := newQ(t, pq.Config{MaxQueued: 2, Clock: clock}, "a", 1)
	_, adm := enq(t, q, pq.Exact(wa))
	t2, _ := enq(t, q, pq.Exact(wa))
	enq(t, q, pq.Shared(wa))
	_, _, err := q.Enqueue(pq.Shared())
	require.ErrorIs(t, err, pq.ErrQueueFull)
	require.NoError(t, clock.AdvanceBy(3*time.Second))
	s2 := adm[0].Release()
	q.Cancel(t2) // admitted: released, admits the shared item
	st := q.Stats()
	assert.Equal(t, pq.LaneStats{Enqueued: 2, Admitted: 2, WaitTotal: 3 * time.Second, WaitMax: 3 * time.Second}, st.Lanes[pq.LaneExact])
	assert.Equal(t, pq.LaneStats{Enqueued: 1, Admitted: 1, WaitTotal: 3 * time.Second, WaitMax: 3 * time.Second, Full: 1}, st.Lanes[pq.LaneShared])
	assert.Equal(t, 1, st.InFlight)
	assert.Equal(t, uint64(2), st.Released)
	assert.Equal(t, uint64(1), st.CancelledAdmitted)
	assert.Len(t, s2, 1)
	enq(t, q, pq.Exact(wa))
	assert.Equal(t, 1, q.Stats().Lanes[pq.LaneExact].Waiting)
	assert.Equal(t, []pq.WorkerState{{Worker: "a", Capacity: 1, InFlight: 1, Eligible: true, Waiting: 1}}, q.Workers())
}

// InvalidInput: typed errors, never a panic.
func TestContract_InvalidInput(t *testing.T) {
	_, err := pq.New(pq.Config{MaxQueued: -1})
	var ce *pq.ConfigError
	require.ErrorAs(t, err, &ce)
	assert.Equal(t, "MaxQueued", ce.Field)
	_, err = pq.New(pq.Config{MaxPerLane: -1})
	assert.ErrorIs(t, err, pq.ErrInvalidConfig)
	q := newQ(t, pq.Config{})
	for _, it := range []pq.Item{
		pq.Exact(affinity.Target{}),
		pq.Exact(affinity.Ranked("a", -1)),
		pq.Exact(affinity.Target{Worker: "a", Rank: 2}),
		pq.Exact(affinity.WorkerOnly(strings.Repeat("x", affinity.MaxWorkerIDBytes+1))),
		{Kind: pq.LaneExact, Target: wa, Candidates: []affinity.Target{wa}},
		{Kind: pq.LaneExact, Target: wa, Allow: func(affinity.Target) bool { return true }},
		{Kind: pq.LaneShared, Target: wa},
		pq.Shared(affinity.Target{}),
		{Kind: 7},
	} {
		_, _, err := q.Enqueue(it)
		var ie *pq.ItemError
		assert.ErrorAs(t, err, &ie, "%+v", it)
		_, err = q.Acquire(context.Background(), it)
		assert.ErrorIs(t, err, pq.ErrInvalidItem)
	}
	_, err = q.SetCapacity("", 1)
	assert.ErrorIs(t, err, pq.ErrInvalidArgument)
	_, err = q.SetCapacity("a", -1)
	assert.ErrorIs(t, err, pq.ErrInvalidArgument)
	_, err = q.SetEligible("", true)
	assert.ErrorIs(t, err, pq.ErrInvalidArgument)
	assert.Equal(t, 0, q.Len())
	assert.Equal(t, "exact", pq.LaneExact.String())
	assert.Equal(t, "shared", pq.LaneShared.String())
	assert.Equal(t, "LaneKind(9)", pq.LaneKind(9).String())
	assert.Equal(t, "admitted", pq.CancelAdmitted.String())
	assert.Equal(t, "CancelResult(9)", pq.CancelResult(9).String())
}
