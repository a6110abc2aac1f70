package picker_test

import (
	"errors"
	"math"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"pgregory.net/rapid"

	"github.com/placementlab/placement/impl/affinity"
	"github.com/placementlab/placement/impl/picker"
	"github.com/placementlab/placement/impl/placement"
)

// seq returns the block hashes 1..n (a chained prompt of n blocks).
func seq(n int) []uint64 {
	out := make([]uint64, n)
	for i := range out {
		out[i] = uint64(i + 1)
	}
	return out
}

// TestPrefixMatch: Match counts the leading blocks each target holds, up
// to the first it does not, for as many candidates as n has room.
func TestPrefixMatch(t *testing.T) {
	p := newPrefix(t, picker.PrefixConfig{})
	accept(p, "a", 1, 2, 3, 4)
	accept(p, "b", 1, 2, 9)
	cs := []picker.Candidate{cand("a", 0, 0), cand("b", 0, 0), cand("c", 0, 0)}
	tests := []struct {
		name string
		r    *picker.Request
		n    int
		want []int
	}{
		{"counts", &picker.Request{Blocks: []uint64{1, 2, 3, 4, 5}}, 3, []int{4, 2, 0}},
		{"stops at the first miss", &picker.Request{Blocks: []uint64{1, 2, 7, 4}}, 3, []int{2, 2, 0}},
		{"no blocks", &picker.Request{}, 3, []int{0, 0, 0}},
		{"nil request", nil, 3, []int{0, 0, 0}},
		{"short n", &picker.Request{Blocks: []uint64{1, 2}}, 1, []int{2}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			n := make([]int, tc.n)
			for i := range n {
				n[i] = -1
			}
			p.Match(tc.r, cs, n)
			assert.Equal(t, tc.want, n)
		})
	}
}

// TestFollowConfig: defaults fill zero fields; a nil index or values out
// of range are *ConfigErrors naming the field.
func TestFollowConfig(t *testing.T) {
	idx := newPrefix(t, picker.PrefixConfig{})
	f, err := picker.NewFollowPrefix(idx, picker.FollowConfig{})
	require.NoError(t, err)
	assert.Equal(t, picker.FollowConfig{MinBlocks: picker.DefaultFollowBlocks, LoadFactor: picker.DefaultFollowLoadFactor,
		LoadSlack: picker.DefaultFollowLoadSlack}, f.Config())
	for _, tc := range []struct {
		field string
		idx   *picker.PrefixOverlap
		cfg   picker.FollowConfig
	}{
		{"FollowPrefix index", nil, picker.FollowConfig{}},
		{"FollowConfig.MinBlocks", idx, picker.FollowConfig{MinBlocks: -1}},
		{"FollowConfig.LoadFactor", idx, picker.FollowConfig{LoadFactor: -1}},
		{"FollowConfig.LoadFactor", idx, picker.FollowConfig{LoadFactor: math.Inf(1)}},
		{"FollowConfig.LoadFactor", idx, picker.FollowConfig{LoadFactor: math.NaN()}},
		{"FollowConfig.LoadSlack", idx, picker.FollowConfig{LoadSlack: -0.5}},
		{"FollowConfig.LoadSlack", idx, picker.FollowConfig{LoadSlack: math.NaN()}},
		{"FollowConfig.Load", idx, picker.FollowConfig{Load: picker.Load(9)}},
	} {
		f, err := picker.NewFollowPrefix(tc.idx, tc.cfg)
		assert.Nil(t, f)
		var ce *picker.ConfigError
		require.True(t, errors.As(err, &ce), "%s: %v", tc.field, err)
		assert.Equal(t, tc.field, ce.Field)
		assert.ErrorIs(t, err, picker.ErrInvalidConfig)
	}
}

