package benchmarks

import (
	"flag"
	"fmt"
	"runtime"
	"sort"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/placementlab/placement/impl/placement"
	"github.com/placementlab/placement/model"
)

var full = flag.Bool("full", false, "run the full suite: growth and memory up to 1e6 bindings, the full model config")

// contender runs the generic benchmarks for one Placer implementation.
type contender struct {
	name string
	// variant marks a contender that is another one in a non-default
	// configuration or on another clock: same data structure, so Memory
	// skips it.
	variant bool
	hot     func(b *testing.B, n int, mode string)
	cold    func(b *testing.B, n int)
	mem     func(n int) (bytes float64)
	// check runs TestContenders on a fresh instance.
	check func(t *testing.T)
}

func keys(n int) []string { return Keys(n) }

// requestKeys: see RequestKeys.
func requestKeys(ks []string) []string { return RequestKeys(ks) }

func populate[L any](p Placer[L], ks []string) {
	for i, k := range ks {
		l, err := p.Bind(k, Worker{ID: uint64(i % 64)})
		if err != nil {
			panic(fmt.Sprintf("bind %s: %v", k, err))
		}
		p.Release(l)
	}
}

// live binds n keys in p and returns fresh copies of them for lookups
// (requestKeys) with a visiting order, after collecting the setup's garbage
// so the timed loop does not pay for it.
func live[L any](p Placer[L], n int) ([]string, []int32) {
	ks := keys(n)
	populate(p, ks)
	ks, ord := requestKeys(ks), order(n, 1<<16)
	runtime.GC()
	return ks, ord
}

func order(n, m int) []int32 { return Order(n, m) }

func newContender[L any](name string, variant bool, mk func(n int) Placer[L]) contender {
	return contender{
		name:    name,
		variant: variant,
		hot: func(b *testing.B, n int, mode string) {
			p := mk(n + 16)
			defer p.Close()
			ks, ord := live(p, n)
			b.ReportAllocs()
			b.ResetTimer()
			switch mode {
			case "single":
				for i := 0; i < b.N; i++ {
					l, ok := p.Hit(ks[ord[i&(1<<16-1)]])
					if !ok {
						b.Fatal("miss")
					}
					p.Release(l)
				}
			case "parallel-distinct", "parallel-shared":
				var next atomic.Int64
				b.RunParallel(func(pb *testing.PB) {
					i := int(next.Add(1)) * 7919
					for pb.Next() {
						k := ks[0]
						if mode == "parallel-distinct" {
							k = ks[ord[i&(1<<16-1)]]
						}
						l, ok := p.Hit(k)
						if !ok {
							b.Error("miss")
							return
						}
						p.Release(l)
						i++
					}
				})
			}
		},
		cold: func(b *testing.B, n int) {
			p := mk(n + 1024)
			defer p.Close()
			populate(p, keys(n))
			fresh := make([]string, 1024)
			for i := range fresh {
				fresh[i] = "cold-" + strconv.Itoa(i)
			}
			b.ReportAllocs()
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				k := fresh[i&1023]
				l, err := p.Bind(k, Worker{ID: 1})
				if err != nil {
					b.Fatal(err)
				}
				p.Release(l)
				p.Remove(k)
			}
		},
		check: func(t *testing.T) { check(t, mk(16)) },
		mem: func(n int) float64 {
			ks := keys(n)
			runtime.GC()
			var before, after runtime.MemStats
			runtime.ReadMemStats(&before)
			p := mk(n + 16)
			populate(p, ks)
			runtime.GC()
			runtime.ReadMemStats(&after)
			bytes := float64(after.HeapAlloc) - float64(before.HeapAlloc)
			if _, ok := any(p).(*Coordinator); ok {
				for _, k := range ks { // the coordinator copies keys; count only its own bytes
					bytes -= float64(len(k))
				}
			}
			runtime.KeepAlive(p)
			p.Close()
			return bytes / float64(n)
		},
	}
}

