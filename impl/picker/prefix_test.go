package picker_test

import (
	"math"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/placementlab/placement/impl/affinity"
	"github.com/placementlab/placement/impl/picker"
	"github.com/placementlab/placement/impl/placement"
)

// newPrefix returns a PrefixOverlap for cfg or fails t.
func newPrefix(t testing.TB, cfg picker.PrefixConfig) *picker.PrefixOverlap {
	t.Helper()
	p, err := picker.NewPrefixOverlap(cfg)
	require.NoError(t, err)
	return p
}

// accept tells p that blocks were accepted by worker w.
func accept(p *picker.PrefixOverlap, w string, blocks ...uint64) {
	p.Observe(&picker.Request{Blocks: blocks}, affinity.WorkerOnly(w), placement.Accepted)
}

// ratios returns p's scores for blocks over cands.
func ratios(p *picker.PrefixOverlap, cands []picker.Candidate, blocks ...uint64) []float64 {
	s := make([]float64, len(cands))
	p.Score(&picker.Request{Blocks: blocks}, cands, s)
	return s
}

// TestPrefixConfig: defaults fill zero fields; out-of-range values are
// *ConfigErrors naming the field.
func TestPrefixConfig(t *testing.T) {
	p := newPrefix(t, picker.PrefixConfig{})
	assert.Equal(t, picker.PrefixConfig{Capacity: picker.DefaultPrefixCapacity, Threshold: picker.DefaultPrefixThreshold,
		BalanceAbs: picker.DefaultBalanceAbs, BalanceRel: picker.DefaultBalanceRel}, p.Config())
	tests := []struct {
		name  string
		cfg   picker.PrefixConfig
		field string
	}{
		{"negative capacity", picker.PrefixConfig{Capacity: -1}, "PrefixConfig.Capacity"},
		{"huge capacity", picker.PrefixConfig{Capacity: picker.MaxPrefixCapacity + 1}, "PrefixConfig.Capacity"},
		{"threshold 1", picker.PrefixConfig{Threshold: 1}, "PrefixConfig.Threshold"},
		{"negative threshold", picker.PrefixConfig{Threshold: -0.1}, "PrefixConfig.Threshold"},
		{"NaN threshold", picker.PrefixConfig{Threshold: math.NaN()}, "PrefixConfig.Threshold"},
		{"negative abs", picker.PrefixConfig{BalanceAbs: -1}, "PrefixConfig.BalanceAbs"},
		{"rel below 1", picker.PrefixConfig{BalanceRel: 0.5}, "PrefixConfig.BalanceRel"},
		{"NaN rel", picker.PrefixConfig{BalanceRel: math.NaN()}, "PrefixConfig.BalanceRel"},
		{"Inf rel", picker.PrefixConfig{BalanceRel: math.Inf(1)}, "PrefixConfig.BalanceRel"},
		{"bad load", picker.PrefixConfig{Load: 7}, "PrefixConfig.Load"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			p, err := picker.NewPrefixOverlap(tc.cfg)
			assert.Nil(t, p)
			var ce *picker.ConfigError
			require.ErrorAs(t, err, &ce)
			assert.Equal(t, tc.field, ce.Field)
			assert.ErrorIs(t, err, picker.ErrInvalidConfig)
		})
	}
}

// TestPrefixRatio: the match ratio is the leading blocks held over the
// request's blocks.
func TestPrefixRatio(t *testing.T) {
	p := newPrefix(t, picker.PrefixConfig{})
	accept(p, "a", 1, 2, 3, 4)
	accept(p, "b", 1, 2)
	cs := []picker.Candidate{cand("a", 0, 0), cand("b", 0, 0), cand("c", 0, 0)}
	tests := []struct {
		name   string
		blocks []uint64
		want   []float64
	}{
		{"whole prompt", []uint64{1, 2, 3, 4}, []float64{1, 0.5, 0}},
		{"longer prompt", []uint64{1, 2, 3, 4, 5, 6, 7, 8}, []float64{0.5, 0.25, 0}},
		{"stops at the first miss", []uint64{1, 2, 9, 4}, []float64{0.5, 0.5, 0}},
		{"first block missing", []uint64{9, 1, 2}, []float64{0, 0, 0}},
		{"no blocks", nil, []float64{0, 0, 0}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			assert.InDeltaSlice(t, tc.want, ratios(p, cs, tc.blocks...), 1e-12)
		})
	}
}

// TestPrefixLearnsOnlyAccepted: DefinitelyNotAccepted and Ambiguous
// outcomes teach nothing; Accepted does.
func TestPrefixLearnsOnlyAccepted(t *testing.T) {
	p := newPrefix(t, picker.PrefixConfig{})
	r := &picker.Request{Blocks: []uint64{1, 2}}
	a := affinity.WorkerOnly("a")
	p.Observe(r, a, placement.DefinitelyNotAccepted)
	p.Observe(r, a, placement.Ambiguous)
	p.Observe(nil, a, placement.Accepted)
	assert.Equal(t, 0, p.Held(a))
	p.Observe(r, a, placement.Accepted)
	assert.Equal(t, 2, p.Held(a))
}

