package benchmarks

import (
	"context"
	"fmt"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/placementlab/placement/impl/claims"
	"github.com/placementlab/placement/impl/claims/etcdstore"
	"github.com/placementlab/placement/impl/claims/etcdstore/embedded"
	"github.com/placementlab/placement/impl/claims/memstore"
	"github.com/placementlab/placement/impl/placement"
	"github.com/placementlab/placement/impl/replica"
)

// claimWorkers are the workers every claims benchmark registers.
var claimWorkers = []string{"w1", "w2", "w3", "w4"}

// claimRig is a claim store with workers registered on it and replicas
// (impl/replica coordinators) on handles of their own, every part in its
// default configuration.
type claimRig struct {
	reps    []*replica.Coordinator
	closers []func()
}

// close closes the replicas, then the stores and clients (last made,
// first closed).
func (r *claimRig) close() {
	for _, c := range r.reps {
		_ = c.Close()
	}
	for i := len(r.closers) - 1; i >= 0; i-- {
		r.closers[i]()
	}
}

// newClaimRig registers claimWorkers through a handle open("workers")
// returns and starts n replicas, each on a handle of its own.
func newClaimRig(b *testing.B, n int, open func(name string) (claims.Store, func(), error)) *claimRig {
	b.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	r := &claimRig{}
	fail := func(err error) {
		r.close()
		b.Fatal(err)
	}
	ws, done, err := open("workers")
	if err != nil {
		fail(err)
	}
	r.closers = append(r.closers, done)
	for _, w := range claimWorkers {
		if _, err := ws.Register(ctx, w, "boot-1"); err != nil {
			fail(err)
		}
	}
	for i := range n {
		name := fmt.Sprintf("replica-%d", i)
		s, done, err := open(name)
		if err != nil {
			fail(err)
		}
		r.closers = append(r.closers, done)
		c, err := replica.New(ctx, replica.Config{Store: s, Name: name})
		if err != nil {
			fail(err)
		}
		r.reps = append(r.reps, c)
	}
	return r
}

// etcdOpener opens etcdstore handles on cl, each with a client of its own
// (as a replica process has), under one prefix, with the defaults.
func etcdOpener(cl *embedded.Cluster, prefix string) func(string) (claims.Store, func(), error) {
	return func(name string) (claims.Store, func(), error) {
		cli, err := cl.NewClient()
		if err != nil {
			return nil, nil, err
		}
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		s, err := etcdstore.New(ctx, cli, name, claims.Options{Prefix: prefix})
		if err != nil {
			_ = cli.Close()
			return nil, nil, err
		}
		return s, func() { _ = s.Shutdown(); _ = cli.Close() }, nil
	}
}

// memOpener opens handles of one in-memory backend (closed with the last
// closer run: the workers' handle, opened first).
func memOpener() func(string) (claims.Store, func(), error) {
	be := memstore.NewBackend(memstore.Config{})
	first := true
	return func(name string) (claims.Store, func(), error) {
		s := be.Open(name)
		if first {
			first = false
			return s, func() { _ = s.Shutdown(); _ = be.Close() }, nil
		}
		return s, func() { _ = s.Shutdown() }, nil
	}
}

// benchCoreHit measures the core's hit on a fixed key (Acquire hits, Done
// releases): the baseline a replica's cached turn is divided by (×core).
// It returns the figure in ns per turn.
func benchCoreHit(ctx context.Context, b *testing.B, key string) float64 {
	b.Helper()
	c, err := placement.New(placement.Config[claims.Target]{})
	if err != nil {
		b.Fatal(err)
	}
	defer c.Close()
	w := claims.Target{Worker: "w1"}
	a, err := c.Acquire(ctx, key)
	if err != nil {
		b.Fatal(err)
	}
	d, err := a.Reservation.BeginDispatch(w, c.Generation(w))
	if err != nil {
		b.Fatal(err)
	}
	if _, err := d.Complete(placement.Accepted); err != nil {
		b.Fatal(err)
	}
	a.Done()
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		a, err := c.Acquire(ctx, key)
		if err != nil || !a.Hit() {
			b.Fatal("no hit", err)
		}
		a.Done()
	}
	b.StopTimer()
	return float64(b.Elapsed().Nanoseconds()) / float64(b.N)
}

// benchCachedTurn binds key through c, then measures its cached turns
// (Start, a hit, Done), failing if one calls the store; with coreNs (the
// core's hit in the same run) it reports the ratio as ×core.
func benchCachedTurn(ctx context.Context, b *testing.B, c *replica.Coordinator, key string, coreNs float64) {
	b.Helper()
	t, err := c.Start(ctx, key, nil)
	if err != nil {
		b.Fatal(err)
	}
	if err := t.Complete(placement.Accepted); err != nil {
		b.Fatal(err)
	}
	t.Done(false)
	calls := c.Stats().StoreCalls
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		t, err := c.Start(ctx, key, nil)
		if err != nil || !t.Hit() {
			b.Fatal("no hit", err)
		}
		t.Done(false)
	}
	b.StopTimer()
	if n := c.Stats().StoreCalls - calls; n != 0 {
		b.Fatalf("%d store calls in %d cached turns, want none", n, b.N)
	}
	if ns := float64(b.Elapsed().Nanoseconds()) / float64(b.N); coreNs > 0 {
		b.ReportMetric(ns/coreNs, "×core")
	}
}