// contenders: each in its default configuration, then the variants. The
// coordinator's default is Config.Clock nil (its runtime clock, whichever
// that is); coordinator-manual is the same on a ManualClock. The baselines
// read the shared coarse clock (one atomic load, advanced by a ticker);
// mutex-now is the mutex map calling time.Since on every check.
func contenders() []contender {
	return []contender{
		newContender("coordinator", false, func(n int) Placer[placement.Lease[Worker]] { return NewCoordinator(n) }),
		newContender("coordinator-manual", true, func(n int) Placer[placement.Lease[Worker]] { return NewManualCoordinator(n) }),
		newContender("floor", false, func(int) Placer[*floorBinding] { return NewFloor() }),
		newContender("mutex", false, func(int) Placer[*binding] { return NewMutexMap() }),
		newContender("mutex-now", true, func(int) Placer[*binding] { return NewMutexMapWall() }),
		newContender("sharded", false, func(int) Placer[*shardedBinding] { return NewShardedMap() }),
		newContender("syncmap", false, func(int) Placer[*lockedBinding] { return NewSyncMapEntryMutex() }),
	}
}

// BenchmarkHot: a hit on a live binding, then its release.
func BenchmarkHot(b *testing.B) {
	for _, mode := range []string{"single", "parallel-distinct", "parallel-shared"} {
		for _, c := range contenders() {
			b.Run(mode+"/"+c.name, func(b *testing.B) { c.hot(b, 1024, mode) })
		}
	}
}

// BenchmarkCold: reserve, dispatch, accept, release (and remove, so the
// key is fresh next time).
func BenchmarkCold(b *testing.B) {
	for _, c := range contenders() {
		b.Run(c.name, func(b *testing.B) { c.cold(b, 1024) })
	}
}

// BenchmarkAmbiguousResolve: reserve, dispatch, Ambiguous (quarantine),
// Resolve Accepted, then a hit and its release.
func BenchmarkAmbiguousResolve(b *testing.B) {
	p := NewCoordinator(2048)
	defer p.Close()
	fresh := keys(1024)
	w := Worker{ID: 1}
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		k := fresh[i&1023]
		a, _ := p.C.TryAcquire(k)
		d, err := a.Reservation.BeginDispatch(w, 1)
		if err != nil {
			b.Fatal(err)
		}
		_, _ = d.Complete(placement.Ambiguous)
		if err := p.C.Resolve(k, d.Attempt(), 1, placement.ResolveAccepted); err != nil {
			b.Fatal(err)
		}
		l, ok := p.Hit(k)
		if !ok {
			b.Fatal("miss after resolve")
		}
		p.Release(l)
		p.Remove(k)
	}
}

func sizes() []int {
	if *full {
		return []int{1e3, 1e4, 1e5, 1e6}
	}
	return []int{1e3, 1e4, 1e5}
}

// BenchmarkGrowth: the hot path (one goroutine, and in parallel on
// distinct keys) and the cold path with 1e3 .. 1e6 live bindings.
func BenchmarkGrowth(b *testing.B) {
	for _, path := range []string{"hot", "hot-parallel", "cold"} {
		for _, n := range sizes() {
			for _, c := range contenders() {
				b.Run(fmt.Sprintf("%s/n=%d/%s", path, n, c.name), func(b *testing.B) {
					switch path {
					case "hot":
						c.hot(b, n, "single")
					case "hot-parallel":
						c.hot(b, n, "parallel-distinct")
					default:
						c.cold(b, n)
					}
				})
			}
		}
	}
}

// scalingProcs: GOMAXPROCS 1 and 2, then every power of two the machine
// has cores for, and its core count.
func scalingProcs() []int {
	ps := []int{1, 2}
	for p := 4; p < runtime.NumCPU(); p *= 2 {
		ps = append(ps, p)
	}
	if n := runtime.NumCPU(); n > 2 {
		ps = append(ps, n)
	}
	return ps
}

