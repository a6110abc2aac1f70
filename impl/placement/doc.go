// Package placement is the session-placement core for LLM inference routers:
// it binds a session key to a target (a worker and data-parallel rank) so
// that later turns reuse that target's KV/prefix cache, and it owns the
// binding's lifecycle exactly as spec/tla/Placement.tla specifies it.
//
// It imports only the standard library.
//
// # Lifecycle
//
// Acquire returns a Lease on the key's binding (a hit) or a Reservation:
// the caller is the key's one initializer and other requests wait, in line:
// a key that becomes free while requests wait (its initializer cancelled or
// timed out) is handed at once to the one that has waited longest, so no
// waiter is ever overtaken by a newcomer or a later waiter. The
// initializer calls Reservation.BeginDispatch with the chosen target and its
// generation, gets a Dispatch guard with a fresh attempt id, forwards the
// request and reports the outcome with Dispatch.Complete:
//
//   - Accepted commits the binding; the dispatcher holds its first lease.
//   - DefinitelyNotAccepted returns the reservation, to dispatch again or Cancel.
//   - Ambiguous (a timeout, a dropped stream) quarantines the key: Acquire
//     returns an *AmbiguousError (with the attempt, its target and
//     generation) and nothing is dispatched again until a late result from
//     the guard or Coordinator.Resolve, fenced by attempt id and generation,
//     settles it, the target's generation moves on (the binding it could
//     produce would be stale at birth), or QuarantineTTL passes (the
//     operator's bound on how long a possibly-accepted request blocks a
//     replay; EventQuarantineExpired). Coordinator.Quarantined lists them.
//
// A reservation lasts ReserveTimeout from when the key was reserved, across
// DefinitelyNotAccepted retries; each dispatch lasts DispatchTimeout, after
// which it is quarantined (its QuarantineTTL counts from that deadline).
//
// A lease ends with Release (the idle TTL restarts at zero leases), Abandon,
// Invalidate (the binding is bad) or Close (the session's final request: the
// binding goes when its last lease ends). Bindings expire after IdleTTL
// without leases, and are fenced when their target's generation moves on
// (BumpGeneration); an Accepted attempt whose target moved on before its
// commit is reported stale at birth (ErrStaleAtBirth). The table holds at
// most MaxEntries live entries.
//
// A request defers Acquisition.Done right after Acquire: on every path it
// ends what the request still holds (a hit's lease, a reservation never
// dispatched or rolled back, a dispatch in flight, which it quarantines, the
// lease a commit returned) and leaves alone what the request ended itself.
//
// # Spec actions and where they are
//
//	Acquire             Coordinator.Acquire, TryAcquire (tryHit is the hot path); a
//	                    waiter's Acquire happens when the key is handed to it
//	Cancel              Reservation.Cancel (and Done, on a reservation still held)
//	BeginDispatch       Reservation.BeginDispatch (CommitAccepted = BeginDispatch + Complete(Accepted))
//	Complete            Dispatch.Complete (Drop = Complete(Ambiguous) if still in flight; so is Done)
//	Resolve             Coordinator.Resolve
//	Release, Abandon    Lease.Release, Lease.Abandon (Done releases a lease not yet ended)
//	Invalidate, Close   Lease.Invalidate, Lease.Close
//	InvalidateKey       Coordinator.InvalidateKey
//	Expire, DropStale   the reaper's sweep; lazily in Acquire, Query and InvalidateKey;
//	                    a ManualClock's Advance or Reclaim (not Set)
//	QuarantineExpire    lazily on access to the key, and the sweep (so is a DropStale
//	                    of a quarantine)
//	ReservationTimeout  lazily on access, and the sweep (a waiter is handed the key)
//	DispatchTimeout     lazily on access, and the sweep
//	Bump                Coordinator.BumpGeneration
//	Advance             ManualClock.Advance, AdvanceBy, Set, SetBy
//
// # Concurrency
//
// A hit on a live binding and Release take no lock and allocate nothing:
// a lock-free lookup in the coordinator's bounded table (table.go), one
// atomic load for the generation fence and one compare-and-swap each on the
// binding's word (leases, closing and dead flags, and the lease cell that
// makes a session's lease single-use; see entry.go). The entry holds its
// key's bytes and its first binding in one allocation. Every other path
// locks only its key's entry.
//
// Expiry is a change to the binding word: whoever reports or acts on an
// idle binding being past its deadline (a sweep, an Acquire, Query,
// InvalidateKey) first wins the word by marking the binding dead, so a hit
// that read the clock before the deadline passed can no longer take a
// lease on it; a hit that wins the word first keeps the binding alive. So
// a binding reported gone stays gone, with whatever clock: the runtime
// clock moves between reaper ticks without reclaiming anything, as
// ManualClock.Set does. Every deadline an operation sets (a reservation's,
// a dispatch's, a new or released binding's idle deadline) comes from one
// reading of the clock taken during the call, before its change takes
// effect, so a clock update that lands during the call may or may not
// count toward it.
//
// The Observer receives each key's events in the order they happened (see
// Event); operations on one key are linearizable with respect to the model
// (linearizability/ checks it with Porcupine).
package placement