// firstTurn runs a new session's first and final turn on c: Start (the
// claim created before the dispatch), Complete(Accepted) (the replica's
// hold), Done(true) (the terminal close).
func firstTurn(ctx context.Context, c *replica.Coordinator, key string) error {
	t, err := c.Start(ctx, key, nil)
	if err != nil {
		return err
	}
	defer t.Done(true)
	if t.Hit() {
		return fmt.Errorf("session %q: a hit on its first turn", key)
	}
	return t.Complete(placement.Accepted)
}

// BenchmarkClaims measures the replicated coordinator (impl/replica) over
// the embedded etcd (one member on loopback, without fsync: the embedded
// package's default), every part in the configuration a user gets without
// asking (the replica's and etcdstore's defaults, claims' default idle
// TTL, a client per replica), each beside its baseline in the same run:
//
//   - cached-turn/core: a later turn on the local core alone
//     (impl/placement's Acquire hit, then Done), what a single router does;
//   - cached-turn/replica: a later turn on a session the replica holds
//     (Start hits, Done releases). It must make no store round trip (the
//     benchmark fails if the replica's store-call count moves); ×core is
//     its ns/op over cached-turn/core's;
//   - first-turn/memstore: a new session's only turn (Start: CreateOrGet
//     writes the claim; Complete(Accepted): Hold; Done(true): Close) on
//     the in-memory store;
//   - first-turn/etcd: the same on etcd; ×memstore is the network and raft
//     cost as a ratio;
//   - parallel/replicas=3: the same one-turn sessions started by 3
//     replicas, 4 at a time each: claims/s is the sustained rate.
//
// The embedded server is started once per run of this function and closed
// at its end. benchmarks/cmd/claimsfig reports the same figures with
// distributions, and the agreement time after a member restart.
func BenchmarkClaims(b *testing.B) {
	sctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	cl, err := embedded.Start(sctx, embedded.Config{Members: 1})
	cancel()
	if err != nil {
		b.Fatal(err)
	}
	defer func() {
		if err := cl.Close(); err != nil {
			b.Error(err)
		}
	}()
	ctx := context.Background()
	runSeq := 0
	prefix := func() string {
		runSeq++
		return fmt.Sprintf("bench-%d-%d/", time.Now().UnixNano(), runSeq)
	}

	var coreNs float64
	b.Run("cached-turn/core", func(b *testing.B) {
		coreNs = benchCoreHit(ctx, b, "session-cached")
	})
	b.Run("cached-turn/replica", func(b *testing.B) {
		r := newClaimRig(b, 1, etcdOpener(cl, prefix()))
		defer r.close()
		c := r.reps[0]
		key := "session-cached"
		benchCachedTurn(ctx, b, c, key, coreNs)
	})

	var memNs float64
	first := func(b *testing.B, open func(string) (claims.Store, func(), error)) float64 {
		r := newClaimRig(b, 1, open)
		defer r.close()
		c := r.reps[0]
		keyPrefix := fmt.Sprintf("first-%d-", time.Now().UnixNano())
		calls := c.Stats().StoreCalls
		b.ReportAllocs()
		b.ResetTimer()
		for i := 0; i < b.N; i++ {
			if err := firstTurn(ctx, c, keyPrefix+strconv.Itoa(i)); err != nil {
				b.Fatal(err)
			}
		}
		b.StopTimer()
		b.ReportMetric(float64(c.Stats().StoreCalls-calls)/float64(b.N), "store-calls/op")
		return float64(b.Elapsed().Nanoseconds()) / float64(b.N)
	}
	b.Run("first-turn/memstore", func(b *testing.B) { memNs = first(b, memOpener()) })
	b.Run("first-turn/etcd", func(b *testing.B) {
		if ns := first(b, etcdOpener(cl, prefix())); memNs > 0 {
			b.ReportMetric(ns/memNs, "×memstore")
		}
	})

	const replicas, perReplica = 3, 4
	b.Run(fmt.Sprintf("parallel/replicas=%d", replicas), func(b *testing.B) {
		r := newClaimRig(b, replicas, etcdOpener(cl, prefix()))
		defer r.close()
		keyPrefix := fmt.Sprintf("par-%d-", time.Now().UnixNano())
		var next atomic.Int64
		var wg sync.WaitGroup
		errs := make(chan error, replicas*perReplica)
		b.ResetTimer()
		for _, c := range r.reps {
			for range perReplica {
				wg.Add(1)
				go func() {
					defer wg.Done()
					for {
						i := next.Add(1) - 1
						if i >= int64(b.N) {
							return
						}
						if err := firstTurn(ctx, c, keyPrefix+strconv.FormatInt(i, 10)); err != nil {
							errs <- err
							return
						}
					}
				}()
			}
		}
		wg.Wait()
		b.StopTimer()
		close(errs)
		for err := range errs {
			b.Fatal(err)
		}
		b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "claims/s")
	})
}
