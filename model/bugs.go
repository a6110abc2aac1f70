package model

import (
	"fmt"
	"sort"
)

// A variant is a deliberately broken definition that spec/tla/MCPlacement.tla
// defines under the same name. Checkers must catch every one of them.
type variant struct {
	replaces string
	doc      string
	apply    func(o *ops)
}

var variants = map[string]variant{
	"BugAcquireReplaysQuarantine": {"Acquire",
		"a quarantined key is treated as absent, so its attempt is replayed",
		func(o *ops) { o.Acquire = bugAcquireReplaysQuarantine }},
	"BugCompleteAcceptsStale": {"Complete",
		"an Accepted completion is applied without checking the attempt is current",
		func(o *ops) { o.Complete = bugCompleteAcceptsStale }},
	"BugExpireLeased": {"Expire",
		"the idle deadline is honoured even while requests hold leases",
		func(o *ops) { o.Expire = bugExpireLeased }},
	"BugCloseWhileLeased": {"Close",
		"the final request removes the binding while others hold leases",
		func(o *ops) { o.Close = bugCloseWhileLeased }},
	"BugResolveIgnoresGeneration": {"Resolve",
		"Resolve is fenced by attempt id only, not by generation",
		func(o *ops) { o.Resolve = bugResolveIgnoresGeneration }},
	"BugRoomOffByOne": {"Room",
		"a full table still admits one more entry",
		func(o *ops) { o.Room = bugRoomOffByOne }},
	"BugAcquireNoHandOff": {"Acquire",
		"no hand-off: a freed key goes to whoever asks first, so a waiter can starve under weak fairness",
		func(o *ops) { o.Acquire = bugAcquireNoHandOff }},
	"BugAcquireAnyWaiter": {"Acquire",
		"any waiter may take a freed key, not only the longest one",
		func(o *ops) { o.Acquire = bugAcquireAnyWaiter }},
	"BugLeavesKeepsWaiter": {"Leaves",
		"a waiter that returns stays in its key's wait queue",
		func(o *ops) { o.Leaves = bugLeavesKeepsWaiter }},
	"BugQuarantineExpireEarly": {"QuarantineExpire",
		"a quarantine expires one tick before its QuarantineTTL",
		func(o *ops) { o.QuarantineExpire = bugQuarantineExpireEarly }},
	"BugQuarantineNeverExpires": {"QuarantineExpire",
		"a quarantine never expires",
		func(o *ops) { o.QuarantineExpire = bugQuarantineNeverExpires }},
	"BugDropStaleQuarantineAnyGen": {"DropStale",
		"a quarantine is dropped when its target was ever bumped, not when the attempt's generation moved on",
		func(o *ops) { o.DropStale = bugDropStaleQuarantineAnyGen }},
	"BugReservationTimeoutUsesDispatchTimeout": {"ReservationTimeout",
		"a reservation times out after the dispatch timeout (one timeout for both phases)",
		func(o *ops) { o.ReservationTimeout = bugReservationTimeoutUsesDispatchTimeout }},
	"BugNoSystemFairness": {"SystemFairness",
		"no fairness for the reaper, the timeouts or the clock: an expired binding may stay forever",
		func(o *ops) { o.noSystemFairness = true }},
	"BugAcquireHitsStale": {"Acquire",
		"a binding whose target's generation moved on still counts as live: a hit takes a lease on it",
		func(o *ops) { o.Acquire = bugAcquireHitsStale }},
	"BugBeginDispatchStaleGeneration": {"BeginDispatch",
		"a dispatch records the target's previous generation, not its current one",
		func(o *ops) { o.BeginDispatch = bugBeginDispatchStaleGeneration }},
	"BugCompleteAmbiguousRollsBack": {"Complete",
		"an Ambiguous outcome while dispatching rolls back like DefinitelyNotAccepted (a silent replay)",
		func(o *ops) { o.Complete = bugCompleteAmbiguousRollsBack }},
	"BugCompleteAmbiguousBinds": {"Complete",
		"an Ambiguous outcome while dispatching binds the key",
		func(o *ops) { o.Complete = bugCompleteAmbiguousBinds }},
	"BugCompleteLateAmbiguousClears": {"Complete",
		"a late Ambiguous outcome clears the quarantine",
		func(o *ops) { o.Complete = bugCompleteLateAmbiguousClears }},
	"BugDispatchTimeoutClears": {"DispatchTimeout",
		"the dispatch timeout makes the key absent instead of quarantining it",
		func(o *ops) { o.DispatchTimeout = bugDispatchTimeoutClears }},
	"BugEndLeaseKeepsClosing": {"EndLease",
		"the last lease of a closing binding ends and leaves the binding bound",
		func(o *ops) { o.EndLease = bugEndLeaseKeepsClosing }},
	"BugInvalidateOldVersion": {"Invalidate",
		"Invalidate through a lease on an older version removes the current binding",
		func(o *ops) { o.Invalidate = bugInvalidateOldVersion }},
	"BugCompleteRearmsReservation": {"Complete",
		"a DefinitelyNotAccepted rollback re-arms the reservation's deadline: initialization without bound",
		func(o *ops) { o.Complete = bugCompleteRearmsReservation }},
	"BugExpireEarly": {"Expire",
		"an idle binding is reclaimed one tick before its deadline",
		func(o *ops) { o.Expire = bugExpireEarly }},
	"BugRoomNever": {"Room",
		"there is never room: nothing is ever bound, so binding properties hold vacuously",
		func(o *ops) { o.Room = bugRoomNever }},
	"BugRoomPerKeyCount": {"Room",
		"room counts each other key on its own (a per-shard count), invisible with two keys",
		func(o *ops) { o.Room = bugRoomPerKeyCount }},
	"BugResolveOverQuarantine": {"Resolve",
		"a Resolve acts on a quarantine that is over (QuarantineTTL passed, or its generation moved on)",
		func(o *ops) { o.Resolve = bugResolveOverQuarantine }},
	"BugCurrentAttemptAnyQuarantine": {"CurrentAttempt",
		"a late guard is current on any quarantine of its attempt, over or not",
		func(o *ops) { o.CurrentAttempt = bugCurrentAttemptAnyQuarantine }},
	"BugBeginDispatchDeadlineCapped": {"BeginDispatch",
		"a dispatch's deadline is capped by the reservation's (less than DispatchTimeLimit)",
		func(o *ops) { o.BeginDispatch = bugBeginDispatchDeadlineCapped }},
	"BugBeginDispatchAtDeadline": {"BeginDispatch",
		"a dispatch may begin at the reservation's deadline (<= for <)",
		func(o *ops) { o.BeginDispatch = bugBeginDispatchAtDeadline }},
	"BugResolveBindsWithoutIdleTime": {"Resolve",
		"a Resolve that accepts binds with deadline now: expired at birth",
		func(o *ops) { o.Resolve = bugResolveBindsWithoutIdleTime }},
	"BugJoinsAtFront": {"Joins",
		"a waiter joins its key's queue at the front, overtaking those already waiting",
		func(o *ops) { o.Joins = bugJoinsAtFront }},
	"BugBeganAtNow": {"Began",
		"a quarantine counts its QuarantineTTL from when the timeout is applied, not from the dispatch's deadline",
		func(o *ops) { o.Began = bugBeganAtNow }},
}