// BenchmarkScaling: the hot path (hit and release on 1,024 live bindings)
// in parallel on distinct keys with GOMAXPROCS set to procs (RunParallel
// runs one goroutine per proc), restored afterwards. benchtable reports
// each contender's throughput as a ratio to its own procs=1 figure.
func BenchmarkScaling(b *testing.B) {
	for _, procs := range scalingProcs() {
		for _, c := range contenders() {
			b.Run(fmt.Sprintf("procs=%d/%s", procs, c.name), func(b *testing.B) {
				defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(procs))
				c.hot(b, 1024, "parallel-distinct")
			})
		}
	}
}

// BenchmarkMemory: heap bytes per live binding (excluding key bytes).
func BenchmarkMemory(b *testing.B) {
	n := 1e6
	if !*full {
		n = 1e5
	}
	for _, c := range contenders() {
		if c.variant {
			continue
		}
		b.Run(fmt.Sprintf("n=%d/%s", int(n), c.name), func(b *testing.B) {
			var per float64
			for i := 0; i < b.N; i++ {
				per = c.mem(int(n))
			}
			b.ReportMetric(per, "B/binding")
			b.ReportMetric(0, "ns/op")
		})
	}
}

// BenchmarkReaper: hot-path latency percentiles with a sweep running over
// the whole table in a loop, against the same without sweeping. It runs the
// coordinator on a manual clock, where each AdvanceBy sweeps the table (the
// default configuration's reaper sweeps every 30 s here, too seldom to
// measure).
func BenchmarkReaper(b *testing.B) {
	n := int(1e6)
	if !*full {
		n = int(1e5)
	}
	for _, sweeping := range []bool{false, true} {
		name := "idle"
		if sweeping {
			name = "sweeping"
		}
		b.Run(fmt.Sprintf("n=%d/%s", n, name), func(b *testing.B) {
			p := NewManualCoordinator(n + 16)
			defer p.Close()
			ks, ord := live(p, n)
			stop := make(chan struct{})
			var wg sync.WaitGroup
			var sweeps atomic.Int64
			if sweeping {
				wg.Add(1)
				go func() {
					defer wg.Done()
					for {
						select {
						case <-stop:
							return
						default:
							_ = p.Clk.AdvanceBy(time.Nanosecond)
							sweeps.Add(1)
						}
					}
				}()
			}
			lat := make([]int64, 0, b.N)
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				t0 := time.Now()
				l, ok := p.Hit(ks[ord[i&(1<<16-1)]])
				if !ok {
					b.Fatal("miss")
				}
				p.Release(l)
				lat = append(lat, int64(time.Since(t0)))
			}
			b.StopTimer()
			close(stop)
			wg.Wait()
			sort.Slice(lat, func(i, j int) bool { return lat[i] < lat[j] })
			b.ReportMetric(float64(lat[len(lat)/2]), "p50-ns")
			b.ReportMetric(float64(lat[len(lat)*99/100]), "p99-ns")
			if sweeping {
				b.ReportMetric(float64(sweeps.Load()), "sweeps")
			}
		})
	}
}

// BenchmarkExplorer: the model explorer's states per second on a committed
// TLC config (MCLiveness.cfg; MCPlacement.cfg with -full).
func BenchmarkExplorer(b *testing.B) {
	cfg := "../spec/tla/MCLiveness.cfg"
	if *full {
		cfg = "../spec/tla/MCPlacement.cfg"
	}
	c, err := model.ReadTLCConfig(cfg)
	if err != nil {
		b.Fatal(err)
	}
	m, err := c.Load()
	if err != nil {
		b.Fatal(err)
	}
	opts, err := model.OptionsFor(c)
	if err != nil {
		b.Fatal(err)
	}
	opts.Liveness = nil
	var rate float64
	for i := 0; i < b.N; i++ {
		rep, err := m.Explore(opts)
		if err != nil {
			b.Fatal(err)
		}
		rate = rep.StatesPerSecond()
	}
	b.ReportMetric(rate, "states/s")
}
