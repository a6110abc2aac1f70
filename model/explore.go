package model

import (
	"fmt"
	"strings"
	"time"
)

// Options says what Explore checks.
type Options struct {
	Invariants []Invariant
	Actions    []ActionProperty
	Liveness   []LivenessProperty
	// MaxStates stops exploration (as an error) beyond this many distinct
	// states; 0 means no limit.
	MaxStates int
}

// OptionsFor resolves a TLC config's INVARIANTS and PROPERTIES by name.
func OptionsFor(c *TLCConfig) (Options, error) {
	var o Options
	for _, n := range c.Invariants {
		inv, ok := Invariants[n]
		if !ok {
			inv, ok = WitnessInvariants[n]
		}
		if !ok {
			return o, fmt.Errorf("%s: the model has no invariant %s", c.Path, n)
		}
		o.Invariants = append(o.Invariants, inv)
	}
	for _, n := range c.Properties {
		if p, ok := ActionProperties[n]; ok {
			o.Actions = append(o.Actions, p)
		} else if p, ok := WitnessActions[n]; ok {
			o.Actions = append(o.Actions, p)
		} else if p, ok := LivenessProperties[n]; ok {
			o.Liveness = append(o.Liveness, p)
		} else {
			return o, fmt.Errorf("%s: the model has no property %s", c.Path, n)
		}
	}
	return o, nil
}

// Step is one state of a trace and the action that reached it.
type Step struct {
	Action string // empty for the initial state
	State  State
}

// Violation is a property the explorer found violated, with the shortest
// trace to it (for liveness: a trace to the cycle, then the cycle).
type Violation struct {
	Property string
	Kind     string // "invariant", "action property" or "liveness"
	Trace    []Step
	Cycle    []Step // liveness only: states the behaviour may stay in forever
}

// Report is the result of an exploration.
type Report struct {
	Distinct     int               // distinct states found
	Generated    int64             // successor states generated (as TLC counts them, plus the initial one)
	Depth        int               // length of the longest shortest path, in states
	Coverage     [numActions]int64 // steps generated per action
	NewStates    [numActions]int64 // distinct states first reached per action
	StateSetHash string            // StateSetHash of all distinct states
	Violation    *Violation        // nil when every property holds
	Elapsed      time.Duration     //
	Variants     []string          // broken variants applied
	Liveness     []LivenessOutcome // per liveness property, when checked
}

// StatesPerSecond is the exploration rate.
func (r *Report) StatesPerSecond() float64 {
	if r.Elapsed <= 0 {
		return 0
	}
	return float64(r.Distinct) / r.Elapsed.Seconds()
}

// UnreachedActions lists the actions that no step exercised.
func (r *Report) UnreachedActions() []string {
	var out []string
	for a := Action(0); a < numActions; a++ {
		if r.Coverage[a] == 0 {
			out = append(out, a.String())
		}
	}
	return out
}

// graph is the explored state graph, kept for liveness checking.
type graph struct {
	keys  []string
	edges [][]edge
}

type edge struct {
	to   int32
	act  Action
	r, k int16 // the step's request and key (None where it names none)
}

// Explore enumerates every state reachable from Init by breadth-first
// search, checking opts on each state and step. It stops at the first
// violation, which then has a shortest trace.
func (m *Model) Explore(opts Options) (*Report, error) {
	start := time.Now()
	rep := &Report{Variants: m.Variants}
	ids := map[string]int32{}
	var keys []string
	var parent []int32
	var via []Label
	var depth []int16
	keepGraph := len(opts.Liveness) > 0
	g := &graph{}

	trace := func(id int32) []Step {
		var rev []Step
		for ; id >= 0; id = parent[id] {
			s, _ := DecodeKey(keys[id])
			st := Step{State: s}
			if parent[id] >= 0 {
				st.Action = m.Format(via[id])
			}
			rev = append(rev, st)
		}
		for i, j := 0, len(rev)-1; i < j; i, j = i+1, j-1 {
			rev[i], rev[j] = rev[j], rev[i]
		}
		return rev
	}
	finish := func() *Report {
		rep.Distinct = len(keys)
		rep.Elapsed = time.Since(start)
		return rep
	}
	checkState := func(id int32, s *State) bool {
		for _, inv := range opts.Invariants {
			if !inv.Holds(m, s) {
				rep.Violation = &Violation{Property: inv.Name, Kind: "invariant", Trace: trace(id)}
				return false
			}
		}
		return true
	}

	init := m.Init()
	k0 := init.Key()
	ids[k0] = 0
	keys, parent, via, depth = append(keys, k0), append(parent, -1), append(via, Label{}), append(depth, 1)
	rep.Generated = 1
	rep.Depth = 1
	if !checkState(0, &init) {
		return finish(), nil
	}
	if keepGraph {
		g.edges = append(g.edges, nil)
	}
	for cur := int32(0); int(cur) < len(keys); cur++ {
		s, err := DecodeKey(keys[cur])
		if err != nil {
			return nil, err
		}
		var stop bool
		m.Steps(&s, func(l Label, t *State) {
			if stop {
				return
			}
			rep.Generated++
			rep.Coverage[l.Act]++
			// Every step is judged, stuttering ones too: TLC checks
			// [][P]_allvars on every step that names a new label.
			for _, p := range opts.Actions {
				if !p.Holds(m, &s, l, t) {
					tr := trace(cur)
					tr = append(tr, Step{Action: m.Format(l), State: t.Clone()})
					rep.Violation = &Violation{Property: p.Name, Kind: "action property", Trace: tr}
					stop = true
					return
				}
			}
			key := t.Key()
			id, seen := ids[key]
			if !seen {
				id = int32(len(keys))
				ids[key] = id
				keys = append(keys, key)
				parent = append(parent, cur)
				via = append(via, l)
				depth = append(depth, depth[cur]+1)
				rep.Depth = max(rep.Depth, int(depth[id]))
				rep.NewStates[l.Act]++
				if keepGraph {
					g.edges = append(g.edges, nil)
				}
				if !checkState(id, t) {
					stop = true
					return
				}
			}
			if keepGraph && id != cur {
				g.edges[cur] = append(g.edges[cur], edge{to: id, act: l.Act, r: int16(l.R), k: int16(l.K)})
			}
		})
		if stop {
			return finish(), nil
		}
		if opts.MaxStates > 0 && len(keys) > opts.MaxStates {
			return nil, fmt.Errorf("model: more than %d distinct states", opts.MaxStates)
		}
	}
	rep.StateSetHash = StateSetHash(keys)
	if keepGraph {
		g.keys = keys
		for _, p := range opts.Liveness {
			out, v := m.checkLiveness(g, p, trace)
			rep.Liveness = append(rep.Liveness, out)
			if v != nil && rep.Violation == nil {
				rep.Violation = v
			}
		}
	}
	return finish(), nil
}

// FormatTrace renders a violation's trace as TLC would print it.
func (m *Model) FormatTrace(v *Violation) string {
	var b strings.Builder
	for i, st := range v.Trace {
		if st.Action == "" {
			fmt.Fprintf(&b, "State %d: <Initial predicate>\n", i+1)
		} else {
			fmt.Fprintf(&b, "State %d: <%s>\n", i+1, st.Action)
		}
		b.WriteString(m.FormatState(&st.State))
		b.WriteByte('\n')
	}
	if len(v.Cycle) > 0 {
		fmt.Fprintf(&b, "... then the behaviour stays forever among these %d states:\n", len(v.Cycle))
		for _, st := range v.Cycle {
			b.WriteString(m.FormatState(&st.State))
			b.WriteByte('\n')
		}
	}
	return b.String()
}
