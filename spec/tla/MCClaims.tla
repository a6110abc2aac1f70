----------------------------- MODULE MCClaims -----------------------------
(***************************************************************************)
(* Model-checking harness for Claims. MCClaims*.cfg check the protocol;    *)
(* each MCClaimsBug*.cfg replaces one action with a deliberately broken    *)
(* variant below (TLC's `Name <- Variant` override) and must be reported   *)
(* as a violation of the property it names; each MCClaimsWitness*.cfg      *)
(* checks one Never* definition below, which the constants must reach.     *)
(* The Go explorer (model/claims) applies the Go variant of the same name. *)
(* No SYMMETRY: the Go explorer counts every state, as TLC must.           *)
(***************************************************************************)
EXTENDS Claims

(* Close is not fenced by revision: a final request closes whatever claim *)
(* the session has now, a newer one included.                              *)
BugUnfencedClose(r, s) ==
    LET l == lease[r][s]
        c == claim[s] IN
    /\ up[r] /\ l.n = 1
    /\ lease' = [lease EXCEPT ![r][s] = NoLease]
    /\ cache' = [cache EXCEPT ![r][s] = NoEntry]
    /\ IF c.st # "None"                                     \* BUG: no c.rev = l.rev
       THEN IF holders[s] \ {r} = {}
            THEN /\ claim' = [claim EXCEPT ![s] = NoClaim]
                 /\ holders' = [holders EXCEPT ![s] = {}]
                 /\ UNCHANGED rev
                 /\ Publish(s, c.rev)
            ELSE /\ rev < MaxRev
                 /\ claim' = [claim EXCEPT ![s] = [c EXCEPT !.st = "Closing", !.rev = rev + 1]]
                 /\ holders' = [holders EXCEPT ![s] = @ \ {r}]
                 /\ rev' = rev + 1
                 /\ Publish(s, c.rev)
       ELSE /\ Unhold(r, s)
            /\ UNCHANGED rev
    /\ UNCHANGED <<gen, up>>

(* Close deletes the claim while other replicas hold it (the anchor        *)
(* router's claims did this).                                              *)
BugCloseWhileHeld(r, s) ==
    LET l == lease[r][s]
        c == claim[s] IN
    /\ up[r] /\ l.n = 1
    /\ lease' = [lease EXCEPT ![r][s] = NoLease]
    /\ cache' = [cache EXCEPT ![r][s] = NoEntry]
    /\ IF c.st # "None" /\ c.rev = l.rev
       THEN /\ claim' = [claim EXCEPT ![s] = NoClaim]        \* BUG: other holders ignored
            /\ holders' = [holders EXCEPT ![s] = {}]
            /\ UNCHANGED rev
            /\ Publish(s, c.rev)
       ELSE /\ Unhold(r, s)
            /\ UNCHANGED rev
    /\ UNCHANGED <<gen, up>>

(* A Reset evicts nothing: the replica keeps routing from claims whose     *)
(* end it never heard of.                                                  *)
BugNoEvictOnReset(r) ==
    /\ chan[r] # <<>>
    /\ LET ev == Head(chan[r]) IN
       cache' = [cache EXCEPT ![r] = [s \in Sessions |->
           IF ev.kind = "Reset"
           THEN cache[r][s]                                   \* BUG: nothing evicted
           ELSE IF s = ev.s /\ cache[r][s].st \in ClaimStates /\ cache[r][s].rev = ev.rev
                THEN NoEntry ELSE cache[r][s]]]
    /\ chan' = [chan EXCEPT ![r] = Tail(@)]
    /\ UNCHANGED <<rev, gen, claim, holders, up, lease>>

(* An idle claim expires even while replicas hold it.                     *)
BugExpireInUse(s) ==
    /\ claim[s].st # "None"                                   \* BUG: holders ignored
    /\ claim' = [claim EXCEPT ![s] = NoClaim]
    /\ holders' = [holders EXCEPT ![s] = {}]
    /\ Publish(s, claim[s].rev)
    /\ UNCHANGED <<rev, gen, up, cache, lease>>

(* The watch loses an event and says nothing (the anchor's watcher could  *)
(* not report reconnects or compaction).                                   *)
BugDropWithoutReset(r) ==
    /\ chan[r] # <<>> /\ Head(chan[r]).kind = "Delete"
    /\ chan' = [chan EXCEPT ![r] = Tail(@)]                   \* BUG: no Reset
    /\ UNCHANGED <<rev, gen, claim, holders, up, cache, lease>>

(* The quarantine is written in place, under the same revision: no        *)
(* Delete tells the other replicas, whose caches still say Bound.          *)
BugQuarantineNotShared(r, s) ==
    LET l == lease[r][s]
        c == claim[s] IN
    /\ up[r] /\ l.n > 0 /\ l.rev # 0
    /\ IF c.st = "Bound" /\ c.rev = l.rev
       THEN /\ claim' = [claim EXCEPT ![s] = [c EXCEPT !.st = "Quarantined", !.attempt = l.rev]]  \* BUG
            /\ cache' = [cache EXCEPT ![r][s] = [st |-> "Quarantined", rev |-> c.rev, target |-> c.target, gen |-> c.gen]]
            /\ UNCHANGED <<rev, chan>>
       ELSE UNCHANGED <<rev, claim, cache, chan>>
    /\ UNCHANGED <<gen, holders, up, lease>>

(* The store-down reconcile writes the local placement over whatever the  *)
(* session's claim is: the last writer wins.                               *)
BugReconcileOverwrites(r, s) ==
    LET e == cache[r][s]
        c == claim[s] IN
    /\ up[r] /\ e.st = "Unclaimed" /\ ~ResetPending(r)
    /\ rev < MaxRev                                            \* BUG: no check of c
    /\ claim' = [claim EXCEPT ![s] = NewClaim(e.target)]
    /\ rev' = rev + 1
    /\ holders' = [holders EXCEPT ![s] = IF lease[r][s].n > 0 THEN {r} ELSE {}]
    /\ cache' = [cache EXCEPT ![r][s] = Entry(NewClaim(e.target))]
    /\ lease' = [lease EXCEPT ![r][s] =
           IF lease[r][s].n > 0 THEN [n |-> lease[r][s].n, rev |-> rev + 1] ELSE NoLease]
    /\ IF c.st = "None" THEN UNCHANGED chan ELSE Publish(s, c.rev)
    /\ UNCHANGED <<gen, up>>

(* CreateOrGet replaces a stale claim in place, under its old revision:   *)
(* replicas that cached that revision disagree with the store on its      *)
(* target.                                                                 *)
BugClaimReplacesInPlace(r, s, w) ==
    LET c == claim[s] IN
    /\ up[r] /\ NeedsClaim(cache[r][s])
    /\ IF c.st = "None"
       THEN /\ rev < MaxRev
            /\ claim' = [claim EXCEPT ![s] = NewClaim(w)]
            /\ rev' = rev + 1
            /\ holders' = [holders EXCEPT ![s] = {}]
            /\ cache' = [cache EXCEPT ![r][s] = Entry(NewClaim(w))]
            /\ UNCHANGED chan
       ELSE IF Stale(c)
       THEN /\ claim' = [claim EXCEPT ![s] = [c EXCEPT !.target = w, !.gen = gen[w]]]  \* BUG
            /\ holders' = [holders EXCEPT ![s] = {}]
            /\ cache' = [cache EXCEPT ![r][s] = [st |-> c.st, rev |-> c.rev, target |-> w, gen |-> gen[w]]]
            /\ UNCHANGED <<rev, chan>>
       ELSE /\ cache' = [cache EXCEPT ![r][s] = Entry(c)]
            /\ UNCHANGED <<rev, claim, holders, chan>>
    /\ UNCHANGED <<gen, up, lease>>

(* A. The first turn's hold is checked against the claim's lineage (its  *)
(* create revision) instead of its current revision: a replica whose      *)
(* cached Bound revision was quarantined meanwhile holds the quarantined  *)
(* claim and dispatches.                                                   *)
BugHoldAgainstLineage(r, s) ==
    LET e == cache[r][s]
        l == lease[r][s] IN
    /\ Routable(e)
    /\ l.n < MaxLeases
    /\ l.n > 0 => l.rev = e.rev
    /\ IF l.n = 0 /\ up[r] /\ e.st = "Bound"
       THEN IF claim[s].st # "None" /\ claim[s].born <= e.rev   \* BUG: not claim[s].rev = e.rev
            THEN /\ holders' = [holders EXCEPT ![s] = @ \cup {r}]
                 /\ lease' = [lease EXCEPT ![r][s] = [n |-> 1, rev |-> e.rev]]
                 /\ UNCHANGED cache
            ELSE /\ cache' = [cache EXCEPT ![r][s] = NoEntry]
                 /\ UNCHANGED <<holders, lease>>
       ELSE /\ lease' = [lease EXCEPT ![r][s] = [n |-> l.n + 1, rev |-> e.rev]]
            /\ UNCHANGED <<holders, cache>>
    /\ UNCHANGED <<rev, gen, claim, up, chan>>

(* B. Resolve settles the quarantine whatever attempt it names.            *)
BugResolveAnyAttempt(s, a, o) ==
    LET c == claim[s] IN
    /\ c.st = "Quarantined"
    /\ IF gen[c.target] = c.gen                                \* BUG: no a = c.attempt
       THEN /\ IF o = "Accepted"
               THEN /\ rev < MaxRev
                    /\ claim' = [claim EXCEPT ![s] = [c EXCEPT !.st = "Bound", !.rev = rev + 1, !.attempt = 0]]
                    /\ rev' = rev + 1
                    /\ UNCHANGED holders
               ELSE /\ claim' = [claim EXCEPT ![s] = NoClaim]
                    /\ holders' = [holders EXCEPT ![s] = {}]
                    /\ UNCHANGED rev
            /\ Publish(s, c.rev)
       ELSE UNCHANGED <<rev, claim, holders, chan>>
    /\ UNCHANGED <<gen, up, cache, lease>>

(* C. An accepted Resolve restarts the lineage: the claim's `born` moves   *)
(* to the new revision, so the requests still in flight on the lineage's  *)
(* earlier revisions are no longer counted on it (a reconnect drops their *)
(* hold, and the claim may expire under them).                            *)
BugResolveRestartsLineage(s, a, o) ==
    LET c == claim[s] IN
    /\ c.st = "Quarantined"
    /\ IF a = c.attempt /\ gen[c.target] = c.gen
       THEN /\ IF o = "Accepted"
               THEN /\ rev < MaxRev
                    /\ claim' = [claim EXCEPT ![s] = [c EXCEPT !.st = "Bound", !.rev = rev + 1, !.born = rev + 1, !.attempt = 0]]  \* BUG: born moved
                    /\ rev' = rev + 1
                    /\ UNCHANGED holders
               ELSE /\ claim' = [claim EXCEPT ![s] = NoClaim]
                    /\ holders' = [holders EXCEPT ![s] = {}]
                    /\ UNCHANGED rev
            /\ Publish(s, c.rev)
       ELSE UNCHANGED <<rev, claim, holders, chan>>
    /\ UNCHANGED <<gen, up, cache, lease>>

(* C. The last lease's release (its final touch) writes a deleted claim   *)
(* back from the replica's cache, as a new lineage: a resurrection.        *)
BugReleaseResurrects(r, s) ==
    LET l == lease[r][s]
        e == cache[r][s] IN
    /\ l.n > 0
    /\ lease' = [lease EXCEPT ![r][s] = IF l.n = 1 THEN NoLease ELSE [n |-> l.n - 1, rev |-> l.rev]]
    /\ IF l.n = 1 /\ up[r]
       THEN IF claim[s].st = "None" /\ e.st = "Bound" /\ rev < MaxRev    \* BUG: writes the claim back
            THEN /\ claim' = [claim EXCEPT ![s] = [st |-> "Bound", rev |-> rev + 1, born |-> rev + 1,
                                                   target |-> e.target, gen |-> e.gen, attempt |-> 0]]
                 /\ rev' = rev + 1
                 /\ UNCHANGED <<holders, chan>>
            ELSE /\ Unhold(r, s)
                 /\ UNCHANGED rev
       ELSE UNCHANGED <<rev, claim, holders, chan>>
    /\ UNCHANGED <<gen, up, cache>>

(* D. Resolve publishes no event: replicas that cached the quarantine     *)
(* keep it after it was settled.                                           *)
BugResolveNoEvent(s, a, o) ==
    LET c == claim[s] IN
    /\ c.st = "Quarantined"
    /\ IF a = c.attempt /\ gen[c.target] = c.gen
       THEN /\ IF o = "Accepted"
               THEN /\ rev < MaxRev
                    /\ claim' = [claim EXCEPT ![s] = [c EXCEPT !.st = "Bound", !.rev = rev + 1, !.attempt = 0]]
                    /\ rev' = rev + 1
                    /\ UNCHANGED holders
               ELSE /\ claim' = [claim EXCEPT ![s] = NoClaim]
                    /\ holders' = [holders EXCEPT ![s] = {}]
                    /\ UNCHANGED rev
            /\ UNCHANGED chan                                  \* BUG: no Publish
       ELSE UNCHANGED <<rev, claim, holders, chan>>
    /\ UNCHANGED <<gen, up, cache, lease>>

(* E. A crash keeps the replica's holds: its store session outlives it.   *)
BugCrashKeepsHolds(r) ==
    /\ cache' = [cache EXCEPT ![r] = [s \in Sessions |-> NoEntry]]
    /\ lease' = [lease EXCEPT ![r] = [s \in Sessions |-> NoLease]]
    /\ chan' = [chan EXCEPT ![r] = <<ResetEv>>]
    /\ up' = [up EXCEPT ![r] = TRUE]
    /\ UNCHANGED <<rev, gen, claim, holders>>                 \* BUG: holders kept

(* F. A replica that reaches the store places a session locally (a         *)
(* timeout taken for unreachability).                                      *)
BugPlaceLocalWhileUp(r, s, w) ==
    /\ NeedsClaim(cache[r][s])                                 \* BUG: no ~up[r]
    /\ cache' = [cache EXCEPT ![r][s] = [st |-> "Unclaimed", rev |-> 0, target |-> w, gen |-> gen[w]]]
    /\ UNCHANGED <<rev, gen, claim, holders, up, lease, chan>>

(* H (three replicas). Any holder's Unhold deletes a Closing claim, not    *)
(* only the last one's: with two replicas the first is always the last.   *)
BugUnholdAnyHolder(r, s) ==
    IF r \in holders[s] /\ claim[s].st = "Closing"            \* BUG: no holders[s] = {r}
    THEN /\ claim' = [claim EXCEPT ![s] = NoClaim]
         /\ holders' = [holders EXCEPT ![s] = {}]
         /\ Publish(s, claim[s].rev)
    ELSE /\ holders' = [holders EXCEPT ![s] = @ \ {r}]
         /\ UNCHANGED <<claim, chan>>

(* H (MaxRev 4). An ambiguous report is fenced by the lineage, not the     *)
(* revision: a late duplicate report of a request dispatched before a     *)
(* settled quarantine quarantines the claim again.                        *)
BugAmbiguousByLineage(r, s) ==
    LET l == lease[r][s]
        c == claim[s] IN
    /\ up[r] /\ l.n > 0 /\ l.rev # 0
    /\ IF c.st = "Bound" /\ l.rev >= c.born                   \* BUG: not c.rev = l.rev
       THEN /\ rev < MaxRev
            /\ claim' = [claim EXCEPT ![s] = [c EXCEPT !.st = "Quarantined", !.rev = rev + 1, !.attempt = l.rev]]
            /\ rev' = rev + 1
            /\ cache' = [cache EXCEPT ![r][s] = [st |-> "Quarantined", rev |-> rev + 1, target |-> c.target, gen |-> c.gen]]
            /\ Publish(s, c.rev)
       ELSE UNCHANGED <<rev, claim, cache, chan>>
    /\ UNCHANGED <<gen, holders, up, lease>>

(* G. The store-down reconcile only adopts a claim another replica wrote: *)
(* with none, the unclaimed placement is never reconciled.                 *)
BugReconcileOnlyAdopts(r, s) ==
    LET e == cache[r][s]
        c == claim[s] IN
    /\ up[r] /\ e.st = "Unclaimed" /\ ~ResetPending(r)
    /\ c.st # "None" /\ ~Stale(c)                            \* BUG: never writes
    /\ cache' = [cache EXCEPT ![r][s] = Entry(c)]
    /\ UNCHANGED <<rev, gen, claim, holders, up, lease, chan>>

(* A. A dispatch to a restarted worker under the old incarnation's claim: *)
(* Route does not check the worker's generation.                          *)
BugRouteIgnoresGeneration(r, s) ==
    LET e == cache[r][s]
        l == lease[r][s] IN
    /\ e.st \in {"Bound", "Unclaimed"}                          \* BUG: no gen[e.target] = e.gen
    /\ l.n < MaxLeases
    /\ l.n > 0 => l.rev = e.rev
    /\ IF l.n = 0 /\ up[r] /\ e.st = "Bound"
       THEN IF claim[s].st # "None" /\ claim[s].rev = e.rev
            THEN /\ holders' = [holders EXCEPT ![s] = @ \cup {r}]
                 /\ lease' = [lease EXCEPT ![r][s] = [n |-> 1, rev |-> e.rev]]
                 /\ UNCHANGED cache
            ELSE /\ cache' = [cache EXCEPT ![r][s] = NoEntry]
                 /\ UNCHANGED <<holders, lease>>
       ELSE /\ lease' = [lease EXCEPT ![r][s] = [n |-> l.n + 1, rev |-> e.rev]]
            /\ UNCHANGED <<holders, cache>>
    /\ UNCHANGED <<rev, gen, claim, up, chan>>

(* A. A dispatch from a cached quarantine: Route takes a Quarantined entry *)
(* for a routable one.                                                     *)
BugRouteFromQuarantine(r, s) ==
    LET e == cache[r][s]
        l == lease[r][s] IN
    /\ e.st \in {"Bound", "Unclaimed", "Quarantined"} /\ gen[e.target] = e.gen   \* BUG: Quarantined
    /\ l.n < MaxLeases
    /\ l.n > 0 => l.rev = e.rev
    /\ IF l.n = 0 /\ up[r] /\ e.st = "Bound"
       THEN IF claim[s].st # "None" /\ claim[s].rev = e.rev
            THEN /\ holders' = [holders EXCEPT ![s] = @ \cup {r}]
                 /\ lease' = [lease EXCEPT ![r][s] = [n |-> 1, rev |-> e.rev]]
                 /\ UNCHANGED cache
            ELSE /\ cache' = [cache EXCEPT ![r][s] = NoEntry]
                 /\ UNCHANGED <<holders, lease>>
       ELSE /\ lease' = [lease EXCEPT ![r][s] = [n |-> l.n + 1, rev |-> e.rev]]
            /\ UNCHANGED <<holders, cache>>
    /\ UNCHANGED <<rev, gen, claim, up, chan>>

(* B. A first turn re-binds a quarantined claim to the same worker: the    *)
(* quarantine is lifted with no settle.                                    *)
BugClaimLiftsQuarantine(r, s, w) ==
    LET c == claim[s] IN
    /\ up[r] /\ NeedsClaim(cache[r][s])
    /\ IF c.st = "None" \/ Stale(c) \/ (c.st = "Quarantined" /\ w = c.target)   \* BUG
       THEN /\ rev < MaxRev
            /\ claim' = [claim EXCEPT ![s] = NewClaim(w)]
            /\ rev' = rev + 1
            /\ holders' = [holders EXCEPT ![s] = {}]
            /\ cache' = [cache EXCEPT ![r][s] = Entry(NewClaim(w))]
            /\ IF c.st = "None" THEN UNCHANGED chan ELSE Publish(s, c.rev)
       ELSE /\ cache' = [cache EXCEPT ![r][s] = Entry(c)]
            /\ UNCHANGED <<rev, claim, holders, chan>>
    /\ UNCHANGED <<gen, up, lease>>

(* D. A Reset keeps cached quarantines (as it keeps unclaimed placements). *)
BugResetKeepsQuarantines(r) ==
    /\ chan[r] # <<>>
    /\ LET ev == Head(chan[r]) IN
       cache' = [cache EXCEPT ![r] = [s \in Sessions |->
           IF ev.kind = "Reset"
           THEN IF cache[r][s].st \in {"Unclaimed", "Quarantined"} THEN cache[r][s] ELSE NoEntry   \* BUG
           ELSE IF s = ev.s /\ cache[r][s].st \in ClaimStates /\ cache[r][s].rev = ev.rev
                THEN NoEntry ELSE cache[r][s]]]
    /\ chan' = [chan EXCEPT ![r] = Tail(@)]
    /\ UNCHANGED <<rev, gen, claim, holders, up, lease>>

(* D. A deferred close writes the claim Closing in place, under the same   *)
(* revision: no Delete tells the other holders, whose caches say Bound.    *)
BugClosingInPlace(r, s) ==
    LET l == lease[r][s]
        c == claim[s] IN
    /\ up[r] /\ l.n = 1
    /\ lease' = [lease EXCEPT ![r][s] = NoLease]
    /\ cache' = [cache EXCEPT ![r][s] = NoEntry]
    /\ IF c.st # "None" /\ c.rev = l.rev
       THEN IF holders[s] \ {r} = {}
            THEN /\ claim' = [claim EXCEPT ![s] = NoClaim]
                 /\ holders' = [holders EXCEPT ![s] = {}]
                 /\ UNCHANGED rev
                 /\ Publish(s, c.rev)
            ELSE /\ claim' = [claim EXCEPT ![s] = [c EXCEPT !.st = "Closing"]]   \* BUG: same revision
                 /\ holders' = [holders EXCEPT ![s] = @ \ {r}]
                 /\ UNCHANGED <<rev, chan>>
       ELSE /\ Unhold(r, s)
            /\ UNCHANGED rev
    /\ UNCHANGED <<gen, up>>

(* F/G. The store-down reconcile that loses keeps the local placement (and *)
(* goes on serving it) instead of adopting the claim.                      *)
BugReconcileKeepsUnclaimed(r, s) ==
    LET e == cache[r][s]
        c == claim[s] IN
    /\ up[r] /\ e.st = "Unclaimed" /\ ~ResetPending(r)
    /\ IF c.st = "None" \/ Stale(c)
       THEN /\ rev < MaxRev
            /\ claim' = [claim EXCEPT ![s] = NewClaim(e.target)]
            /\ rev' = rev + 1
            /\ holders' = [holders EXCEPT ![s] = IF lease[r][s].n > 0 THEN {r} ELSE {}]
            /\ cache' = [cache EXCEPT ![r][s] = Entry(NewClaim(e.target))]
            /\ lease' = [lease EXCEPT ![r][s] =
                   IF lease[r][s].n > 0 THEN [n |-> lease[r][s].n, rev |-> rev + 1] ELSE NoLease]
            /\ IF c.st = "None" THEN UNCHANGED chan ELSE Publish(s, c.rev)
       ELSE UNCHANGED <<rev, claim, holders, cache, lease, chan>>   \* BUG: keeps the placement
    /\ UNCHANGED <<gen, up>>

(* G. A first turn never reads a stale cached claim again: only a replica  *)
(* that caches nothing claims.                                             *)
BugClaimIgnoresStale(r, s, w) ==
    LET c == claim[s] IN
    /\ up[r] /\ cache[r][s].st = "None"                        \* BUG: not NeedsClaim
    /\ IF c.st = "None" \/ Stale(c)
       THEN /\ rev < MaxRev
            /\ claim' = [claim EXCEPT ![s] = NewClaim(w)]
            /\ rev' = rev + 1
            /\ holders' = [holders EXCEPT ![s] = {}]
            /\ cache' = [cache EXCEPT ![r][s] = Entry(NewClaim(w))]
            /\ IF c.st = "None" THEN UNCHANGED chan ELSE Publish(s, c.rev)
       ELSE /\ cache' = [cache EXCEPT ![r][s] = Entry(c)]
            /\ UNCHANGED <<rev, claim, holders, chan>>
    /\ UNCHANGED <<gen, up, lease>>

(* M. A move is not fenced by revision: a replica routing from a revision *)
(* another replica moved meanwhile rewrites the winner's claim.            *)
BugUnfencedMove(r, s, w) ==
    LET e == cache[r][s]
        c == claim[s] IN
    /\ up[r] /\ e.st \in ClaimStates /\ w # e.target
    /\ IF c.st = "Bound"                                      \* BUG: no c.rev = e.rev
       THEN /\ rev < MaxRev
            /\ claim' = [claim EXCEPT ![s] = NewClaim(w)]
            /\ rev' = rev + 1
            /\ holders' = [holders EXCEPT ![s] = {}]
            /\ cache' = [cache EXCEPT ![r][s] = Entry(NewClaim(w))]
            /\ Publish(s, c.rev)
       ELSE /\ cache' = [cache EXCEPT ![r][s] = IF c.st = "None" THEN NoEntry ELSE Entry(c)]
            /\ UNCHANGED <<rev, claim, holders, chan>>
    /\ UNCHANGED <<gen, up, lease>>

(* M. A move is fenced by revision only: a quarantined (or closing) claim  *)
(* the replica caches is rewritten, lifting the quarantine with no settle. *)
BugMoveOverQuarantine(r, s, w) ==
    LET e == cache[r][s]
        c == claim[s] IN
    /\ up[r] /\ e.st \in ClaimStates /\ w # e.target
    /\ IF c.st # "None" /\ c.rev = e.rev                      \* BUG: not c.st = "Bound"
       THEN /\ rev < MaxRev
            /\ claim' = [claim EXCEPT ![s] = NewClaim(w)]
            /\ rev' = rev + 1
            /\ holders' = [holders EXCEPT ![s] = {}]
            /\ cache' = [cache EXCEPT ![r][s] = Entry(NewClaim(w))]
            /\ Publish(s, c.rev)
       ELSE /\ cache' = [cache EXCEPT ![r][s] = IF c.st = "None" THEN NoEntry ELSE Entry(c)]
            /\ UNCHANGED <<rev, claim, holders, chan>>
    /\ UNCHANGED <<gen, up, lease>>

(* M. A replica keeps serving its cached revision after its Delete reached *)
(* it while it has requests in flight on it (its binding outlives the      *)
(* cache): after a move it routes the session to the old target.          *)
BugMoveKeepsCache(r) ==
    /\ chan[r] # <<>>
    /\ LET ev == Head(chan[r]) IN
       cache' = [cache EXCEPT ![r] = [s \in Sessions |->
           IF ev.kind = "Reset"
           THEN IF cache[r][s].st = "Unclaimed" THEN cache[r][s] ELSE NoEntry
           ELSE IF s = ev.s /\ cache[r][s].st \in ClaimStates /\ cache[r][s].rev = ev.rev
                   /\ lease[r][s].n = 0                       \* BUG: kept while in flight
                THEN NoEntry ELSE cache[r][s]]]
    /\ chan' = [chan EXCEPT ![r] = Tail(@)]
    /\ UNCHANGED <<rev, gen, claim, holders, up, lease>>

-----------------------------------------------------------------------------
(* Witnesses. Each says that an interesting situation never happens; its   *)
(* MCClaimsWitness*.cfg must report it violated, which shows that the      *)
(* constants reach the situation.                                           *)

(* A Reset is processed that evicts a cached claim.                        *)
NeverResetEvicts ==
    [][~(/\ step'.act = "Receive" /\ Head(chan[step'.r]).kind = "Reset"
         /\ \E s \in Sessions : cache[step'.r][s].st \in ClaimStates)]_allvars

(* A delayed (or duplicated) Delete is processed after the replica cached *)
(* a newer revision of its session: it must evict nothing.                *)
NeverStaleDelete ==
    [][~(/\ step'.act = "Receive" /\ Head(chan[step'.r]).kind = "Delete"
         /\ cache[step'.r][Head(chan[step'.r]).s].st \in ClaimStates
         /\ cache[step'.r][Head(chan[step'.r]).s].rev > Head(chan[step'.r]).rev)]_allvars

(* A replica crashes while it holds a claim: its hold vanishes.            *)
NeverCrashWhileHolding ==
    [][~(step'.act = "Crash" /\ \E s \in Sessions : step'.r \in holders[s])]_allvars

(* A session placed while the store was unreachable is reconciled after   *)
(* another replica claimed it for another worker: the first writer wins.  *)
NeverReconcileConflict ==
    [][~(/\ step'.act = "Reconcile" /\ claim[step'.s].st # "None"
         /\ gen[claim[step'.s].target] = claim[step'.s].gen
         /\ claim[step'.s].target # cache[step'.r][step'.s].target)]_allvars

(* Two replicas both see a session quarantined.                            *)
NeverQuarantineSeenByTwo ==
    \A s \in Sessions, r1, r2 \in Replicas :
        r1 # r2 => ~(cache[r1][s].st = "Quarantined" /\ cache[r2][s].st = "Quarantined")

(* A close is deferred because another replica holds the claim.            *)
NeverCloseDeferred == \A s \in Sessions : claim[s].st # "Closing"

(* A claim that some replica caches expires.                               *)
NeverExpireCached ==
    [][~(/\ step'.act = "Expire"
         /\ \E r \in Replicas : cache[r][step'.s].st \in ClaimStates
                                /\ cache[r][step'.s].rev = claim[step'.s].rev)]_allvars

(* A connected replica routes a session to a target other than its       *)
(* claim's (the routing window is open).                                   *)
NeverRouteInWindow ==
    [][~(/\ step'.act = "Route" /\ up[step'.r]
         /\ lease'[step'.r][step'.s].n > lease[step'.r][step'.s].n
         /\ cache[step'.r][step'.s].st = "Bound"
         /\ ~(claim[step'.s].st # "None" /\ claim[step'.s].target = cache[step'.r][step'.s].target))]_allvars

(* A Closing claim has two holders left (needs three replicas): its next  *)
(* Unhold must not delete it.                                              *)
NeverClosingTwoHolders ==
    \A s \in Sessions : ~(claim[s].st = "Closing" /\ Cardinality(holders[s]) >= 2)

(* A claim whose quarantine was settled (a Bound rewrite of its lineage)  *)
(* is quarantined again (needs MaxRev 4).                                  *)
NeverRequarantine ==
    [][~(\E s \in Sessions : claim[s].st = "Bound" /\ claim[s].rev > lineage[s]
                            /\ claim'[s].st = "Quarantined")]_allvars

(* A replica reconnects with requests in flight on an earlier revision of *)
(* its claim's lineage (rewritten by a quarantine and a resolve): it must *)
(* hold the claim again.                                                   *)
NeverReholdRewritten ==
    [][~(/\ step'.act = "Reconnect"
         /\ \E s \in Sessions : /\ lease[step'.r][s].n > 0 /\ claim[s].st = "Bound"
                                /\ lease[step'.r][s].rev >= lineage[s]
                                /\ lease[step'.r][s].rev # claim[s].rev)]_allvars

(* A move rewrites a session's claim to another target.                   *)
NeverMove == \A s \in Sessions : moves[s] = {}

(* Two concurrent moves from one revision: a move is asked from a         *)
(* revision another move already ended (the store refuses it: the first   *)
(* wins, and the loser learns the winner's claim).                         *)
NeverConcurrentMoves ==
    [][~(/\ step'.act = "Move"
         /\ \E m \in moves[step'.s] : m[1] = cache[step'.r][step'.s].rev)]_allvars

(* A move seen by the other replica: it processes the Delete of the        *)
(* revision a move ended, which it caches.                                 *)
NeverMoveSeenByOther ==
    [][~(/\ step'.act = "Receive" /\ Head(chan[step'.r]).kind = "Delete"
         /\ cache[step'.r][Head(chan[step'.r]).s].st \in ClaimStates
         /\ cache[step'.r][Head(chan[step'.r]).s].rev = Head(chan[step'.r]).rev
         /\ \E m \in moves[Head(chan[step'.r]).s] : m[1] = Head(chan[step'.r]).rev)]_allvars
=============================================================================
