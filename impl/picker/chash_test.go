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

// newHash returns a ConsistentHash for cfg or fails t.
func newHash(t testing.TB, cfg picker.HashConfig) *picker.ConsistentHash {
	t.Helper()
	c, err := picker.NewConsistentHash(cfg)
	require.NoError(t, err)
	return c
}

// TestHashConfig: defaults fill zero fields; out-of-range values are
// *ConfigErrors naming the field.
func TestHashConfig(t *testing.T) {
	assert.Equal(t, picker.HashConfig{Factor: picker.DefaultHashFactor, VirtualNodes: picker.DefaultVirtualNodes},
		newHash(t, picker.HashConfig{}).Config())
	tests := []struct {
		name  string
		cfg   picker.HashConfig
		field string
	}{
		{"factor below 1", picker.HashConfig{Factor: 0.9}, "HashConfig.Factor"},
		{"NaN factor", picker.HashConfig{Factor: math.NaN()}, "HashConfig.Factor"},
		{"Inf factor", picker.HashConfig{Factor: math.Inf(1)}, "HashConfig.Factor"},
		{"negative nodes", picker.HashConfig{VirtualNodes: -1}, "HashConfig.VirtualNodes"},
		{"too many nodes", picker.HashConfig{VirtualNodes: picker.MaxVirtualNodes + 1}, "HashConfig.VirtualNodes"},
		{"bad load", picker.HashConfig{Load: 3}, "HashConfig.Load"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			c, err := picker.NewConsistentHash(tc.cfg)
			assert.Nil(t, c)
			var ce *picker.ConfigError
			require.ErrorAs(t, err, &ce)
			assert.Equal(t, tc.field, ce.Field)
		})
	}
}

// TestHashBound: the bound is ceil(Factor x (total + 1) / n) over Load.
func TestHashBound(t *testing.T) {
	tests := []struct {
		name  string
		cfg   picker.HashConfig
		cands []picker.Candidate
		want  int
	}{
		{"idle", picker.HashConfig{}, []picker.Candidate{cand("a", 0, 0), cand("b", 0, 0)}, 1},
		{"in flight", picker.HashConfig{}, []picker.Candidate{cand("a", 6, 0), cand("b", 1, 0), cand("c", 0, 50)}, 4}, // 1.25 x 8 / 3 = 3.33
		{"bound", picker.HashConfig{Load: picker.LoadBound}, []picker.Candidate{cand("a", 6, 0), cand("b", 1, 0), cand("c", 0, 50)}, 22},
		{"factor 2", picker.HashConfig{Factor: 2}, []picker.Candidate{cand("a", 3, 0), cand("b", 0, 0)}, 4},
		{"negative loads count 0", picker.HashConfig{}, []picker.Candidate{cand("a", -9, 0), cand("b", 3, 0)}, 3},
		{"none", picker.HashConfig{}, nil, 0},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			assert.Equal(t, tc.want, newHash(t, tc.cfg).Bound(tc.cands))
		})
	}
}

// TestHashSticky: a key goes to the same target on every pick, on any
// ConsistentHash with the same configuration, and whatever the order of
// the candidates; removing another candidate does not move it; keys spread
// over all targets.
func TestHashSticky(t *testing.T) {
	cs := []picker.Candidate{cand("a", 0, 0), cand("b", 0, 0), cand("c", 0, 0), cand("d", 0, 0)}
	h1, h2 := newHash(t, picker.HashConfig{}), newHash(t, picker.HashConfig{})
	count := map[string]int{}
	moved := 0
	for i := range 400 {
		r := &picker.Request{Key: key(t, fmt.Sprint("k", i))}
		w := cs[h1.Pick(r, cs, nil)].Target.Worker
		rev := []picker.Candidate{cs[3], cs[2], cs[1], cs[0]}
		require.Equal(t, w, rev[h2.Pick(r, rev, nil)].Target.Worker)
		require.Equal(t, w, cs[h1.Pick(r, cs, nil)].Target.Worker)
		count[w]++
		// Without "d": keys on a, b or c stay; keys on d move.
		three := cs[:3]
		w3 := three[h1.Pick(r, three, nil)].Target.Worker
		if w != "d" {
			require.Equal(t, w, w3)
		} else {
			moved++
		}
	}
	assert.Equal(t, count["d"], moved)
	for _, w := range []string{"a", "b", "c", "d"} {
		assert.Greater(t, count[w], 50, "target %s got %d of 400", w, count[w])
	}
}

// TestHashWalksPastFull: a key whose target is at the bound goes to the
// next target clockwise under it; once loads even out it returns.
func TestHashWalksPastFull(t *testing.T) {
	h := newHash(t, picker.HashConfig{})
	r := &picker.Request{Key: key(t, "walk")}
	cs := []picker.Candidate{cand("a", 0, 0), cand("b", 0, 0), cand("c", 0, 0)}
	home := h.Pick(r, cs, nil)
	cs[home].InFlight = 2 // bound ceil(1.25 x 3 / 3) = 2: full
	next := h.Pick(r, cs, nil)
	assert.NotEqual(t, home, next)
	cs[next].InFlight = 2 // bound ceil(1.25 x 5 / 3) = 3: both fine now
	assert.Equal(t, home, h.Pick(r, cs, nil))
}

// TestHashKeyless: keyless requests hash their first block (the same first
// block, the same target); with no blocks they draw from the seeded
// generator (the same seed, the same sequence).
func TestHashKeyless(t *testing.T) {
	cs := []picker.Candidate{cand("a", 0, 0), cand("b", 0, 0), cand("c", 0, 0), cand("d", 0, 0)}
	h := newHash(t, picker.HashConfig{})
	for b := range uint64(50) {
		x := h.Pick(&picker.Request{Blocks: []uint64{b, 1}}, cs, nil)
		y := h.Pick(&picker.Request{Blocks: []uint64{b, 2, 3}}, cs, nil)
		require.Equal(t, x, y)
	}
	seq := func(seed uint64) []int {
		h := newHash(t, picker.HashConfig{Seed: seed})
		var out []int
		for range 100 {
			out = append(out, h.Pick(&picker.Request{}, cs, nil))
		}
		return out
	}
	assert.Equal(t, seq(3), seq(3))
	assert.NotEqual(t, seq(3), seq(4))
}

// TestHashForget: Forget takes a target's points off the ring; a target
// that is a candidate again comes back where it was.
func TestHashForget(t *testing.T) {
	h := newHash(t, picker.HashConfig{VirtualNodes: 16})
	cs := []picker.Candidate{cand("a", 0, 0), cand("b", 0, 0), {Target: affinity.Ranked("a", 1)}}
	r := &picker.Request{Key: key(t, "f")}
	before := h.Pick(r, cs, nil)
	assert.Equal(t, 3, h.Targets())
	h.Forget(affinity.WorkerOnly("b"))
	h.Forget(affinity.WorkerOnly("zz"))
	assert.Equal(t, 2, h.Targets())
	assert.Equal(t, before, h.Pick(r, cs, nil))
	assert.Equal(t, 3, h.Targets())
	assert.Equal(t, -1, h.Pick(r, nil, nil))
}

// TestHashDuplicates: duplicate targets among the candidates never panic
// and the pick is one of them.
func TestHashDuplicates(t *testing.T) {
	h := newHash(t, picker.HashConfig{})
	cs := []picker.Candidate{cand("a", 5, 0), cand("a", 0, 0)}
	i := h.Pick(&picker.Request{Key: key(t, "d")}, cs, nil)
	assert.Equal(t, 1, i, "the first a is over the bound; the least loaded stands in")
}
