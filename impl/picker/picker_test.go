package picker_test

import (
	"errors"
	"fmt"
	"math"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/placementlab/placement/impl/affinity"
	"github.com/placementlab/placement/impl/picker"
	"github.com/placementlab/placement/impl/placement"
)

// key returns the session key of id in the zero namespace.
func key(t testing.TB, id string) affinity.Key {
	t.Helper()
	k, err := affinity.Namespace{}.Session(id)
	require.NoError(t, err)
	return k
}

// cand is a candidate on worker w with in-flight f and bound b.
func cand(w string, f, b int) picker.Candidate {
	return picker.Candidate{Target: affinity.WorkerOnly(w), InFlight: f, Bound: b}
}

// workers names the targets of cs, in order.
func workers(cs []picker.Candidate) []string {
	out := make([]string, len(cs))
	for i, c := range cs {
		out[i] = c.Target.String()
	}
	return out
}

// fixed is a scorer writing the given scores.
type fixed []float64

func (f fixed) Score(_ *picker.Request, _ []picker.Candidate, s []float64) { copy(s, f) }

// recorder is an Observer (and Scorer) that counts its calls.
type recorder struct{ n int }

func (r *recorder) Observe(*picker.Request, affinity.Target, placement.Outcome) { r.n++ }
func (r *recorder) Score(*picker.Request, []picker.Candidate, []float64)        {}
func (r *recorder) Pick(*picker.Request, []picker.Candidate, []float64) int     { return 0 }

// TestPipelineErrors: no candidates, a filter leaving none, invalid
// configurations and a bad picker index are errors, never panics.
func TestPipelineErrors(t *testing.T) {
	cs := []picker.Candidate{cand("a", 0, 0), cand("b", 0, 0)}
	none := picker.FilterFunc(func(*picker.Request, []picker.Candidate) []picker.Candidate { return nil })
	tests := []struct {
		name  string
		p     *picker.Pipeline
		cands []picker.Candidate
		is    error
		field string
	}{
		{"no candidates", picker.Default(), nil, picker.ErrNoCandidates, ""},
		{"filter leaves none", &picker.Pipeline{Filters: []picker.Filter{picker.DropOverloaded{}, none}}, cs, picker.ErrNoCandidates, ""},
		{"NaN weight", &picker.Pipeline{Scorers: []picker.Weighted{{Scorer: picker.LeastInFlight{}, Weight: math.NaN()}}}, cs, picker.ErrInvalidConfig, "Scorers[0].Weight"},
		{"Inf weight", &picker.Pipeline{Scorers: []picker.Weighted{{Scorer: picker.LeastInFlight{}, Weight: math.Inf(1)}}}, cs, picker.ErrInvalidConfig, "Scorers[0].Weight"},
		{"negative weight", &picker.Pipeline{Scorers: []picker.Weighted{{Scorer: picker.LeastInFlight{}, Weight: 1}, {Scorer: picker.LeastBound{}, Weight: -1}}}, cs, picker.ErrInvalidConfig, "Scorers[1].Weight"},
		{"nil scorer", &picker.Pipeline{Scorers: []picker.Weighted{{Weight: 1}}}, cs, picker.ErrInvalidConfig, "Scorers[0].Scorer"},
		{"nil pointer scorer", &picker.Pipeline{Scorers: []picker.Weighted{{Scorer: (*picker.PrefixOverlap)(nil), Weight: 1}}}, cs, picker.ErrInvalidConfig, "Scorers[0].Scorer"},
		{"nil filter", &picker.Pipeline{Filters: []picker.Filter{nil}}, cs, picker.ErrInvalidConfig, "Filters[0]"},
		{"index past the end", &picker.Pipeline{Picker: picker.PickerFunc(func(*picker.Request, []picker.Candidate, []float64) int { return 2 })}, cs, picker.ErrBadPick, ""},
		{"negative index", &picker.Pipeline{Picker: picker.PickerFunc(func(*picker.Request, []picker.Candidate, []float64) int { return -1 })}, cs, picker.ErrBadPick, ""},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := tc.p.Pick(&picker.Request{}, tc.cands)
			require.ErrorIs(t, err, tc.is)
			if tc.field != "" {
				var ce *picker.ConfigError
				require.ErrorAs(t, err, &ce)
				assert.Equal(t, tc.field, ce.Field)
				assert.ErrorIs(t, tc.p.Validate(), picker.ErrInvalidConfig)
			}
		})
	}
	assert.NoError(t, picker.Default().Validate())
	var nilPipe *picker.Pipeline
	_, err := nilPipe.Pick(nil, cs)
	assert.ErrorIs(t, err, picker.ErrInvalidConfig)
	nilPipe.Observe(nil, affinity.WorkerOnly("a"), placement.Accepted)
	assert.False(t, errors.Is(picker.ErrNoCandidates, picker.ErrInvalidConfig))
}

