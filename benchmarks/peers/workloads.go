package peers

import (
	"errors"
	"fmt"
	"runtime"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/placementlab/placement/benchmarks"
)

// Workload is one of the measurements.
type Workload struct {
	// Name is the benchmark's name.
	Name string
	// Run measures c; a memory workload reports B/binding.
	Run func(b *testing.B, c Contender)
}

// Workloads are the table: the hot path at 1,024 and 100,000
// sessions, in parallel on distinct keys at 100,000, one shared key in
// parallel, a new session with 100,000 prefilled, and memory per binding at
// 100,000 (heap after GC, key bytes excluded). bigN is the 100,000
// (the smoke run passes a smaller figure).
func Workloads(bigN int) []Workload {
	return []Workload{
		{"Hot/n=1024", func(b *testing.B, c Contender) { c.Hot(b, 1024, "single") }},
		{fmt.Sprintf("Hot/n=%d", bigN), func(b *testing.B, c Contender) { c.Hot(b, bigN, "single") }},
		{fmt.Sprintf("HotParallel/n=%d", bigN), func(b *testing.B, c Contender) { c.Hot(b, bigN, "parallel-distinct") }},
		{"SharedKeyParallel", func(b *testing.B, c Contender) { c.Hot(b, 1024, "parallel-shared") }},
		{fmt.Sprintf("NewSession/n=%d", bigN), func(b *testing.B, c Contender) { c.Cold(b, bigN) }},
		{fmt.Sprintf("Memory/n=%d", bigN), func(b *testing.B, c Contender) {
			var per float64
			for i := 0; i < b.N; i++ {
				per = c.Mem(bigN)
			}
			b.ReportMetric(per, "B/binding")
			b.ReportMetric(0, "ns/op")
		}},
	}
}

// Contender is one library (or the core) behind benchmarks.Placer, with its
// lease type erased by closures.
type Contender struct {
	// Name is the contender's row name.
	Name string
	// Hot measures hit and release on n live bindings; mode is "single",
	// "parallel-distinct" or "parallel-shared".
	Hot func(b *testing.B, n int, mode string)
	// Cold measures bind, release and remove with n bindings prefilled.
	Cold func(b *testing.B, n int)
	// Mem returns heap bytes per live binding at n, key bytes excluded.
	Mem func(n int) float64
	// Check runs the behavioural check; nil error when it passes.
	Check func() error
}

// Contenders are the core in its default configuration and the peers.
func Contenders() []Contender {
	return []Contender{
		newContender("placement", func(n int) benchmarks.Placer[leaseOf] { return benchmarks.NewCoordinator(n) }, checkCoordinator),
		newContender("xsync-bare", func(n int) benchmarks.Placer[*Binding] { return NewXsyncBare(n, nil, time.Duration(benchmarks.TTL)) },
			checkManual(func(c Clock, ttl time.Duration) benchmarks.Placer[*Binding] { return NewXsyncBare(16, c, ttl) })),
		newContender("xsync-cache", func(n int) benchmarks.Placer[string] { return NewXsyncCache(n, nil, time.Duration(benchmarks.TTL)) },
			checkManual(func(c Clock, ttl time.Duration) benchmarks.Placer[string] { return NewXsyncCache(16, c, ttl) })),
		newContender("otter", func(n int) benchmarks.Placer[*Binding] { return NewOtter(n, nil, time.Duration(benchmarks.TTL)) },
			checkManual(func(c Clock, ttl time.Duration) benchmarks.Placer[*Binding] { return NewOtter(16, c, ttl) })),
		newContender("otter-coarse", func(n int) benchmarks.Placer[*Binding] { return NewOtterCoarse(n, time.Duration(benchmarks.TTL)) },
			checkReal(func(ttl time.Duration) benchmarks.Placer[*Binding] { return NewOtterCoarse(16, ttl) })),
		newContender("lru-expirable", func(n int) benchmarks.Placer[KeyedLease] { return NewLRU(n, time.Duration(benchmarks.TTL)) },
			checkReal(func(ttl time.Duration) benchmarks.Placer[KeyedLease] { return NewLRU(16, ttl) })),
		newContender("ristretto", func(n int) benchmarks.Placer[KeyedLease] { return NewRistretto(n, time.Duration(benchmarks.TTL)) },
			checkReal(func(ttl time.Duration) benchmarks.Placer[KeyedLease] { return NewRistretto(16, ttl) })),
	}
}

// Baseline is the contender every ratio is taken against.
const Baseline = "placement"

// Reference is the contender the core's targets are stated against.
const Reference = "xsync-bare"

