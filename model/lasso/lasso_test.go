package lasso

import (
	"slices"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// step is a test edge: to a state, by an action.
type step struct {
	to  int32
	act string
}

// testGraph is 0 -> 1 <-> 2 -> 3, 3 -> 3 (a stutter-free self loop by
// "tick"), 2 -> 4.
func testGraph() Graph[int, step] {
	return Graph[int, step]{
		States: []int{0, 1, 2, 3, 4},
		Edges: [][]step{
			{{1, "go"}},
			{{2, "go"}},
			{{1, "back"}, {3, "go"}, {4, "go"}},
			{{3, "tick"}},
			nil,
		},
		To: func(e step) int32 { return e.to },
	}
}

func sorted(comps [][]int32) [][]int32 {
	for _, c := range comps {
		slices.Sort(c)
	}
	slices.SortFunc(comps, func(a, b []int32) int { return int(a[0] - b[0]) })
	return comps
}

func TestComponents(t *testing.T) {
	g := testGraph()
	all := []bool{true, true, true, true, true}
	assert.Equal(t, [][]int32{{0}, {1, 2}, {3}, {4}}, sorted(g.Components(all)))
	// Only the induced subgraph counts: without state 2, 1 is alone.
	assert.Equal(t, [][]int32{{1}, {3}}, sorted(g.Components([]bool{false, true, false, true, false})))
	assert.Empty(t, g.Components(make([]bool, 5)))
}

func TestFair(t *testing.T) {
	g := testGraph()
	// WF(go): enabled where a "go" step leaves the state.
	wfGo := Fairness[int, step]{
		Enabled: func(s *int) bool { return *s <= 2 },
		Taken:   func(_ *int, e step) bool { return e.act == "go" },
	}
	// {1, 2} takes "go" (1 -> 2) inside it, so it may be stayed in.
	require.True(t, g.Fair([]int32{1, 2}, []Fairness[int, step]{wfGo}))
	// {0} stutters with "go" enabled and never taken inside it.
	require.False(t, g.Fair([]int32{0}, []Fairness[int, step]{wfGo}))
	// {3}: "go" is disabled there.
	require.True(t, g.Fair([]int32{3}, []Fairness[int, step]{wfGo}))
	// A step leaving the component does not count as taken in it.
	wfLeave := Fairness[int, step]{
		Enabled: func(s *int) bool { return *s == 1 || *s == 2 },
		Taken:   func(from *int, e step) bool { return *from == 2 && e.to >= 3 },
	}
	require.False(t, g.Fair([]int32{1, 2}, []Fairness[int, step]{wfGo, wfLeave}))
	// No fairness: every component may be stayed in.
	require.True(t, g.Fair([]int32{0}, nil))
}
