package picker_test

import (
	"math"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"pgregory.net/rapid"

	"github.com/placementlab/placement/impl/affinity"
	"github.com/placementlab/placement/impl/picker"
)

// costed is a candidate on worker w with cost c (0: unknown).
func costed(w string, c time.Duration) picker.Candidate {
	return picker.Candidate{Target: affinity.WorkerOnly(w), Cost: c}
}

// TestCostWithin: the candidates within Slack of the cheapest known cost
// stay, in order, with every unknown cost; no known cost keeps all; a
// negative Slack is 0; a huge one does not overflow.
func TestCostWithin(t *testing.T) {
	s := time.Second
	tests := []struct {
		name  string
		slack time.Duration
		cands []picker.Candidate
		want  []string
	}{
		{"within and beyond", 2 * s, []picker.Candidate{costed("a", 5*s), costed("b", 7*s), costed("c", 7*s+1), costed("d", 3*s)}, []string{"a", "d"}},
		{"the boundary is kept", 2 * s, []picker.Candidate{costed("a", 5*s), costed("b", 3*s)}, []string{"a", "b"}},
		{"unknown kept, not the cheapest", s, []picker.Candidate{costed("a", 5*s), costed("b", 0), costed("c", 9*s), costed("d", -s)}, []string{"a", "b", "d"}},
		{"none known keeps all", s, []picker.Candidate{costed("a", 0), costed("b", 0)}, []string{"a", "b"}},
		{"zero slack keeps the cheapest ties", 0, []picker.Candidate{costed("a", 2), costed("b", 1), costed("c", 1)}, []string{"b", "c"}},
		{"negative slack is zero", -s, []picker.Candidate{costed("a", 2), costed("b", 1)}, []string{"b"}},
		{"no overflow", math.MaxInt64, []picker.Candidate{costed("a", math.MaxInt64), costed("b", 1)}, []string{"a", "b"}},
		{"empty", s, nil, []string{}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			in := append([]picker.Candidate(nil), tc.cands...)
			assert.Equal(t, tc.want, workers(picker.CostWithin{Slack: tc.slack}.Filter(nil, in)))
			assert.Equal(t, tc.cands, in, "the input is not modified")
		})
	}
}

// TestMarkCostly: only the candidates of the given target are flagged,
// and only when their known cost exceeds the cheapest known by more than
// slack; flags are never cleared.
func TestMarkCostly(t *testing.T) {
	s := time.Second
	tests := []struct {
		name   string
		t      string
		slack  time.Duration
		cands  []picker.Candidate
		marked bool
		want   []bool
	}{
		{"costlier by more than slack", "a", 2 * s, []picker.Candidate{costed("a", 4*s+1), costed("b", 2*s), costed("c", 9*s)}, true, []bool{true, false, false}},
		{"by exactly slack", "a", 2 * s, []picker.Candidate{costed("a", 4*s), costed("b", 2*s)}, false, []bool{false, false}},
		{"the cheapest itself", "b", 0, []picker.Candidate{costed("a", 4*s), costed("b", 2*s)}, false, []bool{false, false}},
		{"unknown cost never marked", "a", 0, []picker.Candidate{costed("a", 0), costed("b", 2*s)}, false, []bool{false, false}},
		{"unknown is not the cheapest", "a", s, []picker.Candidate{costed("a", 3*s), costed("b", 0), costed("c", 2*s)}, false, []bool{false, false, false}},
		{"target absent", "z", 0, []picker.Candidate{costed("a", 4*s), costed("b", 2*s)}, false, []bool{false, false}},
		{"negative slack is zero", "a", -s, []picker.Candidate{costed("a", 2*s+1), costed("b", 2*s)}, true, []bool{true, false}},
		{"a flag stays", "b", 0, []picker.Candidate{over("a"), costed("b", 1)}, false, []bool{true, false}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			cs := append([]picker.Candidate(nil), tc.cands...)
			assert.Equal(t, tc.marked, picker.MarkCostly(cs, affinity.WorkerOnly(tc.t), tc.slack))
			got := make([]bool, len(cs))
			for i, c := range cs {
				got[i] = c.Overloaded
			}
			assert.Equal(t, tc.want, got)
		})
	}
}

// TestPropCostWithin: CostWithin keeps, in order, exactly the candidates
// whose cost is unknown or at most the least known cost + slack, and
// never leaves none from some.
func TestPropCostWithin(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		cs := genCands(t)
		for i := range cs {
			cs[i].Cost = time.Duration(rapid.Int64Range(-2, 50).Draw(t, "cost"))
		}
		slack := time.Duration(rapid.Int64Range(-5, 60).Draw(t, "slack"))
		got := picker.CostWithin{Slack: slack}.Filter(nil, append([]picker.Candidate(nil), cs...))
		lo := time.Duration(math.MaxInt64)
		for _, c := range cs {
			if c.Cost > 0 {
				lo = min(lo, c.Cost)
			}
		}
		var want []picker.Candidate
		for _, c := range cs {
			if c.Cost <= 0 || c.Cost <= lo+max(slack, 0) {
				want = append(want, c)
			}
		}
		if len(got) == 0 || !assert.ObjectsAreEqual(want, got) {
			t.Fatalf("slack %v over %v: got %v, want %v", slack, cs, got, want)
		}
		for _, c := range cs {
			if c.Cost > 0 && picker.MarkCostly(append([]picker.Candidate(nil), cs...), c.Target, slack) == containsTarget(got, c.Target) {
				t.Fatalf("MarkCostly(%v) disagrees with CostWithin", c.Target)
			}
		}
	})
}

// containsTarget reports whether t is among cs.
func containsTarget(cs []picker.Candidate, t affinity.Target) bool {
	for _, c := range cs {
		if c.Target == t {
			return true
		}
	}
	return false
}
