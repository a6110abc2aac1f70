package picker

import (
	"slices"
	"testing"

	"pgregory.net/rapid"
)

// TestBlockLRUModel: the slice-linked LRU agrees with a plain model (a
// list, most recent first, cut at capacity) after any sequence of touches,
// and its links stay consistent.
func TestBlockLRUModel(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		capacity := rapid.IntRange(1, 6).Draw(t, "capacity")
		b := newBlockLRU(capacity)
		var model []uint64
		for _, h := range rapid.SliceOf(rapid.Uint64Range(0, 9)).Draw(t, "touches") {
			b.touch(h)
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
				got = append(got, b.nodes[i].h)
				prev = i
			}
			if b.tail != prev {
				t.Fatalf("tail %d, last %d", b.tail, prev)
			}
			if !slices.Equal(got, model) || len(b.pos) != len(model) {
				t.Fatalf("list %v (%d in the map), model %v", got, len(b.pos), model)
			}
		}
	})
}
