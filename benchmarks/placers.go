package benchmarks

import (
	"errors"
	"hash/maphash"
	"sync"
	"sync/atomic"
	"time"

	"github.com/placementlab/placement/impl/placement"
)

// Worker is the benchmarks' target type.
type Worker struct {
	ID   uint64
	Rank int32
}

// Placer is the small interface the coordinator and every baseline
// implement: the hot path (Hit, Release) and the cold path (Bind, Remove).
// L is the implementation's lease type, so no lease is boxed.
type Placer[L any] interface {
	// Hit takes a lease on key's live binding; false when there is none.
	Hit(key string) (L, bool)
	// Release ends a lease; at zero leases the idle deadline restarts.
	Release(L)
	// Bind runs the cold path: reserve, dispatch to w, accept; it returns
	// the dispatcher's lease.
	Bind(key string, w Worker) (L, error)
	// Remove drops key's binding.
	Remove(key string)
	// Close releases resources.
	Close()
}

// ttl is every placer's idle TTL.
const ttl = int64(time.Hour)

var errBound = errors.New("already bound")

// --- the coordinator ---

// Coordinator adapts *placement.Coordinator to Placer.
type Coordinator struct {
	C *placement.Coordinator[Worker]
	// Clk is the manual clock the coordinator reads, or nil for its
	// default runtime clock (Config.Clock nil).
	Clk *placement.ManualClock
}

// NewCoordinator returns a coordinator in its default configuration, with
// room for n entries: Config.Clock is nil, so it reads its default runtime
// clock and runs its background reaper. Whatever that clock is (the
// monotonic clock read on every check, or a coarse clock a ticker
// advances), this is what a router gets without asking for anything.
func NewCoordinator(n int) *Coordinator { return newCoordinator(n, nil) }

// NewManualCoordinator returns a coordinator on a ManualClock (one atomic
// load, never advanced unless a benchmark advances it; no reaper), with room
// for n entries: the configuration of a simulation host.
func NewManualCoordinator(n int) *Coordinator { return newCoordinator(n, placement.NewManualClock(0)) }

func newCoordinator(n int, clk *placement.ManualClock) *Coordinator {
	c, err := placement.New[Worker](placement.Config[Worker]{IdleTTL: time.Duration(ttl), ReserveTimeout: time.Minute, DispatchTimeout: time.Minute,
		MaxEntries: n, MaxKeyBytes: 64, Clock: clk})
	if err != nil {
		panic(err)
	}
	return &Coordinator{C: c, Clk: clk}
}

// Hit implements Placer.
func (p *Coordinator) Hit(key string) (placement.Lease[Worker], bool) {
	a, err := p.C.TryAcquire(key)
	if err != nil || !a.Hit() {
		if a.Reservation != nil {
			_ = a.Reservation.Cancel()
		}
		return placement.Lease[Worker]{}, false
	}
	return a.Lease, true
}

// Release implements Placer.
func (p *Coordinator) Release(l placement.Lease[Worker]) { _ = l.Release() }

// Bind implements Placer.
func (p *Coordinator) Bind(key string, w Worker) (placement.Lease[Worker], error) {
	a, err := p.C.TryAcquire(key)
	if err != nil {
		return placement.Lease[Worker]{}, err
	}
	if a.Reservation == nil {
		_ = a.Lease.Release()
		return placement.Lease[Worker]{}, errBound
	}
	d, err := a.Reservation.BeginDispatch(w, p.C.Generation(w))
	if err != nil {
		return placement.Lease[Worker]{}, err
	}
	return d.Complete(placement.Accepted)
}

// Remove implements Placer.
func (p *Coordinator) Remove(key string) { _, _ = p.C.InvalidateKey(key) }

// Close implements Placer.
func (p *Coordinator) Close() { p.C.Close() }

// --- the baselines' clock ---

// CoarseTick is how often the baselines' coarse clock is advanced.
const CoarseTick = time.Millisecond

// coarseClock is the clock the baselines read by default: the monotonic
// time since a fixed epoch, stored by a ticker every CoarseTick, so a read
// is one atomic load and lags the monotonic clock by at most about a tick.
// This is the clock a router author who cares about the hot path uses for
// an idle TTL of minutes (one per process, shared by every table), and the
// kind the coordinator's default may be. One instance, coarse, is shared by
// every baseline; its ticker runs from the first baseline built to the last
// one closed.
type coarseClock struct {
	_     [64]byte
	t     atomic.Int64 // on a cache line of its own: the ticker writes it, every hit reads it
	_     [56]byte
	epoch time.Time
	mu    sync.Mutex
	users int
	stop  chan struct{}
	done  chan struct{}
}

var coarse = &coarseClock{epoch: time.Now()}

// now reads the clock: one atomic load.
func (c *coarseClock) now() int64 { return c.t.Load() }

