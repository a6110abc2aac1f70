----------------------------- MODULE Placement -----------------------------
(***************************************************************************)
(* Session placement: one coordinator, a bounded table of keys.            *)
(*                                                                         *)
(* A request (a process r in Requests) reserves a key, dispatches to a     *)
(* provisional target under a fresh attempt id and that target's           *)
(* generation, and learns an outcome: Accepted commits the binding,        *)
(* DefinitelyNotAccepted rolls back to the reservation, Ambiguous          *)
(* quarantines the key until a late result or a fenced Resolve settles it, *)
(* its target's generation moves on, or its QuarantineTTL passes. Waiters  *)
(* queue: a freed key goes to the longest waiter. Bindings carry leases    *)
(* and an idle deadline, are fenced by the target's generation and close   *)
(* at the session's final request.                                         *)
(*                                                                         *)
(* The Go model in model/ mirrors this module action for action, with the  *)
(* same names; CI compares the two state spaces (see README.md here).      *)
(***************************************************************************)
EXTENDS Naturals, FiniteSets, Sequences

CONSTANTS
    Keys,          \* session keys
    Targets,       \* workers (with their data-parallel rank)
    Requests,      \* concurrent requests (client processes)
    NoKey,         \* model value: a request that names no key
    NoTarget,      \* model value: an entry that names no target
    NoReq,         \* model value: an entry that names no request
    MaxGen,        \* generations of a target range over 1..MaxGen
    Capacity,      \* the table holds at most Capacity live entries
    TTL,           \* idle time-to-live of a binding
    ReserveTimeout,  \* how long a reservation may take to dispatch (across retries)
    DispatchTimeLimit, \* how long one dispatch may take to learn its outcome
    QuarantineTTL, \* how long an unsettled (ambiguous) attempt blocks its key
    MaxClock,      \* the largest instant the clock can represent
    MaxAttempt     \* bound on dispatch attempts (model checking only)

ASSUME /\ Capacity \in Nat /\ TTL \in Nat \ {0}
       /\ ReserveTimeout \in Nat \ {0} /\ DispatchTimeLimit \in Nat \ {0} /\ QuarantineTTL \in Nat \ {0}
       /\ MaxGen \in Nat \ {0} /\ MaxClock \in Nat /\ MaxAttempt \in Nat

VARIABLES
    now,          \* the clock
    gen,          \* the target catalog: target -> current generation
    nextAttempt,  \* the next fresh attempt id (ids are never reused)
    table,        \* key -> entry
    req,          \* request -> what the request holds
    waitq,        \* key -> its waiting requests, longest waiter first
    since,        \* ghost: key -> when its current initialization or quarantine began (0 if none)
    arrivals,     \* ghost: key -> the requests waiting on it, in the order they began to wait
    step          \* ghost: the label of the step just taken (see Next)

vars == <<now, gen, nextAttempt, table, req, waitq>>

(* The ghost `step` records what happened, for the properties: which       *)
(* action, by whom, with which arguments (the outcome a target reported,   *)
(* the attempt and generation a Resolve named). It is set in Next, outside *)
(* every action, so a broken variant of an action (TLC's `Name <- Variant`)*)
(* cannot change it, and no action reads it. It is not part of the        *)
(* protocol's state: `View` leaves it out, so TLC and the Go model count   *)
(* and compare the same states.                                            *)
(* The ghost `since` records when each key's current phase began: its     *)
(* initialization (its reservation, dispatches and rollbacks), or its      *)
(* quarantine. The ghost `arrivals` records, for each key, the requests    *)
(* waiting on it in the order they began to wait. Both are set in Spec's   *)
(* next-state relation, outside every action, by definitions of their own  *)
(* (TrackSince, TrackArrivals: no action or definition an action uses), so *)
(* a broken variant cannot move them. They are part of the view, but       *)
(* functions of the protocol's state whenever the protocol is right, so    *)
(* they add no states to the correct configs.                              *)
allvars == <<vars, since, arrivals, step>>
View == <<vars, since, arrivals>>

EntryStates == {"Absent", "Reserved", "Dispatching", "Bound", "Quarantined"}
Pcs == {"Idle", "Waiting", "Reserved", "Revoked", "Dispatching", "Late", "Holding"}
Outcomes == {"Accepted", "DefinitelyNotAccepted", "Ambiguous"}
Resolutions == {"Accepted", "NotAccepted"}
Attempts == 1..MaxAttempt
Max(a, b) == IF a > b THEN a ELSE b

(* Entries have one shape; fields a state does not use hold their default. *)
(* `rdeadline` is the reservation's own deadline, set when the key is     *)
(* reserved and kept across its dispatches and rollbacks.                 *)
AbsentEntry == [st |-> "Absent", holder |-> NoReq, attempt |-> 0, target |-> NoTarget,
                tgen |-> 0, deadline |-> 0, rdeadline |-> 0, leases |-> 0, closing |-> FALSE]
ReservedEntry(r, d) ==
    [AbsentEntry EXCEPT !.st = "Reserved", !.holder = r, !.deadline = d, !.rdeadline = d]
DispatchingEntry(r, a, t, g, d, rd) ==
    [AbsentEntry EXCEPT !.st = "Dispatching", !.holder = r, !.attempt = a,
                        !.target = t, !.tgen = g, !.deadline = d, !.rdeadline = rd]
QuarantinedEntry(a, t, g, d) ==
    [AbsentEntry EXCEPT !.st = "Quarantined", !.attempt = a, !.target = t, !.tgen = g, !.deadline = d]
BoundEntry(a, t, g, n, d) ==
    [AbsentEntry EXCEPT !.st = "Bound", !.attempt = a, !.target = t, !.tgen = g,
                        !.leases = n, !.deadline = d]

(* What a request holds: nothing, a wait, a reservation (possibly revoked  *)
(* by the initialization timeout), a dispatch guard (Late once its attempt *)
(* was quarantined), or a lease on binding version `attempt`.              *)
IdleReq == [pc |-> "Idle", key |-> NoKey, attempt |-> 0]
ReqAt(pc, k, a) == [pc |-> pc, key |-> k, attempt |-> a]

(* A Bound entry is expired when idle past its deadline and stale when its *)
(* target's generation moved on. Both count as absent. So does a           *)
(* quarantine that is over: its QuarantineTTL passed (its deadline), or     *)
(* its target's generation moved on (the binding it could still produce    *)
(* would be stale at birth).                                               *)
Expired(e) == e.st = "Bound" /\ e.leases = 0 /\ e.deadline <= now
Stale(e) == e.st = "Bound" /\ gen[e.target] # e.tgen
LiveBound(e) == e.st = "Bound" /\ ~Expired(e) /\ ~Stale(e)
QuarantineDue(e) == e.st = "Quarantined" /\ e.deadline <= now
StaleQuarantine(e) == e.st = "Quarantined" /\ gen[e.target] # e.tgen
LiveQuarantine(e) == e.st = "Quarantined" /\ ~QuarantineDue(e) /\ ~StaleQuarantine(e)
Initializing(e) == e.st \in {"Reserved", "Dispatching"}
(* When a dispatch's attempt becomes ambiguous (an Ambiguous report or its *)
(* timeout): now, or its deadline if that has passed. A quarantine holds   *)
(* for QuarantineTTL from then, however late the timeout is applied.       *)
Began(e) == IF e.st = "Dispatching" /\ e.deadline <= now THEN e.deadline ELSE now
Occupies(e) == Initializing(e) \/ LiveQuarantine(e) \/ LiveBound(e)
(* A free key: nothing live holds it, so the next Acquire may reserve it.  *)
Free(e) == ~Occupies(e)
Room(k) == Cardinality({j \in Keys \ {k} : Occupies(table[j])}) < Capacity

Label(act, r, k, t, a, g, o, time) ==
    [act |-> act, r |-> r, k |-> k, t |-> t, a |-> a, g |-> g, o |-> o, time |-> time]

Init ==
    /\ now = 0
    /\ gen = [t \in Targets |-> 1]
    /\ nextAttempt = 1
    /\ table = [k \in Keys |-> AbsentEntry]
    /\ req = [r \in Requests |-> IdleReq]
    /\ waitq = [k \in Keys |-> <<>>]
    /\ since = [k \in Keys |-> 0]
    /\ arrivals = [k \in Keys |-> <<>>]
    /\ step = Label("Init", NoReq, NoKey, NoTarget, 0, 0, "None", 0)

-----------------------------------------------------------------------------
(* The waiters of a key queue in arrival order. A waiter leaves the queue *)
(* when it returns; a freed key belongs to the longest waiter (the head): *)
(* only it may reserve the key, and a newcomer queues behind it. So a     *)
(* waiter is never overtaken, and weak fairness is enough for it to       *)
(* return (WaitersReturn).                                                *)
Leaves(r, k) == waitq' = [waitq EXCEPT ![k] = SelectSeq(@, LAMBDA x : x # r)]
Joins(r, k) == waitq' = [waitq EXCEPT ![k] = Append(@, r)]

(* Acquire(r, k): an idle request asks for key k, or a waiter on k asks     *)
(* again after k changed (a freed key: only the longest waiter).            *)
Acquire(r, k) ==
    LET e == table[k] IN
    /\ \/ req[r].pc = "Idle"
       \/ /\ req[r].pc = "Waiting" /\ req[r].key = k /\ ~Initializing(e)
          /\ Free(e) => Head(waitq[k]) = r
    /\ CASE LiveBound(e) ->                                  \* hit: take a lease
              /\ table' = [table EXCEPT ![k].leases = @ + 1]
              /\ req' = [req EXCEPT ![r] = ReqAt("Holding", k, e.attempt)]
              /\ Leaves(r, k)
         [] Initializing(e) \/ (Free(e) /\ req[r].pc = "Idle" /\ waitq[k] # <<>>) ->
              /\ table' = table                              \* someone initializes, or
              /\ req' = [req EXCEPT ![r] = ReqAt("Waiting", k, 0)] \* waiters are ahead: wait
              /\ Joins(r, k)
         [] LiveQuarantine(e) ->                             \* Ambiguous error
              /\ table' = table
              /\ req' = [req EXCEPT ![r] = IdleReq]
              /\ Leaves(r, k)
         [] OTHER ->                                         \* absent, expired, stale or over
              /\ IF Room(k)
                 THEN /\ table' = [table EXCEPT ![k] = ReservedEntry(r, now + ReserveTimeout)]
                      /\ req' = [req EXCEPT ![r] = ReqAt("Reserved", k, 0)]
                 ELSE /\ table' = table                      \* Capacity error
                      /\ req' = [req EXCEPT ![r] = IdleReq]
              /\ Leaves(r, k)
    /\ UNCHANGED <<now, gen, nextAttempt>>

HoldsReservation(r) ==
    LET e == table[req[r].key] IN e.st = "Reserved" /\ e.holder = r

(* Cancel(r): the initializer gives up before dispatching. A revoked       *)
(* reservation is an error that changes nothing.                           *)
Cancel(r) ==
    /\ req[r].pc \in {"Reserved", "Revoked"}
    /\ table' = IF HoldsReservation(r)
                THEN [table EXCEPT ![req[r].key] = AbsentEntry]
                ELSE table
    /\ req' = [req EXCEPT ![r] = IdleReq]
    /\ UNCHANGED <<now, gen, nextAttempt, waitq>>

(* BeginDispatch(r, t): dispatch to t under a fresh attempt id and t's     *)
(* current generation, before the reservation's deadline (past it, the     *)
(* reservation is due to time out). The dispatch has DispatchTimeLimit to *)
(* learn its outcome.                                                      *)
BeginDispatch(r, t) ==
    LET k == req[r].key IN
    /\ req[r].pc \in {"Reserved", "Revoked"}
    /\ IF HoldsReservation(r)
       THEN /\ now < table[k].deadline
            /\ nextAttempt \in Attempts
            /\ table' = [table EXCEPT ![k] =
                    DispatchingEntry(r, nextAttempt, t, gen[t], now + DispatchTimeLimit, table[k].rdeadline)]
            /\ req' = [req EXCEPT ![r] = ReqAt("Dispatching", k, nextAttempt)]
            /\ nextAttempt' = nextAttempt + 1
       ELSE /\ table' = table                                \* reservation lost
            /\ req' = [req EXCEPT ![r] = IdleReq]
            /\ UNCHANGED nextAttempt
    /\ UNCHANGED <<now, gen, waitq>>

(* The attempt a dispatch guard names is current while its key is still   *)
(* Dispatching, or Quarantined and the quarantine is not over, under that *)
(* attempt.                                                                *)
CurrentAttempt(r) ==
    LET e == table[req[r].key] IN
    (e.st = "Dispatching" \/ LiveQuarantine(e)) /\ e.attempt = req[r].attempt

(* Complete(r, o): the dispatcher learns outcome o. A stale attempt is      *)
(* fenced; a late result settles a quarantined attempt.                     *)
Complete(r, o) ==
    LET k == req[r].key
        e == table[k] IN
    /\ req[r].pc \in {"Dispatching", "Late"}
    /\ IF ~CurrentAttempt(r)
       THEN /\ table' = table                                \* fenced
            /\ req' = [req EXCEPT ![r] = IdleReq]
       ELSE CASE o = "Accepted" ->
                   /\ table' = [table EXCEPT ![k] = BoundEntry(e.attempt, e.target, e.tgen, 1, now + TTL)]
                   /\ req' = [req EXCEPT ![r] = ReqAt("Holding", k, e.attempt)]
              [] o = "DefinitelyNotAccepted" /\ e.st = "Dispatching" ->  \* the reservation's own deadline
                   /\ table' = [table EXCEPT ![k] = ReservedEntry(r, e.rdeadline)]
                   /\ req' = [req EXCEPT ![r] = ReqAt("Reserved", k, 0)]
              [] o = "DefinitelyNotAccepted" ->              \* late: settles to absent
                   /\ table' = [table EXCEPT ![k] = AbsentEntry]
                   /\ req' = [req EXCEPT ![r] = IdleReq]
              [] e.st = "Quarantined" ->                     \* late Ambiguous: changes nothing
                   /\ table' = table
                   /\ req' = [req EXCEPT ![r] = IdleReq]
              [] OTHER ->                                    \* Ambiguous: quarantine
                   /\ table' = [table EXCEPT ![k] =
                          QuarantinedEntry(e.attempt, e.target, e.tgen, Began(e) + QuarantineTTL)]
                   /\ req' = [req EXCEPT ![r] = IdleReq]
    /\ UNCHANGED <<now, gen, nextAttempt, waitq>>

(* Resolve(k, a, g, o): settle a quarantined key, fenced by attempt id and *)
(* generation; a mismatch, or a quarantine that is over, is rejected and   *)
(* changes nothing.                                                        *)
Resolve(k, a, g, o) ==
    LET e == table[k] IN
    /\ e.st = "Quarantined"
    /\ table' = IF LiveQuarantine(e) /\ a = e.attempt /\ g = e.tgen
                THEN [table EXCEPT ![k] = IF o = "Accepted"
                                          THEN BoundEntry(a, e.target, g, 0, now + TTL)
                                          ELSE AbsentEntry]
                ELSE table
    /\ UNCHANGED <<now, gen, nextAttempt, req, waitq>>

HoldsLease(r) ==
    LET e == table[req[r].key] IN e.st = "Bound" /\ e.attempt = req[r].attempt

(* Ending a lease: the count drops; a closing binding goes at its last     *)
(* lease; a lease on a superseded version changes nothing but itself.      *)
EndLease(r, refresh) ==
    LET k == req[r].key
        e == table[k] IN
    /\ req[r].pc = "Holding"
    /\ table' = IF ~HoldsLease(r) THEN table
                ELSE IF e.leases = 1 /\ e.closing
                THEN [table EXCEPT ![k] = AbsentEntry]
                ELSE [table EXCEPT ![k].leases = @ - 1,
                                   ![k].deadline = IF refresh /\ e.leases = 1
                                                   THEN now + TTL ELSE @]
    /\ req' = [req EXCEPT ![r] = IdleReq]
    /\ UNCHANGED <<now, gen, nextAttempt, waitq>>

Release(r) == EndLease(r, TRUE)
Abandon(r) == EndLease(r, FALSE)

(* Invalidate(r): the binding is bad; remove it if still current.         *)
Invalidate(r) ==
    /\ req[r].pc = "Holding"
    /\ IF HoldsLease(r)
       THEN /\ table' = [table EXCEPT ![req[r].key] = AbsentEntry]
            /\ req' = [req EXCEPT ![r] = IdleReq]
            /\ UNCHANGED <<now, gen, nextAttempt, waitq>>
       ELSE Release(r)

(* Close(r): the session's final request. The binding is removed when its *)
(* last lease ends, never while others still hold leases.                 *)
Close(r) ==
    LET k == req[r].key
        e == table[k] IN
    /\ req[r].pc = "Holding"
    /\ table' = IF ~HoldsLease(r) THEN table
                ELSE IF e.leases = 1
                THEN [table EXCEPT ![k] = AbsentEntry]
                ELSE [table EXCEPT ![k].leases = @ - 1, ![k].closing = TRUE]
    /\ req' = [req EXCEPT ![r] = IdleReq]
    /\ UNCHANGED <<now, gen, nextAttempt, waitq>>

InvalidateKey(k) ==
    /\ table[k].st = "Bound"
    /\ table' = [table EXCEPT ![k] = AbsentEntry]
    /\ UNCHANGED <<now, gen, nextAttempt, req, waitq>>

(* Expire(k): an idle binding past its deadline is reclaimed (lazily on   *)
(* access and by the reaper).                                             *)
Expire(k) ==
    /\ Expired(table[k])
    /\ table' = [table EXCEPT ![k] = AbsentEntry]
    /\ UNCHANGED <<now, gen, nextAttempt, req, waitq>>

(* DropStale(k): a binding whose target's generation moved on is removed, *)
(* leases or not (the reaper's eager half of the generation fence), and   *)
(* so is a quarantine whose target's generation moved on.                 *)
DropStale(k) ==
    /\ Stale(table[k]) \/ StaleQuarantine(table[k])
    /\ table' = [table EXCEPT ![k] = AbsentEntry]
    /\ UNCHANGED <<now, gen, nextAttempt, req, waitq>>

(* QuarantineExpire(k): a quarantine past its QuarantineTTL ends: the key *)
(* is absent (the operator's bound on how long a possibly-accepted request *)
(* may block a replay). The late guard, if any, is fenced from then on.   *)
QuarantineExpire(k) ==
    /\ QuarantineDue(table[k])
    /\ table' = [table EXCEPT ![k] = AbsentEntry]
    /\ UNCHANGED <<now, gen, nextAttempt, req, waitq>>

(* ReservationTimeout(k): reserved too long -> absent; the holder's       *)
(* reservation is revoked.                                                *)
ReservationTimeout(k) ==
    LET e == table[k] IN
    /\ e.st = "Reserved" /\ e.deadline <= now
    /\ table' = [table EXCEPT ![k] = AbsentEntry]
    /\ req' = [req EXCEPT ![e.holder].pc = "Revoked"]
    /\ UNCHANGED <<now, gen, nextAttempt, waitq>>

(* DispatchTimeout(k): dispatching too long -> quarantined; the guard is  *)
(* now late and may still deliver the real result. The quarantine's       *)
(* QuarantineTTL counts from the dispatch's deadline (Began), however late *)
(* the timeout is applied (lazily on access, or by the reaper).           *)
DispatchTimeout(k) ==
    LET e == table[k] IN
    /\ e.st = "Dispatching" /\ e.deadline <= now
    /\ table' = [table EXCEPT ![k] = QuarantinedEntry(e.attempt, e.target, e.tgen, Began(e) + QuarantineTTL)]
    /\ req' = [req EXCEPT ![e.holder].pc = "Late"]
    /\ UNCHANGED <<now, gen, nextAttempt, waitq>>

(* Bump(t): target t left or rejoined; its generation moves on.           *)
Bump(t) ==
    /\ gen[t] < MaxGen
    /\ gen' = [gen EXCEPT ![t] = @ + 1]
    /\ UNCHANGED <<now, nextAttempt, table, req, waitq>>

(* Advance(t): the clock moves forward to t. Going backwards, or to a time *)
(* whose deadlines would not be representable, is rejected.               *)
MaxDelay == Max(Max(TTL, QuarantineTTL), Max(ReserveTimeout, DispatchTimeLimit))
Advance(t) ==
    /\ t > now
    /\ t + MaxDelay <= MaxClock
    /\ now' = t
    /\ UNCHANGED <<gen, nextAttempt, table, req, waitq>>

(* Each disjunct takes one action and records its label in `step`.       *)
Did(act, r, k, t, a, g, o, time) == step' = Label(act, r, k, t, a, g, o, time)
ByReq(act, r) == Did(act, r, NoKey, NoTarget, 0, 0, "None", 0)
OnKey(act, k) == Did(act, NoReq, k, NoTarget, 0, 0, "None", 0)

Next ==
    \/ \E r \in Requests, k \in Keys : Acquire(r, k) /\ Did("Acquire", r, k, NoTarget, 0, 0, "None", 0)
    \/ \E r \in Requests : Cancel(r) /\ ByReq("Cancel", r)
    \/ \E r \in Requests, t \in Targets : BeginDispatch(r, t) /\ Did("BeginDispatch", r, NoKey, t, 0, 0, "None", 0)
    \/ \E r \in Requests, o \in Outcomes : Complete(r, o) /\ Did("Complete", r, NoKey, NoTarget, 0, 0, o, 0)
    \/ \E k \in Keys, a \in Attempts, g \in 1..MaxGen, o \in Resolutions : Resolve(k, a, g, o) /\ Did("Resolve", NoReq, k, NoTarget, a, g, o, 0)
    \/ \E r \in Requests : Release(r) /\ ByReq("Release", r)
    \/ \E r \in Requests : Abandon(r) /\ ByReq("Abandon", r)
    \/ \E r \in Requests : Invalidate(r) /\ ByReq("Invalidate", r)
    \/ \E r \in Requests : Close(r) /\ ByReq("Close", r)
    \/ \E k \in Keys : InvalidateKey(k) /\ OnKey("InvalidateKey", k)
    \/ \E k \in Keys : Expire(k) /\ OnKey("Expire", k)
    \/ \E k \in Keys : DropStale(k) /\ OnKey("DropStale", k)
    \/ \E k \in Keys : QuarantineExpire(k) /\ OnKey("QuarantineExpire", k)
    \/ \E k \in Keys : ReservationTimeout(k) /\ OnKey("ReservationTimeout", k)
    \/ \E k \in Keys : DispatchTimeout(k) /\ OnKey("DispatchTimeout", k)
    \/ \E t \in Targets : Bump(t) /\ Did("Bump", NoReq, NoKey, t, 0, 0, "None", 0)
    \/ \E t \in 0..MaxClock : Advance(t) /\ Did("Advance", NoReq, NoKey, NoTarget, 0, 0, "None", t)

(* Fairness of the clients: a holder of a reservation or a dispatch guard  *)
(* eventually acts on it; a waiter that can retry, and stays able to,      *)
(* eventually retries. Weak fairness is enough: a freed key waits for its  *)
(* longest waiter, so once a waiter's turn comes its retry stays enabled.  *)
ClientFairness ==
    \A r \in Requests :
        /\ WF_vars(Cancel(r) \/ \E t \in Targets : BeginDispatch(r, t))
        /\ WF_vars(req[r].pc = "Dispatching" /\ \E o \in Outcomes : Complete(r, o))
        /\ WF_vars(req[r].pc = "Waiting" /\ Acquire(r, req[r].key))

(* Fairness of the system's own actions: the clock moves on while it can, *)
(* timeouts fire, and the reaper reclaims what expired. (The clock is     *)
(* bounded: a deadline past its last value can never fire.)               *)
SystemFairness ==
    /\ \A k \in Keys :
         /\ WF_vars(Expire(k)) /\ WF_vars(DropStale(k))
         /\ WF_vars(ReservationTimeout(k)) /\ WF_vars(DispatchTimeout(k))
         /\ WF_vars(QuarantineExpire(k))
    /\ WF_vars(\E t \in 0..MaxClock : Advance(t))

Fairness == ClientFairness /\ SystemFairness

-----------------------------------------------------------------------------
(* The ghosts, kept outside every action and written with definitions of  *)
(* their own: no action, and no definition an action uses (Began, Joins,   *)
(* Leaves, ...), so a broken variant of one cannot move the ghost with it. *)

(* since: a key that starts a phase (initializing: reserved from any     *)
(* other state; quarantined) records when; one that ends it forgets. A     *)
(* phase begins now, except a quarantine whose dispatch was past its       *)
(* deadline: its attempt became ambiguous at that deadline, however late   *)
(* the timeout (or the Ambiguous report) is applied.                       *)
Phase(e) == IF e.st \in {"Reserved", "Dispatching"} THEN "Init"
            ELSE IF e.st = "Quarantined" THEN "Quarantine" ELSE "None"
PhaseStart(k) ==
    IF table[k].st = "Dispatching" /\ table[k].deadline <= now THEN table[k].deadline ELSE now
TrackSince ==
    since' = [k \in Keys |-> IF Phase(table'[k]) = "None" THEN 0
                             ELSE IF Phase(table[k]) = Phase(table'[k]) THEN since[k]
                             ELSE PhaseStart(k)]

(* arrivals: said of what the requests hold only (req and req'). A request *)
(* that stops waiting on k leaves k's sequence; one that begins to wait on *)
(* k is appended. Only Acquire(r, k) makes a request wait, one at a time;  *)
(* should a step make several begin to wait on one key, none is appended,  *)
(* and WaitQueuesMatchWaiters reports it.                                  *)
WaitsOn(q, k) == q.pc = "Waiting" /\ q.key = k
BeganToWait(k) == {x \in Requests : WaitsOn(req'[x], k) /\ ~WaitsOn(req[x], k)}
TrackArrivals ==
    arrivals' = [k \in Keys |->
                   SelectSeq(arrivals[k], LAMBDA x : WaitsOn(req'[x], k))
                   \o IF Cardinality(BeganToWait(k)) = 1
                      THEN <<CHOOSE x \in BeganToWait(k) : TRUE>> ELSE <<>>]

Spec == Init /\ [][Next /\ TrackSince /\ TrackArrivals]_allvars /\ Fairness

-----------------------------------------------------------------------------
(* What the properties below promise is said with these definitions, the  *)
(* ghosts and the step's label only, never with the actions or the         *)
(* definitions actions use (Room, LiveBound, CurrentAttempt, Began, ...),  *)
(* however indirectly: a broken variant replaces an action or one of its   *)
(* definitions, and must not thereby change what it is judged against.     *)
(* model/owndefs_test.go checks it, transitively, here and in the model.   *)

(* A binding is live: bound, its target still at the binding's generation, *)
(* and not idle past its deadline.                                         *)
IsLive(e) == e.st = "Bound" /\ gen[e.target] = e.tgen /\ ~(e.leases = 0 /\ e.deadline <= now)
(* An attempt is in flight or quarantined: not yet settled.                *)
InFlight(e) == e.st \in {"Dispatching", "Quarantined"}
(* Key k's quarantine still holds: its target is at the attempt's         *)
(* generation and QuarantineTTL has not passed since it began (`since`).  *)
QuarantineHolds(k) ==
    /\ table[k].st = "Quarantined" /\ gen[table[k].target] = table[k].tgen
    /\ now < since[k] + QuarantineTTL
(* Key k takes one of the table's places.                                  *)
TakesPlace(k) ==
    table[k].st \in {"Reserved", "Dispatching"} \/ QuarantineHolds(k) \/ IsLive(table[k])
PlacesTaken(S) == Cardinality({j \in S : TakesPlace(j)})
(* Request r's dispatch guard names its key's unsettled attempt, and that *)
(* attempt may still settle: the key is dispatching it, or its quarantine *)
(* holds. A quarantine that is over (QuarantineTTL passed, or its target's *)
(* generation moved on) fences the late guard like a superseded attempt.  *)
GuardIsCurrent(r) ==
    LET k == req[r].key IN
    /\ table[k].attempt = req[r].attempt
    /\ table[k].st = "Dispatching" \/ QuarantineHolds(k)
(* A Resolve naming attempt a and generation g may settle key k: its      *)
(* quarantine holds, under that attempt and generation.                    *)
ResolveIsCurrent(k, a, g) ==
    QuarantineHolds(k) /\ a = table[k].attempt /\ g = table[k].tgen
(* Key k keeps its binding version, or its unsettled attempt, in the step. *)
KeepsBinding(k) ==
    table[k].st = "Bound" /\ table'[k].st = "Bound" /\ table'[k].attempt = table[k].attempt
KeepsAttempt(k) ==
    InFlight(table[k]) /\ InFlight(table'[k]) /\ table'[k].attempt = table[k].attempt
(* The step settles the attempt a on key k: its dispatcher reports a       *)
(* definite outcome, or a Resolve names the attempt and its generation.    *)
Settles(k, a) ==
    \/ /\ step'.act = "Complete" /\ step'.o \in {"Accepted", "DefinitelyNotAccepted"}
       /\ req[step'.r].key = k /\ req[step'.r].attempt = a
    \/ /\ step'.act = "Resolve" /\ step'.k = k /\ step'.a = a /\ step'.g = table[k].tgen
(* The step is request r ending its lease.                                 *)
EndsLease(r) == step'.act \in {"Release", "Abandon", "Invalidate", "Close"} /\ step'.r = r
(* The step releases the last lease on key k's binding (a Release through *)
(* a lease on its version): the binding becomes idle now.                  *)
ReleasesLastLease(k) ==
    /\ step'.act = "Release" /\ req[step'.r].key = k
    /\ req[step'.r].attempt = table[k].attempt /\ table[k].leases = 1

-----------------------------------------------------------------------------
(* Invariants: state predicates that hold in every reachable state.        *)

TypeOK ==
    /\ now \in 0..MaxClock
    /\ gen \in [Targets -> 1..MaxGen]
    /\ nextAttempt \in 1..(MaxAttempt + 1)
    /\ \A k \in Keys :
         /\ table[k].st \in EntryStates
         /\ table[k].leases \in Nat
         /\ table[k].attempt \in 0..(nextAttempt - 1)
    /\ \A r \in Requests : req[r].pc \in Pcs /\ req[r].attempt \in 0..(nextAttempt - 1)

(* At most one request believes it initializes a key, and the table's      *)
(* Reserved/Dispatching entries name exactly that request and attempt.     *)
OneInitializer ==
    /\ \A k \in Keys :
         Cardinality({r \in Requests : req[r].key = k /\ req[r].pc \in {"Reserved", "Dispatching"}}) <= 1
    /\ \A r \in Requests :
         /\ req[r].pc = "Reserved" =>
              table[req[r].key].st = "Reserved" /\ table[req[r].key].holder = r
         /\ req[r].pc = "Dispatching" =>
              table[req[r].key].st = "Dispatching" /\ table[req[r].key].holder = r
              /\ table[req[r].key].attempt = req[r].attempt
    /\ \A k \in Keys :
         table[k].st \in {"Reserved", "Dispatching"} =>
            /\ table[k].holder \in Requests
            /\ req[table[k].holder].key = k
            /\ req[table[k].holder].pc = table[k].st

(* The wait queues hold exactly the waiting requests, each once, on the   *)
(* key it waits for, in the order they began to wait (the ghost            *)
(* `arrivals`).                                                            *)
WaitQueuesMatchWaiters ==
    \A k \in Keys :
        /\ \A i, j \in 1..Len(waitq[k]) : i # j => waitq[k][i] # waitq[k][j]
        /\ {waitq[k][i] : i \in 1..Len(waitq[k])} =
              {r \in Requests : req[r].pc = "Waiting" /\ req[r].key = k}
        /\ waitq[k] = arrivals[k]

(* Leases are never negative and equal the outstanding lease handles on    *)
(* the current binding version; other entry states hold no leases.         *)
LeasesMatchHandles ==
    \A k \in Keys :
        table[k].leases =
            IF table[k].st = "Bound"
            THEN Cardinality({r \in Requests : req[r].pc = "Holding" /\ req[r].key = k
                                              /\ req[r].attempt = table[k].attempt})
            ELSE 0

(* At most one binding per key, and every lease refers to it or to a       *)
(* superseded version: an attempt id a lease names is never in flight or   *)
(* quarantined, and no lease names a version newer than its key's binding. *)
LeasesReferToBinding ==
    \A r \in Requests : req[r].pc = "Holding" =>
        LET e == table[req[r].key] IN
        /\ req[r].attempt >= 1
        /\ e.attempt = req[r].attempt => e.st = "Bound"
        /\ e.st = "Bound" => req[r].attempt <= e.attempt

(* Live entries (reserved, dispatching, quarantined, or bound and neither  *)
(* expired nor stale) never exceed the table's capacity.                   *)
WithinCapacity == PlacesTaken(Keys) <= Capacity

(* An initialization ends within ReserveTimeout + DispatchTimeLimit of   *)
(* its start, however many times its target answers DefinitelyNotAccepted:*)
(* every deadline it carries (reservation or dispatch) is at most          *)
(* since + ReserveTimeout + DispatchTimeLimit.                             *)
InitializationBounded ==
    \A k \in Keys : table[k].st \in {"Reserved", "Dispatching"} =>
        table[k].deadline <= since[k] + ReserveTimeout + DispatchTimeLimit

(* A closing binding still has a lease: the end of its last lease removes *)
(* it, so it never lingers, closed, with none.                            *)
ClosingHoldsALease ==
    \A k \in Keys : table[k].st = "Bound" /\ table[k].closing => table[k].leases >= 1

-----------------------------------------------------------------------------
(* Action properties: what every step must respect, said of the state, the *)
(* next state and the step's label. `[][P]_allvars` checks every step that *)
(* changes the state or names a new step, so a refusal that changes       *)
(* nothing is judged too.                                                  *)

(* A key becomes Bound, or changes binding version, only when the target  *)
(* reported Accepted for that very attempt while it was unsettled on the  *)
(* key (by its dispatcher, in time or late), or a Resolve that named the  *)
(* attempt and its generation said Accepted.                               *)
BoundOnlyIfAccepted ==
    [][\A k \in Keys : table'[k].st = "Bound" /\ ~KeepsBinding(k) =>
          \/ /\ step'.act = "Complete" /\ step'.o = "Accepted"
             /\ req[step'.r].key = k /\ GuardIsCurrent(step'.r)
             /\ table'[k].attempt = req[step'.r].attempt
          \/ /\ step'.act = "Resolve" /\ step'.o = "Accepted" /\ step'.k = k
             /\ ResolveIsCurrent(k, step'.a, step'.g)
             /\ table'[k].attempt = step'.a]_allvars

(* An unsettled attempt stays visible: a dispatching or quarantined key    *)
(* keeps its attempt (Dispatching or Quarantined) until the attempt is     *)
(* settled, or, once quarantined, until its target's generation moves on  *)
(* or QuarantineTTL has passed since the quarantine began; never before.  *)
(* An Ambiguous report, a dispatch timeout or a newcomer never clears it,  *)
(* so nothing is dispatched again while the target may have accepted.     *)
UnsettledStaysVisible ==
    [][\A k \in Keys : InFlight(table[k]) /\ ~KeepsAttempt(k) =>
          \/ Settles(k, table[k].attempt)
          \/ table[k].st = "Quarantined" /\ ~QuarantineHolds(k)]_allvars

(* A completion or a Resolve that names an attempt (or a generation) that *)
(* is not the key's unsettled one, or whose quarantine is over (its       *)
(* QuarantineTTL passed since it began, or its target's generation moved  *)
(* on), changes nothing in the table.                                      *)
FencedChangesNothing ==
    [][/\ (step'.act = "Complete" /\ ~GuardIsCurrent(step'.r)) => table' = table
       /\ (step'.act = "Resolve" /\ ~ResolveIsCurrent(step'.k, step'.a, step'.g))
             => table' = table]_allvars

(* Every dispatch uses a fresh attempt id and the target's current         *)
(* generation, and an attempt keeps its target and generation for as long  *)
(* as it is in flight, quarantined or bound.                               *)
DispatchedUnderCurrentGeneration ==
    [][\A k \in Keys :
          /\ (table'[k].st = "Dispatching" /\ ~KeepsAttempt(k)) =>
                /\ step'.act = "BeginDispatch" /\ table'[k].target = step'.t
                /\ table'[k].tgen = gen[step'.t]
                /\ table'[k].attempt = nextAttempt /\ nextAttempt' > nextAttempt
          /\ (table[k].st \in {"Dispatching", "Quarantined", "Bound"}
              /\ table'[k].st \in {"Dispatching", "Quarantined", "Bound"}
              /\ table'[k].attempt = table[k].attempt) =>
                table'[k].target = table[k].target /\ table'[k].tgen = table[k].tgen]_allvars

(* A hit takes a lease only on a live binding, and names that binding.   *)
LeasesOnlyOnLiveBindings ==
    [][(step'.act = "Acquire" /\ req'[step'.r].pc = "Holding") =>
          IsLive(table[step'.k]) /\ req'[step'.r].attempt = table[step'.k].attempt]_allvars

(* Ending a lease on a superseded binding version changes nothing in the  *)
(* table: a lease acts only on its own version.                          *)
LeaseActsOnlyOnItsVersion ==
    [][\A r \in Requests :
          (EndsLease(r) /\ table[req[r].key].attempt # req[r].attempt) => table' = table]_allvars

(* A leased binding ends only through its own leases (Invalidate, or the *)
(* last lease ending while it is closing or by Close), an invalidation of *)
(* its key, or its target's generation moving on.                         *)
LeasedBindingEndsOnlyByLeaseInvalidationOrGeneration ==
    [][\A k \in Keys : table[k].st = "Bound" /\ table[k].leases > 0 /\ ~KeepsBinding(k) =>
          \/ gen[table[k].target] # table[k].tgen
          \/ step'.act = "InvalidateKey" /\ step'.k = k
          \/ \E r \in Requests :
                /\ EndsLease(r) /\ req[r].key = k /\ req[r].attempt = table[k].attempt
                /\ \/ step'.act = "Invalidate"
                   \/ table[k].leases = 1 /\ (table[k].closing \/ step'.act = "Close")]_allvars

(* Deadlines are respected: an idle, current binding leaves before its   *)
(* deadline only by an invalidation; a reservation or a dispatch changes  *)
(* before its deadline only by its holder's own step, and a reservation   *)
(* is taken from its holder no earlier than ReserveTimeout after the key  *)
(* was reserved (`since`), however often it was dispatched and rolled back.*)
DeadlinesRespected ==
    [][\A k \in Keys :
          /\ (/\ table[k].st = "Bound" /\ table[k].leases = 0
              /\ gen[table[k].target] = table[k].tgen /\ ~KeepsBinding(k)
              /\ ~(step'.act = "InvalidateKey" /\ step'.k = k)) => table[k].deadline <= now
          /\ (/\ table[k].st \in {"Reserved", "Dispatching"} /\ table'[k] # table[k]
              /\ step'.r # table[k].holder) => table[k].deadline <= now
          /\ (/\ table[k].st = "Reserved" /\ table'[k] # table[k]
              /\ step'.r # table[k].holder) => now >= since[k] + ReserveTimeout]_allvars

(* Every deadline is the one its timeout sets. A reservation's is          *)
(* ReserveTimeout after the key was reserved (`since`), also after a       *)
(* DefinitelyNotAccepted rollback; a dispatch's is DispatchTimeLimit after *)
(* it began, and stays so while it dispatches; a binding's is TTL after it *)
(* was born (Accepted, in time or late, or a Resolve) or after its last    *)
(* lease was released, and stays so otherwise; a quarantine's is           *)
(* QuarantineTTL after it began (`since`).                                 *)
DeadlinesMatchTimeouts ==
    [][\A k \in Keys :
          /\ table'[k].st = "Reserved" => table'[k].deadline = since'[k] + ReserveTimeout
          /\ table'[k].st = "Quarantined" => table'[k].deadline = since'[k] + QuarantineTTL
          /\ table'[k].st = "Dispatching" =>
                table'[k].deadline = IF table[k].st = "Dispatching" /\ KeepsAttempt(k)
                                     THEN table[k].deadline ELSE now + DispatchTimeLimit
          /\ table'[k].st = "Bound" =>
                table'[k].deadline = IF KeepsBinding(k) /\ ~ReleasesLastLease(k)
                                     THEN table[k].deadline ELSE now + TTL]_allvars

(* A dispatch begins strictly before ReserveTimeout has passed since its   *)
(* key was reserved (`since`): at the reservation's deadline the           *)
(* reservation is due to time out, not to dispatch.                        *)
DispatchedBeforeReservationDeadline ==
    [][\A k \in Keys : table'[k].st = "Dispatching" /\ ~KeepsAttempt(k) =>
          now < since[k] + ReserveTimeout]_allvars

(* A request is refused for capacity only when the other keys take every  *)
(* place in the table.                                                     *)
RefusedOnlyWhenFull ==
    [][(step'.act = "Acquire" /\ req'[step'.r].pc = "Idle" /\ ~QuarantineHolds(step'.k)) =>
          PlacesTaken(Keys \ {step'.k}) >= Capacity]_allvars

(* First come, first served: a key that was not initializing is reserved  *)
(* only by the request that has waited on it longest, if any waits: the   *)
(* first of the ghost `arrivals`, not the head of the queue the actions   *)
(* keep.                                                                   *)
WaitersServedInOrder ==
    [][\A k \in Keys :
          (/\ table[k].st \notin {"Reserved", "Dispatching"} /\ table'[k].st = "Reserved"
           /\ arrivals[k] # <<>>) => step'.r = Head(arrivals[k])]_allvars

-----------------------------------------------------------------------------
(* Liveness under Fairness.                                                *)
ReservationsEnd == \A r \in Requests : req[r].pc = "Reserved" ~> req[r].pc # "Reserved"
DispatchesEnd == \A r \in Requests : req[r].pc = "Dispatching" ~> req[r].pc # "Dispatching"
WaitersReturn == \A r \in Requests : req[r].pc = "Waiting" ~> req[r].pc # "Waiting"

(* What expires is reclaimed: an idle binding past its deadline, and an    *)
(* initialization past its deadline, do not stay so. No client has to act: *)
(* the system's own fairness (the reaper, the timeouts) sees to it.        *)
IdlePastDeadline(k) ==
    table[k].st = "Bound" /\ table[k].leases = 0 /\ table[k].deadline <= now
InitPastDeadline(k) ==
    table[k].st \in {"Reserved", "Dispatching"} /\ table[k].deadline <= now
ExpiredBindingsReclaimed == \A k \in Keys : IdlePastDeadline(k) ~> ~IdlePastDeadline(k)
TimeoutsFire == \A k \in Keys : InitPastDeadline(k) ~> ~InitPastDeadline(k)

(* A quarantine always ends (settled, dropped when its target's generation *)
(* moves on, or expired after QuarantineTTL), with no client's help. The  *)
(* model's clock stops at MaxClock - MaxDelay, so the property is about    *)
(* the quarantines whose QuarantineTTL ends by then (all of them, when the *)
(* clock is unbounded).                                                    *)
QuarantinesEnd ==
    \A k \in Keys :
        (table[k].st = "Quarantined" /\ since[k] + QuarantineTTL <= MaxClock - MaxDelay)
            ~> table[k].st # "Quarantined"

=============================================================================
