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
}

// catalog maps targets to their generations; unknown targets are at
// generation 1. Lookups are lock-free (sync.Map); only the first sight of a
// target allocates.
type catalog[T comparable] struct {
	owner *Coordinator[T]
	slots sync.Map      // T -> *targetSlot[T]
	epoch atomic.Uint64 // bumped on every generation change
}

func (c *catalog[T]) slot(t T) *targetSlot[T] {
	if v, ok := c.slots.Load(t); ok {
		return v.(*targetSlot[T])
	}
	s := &targetSlot[T]{c: c.owner}
	s.gen.Store(1)
	v, _ := c.slots.LoadOrStore(t, s)
	return v.(*targetSlot[T])
}

func (c *catalog[T]) bump(t T) uint64 {
	g := c.slot(t).gen.Add(1)
	c.epoch.Add(1)
	return g
}
