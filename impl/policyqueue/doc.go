// Package policyqueue is a bounded admission queue for a router: requests
// wait here for a slot on a worker. A request that must go to one target
// (a hard binding, a pin) waits in that target's exact lane; the rest wait
// in one shared lane and may go to any of their candidate workers. Each
// worker has a capacity (slots in flight). It plays the part of Dynamo's
// PolicyQueue (worker and data-parallel-rank lanes, recheck_all_workers
// after capacity or eligibility changes, driven by a simulation host on
// simulated time), but its ordering rules are its own, written down below
// as a contract.
//
// It imports only the standard library, the core (impl/placement, for its
// ManualClock) and impl/affinity (for Target).
//
// # Use
//
// A router blocks:
//
//	slot, err := q.Acquire(ctx, policyqueue.Exact(pin)) // or Shared(cands...)
//	if errors.Is(err, policyqueue.ErrQueueFull) { ... 503, Retry-After ... }
//	if err != nil { ... ErrCancelled (ctx ended), ErrClosed ... }
//	defer slot.Release()
//	forward(slot.Target())
//
// A simulation host drives the non-blocking core on its own time: Enqueue
// returns a ticket, and every call that can admit returns the slots it
// admitted, in order (Enqueue, Slot.Release, Cancel, SetCapacity,
// SetEligible, Recheck, RecheckAll), so the host needs no goroutines.
//
// # The contract
//
// Each rule has its test in contract_test.go, named TestContract_<Name>.
//
//	Name              rule
//	OldestFirst       a pass gives a free slot to the oldest waiting item (the smallest ticket)
//	                  that can use it, whatever its lane: exact lanes never go before an older
//	                  shared item, nor the shared lane before an older exact item
//	FIFOWithinLane    an exact lane is admitted in ticket order; shared items that can use the
//	                  same worker are admitted in ticket order
//	NoLaneStarved     an item waits only while no worker it can use has a free slot at a
//	                  pass over that worker, and is passed over only by older items: each
//	                  release on a worker serves the oldest item that can use it, so the head
//	                  of every lane is served after at most the items older than it
//	CanUse            an exact item can use its target's worker; a shared item can use a
//	                  candidate's worker (any known worker without candidates) that its Allow
//	                  (when set) accepts for that candidate; a worker is usable when it is
//	                  eligible and has fewer slots in flight than its capacity
//	Capacity          a worker never has more slots in flight than its capacity at admission;
//	                  lowering the capacity revokes nothing; a worker the queue does not know
//	                  has capacity 0 (an exact item for it waits until SetCapacity)
//	Targets           an exact slot's target is the item's target: a ranked target that rank,
//	                  a worker-only target any rank (affinity.WorkerOnly); every target of a
//	                  worker shares the worker's capacity; a shared item goes to its first
//	                  usable candidate in its own order, or (no candidates) to the first usable
//	                  worker by name, as affinity.WorkerOnly
//	Passes            admission happens only in passes: Enqueue over the workers its item
//	                  names (every worker for a shared item without candidates), Slot.Release
//	                  and a Cancel of an admitted item over the slot's worker, SetCapacity,
//	                  SetEligible and Recheck over their worker, RecheckAll over every worker;
//	                  each returns the slots it admitted in admission order (oldest first).
//	                  A pass repeats until no waiting item can use a free worker of its scope.
//	                  A change of an Allow answer is seen only by a pass over the worker, so
//	                  call Recheck or RecheckAll after one
//	Eligibility       an ineligible worker is given no slot: its exact lanes wait, shared items
//	                  go to other candidates; SetEligible(true) admits at once
//	Bounded           an Enqueue whose item would wait is refused with *FullError
//	                  (ErrQueueFull) when MaxQueued items wait, or MaxPerLane wait in its lane;
//	                  an item admitted at once is never refused; a refused item takes no ticket
//	Tickets           tickets are 1, 2, 3, ... in acceptance order (a ticket is an item's age)
//	Cancel            Cancel of a waiting item removes it (CancelWaiting; its Wait returns
//	                  ErrCancelled); of an admitted one releases its slot exactly once
//	                  (CancelAdmitted; the slot's Release then does nothing) and admits as a
//	                  release does; of an unknown or ended ticket does nothing (CancelNone)
//	ReleaseOnce       Slot.Release is idempotent: the second does nothing and returns nil
//	Wait              Wait (and Acquire) blocks until the item is admitted and returns its slot
//	                  (at once, whatever the context, when it already was);
//	                  a cancelled ticket gives ErrCancelled; an ended context cancels the
//	                  ticket (releasing a slot granted at that moment) and returns an error
//	                  matching ErrCancelled and the context's cause; an unknown ticket gives
//	                  ErrUnknownTicket
//	Close             Close ends every waiting item (Wait returns ErrClosed), then Enqueue,
//	                  SetCapacity and SetEligible return ErrClosed; slots in flight still
//	                  release; nothing is admitted after Close
//	Deterministic     the same calls in the same order give the same tickets, admissions and
//	                  targets (no map order, no time, no randomness in decisions); wait times
//	                  come from Config.Clock (a placement.ManualClock) when set
//	Stats             Stats counts, by lane kind, items enqueued, admitted (with total and
//	                  longest wait), cancelled while waiting, refused as full, ended by Close,
//	                  and waiting now; slots in flight, released, and cancelled after admission
//	InvalidInput      bad input (an empty worker, a negative rank or capacity, a shared item
//	                  with a Target, an exact item with Candidates or Allow, a negative Config
//	                  bound) is a typed error, never a panic
//
// Why oldest first across lanes, and not lane by lane in turn: a turn
// order (round robin over lanes) lets a lane with one old item wait behind
// every other lane's newest; the ticket order bounds every item's wait by
// the items older than it, and needs no per-lane state. A shared item is
// not stuck behind an older shared item that cannot use the freed worker
// (no head-of-line blocking in the shared lane); within an exact lane all
// items want the same worker, so its order is plain FIFO.
//
// # Cost
//
// A pass looks at the heads of the exact lanes of its workers and walks
// the shared lane up to the oldest candidate found, asking each shared
// item's candidates: O(lanes + shared items x candidates) per admission,
// under one mutex, and it stops at once when no worker of its scope has a
// free slot (the usual end of a release's pass). The bounds (MaxQueued)
// keep it small. BenchmarkEnqueueRelease and BenchmarkReleaseHandOff
// (bench_test.go) measure the fast path and a hand-off 256 items deep.
//
// # Concurrency
//
// Every call is atomic under the queue's mutex, so the queue is
// linearizable with respect to a sequential model of these rules:
// linearizability/queuelin checks that with Porcupine, each call recorded
// with the slots it admitted. Wait's linearization point is when it reads
// the ticket admitted (or ended).
package policyqueue
