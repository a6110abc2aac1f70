// Package peers puts the libraries a Go router author would pick instead of
// the placement core beside it, as benchmarks.Placer contenders: otter,
// xsync (as a cache and as the bare map plus atomics), hashicorp's expirable
// LRU and ristretto. It is a nested module, so no consumer of
// github.com/placementlab/placement ever sees these libraries in its go.sum.
//
// Every contender does the same work as the baselines in package benchmarks:
// look a session up, take a lease (an in-flight count), keep a sliding idle
// deadline, release; on a miss, create the binding exactly once.
package peers

import (
	"errors"
	"sync"
	"sync/atomic"
	"time"

	"github.com/dgraph-io/ristretto/v2"
	"github.com/hashicorp/golang-lru/v2/expirable"
	"github.com/maypok86/otter/v2"
	"github.com/placementlab/placement/benchmarks"
	"github.com/puzpuzpuz/xsync/v4"
)

// ErrBound is Bind's error for a key that already has a live binding.
var ErrBound = errors.New("already bound")

// Clock is a contender's time source, in nanoseconds from a fixed point. It
// has otter's Clock method set, so an otter cache can read it too.
type Clock interface {
	// NowNano reads the clock.
	NowNano() int64
	// Tick returns a channel of ticks (nil: none).
	Tick(d time.Duration) <-chan time.Time
}

// coarseClock adapts the benchmarks' shared coarse clock to Clock.
type coarseClock struct{}

func (coarseClock) NowNano() int64                      { return benchmarks.CoarseNow() }
func (coarseClock) Tick(time.Duration) <-chan time.Time { return nil }

// ManualClock is a Clock that moves only when told: the behavioural check's
// clock.
type ManualClock struct{ t atomic.Int64 }

// NowNano implements Clock.
func (c *ManualClock) NowNano() int64 { return c.t.Load() }

// Tick implements Clock: no ticks.
func (c *ManualClock) Tick(time.Duration) <-chan time.Time { return nil }

// Advance moves the clock forward by d.
func (c *ManualClock) Advance(d time.Duration) { c.t.Add(int64(d)) }

// Binding is a peer's committed placement: its target, the in-flight lease
// count and the idle deadline (on the contender's clock; unused by the
// contenders whose library keeps the deadline).
type Binding struct {
	Target   benchmarks.Worker
	leases   atomic.Int64
	deadline atomic.Int64
}

// take takes a lease on b if it is live at now: leased, or its idle
// deadline not passed.
func (b *Binding) take(now int64) bool {
	if b.leases.Add(1) > 1 || b.deadline.Load() > now {
		return true
	}
	b.leases.Add(-1)
	return false
}

// live reports whether b may still be hit at now.
func (b *Binding) live(now int64) bool { return b.leases.Load() > 0 || b.deadline.Load() > now }

func newBinding(w benchmarks.Worker) *Binding {
	b := &Binding{Target: w}
	b.leases.Store(1)
	return b
}

// clockOr returns clk, or the shared coarse clock (acquired; release it
// with the returned function) when clk is nil.
func clockOr(clk Clock) (Clock, func()) {
	if clk != nil {
		return clk, func() {}
	}
	return coarseClock{}, benchmarks.AcquireCoarseClock()
}

// --- xsync: the bare map plus atomics ---

// XsyncBare is the bare xsync map plus atomics: an xsync.Map of *Binding
// with an atomic lease count and idle deadline, and no protocol (no
// generation, quarantine, capacity): the reference the core's targets are
// stated against. Bind creates the binding under the bucket lock
// (xsync.Map.Compute): a single initializer.
type XsyncBare struct {
	m     *xsync.Map[string, *Binding]
	clk   Clock
	ttl   int64
	close func()
}

