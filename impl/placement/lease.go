package placement

import "sync/atomic"

// leaseSlot makes a lease that does not own its binding's lease cell
// single-use: ending the lease advances seq, so a second use of the same
// Lease value (or a copy) fails. Slots are pooled.
type leaseSlot struct {
	seq    atomic.Uint64
	stripe uint64 // which sharedHits counter this slot's hits go to
}

// Lease is one request's hold on a binding version. It keeps the binding
// alive (it cannot expire while leased) and must be ended exactly once with
// Release, Abandon, Invalidate or Close; a second end returns ErrUsed.
// Leases are values: taking and releasing one allocates nothing.
type Lease[T comparable] struct {
	b *binding[T]
	s *leaseSlot // nil when the lease owns the binding's cell
	t uint64     // the cell epoch it owns, or the slot's sequence
}

// take adds a lease to b, whose word was w: it owns the cell if the cell is
// free, else it gets a pooled slot. It fails if w changed meanwhile.
func (c *Coordinator[T]) take(b *binding[T], w uint64) (Lease[T], bool) {
	if w&cellBit == 0 {
		n := w + 1 + cellBit + epochUnit
		wrapped := n>>epochShift == 0
		if wrapped {
			n += epochUnit // epoch 0 names no cell: skip it
		}
		if !b.word.CompareAndSwap(w, n) {
			return Lease[T]{}, false
		}
		if wrapped {
			c.stats.deadHits.Add(epochMax) // the hits the epoch counted before it wrapped
		}
		return Lease[T]{b: b, t: n >> epochShift}, true
	}
	if !b.word.CompareAndSwap(w, w+1) {
		return Lease[T]{}, false
	}
	l := c.newLease(b)
	// Slots are pooled per processor, so counting on the slot's stripe
	// keeps concurrent hits on one session off a shared counter.
	c.stats.sharedHits[l.s.stripe].n.Add(1)
	return l, true
}

// newLease returns a slot lease on b, whose count already includes it.
func (c *Coordinator[T]) newLease(b *binding[T]) Lease[T] {
	s := c.leases.Get().(*leaseSlot)
	return Lease[T]{b: b, s: s, t: s.seq.Load()}
}

// Target returns the bound target.
func (l Lease[T]) Target() T {
	var zero T
	if l.b == nil {
		return zero
	}
	return l.b.g.target
}

// Generation returns the bound target's generation.
func (l Lease[T]) Generation() uint64 {
	if l.b == nil {
		return 0
	}
	return l.b.g.gen
}

// Current reports whether the lease's binding version is still its
// session's live binding: not invalidated, removed or replaced, and its
// target's generation has not moved on. A lease stays valid to end however
// its binding fares; Current serves a caller that acts on a lease some time
// after taking it (a layer above that judges the target first): a version
// that is Current now was live at every instant since the lease was taken
// (a binding version never comes back once it ended). Two atomic loads.
func (l Lease[T]) Current() bool {
	return l.b != nil && l.b.word.Load()&deadBit == 0 && !l.b.stale()
}

// Version returns the binding version: the id of the accepted attempt.
func (l Lease[T]) Version() uint64 {
	if l.b == nil {
		return 0
	}
	return l.b.version
}

// Key returns the session key.
func (l Lease[T]) Key() string {
	if l.b == nil {
		return ""
	}
	return l.b.e.key()
}

// claim marks the lease used (only the first end succeeds) and returns its
// binding and coordinator. The lease's unit stays in the binding's count;
// the caller ends it.
func (l Lease[T]) claim() (*binding[T], *Coordinator[T], error) {
	b := l.b
	if b == nil {
		return nil, nil, ErrInvalidArgument
	}
	c := b.c()
	if l.s != nil {
		ok := l.s.seq.CompareAndSwap(l.t, l.t+1)
		if !ok && !mutant("DoubleDecrementsLease") {
			return nil, nil, ErrUsed
		}
		if ok {
			c.leases.Put(l.s)
		}
		return b, c, nil
	}
	for {
		w := b.word.Load()
		if !ownsCell(w, l.t) {
			if mutant("DoubleDecrementsLease") {
				return b, c, nil
			}
			return nil, nil, ErrUsed
		}
		if b.word.CompareAndSwap(w, w&^cellBit) {
			return b, c, nil
		}
	}
}