// TestFollowPrefix: the holders of the longest match, when it leads the
// shortest by MinBlocks or more, stay unless busy (load above LoadFactor x
// mean + LoadSlack); otherwise every candidate stays, in order.
func TestFollowPrefix(t *testing.T) {
	idx := newPrefix(t, picker.PrefixConfig{})
	accept(idx, "b", seq(10)...)
	accept(idx, "c", seq(10)...)
	accept(idx, "d", seq(4)...)
	f, err := picker.NewFollowPrefix(idx, picker.FollowConfig{MinBlocks: 8, LoadFactor: 1.25, LoadSlack: 2})
	require.NoError(t, err)
	bound, err := picker.NewFollowPrefix(idx, picker.FollowConfig{MinBlocks: 8, Load: picker.LoadBound})
	require.NoError(t, err)
	loads := func(f ...int) []picker.Candidate {
		ws := []string{"a", "b", "c", "d"}
		cs := make([]picker.Candidate, len(f))
		for i, x := range f {
			cs[i] = cand(ws[i], x, 0)
		}
		return cs
	}
	tests := []struct {
		name   string
		f      *picker.FollowPrefix
		blocks []uint64
		cands  []picker.Candidate
		want   []string
	}{
		{"the holders of the longest", f, seq(12), loads(0, 0, 0, 0), []string{"b", "c"}},
		{"a busy holder goes", f, seq(12), loads(0, 10, 0, 0), []string{"c"}},    // 1.25 x 10/4 + 2 = 5.1
		{"the limit is inclusive", f, seq(12), loads(0, 7, 9, 0), []string{"b"}}, // 1.25 x 16/4 + 2 = 7
		{"all holders busy: all", f, seq(12), loads(0, 20, 20, 0), []string{"a", "b", "c", "d"}},
		{"a lead short of MinBlocks: all", f, seq(12), loads(0, 0, 0, 0)[1:], []string{"b", "c", "d"}}, // 10 - 4 = 6 < 8
		{"a lead of exactly MinBlocks", f, seq(8), loads(0, 0, 0), []string{"b", "c"}},
		{"one candidate", f, seq(12), loads(0, 30)[1:], []string{"b"}},
		{"no blocks: all", f, nil, loads(0, 0, 0, 0), []string{"a", "b", "c", "d"}},
		{"another load", bound, seq(12), []picker.Candidate{cand("a", 0, 0), cand("b", 0, 9), cand("c", 50, 0)}, []string{"c"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			in := append([]picker.Candidate(nil), tc.cands...)
			got := workers(tc.f.Filter(&picker.Request{Blocks: tc.blocks}, in))
			assert.Equal(t, tc.want, got)
			assert.Equal(t, tc.cands, in, "the input is not modified")
		})
	}
}

// TestFollowPrefixObserve: Pipeline.Observe teaches a FollowPrefix's
// index, whether or not the index is also in the pipeline, and the filter
// then follows what it learned. (Telling it twice would not show in its
// LRU; that each pointer is told once is TestObserveOncePerPointer's.)
func TestFollowPrefixObserve(t *testing.T) {
	for _, alsoScorer := range []bool{false, true} {
		idx := newPrefix(t, picker.PrefixConfig{Capacity: 2})
		f, err := picker.NewFollowPrefix(idx, picker.FollowConfig{MinBlocks: 1})
		require.NoError(t, err)
		p := &picker.Pipeline{Filters: []picker.Filter{f, f}}
		if alsoScorer {
			p.Scorers = []picker.Weighted{{Scorer: idx, Weight: 1}}
			p.Picker = idx
		}
		r := &picker.Request{Blocks: []uint64{1, 2}}
		p.Observe(r, affinity.WorkerOnly("b"), placement.Accepted)
		assert.Equal(t, 2, idx.Held(affinity.WorkerOnly("b")))
		c, err := p.Pick(r, []picker.Candidate{cand("a", 0, 0), cand("b", 0, 0)})
		require.NoError(t, err)
		assert.Equal(t, "b", c.Target.String())
	}
}

// TestPropFollowPrefix: FollowPrefix keeps a non-empty, order-preserving
// subset; when it narrows, every kept candidate holds the longest match.
func TestPropFollowPrefix(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		cs := genCands(t)
		idx := trainedPrefix(t, cs)
		f, err := picker.NewFollowPrefix(idx, picker.FollowConfig{MinBlocks: rapid.IntRange(1, 4).Draw(t, "min")})
		if err != nil {
			t.Fatal(err)
		}
		r := &picker.Request{Blocks: genBlocks(t, "blocks")}
		got := f.Filter(r, append([]picker.Candidate(nil), cs...))
		if len(got) == 0 {
			t.Fatalf("left none of %v", cs)
		}
		j := 0
		for _, c := range got { // a subsequence of cs
			for j < len(cs) && cs[j] != c {
				j++
			}
			if j == len(cs) {
				t.Fatalf("%v is not an ordered subset of %v", got, cs)
			}
			j++
		}
		if len(got) < len(cs) {
			all, kept := make([]int, len(cs)), make([]int, len(got))
			idx.Match(r, cs, all)
			idx.Match(r, got, kept)
			for _, m := range kept {
				if m != slicesMax(all) {
					t.Fatalf("kept a match of %d, the longest is %d", m, slicesMax(all))
				}
			}
		}
	})
}

// slicesMax returns the largest of xs (non-empty).
func slicesMax(xs []int) int {
	m := xs[0]
	for _, x := range xs[1:] {
		m = max(m, x)
	}
	return m
}