func newContender[L any](name string, mk func(n int) benchmarks.Placer[L], check func() error) Contender {
	return Contender{
		Name: name,
		Hot: func(b *testing.B, n int, mode string) {
			p := mk(n + 16)
			defer p.Close()
			ks := benchmarks.Keys(n)
			populate(p, ks)
			ks, ord := benchmarks.RequestKeys(ks), benchmarks.Order(n, 1<<16)
			runtime.GC()
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
			default:
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
		Cold: func(b *testing.B, n int) {
			p := mk(n + 1024)
			defer p.Close()
			populate(p, benchmarks.Keys(n))
			fresh := make([]string, 1024)
			for i := range fresh {
				fresh[i] = "cold-" + strconv.Itoa(i)
			}
			runtime.GC()
			b.ReportAllocs()
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				k := fresh[i&1023]
				l, err := p.Bind(k, benchmarks.Worker{ID: 1})
				if err != nil {
					b.Fatal(err)
				}
				p.Release(l)
				p.Remove(k)
			}
		},
		Mem: func(n int) float64 {
			ks := benchmarks.Keys(n)
			// Let an earlier table's background goroutines (a closed
			// coordinator's reaper, a cache's cleaner) drop it first.
			runtime.GC()
			time.Sleep(20 * time.Millisecond)
			runtime.GC()
			var before, after runtime.MemStats
			runtime.ReadMemStats(&before)
			p := mk(n + 16)
			populate(p, ks)
			runtime.GC()
			runtime.ReadMemStats(&after)
			bytes := float64(after.HeapAlloc) - float64(before.HeapAlloc)
			if name == "placement" { // the coordinator copies keys; count only its own bytes
				for _, k := range ks {
					bytes -= float64(len(k))
				}
			}
			runtime.KeepAlive(p)
			runtime.KeepAlive(ks)
			p.Close()
			return bytes / float64(n)
		},
		Check: check,
	}
}

type leaseOf = placementLease

func populate[L any](p benchmarks.Placer[L], ks []string) {
	for i, k := range ks {
		l, err := p.Bind(k, benchmarks.Worker{ID: uint64(i % 64)})
		if err != nil {
			panic(fmt.Sprintf("bind %s: %v", k, err))
		}
		p.Release(l)
	}
}

// checkBasic: hit after bind, the lease count (a second bind refused while
// leased and after release while live), miss after remove, bind again after
// remove.
func checkBasic[L any](p benchmarks.Placer[L]) error {
	if _, ok := p.Hit("a"); ok {
		return errors.New("hit before bind")
	}
	l, err := p.Bind("a", benchmarks.Worker{ID: 7})
	if err != nil {
		return fmt.Errorf("bind: %v", err)
	}
	if _, err := p.Bind("a", benchmarks.Worker{ID: 8}); err == nil {
		return errors.New("second bind of a leased key accepted")
	}
	h, ok := p.Hit("a")
	if !ok {
		return errors.New("miss after bind")
	}
	p.Release(h)
	p.Release(l)
	if _, err := p.Bind("a", benchmarks.Worker{ID: 8}); err == nil {
		return errors.New("second bind of a live idle key accepted")
	}
	p.Remove("a")
	if _, ok := p.Hit("a"); ok {
		return errors.New("hit after remove")
	}
	l, err = p.Bind("a", benchmarks.Worker{ID: 9})
	if err != nil {
		return fmt.Errorf("bind after remove: %v", err)
	}
	p.Release(l)
	return nil
}

// checkIdle: a binding idle past the TTL misses; one hit within the TTL
// stays. advance moves the clock the contender reads by d.
func checkIdle[L any](p benchmarks.Placer[L], ttl time.Duration, advance func(time.Duration)) error {
	l, err := p.Bind("idle", benchmarks.Worker{ID: 1})
	if err != nil {
		return fmt.Errorf("bind: %v", err)
	}
	p.Release(l)
	advance(ttl / 4)
	h, ok := p.Hit("idle")
	if !ok {
		return errors.New("miss within the TTL")
	}
	p.Release(h)
	advance(ttl + ttl/2)
	if _, ok := p.Hit("idle"); ok {
		return fmt.Errorf("hit after %v idle with TTL %v", ttl+ttl/2, ttl)
	}
	return nil
}

// checkManual checks a contender that reads a Clock, on a ManualClock.
func checkManual[L any](mk func(Clock, time.Duration) benchmarks.Placer[L]) func() error {
	return func() error {
		clk := new(ManualClock)
		clk.Advance(time.Hour)
		p := mk(clk, time.Minute)
		defer p.Close()
		if err := checkBasic(p); err != nil {
			return err
		}
		return checkIdle(p, time.Minute, clk.Advance)
	}
}

// checkReal checks a contender that reads the real time (time.Now, or a
// coarse clock of its own) with a short TTL, sleeping.
func checkReal[L any](mk func(time.Duration) benchmarks.Placer[L]) func() error {
	return func() error {
		const ttl = 200 * time.Millisecond
		p := mk(ttl)
		defer p.Close()
		if err := checkBasic(p); err != nil {
			return err
		}
		return checkIdle(p, ttl, time.Sleep)
	}
}
