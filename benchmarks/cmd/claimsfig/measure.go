package main

import (
	"context"
	"fmt"
	"runtime"
	"sort"
	"strconv"
	"sync"
	"time"

	"github.com/placementlab/placement/impl/claims"
	"github.com/placementlab/placement/impl/claims/etcdstore/embedded"
	"github.com/placementlab/placement/impl/placement"
	"github.com/placementlab/placement/impl/replica"
)

// latencies is one series of first-turn times.
type latencies struct {
	name       string
	start      []time.Duration
	whole      []time.Duration
	storeCalls float64 // per turn, on the timed replica
}

// measureFirstTurns times n first turns of each kind, interleaved so that
// every kind sees the same machine: a new session on etcd (the claim
// written) and on the in-memory store, both closed by their turn, and a
// session whose claim another replica wrote (adopted; left open).
func measureFirstTurns(ctx context.Context, cl *embedded.Cluster, n int) ([]*latencies, error) {
	etcdNew, err := newRig(ctx, 1, etcdOpener(cl, "first-new/"))
	if err != nil {
		return nil, err
	}
	defer etcdNew.Close()
	memNew, err := newRig(ctx, 1, memOpener())
	if err != nil {
		return nil, err
	}
	defer memNew.Close()
	adopt, err := newRig(ctx, 2, etcdOpener(cl, "first-adopt/"))
	if err != nil {
		return nil, err
	}
	defer adopt.Close()

	series := []*latencies{
		{name: "etcd, new session"},
		{name: "etcd, claim exists (another replica's)"},
		{name: "memstore, new session"},
	}
	timed := []*replica.Coordinator{etcdNew.reps[0], adopt.reps[1], memNew.reps[0]}
	calls := make([]uint64, len(timed))
	for i, c := range timed {
		calls[i] = c.Stats().StoreCalls
	}
	for i := range n {
		key := "s" + strconv.Itoa(i)
		tt, err := firstTurn(ctx, etcdNew.reps[0], key, true)
		if err != nil {
			return nil, fmt.Errorf("etcd first turn: %w", err)
		}
		series[0].add(tt)
		if _, err := firstTurn(ctx, adopt.reps[0], key, false); err != nil {
			return nil, fmt.Errorf("etcd first turn (the claim's writer): %w", err)
		}
		if tt, err = firstTurn(ctx, adopt.reps[1], key, false); err != nil {
			return nil, fmt.Errorf("etcd first turn (adopting): %w", err)
		}
		series[1].add(tt)
		if tt, err = firstTurn(ctx, memNew.reps[0], key, true); err != nil {
			return nil, fmt.Errorf("memstore first turn: %w", err)
		}
		series[2].add(tt)
	}
	for i, c := range timed {
		series[i].storeCalls = float64(c.Stats().StoreCalls-calls[i]) / float64(n)
	}
	return series, nil
}

func (l *latencies) add(t turnTimes) {
	l.start = append(l.start, t.start)
	l.whole = append(l.whole, t.whole)
}

// cachedResult is the cached-turn figure: ns per turn in each round, of the
// replica and of the core alone.
type cachedResult struct {
	ops        int
	core, repl []float64
	// storeCalls is the replica's store calls during its timed rounds
	// (must be 0).
	storeCalls uint64
	// coreAllocs and replAllocs are the heap allocations per turn (the
	// whole process's over the rounds, so a little of the background's).
	coreAllocs, replAllocs float64
}

