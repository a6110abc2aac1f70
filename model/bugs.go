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
	"BugWeakWaiterFairness": {"Fairness",
		"waiters are retried under weak fairness only and can starve",
		func(o *ops) { o.weakWaiterFairness = true }},
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
	e := s.Table[k]
	if e.St == Quarantined && s.Req[r].Pc == PcIdle {
		n := s.Clone()
		if m.Room(s, k) { // BUG: Quarantined is treated as absent
			n.Table[k] = reservedEntry(r, s.Now+m.Cfg.InitTimeout)
			n.Req[r] = reqAt(PcReserved, k, 0)
			return n, Result{Kind: ResReserved, Target: None}, true
		}
		n.Req[r] = IdleReq
		return n, Result{Kind: ResCapacity, Target: None}, true
	}
	return acquire(m, s, r, k)
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
	if a != e.Attempt { // BUG: g is not compared
		return s.Clone(), Result{Kind: ResFenced, Target: e.Target, Gen: e.TGen, Attempt: e.Attempt}, true
	}
	return applyResolution(m, s, k, o)
}

func bugRoomOffByOne(m *Model, s *State, k int) bool {
	return m.occupiedExcept(s, k) <= m.Cfg.Capacity // BUG: <= instead of <
}
