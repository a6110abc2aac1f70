---------------------------- MODULE MCPlacement ----------------------------
(***************************************************************************)
(* Model-checking harness for Placement. MCPlacement.cfg checks the        *)
(* protocol; each MCBug*.cfg replaces one definition with a deliberately   *)
(* broken variant below (TLC's `Name <- Variant` override) and must be     *)
(* reported as a violation of the property it names. The Go explorer       *)
(* applies the Go variant of the same name when it reads the override.    *)
(***************************************************************************)
EXTENDS Placement

(* Replays a quarantined attempt: a quarantined key is treated as absent,  *)
(* so a new request reserves it and dispatches again.                      *)
BugAcquireReplaysQuarantine(r, k) ==
    LET e == table[k] IN
    /\ \/ req[r].pc = "Idle"
       \/ req[r].pc = "Waiting" /\ req[r].key = k /\ e.st \notin {"Reserved", "Dispatching"}
    /\ CASE LiveBound(e) ->
              /\ table' = [table EXCEPT ![k].leases = @ + 1]
              /\ req' = [req EXCEPT ![r] = ReqAt("Holding", k, e.attempt)]
         [] e.st \in {"Reserved", "Dispatching"} ->
              /\ table' = table
              /\ req' = [req EXCEPT ![r] = ReqAt("Waiting", k, 0)]
         [] OTHER ->                      \* BUG: Quarantined lands here too
              IF Room(k)
              THEN /\ table' = [table EXCEPT ![k] = ReservedEntry(r, now + InitTimeout)]
                   /\ req' = [req EXCEPT ![r] = ReqAt("Reserved", k, 0)]
              ELSE /\ table' = table
                   /\ req' = [req EXCEPT ![r] = IdleReq]
    /\ UNCHANGED <<now, gen, nextAttempt>>

(* Accepts a stale attempt: Accepted is applied to whatever the key holds  *)
(* without checking that the attempt is still current.                     *)
BugCompleteAcceptsStale(r, o) ==
    LET k == req[r].key
        e == table[k] IN
    /\ req[r].pc \in {"Dispatching", "Late"}
    /\ CASE o = "Accepted" /\ e.target # NoTarget ->  \* BUG: no CurrentAttempt(r) check
              /\ table' = [table EXCEPT ![k] = BoundEntry(req[r].attempt, e.target, e.tgen, 1, now + TTL)]
              /\ req' = [req EXCEPT ![r] = ReqAt("Holding", k, req[r].attempt)]
         [] ~CurrentAttempt(r) ->
              /\ table' = table
              /\ req' = [req EXCEPT ![r] = IdleReq]
         [] o = "DefinitelyNotAccepted" /\ e.st = "Dispatching" ->
              /\ table' = [table EXCEPT ![k] = ReservedEntry(r, now + InitTimeout)]
              /\ req' = [req EXCEPT ![r] = ReqAt("Reserved", k, 0)]
         [] o = "DefinitelyNotAccepted" ->
              /\ table' = [table EXCEPT ![k] = AbsentEntry]
              /\ req' = [req EXCEPT ![r] = IdleReq]
         [] OTHER ->
              /\ table' = [table EXCEPT ![k] = QuarantinedEntry(e.attempt, e.target, e.tgen)]
              /\ req' = [req EXCEPT ![r] = IdleReq]
    /\ UNCHANGED <<now, gen, nextAttempt>>

(* Expires a leased binding: the idle deadline is honoured even while      *)
(* requests still hold leases.                                             *)
BugExpireLeased(k) ==
    /\ table[k].st = "Bound" /\ table[k].deadline <= now
    /\ table' = [table EXCEPT ![k] = AbsentEntry]
    /\ UNCHANGED <<now, gen, nextAttempt, req>>

(* Closes while other leases are active: the final request removes the    *)
(* binding at once (the anchor's claim layer did this).                    *)
BugCloseWhileLeased(r) ==
    /\ req[r].pc = "Holding"
    /\ table' = IF HoldsLease(r) THEN [table EXCEPT ![req[r].key] = AbsentEntry] ELSE table
    /\ req' = [req EXCEPT ![r] = IdleReq]
    /\ UNCHANGED <<now, gen, nextAttempt>>

(* Resolve fenced by attempt id only: a resolution naming the wrong       *)
(* generation is applied.                                                  *)
BugResolveIgnoresGeneration(k, a, g, o) ==
    LET e == table[k] IN
    /\ e.st = "Quarantined"
    /\ table' = IF a = e.attempt
                THEN [table EXCEPT ![k] = IF o = "Accepted"
                                          THEN BoundEntry(a, e.target, e.tgen, 0, now + TTL)
                                          ELSE AbsentEntry]
                ELSE table
    /\ UNCHANGED <<now, gen, nextAttempt, req>>

(* Capacity off by one: a full table still admits one more entry.         *)
BugRoomOffByOne(k) ==
    Cardinality({j \in Keys \ {k} : Occupies(table[j])}) <= Capacity
(* Waiters under weak fairness only: a waiter whose key is free only now  *)
(* and then may starve, so WaitersReturn must fail.                        *)
BugWeakWaiterFairness ==
    \A r \in Requests :
        /\ WF_vars(Cancel(r) \/ \E t \in Targets : BeginDispatch(r, t))
        /\ WF_vars(req[r].pc = "Dispatching" /\ \E o \in Outcomes : Complete(r, o))
        /\ WF_vars(req[r].pc = "Waiting" /\ Acquire(r, req[r].key))
=============================================================================
