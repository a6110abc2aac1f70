package placement

import "sync/atomic"

// leaseSlot makes a lease single-use: ending a lease advances seq, so a
// second use of the same Lease value (or a copy) fails. Slots are pooled.
type leaseSlot struct{ seq atomic.Uint64 }

// Lease is one request's hold on a binding version. It keeps the binding
// alive (it cannot expire while leased) and must be ended exactly once with
// Release, Abandon, Invalidate or Close; a second end returns ErrUsed.
// Leases are values: taking and releasing one allocates nothing.
type Lease[T comparable] struct {
	b   *binding[T]
	s   *leaseSlot
	seq uint64
}

func (c *Coordinator[T]) newLease(b *binding[T]) Lease[T] {
	s := c.leases.Get().(*leaseSlot)
	return Lease[T]{b: b, s: s, seq: s.seq.Load()}
}

// Target returns the bound target.
func (l Lease[T]) Target() T {
	var zero T
	if l.b == nil {
		return zero
	}
	return l.b.target
}

// Generation returns the bound target's generation.
func (l Lease[T]) Generation() uint64 {
	if l.b == nil {
		return 0
	}
	return l.b.gen
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
	return l.b.e.key
}

// claim marks the lease used (only the first end succeeds) and returns its
// binding and coordinator; the caller returns the slot to the pool.
func (l Lease[T]) claim() (*binding[T], *Coordinator[T], error) {
	if l.b == nil {
		return nil, nil, ErrInvalidArgument
	}
	if !l.s.seq.CompareAndSwap(l.seq, l.seq+1) && !mutant("DoubleDecrementsLease") {
		return nil, nil, ErrUsed
	}
	return l.b, l.b.e.c(), nil
}

// Release ends the lease: the request is done. At zero leases the binding's
// idle deadline restarts at now + IdleTTL. On a superseded binding version
// it changes nothing but the lease. It takes no lock and allocates nothing.
func (l Lease[T]) Release() error { return l.end(true) }

// Abandon ends the lease without refreshing the idle deadline (a request
// that failed before producing anything).
func (l Lease[T]) Abandon() error { return l.end(false) }

func (l Lease[T]) end(refresh bool) error {
	b, c, err := l.claim()
	if err != nil {
		return err
	}
	defer c.leases.Put(l.s)
	for {
		w := b.word.Load()
		if w&deadBit != 0 {
			return nil // superseded
		}
		n := leases(w)
		if n == 1 && w&closingBit != 0 {
			c.endClosing(b)
			return nil
		}
		if n == 1 && refresh {
			// The deadline is stored before the count reaches zero, so the
			// binding is never expired early.
			b.deadline.Store(c.now() + c.ttl)
		}
		if b.word.CompareAndSwap(w, w-1) {
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
	defer c.leases.Put(l.s)
	e := b.e
	e.mu.Lock()
	removed := !e.removed && e.bound.Load() == b
	if removed {
		c.removeLocked(e)
	}
	e.mu.Unlock()
	if removed {
		c.emit(Event{Kind: EventRemoved, Key: e.key, Attempt: b.version, Generation: b.gen})
	}
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
	defer c.leases.Put(l.s)
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
	removed := false
	for {
		w := b.word.Load()
		if w&deadBit != 0 {
			break
		}
		if leases(w) == 1 {
			if b.word.CompareAndSwap(w, (w&^leaseMask)|deadBit) {
				c.stats.deadHits.Add(hitsOf(w))
				if !e.removed && e.bound.Load() == b {
					c.removeLocked(e)
					removed = true
				}
				break
			}
			continue
		}
		if b.word.CompareAndSwap(w, (w-1)|closingBit) {
			break
		}
	}
	e.mu.Unlock()
	if removed {
		c.emit(Event{Kind: EventRemoved, Key: e.key, Attempt: b.version, Generation: b.gen})
	}
}
