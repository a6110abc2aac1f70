//go:build unix

package etcdstore

import (
	"context"
	"fmt"
	"syscall"
	"testing"
	"time"

	"github.com/placementlab/placement/impl/claims"
)

// processCPU is the CPU time (user and system) the process used so far.
func processCPU(b *testing.B) time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		b.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// BenchmarkOneTurn is a one-turn session's store calls (CreateOrGet of a
// new claim, Hold, Close: deleted) in the store's default configuration,
// one at a time on the shared in-process member, and reports the whole
// process's CPU per turn (the member's, the client's and the store's):
// the store's share of what claimsfig's claims/s figure costs, without
// the replicas and their event streams.
func BenchmarkOneTurn(b *testing.B) {
	ctx := context.Background()
	cli, err := shared.NewClient()
	if err != nil {
		b.Fatal(err)
	}
	defer cli.Close()
	s, err := New(ctx, cli, "bench", claims.Options{Prefix: fmt.Sprintf("bench%d/", time.Now().UnixNano())})
	if err != nil {
		b.Fatal(err)
	}
	defer s.Shutdown()
	if _, err := s.Register(ctx, "w", "1"); err != nil {
		b.Fatal(err)
	}
	i := 0
	cpu0 := processCPU(b)
	for b.Loop() {
		key := fmt.Sprintf("k%d", i)
		i++
		c, created, err := s.CreateOrGet(ctx, key, to("w"))
		if err != nil || !created {
			b.Fatal(err, created)
		}
		if err := s.Hold(ctx, key, c.Rev, "bench"); err != nil {
			b.Fatal(err)
		}
		if res, err := s.Close(ctx, key, c.Rev, "bench"); err != nil || res != claims.CloseDeleted {
			b.Fatal(err, res)
		}
	}
	b.ReportMetric(float64((processCPU(b)-cpu0).Microseconds())/float64(b.N), "cpu-µs/op")
}
