// Package lasso finds the fair cycles of a state graph, for the liveness
// checks of the model explorers (package model for spec/tla/MCPlacement.tla,
// package model/claims for spec/tla/MCClaims.tla): the strongly connected
// components of the states where a property's premise holds, and whether a
// behaviour may stay in one forever under weak fairness. It knows nothing
// of either model: states and edges are theirs, and so are the fairness
// conjuncts.
package lasso

// Graph is a state graph: Edges[v] are the steps from States[v], and To
// returns the id of the state a step leads to.
type Graph[S, E any] struct {
	States []S
	Edges  [][]E
	To     func(E) int32
}

// Fairness is one weak-fairness conjunct WF_vars(A) of a spec's Fairness.
type Fairness[S, E any] struct {
	Enabled func(s *S) bool         // ENABLED <A>_vars
	Taken   func(from *S, e E) bool // the step e from from is an A step
}

// Fair reports whether a behaviour may stay in comp forever under fair:
// every weakly fair action is taken inside it or disabled somewhere in it.
func (g Graph[S, E]) Fair(comp []int32, fair []Fairness[S, E]) bool {
	inComp := map[int32]bool{}
	for _, v := range comp {
		inComp[v] = true
	}
	for _, f := range fair {
		enabledAll, taken := true, false
		for _, v := range comp {
			enabledAll = enabledAll && f.Enabled(&g.States[v])
			for _, e := range g.Edges[v] {
				if inComp[g.To(e)] && f.Taken(&g.States[v], e) {
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

// Components returns the strongly connected components of the subgraph
// induced by the states with in[v] set (iterative Tarjan). A single state
// is a component of its own, with or without a step to itself: a behaviour
// may stutter there.
func (g Graph[S, E]) Components(in []bool) [][]int32 {
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
			if f.ei < len(g.Edges[v]) {
				w := g.To(g.Edges[v][f.ei])
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
