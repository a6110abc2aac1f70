package model

import (
	"fmt"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"
)

// TestExploreSameForEveryWorkerCount: the report (every field but Elapsed,
// violation traces included) is the same with 1, 2, 3 and 4 workers, and
// the same as sequential BFS's (referenceExplore, the explorer as it was
// before it went parallel), on MCLiveness.cfg and on every MCBug and
// MCWitness config but two that explore MCLiveness.cfg's states again
// (under the race detector, the MCWitness configs alone). Every level is
// expanded in parallel (parallelFrom 1), however small.
func TestExploreSameForEveryWorkerCount(t *testing.T) {
	var cfgs []string
	for _, cfg := range configs(t) {
		name := filepath.Base(cfg)
		switch {
		case name == "MCPlacement.cfg" || name == "MCWide.cfg":
			continue // millions of states: TestConformance checks them with the default workers
		case name == "MCBugNoSystemFairness.cfg" || name == "MCBugQuarantineNeverExpires.cfg":
			continue // MCLiveness.cfg's state space again; MCBugNoHandOff.cfg has a liveness violation
		case raceEnabled && (name == "MCLiveness.cfg" || name == "MCBugNoHandOff.cfg"):
			continue // ~1M steps each: too slow under the race detector
		case raceEnabled && !strings.HasPrefix(name, "MCWitness"):
			// Under the race detector (make test's race step) the witnesses
			// race the workers: every config five times took 39 s of it, 59 s
			// beside a busy loop. The conformance step runs this test on
			// every config without it.
			continue
		case testing.Short() && name != "MCLiveness.cfg" && !strings.HasPrefix(name, "MCWitness"):
			continue
		}
		cfgs = append(cfgs, cfg)
	}
	for _, cfg := range cfgs {
		name := filepath.Base(cfg)
		t.Run(name, func(t *testing.T) {
			m, opts := readConfig(t, cfg)
			want, err := referenceExplore(m, opts)
			if err != nil {
				t.Fatal(err)
			}
			want.Elapsed = 0
			for _, workers := range []int{1, 2, 3, 4} {
				o := opts
				o.Workers, o.parallelFrom = workers, 1
				got, err := m.Explore(o)
				if err != nil {
					t.Fatal(err)
				}
				got.Elapsed = 0
				if !reflect.DeepEqual(got, want) {
					t.Errorf("%d workers: report differs from sequential BFS's:\n%s", workers, reportDiff(m, got, want))
				}
			}
		})
	}
}

// TestExploreMaxStatesSameForEveryWorkerCount: a state limit stops the
// exploration with an error exactly when it stops sequential BFS (which
// checks after each state's steps), whatever the number of workers; a
// violation found before the limit is reached is still reported.
func TestExploreMaxStatesSameForEveryWorkerCount(t *testing.T) {
	for _, name := range []string{"MCWitnessTwoQuarantines.cfg", "MCBugAcceptsStale.cfg"} {
		m, opts := readConfig(t, filepath.Join(specDir, name))
		full, err := referenceExplore(m, opts)
		if err != nil {
			t.Fatal(err)
		}
		for _, limit := range []int{1, 10, 100, full.Distinct / 2, full.Distinct - 1, full.Distinct, full.Distinct + 5} {
			o := opts
			o.MaxStates = limit
			want, wantErr := referenceExplore(m, o)
			for _, workers := range []int{1, 2, 3} {
				o.Workers, o.parallelFrom = workers, 1
				got, err := m.Explore(o)
				if (err != nil) != (wantErr != nil) {
					t.Fatalf("%s, MaxStates %d, %d workers: error %v; sequential BFS: %v", name, limit, workers, err, wantErr)
				}
				if err != nil {
					continue
				}
				got.Elapsed, want.Elapsed = 0, 0
				if !reflect.DeepEqual(got, want) {
					t.Errorf("%s, MaxStates %d, %d workers: report differs:\n%s", name, limit, workers, reportDiff(m, got, want))
				}
			}
		}
	}
}