// measureCached times rounds of ops later turns on one session, the
// replica's (over cl) and the core's alone, alternating.
func measureCached(ctx context.Context, cl *embedded.Cluster, ops, rounds int) (*cachedResult, error) {
	r, err := newRig(ctx, 1, etcdOpener(cl, "cached/"))
	if err != nil {
		return nil, err
	}
	defer r.Close()
	c := r.reps[0]
	const key = "session-cached"
	if _, err := firstTurn(ctx, c, key, false); err != nil {
		return nil, err
	}
	core, err := placement.New(placement.Config[claims.Target]{})
	if err != nil {
		return nil, err
	}
	defer core.Close()
	a, err := core.Acquire(ctx, key)
	if err != nil {
		return nil, err
	}
	w := claims.Target{Worker: "w1"}
	d, err := a.Reservation.BeginDispatch(w, core.Generation(w))
	if err != nil {
		return nil, err
	}
	if _, err := d.Complete(placement.Accepted); err != nil {
		return nil, err
	}
	a.Done()

	res := &cachedResult{ops: ops}
	var failed error
	calls := c.Stats().StoreCalls
	var coreMallocs, replMallocs uint64
	var ms runtime.MemStats
	mallocs := func() uint64 {
		runtime.ReadMemStats(&ms)
		return ms.Mallocs
	}
	for range rounds {
		runtime.GC()
		m0 := mallocs()
		t0 := time.Now()
		for range ops {
			a, err := core.Acquire(ctx, key)
			if err != nil || !a.Hit() {
				return nil, fmt.Errorf("core: no hit: %v", err)
			}
			a.Done()
		}
		res.core = append(res.core, float64(time.Since(t0).Nanoseconds())/float64(ops))
		coreMallocs += mallocs() - m0
		runtime.GC()
		m0 = mallocs()
		t0 = time.Now()
		for range ops {
			t, err := c.Start(ctx, key, nil)
			if err != nil || !t.Hit() {
				failed = fmt.Errorf("replica: no hit: %v", err)
				t.Done(false) // a no-op on the zero Turn Start returns with an error
				break
			}
			t.Done(false)
		}
		if failed != nil {
			return nil, failed
		}
		res.repl = append(res.repl, float64(time.Since(t0).Nanoseconds())/float64(ops))
		replMallocs += mallocs() - m0
	}
	res.storeCalls = c.Stats().StoreCalls - calls
	res.coreAllocs = float64(coreMallocs) / float64(ops*rounds)
	res.replAllocs = float64(replMallocs) / float64(ops*rounds)
	return res, nil
}

// rateResult is the claims-per-second figure of one replica count.
type rateResult struct {
	store    string
	replicas int
	inFlight int // turns in flight per replica
	claims   int
	errors   int
	elapsed  time.Duration
	whole    []time.Duration
	// cpu is the CPU time the whole process (etcd's members, clients
	// and the replicas) used meanwhile; 0 where it cannot be read.
	cpu time.Duration
}

func (r *rateResult) perSecond() float64 { return float64(r.claims) / r.elapsed.Seconds() }

// measureRate runs one-turn sessions (first turn, accepted, final) on
// replicas replicas, inFlight at a time on each, for d, and counts them.
func measureRate(ctx context.Context, open opener, store string, replicas, inFlight int, d time.Duration) (*rateResult, error) {
	r, err := newRig(ctx, replicas, open)
	if err != nil {
		return nil, err
	}
	defer r.Close()
	res := &rateResult{store: store, replicas: replicas, inFlight: inFlight}
	var mu sync.Mutex
	var wg sync.WaitGroup
	var firstErr error
	cpu0, cpuOK := processCPU()
	t0 := time.Now()
	deadline := t0.Add(d)
	for ri, c := range r.reps {
		for g := range inFlight {
			wg.Add(1)
			go func() {
				defer wg.Done()
				var ws []time.Duration
				n, errs := 0, 0
				var ferr error
				for i := 0; time.Now().Before(deadline) && ctx.Err() == nil; i++ {
					key := fmt.Sprintf("r%d-g%d-%d", ri, g, i)
					tt, err := firstTurn(ctx, c, key, true)
					if err != nil {
						errs++
						if ferr == nil {
							ferr = err
						}
						continue
					}
					n++
					ws = append(ws, tt.whole)
				}
				mu.Lock()
				res.claims += n
				res.errors += errs
				res.whole = append(res.whole, ws...)
				if firstErr == nil {
					firstErr = ferr
				}
				mu.Unlock()
			}()
		}
	}
	wg.Wait()
	res.elapsed = time.Since(t0)
	if cpu1, ok := processCPU(); ok && cpuOK {
		res.cpu = cpu1 - cpu0
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if res.claims == 0 {
		return nil, fmt.Errorf("no claim completed with %d replicas: %v", replicas, firstErr)
	}
	return res, nil
}

// quantile returns the q-quantile of ds (nearest rank; ds sorted in place).
func quantile(ds []time.Duration, q float64) time.Duration {
	if len(ds) == 0 {
		return 0
	}
	sort.Slice(ds, func(i, j int) bool { return ds[i] < ds[j] })
	i := int(q*float64(len(ds))+0.999999) - 1
	return ds[min(max(i, 0), len(ds)-1)]
}

// median returns the median of vs (sorted in place).
func median(vs []float64) float64 {
	if len(vs) == 0 {
		return 0
	}
	sort.Float64s(vs)
	if n := len(vs); n%2 == 0 {
		return (vs[n/2-1] + vs[n/2]) / 2
	}
	return vs[len(vs)/2]
}