// TestPrefixLRU: a target holds at most Capacity blocks; an accepted
// prompt's leading blocks are its most recent, so its tail goes first; a
// prompt seen again is refreshed.
func TestPrefixLRU(t *testing.T) {
	cs := []picker.Candidate{cand("a", 0, 0)}
	p := newPrefix(t, picker.PrefixConfig{Capacity: 3})
	accept(p, "a", 1, 2, 3, 4)
	assert.Equal(t, 3, p.Held(affinity.WorkerOnly("a")))
	assert.InDelta(t, 0.75, ratios(p, cs, 1, 2, 3, 4)[0], 1e-12, "the tail block went, not the head")

	p = newPrefix(t, picker.PrefixConfig{Capacity: 4})
	accept(p, "a", 10, 11) // A
	accept(p, "a", 20, 21) // B
	accept(p, "a", 10, 11) // A again: now the most recent
	accept(p, "a", 30, 31) // C evicts B, the least recent
	assert.Equal(t, []float64{1}, ratios(p, cs, 10, 11))
	assert.Equal(t, []float64{0}, ratios(p, cs, 20, 21))
	assert.Equal(t, []float64{1}, ratios(p, cs, 30, 31))
	assert.Equal(t, 4, p.Held(affinity.WorkerOnly("a")))
}

// TestPrefixForget: Forget drops one target, ForgetWorker every target of
// a worker.
func TestPrefixForget(t *testing.T) {
	p := newPrefix(t, picker.PrefixConfig{})
	r := &picker.Request{Blocks: []uint64{1}}
	for _, tg := range []affinity.Target{affinity.Ranked("a", 0), affinity.Ranked("a", 1), affinity.WorkerOnly("a"), affinity.WorkerOnly("b")} {
		p.Observe(r, tg, placement.Accepted)
	}
	p.Forget(affinity.Ranked("a", 0))
	assert.Equal(t, 0, p.Held(affinity.Ranked("a", 0)))
	assert.Equal(t, 1, p.Held(affinity.Ranked("a", 1)))
	p.ForgetWorker("a")
	assert.Equal(t, 0, p.Held(affinity.Ranked("a", 1)))
	assert.Equal(t, 0, p.Held(affinity.WorkerOnly("a")))
	assert.Equal(t, 1, p.Held(affinity.WorkerOnly("b")))
	p.Forget(affinity.WorkerOnly("zz")) // absent: nothing happens
}

// TestPrefixRule: SGLang's rule: imbalanced -> least loaded; else the best
// match above the threshold; else least loaded. Ties among the best go to
// the less loaded, then the higher pipeline score.
func TestPrefixRule(t *testing.T) {
	p := newPrefix(t, picker.PrefixConfig{BalanceAbs: 16, BalanceRel: 1.5, Threshold: 0.3})
	accept(p, "a", 1, 2, 3, 4)
	accept(p, "b", 1, 2)
	accept(p, "c", 1)
	blocks := []uint64{1, 2, 3, 4}
	tests := []struct {
		name   string
		cands  []picker.Candidate
		blocks []uint64
		scores []float64
		want   string
		branch picker.Branch
	}{
		{"best match although busier", []picker.Candidate{cand("a", 10, 0), cand("b", 0, 0), cand("d", 0, 0)}, blocks, nil, "a", picker.Matched},
		{"imbalanced: abs and rel", []picker.Candidate{cand("a", 20, 0), cand("b", 3, 0), cand("d", 2, 0)}, blocks, nil, "d", picker.Imbalanced},
		{"abs without rel is balanced", []picker.Candidate{cand("a", 100, 0), cand("b", 80, 0)}, blocks, nil, "a", picker.Matched},
		{"rel without abs is balanced", []picker.Candidate{cand("a", 16, 0), cand("d", 0, 0)}, blocks, nil, "a", picker.Matched},
		{"best at threshold loses", []picker.Candidate{cand("a", 5, 0), cand("d", 1, 0)}, []uint64{1, 2, 3, 9, 9, 9, 9, 9, 9, 9}, nil, "d", picker.LeastLoaded},
		{"match below threshold", []picker.Candidate{cand("c", 3, 0), cand("d", 1, 0)}, blocks, nil, "d", picker.LeastLoaded},
		{"no blocks", []picker.Candidate{cand("a", 3, 0), cand("d", 1, 0)}, nil, nil, "d", picker.LeastLoaded},
		{"tied best: less loaded", []picker.Candidate{cand("b", 4, 0), cand("a", 9, 0), cand("b2", 2, 0)}, []uint64{1, 2, 7, 7}, nil, "b", picker.Matched},
		{"tied load: higher score", []picker.Candidate{cand("d", 1, 0), cand("e", 1, 0), cand("f", 2, 0)}, nil, []float64{0.1, 0.9, 2}, "e", picker.LeastLoaded},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			r := &picker.Request{Key: key(t, "s"), Blocks: tc.blocks}
			i, br := p.Decide(r, tc.cands, tc.scores)
			require.GreaterOrEqual(t, i, 0)
			assert.Equal(t, tc.want, tc.cands[i].Target.Worker)
			assert.Equal(t, tc.branch, br)
			assert.Equal(t, i, p.Pick(r, tc.cands, tc.scores))
		})
	}
	i, br := p.Decide(&picker.Request{}, nil, nil)
	assert.Equal(t, -1, i)
	assert.Equal(t, "Branch(none)", br.String())
	assert.Equal(t, "imbalanced", picker.Imbalanced.String())
	assert.Equal(t, "matched", picker.Matched.String())
	assert.Equal(t, "least-loaded", picker.LeastLoaded.String())
}

// TestPrefixLoadBound: with Load LoadBound the rule reads bound sessions.
func TestPrefixLoadBound(t *testing.T) {
	p := newPrefix(t, picker.PrefixConfig{Load: picker.LoadBound})
	cs := []picker.Candidate{cand("a", 0, 5), cand("b", 9, 1)}
	i, br := p.Decide(&picker.Request{}, cs, nil)
	assert.Equal(t, 1, i)
	assert.Equal(t, picker.LeastLoaded, br)
}
