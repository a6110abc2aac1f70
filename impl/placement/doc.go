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
// request (Dispatch.Context sizes the upstream call to the dispatch's
// deadline) and reports the outcome with Dispatch.Complete, which returns a
// Lease only with a nil error:
//
//   - Accepted commits the binding; the dispatcher holds its first lease.
//   - DefinitelyNotAccepted returns ErrNotAccepted: the reservation is held
//     again, to dispatch again (to another target) or Cancel.
//   - Ambiguous (a timeout, a dropped stream) quarantines the key: Complete
//     and then Acquire return an *AmbiguousError (with the attempt, its target and
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
// # A request
//
// A zero Config is a working configuration (see the Default constants). A
// router's request, with a retry on another worker when one refuses
// (pick chooses an untried worker, for example the one with the fewest
// Bindings; forward sends the request and returns at the worker's first
// answer, with the outcome and a function that relays the rest):
//
//	c, err := placement.New(placement.Config[Worker]{})
//	...
//	a, err := c.Acquire(ctx, session)
//	if err != nil {
//		return err // *AmbiguousError: quarantined; *CapacityError; ...
//	}
//	defer a.Done()
//	if a.Hit() {
//		relay, _ := forward(ctx, a.Lease.Target(), 0) // a later turn: no attempt
//		relay()
//		return nil
//	}
//	for tried := map[Worker]bool{}; ; {
//		w := pick(tried) // return an error when none is left
//		tried[w] = true
//		d, err := a.Reservation.BeginDispatch(w, c.Generation(w))
//		if errors.Is(err, placement.ErrFenced) {
//			continue // w restarted since Generation was read
//		} else if err != nil {
//			return err
//		}
//		dctx, cancel := d.Context(ctx) // ends at the dispatch's deadline unless an outcome came
//		relay, out := forward(dctx, w, d.Attempt())
//		_, err = d.Complete(out) // nil: bound (Done releases the lease)
//		relay()                  // the body streams on under dctx
//		cancel()
//		if !errors.Is(err, placement.ErrNotAccepted) {
//			return err // *AmbiguousError: quarantined; ErrStaleAtBirth: nothing bound
//		}
//	}
//
// The package's examples run it (serve in example_test.go, and
// Example_request on every outcome), with waiters, an ambiguous dispatch
// resolved later, a quarantine's end, and the manual clock.
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
//	Expire, DropStale   the reaper's sweep (so does Stats); lazily in Acquire, Query and
//	                    InvalidateKey; a ManualClock's Advance or Reclaim (not Set)
//	QuarantineExpire    lazily on access to the key, and the sweep (so is a DropStale
//	                    of a quarantine)
//	ReservationTimeout  lazily on access, and the sweep (a waiter is handed the key)
//	DispatchTimeout     lazily on access, and the sweep
//	Bump                Coordinator.BumpGeneration
//	Advance             ManualClock.Advance, AdvanceBy, Set, SetBy; a tick of the
//	                    default coarse clock (as Set: nothing is reclaimed)
//
// # Concurrency
//
// A hit on a live binding and Release take no lock and allocate nothing:
// a lock-free lookup in the coordinator's bounded table (table.go), one
// atomic load for the generation fence, one of the default clock when a
// hit finds the binding idle or a Release leaves it idle (see Time), and
// one compare-and-swap each on the binding's word (leases, closing and
// dead flags, and the lease cell that makes a session's lease single-use;
// see entry.go). The entry holds its
// key's bytes and its first binding in one allocation (see Representation).
// Every other path locks only its key's entry.
//
// Expiry is a change to the binding word: whoever reports or acts on an
// idle binding being past its deadline (a sweep, an Acquire, Query,
// InvalidateKey) first wins the word by marking the binding dead, so a hit
// that read the clock before the deadline passed can no longer take a
// lease on it; a hit that wins the word first keeps the binding alive. So
// a binding reported gone stays gone, with whatever clock: the coarse
// clock's ticks (and the runtime clock, with PreciseClock) move time between
// reaper sweeps without reclaiming anything, as ManualClock.Set does.
// Every deadline an operation sets (a reservation's, a dispatch's, a new
// or released binding's idle deadline) comes from one
// reading of the clock taken during the call, before its change takes
// effect, so a clock update that lands during the call may or may not
// count toward it.
//
// A capacity refusal is judged at one instant of a full table: a
// removal frees its slot a moment after its binding reads as gone (to a
// lease's Close, Current, Query, Bindings, the Observer), so a full table's
// Acquire that finds a removal under way waits for it (briefly: it holds
// one key's lock and never blocks) and looks again, and one that finds a
// generation bump under way sweeps first (the bump may have made an
// entry stale), as it does when a deadline may have passed.
//
// The Observer receives each key's events in the order they happened (see
// Event); operations on one key are linearizable with respect to the model
// (linearizability/ checks it with Porcupine).
//
// # Representation
//
// What the table holds per session, and what a new session allocates, are
// kept small, as representation only (the protocol and its checks are
// unchanged; issue 28 measured each against a bare concurrent map with
// atomics, benchmarks/peers):
//
//   - A bound session is one allocation of 96 bytes (a 16-byte target, a key
//     of up to 16 bytes), plus its 8-byte bucket: the entry with its first
//     binding embedded and its key's bytes just before it, with no string
//     header (its length is enough to find them: see entry). Hits read the
//     key and the entry's first fields and write the binding's last ones,
//     on different cache lines (TestEntryLayout).
//   - A binding points to a generation object shared by every binding to
//     its target at its generation (target, generation, target slot and the
//     count Bindings reads), not to copies of them: the generation fence is
//     still one atomic load of the target's current generation.
//   - What only a key being initialized, quarantined or waited on needs
//     (the reservation, the deadlines, the wait queue, and the dispatch
//     guard of its attempt, whose attempt id, generation and dispatch time
//     never change and are read from it rather than copied) is one pending
//     struct, allocated lazily and dropped when the key binds with nobody
//     waiting.
//   - A new session allocates its entry (96 bytes) and its Reservation (128),
//     which carries the guard of its first dispatch and the key's pending
//     state: a retry's dispatch, a Context's timers and an error are
//     allocated only when they happen (it allocated five objects, 432
//     bytes).
//   - Acquire's slow path starts from what the hot path's lookup found (the
//     key's hash, and its entry or its absence), so a new session hashes
//     and walks its key's chain once; targets are found in a copy-on-write
//     Go map (Generation and BeginDispatch each look their target up once).
//
// # Time
//
// By default (Config.Clock nil) a coordinator reads a coarse monotonic
// clock: the runtime's monotonic time at the last tick of a ticker, read
// with one atomic load, where a precise reading (time.Since) would cost a
// hit and its release two calls into the runtime clock. The tick is
// Config.ClockResolution, DefaultClockResolution (1 ms) unless set. All the
// coordinators of a process share one ticker goroutine: the first New
// starts it, the last Close stops it (Close returns after its goroutine
// has), and it ticks at the finest resolution among the open coordinators:
// one goroutine and one timeline for the process, and a finer tick only
// tightens a coarser coordinator's bounds below. The clock never goes back;
// a coordinator's time (Now) is 0 at its New. In the spec each tick is an
// Advance without reclaiming (ManualClock.Set), and the reaper's sweep is a
// Reclaim. The reaper stays one goroutine per coordinator, at its own
// cadence, apart from the ticker: a sweep takes time in proportion to its
// table, and on the ticker's goroutine it would stop the clock of every
// coordinator of the process while it ran.
//
// Precision: the ticks come at runtime-clock times τ0 < τ1 < ..., each
// setting the clock to its own time, at most g apart, where g is the
// period (at most ClockResolution) plus however late the ticker's
// goroutine runs (microseconds on an idle machine; unbounded under CPU
// starvation, as for every Go timer). An operation at time t, with
// τi <= t < τi+1, reads τi, so it sets a deadline D = τi + d for a
// duration d; what ends at D (an idle binding expiring, a reservation
// timing out, a dispatch timing out into a quarantine, a quarantine
// expiring) reads as ended from the first tick τj >= D on, since every
// check compares D with the clock. With P = t + d, the deadline a
// precise clock would set:
//
//	D  in (P-g, P]      the reading is up to one gap old, never ahead
//	τj in [D, D+g)      it ends at the first tick at or after D
//	τj in (P-g, P+g)    so within one gap of P, early or late
//	τj - τi >= d        and never before d has passed since the tick it read
//
// Relative to the coarse clock itself nothing ends early or late. For a
// quarantine entered by a DispatchTimeout, D is the dispatch's deadline
// plus QuarantineTTL, so it ends within one gap of t + DispatchTimeout +
// QuarantineTTL, t being BeginDispatch's time; after an Ambiguous outcome
// at t, within one gap of t + QuarantineTTL. With the default, every end
// comes within 1 ms of its precise time (plus the ticker's delays), either
// way: up to 1 ms early is the one effect a precise clock does not have,
// against durations of at least one tick (Config requires it; the
// defaults are seconds to minutes). An end is then
// reclaimed lazily, on the key's next access or at the reaper's next
// sweep, as with every clock. PreciseClock reads the runtime clock at
// every reading (g is 0; a deadline comes from a reading within the call,
// as with every clock); a ManualClock is the simulation host's.
package placement
