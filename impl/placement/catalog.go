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
// generation 1. A lookup is a plain Go map lookup, lock-free: the map
// (read) is never written once published. A target seen for the first
// time goes into a small map beside it (dirty, under mu) and read is
// replaced by a copy with dirty's targets once these are more than a
// sixteenth of it, or once lookups have had to lock for them that many
// times, so a new target costs amortized O(1) copies and a bounded number
// of locked lookups; only the first sight of a target allocates. While
// dirty is empty (almost always) a lookup of a target never seen takes no
// lock either. A router reads a target's generation and then dispatches to
// it: two lookups of one target per new session, each a map lookup (they
// were a sync.Map's, with the key boxed; issue 28).
type catalog[T comparable] struct {
	owner  *Coordinator[T]
	read   atomic.Pointer[map[T]*targetSlot[T]]
	dirtyN atomic.Int64 // len(dirty)
	mu     sync.Mutex
	dirty  map[T]*targetSlot[T] // targets not yet in read (guarded by mu)
	misses int                  // locked lookups since the last copy (guarded by mu)
	epoch  atomic.Uint64        // moved after every generation change
	// bumping counts the bumps under way: from before one stores its new
	// generation until it has moved epoch. A capacity check that can see
	// a new generation thus sees either the bump under way or a moved
	// epoch (see Coordinator.sweepMayHelp).
	bumping atomic.Int32
}

// fast looks t up without the lock: found, or (dirty empty) certainly
// absent. Loading dirtyN before read makes a target that left dirty for
// read (read stored first) found by one or the other.
func (c *catalog[T]) fast(t T) (s *targetSlot[T], ok, sure bool) {
	n := c.dirtyN.Load()
	if m := c.read.Load(); m != nil {
		if s, ok := (*m)[t]; ok {
			return s, true, true
		}
	}
	return nil, false, n == 0
}

// lookup returns t's slot if t was ever seen.
func (c *catalog[T]) lookup(t T) (*targetSlot[T], bool) {
	if s, ok, sure := c.fast(t); sure {
		return s, ok
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	s, ok := c.lookupLocked(t)
	c.missedLocked()
	return s, ok
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
	if s, ok, _ := c.fast(t); ok {
		return s
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if s, ok := c.lookupLocked(t); ok {
		c.missedLocked()
		return s
	}
	s := &targetSlot[T]{c: c.owner, target: t}
	s.gen.Store(1)
	s.bound.Store(&generation[T]{slot: s, c: s.c, gen: 1, target: t})
	if c.dirty == nil {
		c.dirty = make(map[T]*targetSlot[T])
	}
	c.dirty[t] = s
	c.dirtyN.Store(int64(len(c.dirty)))
	if len(c.dirty) > c.readLen()/16 {
		c.promoteLocked()
	}
	return s
}

func (c *catalog[T]) readLen() int {
	if m := c.read.Load(); m != nil {
		return len(*m)
	}
	return 0
}

// missedLocked counts a lookup that had to lock, and copies dirty into read
// after more than a sixteenth of read's size of them.
func (c *catalog[T]) missedLocked() {
	if c.misses++; len(c.dirty) > 0 && c.misses > c.readLen()/16 {
		c.promoteLocked()
	}
}

// promoteLocked replaces read by a copy holding dirty's targets too.
func (c *catalog[T]) promoteLocked() {
	var old map[T]*targetSlot[T]
	if m := c.read.Load(); m != nil {
		old = *m
	}
	m := make(map[T]*targetSlot[T], len(old)+len(c.dirty))
	for k, v := range old {
		m[k] = v
	}
	for k, v := range c.dirty {
		m[k] = v
	}
	c.read.Store(&m) // before dirtyN: see fast
	c.dirty, c.misses = nil, 0
	c.dirtyN.Store(0)
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
