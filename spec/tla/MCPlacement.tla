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
       \/ /\ req[r].pc = "Waiting" /\ req[r].key = k /\ ~Initializing(e)
          /\ Free(e) => Head(waitq[k]) = r
    /\ CASE LiveBound(e) ->
              /\ table' = [table EXCEPT ![k].leases = @ + 1]
              /\ req' = [req EXCEPT ![r] = ReqAt("Holding", k, e.attempt)]
              /\ Leaves(r, k)
         [] Initializing(e) \/ (Free(e) /\ req[r].pc = "Idle" /\ waitq[k] # <<>>) ->
              /\ table' = table
              /\ req' = [req EXCEPT ![r] = ReqAt("Waiting", k, 0)]
              /\ Joins(r, k)
         [] OTHER ->                      \* BUG: a live quarantine lands here too
              /\ IF Room(k)
                 THEN /\ table' = [table EXCEPT ![k] = ReservedEntry(r, now + ReserveTimeout)]
                      /\ req' = [req EXCEPT ![r] = ReqAt("Reserved", k, 0)]
                 ELSE /\ table' = table
                      /\ req' = [req EXCEPT ![r] = IdleReq]
              /\ Leaves(r, k)
    /\ UNCHANGED <<now, gen, nextAttempt>>

LateAmbiguous(r) ==
    /\ table' = table
    /\ req' = [req EXCEPT ![r] = IdleReq]

QuarantineOf(r) ==
    LET e == table[req[r].key] IN
    /\ table' = [table EXCEPT ![req[r].key] =
            QuarantinedEntry(e.attempt, e.target, e.tgen, Began(e) + QuarantineTTL)]
    /\ req' = [req EXCEPT ![r] = IdleReq]

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
              /\ table' = [table EXCEPT ![k] = ReservedEntry(r, e.rdeadline)]
              /\ req' = [req EXCEPT ![r] = ReqAt("Reserved", k, 0)]
         [] o = "DefinitelyNotAccepted" ->
              /\ table' = [table EXCEPT ![k] = AbsentEntry]
              /\ req' = [req EXCEPT ![r] = IdleReq]
         [] e.st = "Quarantined" -> LateAmbiguous(r)
         [] OTHER -> QuarantineOf(r)
    /\ UNCHANGED <<now, gen, nextAttempt, waitq>>

(* Expires a leased binding: the idle deadline is honoured even while      *)
(* requests still hold leases.                                             *)
BugExpireLeased(k) ==
    /\ table[k].st = "Bound" /\ table[k].deadline <= now
    /\ table' = [table EXCEPT ![k] = AbsentEntry]
    /\ UNCHANGED <<now, gen, nextAttempt, req, waitq>>

