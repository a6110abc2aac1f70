package placement

import (
	"strconv"
	"testing"
	"time"
)

// benchHitRelease measures the hot path on the clock cfg names: a hit on
// one of 1,024 idle bindings and its Release, from one goroutine. Each
// hit reads the clock (the binding is idle) and so does each Release (it
// restarts the idle deadline).
func benchHitRelease(b *testing.B, cfg Config[target]) {
	cfg.IdleTTL, cfg.ReserveTimeout, cfg.DispatchTimeout = time.Hour, time.Minute, time.Minute
	cfg.MaxEntries, cfg.MaxKeyBytes = 4096, 64
	c, err := New[target](cfg)
	if err != nil {
		b.Fatal(err)
	}
	defer c.Close()
	keys := make([]string, 1024)
	for i := range keys {
		keys[i] = "session-" + strconv.Itoa(i)
		a, err := c.TryAcquire(keys[i])
		if err != nil || a.Reservation == nil {
			b.Fatalf("reserve %q: %v", keys[i], err)
		}
		if _, err := a.Reservation.CommitAccepted(w1, c.Generation(w1)); err != nil {
			b.Fatal(err)
		}
		a.Done()
	}
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		a, err := c.TryAcquire(keys[i&1023])
		if err != nil || !a.Hit() {
			b.Fatalf("miss on %q: %v", keys[i&1023], err)
		}
		if err := a.Lease.Release(); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkHitRelease_DefaultClock: the clock a zero Config gives (the
// coarse clock, 1 ms ticks).
func BenchmarkHitRelease_DefaultClock(b *testing.B) { benchHitRelease(b, Config[target]{}) }

// BenchmarkHitRelease_ManualClock: a ManualClock (one atomic load a
// reading), the floor for any clock.
func BenchmarkHitRelease_ManualClock(b *testing.B) {
	benchHitRelease(b, Config[target]{Clock: NewManualClock(0)})
}

// BenchmarkHitRelease_PreciseClock: ClockResolution PreciseClock, the
// runtime clock read at every reading (the default before the coarse
// clock).
func BenchmarkHitRelease_PreciseClock(b *testing.B) {
	benchHitRelease(b, Config[target]{ClockResolution: PreciseClock})
}