// TestPipelineScores: the total is the weighted sum of clamped scores (NaN
// and negatives count 0, above 1 counts 1), a weight of 0 skips its scorer,
// and the default picker takes the highest total.
func TestPipelineScores(t *testing.T) {
	cs := []picker.Candidate{cand("a", 0, 0), cand("b", 0, 0), cand("c", 0, 0)}
	tests := []struct {
		name    string
		scorers []picker.Weighted
		want    string
	}{
		{"one scorer", []picker.Weighted{{Scorer: fixed{0.1, 0.9, 0.5}, Weight: 1}}, "b"},
		{"weights decide", []picker.Weighted{{Scorer: fixed{1, 0, 0}, Weight: 3}, {Scorer: fixed{0, 1, 1}, Weight: 2}}, "a"},
		{"NaN counts 0", []picker.Weighted{{Scorer: fixed{math.NaN(), 0.2, 0.1}, Weight: 1}}, "b"},
		{"above 1 counts 1", []picker.Weighted{{Scorer: fixed{7, 0.9, 0}, Weight: 1}, {Scorer: fixed{0, 0.2, 0}, Weight: 1}}, "b"},
		{"negative counts 0", []picker.Weighted{{Scorer: fixed{-5, 0, 0.1}, Weight: 1}}, "c"},
		{"zero weight skipped", []picker.Weighted{{Scorer: fixed{1, 0, 0}, Weight: 0}, {Scorer: fixed{0, 0, 1}, Weight: 1}}, "c"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			p := &picker.Pipeline{Scorers: tc.scorers}
			got, err := p.Pick(&picker.Request{Key: key(t, "s")}, cs)
			require.NoError(t, err)
			assert.Equal(t, tc.want, got.Target.Worker)
		})
	}
}

// TestPipelineLeavesCandidates: filters work on the pipeline's copy; the
// caller's slice is unchanged.
func TestPipelineLeavesCandidates(t *testing.T) {
	cs := []picker.Candidate{cand("a", 0, 0), cand("b", 0, 0), cand("c", 0, 0)}
	cs[0].Overloaded, cs[2].Overloaded = true, true
	before := append([]picker.Candidate(nil), cs...)
	p := &picker.Pipeline{Filters: []picker.Filter{picker.DropOverloaded{}}}
	got, err := p.Pick(nil, cs)
	require.NoError(t, err)
	assert.Equal(t, "b", got.Target.Worker)
	assert.Equal(t, before, cs)
}

// TestDefaultPipeline: Default weighs in-flight and bound sessions equally.
func TestDefaultPipeline(t *testing.T) {
	tests := []struct {
		name  string
		cands []picker.Candidate
		want  string
	}{
		{"least in flight", []picker.Candidate{cand("a", 3, 1), cand("b", 1, 1), cand("c", 2, 1)}, "b"},
		{"least bound", []picker.Candidate{cand("a", 1, 5), cand("b", 1, 9), cand("c", 1, 2)}, "c"},
		{"both", []picker.Candidate{cand("a", 0, 10), cand("b", 10, 0), cand("c", 2, 2)}, "c"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := picker.Default().Pick(&picker.Request{}, tc.cands)
			require.NoError(t, err)
			assert.Equal(t, tc.want, got.Target.Worker)
		})
	}
}

// TestObserveOncePerPointer: Observe reaches every observer among the
// filters, scorers and picker, a pointer in two roles once, non-observers
// not at all.
func TestObserveOncePerPointer(t *testing.T) {
	both, other := &recorder{}, &recorder{}
	p := &picker.Pipeline{
		Filters: []picker.Filter{picker.DropOverloaded{}, picker.FilterFunc(func(_ *picker.Request, c []picker.Candidate) []picker.Candidate {
			return c
		})},
		Scorers: []picker.Weighted{{Scorer: both, Weight: 1}, {Scorer: other, Weight: 1}, {Scorer: both, Weight: 2}, {Scorer: picker.LeastBound{}, Weight: 1}},
		Picker:  both,
	}
	p.Observe(nil, affinity.WorkerOnly("a"), placement.Accepted)
	assert.Equal(t, 1, both.n)
	assert.Equal(t, 1, other.n)
	p.Observe(&picker.Request{}, affinity.WorkerOnly("a"), placement.Ambiguous)
	assert.Equal(t, 2, both.n)
}

// TestFromAffinity: the conversion keeps targets and overload flags; the
// loads come from the given function.
func TestFromAffinity(t *testing.T) {
	in := []affinity.Candidate{{Target: affinity.Ranked("a", 1)}, {Target: affinity.WorkerOnly("b"), Overloaded: true}}
	assert.Equal(t, []picker.Candidate{{Target: affinity.Ranked("a", 1)}, {Target: affinity.WorkerOnly("b"), Overloaded: true}}, picker.FromAffinity(in))
	got := picker.FromAffinityLoads(in, func(t affinity.Target) (int, int) { return len(t.Worker) + t.Rank, 7 })
	assert.Equal(t, []picker.Candidate{{Target: affinity.Ranked("a", 1), InFlight: 2, Bound: 7}, {Target: affinity.WorkerOnly("b"), Overloaded: true, InFlight: 1, Bound: 7}}, got)
	assert.Equal(t, picker.FromAffinity(in), picker.FromAffinityLoads(in, nil))
	assert.Empty(t, picker.FromAffinity(nil))
}

// TestConfigErrorText: the error names the field and the reason.
func TestConfigErrorText(t *testing.T) {
	err := error(&picker.ConfigError{Field: "X", Reason: "bad"})
	assert.Equal(t, "picker: invalid X: bad", err.Error())
	assert.ErrorIs(t, fmt.Errorf("wrapped: %w", err), picker.ErrInvalidConfig)
}
