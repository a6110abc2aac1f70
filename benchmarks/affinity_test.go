package benchmarks

import (
	"context"
	"net/http"
	"strconv"
	"strings"
	"testing"

	"github.com/placementlab/placement/impl/affinity"
	"github.com/placementlab/placement/impl/claims"
	"github.com/placementlab/placement/impl/claims/etcdstore"
	"github.com/placementlab/placement/impl/claims/etcdstore/embedded"
	"github.com/placementlab/placement/impl/claims/memstore"
	"github.com/placementlab/placement/impl/placement"
	"github.com/placementlab/placement/impl/router"
)

// BenchmarkAffinity measures a later turn's hot path from the request's
// header to its lease and back, each in its default configuration:
//
//   - core: impl/placement's Acquire (a hit) and Done on a fixed key (the
//     session id read once): the core's hit alone, the baseline every
//     ×core metric divides by;
//   - core-header: the same with the key read from the header per request
//     with h.Get (which canonicalizes "X-Session-ID" into a new string:
//     one allocation), what a router on the core alone does the ordinary
//     way (the baseline of the figures before issue 28);
//   - affinity: impl/affinity's RequestFromHeader (validation, the
//     namespace's key), Start (the hit), Eligible over 8 ranked
//     candidates, Dispatch, Complete(Accepted) and Done;
//   - affinity-key: RequestFromHeader alone (the key's share of the cost);
//   - affinity-key-long: RequestFromHeader of a 100-byte id (hashed: too
//     long for the raw form);
//   - driver: the router kit's one call per request, impl/router's
//     Driver.Do in its default configuration (candidates: every rank of
//     every member, in-flight counts, the default picker), after
//     RequestFromHeader, with a transport that accepts at once.
func BenchmarkAffinity(b *testing.B) {
	h := http.Header{}
	h.Set("X-Session-ID", "0190c3a4-7d1e-7c2b-9a55-3f2b8e1d4c6a")
	ctx := context.Background()
	var coreNs float64
	ratio := func(b *testing.B) {
		b.StopTimer()
		if ns := float64(b.Elapsed().Nanoseconds()) / float64(b.N); coreNs > 0 {
			b.ReportMetric(ns/coreNs, "×core")
		}
	}
	coreHit := func(b *testing.B, key func() string) {
		type worker struct {
			id   string
			rank int
		}
		c, err := placement.New(placement.Config[worker]{})
		if err != nil {
			b.Fatal(err)
		}
		defer c.Close()
		w := worker{"w3", 1}
		a, err := c.Acquire(ctx, key())
		if err != nil {
			b.Fatal(err)
		}
		d, _ := a.Reservation.BeginDispatch(w, c.Generation(w))
		if _, err := d.Complete(placement.Accepted); err != nil {
			b.Fatal(err)
		}
		a.Done()
		b.ReportAllocs()
		b.ResetTimer()
		for i := 0; i < b.N; i++ {
			a, err := c.Acquire(ctx, key())
			if err != nil || !a.Hit() {
				b.Fatal("no hit", err)
			}
			a.Done()
		}
	}
	b.Run("hit/core", func(b *testing.B) {
		id := h.Get("X-Session-ID")
		coreHit(b, func() string { return id })
		b.StopTimer()
		coreNs = float64(b.Elapsed().Nanoseconds()) / float64(b.N)
	})
	b.Run("hit/core-header", func(b *testing.B) {
		coreHit(b, func() string { return h.Get("X-Session-ID") })
		ratio(b)
	})
	l, cands := layerRig(b, affinity.Config{})
	defer l.Close()
	ns := benchNS
	turn := func(b *testing.B, first bool) { layerTurn(b, l, cands, h, first, false) }
	turn(b, true)
	b.Run("hit/affinity", func(b *testing.B) {
		b.ReportAllocs()
		for i := 0; i < b.N; i++ {
			turn(b, false)
		}
		ratio(b)
	})
	b.Run("hit/driver", func(b *testing.B) {
		d, err := router.New(router.Config{Layer: l})
		if err != nil {
			b.Fatal(err)
		}
		relay := func() error { return nil }
		send := func(context.Context, router.Dispatch) (placement.Outcome, router.Relay, error) {
			return placement.Accepted, relay, nil
		}
		b.ReportAllocs()
		b.ResetTimer()
		for i := 0; i < b.N; i++ {
			req, err := l.RequestFromHeader(ns, h, affinity.PhaseDecode)
			if err != nil {
				b.Fatal(err)
			}
			res, err := d.Do(ctx, req, nil, send)
			if err != nil || !res.Hit {
				b.Fatal("no hit", err)
			}
		}
		ratio(b)
	})
	b.Run("hit/affinity-key", func(b *testing.B) {
		b.ReportAllocs()
		for i := 0; i < b.N; i++ {
			if _, err := l.RequestFromHeader(ns, h, affinity.PhaseDecode); err != nil {
				b.Fatal(err)
			}
		}
		ratio(b)
	})
	b.Run("hit/affinity-key-long", func(b *testing.B) {
		hl := http.Header{}
		hl.Set("X-Session-ID", strings.Repeat("0190c3a4-7d1e-7c2b", 5)+"-9a55-3f2b8e")
		b.ReportAllocs()
		for i := 0; i < b.N; i++ {
			if _, err := l.RequestFromHeader(ns, hl, affinity.PhaseDecode); err != nil {
				b.Fatal(err)
			}
		}
		ratio(b)
	})
}