// VariantNames lists the broken variants the model knows, sorted.
func VariantNames() []string {
	var out []string
	for n := range variants {
		out = append(out, n)
	}
	sort.Strings(out)
	return out
}

// Override replaces definition def with the broken variant of that name,
// as TLC's `def <- variant` does.
func (m *Model) Override(def, name string) error {
	v, ok := variants[name]
	if !ok {
		return fmt.Errorf("model: no variant %s (known: %v)", name, VariantNames())
	}
	if v.replaces != def {
		return fmt.Errorf("model: variant %s replaces %s, not %s", name, v.replaces, def)
	}
	v.apply(&m.ops)
	m.Variants = append(m.Variants, name)
	return nil
}

func bugAcquireReplaysQuarantine(m *Model, s *State, r, k int) (State, Result, bool) {
	if !m.acquireEnabled(s, r, k, true) {
		return State{}, noResult, false
	}
	e := &s.Table[k]
	return acquireCases(m, s, r, k, m.LiveBound(s, e), false, m.queues(s, r, k)) // BUG: a live quarantine reserves
}

func bugAcquireNoHandOff(m *Model, s *State, r, k int) (State, Result, bool) {
	if !m.acquireEnabled(s, r, k, false) { // BUG: any waiter
		return State{}, noResult, false
	}
	e := &s.Table[k]
	return acquireCases(m, s, r, k, m.LiveBound(s, e), m.LiveQuarantine(s, e), false) // BUG: newcomers do not queue
}

