package policyqueue_test

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/placementlab/placement/impl/affinity"
	"github.com/placementlab/placement/impl/placement"
	"github.com/placementlab/placement/impl/policyqueue"
)

// A router blocks in Acquire: a pinned request waits in its target's
// exact lane, the rest in the shared lane; a full queue is a 503.
func Example() {
	q, _ := policyqueue.New(policyqueue.Config{MaxQueued: 1})
	defer q.Close()
	_, _ = q.SetCapacity("w1", 1)
	_, _ = q.SetCapacity("w2", 1)
	ctx := context.Background()

	pinned, _ := q.Acquire(ctx, policyqueue.Exact(affinity.Ranked("w1", 0)))
	fmt.Println("pinned request goes to", pinned.Target())
	other, _ := q.Acquire(ctx, policyqueue.Shared(affinity.WorkerOnly("w1"), affinity.WorkerOnly("w2")))
	fmt.Println("shared request goes to", other.Target())

	done := make(chan *policyqueue.Slot)
	go func() {
		s, _ := q.Acquire(ctx, policyqueue.Shared()) // waits: both workers are full
		done <- s
	}()
	for q.Len() == 0 {
		time.Sleep(time.Millisecond)
	}
	_, err := q.Acquire(ctx, policyqueue.Shared())
	fmt.Println("queue full:", errors.Is(err, policyqueue.ErrQueueFull))
	pinned.Release()
	waited := <-done
	fmt.Println("the waiting request goes to", waited.Target())
	waited.Release()
	other.Release()
	// Output:
	// pinned request goes to w1/0
	// shared request goes to w2
	// queue full: true
	// the waiting request goes to w1
}

// A simulation host drives the non-blocking core on its own clock: every
// call returns the slots it admitted.
func Example_simulation() {
	clock := placement.NewManualClock(0)
	q, _ := policyqueue.New(policyqueue.Config{Clock: clock})
	_, _ = q.SetCapacity("w1", 1)
	t1, admitted, _ := q.Enqueue(policyqueue.Exact(affinity.WorkerOnly("w1")))
	fmt.Println("ticket", t1, "admitted at once:", len(admitted) == 1)
	t2, _, _ := q.Enqueue(policyqueue.Shared())
	fmt.Println("ticket", t2, "waits")
	_ = clock.AdvanceBy(250 * time.Millisecond)
	for _, s := range admitted[0].Release() {
		fmt.Println("ticket", s.Ticket(), "admitted to", s.Target(), "after", s.Waited())
	}
	// Output:
	// ticket 1 admitted at once: true
	// ticket 2 waits
	// ticket 2 admitted to w1 after 250ms
}

// RecheckAll re-examines blocked lanes after a change the queue cannot see,
// here what the items' Allow answers.
func ExampleQueue_RecheckAll() {
	q, _ := policyqueue.New(policyqueue.Config{})
	_, _ = q.SetCapacity("w1", 2)
	healthy := false
	it := policyqueue.Shared()
	it.Allow = func(affinity.Target) bool { return healthy }
	_, admitted, _ := q.Enqueue(it)
	fmt.Println("admitted:", len(admitted))
	healthy = true
	for _, s := range q.RecheckAll() {
		fmt.Println("recheck admitted ticket", s.Ticket(), "to", s.Target())
	}
	// Output:
	// admitted: 0
	// recheck admitted ticket 1 to w1
}

// Cancel removes a waiting item, or releases an admitted one's slot
// exactly once.
func ExampleQueue_Cancel() {
	q, _ := policyqueue.New(policyqueue.Config{})
	_, _ = q.SetCapacity("w1", 1)
	t1, _, _ := q.Enqueue(policyqueue.Shared())
	t2, _, _ := q.Enqueue(policyqueue.Shared())
	t3, _, _ := q.Enqueue(policyqueue.Shared())
	res, _ := q.Cancel(t2)
	fmt.Println(t2, res)
	res, admitted := q.Cancel(t1)
	fmt.Println(t1, res)
	for _, s := range admitted {
		fmt.Println("its slot went to ticket", s.Ticket(), s.Ticket() == t3)
	}
	res, _ = q.Cancel(t1)
	fmt.Println(t1, res)
	// Output:
	// 2 waiting
	// 1 admitted
	// its slot went to ticket 3 true
	// 1 none
}