// BenchmarkReplica measures impl/replica's cached turn (a later turn on a
// session the replica holds: Start hits, Done releases, no store round
// trip) on the in-memory claims store, beside the core's hit on a fixed
// key in the same run (cached-turn/core; ×core divides by it). It fails
// if the replica's store-call count moves. BenchmarkClaims measures the
// same turn on etcd.
func BenchmarkReplica(b *testing.B) {
	ctx := context.Background()
	var coreNs float64
	const key = "session-cached"
	b.Run("cached-turn/core", func(b *testing.B) {
		coreNs = benchCoreHit(ctx, b, key)
	})
	b.Run("cached-turn/replica", func(b *testing.B) {
		r := newClaimRig(b, 1, memOpener())
		defer r.close()
		c := r.reps[0]
		if err := firstTurn(ctx, c, "warm"); err != nil {
			b.Fatal(err)
		}
		benchCachedTurn(ctx, b, c, key, coreNs)
	})
}

// BenchmarkAffinityReplicas measures the layer over replicas (issue 26)
// against the layer over the local core, in the same run, each in its
// default configuration:
//
//   - hit/layer-core and hit/layer-replica: a later turn's whole path
//     (RequestFromHeader, Start, Eligible over 8 ranked candidates,
//     Dispatch, Complete, Done) on a layer over the local core, and on one
//     over a replica on the in-memory claims store (a cached hit: no store
//     round trip). The goal: the second at most 2x the first.
//   - first/layer-replica-etcd: a new session's first turn through the
//     layer over a replica on the embedded etcd (one member): the claim's
//     read and write before the dispatch, the hold after it, and the
//     final request's close.
func BenchmarkAffinityReplicas(b *testing.B) {
	ctx := context.Background()
	h := http.Header{}
	h.Set("X-Session-ID", "0190c3a4-7d1e-7c2b-9a55-3f2b8e1d4c6a")
	hit := func(b *testing.B, cfg affinity.Config) {
		l, cands := layerRig(b, cfg)
		defer l.Close()
		layerTurn(b, l, cands, h, true, false)
		b.ReportAllocs()
		b.ResetTimer()
		for i := 0; i < b.N; i++ {
			layerTurn(b, l, cands, h, false, false)
		}
	}
	b.Run("hit/layer-core", func(b *testing.B) { hit(b, affinity.Config{}) })
	b.Run("hit/layer-replica", func(b *testing.B) {
		mb := memstore.NewBackend(memstore.Config{})
		defer mb.Close()
		st := mb.Open("r1")
		defer st.Shutdown()
		hit(b, affinity.Config{Replicas: &affinity.Replicas{Store: st, Name: "r1"}})
	})
	b.Run("first/layer-replica-etcd", func(b *testing.B) {
		c, err := embedded.Start(ctx, embedded.Config{})
		if err != nil {
			b.Fatal(err)
		}
		defer c.Close()
		cli, err := c.NewClient()
		if err != nil {
			b.Fatal(err)
		}
		defer cli.Close()
		st, err := etcdstore.New(ctx, cli, "r1", claims.Options{})
		if err != nil {
			b.Fatal(err)
		}
		defer st.Shutdown()
		l, cands := layerRig(b, affinity.Config{Replicas: &affinity.Replicas{Store: st, Name: "r1"}})
		defer l.Close()
		hh := http.Header{}
		b.ReportAllocs()
		b.ResetTimer()
		for i := 0; i < b.N; i++ {
			hh.Set("X-Session-ID", "first-"+strconv.Itoa(i))
			layerTurn(b, l, cands, hh, true, true)
		}
	})
}

// benchNS is the benchmarks' trusted namespace.
var benchNS = affinity.Namespace{Model: "llama", Tenant: "acme"}

// layerRig is a layer of cfg with workers w0..w3 of two ranks each, and
// their eight ranked candidates.
func layerRig(b *testing.B, cfg affinity.Config) (*affinity.Layer, []affinity.Candidate) {
	b.Helper()
	l, err := affinity.New(cfg)
	if err != nil {
		b.Fatal(err)
	}
	var cands []affinity.Candidate
	for _, id := range []string{"w0", "w1", "w2", "w3"} {
		if _, err := l.Join(affinity.Worker{ID: id, Identity: "boot", Ranks: 2}); err != nil {
			b.Fatal(err)
		}
		cands = append(cands, affinity.Candidate{Target: affinity.Ranked(id, 0)}, affinity.Candidate{Target: affinity.Ranked(id, 1)})
	}
	return l, cands
}

// layerTurn is one request through the layer from its header to Done:
// RequestFromHeader, Start, Eligible, Dispatch (first: to w3/1, placing;
// otherwise the eligible binding, which must be a hit), Complete and Done.
func layerTurn(b *testing.B, l *affinity.Layer, cands []affinity.Candidate, h http.Header, first, final bool) {
	ctx := context.Background()
	req, err := l.RequestFromHeader(benchNS, h, affinity.PhaseDecode)
	if err != nil {
		b.Fatal(err)
	}
	req.Final = final
	t, err := l.Start(ctx, req)
	if err != nil {
		b.Fatal(err)
	}
	el, err := t.Eligible(cands, nil)
	if err != nil {
		b.Fatal(err)
	}
	target := el[0].Target
	if first {
		target = affinity.Ranked("w3", 1)
	}
	a, err := t.Dispatch(target)
	if err != nil || (!first && !a.Hit()) {
		b.Fatal("no hit", err)
	}
	if err := a.Complete(placement.Accepted); err != nil {
		b.Fatal(err)
	}
	t.Done()
}