// reportDiff describes how two reports differ.
func reportDiff(m *Model, got, want *Report) string {
	var b strings.Builder
	gv, wv := reflect.ValueOf(*got), reflect.ValueOf(*want)
	for i := 0; i < gv.NumField(); i++ {
		if !reflect.DeepEqual(gv.Field(i).Interface(), wv.Field(i).Interface()) {
			fmt.Fprintf(&b, "  %s: got %v\n  %*s want %v\n", gv.Type().Field(i).Name, gv.Field(i).Interface(),
				len(gv.Type().Field(i).Name), "", wv.Field(i).Interface())
		}
	}
	if got.Violation != nil && want.Violation != nil && !reflect.DeepEqual(got.Violation, want.Violation) {
		fmt.Fprintf(&b, "got trace:\n%s\nwant trace:\n%s", m.FormatTrace(got.Violation), m.FormatTrace(want.Violation))
	}
	return b.String()
}

// referenceExplore is the explorer as it was when it ran on one core: plain
// sequential BFS over a map of string keys. The parallel explorer must
// report exactly what it reports.
func referenceExplore(m *Model, opts Options) (*Report, error) {
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
		for _, k := range keys {
			s, _ := DecodeKey(k)
			g.states = append(g.states, s)
		}
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

// TestKeyCodec: the one codec of states (appendKey, which State.Key
// writes, and keyDecoder, which DecodeKey and the explorer read with) is a
// bijection on every state (and every successor) reachable in
// MCLiveness.cfg and on the first states BFS reaches in configs with three
// requests (two may wait on one key, so both queues hold several): a key
// decodes to a state equal to the one encoded, which encodes back to the
// same key; a decoder reused from a longer state leaves nothing behind;
// corrupt keys are refused.
func TestKeyCodec(t *testing.T) {
	names := []string{"MCLiveness.cfg", "MCWitnessTwoWaiters.cfg", "MCWide.cfg"}
	limit := 50_000
	if raceEnabled {
		names, limit = names[1:], 5_000
	}
	for _, name := range names {
		c, err := ReadTLCConfig(filepath.Join(specDir, name))
		if err != nil {
			t.Fatal(err)
		}
		m, err := c.Load()
		if err != nil {
			t.Fatal(err)
		}
		var dec keyDecoder // reused across states, as the explorer does
		var buf []byte
		check := func(s *State) string {
			buf = appendKey(buf[:0], s)
			key := string(buf)
			got, err := dec.decode(buf)
			if err != nil {
				t.Fatalf("%s: %v", name, err)
			}
			if !got.Equal(s) || string(appendKey(nil, got)) != key {
				t.Fatalf("%s: the key of\n%s\ndecodes to\n%s", name, m.FormatState(s), m.FormatState(got))
			}
			if ref, err := DecodeKey(key); err != nil || !ref.Equal(s) {
				t.Fatalf("%s: DecodeKey: %v", name, err)
			}
			return key
		}
		init := m.Init()
		seen := map[string]bool{check(&init): true}
		queue := []string{init.Key()}
		waiting := 0
		for len(queue) > 0 && len(seen) < limit {
			s, _ := DecodeKey(queue[0])
			queue = queue[1:]
			m.Steps(&s, func(_ Label, n *State) {
				k := check(n)
				if !seen[k] {
					seen[k] = true
					queue = append(queue, k)
					for _, q := range n.Arrivals {
						if len(q) > 1 {
							waiting++
						}
					}
				}
			})
		}
		if name == "MCWitnessTwoWaiters.cfg" && waiting == 0 {
			t.Errorf("%s: no state with two waiters; the codec's queues went untested", name)
		}
		t.Logf("%s: %d states", name, len(seen))
	}
	for _, bad := range [][]byte{{1, 2, 3}, {}, append(appendKey(nil, new(State)), 7)} {
		if _, err := new(keyDecoder).decode(bad); err == nil {
			t.Errorf("keyDecoder accepted the corrupt key %v", bad)
		}
	}
}