(* Closes while other leases are active: the final request removes the    *)
(* binding at once (the anchor's claim layer did this).                    *)
BugCloseWhileLeased(r) ==
    /\ req[r].pc = "Holding"
    /\ table' = IF HoldsLease(r) THEN [table EXCEPT ![req[r].key] = AbsentEntry] ELSE table
    /\ req' = [req EXCEPT ![r] = IdleReq]
    /\ UNCHANGED <<now, gen, nextAttempt, waitq>>

(* Resolve fenced by attempt id only: a resolution naming the wrong       *)
(* generation is applied.                                                  *)
BugResolveIgnoresGeneration(k, a, g, o) ==
    LET e == table[k] IN
    /\ e.st = "Quarantined"
    /\ table' = IF LiveQuarantine(e) /\ a = e.attempt
                THEN [table EXCEPT ![k] = IF o = "Accepted"
                                          THEN BoundEntry(a, e.target, e.tgen, 0, now + TTL)
                                          ELSE AbsentEntry]
                ELSE table
    /\ UNCHANGED <<now, gen, nextAttempt, req, waitq>>

(* Capacity off by one: a full table still admits one more entry.         *)
BugRoomOffByOne(k) ==
    Cardinality({j \in Keys \ {k} : Occupies(table[j])}) <= Capacity
(* Hits a stale binding: a binding whose target's generation moved on is  *)
(* still counted as live, so a request takes a lease on it.               *)
BugAcquireHitsStale(r, k) ==
    LET e == table[k] IN
    /\ \/ req[r].pc = "Idle"
       \/ /\ req[r].pc = "Waiting" /\ req[r].key = k /\ ~Initializing(e)
          /\ Free(e) => Head(waitq[k]) = r
    /\ CASE e.st = "Bound" /\ ~Expired(e) ->                 \* BUG: stale counted as live
              /\ table' = [table EXCEPT ![k].leases = @ + 1]
              /\ req' = [req EXCEPT ![r] = ReqAt("Holding", k, e.attempt)]
              /\ Leaves(r, k)
         [] Initializing(e) \/ (Free(e) /\ req[r].pc = "Idle" /\ waitq[k] # <<>>) ->
              /\ table' = table
              /\ req' = [req EXCEPT ![r] = ReqAt("Waiting", k, 0)]
              /\ Joins(r, k)
         [] LiveQuarantine(e) ->
              /\ table' = table
              /\ req' = [req EXCEPT ![r] = IdleReq]
              /\ Leaves(r, k)
         [] OTHER ->
              /\ IF Room(k)
                 THEN /\ table' = [table EXCEPT ![k] = ReservedEntry(r, now + ReserveTimeout)]
                      /\ req' = [req EXCEPT ![r] = ReqAt("Reserved", k, 0)]
                 ELSE /\ table' = table
                      /\ req' = [req EXCEPT ![r] = IdleReq]
              /\ Leaves(r, k)
    /\ UNCHANGED <<now, gen, nextAttempt>>

(* Dispatches under the wrong generation: the attempt records the target's *)
(* previous generation once the target has been bumped.                    *)
BugBeginDispatchStaleGeneration(r, t) ==
    LET k == req[r].key IN
    /\ req[r].pc \in {"Reserved", "Revoked"}
    /\ IF HoldsReservation(r)
       THEN /\ now < table[k].deadline
            /\ nextAttempt \in Attempts
            /\ table' = [table EXCEPT ![k] =
                    DispatchingEntry(r, nextAttempt, t, IF gen[t] > 1 THEN gen[t] - 1 ELSE 1,  \* BUG
                                     now + DispatchTimeLimit, table[k].rdeadline)]
            /\ req' = [req EXCEPT ![r] = ReqAt("Dispatching", k, nextAttempt)]
            /\ nextAttempt' = nextAttempt + 1
       ELSE /\ table' = table
            /\ req' = [req EXCEPT ![r] = IdleReq]
            /\ UNCHANGED nextAttempt
    /\ UNCHANGED <<now, gen, waitq>>

(* Complete with its Ambiguous case replaced by `ambiguous` (applied to a  *)
(* current attempt); the other outcomes as in Complete.                    *)
CompleteWithAmbiguous(r, o, ambiguous) ==
    LET k == req[r].key
        e == table[k] IN
    /\ req[r].pc \in {"Dispatching", "Late"}
    /\ IF ~CurrentAttempt(r)
       THEN /\ table' = table
            /\ req' = [req EXCEPT ![r] = IdleReq]
       ELSE CASE o = "Accepted" ->
                   /\ table' = [table EXCEPT ![k] = BoundEntry(e.attempt, e.target, e.tgen, 1, now + TTL)]
                   /\ req' = [req EXCEPT ![r] = ReqAt("Holding", k, e.attempt)]
              [] o = "DefinitelyNotAccepted" /\ e.st = "Dispatching" ->
                   /\ table' = [table EXCEPT ![k] = ReservedEntry(r, e.rdeadline)]
                   /\ req' = [req EXCEPT ![r] = ReqAt("Reserved", k, 0)]
              [] o = "DefinitelyNotAccepted" ->
                   /\ table' = [table EXCEPT ![k] = AbsentEntry]
                   /\ req' = [req EXCEPT ![r] = IdleReq]
              [] OTHER -> ambiguous
    /\ UNCHANGED <<now, gen, nextAttempt, waitq>>

(* An Ambiguous outcome while dispatching rolls back like                  *)
(* DefinitelyNotAccepted: the request may dispatch again, a silent replay. *)
BugCompleteAmbiguousRollsBack(r, o) ==
    LET k == req[r].key IN
    CompleteWithAmbiguous(r, o,
        IF table[k].st = "Dispatching"                          \* BUG
        THEN /\ table' = [table EXCEPT ![k] = ReservedEntry(r, table[k].rdeadline)]
             /\ req' = [req EXCEPT ![r] = ReqAt("Reserved", k, 0)]
        ELSE LateAmbiguous(r))

(* An Ambiguous outcome while dispatching binds the key, as if accepted.  *)
BugCompleteAmbiguousBinds(r, o) ==
    LET k == req[r].key
        e == table[k] IN
    CompleteWithAmbiguous(r, o,
        IF e.st = "Dispatching"                                 \* BUG
        THEN /\ table' = [table EXCEPT ![k] = BoundEntry(e.attempt, e.target, e.tgen, 1, now + TTL)]
             /\ req' = [req EXCEPT ![r] = ReqAt("Holding", k, e.attempt)]
        ELSE LateAmbiguous(r))

(* A late Ambiguous outcome clears the quarantine.                         *)
BugCompleteLateAmbiguousClears(r, o) ==
    LET k == req[r].key IN
    CompleteWithAmbiguous(r, o,
        IF table[k].st = "Quarantined"                          \* BUG
        THEN /\ table' = [table EXCEPT ![k] = AbsentEntry]
             /\ req' = [req EXCEPT ![r] = IdleReq]
        ELSE QuarantineOf(r))

(* The dispatch timeout makes the key absent instead of quarantining it.  *)
BugDispatchTimeoutClears(k) ==
    LET e == table[k] IN
    /\ e.st = "Dispatching" /\ e.deadline <= now
    /\ table' = [table EXCEPT ![k] = AbsentEntry]          \* BUG: not quarantined
    /\ req' = [req EXCEPT ![e.holder].pc = "Late"]
    /\ UNCHANGED <<now, gen, nextAttempt, waitq>>

(* The last lease of a closing binding ends and leaves the binding bound, *)
(* closing, with no lease.                                                 *)
BugEndLeaseKeepsClosing(r, refresh) ==
    LET k == req[r].key
        e == table[k] IN
    /\ req[r].pc = "Holding"
    /\ table' = IF ~HoldsLease(r) THEN table
                ELSE [table EXCEPT ![k].leases = @ - 1,         \* BUG: closing not honoured
                                   ![k].deadline = IF refresh /\ e.leases = 1 THEN now + TTL ELSE @]
    /\ req' = [req EXCEPT ![r] = IdleReq]
    /\ UNCHANGED <<now, gen, nextAttempt, waitq>>

(* Invalidate through a lease on an older binding version removes the     *)
(* key's current binding.                                                  *)
BugInvalidateOldVersion(r) ==
    /\ req[r].pc = "Holding"
    /\ table' = IF table[req[r].key].st = "Bound"              \* BUG: any version
                THEN [table EXCEPT ![req[r].key] = AbsentEntry] ELSE table
    /\ req' = [req EXCEPT ![r] = IdleReq]
    /\ UNCHANGED <<now, gen, nextAttempt, waitq>>

(* Expires early: an idle binding is reclaimed one tick before its        *)
(* deadline.                                                               *)
BugExpireEarly(k) ==
    /\ table[k].st = "Bound" /\ table[k].leases = 0 /\ table[k].deadline <= now + 1  \* BUG: + 1
    /\ table' = [table EXCEPT ![k] = AbsentEntry]
    /\ UNCHANGED <<now, gen, nextAttempt, req, waitq>>

(* A DefinitelyNotAccepted rollback re-arms the reservation's deadline    *)
(* (the landed core did this): a target that keeps answering              *)
(* DefinitelyNotAccepted keeps the key initializing without bound.        *)
BugCompleteRearmsReservation(r, o) ==
    LET k == req[r].key
        e == table[k] IN
    /\ req[r].pc \in {"Dispatching", "Late"}
    /\ IF ~CurrentAttempt(r)
       THEN /\ table' = table
            /\ req' = [req EXCEPT ![r] = IdleReq]
       ELSE CASE o = "Accepted" ->
                   /\ table' = [table EXCEPT ![k] = BoundEntry(e.attempt, e.target, e.tgen, 1, now + TTL)]
                   /\ req' = [req EXCEPT ![r] = ReqAt("Holding", k, e.attempt)]
              [] o = "DefinitelyNotAccepted" /\ e.st = "Dispatching" ->  \* BUG: re-armed
                   /\ table' = [table EXCEPT ![k] = ReservedEntry(r, now + ReserveTimeout)]
                   /\ req' = [req EXCEPT ![r] = ReqAt("Reserved", k, 0)]
              [] o = "DefinitelyNotAccepted" ->
                   /\ table' = [table EXCEPT ![k] = AbsentEntry]
                   /\ req' = [req EXCEPT ![r] = IdleReq]
              [] e.st = "Quarantined" -> LateAmbiguous(r)
              [] OTHER -> QuarantineOf(r)
    /\ UNCHANGED <<now, gen, nextAttempt, waitq>>

(* Room is never there: nothing is ever reserved, so nothing is bound and *)
(* every property about bindings would hold vacuously.                    *)
BugRoomNever(k) == FALSE

(* Room counts each other key on its own (a per-shard count), not all of  *)
(* them: the same as the real count with two keys.                        *)
BugRoomPerKeyCount(k) ==
    \A j \in Keys \ {k} : Cardinality({i \in {j} : Occupies(table[i])}) < Capacity

(* No fairness for the system's own actions: nothing makes the reaper run  *)
(* or a timeout fire, so an expired binding may stay forever.              *)
BugNoSystemFairness == TRUE

(* No hand-off (the landed core's broadcast wake-up): a freed key goes to *)
(* whoever asks first, a newcomer or any waiter. A waiter whose key is    *)
(* free only now and then may starve under weak fairness: WaitersReturn   *)
(* must fail.                                                              *)
BugAcquireNoHandOff(r, k) ==
    LET e == table[k] IN
    /\ \/ req[r].pc = "Idle"
       \/ req[r].pc = "Waiting" /\ req[r].key = k /\ ~Initializing(e)   \* BUG: any waiter
    /\ CASE LiveBound(e) ->
              /\ table' = [table EXCEPT ![k].leases = @ + 1]
              /\ req' = [req EXCEPT ![r] = ReqAt("Holding", k, e.attempt)]
              /\ Leaves(r, k)
         [] Initializing(e) ->                              \* BUG: newcomers do not queue
              /\ table' = table
              /\ req' = [req EXCEPT ![r] = ReqAt("Waiting", k, 0)]
              /\ Joins(r, k)
         [] LiveQuarantine(e) ->
              /\ table' = table
              /\ req' = [req EXCEPT ![r] = IdleReq]
              /\ Leaves(r, k)
         [] OTHER ->
              /\ IF Room(k)
                 THEN /\ table' = [table EXCEPT ![k] = ReservedEntry(r, now + ReserveTimeout)]
                      /\ req' = [req EXCEPT ![r] = ReqAt("Reserved", k, 0)]
                 ELSE /\ table' = table
                      /\ req' = [req EXCEPT ![r] = IdleReq]
              /\ Leaves(r, k)
    /\ UNCHANGED <<now, gen, nextAttempt>>

(* Any waiter may take a freed key, not only the longest one (newcomers    *)
(* still queue): waiters are served out of order.                          *)
BugAcquireAnyWaiter(r, k) ==
    LET e == table[k] IN
    /\ \/ req[r].pc = "Idle"
       \/ req[r].pc = "Waiting" /\ req[r].key = k /\ ~Initializing(e)   \* BUG: not only the head
    /\ CASE LiveBound(e) ->
              /\ table' = [table EXCEPT ![k].leases = @ + 1]
              /\ req' = [req EXCEPT ![r] = ReqAt("Holding", k, e.attempt)]
              /\ Leaves(r, k)
         [] Initializing(e) \/ (Free(e) /\ req[r].pc = "Idle" /\ waitq[k] # <<>>) ->
              /\ table' = table
              /\ req' = [req EXCEPT ![r] = ReqAt("Waiting", k, 0)]
              /\ Joins(r, k)
         [] LiveQuarantine(e) ->
              /\ table' = table
              /\ req' = [req EXCEPT ![r] = IdleReq]
              /\ Leaves(r, k)
         [] OTHER ->
              /\ IF Room(k)
                 THEN /\ table' = [table EXCEPT ![k] = ReservedEntry(r, now + ReserveTimeout)]
                      /\ req' = [req EXCEPT ![r] = ReqAt("Reserved", k, 0)]
                 ELSE /\ table' = table
                      /\ req' = [req EXCEPT ![r] = IdleReq]
              /\ Leaves(r, k)
    /\ UNCHANGED <<now, gen, nextAttempt>>

(* A waiter that returns (a hit, an Ambiguous error, a reservation) stays *)
(* in its key's wait queue.                                                *)
BugLeavesKeepsWaiter(r, k) == UNCHANGED waitq                  \* BUG

(* A quarantine expires one tick before its QuarantineTTL has passed.     *)
BugQuarantineExpireEarly(k) ==
    /\ table[k].st = "Quarantined" /\ table[k].deadline <= now + 1   \* BUG: + 1
    /\ table' = [table EXCEPT ![k] = AbsentEntry]
    /\ UNCHANGED <<now, gen, nextAttempt, req, waitq>>

(* A quarantine never expires: only a settlement or a generation bump     *)
(* ends it, so a client that makes requests time out can fill the table. *)
BugQuarantineNeverExpires(k) == FALSE

(* DropStale drops every quarantine of a target that was ever bumped,    *)
(* comparing with the first generation instead of the attempt's.          *)
BugDropStaleQuarantineAnyGen(k) ==
    /\ \/ Stale(table[k])
       \/ table[k].st = "Quarantined" /\ gen[table[k].target] # 1      \* BUG
    /\ table' = [table EXCEPT ![k] = AbsentEntry]
    /\ UNCHANGED <<now, gen, nextAttempt, req, waitq>>

(* One timeout for both phases: a reservation times out after the         *)
(* dispatch timeout (what a single InitTimeout amounts to when the two     *)
(* differ).                                                                *)
BugReservationTimeoutUsesDispatchTimeout(k) ==
    LET e == table[k] IN
    /\ e.st = "Reserved" /\ e.rdeadline - ReserveTimeout + DispatchTimeLimit <= now  \* BUG
    /\ table' = [table EXCEPT ![k] = AbsentEntry]
    /\ req' = [req EXCEPT ![e.holder].pc = "Revoked"]
    /\ UNCHANGED <<now, gen, nextAttempt, waitq>>

(* A Resolve acts on a quarantine that is over: it checks that the key is *)
(* quarantined, not that its quarantine is live (QuarantineTTL passed, or  *)
(* its target's generation moved on).                                      *)
BugResolveOverQuarantine(k, a, g, o) ==
    LET e == table[k] IN
    /\ e.st = "Quarantined"
    /\ table' = IF a = e.attempt /\ g = e.tgen                 \* BUG: over or not
                THEN [table EXCEPT ![k] = IF o = "Accepted"
                                          THEN BoundEntry(a, e.target, g, 0, now + TTL)
                                          ELSE AbsentEntry]
                ELSE table
    /\ UNCHANGED <<now, gen, nextAttempt, req, waitq>>

(* A late guard is current on any quarantine of its attempt, over or not: *)
(* a late result settles a quarantine whose QuarantineTTL has passed or    *)
(* whose target's generation moved on.                                     *)
BugCurrentAttemptAnyQuarantine(r) ==
    LET e == table[req[r].key] IN
    e.st \in {"Dispatching", "Quarantined"} /\ e.attempt = req[r].attempt   \* BUG

(* A dispatch's deadline is capped by the reservation's: the dispatch      *)
(* gets less than DispatchTimeLimit when the reservation is about to end.  *)
BugBeginDispatchDeadlineCapped(r, t) ==
    LET k == req[r].key IN
    /\ req[r].pc \in {"Reserved", "Revoked"}
    /\ IF HoldsReservation(r)
       THEN /\ now < table[k].deadline
            /\ nextAttempt \in Attempts
            /\ table' = [table EXCEPT ![k] =
                    DispatchingEntry(r, nextAttempt, t, gen[t],
                                     IF now + DispatchTimeLimit < table[k].rdeadline   \* BUG: capped
                                     THEN now + DispatchTimeLimit ELSE table[k].rdeadline,
                                     table[k].rdeadline)]
            /\ req' = [req EXCEPT ![r] = ReqAt("Dispatching", k, nextAttempt)]
            /\ nextAttempt' = nextAttempt + 1
       ELSE /\ table' = table
            /\ req' = [req EXCEPT ![r] = IdleReq]
            /\ UNCHANGED nextAttempt
    /\ UNCHANGED <<now, gen, waitq>>

(* A dispatch may begin at the reservation's deadline (`<=` for `<`), when *)
(* the reservation is due to time out.                                     *)
BugBeginDispatchAtDeadline(r, t) ==
    LET k == req[r].key IN
    /\ req[r].pc \in {"Reserved", "Revoked"}
    /\ IF HoldsReservation(r)
       THEN /\ now <= table[k].deadline                          \* BUG: <= for <
            /\ nextAttempt \in Attempts
            /\ table' = [table EXCEPT ![k] =
                    DispatchingEntry(r, nextAttempt, t, gen[t], now + DispatchTimeLimit, table[k].rdeadline)]
            /\ req' = [req EXCEPT ![r] = ReqAt("Dispatching", k, nextAttempt)]
            /\ nextAttempt' = nextAttempt + 1
       ELSE /\ table' = table
            /\ req' = [req EXCEPT ![r] = IdleReq]
            /\ UNCHANGED nextAttempt
    /\ UNCHANGED <<now, gen, waitq>>

(* A Resolve that accepts binds with no idle time: the binding's deadline  *)
(* is now, so it is expired at birth and the key reads as absent (the      *)
(* accepted attempt would be dispatched again).                            *)
BugResolveBindsWithoutIdleTime(k, a, g, o) ==
    LET e == table[k] IN
    /\ e.st = "Quarantined"
    /\ table' = IF LiveQuarantine(e) /\ a = e.attempt /\ g = e.tgen
                THEN [table EXCEPT ![k] = IF o = "Accepted"
                                          THEN BoundEntry(a, e.target, g, 0, now)   \* BUG: no TTL
                                          ELSE AbsentEntry]
                ELSE table
    /\ UNCHANGED <<now, gen, nextAttempt, req, waitq>>

(* A waiter joins the queue at its front: a newcomer overtakes the         *)
(* requests already waiting.                                               *)
BugJoinsAtFront(r, k) == waitq' = [waitq EXCEPT ![k] = <<r>> \o @]    \* BUG

(* A quarantine counts its QuarantineTTL from when the timeout is applied, *)
(* not from the dispatch's deadline: a timeout applied late (lazily, or by *)
(* a slow reaper) lengthens the quarantine.                                *)
BugBeganAtNow(e) == now                                           \* BUG
-----------------------------------------------------------------------------
(* Witnesses. Each says that an interesting situation never happens; its   *)
(* MCWitness*.cfg must report it violated, which shows that the constants  *)
(* reach the situation (a config where a witness holds is too small).      *)

NeverTwoQuarantines == Cardinality({k \in Keys : table[k].st = "Quarantined"}) <= 1
NeverThreeLeases == \A k \in Keys : table[k].leases < 3
NeverTwoBumps == \A t \in Targets : gen[t] < 3

(* A late Accepted arrives for a quarantined attempt after its target was *)
(* bumped (and is fenced: the quarantine is over).                         *)
NeverLateAcceptedAfterBump ==
    [][~(/\ step'.act = "Complete" /\ step'.o = "Accepted"
         /\ table[req[step'.r].key].st = "Quarantined"
         /\ table[req[step'.r].key].attempt = req[step'.r].attempt
         /\ gen[table[req[step'.r].key].target] # table[req[step'.r].key].tgen)]_allvars

(* A binding is born stale: its target's generation moved on while the    *)
(* attempt was in flight or quarantined.                                   *)
NeverStaleAtBirth ==
    [][\A k \in Keys : ~(table'[k].st = "Bound" /\ ~KeepsBinding(k)
                         /\ gen'[table'[k].target] # table'[k].tgen)]_allvars

(* A Release through a lease on a superseded binding version.             *)
NeverReleaseOnOldVersion ==
    [][~(step'.act = "Release" /\ table[req[step'.r].key].attempt # req[step'.r].attempt)]_allvars

(* A deadline fires at the clock's last value (the latest time Advance    *)
(* can reach, so deadlines are still representable).                     *)
NeverDeadlineAtClockEnd ==
    [][~(now = MaxClock - MaxDelay
         /\ step'.act \in {"Expire", "ReservationTimeout", "DispatchTimeout", "QuarantineExpire"})]_allvars

(* A quarantine ends because its QuarantineTTL passed.                     *)
NeverQuarantineExpires == [][step'.act # "QuarantineExpire"]_allvars

(* A quarantine is dropped because its target's generation moved on.     *)
NeverStaleQuarantineDropped ==
    [][~(step'.act = "DropStale" /\ table[step'.k].st = "Quarantined")]_allvars

(* A newcomer queues behind a waiter on a key that is free: the hand-off  *)
(* to the longest waiter is exercised.                                     *)
NeverQueuesOnFreeKey ==
    [][~(/\ step'.act = "Acquire" /\ req[step'.r].pc = "Idle"
         /\ req'[step'.r].pc = "Waiting" /\ Free(table[step'.k]))]_allvars

(* Two requests wait on one key at once.                                   *)
NeverTwoWaiters == \A k \in Keys : Len(waitq[k]) < 2

(* A late result arrives for a quarantine that is over (its QuarantineTTL *)
(* passed, or its target's generation moved on) but still in the table:  *)
(* the fence on over quarantines is exercised.                            *)
NeverLateResultOnOverQuarantine ==
    [][~(/\ step'.act = "Complete"
         /\ table[req[step'.r].key].st = "Quarantined"
         /\ table[req[step'.r].key].attempt = req[step'.r].attempt
         /\ ~QuarantineHolds(req[step'.r].key))]_allvars

(* A Resolve naming a quarantine's attempt and generation arrives after   *)
(* the quarantine is over, while it is still in the table.                *)
NeverResolveOnOverQuarantine ==
    [][~(/\ step'.act = "Resolve" /\ table[step'.k].st = "Quarantined"
         /\ step'.a = table[step'.k].attempt /\ step'.g = table[step'.k].tgen
         /\ ~QuarantineHolds(step'.k))]_allvars
=============================================================================
