package model

import (
	"fmt"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
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
	// Workers is how many goroutines expand the states of a BFS level;
	// 0 means runtime.GOMAXPROCS(0). The report does not depend on it.
	Workers int
	// parallelFrom overrides defaultParallelFrom (tests set 1 to expand
	// even the smallest levels in parallel).
	parallelFrom int
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
	states []State // by id
	edges  [][]edge
}

type edge struct {
	to   int32
	act  Action
	r, k int16 // the step's request and key (None where it names none)
}

// defaultParallelFrom is the smallest BFS level (in states to expand) the
// explorer expands with several workers; smaller ones are not worth the
// synchronization.
const defaultParallelFrom = 64

// explorer is one run of Explore.
type explorer struct {
	m            *Model
	opts         Options
	workers      int
	parallelFrom int
	rep          *Report
	st           *store
	keepGraph    bool
	edges        [][]edge // when keepGraph: by state id
	lvl          *levelSet
}

// Explore enumerates every state reachable from Init by breadth-first
// search, checking opts on each state and step. It stops at the first
// violation, which then has a shortest trace.
//
// The search is level by level: with several workers (opts.Workers), each
// level's states are expanded in parallel and the new states found are
// then numbered in the order sequential BFS discovers them (by parent, then
// by the order of its steps), so the report is the same whatever the
// number of workers. A level in which some property fails is expanded
// again sequentially, which finds the violation sequential BFS reports,
// with the same counts.
func (m *Model) Explore(opts Options) (*Report, error) {
	start := time.Now()
	x := &explorer{m: m, opts: opts, workers: opts.Workers, parallelFrom: opts.parallelFrom,
		rep: &Report{Variants: m.Variants}, st: newStore(), keepGraph: len(opts.Liveness) > 0}
	if x.workers <= 0 {
		x.workers = runtime.GOMAXPROCS(0)
	}
	if x.parallelFrom <= 0 {
		x.parallelFrom = defaultParallelFrom
	}
	if err := x.run(); err != nil {
		return nil, err
	}
	x.rep.Distinct = x.st.len()
	x.rep.Elapsed = time.Since(start)
	return x.rep, nil
}

func (x *explorer) run() error {
	m, rep, st := x.m, x.rep, x.st
	init := m.Init()
	k0 := appendKey(nil, &init)
	h := st.hash(k0)
	_, off := st.add(k0, -1, 0)
	st.shards[shardOf(h)].insert(tagOf(h), off)
	rep.Generated = 1
	rep.Depth = 1
	if !x.checkState(0, &init) {
		return nil
	}
	if x.keepGraph {
		x.edges = append(x.edges, nil)
	}
	for lo, hi, depth := 0, 1, 1; lo < hi; lo, hi, depth = hi, st.len(), depth+1 {
		var stop bool
		var err error
		if x.workers > 1 && hi-lo >= x.parallelFrom {
			stop, err = x.parallelLevel(int32(lo), int32(hi), depth)
		} else {
			stop, err = x.seqLevel(int32(lo), int32(hi), depth)
		}
		if err != nil || stop {
			return err
		}
	}
	rep.StateSetHash = st.setHash(x.workers)
	if x.keepGraph {
		return x.checkLiveness()
	}
	return nil
}

// checkLiveness checks the liveness properties on the state graph, each on
// its own goroutine (at most x.workers at once), and reports them in order.
func (x *explorer) checkLiveness() error {
	g := &graph{states: make([]State, x.st.len()), edges: x.edges}
	errs := make([]error, x.workers)
	x.parallel(x.workers, func(w int) {
		for id := w; id < len(g.states); id += x.workers {
			var err error
			if g.states[id], err = x.decode(int32(id)); err != nil {
				errs[w] = err
				return
			}
		}
	})
	for _, err := range errs {
		if err != nil {
			return err
		}
	}
	props := x.opts.Liveness
	outs := make([]LivenessOutcome, len(props))
	vs := make([]*Violation, len(props))
	var next atomic.Int32
	x.parallel(min(x.workers, len(props)), func(int) {
		for i := int(next.Add(1) - 1); i < len(props); i = int(next.Add(1) - 1) {
			outs[i], vs[i] = x.m.checkLiveness(g, props[i], x.trace)
		}
	})
	x.rep.Liveness = outs
	for _, v := range vs {
		if v != nil && x.rep.Violation == nil {
			x.rep.Violation = v
		}
	}
	return nil
}

