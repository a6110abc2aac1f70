package claims

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

// fairness is one weak-fairness conjunct of the spec's Fairness.
type fairness struct {
	enabled func(s *State) bool             // ENABLED <A>_vars (A never stutters)
	taken   func(from *State, l Label) bool // the step is an A step
}

// fairnessConjuncts returns the spec's Fairness: for every replica r,
// WF(Receive(r)), and for every session s WF(Reconcile(r, s)) and
// WF(Reclaim(r, s)). The actions are used here as the spec's Fairness uses
// them; the properties judged under it do not.
func (m *Model) fairnessConjuncts() []fairness {
	var out []fairness
	for r := range m.Cfg.Replicas {
		out = append(out, fairness{
			enabled: func(s *State) bool { _, ok := m.Receive(s, r); return ok },
			taken:   func(_ *State, l Label) bool { return l.Act == ActReceive && l.R == r },
		})
		for ss := range m.Cfg.Sessions {
			out = append(out, fairness{
				enabled: func(s *State) bool { _, ok := m.Reconcile(s, r, ss); return ok },
				taken: func(_ *State, l Label) bool {
					return l.Act == ActReconcile && l.R == r && l.S == ss
				},
			}, fairness{
				enabled: func(s *State) bool {
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
				taken: func(from *State, l Label) bool {
					return l.Act == ActClaim && l.R == r && l.S == ss && from.Cache[m.ix(r, ss)].St.claimed()
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
	for r := range m.Cfg.Replicas {
		for ss := range m.Cfg.Sessions {
			in := make([]bool, len(g.states))
			for i := range g.states {
				in[i] = p.Due(m, &g.states[i], r, ss)
			}
			for _, comp := range sccs(g, in) {
				if fairComponent(g, comp, fair) {
					return &Violation{Property: p.Name, Kind: "liveness", Trace: trace(comp[0])}
				}
			}
		}
	}
	return nil
}

// fairComponent reports whether a behaviour may stay in comp forever: every
// weakly fair action is taken inside it or disabled somewhere in it.
func fairComponent(g *graph, comp []int32, fair []fairness) bool {
	inComp := map[int32]bool{}
	for _, v := range comp {
		inComp[v] = true
	}
	for _, f := range fair {
		enabledAll, taken := true, false
		for _, v := range comp {
			enabledAll = enabledAll && f.enabled(&g.states[v])
			for _, e := range g.edges[v] {
				if inComp[e.to] && f.taken(&g.states[v], e.l) {
					taken = true
				}
			}
		}
		if !taken && enabledAll {
			return false
		}
	}
	return true
}

// sccs returns the strongly connected components of the subgraph induced by
// the states with in[v] set (iterative Tarjan).
func sccs(g *graph, in []bool) [][]int32 {
	n := len(in)
	index := make([]int32, n)
	low := make([]int32, n)
	onStack := make([]bool, n)
	for i := range index {
		index[i] = -1
	}
	var stack []int32
	var out [][]int32
	next := int32(0)
	type frame struct {
		v  int32
		ei int
	}
	for root := range n {
		if !in[root] || index[root] >= 0 {
			continue
		}
		call := []frame{{v: int32(root)}}
		index[root], low[root] = next, next
		next++
		stack = append(stack, int32(root))
		onStack[root] = true
		for len(call) > 0 {
			f := &call[len(call)-1]
			v := f.v
			if f.ei < len(g.edges[v]) {
				w := g.edges[v][f.ei].to
				f.ei++
				if !in[w] {
					continue
				}
				if index[w] < 0 {
					index[w], low[w] = next, next
					next++
					stack = append(stack, w)
					onStack[w] = true
					call = append(call, frame{v: w})
				} else if onStack[w] {
					low[v] = min(low[v], index[w])
				}
				continue
			}
			if low[v] == index[v] {
				var comp []int32
				for {
					w := stack[len(stack)-1]
					stack = stack[:len(stack)-1]
					onStack[w] = false
					comp = append(comp, w)
					if w == v {
						break
					}
				}
				out = append(out, comp)
			}
			call = call[:len(call)-1]
			if len(call) > 0 {
				u := call[len(call)-1].v
				low[u] = min(low[u], low[v])
			}
		}
	}
	return out
}
