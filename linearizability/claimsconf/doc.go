// Package claimsconf ties the claims implementation to its model: a
// rapid state-machine test (its tests; the package has no API) drives
// impl/claims/memstore and model/claims (spec/tla/Claims.tla action for
// action) side by side, step for step, and fails when what both can
// observe differs. linearizability/claimslin checks store histories with a
// Porcupine model of its own; this package checks the store against the
// protocol's model.
//
// # The run
//
// Three replicas (r0, r1, r2), each with its own memstore handle (its
// store session), two sessions (s0, s1), two workers (w0, w1) registered
// through an admin handle that never fails, a manual clock. Each step
// draws one of the model's enabled actions (faults and expiry one step in
// five), applies it to the model (Model.Apply) and performs the store
// calls the replica would make for it, read off the model's pre-state
// (the model's caches and leases stand for the replicas' local state).
//
// # The mapping
//
//   - Claim(r, s, w): CreateOrGet(s) proposing w. created must equal the
//     model's write; the claim returned must be the one the model caches.
//   - Reconcile(r, s): CreateOrGet(s) proposing the unclaimed entry's
//     target, then Hold of the new revision when r has leases on it.
//   - Move(r, s, w): Move(s, cached revision, w) — the model's write
//     must be the store's (a new lineage, Born == Rev), its stutter a
//     *claims.MoveError of the model's kind: ErrNotBound when the
//     cached revision is current but not Bound, ErrClaimMoved otherwise,
//     carrying the model's current claim (none when there is none).
//     Two of three drawn moves are drawn again among the other actions
//     (a move cuts the deeper states short).
//   - Route(r, s), first lease of a connected replica on a Bound entry:
//     Hold(s, rev) — nil when the model holds, ErrClaimMoved when it
//     evicts. Later leases and disconnected routes: no store call.
//   - Release(r, s), last lease, connected: Unhold(s, r).
//   - Ambiguous(r, s): Quarantine(s, lease rev, attempt, claim gen) —
//     written when the model writes, ErrClaimMoved when it stutters.
//   - Resolve(s, a, o): Resolve(s, attempt(a), quarantine gen, o) through
//     the admin handle: written, deleted, or ErrFenced when the model
//     stutters (a *claims.FencedError with Stale when the quarantine's
//     worker re-registered).
//   - Close(r, s): Close(s, lease rev, r) with the model's case as the
//     expected result (Deleted, Deferred, Stale); after Stale, Unhold (the
//     model's Close then gives the hold up). A lease on an unclaimed
//     placement (revision 0) closes nothing.
//   - Expire(s): every other claim is touched, the clock moves to s's
//     deadline, Sweep.
//   - BumpGeneration(w): Register(w) with a new identity.
//   - Disconnect(r)/Reconnect(r): SetUnavailable(r, true/false); at the
//     reconnect the replica re-holds each session it has leases on
//     (claims.HoldLineage by the lease's revision, which holds any
//     revision of the claim's current lineage; ErrClaimMoved accepted)
//     and unholds the others.
//   - Crash(r): Backend.Crash(r), and r reopens a new handle.
//   - PlaceLocal, Receive, Duplicate, Drop: replica-local or watch
//     channel steps, model only.
//
// Revisions are mapped by an order-preserving map: each model revision
// (a counter of claim writes) is bound to the store revision of the write
// that made it, and each new one must exceed every store revision bound
// before. Generations map (worker, model generation) to the registration's
// revision; attempts are named, as in the model, by the revision they were
// dispatched under (the attempt id is that store revision).
//
// After every step, for each session: the claim exists in both or
// neither; state (Bound, Quarantined, Closing), target, generation,
// revision and attempt agree under the maps; the holders are the same
// replicas. Every outcome of every mapped action (hold and moved, each
// Close result, each Resolve result, ...) must occur at least 3 times
// over the run (TestStoreMatchesModel counts them).
//
// # Findings and known drift
//
// F1 (absorbed): the store deletes a Closing claim the moment its last
// hold goes — at a crash (Backend.Crash) or at a reconnect's Unhold. The
// model leaves it Closing with no holder until Expire, enabled right
// then. The harness maps such a step to the model's step followed by
// Expire: a legal model behaviour, counted (Crash/closing-deleted,
// Reconnect/closing-deleted) and pinned by TestScenarios.
//
// D1 (fixed, TestStaleResolveFenced): the model's Resolve of a
// quarantine whose worker's generation moved on changes nothing; the
// store's Resolve was fenced only by the generation passed in (the
// quarantine's, as impl/replica passes it) and settled it. Resolve is now
// also fenced by the worker's current registration (a *FencedError with
// Stale); the main test draws such Resolves (outcome Resolve/stale).
//
// D2 (fixed, TestLineageRehold): the model's Reconnect makes a replica
// with leases on an earlier revision of the claim's lineage (lease rev >=
// born) a holder again. Hold is fenced by the current revision (as the
// model's Route: a turn routed from a cached revision that moved must be
// refused) and a claims.Claim carried no lineage, so no Store call could;
// the replica then had requests in flight without a hold, and another
// replica's Close deleted the claim under them. Claims now carry their
// lineage's first revision (claims.Claim.Born) and claims.HoldLineage
// holds by any revision of the current lineage (a Get and a Hold of the
// current revision, fenced); the harness's Reconnect uses it and the main
// test draws such Reconnects (outcome Reconnect/lineage-rehold).
//
// # Left out
//
// The watch channel (Publish, Receive, Duplicate, Drop) is not compared:
// the model sends a Delete only to replicas caching the revision, the
// store to every subscriber, and the harness opens no event streams (the
// caches are the model's). Idle expiry is the model's abstraction
// (Expire only without holders); the store's TTL and Touch are only used
// to make exactly one claim expire. LoseSession and InjectReset have no
// model action. Store errors (ErrUnavailable) are only reached through
// Disconnect, which the model forbids store calls under. The replicated
// coordinator (impl/replica) is not driven here yet.
//
// Broken variants (TestMutantsCaught): store wrappers whose Close ignores
// the revision, whose Hold ignores it, whose Unhold never ends a Closing
// claim, whose CreateOrGet keeps a stale claim, and whose Move ignores
// the revision; the check must fail
// on each within rapid's default 100 runs. Reproduce any failure with the
// -rapid.seed (or -rapid.failfile) rapid prints.
package claimsconf