// Release ends the lease: the request is done. At zero leases the binding's
// idle deadline restarts at now + IdleTTL. On a superseded binding version
// it changes nothing but the lease. It takes no lock and allocates nothing.
func (l Lease[T]) Release() error { return l.end(true) }

// Abandon ends the lease without refreshing the idle deadline (a request
// that failed before producing anything).
func (l Lease[T]) Abandon() error { return l.end(false) }

func (l Lease[T]) end(refresh bool) error {
	if l.s != nil || l.b == nil {
		b, c, err := l.claim()
		if err != nil {
			return err
		}
		return c.endLease(b, refresh, 0)
	}
	return l.b.c().endLease(l.b, refresh, l.t)
}

// endLease ends one lease on b. A lease that owns the cell (ticket cell,
// nonzero) is checked and ended in the same compare-and-swap that frees the
// cell; any other lease was claimed by the caller.
func (c *Coordinator[T]) endLease(b *binding[T], refresh bool, cell uint64) error {
	for {
		w := b.word.Load()
		free := uint64(0) // the cell bit this end clears
		if cell != 0 {
			if !ownsCell(w, cell) {
				if !mutant("DoubleDecrementsLease") {
					return ErrUsed
				}
				cell = 0 // the bug: end some other lease's unit
				continue
			}
			free = cellBit
		}
		if w&deadBit != 0 { // superseded: only the lease ends
			if free == 0 || b.word.CompareAndSwap(w, w&^free) {
				return nil
			}
			continue
		}
		n := leases(w)
		if n == 1 && w&closingBit != 0 {
			if free != 0 && !b.word.CompareAndSwap(w, w&^free) {
				continue
			}
			c.endClosing(b)
			return nil
		}
		if n == 1 && refresh {
			// The deadline is stored before the count reaches zero, so the
			// binding is never expired early.
			b.deadline.Store(c.now() + c.ttl)
		}
		if b.word.CompareAndSwap(w, (w-1)&^free) {
			if n == 1 { // idle now: note its deadline (after the change)
				c.noteDeadline(b.deadline.Load())
			}
			return nil
		}
	}
}

// Invalidate ends the lease and removes the binding, if this lease's version
// is still current (other requests' leases on it become superseded); on a
// superseded version it acts as Release.
func (l Lease[T]) Invalidate() error {
	b, c, err := l.claim()
	if err != nil {
		return err
	}
	e := b.e
	e.mu.Lock()
	if !e.removed && e.bound.Load() == b {
		c.removeBindingLocked(e, b)
	}
	e.mu.Unlock()
	return nil
}

// Close ends the lease of the session's final request: the binding is
// marked closing (it still answers hits, so the session never splits) and is
// removed when its last lease ends, never while others still hold leases.
func (l Lease[T]) Close() error {
	b, c, err := l.claim()
	if err != nil {
		return err
	}
	for {
		w := b.word.Load()
		if w&deadBit != 0 {
			return nil // superseded
		}
		if leases(w) == 1 || mutant("ClosesWhileLeased") {
			if mutant("ClosesWhileLeased") {
				b.word.Store((w &^ leaseMask) | 1) // pretend this was the last lease
			}
			c.endClosing(b)
			return nil
		}
		if b.word.CompareAndSwap(w, (w-1)|closingBit) {
			return nil
		}
	}
}

// endClosing ends the last lease of a closing binding (or of one the final
// request closes): the binding is removed unless a lease arrived meanwhile.
func (c *Coordinator[T]) endClosing(b *binding[T]) {
	e := b.e
	e.mu.Lock()
	defer e.mu.Unlock()
	// A removal under way from before the swap that ends the binding (see
	// beginRemoval); if a lease arrived meanwhile, it ends having removed
	// nothing.
	c.beginRemoval()
	defer c.endRemoval()
	for {
		w := b.word.Load()
		if w&deadBit != 0 {
			return
		}
		if leases(w) == 1 {
			if b.word.CompareAndSwap(w, (w&^leaseMask)|deadBit) {
				b.died(w)
				if !e.removed && e.bound.Load() == b {
					c.removeBindingBegunLocked(e, b)
				}
				return
			}
			continue
		}
		if b.word.CompareAndSwap(w, (w-1)|closingBit) {
			return
		}
	}
}
