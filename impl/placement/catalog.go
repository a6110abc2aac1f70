package placement

import (
	"sync"
	"sync/atomic"
)

// targetSlot holds one target's current generation. Bindings keep a pointer
// to their target's slot, so the hot path checks the generation fence with
// one atomic load and no lookup; a lease finds its coordinator through it.
type targetSlot[T comparable] struct {
	gen atomic.Uint64
	c   *Coordinator[T]
	// bound counts the published bindings of the current generation that
	// have not ended. A bump replaces it (the old generation's bindings are
	// all stale), before it moves gen, under mu.
	bound atomic.Pointer[genCount]
	mu    sync.Mutex
}

// genCount counts the bindings of one generation of a target that were
// published and have not ended (see Coordinator.Bindings).
type genCount struct {
	gen uint64
	n   atomic.Int64
}

// catalog maps targets to their generations; unknown targets are at
// generation 1. Lookups are lock-free (sync.Map); only the first sight of a
// target allocates.
type catalog[T comparable] struct {
	owner *Coordinator[T]
	slots sync.Map      // T -> *targetSlot[T]
	epoch atomic.Uint64 // moved after every generation change
	// bumping counts the bumps under way: from before one stores its new
	// generation until it has moved epoch. A capacity check that can see
	// a new generation thus sees either the bump under way or a moved
	// epoch (see Coordinator.sweepMayHelp).
	bumping atomic.Int32
}

func (c *catalog[T]) slot(t T) *targetSlot[T] {
	if v, ok := c.slots.Load(t); ok {
		return v.(*targetSlot[T])
	}
	s := &targetSlot[T]{c: c.owner}
	s.gen.Store(1)
	s.bound.Store(&genCount{gen: 1})
	v, _ := c.slots.LoadOrStore(t, s)
	return v.(*targetSlot[T])
}

// lookup returns t's slot if t was ever seen.
func (c *catalog[T]) lookup(t T) (*targetSlot[T], bool) {
	v, ok := c.slots.Load(t)
	if !ok {
		return nil, false
	}
	return v.(*targetSlot[T]), true
}

func (c *catalog[T]) bump(t T) uint64 {
	s := c.slot(t)
	if !mutant("BumpHiddenFromCapacity") {
		c.bumping.Add(1)
		defer c.bumping.Add(-1) // after the epoch moved
	}
	s.mu.Lock()
	g := s.gen.Load() + 1
	// The new generation's count first: a commit that read the old
	// generation and finds the new count knows its binding is stale.
	s.bound.Store(&genCount{gen: g})
	s.gen.Store(g)
	s.mu.Unlock()
	if h := c.owner.testBumpStored; h != nil {
		h()
	}
	c.epoch.Add(1)
	return g
}

// counted counts b, about to be published, among its target's bindings,
// unless its generation has already moved on (then it is stale, and never
// counted). Generations only grow and only a bump replaces the count, so
// the count b finds at its end has b's generation exactly when no bump
// came since b's dispatch, which is exactly when b was counted: died
// leaves the count then, and only then.
func (s *targetSlot[T]) counted(b *binding[T]) {
	if p := s.bound.Load(); p.gen == b.gen && !mutant("BindingsNotCounted") {
		p.n.Add(1)
	}
}
