package benchmarks

import (
	"context"
	"net/http"
	"testing"

	"github.com/placementlab/placement/impl/affinity"
	"github.com/placementlab/placement/impl/placement"
	"github.com/placementlab/placement/impl/router"
)

// BenchmarkAffinity measures a later turn's hot path from the request's
// header to its lease and back, each in its default configuration:
//
//   - core: the header's value as the key of impl/placement's Acquire (a
//     hit), then Done (the release), what a router on the core alone does;
//   - affinity: impl/affinity's RequestFromHeader (validation, the
//     namespace's SHA-256 key), Start (the hit), Eligible over 8 ranked
//     candidates, Dispatch, Complete(Accepted) and Done;
//   - affinity-key: RequestFromHeader alone (the key's share of the cost);
//   - driver: the router kit's one call per request, impl/router's
//     Driver.Do in its default configuration (candidates: every rank of
//     every member, in-flight counts, the default picker), after
//     RequestFromHeader, with a transport that accepts at once.
//
// The benchtable reports affinity's ns/op as a ratio to core's.
func BenchmarkAffinity(b *testing.B) {
	h := http.Header{}
	h.Set("X-Session-ID", "0190c3a4-7d1e-7c2b-9a55-3f2b8e1d4c6a")
	ctx := context.Background()
	b.Run("hit/core", func(b *testing.B) {
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
		a, err := c.Acquire(ctx, h.Get("X-Session-ID"))
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
			a, err := c.Acquire(ctx, h.Get("X-Session-ID"))
			if err != nil || !a.Hit() {
				b.Fatal("no hit", err)
			}
			a.Done()
		}
	})
	l, err := affinity.New(affinity.Config{})
	if err != nil {
		b.Fatal(err)
	}
	defer l.Close()
	var cands []affinity.Candidate
	for _, id := range []string{"w0", "w1", "w2", "w3"} {
		if _, err := l.Join(affinity.Worker{ID: id, Identity: "boot", Ranks: 2}); err != nil {
			b.Fatal(err)
		}
		cands = append(cands, affinity.Candidate{Target: affinity.Ranked(id, 0)}, affinity.Candidate{Target: affinity.Ranked(id, 1)})
	}
	ns := affinity.Namespace{Model: "llama", Tenant: "acme"}
	turn := func(b *testing.B, first bool) {
		req, err := l.RequestFromHeader(ns, h, affinity.PhaseDecode)
		if err != nil {
			b.Fatal(err)
		}
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
	turn(b, true)
	b.Run("hit/affinity", func(b *testing.B) {
		b.ReportAllocs()
		for i := 0; i < b.N; i++ {
			turn(b, false)
		}
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
	})
	b.Run("hit/affinity-key", func(b *testing.B) {
		b.ReportAllocs()
		for i := 0; i < b.N; i++ {
			if _, err := l.RequestFromHeader(ns, h, affinity.PhaseDecode); err != nil {
				b.Fatal(err)
			}
		}
	})
}
