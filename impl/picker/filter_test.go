package picker_test

import (
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/placementlab/placement/impl/affinity"
	"github.com/placementlab/placement/impl/picker"
)

// over is a candidate flagged overloaded.
func over(w string) picker.Candidate {
	c := cand(w, 0, 0)
	c.Overloaded = true
	return c
}

// TestDropOverloaded: overloaded candidates go unless all are.
func TestDropOverloaded(t *testing.T) {
	tests := []struct {
		name  string
		cands []picker.Candidate
		want  []string
	}{
		{"none overloaded", []picker.Candidate{cand("a", 0, 0), cand("b", 0, 0)}, []string{"a", "b"}},
		{"some", []picker.Candidate{over("a"), cand("b", 0, 0), over("c"), cand("d", 0, 0)}, []string{"b", "d"}},
		{"all kept when all are", []picker.Candidate{over("a"), over("b")}, []string{"a", "b"}},
		{"empty", nil, []string{}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			assert.Equal(t, tc.want, workers(picker.DropOverloaded{}.Filter(&picker.Request{}, tc.cands)))
		})
	}
}

// TestMaxLoad: candidates at or above the limit go unless all are; a limit
// <= 0 drops nothing.
func TestMaxLoad(t *testing.T) {
	cs := []picker.Candidate{cand("a", 5, 0), cand("b", 1, 9), cand("c", 4, 3)}
	tests := []struct {
		name string
		f    picker.MaxLoad
		want []string
	}{
		{"in flight", picker.MaxLoad{Limit: 5}, []string{"b", "c"}},
		{"bound", picker.MaxLoad{Load: picker.LoadBound, Limit: 4}, []string{"a", "c"}},
		{"all kept when all are", picker.MaxLoad{Limit: 1}, []string{"a", "b", "c"}},
		{"no limit", picker.MaxLoad{}, []string{"a", "b", "c"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			in := append([]picker.Candidate(nil), cs...)
			assert.Equal(t, tc.want, workers(tc.f.Filter(nil, in)))
		})
	}
}

// TestExclude: tried targets go by affinity.Target.Accepts: a worker-only
// tried target takes every rank of its worker, a ranked one its rank only.
func TestExclude(t *testing.T) {
	cs := []picker.Candidate{
		{Target: affinity.Ranked("a", 0)}, {Target: affinity.Ranked("a", 1)},
		{Target: affinity.WorkerOnly("b")}, {Target: affinity.Ranked("c", 0)},
	}
	tests := []struct {
		name  string
		tried []affinity.Target
		want  []string
	}{
		{"nothing tried", nil, []string{"a/0", "a/1", "b", "c/0"}},
		{"one rank", []affinity.Target{affinity.Ranked("a", 1)}, []string{"a/0", "b", "c/0"}},
		{"a worker", []affinity.Target{affinity.WorkerOnly("a")}, []string{"b", "c/0"}},
		{"a rank of a worker-only candidate", []affinity.Target{affinity.Ranked("b", 0)}, []string{"a/0", "a/1", "b", "c/0"}},
		{"everything", []affinity.Target{affinity.WorkerOnly("a"), affinity.WorkerOnly("b"), affinity.WorkerOnly("c")}, []string{}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			before := append([]picker.Candidate(nil), cs...)
			assert.Equal(t, tc.want, workers(picker.Exclude(cs, tc.tried...)))
			assert.Equal(t, before, cs)
		})
	}
}

// TestFuncAdapters: the adapters call their functions.
func TestFuncAdapters(t *testing.T) {
	cs := []picker.Candidate{cand("a", 0, 0), cand("b", 0, 0)}
	s := make([]float64, 2)
	picker.ScorerFunc(func(_ *picker.Request, _ []picker.Candidate, s []float64) { s[1] = 0.5 }).Score(nil, cs, s)
	assert.Equal(t, []float64{0, 0.5}, s)
	assert.Equal(t, 1, picker.PickerFunc(func(*picker.Request, []picker.Candidate, []float64) int { return 1 }).Pick(nil, cs, s))
	assert.Equal(t, []string{"b"}, workers(picker.FilterFunc(func(_ *picker.Request, c []picker.Candidate) []picker.Candidate { return c[1:] }).Filter(nil, cs)))
}
