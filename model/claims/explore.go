package claims

import (
	"fmt"
	"strings"
	"time"

	"github.com/placementlab/placement/model"
)

// Options says what Explore checks.
type Options struct {
	Invariants []Invariant
	Actions    []ActionProperty
	// Liveness properties are checked on the whole state graph, under the
	// spec's Fairness, once every state is found.
	Liveness []LivenessProperty
	// MaxStates stops exploration (as an error) beyond this many distinct
	// states; 0 means no limit.
	MaxStates int
}

// Step is one state of a trace and the action that reached it.
type Step struct {
	Action string // empty for the initial state
	State  State
}

// Violation is a property the explorer found violated, with a shortest
// trace to it.
type Violation struct {
	Property string
	Kind     string // "invariant", "action property" or "liveness"
	Trace    []Step
}

// Report is the result of an exploration.
type Report struct {
	Distinct     int               // distinct states found
	Generated    int64             // successor states generated, as TLC counts them, plus the initial one
	Depth        int               // length of the longest shortest path, in states
	Coverage     [numActions]int64 // steps generated per action
	NewStates    [numActions]int64 // distinct states first reached per action
	StateSetHash string            // model.StateSetHash of every distinct state's Key
	Violation    *Violation        // nil when every property holds
	Elapsed      time.Duration
	Variants     []string // broken variants applied
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

// ErrTooManyStates is returned (wrapped) when Options.MaxStates is exceeded.
var ErrTooManyStates = fmt.Errorf("claims: too many states")

// Explore enumerates every state reachable from Init, breadth first, as
// TLC does with one worker, checking opts on every state and step. It
// stops at the first violation, which then has a shortest trace.
func (m *Model) Explore(opts Options) (*Report, error) {
	start := time.Now()
	rep := &Report{Variants: m.Variants}
	ids := map[string]int32{}
	var keys []string
	var parent []int32
	var label []Label
	add := func(k string, p int32, l Label) int32 {
		id := int32(len(keys))
		ids[k] = id
		keys = append(keys, k)
		parent = append(parent, p)
		label = append(label, l)
		return id
	}
	trace := func(id int32) []Step {
		var path []int32
		for ; id >= 0; id = parent[id] {
			path = append(path, id)
		}
		out := make([]Step, 0, len(path))
		for i := len(path) - 1; i >= 0; i-- {
			s, _ := m.decode(keys[path[i]])
			st := Step{State: s}
			if i < len(path)-1 {
				st.Action = m.Format(label[path[i]])
			}
			out = append(out, st)
		}
		return out
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
	var g *graph // the state graph, kept only to check liveness
	if len(opts.Liveness) > 0 {
		g = &graph{}
	}
	init := m.Init()
	add(init.Key(), -1, Label{})
	if g != nil {
		g.states = append(g.states, init)
		g.edges = append(g.edges, nil)
	}
	rep.Generated, rep.Depth = 1, 1
	done := func() (*Report, error) {
		rep.Distinct = len(keys)
		rep.Elapsed = time.Since(start)
		return rep, nil
	}
	if !checkState(0, &init) {
		return done()
	}
	states := []State{init} // the current level's states, by id - lo
	for lo, depth := 0, 1; lo < len(keys); depth++ {
		hi := len(keys)
		var next []State
		for cur := lo; cur < hi; cur++ {
			s := &states[cur-lo]
			stop := false
			m.Steps(s, func(l Label, t *State) {
				if stop {
					return
				}
				rep.Generated++
				rep.Coverage[l.Act]++
				for _, p := range opts.Actions {
					if !p.Holds(m, s, l, t) {
						tr := append(trace(int32(cur)), Step{Action: m.Format(l), State: t.Clone()})
						rep.Violation = &Violation{Property: p.Name, Kind: "action property", Trace: tr}
						stop = true
						return
					}
				}
				k := t.Key()
				if id, seen := ids[k]; seen {
					if g != nil {
						g.edges[cur] = append(g.edges[cur], edge{to: id, l: l})
					}
					return
				}
				id := add(k, int32(cur), l)
				if g != nil {
					g.edges[cur] = append(g.edges[cur], edge{to: id, l: l})
					g.states = append(g.states, t.Clone())
					g.edges = append(g.edges, nil)
				}
				rep.Depth = max(rep.Depth, depth+1)
				rep.NewStates[l.Act]++
				next = append(next, *t) // t is the step's own state: no copy needed
				if !checkState(id, t) {
					stop = true
				}
			})
			if stop {
				return done()
			}
			if opts.MaxStates > 0 && len(keys) > opts.MaxStates {
				return nil, fmt.Errorf("%w: more than %d distinct states", ErrTooManyStates, opts.MaxStates)
			}
		}
		lo, states = hi, next
	}
	rep.StateSetHash = model.StateSetHash(keys)
	for _, p := range opts.Liveness {
		if v := m.checkLiveness(g, p, trace); v != nil {
			rep.Violation = v
			break
		}
	}
	return done()
}

// decode returns the state whose key is k (the explorer keeps keys only
// for traces): it re-derives it from the key.
func (m *Model) decode(k string) (State, error) { return m.DecodeKey(k) }

// FormatTrace renders a violation's trace as TLC prints one.
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
	return b.String()
}
