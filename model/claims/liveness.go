package claims

import "github.com/placementlab/placement/model/lasso"

// edge is a step of the state graph: to the state with id to, by l.
type edge struct {
	to int32
	l  Label
}

// graph is the state graph the explorer keeps when it checks liveness.
type graph struct {
	states []State
	edges  [][]edge
}

// fairness is one weak-fairness conjunct of the spec's Fairness (its
// actions never stutter).
type fairness = lasso.Fairness[State, edge]

// fairnessConjuncts returns the spec's Fairness: for every replica r,
// WF(Receive(r)), and for every session s WF(Reconcile(r, s)) and
// WF(Reclaim(r, s)). The actions are used here as the spec's Fairness uses
// them; the properties judged under it do not.
func (m *Model) fairnessConjuncts() []fairness {
	var out []fairness
	for r := range m.Cfg.Replicas {
		out = append(out, fairness{
			Enabled: func(s *State) bool { _, ok := m.Receive(s, r); return ok },
			Taken:   func(_ *State, e edge) bool { return e.l.Act == ActReceive && e.l.R == r },
		})
		for ss := range m.Cfg.Sessions {
			out = append(out, fairness{
				Enabled: func(s *State) bool { _, ok := m.Reconcile(s, r, ss); return ok },
				Taken: func(_ *State, e edge) bool {
					return e.l.Act == ActReconcile && e.l.R == r && e.l.S == ss
				},
			}, fairness{
				Enabled: func(s *State) bool {
					if !s.Cache[m.ix(r, ss)].St.claimed() {
						return false
					}
					for w := range m.Cfg.Workers {
						if _, ok := m.Claim(s, r, ss, w); ok {
							return true
						}
					}
					return false
				},
				Taken: func(from *State, e edge) bool {
					return e.l.Act == ActClaim && e.l.R == r && e.l.S == ss && from.Cache[m.ix(r, ss)].St.claimed()
				},
			})
		}
	}
	return out
}

// checkLiveness looks, for every replica and session, for a fair behaviour
// that reaches a state where p's premise holds and stays in such states
// forever: a strongly connected set of them (a single state may stutter)
// in which every weakly fair action is taken or disabled somewhere. It
// returns the first such violation, with a trace to the set.
func (m *Model) checkLiveness(g *graph, p LivenessProperty, trace func(int32) []Step) *Violation {
	fair := m.fairnessConjuncts()
	lg := lasso.Graph[State, edge]{States: g.states, Edges: g.edges, To: func(e edge) int32 { return e.to }}
	for r := range m.Cfg.Replicas {
		for ss := range m.Cfg.Sessions {
			in := make([]bool, len(g.states))
			for i := range g.states {
				in[i] = p.Due(m, &g.states[i], r, ss)
			}
			for _, comp := range lg.Components(in) {
				if lg.Fair(comp, fair) {
					return &Violation{Property: p.Name, Kind: "liveness", Trace: trace(comp[0])}
				}
			}
		}
	}
	return nil
}