// acquire counts a user, starting the ticker for the first one.
func (c *coarseClock) acquire() {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.users++; c.users > 1 {
		return
	}
	c.t.Store(int64(time.Since(c.epoch)))
	stop, done := make(chan struct{}), make(chan struct{})
	c.stop, c.done = stop, done
	go func() {
		defer close(done)
		tk := time.NewTicker(CoarseTick)
		defer tk.Stop()
		for {
			select {
			case <-stop:
				return
			case <-tk.C:
				c.t.Store(int64(time.Since(c.epoch)))
			}
		}
	}()
}

// release ends a user, stopping the ticker after the last one.
func (c *coarseClock) release() {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.users--; c.users > 0 {
		return
	}
	close(c.stop)
	<-c.done
}

// wallEpoch is the zero of the clock a wall-clock baseline reads.
var wallEpoch = time.Now()

// clock is a baseline's time source: the shared coarse clock (the
// default), or, when wall is set, time.Since on every check (the clock a
// router author writes first, as the coordinator did before a coarse clock).
// The choice is a branch, not an interface call, as in the coordinator.
type clock struct {
	wall   bool
	closed atomic.Bool
}

func newClock(wall bool) clock {
	if !wall {
		coarse.acquire()
	}
	return clock{wall: wall}
}

func (c *clock) now() int64 {
	if c.wall {
		return int64(time.Since(wallEpoch))
	}
	return coarse.now()
}

// close releases the coarse clock (once).
func (c *clock) close() {
	if !c.wall && c.closed.CompareAndSwap(false, true) {
		coarse.release()
	}
}

// --- the baselines: same lease count, idle deadline and generation check ---

// binding is a baseline's committed placement.
type binding struct {
	target   Worker
	gen      uint64
	genCell  *atomic.Uint64
	leases   int64
	deadline int64
}

// live reports whether b may be hit at now (callers hold b's lock).
func (b *binding) live(now int64) bool {
	return b.genCell.Load() == b.gen && (b.leases > 0 || b.deadline > now)
}

// gens is the baselines' target catalog: one generation cell per worker.
type gens struct{ m sync.Map }

func (g *gens) cell(w Worker) *atomic.Uint64 {
	if v, ok := g.m.Load(w); ok {
		return v.(*atomic.Uint64)
	}
	c := new(atomic.Uint64)
	c.Store(1)
	v, _ := g.m.LoadOrStore(w, c)
	return v.(*atomic.Uint64)
}

// MutexMap is what most routers write first: one sync.Mutex around a map.
type MutexMap struct {
	mu  sync.Mutex
	m   map[string]*binding
	g   gens
	clk clock
}

// NewMutexMap returns an empty MutexMap on the shared coarse clock.
func NewMutexMap() *MutexMap { return newMutexMap(false) }

// NewMutexMapWall returns an empty MutexMap that calls time.Since on
// every check (the "mutex-now" row).
func NewMutexMapWall() *MutexMap { return newMutexMap(true) }

func newMutexMap(wall bool) *MutexMap {
	return &MutexMap{m: map[string]*binding{}, clk: newClock(wall)}
}

// Hit implements Placer.
func (p *MutexMap) Hit(key string) (*binding, bool) {
	now := p.clk.now()
	p.mu.Lock()
	b, ok := p.m[key]
	if !ok || !b.live(now) {
		p.mu.Unlock()
		return nil, false
	}
	b.leases++
	p.mu.Unlock()
	return b, true
}

// Release implements Placer.
func (p *MutexMap) Release(b *binding) {
	now := p.clk.now()
	p.mu.Lock()
	if b.leases--; b.leases == 0 {
		b.deadline = now + ttl
	}
	p.mu.Unlock()
}

// Bind implements Placer.
func (p *MutexMap) Bind(key string, w Worker) (*binding, error) {
	cell := p.g.cell(w)
	now := p.clk.now()
	p.mu.Lock()
	defer p.mu.Unlock()
	if b, ok := p.m[key]; ok && b.live(now) {
		return nil, errBound
	}
	b := &binding{target: w, gen: cell.Load(), genCell: cell, leases: 1, deadline: now + ttl}
	p.m[key] = b
	return b, nil
}

// Remove implements Placer.
func (p *MutexMap) Remove(key string) { p.mu.Lock(); delete(p.m, key); p.mu.Unlock() }

// Close implements Placer.
func (p *MutexMap) Close() { p.clk.close() }

const shards = 64

// ShardedMap spreads keys over 64 mutex-guarded maps.
type ShardedMap struct {
	seed   maphash.Seed
	shards [shards]struct {
		mu sync.Mutex
		m  map[string]*shardedBinding
		_  [40]byte
	}
	g   gens
	clk clock
}

type shardedBinding struct {
	binding
	shard int
}

// NewShardedMap returns an empty ShardedMap.
func NewShardedMap() *ShardedMap {
	p := &ShardedMap{seed: maphash.MakeSeed(), clk: newClock(false)}
	for i := range p.shards {
		p.shards[i].m = map[string]*shardedBinding{}
	}
	return p
}

