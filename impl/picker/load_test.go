package picker_test

import (
	"fmt"
	"math"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/placementlab/placement/impl/affinity"
	"github.com/placementlab/placement/impl/picker"
)

// TestLeastLoadedScorers: min-max normalised inverse loads; all 1 when equal.
func TestLeastLoadedScorers(t *testing.T) {
	tests := []struct {
		name   string
		scorer picker.Scorer
		cands  []picker.Candidate
		want   []float64
	}{
		{"in flight", picker.LeastInFlight{}, []picker.Candidate{cand("a", 0, 9), cand("b", 4, 0), cand("c", 2, 0)}, []float64{1, 0, 0.5}},
		{"in flight equal", picker.LeastInFlight{}, []picker.Candidate{cand("a", 3, 0), cand("b", 3, 1)}, []float64{1, 1}},
		{"one candidate", picker.LeastInFlight{}, []picker.Candidate{cand("a", 30, 0)}, []float64{1}},
		{"bound", picker.LeastBound{}, []picker.Candidate{cand("a", 9, 10), cand("b", 0, 20), cand("c", 0, 15)}, []float64{1, 0, 0.5}},
		{"bound equal", picker.LeastBound{}, []picker.Candidate{cand("a", 0, 2), cand("b", 7, 2)}, []float64{1, 1}},
		{"no candidates", picker.LeastBound{}, nil, []float64{}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got := make([]float64, len(tc.cands))
			tc.scorer.Score(&picker.Request{}, tc.cands, got)
			assert.InDeltaSlice(t, tc.want, got, 1e-12)
		})
	}
}

// TestHighestScore: the highest score wins; NaN counts lowest; no scores
// or candidates give -1.
func TestHighestScore(t *testing.T) {
	h := picker.NewHighestScore(1)
	cs := []picker.Candidate{cand("a", 0, 0), cand("b", 0, 0), cand("c", 0, 0)}
	r := &picker.Request{Key: key(t, "s")}
	tests := []struct {
		name   string
		scores []float64
		want   int
	}{
		{"highest", []float64{0.2, 1.5, 0.3}, 1},
		{"NaN lowest", []float64{math.NaN(), 0.1, 0}, 1},
		{"within 1e-9 ties with best", []float64{0.1, 0.7, 0.7 + 1e-12}, -2},
		{"infinite", []float64{math.Inf(1), 5, math.NaN()}, 0},
		{"nothing", nil, -1},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got := h.Pick(r, cs, tc.scores)
			if tc.want == -2 { // a tie between 1 and 2
				assert.Contains(t, []int{1, 2}, got)
				return
			}
			assert.Equal(t, tc.want, got)
		})
	}
	assert.Equal(t, -1, h.Pick(r, nil, []float64{1}))
	assert.Contains(t, []int{0, 1, 2}, h.Pick(r, cs, []float64{math.NaN(), math.NaN(), math.NaN()}))
}

// TestTieBreakKeyed: with a key, a tie goes to the same target every time,
// whatever the candidates' order, and many keys spread over all the tied
// targets (not all to the first).
func TestTieBreakKeyed(t *testing.T) {
	cs := []picker.Candidate{cand("a", 0, 0), cand("b", 0, 0), cand("c", 0, 0), cand("d", 0, 0)}
	rev := []picker.Candidate{cs[3], cs[2], cs[1], cs[0]}
	count := map[string]int{}
	for i := range 400 {
		r := &picker.Request{Key: key(t, fmt.Sprint("session-", i))}
		got, err := picker.Default().Pick(r, cs)
		require.NoError(t, err)
		again, err := picker.Default().Pick(r, rev)
		require.NoError(t, err)
		require.Equal(t, got.Target, again.Target, "the same key and candidates, in another order")
		count[got.Target.Worker]++
	}
	for _, w := range []string{"a", "b", "c", "d"} {
		assert.Greater(t, count[w], 60, "target %s got %d of 400", w, count[w])
	}
}

// TestTieBreakKeyless: keyless ties draw from the seeded generator: the
// same seed gives the same sequence, every tied target is drawn, and the
// ranked targets of one worker are distinct targets.
func TestTieBreakKeyless(t *testing.T) {
	cs := []picker.Candidate{
		{Target: affinity.Ranked("w", 0)}, {Target: affinity.Ranked("w", 1)},
		{Target: affinity.WorkerOnly("w")}, {Target: affinity.WorkerOnly("v")},
	}
	run := func(seed uint64) []affinity.Target {
		p := picker.Default()
		p.Seed = seed
		var out []affinity.Target
		for range 200 {
			c, err := p.Pick(&picker.Request{}, cs)
			require.NoError(t, err)
			out = append(out, c.Target)
		}
		return out
	}
	a, b, c := run(7), run(7), run(8)
	assert.Equal(t, a, b)
	assert.NotEqual(t, a, c)
	seen := map[affinity.Target]int{}
	for _, x := range a {
		seen[x]++
	}
	assert.Len(t, seen, 4)
}

// TestLoadString: the loads' names.
func TestLoadString(t *testing.T) {
	assert.Equal(t, "in-flight", picker.LoadInFlight.String())
	assert.Equal(t, "bound", picker.LoadBound.String())
	assert.Equal(t, "Load(invalid)", picker.Load(9).String())
}