// NewXsyncBare returns an empty XsyncBare presized for n bindings, on clk
// (nil: the shared coarse clock) with idle TTL ttl.
func NewXsyncBare(n int, clk Clock, ttl time.Duration) *XsyncBare {
	c, release := clockOr(clk)
	return &XsyncBare{m: xsync.NewMap[string, *Binding](xsync.WithPresize(n)), clk: c, ttl: int64(ttl), close: release}
}

// Hit implements benchmarks.Placer.
func (p *XsyncBare) Hit(key string) (*Binding, bool) {
	b, ok := p.m.Load(key)
	if !ok || !b.take(p.clk.NowNano()) {
		return nil, false
	}
	return b, true
}

// Release implements benchmarks.Placer.
func (p *XsyncBare) Release(b *Binding) {
	if b.leases.Add(-1) == 0 {
		b.deadline.Store(p.clk.NowNano() + p.ttl)
	}
}

// Bind implements benchmarks.Placer: create the binding unless a live one
// is there (an expired one is replaced).
func (p *XsyncBare) Bind(key string, w benchmarks.Worker) (*Binding, error) {
	var out *Binding
	p.m.Compute(key, func(old *Binding, loaded bool) (*Binding, xsync.ComputeOp) {
		if loaded && old.live(p.clk.NowNano()) {
			return old, xsync.CancelOp
		}
		out = newBinding(w)
		return out, xsync.UpdateOp
	})
	if out == nil {
		return nil, ErrBound
	}
	return out, nil
}

// Remove implements benchmarks.Placer.
func (p *XsyncBare) Remove(key string) { p.m.Delete(key) }

// Close implements benchmarks.Placer.
func (p *XsyncBare) Close() { p.close() }

// --- xsync as a cache of values ---

// entry is XsyncCache's value: stored by value, changed only under the
// bucket lock.
type entry struct {
	target   benchmarks.Worker
	leases   int64
	deadline int64
}

// XsyncCache is xsync used as a cache of values, the way its API invites:
// an xsync.Map[string, entry] whose entries are read and changed only
// through Compute (lease taken and returned under the bucket lock; an
// expired entry deleted by the hit that finds it). A lease is the key.
// Bind is a single initializer (Compute).
type XsyncCache struct {
	m     *xsync.Map[string, entry]
	clk   Clock
	ttl   int64
	close func()
}

// NewXsyncCache returns an empty XsyncCache presized for n bindings, on clk
// (nil: the shared coarse clock) with idle TTL ttl.
func NewXsyncCache(n int, clk Clock, ttl time.Duration) *XsyncCache {
	c, release := clockOr(clk)
	return &XsyncCache{m: xsync.NewMap[string, entry](xsync.WithPresize(n)), clk: c, ttl: int64(ttl), close: release}
}

// Hit implements benchmarks.Placer.
func (p *XsyncCache) Hit(key string) (string, bool) {
	now := p.clk.NowNano()
	_, ok := p.m.Compute(key, func(e entry, loaded bool) (entry, xsync.ComputeOp) {
		if !loaded {
			return e, xsync.CancelOp
		}
		if e.leases == 0 && e.deadline <= now {
			return e, xsync.DeleteOp
		}
		e.leases++
		return e, xsync.UpdateOp
	})
	return key, ok
}

// Release implements benchmarks.Placer.
func (p *XsyncCache) Release(key string) {
	p.m.Compute(key, func(e entry, loaded bool) (entry, xsync.ComputeOp) {
		if !loaded {
			return e, xsync.CancelOp
		}
		if e.leases--; e.leases == 0 {
			e.deadline = p.clk.NowNano() + p.ttl
		}
		return e, xsync.UpdateOp
	})
}

// Bind implements benchmarks.Placer.
func (p *XsyncCache) Bind(key string, w benchmarks.Worker) (string, error) {
	created := false
	p.m.Compute(key, func(e entry, loaded bool) (entry, xsync.ComputeOp) {
		if loaded && (e.leases > 0 || e.deadline > p.clk.NowNano()) {
			return e, xsync.CancelOp
		}
		created = true
		return entry{target: w, leases: 1}, xsync.UpdateOp
	})
	if !created {
		return "", ErrBound
	}
	return key, nil
}

