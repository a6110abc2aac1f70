//go:build !placement_mutants

package replica

// mutant reports whether the named deliberately broken variant is active.
// In the production build it is constant false and the compiler removes the
// broken branches; `-tags placement_mutants` builds the bug zoo (see
// mutant_on.go). The variants:
//
//   - UnfencedClose: a terminal close uses the store's current revision,
//     not the one the replica holds (it deletes a newer claim).
//   - NoEvictOnReset: a Reset leaves the cached entries (a replica keeps
//     routing to a claim that ended while its stream lost events).
//   - CloseWhileHeld: a final request closes the claim while other local
//     leases on it remain.
//   - SkipsHold: the replica never tells the store it holds a claim, so
//     another replica's close deletes it under this one's leases.
//   - ExpiresInUse: no keepalive Touch while leases are held (a claim in
//     use expires).
//   - NoRehold: a replica that regains the store (a Reset), or whose hold
//     failed, does not hold again the claims it has requests in flight on
//     (claims.HoldLineage): another replica's close deletes the claim
//     under them (linearizability/claimsconf's finding D2).
//   - LeasesPerRecord: leases are counted per cached record, not per
//     session: after a Reset, the last lease of either copy of a claim
//     closes it (or gives the hold up) under the other's leases
//     (linearizability/claimslin's finding).
//   - ResolveUnchecked: Resolve(accepted) of an own quarantine the store
//     has not recorded binds the session again under its old revision
//     even when the store does not confirm it current.
//   - DropsDeferredDelete: a Delete or Reset that came while a write of
//     the key was in flight is not applied when the write returns.
//   - DefersEveryRecord: while a write of the key is in flight, a Delete
//     waits for it whatever the current record is: a binding cached under
//     the revision the write replaced keeps routing after its Delete came
//     (linearizability/claimslin's routing runs on etcd found it).
//   - ForgetsLateQuarantine: a quarantine write that lands after Resolve
//     settled its attempt locally is left in the store: every replica
//     refuses the session until the claim expires.
//   - DropsLeasedSlot: the keepalive pass drops a key's slot with no
//     current record and no hold even while a record of it has requests
//     in flight: no pass touches their claim again, and it expires under
//     them (linearizability/claimslin's routing runs found it).
//   - IgnoresStoreTTL: a Config left at IdleTTL zero means
//     claims.DefaultIdleTTL whatever the store's, and a longer one than
//     the store's is accepted: the keepalive touches too seldom and
//     claims in use expire in the store (issue 25, item 2).
//   - UnsettledQuarantine: a quarantine write whose reply was lost is
//     taken as not applied (the store is not read): Resolve settles it
//     locally and the store keeps the quarantine, so every replica
//     refuses the session (issue 25, item 1).
//   - UnsettledResolve: a Resolve whose reply was lost is not settled by
//     reading the store: it returns the unavailable error though it
//     applied, and its retry is fenced by its own first try (issue 25,
//     item 5).
//   - UnsettledClose: a terminal close whose reply was lost is retried
//     without reading the store: a close that deleted or deferred the
//     claim is counted as stale (issue 25, item 5).
//   - SerialTouches: the keepalive touches claims one at a time: on a
//     slow store (156 ms a touch) 40 claims in use outlast a 3 s idle
//     TTL and expire (issue 25, item 4).
//   - DropsSecondQuarantine: an own quarantine refused because another
//     attempt under the same revision was quarantined first is dropped
//     from the store's view: once that one is settled, other replicas
//     dispatch while this attempt's outcome is unknown (the claims spec
//     review's finding).
//   - UnsettledHold: a Hold whose reply was lost is taken as not made:
//     when it landed and its record ends, nothing gives it up, and a
//     close deferred on it leaves the claim Closing (issue 25, item 1).
//   - UnsettledCreate: a CreateOrGet whose reply was lost is taken as
//     not applied: the session is placed unclaimed though its claim was
//     written (issue 25, item 1).
//   - UnfencedMove: Turn.Move rewrites the claim from the revision the
//     store has now, not the one the hit is on: the second of two
//     concurrent moves overwrites the first (issue 26, item 3).
//   - UnsettledMove: a Move whose reply was lost is taken as not applied
//     (the store is not read): the turn fails though the claim moved.
//   - ReopensSettled: a quarantine write that found the store unreachable
//     is retried even after Resolve settled its attempt here: the store
//     is quarantined again for an attempt already settled (a settled
//     quarantine re-opened; issue 26, item 7).
//   - KeepsExpiredQuarantine: an own quarantine that the local core's
//     QuarantineTTL ended is left in the store: every other replica
//     refuses the session until the claim's idle TTL.
//
// Found by linearizability/affinitylin's check of the affinity layer over
// a replica (issue 26, item 7), each with its TestGap_ test (gaps26_test.go):
//   - OldLineageKeepsClaim: leases on a binding whose claim moved (a new
//     lineage) still hold the session's claim: its final request on the
//     new binding closes nothing until they end.
//   - AdoptsClosing: a turn reads the claim this replica's close is
//     deleting, and adopts it: its binding vanishes under it.
//   - ClosesEndedBinding: the final request's lease on a binding a
//     refused later turn ended closes the claim, though the session was
//     bound again under the same revision.
//   - DropsRefusedSlot: the keepalive drops the slot that remembers a
//     refused claim: the next turn adopts the refused claim again.
//   - ForgetsAdoptedRefusal: an adopted claim whose dispatch was refused
//     is not remembered as refused.
//   - RefusedLeasesKeepClaim: leases on a binding a refused later turn
//     ended still hold the claim past the session's final request.
//   - WriteLossMeansDown: a write whose reply was lost marks the store
//     down: concurrent turns place their sessions unclaimed.
//   - ClosesUnderAdopter: a closing binding's last lease deletes the claim
//     another request of the session is adopting (it joins the binding).
//   - PlacerLeaseLate: the placer's lease is counted only after the core's
//     commit: a final request that hits in between closes the claim
//     under the placer.
//   - BoundForgetsRefusal: a refusal that ends the binding between the
//     placer's commit and its record's binding is forgotten.
//   - LateEviction: a closing binding's record stays current after its
//     last lease is counted: a hit in between takes a lease on a claim
//     about to be deleted.
//
// Found by the nightly campaign's affinity-replicas check (seed 495649184),
// with its TestGap_ test (stale_test.go):
//   - RefusesStaleClaim: a quarantined or closing claim read (or cached)
//     before its worker left or restarted refuses the session: every
//     later turn is refused with a quarantine that ended.
//
// mutant_test.go checks that each of them fails a contract test.
func mutant(string) bool { return false }
