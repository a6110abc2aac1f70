package placement

import (
	"sync"
	"sync/atomic"
)

// targetSlot holds one target's current generation. A binding reaches its
// target's slot (through its generation object), so the hot path checks
// the generation fence with no lookup; a lease finds its coordinator
// through it.
type targetSlot[T comparable] struct {
	gen atomic.Uint64
	c   *Coordinator[T]
	// bound is the current generation's object, whose count holds the
	// published bindings of that generation that have not ended. A bump
	// replaces it (the old generation's bindings are all stale), before it
	// moves gen, under mu.
	bound  atomic.Pointer[generation[T]]
	mu     sync.Mutex
	target T
}

// generation is one generation of a target: what a binding to it would
// otherwise carry (its target, generation and slot), shared by every
// binding and dispatch to that target at that generation (a binding keeps
// one pointer, not 32 bytes for a 16-byte target: see entry), and the count
// of the bindings of that generation that were published and have not
// ended (see Coordinator.Bindings).
type generation[T comparable] struct {
	slot   *targetSlot[T]
	c      *Coordinator[T] // the slot's, one load nearer a lease
	gen    uint64
	target T
	// n is written by every commit and every end of a binding: on a cache
	// line of its own, apart from the fields every hit reads.
	_ [64]byte
	n atomic.Int64
}

// stale reports whether the target's generation moved on.
func (g *generation[T]) stale() bool { return g.slot.gen.Load() != g.gen }

// at returns the generation object of s's generation gen (the one a
// dispatch was fenced on): the current one, or, if a bump has already
// replaced it, a fresh one (never counted: its bindings are stale at
// birth or soon after).
func (s *targetSlot[T]) at(gen uint64) *generation[T] {
	if p := s.bound.Load(); p.gen == gen {
		return p
	}
	return &generation[T]{slot: s, c: s.c, gen: gen, target: s.target}
}

// catalog maps targets to their generations; unknown targets are at
// generation 1. Lookups are lock-free: a Go map that is never written once
// published (read), replaced by a copy with the targets seen since
// (dirty, under mu) once these are more than a sixteenth of it, so a new
// target costs amortized O(1) copies, and only the first sight of a target
// allocates. A router reads a target's generation and then dispatches to
// it: two lookups of one target per new session, each a plain map lookup
// (it was a sync.Map's, with its key boxed; issue 28).
type catalog[T comparable] struct {
	owner *Coordinator[T]
	read  atomic.Pointer[map[T]*targetSlot[T]]
	mu    sync.Mutex
	dirty map[T]*targetSlot[T] // targets not yet in read (guarded by mu)
	epoch atomic.Uint64        // moved after every generation change
	// bumping counts the bumps under way: from before one stores its new
	// generation until it has moved epoch. A capacity check that can see
	// a new generation thus sees either the bump under way or a moved
	// epoch (see Coordinator.sweepMayHelp).
	bumping atomic.Int32
}

// lookup returns t's slot if t was ever seen.
func (c *catalog[T]) lookup(t T) (*targetSlot[T], bool) {
	if m := c.read.Load(); m != nil {
		if s, ok := (*m)[t]; ok {
			return s, true
		}
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.lookupLocked(t)
}

func (c *catalog[T]) lookupLocked(t T) (*targetSlot[T], bool) {
	if m := c.read.Load(); m != nil {
		if s, ok := (*m)[t]; ok {
			return s, true
		}
	}
	s, ok := c.dirty[t]
	return s, ok
}

// slot returns t's slot, making it on t's first sight.
func (c *catalog[T]) slot(t T) *targetSlot[T] {
	if m := c.read.Load(); m != nil {
		if s, ok := (*m)[t]; ok {
			return s
		}
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if s, ok := c.lookupLocked(t); ok {
		return s
	}
	s := &targetSlot[T]{c: c.owner, target: t}
	s.gen.Store(1)
	s.bound.Store(&generation[T]{slot: s, c: s.c, gen: 1, target: t})
	if c.dirty == nil {
		c.dirty = make(map[T]*targetSlot[T])
	}
	c.dirty[t] = s
	var old map[T]*targetSlot[T]
	if m := c.read.Load(); m != nil {
		old = *m
	}
	if len(c.dirty) > len(old)/16 {
		m := make(map[T]*targetSlot[T], len(old)+len(c.dirty))
		for k, v := range old {
			m[k] = v
		}
		for k, v := range c.dirty {
			m[k] = v
		}
		c.read.Store(&m)
		c.dirty = nil
	}
	return s
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
	s.bound.Store(&generation[T]{slot: s, c: s.c, gen: g, target: t})
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
	if p := s.bound.Load(); p.gen == b.g.gen && !mutant("BindingsNotCounted") {
		p.n.Add(1)
	}
}