func bugAcquireAnyWaiter(m *Model, s *State, r, k int) (State, Result, bool) {
	if !m.acquireEnabled(s, r, k, false) { // BUG: not only the head
		return State{}, noResult, false
	}
	e := &s.Table[k]
	return acquireCases(m, s, r, k, m.LiveBound(s, e), m.LiveQuarantine(s, e), m.queues(s, r, k))
}

func bugLeavesKeepsWaiter(*State, int, int) {} // BUG: the queue is left as it is

func bugQuarantineExpireEarly(m *Model, s *State, k int) (State, Result, bool) {
	e := &s.Table[k]
	return m.removeIf(s, k, e.St == Quarantined && e.Deadline <= s.Now+1) // BUG: + 1
}

func bugQuarantineNeverExpires(*Model, *State, int) (State, Result, bool) {
	return State{}, noResult, false // BUG
}

func bugDropStaleQuarantineAnyGen(m *Model, s *State, k int) (State, Result, bool) {
	e := &s.Table[k]
	return m.removeIf(s, k, m.Stale(s, e) || e.St == Quarantined && s.Gen[e.Target] != 1) // BUG
}

func bugReservationTimeoutUsesDispatchTimeout(m *Model, s *State, k int) (State, Result, bool) {
	e := s.Table[k]
	if e.St != Reserved || e.RDeadline-m.Cfg.ReserveTimeout+m.Cfg.DispatchTimeLimit > s.Now { // BUG
		return State{}, noResult, false
	}
	n := s.Clone()
	n.Table[k] = AbsentEntry
	n.Req[e.Holder].Pc = PcRevoked
	return n, Result{Kind: ResRemoved, Target: None}, true
}

func bugCompleteAcceptsStale(m *Model, s *State, r int, o Outcome) (State, Result, bool) {
	q := s.Req[r]
	if (q.Pc == PcDispatching || q.Pc == PcLate) && o == Accepted && s.Table[q.Key].Target != None {
		// BUG: no CurrentAttempt check
		e := s.Table[q.Key]
		n := s.Clone()
		n.Table[q.Key] = boundEntry(q.Attempt, e.Target, e.TGen, 1, s.Now+m.Cfg.TTL)
		n.Req[r] = reqAt(PcHolding, q.Key, q.Attempt)
		return n, Result{Kind: ResCommitted, Target: e.Target, Gen: e.TGen, Attempt: q.Attempt}, true
	}
	return complete(m, s, r, o)
}

func bugExpireLeased(m *Model, s *State, k int) (State, Result, bool) {
	e := &s.Table[k]
	return m.removeIf(s, k, e.St == Bound && e.Deadline <= s.Now) // BUG: leases ignored
}

func bugCloseWhileLeased(m *Model, s *State, r int) (State, Result, bool) {
	q := s.Req[r]
	if q.Pc != PcHolding {
		return State{}, noResult, false
	}
	n := s.Clone()
	n.Req[r] = IdleReq
	if m.HoldsLease(s, r) {
		n.Table[q.Key] = AbsentEntry // BUG: other leases ignored
	}
	return n, Result{Kind: ResEnded, Target: None, Attempt: q.Attempt}, true
}

func bugResolveIgnoresGeneration(m *Model, s *State, k, a, g int, o Resolution) (State, Result, bool) {
	e := s.Table[k]
	if e.St != Quarantined {
		return State{}, noResult, false
	}
	if !m.LiveQuarantine(s, &e) || a != e.Attempt { // BUG: g is not compared
		return s.Clone(), Result{Kind: ResFenced, Target: e.Target, Gen: e.TGen, Attempt: e.Attempt}, true
	}
	return applyResolution(m, s, k, o)
}

