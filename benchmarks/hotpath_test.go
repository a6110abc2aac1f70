package benchmarks

import (
	"context"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/placementlab/placement/impl/placement"
)

type worker struct {
	ID   uint64
	Rank int32
}

func keys(n int) []string {
	ks := make([]string, n)
	for i := range ks {
		ks[i] = "session-" + strconv.Itoa(i)
	}
	return ks
}

func boundCoordinator(b *testing.B, n int) (*placement.Coordinator[worker], []string) {
	b.Helper()
	c, err := placement.New[worker](placement.Config{
		IdleTTL: time.Hour, InitTimeout: time.Minute, MaxEntries: n + 1, MaxKeyBytes: 64, Clock: placement.NewManualClock(0),
	})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { c.Close() })
	ks := keys(n)
	for i, k := range ks {
		a, err := c.TryAcquire(k)
		if err != nil {
			b.Fatal(err)
		}
		l, err := a.Reservation.CommitAccepted(worker{ID: uint64(i % 64)}, 1)
		if err != nil {
			b.Fatal(err)
		}
		l.Release()
	}
	return c, ks
}

// BenchmarkHotPath: Acquire that hits a live binding, then Release.
func BenchmarkHotPath(b *testing.B) {
	c, ks := boundCoordinator(b, 1024)
	ctx := context.Background()
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		a, err := c.Acquire(ctx, ks[i&1023])
		if err != nil || !a.Hit() {
			b.Fatal("miss", err)
		}
		a.Lease.Release()
	}
}

// BenchmarkHotPathParallel: the same on every P, distinct keys per goroutine.
func BenchmarkHotPathParallel(b *testing.B) {
	c, ks := boundCoordinator(b, 1024)
	ctx := context.Background()
	var next atomic.Int64
	b.ReportAllocs()
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		i := int(next.Add(1)) * 97
		for pb.Next() {
			a, err := c.Acquire(ctx, ks[i&1023])
			if err != nil || !a.Hit() {
				b.Error("miss", err)
				return
			}
			a.Lease.Release()
			i++
		}
	})
}

// BenchmarkColdPath: reserve, dispatch, accept, then invalidate (the key is
// absent again for the next iteration).
func BenchmarkColdPath(b *testing.B) {
	c, err := placement.New[worker](placement.Config{
		IdleTTL: time.Hour, InitTimeout: time.Minute, MaxEntries: 2048, MaxKeyBytes: 64, Clock: placement.NewManualClock(0),
	})
	if err != nil {
		b.Fatal(err)
	}
	defer c.Close()
	ks := keys(1024)
	w := worker{ID: 1}
	ctx := context.Background()
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		a, err := c.Acquire(ctx, ks[i&1023])
		if err != nil || a.Reservation == nil {
			b.Fatal("no reservation", err)
		}
		d, err := a.Reservation.BeginDispatch(w, 1)
		if err != nil {
			b.Fatal(err)
		}
		l, err := d.Complete(placement.Accepted)
		if err != nil {
			b.Fatal(err)
		}
		l.Invalidate()
	}
}

// The table: why sync.Map. Its loads take no lock; a map behind a mutex
// (or even a read lock) serializes every hit on one cache line.
type table interface {
	load(string) (*int64, bool)
}

type syncMapTable struct{ m sync.Map }

func (t *syncMapTable) load(k string) (*int64, bool) {
	v, ok := t.m.Load(k)
	if !ok {
		return nil, false
	}
	return v.(*int64), true
}

type rwMutexTable struct {
	mu sync.RWMutex
	m  map[string]*int64
}

func (t *rwMutexTable) load(k string) (*int64, bool) {
	t.mu.RLock()
	v, ok := t.m[k]
	t.mu.RUnlock()
	return v, ok
}

type mutexTable struct {
	mu sync.Mutex
	m  map[string]*int64
}

func (t *mutexTable) load(k string) (*int64, bool) {
	t.mu.Lock()
	v, ok := t.m[k]
	t.mu.Unlock()
	return v, ok
}

func BenchmarkTableLoad(b *testing.B) {
	ks := keys(1 << 16)
	sm := &syncMapTable{}
	rw := &rwMutexTable{m: map[string]*int64{}}
	mu := &mutexTable{m: map[string]*int64{}}
	for _, k := range ks {
		v := new(int64)
		sm.m.Store(k, v)
		rw.m[k] = v
		mu.m[k] = v
	}
	for _, tc := range []struct {
		name string
		t    table
	}{{"syncMap", sm}, {"rwMutexMap", rw}, {"mutexMap", mu}} {
		b.Run(tc.name, func(b *testing.B) {
			var next atomic.Int64
			b.ReportAllocs()
			b.RunParallel(func(pb *testing.PB) {
				i := int(next.Add(1)) * 7919
				for pb.Next() {
					if _, ok := tc.t.load(ks[i&(1<<16-1)]); !ok {
						b.Error("missing")
						return
					}
					i++
				}
			})
		})
	}
}
