package blocklru

import (
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/stretchr/testify/require"
	"pgregory.net/rapid"
)

// TestLRU: insertion order (last to first), eviction, Match, InsertAfter
// behind an anchor, Clear; then against a model, a slice in recency order.
func TestLRU(t *testing.T) {
	c := New(3)
	c.Insert([]uint64{1, 2, 3})
	require.Equal(t, []uint64{1, 2, 3}, c.Order(), "touched last to first: the first block most recent")
	require.Equal(t, 3, c.Match([]uint64{1, 2, 3, 4}))
	require.Equal(t, 0, c.Match([]uint64{9, 1}))
	c.Insert([]uint64{4})
	require.Equal(t, []uint64{4, 1, 2}, c.Order(), "the least recently used (3) goes")
	require.False(t, c.Contains(3))
	require.Equal(t, 2, c.Match([]uint64{1, 2, 3}), "hit = leading blocks present")
	c.Insert([]uint64{2})
	require.Equal(t, []uint64{2, 4, 1}, c.Order())
	c.Insert([]uint64{5, 6, 7, 8})
	require.Equal(t, []uint64{5, 6, 7}, c.Order(), "never above capacity")
	require.Equal(t, 3, c.Len())
	c.InsertAfter(5, []uint64{9, 6})
	require.Equal(t, []uint64{5, 9, 6}, c.Order(), "behind the anchor, in order; 7 evicted")
	c.InsertAfter(42, []uint64{1})
	require.Equal(t, []uint64{5, 9, 6}, c.Order(), "no anchor: nothing")
	c.InsertAfter(6, []uint64{1})
	require.Equal(t, []uint64{5, 9, 6}, c.Order(), "the anchor is the last: no room behind it")
	c.Clear()
	require.Equal(t, 0, c.Len())
	require.Empty(t, c.Order())
	c.Insert([]uint64{1})
	require.Equal(t, []uint64{1}, c.Order())

	// Against a model: a slice in recency order.
	rng := rand.New(rand.NewPCG(1, 2))
	c, model := New(5), []uint64(nil)
	for range 2000 {
		var hs []uint64
		for range rng.IntN(4) + 1 {
			hs = append(hs, uint64(rng.IntN(9)))
		}
		c.Insert(hs)
		for k := len(hs) - 1; k >= 0; k-- {
			model = slices.DeleteFunc(model, func(x uint64) bool { return x == hs[k] })
			model = append([]uint64{hs[k]}, model...)
			if len(model) > 5 {
				model = model[:5]
			}
		}
		require.Equal(t, model, c.Order())
	}
}

// TestModelOneBlockAtATime: the slice-linked LRU agrees with a plain model (a
// list, most recent first, cut at capacity) after any sequence of touches,
// and its links stay consistent.
func TestModelOneBlockAtATime(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		capacity := rapid.IntRange(1, 6).Draw(t, "capacity")
		b := New(capacity)
		var model []uint64
		for _, h := range rapid.SliceOf(rapid.Uint64Range(0, 9)).Draw(t, "touches") {
			b.Insert([]uint64{h})
			if i := slices.Index(model, h); i >= 0 {
				model = slices.Delete(model, i, i+1)
			}
			model = append([]uint64{h}, model...)
			if len(model) > capacity {
				model = model[:capacity]
			}
			var got []uint64
			prev := int32(-1)
			for i := b.head; i >= 0; i = b.nodes[i].next {
				if b.nodes[i].prev != prev {
					t.Fatalf("node %d's prev is %d, not %d", i, b.nodes[i].prev, prev)
				}
				got = append(got, b.nodes[i].hash)
				prev = i
			}
			if b.tail != prev {
				t.Fatalf("tail %d, last %d", b.tail, prev)
			}
			if !slices.Equal(got, model) || len(b.index) != len(model) {
				t.Fatalf("list %v (%d in the map), model %v", got, len(b.index), model)
			}
		}
	})
}