func bugRoomOffByOne(m *Model, s *State, k int) bool {
	return m.occupiedExcept(s, k) <= m.Cfg.Capacity // BUG: <= instead of <
}

func bugAcquireHitsStale(m *Model, s *State, r, k int) (State, Result, bool) {
	if !m.acquireEnabled(s, r, k, true) {
		return State{}, noResult, false
	}
	e := &s.Table[k]
	hit := e.St == Bound && !m.Expired(s, e) // BUG: a stale binding counted as live
	return acquireCases(m, s, r, k, hit, m.LiveQuarantine(s, e), m.queues(s, r, k))
}

func bugBeginDispatchStaleGeneration(m *Model, s *State, r, t int) (State, Result, bool) {
	return dispatchUnder(m, s, r, t, max(s.Gen[t]-1, 1)) // BUG: the previous generation
}

// completeWithAmbiguous is Complete with the Ambiguous outcome of a current
// attempt settled as o2 when cond holds of its entry.
func completeWithAmbiguous(m *Model, s *State, r int, o Outcome, cond func(*Entry) bool, o2 Outcome) (State, Result, bool) {
	q := s.Req[r]
	if o == Ambiguous && (q.Pc == PcDispatching || q.Pc == PcLate) && m.CurrentAttempt(s, r) && cond(&s.Table[q.Key]) {
		return settle(m, s, s.Clone(), r, o2) // BUG
	}
	return complete(m, s, r, o)
}

func dispatching(e *Entry) bool { return e.St == Dispatching }
func quarantined(e *Entry) bool { return e.St == Quarantined }

func bugCompleteAmbiguousRollsBack(m *Model, s *State, r int, o Outcome) (State, Result, bool) {
	return completeWithAmbiguous(m, s, r, o, dispatching, DefinitelyNotAccepted)
}

func bugCompleteAmbiguousBinds(m *Model, s *State, r int, o Outcome) (State, Result, bool) {
	return completeWithAmbiguous(m, s, r, o, dispatching, Accepted)
}

func bugCompleteLateAmbiguousClears(m *Model, s *State, r int, o Outcome) (State, Result, bool) {
	return completeWithAmbiguous(m, s, r, o, quarantined, DefinitelyNotAccepted)
}

func bugDispatchTimeoutClears(m *Model, s *State, k int) (State, Result, bool) {
	e := s.Table[k]
	if e.St != Dispatching || e.Deadline > s.Now {
		return State{}, noResult, false
	}
	n := s.Clone()
	n.Table[k] = AbsentEntry // BUG: not quarantined
	n.Req[e.Holder].Pc = PcLate
	return n, Result{Kind: ResRemoved, Target: None}, true
}

func bugEndLeaseKeepsClosing(m *Model, s *State, r int, refresh bool) (State, Result, bool) {
	q := s.Req[r]
	if q.Pc == PcHolding && m.HoldsLease(s, r) && s.Table[q.Key].Closing && s.Table[q.Key].Leases == 1 {
		n := s.Clone() // BUG: the closing binding stays, with no lease
		n.Req[r] = IdleReq
		n.Table[q.Key].Leases = 0
		if refresh {
			n.Table[q.Key].Deadline = s.Now + m.Cfg.TTL
		}
		return n, Result{Kind: ResEnded, Target: None, Attempt: q.Attempt}, true
	}
	return endLease(m, s, r, refresh)
}

func bugInvalidateOldVersion(m *Model, s *State, r int) (State, Result, bool) {
	q := s.Req[r]
	if q.Pc != PcHolding {
		return State{}, noResult, false
	}
	n := s.Clone()
	n.Req[r] = IdleReq
	if s.Table[q.Key].St == Bound {
		n.Table[q.Key] = AbsentEntry // BUG: whatever version is bound
	}
	return n, Result{Kind: ResEnded, Target: None, Attempt: q.Attempt}, true
}

func bugRoomNever(*Model, *State, int) bool { return false }

func bugRoomPerKeyCount(m *Model, s *State, k int) bool {
	for j := range s.Table {
		if j == k {
			continue
		}
		n := 0
		if m.Occupies(s, &s.Table[j]) {
			n = 1 // BUG: each other key counted on its own
		}
		if n >= m.Cfg.Capacity {
			return false
		}
	}
	return true
}

