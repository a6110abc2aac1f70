------------------------------- MODULE Claims -------------------------------
(***************************************************************************)
(* Claims across router replicas (docs/claims.md). Replicas share each     *)
(* session's placement through a claim in a linearizable store. Each       *)
(* replica keeps a local cache of claims and local leases (requests in     *)
(* flight), and learns that a claim revision ended through its own watch   *)
(* channel of Delete and Reset events. The channel may delay events,       *)
(* duplicate them, drop them (the store then promises a Reset), and        *)
(* overflow (replaced by a Reset). A replica may crash (it loses its       *)
(* cache and leases; its holds vanish) and may lose the store (it keeps    *)
(* serving cached sessions, places new ones locally as unclaimed, and      *)
(* reconciles them when the store returns: first writer wins). An idle     *)
(* claim expires (time abstracted: Expire is enabled when no replica holds *)
(* it). Worker generations are shared (they come from the store). A       *)
(* replica may move a session: rewrite its claim to another target, fenced *)
(* by the revision it routes from (Move).                                  *)
(*                                                                         *)
(* The Go model in model/claims mirrors this module action for action,     *)
(* with the same names; its tests compare the two state spaces.            *)
(*                                                                         *)
(* Abstractions: a deletion does not move the store's revision (only the   *)
(* writes of a claim do: the Delete event names the revision that ended);  *)
(* a worker's generation is a counter, not its registration's revision;    *)
(* a replica sees generation moves at once; the store itself is always up, *)
(* unreachability is per replica; an attempt is named by the revision it   *)
(* was dispatched under, so a second ambiguous outcome under the same      *)
(* revision (another replica's attempt) changes nothing here: the store   *)
(* refuses it, and its replica's local quarantine is not modelled          *)
(* (docs/claims.md, guarantee 4); a move's target is always registered    *)
(* (the store's ErrUnknownWorker is not modelled), and a replica asks a    *)
(* move from any claim it caches (the store refuses all but a current      *)
(* Bound one), never to the cached target itself.                          *)
(***************************************************************************)
EXTENDS Naturals, FiniteSets, Sequences

CONSTANTS
    Replicas,    \* router replicas
    Sessions,    \* session keys
    Workers,     \* targets
    NoReplica,   \* model value: a step that names no replica
    NoSession,   \* model value: a step or event that names no session
    NoWorker,    \* model value: an entry that names no worker
    MaxRev,      \* the store writes at most MaxRev claim revisions
    MaxGen,      \* a worker's generation ranges over 1..MaxGen
    MaxLeases,   \* local leases (requests in flight) per replica and session
    MaxChan,     \* a watch channel buffers at most MaxChan events (then: Reset)
    MaxFaults,   \* faults per behaviour: crashes, disconnections, drops, duplicates, generation bumps
    MaxMoves     \* moves asked per behaviour (a refused one too)

ASSUME /\ MaxRev \in Nat /\ MaxGen \in Nat \ {0}
       /\ MaxLeases \in Nat \ {0} /\ MaxChan \in Nat \ {0} /\ MaxFaults \in Nat
       /\ MaxMoves \in Nat

VARIABLES
    faults,   \* faults injected so far (bounded by MaxFaults: see Did)
    nmoves,   \* moves asked so far (bounded by MaxMoves: see Did)
    rev,      \* the store's revision: the last claim revision written
    gen,      \* worker -> its current generation (shared by every replica)
    claim,    \* session -> its claim in the store (st "None": no claim)
    holders,  \* session -> the replicas holding leases on its claim's lineage
    up,       \* replica -> the store is reachable from it
    cache,    \* replica -> session -> its cached claim, or an unclaimed local placement
    lease,    \* replica -> session -> its local leases: how many, on which revision
    chan,     \* replica -> its watch channel: Delete and Reset events not yet processed
    ended,    \* ghost: session -> the revisions of its claim that ended
    lineage,  \* ghost: session -> the revision that began its claim's lineage (0: no claim)
    moves,    \* ghost: session -> the moves made: <<from, to>>, the revision the mover routed from and the one it wrote
    step      \* ghost: the label of the step just taken (see Next)

vars == <<faults, nmoves, rev, gen, claim, holders, up, cache, lease, chan>>
(* The ghost `step` is set in Next, outside every action, and `ended`,    *)
(* `lineage` and `moves` by TrackEnded, TrackLineage and TrackMoves,       *)
(* definitions of their own: a broken variant of an action cannot move     *)
(* them. `View` leaves `step` out, so TLC and the Go model count the same  *)
(* states.                                                                 *)
allvars == <<vars, ended, lineage, moves, step>>
View == <<vars, ended, lineage, moves>>

ClaimStates == {"Bound", "Quarantined", "Closing"}
Resolutions == {"Accepted", "NotAccepted"}

(* A claim: one revision of a session's placement. `born` is the revision *)
(* that created its lineage (etcd's create revision): a quarantine, a      *)
(* resolve and a deferred close write new revisions of the same lineage;  *)
(* `attempt` names a quarantined attempt by the revision it was           *)
(* dispatched under.                                                       *)
NoClaim == [st |-> "None", rev |-> 0, born |-> 0, target |-> NoWorker, gen |-> 0, attempt |-> 0]
(* A cache entry: a claim as the replica read it (st in ClaimStates), an  *)
(* unclaimed local placement (st "Unclaimed", rev 0), or nothing.          *)
NoEntry == [st |-> "None", rev |-> 0, target |-> NoWorker, gen |-> 0]
NoLease == [n |-> 0, rev |-> 0]
ResetEv == [kind |-> "Reset", s |-> NoSession, rev |-> 0]
DeleteEv(s, v) == [kind |-> "Delete", s |-> s, rev |-> v]

Entry(c) == [st |-> c.st, rev |-> c.rev, target |-> c.target, gen |-> c.gen]
NewClaim(w) == [st |-> "Bound", rev |-> rev + 1, born |-> rev + 1, target |-> w, gen |-> gen[w], attempt |-> 0]
(* A claim is stale when its worker's generation moved on.                 *)
Stale(c) == c.st # "None" /\ gen[c.target] # c.gen
(* A replica needs to read the claim: it caches nothing, or a stale claim. *)
NeedsClaim(e) == e.st = "None" \/ (e.st \in ClaimStates /\ gen[e.target] # e.gen)
(* A replica routes from an entry that is bound (or unclaimed) and current.*)
Routable(e) == e.st \in {"Bound", "Unclaimed"} /\ gen[e.target] = e.gen
(* The replica's Reset still waits in its channel.                         *)
ResetPending(r) == \E i \in 1..Len(chan[r]) : chan[r][i].kind = "Reset"

(* The watch: an event is appended to a channel; a full channel loses its *)
(* events and holds a Reset instead (a slow consumer). Resets coalesce.   *)
Push(q, ev) == IF Len(q) < MaxChan THEN Append(q, ev) ELSE <<ResetEv>>
AddReset(q) == IF q # <<>> /\ q[Len(q)].kind = "Reset" THEN q ELSE Push(q, ResetEv)
(* Revision v of s ended: a Delete to every replica that reaches the      *)
(* store (one that does not will get a Reset when it reconnects) and      *)
(* caches v. The store sends it to every watcher, but a replica caches a   *)
(* revision only while it is current, so a Delete of a revision it does  *)
(* not cache now would evict nothing, ever: leaving those out changes no  *)
(* cache and keeps the channels (and the state space) small.              *)
Publish(s, v) ==
    chan' = [r \in Replicas |->
               IF up[r] /\ cache[r][s].st \in ClaimStates /\ cache[r][s].rev = v
               THEN Push(chan[r], DeleteEv(s, v)) ELSE chan[r]]

Label(act, r, s, w, a, o) == [act |-> act, r |-> r, s |-> s, w |-> w, a |-> a, o |-> o]

Init ==
    /\ faults = 0
    /\ nmoves = 0
    /\ rev = 0
    /\ gen = [w \in Workers |-> 1]
    /\ claim = [s \in Sessions |-> NoClaim]
    /\ holders = [s \in Sessions |-> {}]
    /\ up = [r \in Replicas |-> TRUE]
    /\ cache = [r \in Replicas |-> [s \in Sessions |-> NoEntry]]
    /\ lease = [r \in Replicas |-> [s \in Sessions |-> NoLease]]
    /\ chan = [r \in Replicas |-> <<>>]
    /\ ended = [s \in Sessions |-> {}]
    /\ lineage = [s \in Sessions |-> 0]
    /\ moves = [s \in Sessions |-> {}]
    /\ step = Label("Init", NoReplica, NoSession, NoWorker, 0, "None")

-----------------------------------------------------------------------------
(* Claim(r, s, w): CreateOrGet. A replica that needs s's claim reads it;  *)
(* when there is none, or it is stale, the replica's proposal w is written *)
(* as a new lineage (first writer wins), ending the stale one's holds.    *)
Claim(r, s, w) ==
    LET c == claim[s] IN
    /\ up[r] /\ NeedsClaim(cache[r][s])
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

(* PlaceLocal(r, s, w): the store is unreachable: a new session is placed *)
(* locally on w and marked unclaimed.                                      *)
PlaceLocal(r, s, w) ==
    /\ ~up[r] /\ NeedsClaim(cache[r][s])
    /\ cache' = [cache EXCEPT ![r][s] = [st |-> "Unclaimed", rev |-> 0, target |-> w, gen |-> gen[w]]]
    /\ UNCHANGED <<rev, gen, claim, holders, up, lease, chan>>

(* Move(r, s, w): r moves s to another target w (a soft-mode pin that    *)
(* disagrees, a refused later turn, a failed worker, a follow): it asks    *)
(* the store to rewrite the claim it caches (claims.Store.Move), fenced by *)
(* that revision. Only that revision, current and Bound, moves: it is      *)
(* written as a new lineage on w under w's generation, and the old         *)
(* revision ends as every ended revision does (its Delete to every         *)
(* replica caching it), and with it its lineage's holds (requests in       *)
(* flight on the old target finish unheld). r then caches the new          *)
(* revision. Refused (the revision moved on, or the claim is Quarantined   *)
(* or Closing), the store changes nothing and the refusal carries the      *)
(* current claim, which r caches (no claim: r caches nothing): the loser   *)
(* of two concurrent moves learns the winner's target.                     *)
Move(r, s, w) ==
    LET e == cache[r][s]
        c == claim[s] IN
    /\ up[r] /\ e.st \in ClaimStates /\ w # e.target
    /\ IF c.st = "Bound" /\ c.rev = e.rev
       THEN /\ rev < MaxRev
            /\ claim' = [claim EXCEPT ![s] = NewClaim(w)]
            /\ rev' = rev + 1
            /\ holders' = [holders EXCEPT ![s] = {}]
            /\ cache' = [cache EXCEPT ![r][s] = Entry(NewClaim(w))]
            /\ Publish(s, c.rev)
       ELSE /\ cache' = [cache EXCEPT ![r][s] = IF c.st = "None" THEN NoEntry ELSE Entry(c)]
            /\ UNCHANGED <<rev, claim, holders, chan>>
    /\ UNCHANGED <<gen, up, lease>>

(* Route(r, s): a turn of s on r dispatches to the cached target and takes *)
(* a local lease. The first local lease of a claimed session holds the     *)
(* claim in the store (Hold, fenced by the revision: a moved claim is      *)
(* evicted and nothing is dispatched); later ones are local (the hot       *)
(* path), as are all while the store is unreachable, and unclaimed ones.  *)
Route(r, s) ==
    LET e == cache[r][s]
        l == lease[r][s] IN
    /\ Routable(e)
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

(* Unhold(r, s): r no longer holds s's claim; the last Unhold of a Closing *)
(* claim deletes it.                                                       *)
Unhold(r, s) ==
    IF r \in holders[s] /\ claim[s].st = "Closing" /\ holders[s] = {r}
    THEN /\ claim' = [claim EXCEPT ![s] = NoClaim]
         /\ holders' = [holders EXCEPT ![s] = {}]
         /\ Publish(s, claim[s].rev)
    ELSE /\ holders' = [holders EXCEPT ![s] = @ \ {r}]
         /\ UNCHANGED <<claim, chan>>

(* Release(r, s): a request of s on r ends. The last local lease unholds  *)
(* the claim (when the store is reachable; otherwise Reconnect does).     *)
Release(r, s) ==
    LET l == lease[r][s] IN
    /\ l.n > 0
    /\ lease' = [lease EXCEPT ![r][s] = IF l.n = 1 THEN NoLease ELSE [n |-> l.n - 1, rev |-> l.rev]]
    /\ IF l.n = 1 /\ up[r]
       THEN Unhold(r, s)
       ELSE UNCHANGED <<claim, holders, chan>>
    /\ UNCHANGED <<rev, gen, up, cache>>

(* Ambiguous(r, s): a request of s on r learns an ambiguous outcome: it   *)
(* quarantines the claim it was dispatched under (Quarantine, fenced by    *)
(* that revision), a new revision of the same lineage that every replica   *)
(* learns through the Delete of the old one. The request goes on (its     *)
(* lease ends with Release).                                               *)
Ambiguous(r, s) ==
    LET l == lease[r][s]
        c == claim[s] IN
    /\ up[r] /\ l.n > 0 /\ l.rev # 0
    /\ IF c.st = "Bound" /\ c.rev = l.rev
       THEN /\ rev < MaxRev
            /\ claim' = [claim EXCEPT ![s] = [c EXCEPT !.st = "Quarantined", !.rev = rev + 1, !.attempt = l.rev]]
            /\ rev' = rev + 1
            /\ cache' = [cache EXCEPT ![r][s] = [st |-> "Quarantined", rev |-> rev + 1, target |-> c.target, gen |-> c.gen]]
            /\ Publish(s, c.rev)
       ELSE UNCHANGED <<rev, claim, cache, chan>>
    /\ UNCHANGED <<gen, holders, up, lease>>

(* Resolve(s, a, o): a late result or an operator settles s's quarantine, *)
(* fenced by the attempt a and the worker's generation: Accepted writes   *)
(* the claim Bound again (a new revision), NotAccepted deletes it.         *)
Resolve(s, a, o) ==
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
            /\ Publish(s, c.rev)
       ELSE UNCHANGED <<rev, claim, holders, chan>>
    /\ UNCHANGED <<gen, up, cache, lease>>

(* Close(r, s): the session's final request on r, its last local lease.  *)
(* Close is fenced by the revision the lease is on: a stale close changes *)
(* nothing but r's own hold. With no other holder the claim is deleted;   *)
(* with others it becomes Closing (a new revision) and the last Unhold     *)
(* deletes it.                                                             *)
Close(r, s) ==
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
            ELSE /\ rev < MaxRev
                 /\ claim' = [claim EXCEPT ![s] = [c EXCEPT !.st = "Closing", !.rev = rev + 1]]
                 /\ holders' = [holders EXCEPT ![s] = @ \ {r}]
                 /\ rev' = rev + 1
                 /\ Publish(s, c.rev)
       ELSE /\ Unhold(r, s)
            /\ UNCHANGED rev
    /\ UNCHANGED <<gen, up>>

(* Reconcile(r, s): the store is back and r has processed its Reset: an   *)
(* unclaimed session is proposed through CreateOrGet with its local       *)
(* target. First writer wins: a claim another replica wrote meanwhile is  *)
(* adopted (the session moves at its next turn).                           *)
Reconcile(r, s) ==
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
       ELSE /\ cache' = [cache EXCEPT ![r][s] = Entry(c)]
            /\ UNCHANGED <<rev, claim, holders, lease, chan>>
    /\ UNCHANGED <<gen, up>>

(* Expire(s): an idle claim expires. Time is abstracted: every replica    *)
(* holding the claim keeps it alive, so it may expire only with no holder.*)
Expire(s) ==
    /\ claim[s].st # "None" /\ holders[s] = {}
    /\ claim' = [claim EXCEPT ![s] = NoClaim]
    /\ Publish(s, claim[s].rev)
    /\ UNCHANGED <<rev, gen, holders, up, cache, lease>>

(* BumpGeneration(w): worker w restarted or left and came back: its       *)
(* generation moves on, and claims made under the old one are stale.     *)
BumpGeneration(w) ==
    /\ gen[w] < MaxGen
    /\ gen' = [gen EXCEPT ![w] = @ + 1]
    /\ UNCHANGED <<rev, claim, holders, up, cache, lease, chan>>

(* Receive(r): r processes the oldest event of its channel. A Delete       *)
(* evicts the entry if it caches that revision; a Reset evicts every       *)
(* cached claim (unclaimed placements stay, to be reconciled).            *)
Receive(r) ==
    /\ chan[r] # <<>>
    /\ LET ev == Head(chan[r]) IN
       cache' = [cache EXCEPT ![r] = [s \in Sessions |->
           IF ev.kind = "Reset"
           THEN IF cache[r][s].st = "Unclaimed" THEN cache[r][s] ELSE NoEntry
           ELSE IF s = ev.s /\ cache[r][s].st \in ClaimStates /\ cache[r][s].rev = ev.rev
                THEN NoEntry ELSE cache[r][s]]]
    /\ chan' = [chan EXCEPT ![r] = Tail(@)]
    /\ UNCHANGED <<rev, gen, claim, holders, up, lease>>

(* Duplicate(r): the watch delivers r's oldest Delete twice.               *)
Duplicate(r) ==
    /\ chan[r] # <<>> /\ Len(chan[r]) < MaxChan /\ Head(chan[r]).kind = "Delete"
    /\ chan' = [chan EXCEPT ![r] = <<Head(@)>> \o @]
    /\ UNCHANGED <<rev, gen, claim, holders, up, cache, lease>>

(* Drop(r): the watch loses r's oldest Delete; the store's promise is a   *)
(* Reset after it.                                                         *)
Drop(r) ==
    /\ chan[r] # <<>> /\ Head(chan[r]).kind = "Delete"
    /\ chan' = [chan EXCEPT ![r] = AddReset(Tail(@))]
    /\ UNCHANGED <<rev, gen, claim, holders, up, cache, lease>>

(* Disconnect(r): the store becomes unreachable from r.                    *)
Disconnect(r) ==
    /\ up[r]
    /\ up' = [up EXCEPT ![r] = FALSE]
    /\ UNCHANGED <<rev, gen, claim, holders, cache, lease, chan>>

(* Reconnect(r): the store is reachable again. r's watch resumes with a   *)
(* Reset (it missed events), and r holds exactly the claims it has local  *)
(* leases on (the current lineage's; a hold of a lineage that ended is    *)
(* not renewed).                                                           *)
Reconnect(r) ==
    /\ ~up[r]
    /\ up' = [up EXCEPT ![r] = TRUE]
    /\ chan' = [chan EXCEPT ![r] = AddReset(@)]
    /\ holders' = [s \in Sessions |->
           IF lease[r][s].n > 0 /\ claim[s].st # "None" /\ lease[r][s].rev >= claim[s].born
           THEN holders[s] \cup {r} ELSE holders[s] \ {r}]
    /\ UNCHANGED <<rev, gen, claim, cache, lease>>

(* Crash(r): r crashes and restarts: it loses its cache and leases, its   *)
(* holds vanish with its store session, and its new watch begins with a   *)
(* Reset.                                                                  *)
Crash(r) ==
    /\ cache' = [cache EXCEPT ![r] = [s \in Sessions |-> NoEntry]]
    /\ lease' = [lease EXCEPT ![r] = [s \in Sessions |-> NoLease]]
    /\ holders' = [s \in Sessions |-> holders[s] \ {r}]
    /\ chan' = [chan EXCEPT ![r] = <<ResetEv>>]
    /\ up' = [up EXCEPT ![r] = TRUE]
    /\ UNCHANGED <<rev, gen, claim>>

(* Each disjunct takes one action and records its label in `step`. A     *)
(* fault (a crash, a lost connection, a dropped or duplicated event, a    *)
(* worker's restart) counts against the budget MaxFaults, and a move (a  *)
(* refused one too) against MaxMoves, here, outside every action, so a     *)
(* broken variant cannot change the accounting.                           *)
FaultActions == {"BumpGeneration", "Duplicate", "Drop", "Disconnect", "Crash"}
Did(act, r, s, w, a, o) ==
    /\ step' = Label(act, r, s, w, a, o)
    /\ IF act \in FaultActions
       THEN faults < MaxFaults /\ faults' = faults + 1
       ELSE UNCHANGED faults
    /\ IF act = "Move"
       THEN nmoves < MaxMoves /\ nmoves' = nmoves + 1
       ELSE UNCHANGED nmoves
OnRS(act, r, s) == Did(act, r, s, NoWorker, 0, "None")
OnR(act, r) == Did(act, r, NoSession, NoWorker, 0, "None")

Next ==
    \/ \E r \in Replicas, s \in Sessions, w \in Workers : Claim(r, s, w) /\ Did("Claim", r, s, w, 0, "None")
    \/ \E r \in Replicas, s \in Sessions, w \in Workers : PlaceLocal(r, s, w) /\ Did("PlaceLocal", r, s, w, 0, "None")
    \/ \E r \in Replicas, s \in Sessions, w \in Workers : Move(r, s, w) /\ Did("Move", r, s, w, 0, "None")
    \/ \E r \in Replicas, s \in Sessions : Route(r, s) /\ OnRS("Route", r, s)
    \/ \E r \in Replicas, s \in Sessions : Release(r, s) /\ OnRS("Release", r, s)
    \/ \E r \in Replicas, s \in Sessions : Ambiguous(r, s) /\ OnRS("Ambiguous", r, s)
    \/ \E s \in Sessions, a \in 1..MaxRev, o \in Resolutions : Resolve(s, a, o) /\ Did("Resolve", NoReplica, s, NoWorker, a, o)
    \/ \E r \in Replicas, s \in Sessions : Close(r, s) /\ OnRS("Close", r, s)
    \/ \E r \in Replicas, s \in Sessions : Reconcile(r, s) /\ OnRS("Reconcile", r, s)
    \/ \E s \in Sessions : Expire(s) /\ Did("Expire", NoReplica, s, NoWorker, 0, "None")
    \/ \E w \in Workers : BumpGeneration(w) /\ Did("BumpGeneration", NoReplica, NoSession, w, 0, "None")
    \/ \E r \in Replicas : Receive(r) /\ OnR("Receive", r)
    \/ \E r \in Replicas : Duplicate(r) /\ OnR("Duplicate", r)
    \/ \E r \in Replicas : Drop(r) /\ OnR("Drop", r)
    \/ \E r \in Replicas : Disconnect(r) /\ OnR("Disconnect", r)
    \/ \E r \in Replicas : Reconnect(r) /\ OnR("Reconnect", r)
    \/ \E r \in Replicas : Crash(r) /\ OnR("Crash", r)

(* ended: a claim revision that stops being current (deleted, or replaced *)
(* by another revision) is recorded, with definitions of its own.         *)
TrackEnded ==
    ended' = [s \in Sessions |->
                IF claim[s].st # "None" /\ (claim'[s].st = "None" \/ claim'[s].rev # claim[s].rev)
                THEN ended[s] \cup {claim[s].rev} ELSE ended[s]]

(* lineage: the revision that began the current claim's lineage, written *)
(* as history: a claim that appears (from none) or changes its target or  *)
(* generation begins a lineage at its revision; a rewrite that keeps them *)
(* (a quarantine, a resolve, a deferred close) continues it. It never     *)
(* reads `born`, which the actions write: an action that moves `born`     *)
(* does not move this yardstick.                                           *)
TrackLineage ==
    lineage' = [s \in Sessions |->
                  IF claim'[s].st = "None" THEN 0
                  ELSE IF \/ claim[s].st = "None"
                          \/ claim'[s].target # claim[s].target
                          \/ claim'[s].gen # claim[s].gen
                       THEN claim'[s].rev
                       ELSE lineage[s]]

(* moves: a step labelled Move that changes the session's claim records   *)
(* the move as <<from, to>>: the revision the mover routed from (its       *)
(* cache before the step) and the revision the store now has. It reads the *)
(* label, the cache and the claim, never the action's fence.               *)
TrackMoves ==
    moves' = [s \in Sessions |->
                IF step'.act = "Move" /\ step'.s = s /\ claim'[s] # claim[s] /\ claim'[s].st # "None"
                THEN moves[s] \cup {<<cache[step'.r][s].rev, claim'[s].rev>>}
                ELSE moves[s]]

(* Fairness: a replica processes its watch events, reconciles its         *)
(* unclaimed placements once it reaches the store, and re-reads a cached   *)
(* claim whose worker's generation moved on (Reclaim: its next turn's     *)
(* CreateOrGet); all weakly. Nothing else is forced: clients may stop, a  *)
(* replica may stay away from the store. Safety checks ignore it.         *)
(* Each is its disjunct of Next, with its label (Did leaves faults alone). *)
Reclaim(r, s) ==
    /\ cache[r][s].st \in ClaimStates
    /\ \E w \in Workers : Claim(r, s, w) /\ Did("Claim", r, s, w, 0, "None")
Fairness ==
    \A r \in Replicas :
        /\ WF_vars(Receive(r) /\ OnR("Receive", r))
        /\ \A s \in Sessions :
              /\ WF_vars(Reconcile(r, s) /\ OnRS("Reconcile", r, s))
              /\ WF_vars(Reclaim(r, s))

Spec == Init /\ [][Next /\ TrackEnded /\ TrackLineage /\ TrackMoves]_allvars /\ Fairness

-----------------------------------------------------------------------------
(* What the guarantees promise is said with these definitions, the ghosts  *)
(* and the step's label only, never with the actions or the definitions   *)
(* actions use (Stale, Routable, NeedsClaim, ResetPending, ...), nor with  *)
(* a claim's `born`, which the actions write (the ghost `lineage` is the   *)
(* yardstick of a lineage).                                                *)

(* Replica r may route s from its cache: a claim it read, bound, and its  *)
(* worker still at the claim's generation.                                 *)
RoutesFromCache(r, s) ==
    cache[r][s].st = "Bound" /\ gen[cache[r][s].target] = cache[r][s].gen
(* r has not yet processed the end of revision v of s: the Delete of v, or *)
(* a Reset, still waits in its channel.                                    *)
EndNotYetSeen(r, s, v) ==
    \E i \in 1..Len(chan[r]) :
        \/ chan[r][i].kind = "Reset"
        \/ chan[r][i].kind = "Delete" /\ chan[r][i].s = s /\ chan[r][i].rev = v
(* The claim's worker is at the claim's generation.                        *)
ClaimCurrent(s) == claim[s].st # "None" /\ gen[claim[s].target] = claim[s].gen
(* r has local leases on the lineage of s's current claim (the ghost      *)
(* lineage, not the claim's own `born`).                                   *)
LeasesOnLineage(r, s) ==
    /\ lease[r][s].n > 0 /\ claim[s].st # "None"
    /\ lease[r][s].rev >= lineage[s]
(* A step dispatches a new request of s on r: r's local leases grow.       *)
Dispatches(r, s) == lease'[r][s].n > lease[r][s].n

-----------------------------------------------------------------------------
(* Invariants.                                                             *)

TypeOK ==
    /\ faults \in 0..MaxFaults
    /\ nmoves \in 0..MaxMoves
    /\ rev \in 0..MaxRev
    /\ gen \in [Workers -> 1..MaxGen]
    /\ \A s \in Sessions :
         /\ claim[s].st \in {"None"} \cup ClaimStates
         /\ claim[s].rev \in 0..rev
         /\ holders[s] \subseteq Replicas
         /\ ended[s] \subseteq 1..rev
         /\ lineage[s] \in 0..rev
         /\ moves[s] \subseteq (1..rev) \X (1..rev)
    /\ up \in [Replicas -> BOOLEAN]
    /\ \A r \in Replicas :
         /\ Len(chan[r]) <= MaxChan
         /\ \A s \in Sessions :
              /\ cache[r][s].st \in {"None", "Unclaimed"} \cup ClaimStates
              /\ lease[r][s].n \in 0..MaxLeases

(* 1. Routing window. A connected replica routes a session only to its    *)
(* claim's target, except within a window after the revision it cached    *)
(* ended, which lasts until it processes that revision's Delete or a      *)
(* Reset. (Unclaimed placements are outside this until reconciled.)       *)
RoutingWindow ==
    \A r \in Replicas, s \in Sessions :
        (up[r] /\ RoutesFromCache(r, s)
         /\ ~(claim[s].st # "None" /\ claim[s].target = cache[r][s].target)) =>
            /\ cache[r][s].rev \in ended[s]
            /\ EndNotYetSeen(r, s, cache[r][s].rev)

(* 2. Agreement. Views of one revision of a session's claim (replicas'    *)
(* caches and the store) agree on its target and generation.              *)
Agreement ==
    \A s \in Sessions, r1, r2 \in Replicas :
        /\ (/\ cache[r1][s].st \in ClaimStates /\ cache[r2][s].st \in ClaimStates
            /\ cache[r1][s].rev = cache[r2][s].rev) =>
              cache[r1][s].target = cache[r2][s].target /\ cache[r1][s].gen = cache[r2][s].gen
        /\ (cache[r1][s].st \in ClaimStates /\ cache[r1][s].rev = claim[s].rev) =>
              cache[r1][s].target = claim[s].target /\ cache[r1][s].gen = claim[s].gen

(* 4. Quarantine everywhere. While a session's claim is quarantined (its  *)
(* worker still at the quarantine's generation), no connected replica may *)
(* dispatch a new attempt for it from its cache, except until it          *)
(* processes the Delete of the revision it cached (or a Reset).           *)
QuarantineEverywhere ==
    \A r \in Replicas, s \in Sessions :
        (up[r] /\ claim[s].st = "Quarantined" /\ ClaimCurrent(s) /\ RoutesFromCache(r, s)) =>
            /\ cache[r][s].rev \in ended[s]
            /\ EndNotYetSeen(r, s, cache[r][s].rev)

(* The store knows who uses a claim: a connected replica with local       *)
(* leases on a claim's lineage holds it.                                   *)
HoldersCoverLeases ==
    \A r \in Replicas, s \in Sessions : up[r] /\ LeasesOnLineage(r, s) => r \in holders[s]

(* E. No leaked holds (the other direction): a connected replica holds a  *)
(* claim only while it has local leases on its lineage. A hold that       *)
(* outlives its leases (a crash, a lost Unhold) keeps a Closing claim     *)
(* from being deleted and an idle one from expiring.                      *)
HoldsAreLeases ==
    \A s \in Sessions, r \in Replicas : (up[r] /\ r \in holders[s]) => LeasesOnLineage(r, s)

(* D. Eviction is complete. A connected replica caches a claim (in any    *)
(* state: bound, quarantined, closing) only as the store has it now (the  *)
(* same revision, so the same state), or within the window after that     *)
(* revision ended, until it processes its Delete or a Reset.              *)
CachedClaimsCurrent ==
    \A r \in Replicas, s \in Sessions :
        (up[r] /\ cache[r][s].st \in ClaimStates) =>
            \/ claim[s].st = cache[r][s].st /\ claim[s].rev = cache[r][s].rev
            \/ /\ cache[r][s].rev \in ended[s]
               /\ EndNotYetSeen(r, s, cache[r][s].rev)

(* M. Moves. Once a rewrite of a session's claim (a move, or any other    *)
(* end of a revision) is visible to a replica, no two connected replicas  *)
(* route the session to different targets: of two that route it from      *)
(* their caches to different targets, one routes from a revision that     *)
(* ended and has not yet processed its end (its Delete, or a Reset): the  *)
(* routing window of 1, and nothing beyond it.                             *)
OneTargetOnceSeen ==
    \A s \in Sessions, r1, r2 \in Replicas :
        (/\ up[r1] /\ up[r2] /\ RoutesFromCache(r1, s) /\ RoutesFromCache(r2, s)
         /\ cache[r1][s].target # cache[r2][s].target) =>
            \E r \in {r1, r2} : cache[r][s].rev \in ended[s] /\ EndNotYetSeen(r, s, cache[r][s].rev)

(* M. The first of two concurrent moves wins: each revision has at most   *)
(* one successor by a move (the ghost moves: a second move from a         *)
(* revision another move already ended would overwrite the winner).        *)
FirstMoveWins ==
    \A s \in Sessions : \A m1, m2 \in moves[s] : m1[1] = m2[1] => m1 = m2

-----------------------------------------------------------------------------
(* Action properties.                                                      *)

(* 3. Fenced close. A close by a revision that is not current never        *)
(* deletes or changes a Bound or Quarantined claim.                        *)
FencedClose ==
    [][(/\ step'.act = "Close"
        /\ claim[step'.s].st \in {"Bound", "Quarantined"}
        /\ lease[step'.r][step'.s].rev # claim[step'.s].rev) =>
          claim'[step'.s] = claim[step'.s]]_allvars

(* 5. No expiry in use. A claim that a connected replica holds local      *)
(* leases on (on its lineage) does not expire.                            *)
NoExpiryInUse ==
    [][step'.act = "Expire" =>
          \A r \in Replicas : ~(up[r] /\ LeasesOnLineage(r, step'.s))]_allvars

(* 6. No close under another's leases. A claim ends by a close (Close, or *)
(* the Release of the last holder of a Closing claim) only when no other  *)
(* connected replica holds local leases on its lineage.                   *)
NoCloseUnderOthersLeases ==
    [][(step'.act \in {"Close", "Release"} /\ claim[step'.s].st # "None" /\ claim'[step'.s].st = "None") =>
          \A r \in Replicas \ {step'.r} : ~(up[r] /\ LeasesOnLineage(r, step'.s))]_allvars

(* First writer wins. A current claim keeps its target and generation for *)
(* as long as it exists: only a claim that is absent or stale is replaced  *)
(* by another placement (CreateOrGet, and the store-down reconcile), or a  *)
(* move rewrites it (a move has rules of its own: FirstMoveWins).          *)
FirstWriterWins ==
    [][\A s \in Sessions :
          (ClaimCurrent(s) /\ claim'[s].st # "None" /\ ~(step'.act = "Move" /\ step'.s = s)) =>
              claim'[s].target = claim[s].target /\ claim'[s].gen = claim[s].gen]_allvars

(* A. Dispatches are safe (a step property: a state cannot tell a good    *)
(* dispatch from a bad one that leads to the same state). Every new       *)
(* request is dispatched from a bound claim or an unclaimed placement,    *)
(* under the cached revision, to the worker incarnation it names; a       *)
(* connected replica's first request on a claim is dispatched only when   *)
(* that revision is the store's claim, Bound, and held by it; its later   *)
(* ones (the hot path) only while that revision is current, or within the *)
(* routing window after it ended.                                          *)
DispatchesFromCurrentClaim ==
    [][\A r \in Replicas, s \in Sessions :
          Dispatches(r, s) =>
              LET e == cache[r][s] IN
              /\ e.st \in {"Bound", "Unclaimed"}
              /\ gen[e.target] = e.gen
              /\ lease'[r][s].rev = e.rev
              /\ (up[r] /\ e.st = "Bound") =>
                    IF lease[r][s].n = 0
                    THEN claim[s].st = "Bound" /\ claim[s].rev = e.rev /\ r \in holders'[s]
                    ELSE \/ claim[s].st = "Bound" /\ claim[s].rev = e.rev
                         \/ e.rev \in ended[s] /\ EndNotYetSeen(r, s, e.rev)]_allvars

(* B. The quarantine lifecycle. A quarantine begins only by an ambiguous   *)
(* report of a request dispatched under the claim's current, Bound        *)
(* revision, and names that revision as its attempt. It ends only by a    *)
(* Resolve that names its attempt while its worker is at its generation,  *)
(* by expiry (no replica holds it), or because its worker's generation    *)
(* moved on (the claim is stale and may be replaced).                     *)
QuarantineLifecycle ==
    [][\A s \in Sessions :
          /\ (claim'[s].st = "Quarantined" /\ claim'[s] # claim[s]) =>
                /\ step'.act = "Ambiguous" /\ step'.s = s
                /\ claim[s].st = "Bound"
                /\ lease[step'.r][s].n > 0 /\ lease[step'.r][s].rev = claim[s].rev
                /\ claim'[s].attempt = claim[s].rev
          /\ (claim[s].st = "Quarantined" /\ claim'[s] # claim[s]) =>
                \/ /\ step'.act = "Resolve" /\ step'.s = s /\ step'.a = claim[s].attempt
                   /\ gen[claim[s].target] = claim[s].gen
                \/ step'.act = "Expire" /\ step'.s = s
                \/ gen[claim[s].target] # claim[s].gen]_allvars

(* C. Lineages begin only by CreateOrGet (Claim, or the store-down        *)
(* reconcile) where the session has no claim or a stale one, or by a move  *)
(* of a Bound claim: a rewrite (a quarantine, a resolve, a deferred close, *)
(* a touch) never begins one, nothing writes a deleted claim back, and no  *)
(* move begins one over a quarantine or a close. Measured with the ghost   *)
(* lineage, not the claim's `born`.                                        *)
LineagesBeginByCreate ==
    [][\A s \in Sessions :
          (claim'[s].st # "None" /\ lineage'[s] # lineage[s]) =>
              \/ /\ step'.act \in {"Claim", "Reconcile"} /\ step'.s = s
                 /\ (claim[s].st = "None" \/ gen[claim[s].target] # claim[s].gen)
              \/ step'.act = "Move" /\ step'.s = s /\ claim[s].st = "Bound"]_allvars

(* G. Liveness, under Fairness. Each says that a situation that must end   *)
(* does end (P ~> ~P, the core's form). The premises leave out what the   *)
(* bounds forbid: a write needs a revision below MaxRev.                   *)
(* A connected replica's cached claim whose revision ended is evicted.     *)
EvictionDue(r, s) ==
    up[r] /\ cache[r][s].st \in ClaimStates /\ cache[r][s].rev \in ended[s]
(* A connected replica's unclaimed placement is reconciled.                *)
ReconcileDue(r, s) == up[r] /\ cache[r][s].st = "Unclaimed" /\ rev < MaxRev
(* A connected replica's cached claim whose worker's generation moved on   *)
(* is read again (or evicted).                                             *)
RereadDue(r, s) ==
    /\ up[r] /\ cache[r][s].st \in ClaimStates
    /\ gen[cache[r][s].target] # cache[r][s].gen
    /\ (ClaimCurrent(s) \/ rev < MaxRev)

EndedEvicted == \A r \in Replicas, s \in Sessions : EvictionDue(r, s) ~> ~EvictionDue(r, s)
UnclaimedReconciled == \A r \in Replicas, s \in Sessions : ReconcileDue(r, s) ~> ~ReconcileDue(r, s)
StaleReread == \A r \in Replicas, s \in Sessions : RereadDue(r, s) ~> ~RereadDue(r, s)

(* F. Unclaimed placements are made only where the store is unreachable:  *)
(* a connected replica never places a session on its own.                 *)
UnclaimedOnlyWhenUnreachable ==
    [][\A r \in Replicas, s \in Sessions :
          (cache'[r][s].st = "Unclaimed" /\ cache'[r][s] # cache[r][s]) => ~up[r]]_allvars

=============================================================================