// Remove implements benchmarks.Placer.
func (p *XsyncCache) Remove(key string) { p.m.Delete(key) }

// Close implements benchmarks.Placer.
func (p *XsyncCache) Close() { p.close() }

// --- otter ---

// Otter is otter v2 as the session table: a Cache[string, *Binding] with
// ExpiryAccessing(ttl) (the idle deadline slides with every hit, read on
// otter's clock) and the lease count in the binding. Bind is a single
// initializer (Cache.Compute runs under the bucket lock). Otter keeps the
// deadline, not the leases: a session leased for longer than the TTL since
// its last hit expires under its lease.
type Otter struct {
	c    *otter.Cache[string, *Binding]
	stop func()
}

// NewOtter returns an empty Otter for n bindings with idle TTL ttl, reading
// clk; clk nil is otter's default clock (time.Now on every read).
func NewOtter(n int, clk Clock, ttl time.Duration) *Otter {
	o := &otter.Options[string, *Binding]{
		InitialCapacity:  n,
		ExpiryCalculator: otter.ExpiryAccessing[string, *Binding](ttl),
	}
	if clk != nil {
		o.Clock = clk
	}
	c := otter.Must(o)
	return &Otter{c: c, stop: func() { c.StopAllGoroutines() }}
}

// NewOtterCoarse is NewOtter on otter's own CoarseClock at
// benchmarks.CoarseTick resolution (stopped by Close).
func NewOtterCoarse(n int, ttl time.Duration) *Otter {
	clk := otter.NewCoarseClock(benchmarks.CoarseTick)
	p := NewOtter(n, clk, ttl)
	p.stop = func() { p.c.StopAllGoroutines(); clk.Stop() }
	return p
}

// Hit implements benchmarks.Placer.
func (p *Otter) Hit(key string) (*Binding, bool) {
	b, ok := p.c.GetIfPresent(key)
	if !ok {
		return nil, false
	}
	b.leases.Add(1)
	return b, true
}

// Release implements benchmarks.Placer.
func (p *Otter) Release(b *Binding) { b.leases.Add(-1) }

// Bind implements benchmarks.Placer.
func (p *Otter) Bind(key string, w benchmarks.Worker) (*Binding, error) {
	var out *Binding
	p.c.Compute(key, func(old *Binding, found bool) (*Binding, otter.ComputeOp) {
		if found {
			return old, otter.CancelOp
		}
		out = newBinding(w)
		return out, otter.WriteOp
	})
	if out == nil {
		return nil, ErrBound
	}
	return out, nil
}

// Remove implements benchmarks.Placer.
func (p *Otter) Remove(key string) { p.c.Invalidate(key) }

// Close implements benchmarks.Placer.
func (p *Otter) Close() { p.stop() }

// --- hashicorp/golang-lru/v2 expirable ---

// KeyedLease is the lease of the contenders whose library needs the key to
// restart a TTL (LRU, Ristretto): the key and its binding.
type KeyedLease struct {
	Key string
	B   *Binding
}

// LRU is hashicorp's expirable LRU as the session table. Its TTL counts from
// the last Add and a Get does not extend it, so the idle deadline slides by
// adding the binding again when its last lease ends (a write under the
// LRU's one lock). It reads time.Now, which cannot be replaced. It has no
// add-if-absent: Bind is Peek then Add under a mutex of this contender's;
// the library gives no single initializer. Its bound evicts the oldest
// entry, leased or not.
type LRU struct {
	c  *expirable.LRU[string, *Binding]
	mu sync.Mutex
}

// NewLRU returns an empty LRU bounded at n+n/4+16 entries with idle TTL ttl.
func NewLRU(n int, ttl time.Duration) *LRU {
	return &LRU{c: expirable.NewLRU[string, *Binding](n+n/4+16, nil, ttl)}
}