func (p *ShardedMap) shard(key string) int { return int(maphash.String(p.seed, key) % shards) }

// Hit implements Placer.
func (p *ShardedMap) Hit(key string) (*shardedBinding, bool) {
	now := p.clk.now()
	s := &p.shards[p.shard(key)]
	s.mu.Lock()
	b, ok := s.m[key]
	if !ok || !b.live(now) {
		s.mu.Unlock()
		return nil, false
	}
	b.leases++
	s.mu.Unlock()
	return b, true
}

// Release implements Placer.
func (p *ShardedMap) Release(b *shardedBinding) {
	now := p.clk.now()
	s := &p.shards[b.shard]
	s.mu.Lock()
	if b.leases--; b.leases == 0 {
		b.deadline = now + ttl
	}
	s.mu.Unlock()
}

// Bind implements Placer.
func (p *ShardedMap) Bind(key string, w Worker) (*shardedBinding, error) {
	cell := p.g.cell(w)
	now := p.clk.now()
	i := p.shard(key)
	s := &p.shards[i]
	s.mu.Lock()
	defer s.mu.Unlock()
	if b, ok := s.m[key]; ok && b.live(now) {
		return nil, errBound
	}
	b := &shardedBinding{binding{target: w, gen: cell.Load(), genCell: cell, leases: 1, deadline: now + ttl}, i}
	s.m[key] = b
	return b, nil
}

// Remove implements Placer.
func (p *ShardedMap) Remove(key string) {
	s := &p.shards[p.shard(key)]
	s.mu.Lock()
	delete(s.m, key)
	s.mu.Unlock()
}

// Close implements Placer.
func (p *ShardedMap) Close() { p.clk.close() }

// SyncMapEntryMutex is sync.Map with a mutex in every entry.
type SyncMapEntryMutex struct {
	m   sync.Map
	g   gens
	clk clock
}

// NewSyncMapEntryMutex returns an empty SyncMapEntryMutex on the shared
// coarse clock.
func NewSyncMapEntryMutex() *SyncMapEntryMutex { return &SyncMapEntryMutex{clk: newClock(false)} }

type lockedBinding struct {
	mu sync.Mutex
	binding
}

// Hit implements Placer.
func (p *SyncMapEntryMutex) Hit(key string) (*lockedBinding, bool) {
	v, ok := p.m.Load(key)
	if !ok {
		return nil, false
	}
	b := v.(*lockedBinding)
	now := p.clk.now()
	b.mu.Lock()
	if !b.live(now) {
		b.mu.Unlock()
		return nil, false
	}
	b.leases++
	b.mu.Unlock()
	return b, true
}

// Release implements Placer.
func (p *SyncMapEntryMutex) Release(b *lockedBinding) {
	now := p.clk.now()
	b.mu.Lock()
	if b.leases--; b.leases == 0 {
		b.deadline = now + ttl
	}
	b.mu.Unlock()
}

// Bind implements Placer.
func (p *SyncMapEntryMutex) Bind(key string, w Worker) (*lockedBinding, error) {
	cell := p.g.cell(w)
	b := &lockedBinding{binding: binding{target: w, gen: cell.Load(), genCell: cell, leases: 1,
		deadline: p.clk.now() + ttl}}
	if _, loaded := p.m.LoadOrStore(key, b); loaded {
		return nil, errBound
	}
	return b, nil
}

// Remove implements Placer.
func (p *SyncMapEntryMutex) Remove(key string) { p.m.Delete(key) }

// Close implements Placer.
func (p *SyncMapEntryMutex) Close() { p.clk.close() }

// Floor is the floor: a bare concurrent-map load plus the atomic updates a
// lease needs (count, and the idle deadline at zero), with no protocol at
// all: no expiry, generation, capacity or reuse checks.
type Floor struct {
	m   sync.Map
	clk clock
}

// NewFloor returns an empty Floor on the shared coarse clock.
func NewFloor() *Floor { return &Floor{clk: newClock(false)} }

type floorBinding struct {
	target   Worker
	leases   atomic.Int64
	deadline atomic.Int64
}

// Hit implements Placer.
func (p *Floor) Hit(key string) (*floorBinding, bool) {
	v, ok := p.m.Load(key)
	if !ok {
		return nil, false
	}
	b := v.(*floorBinding)
	b.leases.Add(1)
	return b, true
}

// Release implements Placer.
func (p *Floor) Release(b *floorBinding) {
	if b.leases.Add(-1) == 0 {
		b.deadline.Store(p.clk.now() + ttl)
	}
}

// Bind implements Placer.
func (p *Floor) Bind(key string, w Worker) (*floorBinding, error) {
	b := &floorBinding{target: w}
	b.leases.Store(1)
	if _, loaded := p.m.LoadOrStore(key, b); loaded {
		return nil, errBound
	}
	return b, nil
}

// Remove implements Placer.
func (p *Floor) Remove(key string) { p.m.Delete(key) }

// Close implements Placer.
func (p *Floor) Close() { p.clk.close() }
