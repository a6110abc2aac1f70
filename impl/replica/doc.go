// Package replica is the replicated coordinator: one router replica's
// placement, a local core (impl/placement) in front of a claims.Store that
// every replica shares (docs/claims.md; the protocol is
// spec/tla/Claims.tla).
//
// A request's life is Start → (send to Turn.Target) → Turn.Complete →
// Turn.Done:
//
//   - The hot path is local. A later turn of a session this replica holds
//     (its local binding, whose claim the replica has not seen end) is a
//     cached hit: no store round trip.
//   - A first turn resolves the session's claim before its first dispatch
//     through Store.CreateOrGet (first writer wins: a claim another
//     replica wrote is adopted, and the proposal is not even asked for).
//     Concurrent first turns of one session on one replica make one round
//     trip (the core makes the others wait for the first; the store call
//     itself is shared through singleflight).
//   - Accepted binds the session locally and the replica Holds the claim
//     in the store; DefinitelyNotAccepted closes the refused claim (fenced
//     by its revision) and retries on a target not tried (ErrRetry);
//     Ambiguous quarantines the claim in the store, so every replica
//     refuses the session (*QuarantinedError) until Coordinator.Resolve
//     settles it or the worker's generation moves on. Two replicas'
//     attempts under one revision may both be ambiguous: the store holds
//     one quarantine, and the second (refused as moved) is written once
//     the first is settled and the claim is bound again to the same
//     target and generation; if the claim ended instead, the store cannot
//     hold it: it stays quarantined on its replica alone, counted
//     (Stats.QuarantinesUnrecorded).
//   - The store's Delete events evict the cached revision they end, and a
//     Reset evicts every cached claim (requests in flight finish; the next
//     turn reads the claim again). After a Reset (the store came back, or
//     events were lost) the replica holds again every claim it has
//     requests in flight on, by the revision they are on
//     (claims.HoldLineage: any revision of the claim's lineage, which
//     other replicas may have rewritten meanwhile; the spec's Reconnect),
//     so that no close elsewhere deletes the claim under them; a lineage
//     that ended lets them finish unheld. A hold that failed is retried
//     the same way.
//   - The Delete events and Resets that reach a cached quarantine while
//     this replica's own write of the key is in flight (Quarantine,
//     Resolve) wait for it and are applied, to whatever record is current
//     then, when it returns: none is dropped. Any other cached record (a
//     binding, a claim read) is evicted at once.
//   - Coordinator.Resolve(accepted) of this replica's own quarantine that
//     the store has not recorded binds the session again only after the
//     store confirmed its revision current (a Hold fenced by it);
//     otherwise the next turn reads the claim. A quarantine write that
//     lands after Resolve settled its attempt here is followed by the
//     store's Resolve with the same outcome (Stats.LateQuarantinesResolved),
//     so that no replica refuses the session for a quarantine already
//     settled.
//   - A store write whose reply was lost (an unavailable error or a
//     deadline: the write may or may not have been applied) is settled by
//     reading the store (Store.Get), as the project settles an ambiguous
//     dispatch, never assumed either way. A Quarantine is the store's when
//     the claim read is quarantined with its attempt (attempt ids are
//     unique): Resolve then settles it in the store; when the read fails
//     too, the quarantine is settled locally, and the queued retry reads
//     again once the store answers (a quarantine that landed is then
//     resolved there with the same outcome). A Resolve is judged by the
//     quarantine's end (its lineage bound again at its generation, or
//     gone): one that applied returns nil, and one whose read failed too
//     returns its unavailable error and is remembered, so that its retry,
//     fenced by its own first try, succeeds. A Close is counted by the
//     claim read (gone: deleted; Closing in its lineage: deferred; its
//     revision still current: retried, reading first). Hold, Unhold and
//     Touch are idempotent and retried; a Hold that may have landed is
//     given up when its record ends, as one that did. A CreateOrGet is
//     settled by reading the claim (the turn dispatches under the claim
//     found, adopted; none: the session is placed unclaimed).
//   - Coordinator.Resolve of a quarantine whose worker re-registered or
//     left (the store's claims.FencedError.Stale) drops the local
//     quarantine and returns ErrQuarantineOver: the next turn replaces
//     the stale claim.
//   - A session's final request (Done(true)) closes its claim when this
//     replica's last local lease on the session ends (counted across
//     every cached record of the key: a Reset can leave an evicted copy
//     with leases next to the claim read again), fenced by the revision
//     the replica holds: a stale revision deletes nothing, and with
//     another replica holding the claim it only becomes Closing (the last
//     Unhold deletes it). The replica's hold is given up likewise only
//     when no lease on the session remains. A lease taken on a record
//     whose Hold has not been confirmed (in flight, failed, or rewritten
//     in its lineage meanwhile) is queued to be held by its lineage, and
//     a Reset re-holds every record with leases, evicted or not.
//   - Generations come from the store's registrations (Members): a worker
//     whose registration revision moves is fenced in the local core, and
//     its cached claims are evicted. Attempt ids start at
//     claims.FirstAttempt(ReplicaID), unique across replicas.
//   - While the store is unreachable a replica keeps serving its cached
//     sessions, places new sessions locally (unclaimed, counted), and when
//     the store is back reconciles each of them through CreateOrGet
//     proposing its local target: first writer wins, and a session whose
//     claim another replica wrote meanwhile follows that claim at its next
//     turn (Stats.ReconcilesLost).
//   - The replica's idle TTL is the store's (claims.Store.IdleTTL) unless
//     Config.IdleTTL sets a shorter one; a longer one is refused at New
//     (a *ConfigError), since its keepalive would let claims in use expire.
//   - A keepalive goroutine touches every claim held with local leases at
//     least every TouchInterval (IdleTTL/3 by default), and each claim used
//     since its last pass once more (one rewritten elsewhere while
//     requests are in flight here, by the revision they are on: Touch
//     accepts any revision of the lineage), so a claim expires only
//     IdleTTL after its last use on any replica (an evicted record with
//     requests in flight is touched by its revision until a touch finds
//     its lineage ended); it also gives up the
//     holds of entries that ended locally, holds again the claims queued
//     for it (HoldLineage), and retries the writes that found the store
//     down. A pass's store calls run in parallel across keys (up to 64 at
//     once, each key's in order), so a slow store that still answers
//     keeps every claim in use alive; Stats.KeepalivePass and
//     Stats.OldestTouch report the lag.
//   - A cached hit can be sent elsewhere with Turn.Move (the spec's Move: a
//     soft binding that follows its dispatch, a refused later turn, a
//     failed worker): the claim is rewritten from the revision the hit is
//     on (claims.Store.Move: a new lineage, fenced by that revision, so the
//     first of concurrent moves on any replicas wins and the loser learns
//     the winner's claim from the refusal), and the turn becomes a placing
//     dispatch under the new claim. The mover evicts its own cache of the
//     old revision at once; every other replica evicts it at its Delete
//     event (or a touch that finds the lineage ended) and follows the new
//     claim at its next turn. A claim quarantined or closing is never
//     moved: its revision moved on, and the move is refused. A Move whose
//     reply was lost is settled by reading the claim.
//   - One session's requests on one replica can be on several cached
//     records of its claim (a copy read again, the binding before a move
//     or a refusal). A final request's close waits only for the leases of
//     the same binding: leases on a lineage that ended (a move, a new
//     claim) or on a binding a refused later turn ended keep nothing, as
//     the core's Close does not wait for leases on an invalidated version.
//     A refused claim revision is remembered until it ends (its slot is
//     kept), whether the refused turn hit it or adopted it, so later turns
//     read it as no binding and move it. The placer's lease is counted
//     before its commit is visible to hits, and a binding whose last lease
//     ended takes no hit before its close: no close deletes a claim under
//     a request. A turn that reads a claim this replica is closing waits
//     for the close (ClosingError if it has not landed), and one that
//     adopted the claim as the old copy's last lease ended joins the
//     binding (its own last lease closes it). A write whose reply was lost
//     does not mark the store down (its settling read, or any read, does).
//
// A Turn is a handle (a pointer and a generation) on turn state from a
// sync.Pool, so that a cached turn allocates nothing: Done returns the
// state to the pool and bumps its generation, and the old handle is inert
// (ErrTurnState, zero values, Done a no-op), never another request's turn.
// Read what a turn says (Target, Rev, ...) before its Done. A slot keeps
// its leased records in a slice (one, two after a Reset), not a map. Both
// are representation changes: no step of spec/tla/Claims.tla moves.
//
// Stats reports what a replica did (cached turns, store round trips,
// claims created and adopted, evictions, unclaimed placements, reconciles
// won and lost, closes by result, quarantines written and seen, holds
// and re-holds, moves made and lost).
//
// Broken variants for the bug zoo are compiled in with -tags
// placement_mutants (see mutant_off.go); the TestContract_* tests catch
// each of them.
package replica
