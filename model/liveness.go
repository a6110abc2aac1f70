package model

import "github.com/placementlab/placement/model/lasso"

// LivenessProperty is a spec property P ~> ~P, for every request (P: the
// request is at pc At) or, when OnKey is set, for every key (P: OnKey).
type LivenessProperty struct {
	Name  string
	At    Pc
	OnKey func(m *Model, s *State, k int) bool
}

// LivenessProperties are the spec's liveness properties, by name.
var LivenessProperties = map[string]LivenessProperty{
	"ReservationsEnd":          {Name: "ReservationsEnd", At: PcReserved},
	"DispatchesEnd":            {Name: "DispatchesEnd", At: PcDispatching},
	"WaitersReturn":            {Name: "WaitersReturn", At: PcWaiting},
	"ExpiredBindingsReclaimed": {Name: "ExpiredBindingsReclaimed", OnKey: idlePastDeadline},
	"TimeoutsFire":             {Name: "TimeoutsFire", OnKey: initPastDeadline},
	"QuarantinesEnd":           {Name: "QuarantinesEnd", OnKey: quarantineReachesItsEnd},
}

// idlePastDeadline is the spec's IdlePastDeadline(k).
func idlePastDeadline(_ *Model, s *State, k int) bool {
	e := &s.Table[k]
	return e.St == Bound && e.Leases == 0 && e.Deadline <= s.Now
}

// initPastDeadline is the spec's InitPastDeadline(k).
func initPastDeadline(_ *Model, s *State, k int) bool {
	e := &s.Table[k]
	return (e.St == Reserved || e.St == Dispatching) && e.Deadline <= s.Now
}

// The premise of QuarantinesEnd: a quarantine whose QuarantineTTL ends by
// the last instant the clock can reach (MaxClock - MaxDelay).
func quarantineReachesItsEnd(m *Model, s *State, k int) bool {
	return s.Table[k].St == Quarantined && s.Since[k]+m.Cfg.QuarantineTTL <= m.Cfg.MaxClock-m.MaxDelay()
}

// LivenessOutcome records how a liveness property was checked.
type LivenessOutcome struct {
	Property   string
	Components int // strongly connected components examined
	Holds      bool
}

// fairness is one weak-fairness conjunct of the spec's Fairness.
type fairness = lasso.Fairness[State, edge]

// fairnessFor returns the spec's ClientFairness conjuncts for request r:
// WF(Cancel(r) \/ BeginDispatch(r, _)), WF(Dispatching /\ Complete(r, _)),
// WF(Waiting /\ Acquire(r, key)).
func (m *Model) fairnessFor(r int) []fairness {
	return []fairness{
		{
			Enabled: func(s *State) bool { return s.Req[r].Pc == PcReserved || s.Req[r].Pc == PcRevoked },
			Taken: func(_ *State, e edge) bool {
				return int(e.r) == r && (e.act == ActCancel || e.act == ActBeginDispatch)
			},
		},
		{
			Enabled: func(s *State) bool { return s.Req[r].Pc == PcDispatching },
			Taken: func(from *State, e edge) bool {
				return int(e.r) == r && e.act == ActComplete && from.Req[r].Pc == PcDispatching
			},
		},
		{
			Enabled: func(s *State) bool {
				if s.Req[r].Pc != PcWaiting {
					return false
				}
				_, _, ok := m.Acquire(s, r, s.Req[r].Key)
				return ok
			},
			Taken: func(from *State, e edge) bool {
				return int(e.r) == r && e.act == ActAcquire && from.Req[r].Pc == PcWaiting
			},
		},
	}
}

// systemFairness returns the spec's SystemFairness conjuncts: for every key
// WF(Expire(k)), WF(DropStale(k)), WF(ReservationTimeout(k)),
// WF(DispatchTimeout(k)), WF(QuarantineExpire(k)), and WF(\E t : Advance(t)).
func (m *Model) systemFairness() []fairness {
	var out []fairness
	for k := range m.Cfg.Keys {
		for act, f := range map[Action]func(*State, int) (State, Result, bool){
			ActExpire: m.Expire, ActDropStale: m.DropStale,
			ActReservationTimeout: m.ReservationTimeout, ActDispatchTimeout: m.DispatchTimeout,
			ActQuarantineExpire: m.QuarantineExpire,
		} {
			out = append(out, fairness{
				Enabled: func(s *State) bool { _, _, ok := f(s, k); return ok },
				Taken:   func(_ *State, e edge) bool { return e.act == act && int(e.k) == k },
			})
		}
	}
	return append(out, fairness{
		Enabled: func(s *State) bool { return m.AdvanceAllowed(s, s.Now+1) },
		Taken:   func(_ *State, e edge) bool { return e.act == ActAdvance },
	})
}

// checkLiveness looks, for every request r (or key), for a fair behaviour
// that reaches a state where the property's premise holds and stays there
// forever: a strongly connected set of such states (a single state may
// stutter) in which every weakly fair action is disabled somewhere or taken.
// The spec's Fairness is weak fairness only.
func (m *Model) checkLiveness(g *graph, p LivenessProperty, trace func(int32) []Step) (LivenessOutcome, *Violation) {
	out := LivenessOutcome{Property: p.Name, Holds: true}
	states := g.states
	lg := lasso.Graph[State, edge]{States: states, Edges: g.edges, To: func(e edge) int32 { return e.to }}
	var fair []fairness // Fairness: every request's, and the system's own
	for r := range m.Cfg.Requests {
		fair = append(fair, m.fairnessFor(r)...)
	}
	if !m.ops.noSystemFairness {
		fair = append(fair, m.systemFairness()...)
	}
	subjects := len(m.Cfg.Requests)
	if p.OnKey != nil {
		subjects = len(m.Cfg.Keys)
	}
	for r := 0; r < subjects; r++ {
		in := make([]bool, len(states))
		for i := range states {
			if p.OnKey != nil {
				in[i] = p.OnKey(m, &states[i], r)
			} else {
				in[i] = states[i].Req[r].Pc == p.At
			}
		}
		for _, comp := range lg.Components(in) {
			out.Components++
			if !lg.Fair(comp, fair) {
				continue
			}
			out.Holds = false
			v := &Violation{Property: p.Name, Kind: "liveness", Trace: trace(comp[0])}
			for _, id := range comp[:min(len(comp), 8)] {
				v.Cycle = append(v.Cycle, Step{State: states[id]})
			}
			return out, v
		}
	}
	return out, nil
}
