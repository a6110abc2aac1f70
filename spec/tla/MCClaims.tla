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
=============================================================================