// parallel calls f(0) .. f(n-1) on n goroutines and waits for them.
func (x *explorer) parallel(n int, f func(worker int)) {
	var wg sync.WaitGroup
	for w := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			f(w)
		}()
	}
	wg.Wait()
}

// decode returns state id.
func (x *explorer) decode(id int32) (State, error) {
	return DecodeKey(string(x.st.keyBytes(id)))
}

// label returns the step by which state id was first reached: the
// step[id]-th step of its parent.
func (x *explorer) label(id int32) Label {
	ps, _ := x.decode(x.st.parent[id])
	var lab Label
	j, want := uint32(0), x.st.step[id]
	x.m.Steps(&ps, func(l Label, _ *State) {
		if j == want {
			lab = l
		}
		j++
	})
	return lab
}

// trace returns the path by which state id was first reached.
func (x *explorer) trace(id int32) []Step {
	var path []int32
	for ; id >= 0; id = x.st.parent[id] {
		path = append(path, id)
	}
	out := make([]Step, 0, len(path))
	for i := len(path) - 1; i >= 0; i-- {
		s, _ := x.decode(path[i])
		st := Step{State: s}
		if i < len(path)-1 {
			st.Action = x.m.Format(x.label(path[i]))
		}
		out = append(out, st)
	}
	return out
}

// checkState checks the invariants on state id (s), recording the first
// that fails.
func (x *explorer) checkState(id int32, s *State) bool {
	for _, inv := range x.opts.Invariants {
		if !inv.Holds(x.m, s) {
			x.rep.Violation = &Violation{Property: inv.Name, Kind: "invariant", Trace: x.trace(id)}
			return false
		}
	}
	return true
}

// seqLevel expands states lo..hi-1 (at depth depth) one by one, exactly as
// sequential BFS does, and reports whether it stopped at a violation.
func (x *explorer) seqLevel(lo, hi int32, depth int) (bool, error) {
	m, rep, st, opts := x.m, x.rep, x.st, &x.opts
	var dec keyDecoder
	var buf, prev []byte
	for cur := lo; cur < hi; cur++ {
		key := st.keyBytes(cur)
		s, err := dec.decode(key)
		if err != nil {
			return false, err
		}
		var stop bool
		j := uint32(0)
		prevID := int32(-1)
		m.Steps(s, func(l Label, t *State) {
			if stop {
				return
			}
			idx := j
			j++
			rep.Generated++
			rep.Coverage[l.Act]++
			// Every step is judged, stuttering ones too: TLC checks
			// [][P]_allvars on every step that names a new label.
			for _, p := range opts.Actions {
				if !p.Holds(m, s, l, t) {
					tr := x.trace(cur)
					tr = append(tr, Step{Action: m.Format(l), State: t.Clone()})
					rep.Violation = &Violation{Property: p.Name, Kind: "action property", Trace: tr}
					stop = true
					return
				}
			}
			buf = appendKey(buf[:0], t)
			// A third of all steps stutter, and half repeat the previous
			// step's successor: both are cheaper to recognize than to look up.
			var id int32
			switch {
			case string(buf) == string(key):
				id = cur
			case prevID >= 0 && string(buf) == string(prev):
				id = prevID
			default:
				h := st.hash(buf)
				off, seen := st.lookup(h, buf)
				if seen {
					id = st.idAt(off)
				} else {
					id, off = st.add(buf, cur, idx)
					st.shards[shardOf(h)].insert(tagOf(h), off)
					rep.Depth = max(rep.Depth, depth+1)
					rep.NewStates[l.Act]++
					if x.keepGraph {
						x.edges = append(x.edges, nil)
					}
					if !x.checkState(id, t) {
						stop = true
						return
					}
				}
			}
			buf, prev, prevID = prev, buf, id
			if x.keepGraph && id != cur {
				x.edges[cur] = append(x.edges[cur], edge{to: id, act: l.Act, r: int16(l.R), k: int16(l.K)})
			}
		})
		if stop {
			return true, nil
		}
		if opts.MaxStates > 0 && st.len() > opts.MaxStates {
			return false, errTooMany(opts.MaxStates)
		}
	}
	return false, nil
}

func errTooMany(n int) error { return fmt.Errorf("model: more than %d distinct states", n) }

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