// Hit implements benchmarks.Placer.
func (p *LRU) Hit(key string) (KeyedLease, bool) {
	b, ok := p.c.Get(key)
	if !ok {
		return KeyedLease{}, false
	}
	b.leases.Add(1)
	return KeyedLease{key, b}, true
}

// Release implements benchmarks.Placer; the release that ends the last
// lease re-adds the binding, restarting its TTL, if it is still the key's.
func (p *LRU) Release(l KeyedLease) {
	if l.B.leases.Add(-1) != 0 {
		return
	}
	p.mu.Lock()
	if cur, ok := p.c.Peek(l.Key); ok && cur == l.B {
		p.c.Add(l.Key, l.B)
	}
	p.mu.Unlock()
}

// Bind implements benchmarks.Placer.
func (p *LRU) Bind(key string, w benchmarks.Worker) (KeyedLease, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if _, ok := p.c.Peek(key); ok {
		return KeyedLease{}, ErrBound
	}
	b := newBinding(w)
	p.c.Add(key, b)
	return KeyedLease{key, b}, nil
}

// Remove implements benchmarks.Placer.
func (p *LRU) Remove(key string) { p.c.Remove(key) }

// Close implements benchmarks.Placer. The expirable LRU's cleanup goroutine
// cannot be stopped (it has no Close).
func (p *LRU) Close() { p.c.Purge() }

// --- ristretto ---

// Ristretto is ristretto v2 as the session table: SetWithTTL(ttl) and Get.
// Its sets go through buffers and may be dropped, so Bind retries a dropped
// Set and calls Wait so the next Get sees it; its TTL counts from the last
// Set and a Get does not extend it, so the release that ends the last lease
// sets the binding again. It reads time.Now. It has no add-if-absent
// (Bind is Get then Set under a mutex of this contender's: no single
// initializer from the library), and its admission policy may refuse or
// evict any entry, leased or not.
type Ristretto struct {
	c   *ristretto.Cache[string, *Binding]
	ttl time.Duration
	mu  sync.Mutex
}

// NewRistretto returns an empty Ristretto for n bindings (cost 1 each,
// MaxCost 2n, NumCounters 10 per entry, as its README advises) with idle
// TTL ttl.
func NewRistretto(n int, ttl time.Duration) *Ristretto {
	n = max(n, 64)
	c, err := ristretto.NewCache(&ristretto.Config[string, *Binding]{
		NumCounters:        int64(20 * n),
		MaxCost:            int64(2 * n),
		BufferItems:        64,
		IgnoreInternalCost: true,
	})
	if err != nil {
		panic(err)
	}
	return &Ristretto{c: c, ttl: ttl}
}

// Hit implements benchmarks.Placer.
func (p *Ristretto) Hit(key string) (KeyedLease, bool) {
	b, ok := p.c.Get(key)
	if !ok {
		return KeyedLease{}, false
	}
	b.leases.Add(1)
	return KeyedLease{key, b}, true
}

// Release implements benchmarks.Placer.
func (p *Ristretto) Release(l KeyedLease) {
	if l.B.leases.Add(-1) != 0 {
		return
	}
	p.c.SetWithTTL(l.Key, l.B, 1, p.ttl) // best effort: a dropped refresh keeps the old deadline
}

// Bind implements benchmarks.Placer.
func (p *Ristretto) Bind(key string, w benchmarks.Worker) (KeyedLease, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if _, ok := p.c.Get(key); ok {
		return KeyedLease{}, ErrBound
	}
	b := newBinding(w)
	for !p.c.SetWithTTL(key, b, 1, p.ttl) {
	}
	p.c.Wait()
	return KeyedLease{key, b}, nil
}

// Remove implements benchmarks.Placer.
func (p *Ristretto) Remove(key string) { p.c.Del(key) }

// Close implements benchmarks.Placer.
func (p *Ristretto) Close() { p.c.Close() }