func bugExpireEarly(m *Model, s *State, k int) (State, Result, bool) {
	e := &s.Table[k]
	return m.removeIf(s, k, e.St == Bound && e.Leases == 0 && e.Deadline <= s.Now+1) // BUG: + 1
}

func bugCompleteRearmsReservation(m *Model, s *State, r int, o Outcome) (State, Result, bool) {
	n, res, ok := complete(m, s, r, o)
	if ok && res.Kind == ResRolledBack {
		k := s.Req[r].Key
		n.Table[k] = reservedEntry(r, s.Now+m.Cfg.ReserveTimeout) // BUG: re-armed
	}
	return n, res, ok
}

func bugResolveOverQuarantine(m *Model, s *State, k, a, g int, o Resolution) (State, Result, bool) {
	e := s.Table[k]
	if e.St != Quarantined {
		return State{}, noResult, false
	}
	if a != e.Attempt || g != e.TGen { // BUG: a quarantine that is over is not fenced
		return s.Clone(), Result{Kind: ResFenced, Target: e.Target, Gen: e.TGen, Attempt: e.Attempt}, true
	}
	return applyResolution(m, s, k, o)
}

func bugCurrentAttemptAnyQuarantine(m *Model, s *State, r int) bool {
	q := s.Req[r]
	if q.Key == None {
		return false
	}
	e := &s.Table[q.Key]
	return (e.St == Dispatching || e.St == Quarantined) && e.Attempt == q.Attempt // BUG: over or not
}

// dispatchWith is BeginDispatch with the reservation's deadline test and
// the dispatch's deadline given: inTime(now, reservation deadline) and
// deadline(now, reservation's own deadline).
func dispatchWith(m *Model, s *State, r, t int, inTime func(now, d int64) bool, deadline func(now, rd int64) int64) (State, Result, bool) {
	q := s.Req[r]
	if q.Pc != PcReserved && q.Pc != PcRevoked {
		return State{}, noResult, false
	}
	if !m.HoldsReservation(s, r) {
		n := s.Clone()
		n.Req[r] = IdleReq
		return n, Result{Kind: ResLost, Target: None}, true
	}
	e := &s.Table[q.Key]
	if m.Cfg.MaxAttempt > 0 && s.NextAttempt > m.Cfg.MaxAttempt || !inTime(s.Now, e.Deadline) {
		return State{}, noResult, false
	}
	n := s.Clone()
	a := s.NextAttempt
	n.Table[q.Key] = dispatchingEntry(r, a, t, s.Gen[t], deadline(s.Now, e.RDeadline), e.RDeadline)
	n.Req[r] = reqAt(PcDispatching, q.Key, a)
	n.NextAttempt = a + 1
	return n, Result{Kind: ResDispatched, Target: t, Gen: s.Gen[t], Attempt: a}, true
}

func bugBeginDispatchDeadlineCapped(m *Model, s *State, r, t int) (State, Result, bool) {
	return dispatchWith(m, s, r, t, func(now, d int64) bool { return now < d },
		func(now, rd int64) int64 { return min(now+m.Cfg.DispatchTimeLimit, rd) }) // BUG: capped
}

func bugBeginDispatchAtDeadline(m *Model, s *State, r, t int) (State, Result, bool) {
	return dispatchWith(m, s, r, t, func(now, d int64) bool { return now <= d }, // BUG: <= for <
		func(now, _ int64) int64 { return now + m.Cfg.DispatchTimeLimit })
}

func bugResolveBindsWithoutIdleTime(m *Model, s *State, k, a, g int, o Resolution) (State, Result, bool) {
	n, res, ok := resolve(m, s, k, a, g, o)
	if ok && res.Kind == ResCommitted {
		n.Table[k].Deadline = s.Now // BUG: no idle time
	}
	return n, res, ok
}

func bugJoinsAtFront(n *State, r, k int) {
	n.Waitq[k] = append([]int{r}, n.Waitq[k]...) // BUG: at the front
}

func bugBeganAtNow(s *State, _ *Entry) int64 { return s.Now } // BUG
