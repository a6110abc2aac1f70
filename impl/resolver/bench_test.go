package resolver_test

import (
	"context"
	"fmt"
	"strconv"
	"testing"
	"time"

	"github.com/placementlab/placement/impl/affinity"
	"github.com/placementlab/placement/impl/placement"
	"github.com/placementlab/placement/impl/resolver"
)

// BenchmarkLedgerArrive: the middleware's cost per request, in steady
// state (the ring full, evicting as it records).
func BenchmarkLedgerArrive(b *testing.B) {
	clk := placement.NewManualClock(0)
	l, _ := resolver.NewLedger(resolver.LedgerConfig{Identity: "x", Now: clk.Now, Capacity: 1 << 12})
	ids := make([]string, 1<<16)
	for i := range ids {
		ids[i] = strconv.Itoa(i)
	}
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if i%len(ids) == 0 && i > 0 {
			_ = clk.AdvanceBy(time.Hour) // forget the previous round
		}
		_ = l.Arrive(ids[i%len(ids)])
	}
}

// BenchmarkLedgerAsk: answering about an attempt the ledger remembers.
func BenchmarkLedgerAsk(b *testing.B) {
	clk := placement.NewManualClock(0)
	l, _ := resolver.NewLedger(resolver.LedgerConfig{Identity: "x", Now: clk.Now})
	_ = l.Arrive("1001")
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		_ = l.Ask("1001", time.Second)
	}
}

// BenchmarkPass: one pass over 1,000 quarantines of a real layer, every
// one due and answered Unknown (the Status costs nothing).
func BenchmarkPass(b *testing.B) {
	clk := placement.NewManualClock(0)
	l, _ := affinity.New(affinity.Config{Clock: clk, FirstAttempt: 1})
	defer l.Close()
	_, _ = l.Join(affinity.Worker{ID: "w", Identity: "1"})
	for i := 0; i < 1000; i++ {
		quarantine(l, fmt.Sprint("s", i), "w")
	}
	r, _ := resolver.New(resolver.Config{Source: l, Status: always(resolver.Unknown), Concurrency: 1,
		MaxCallsPerPass: 1000, MinBackoff: time.Nanosecond, MaxBackoff: time.Nanosecond})
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		_ = clk.AdvanceBy(time.Microsecond)
		if res := r.Pass(context.Background()); len(res.Outcomes) != 1000 {
			b.Fatalf("asked %d", len(res.Outcomes))
		}
	}
}
