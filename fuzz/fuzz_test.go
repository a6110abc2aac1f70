package fuzz

import (
	"context"
	"errors"
	"math"
	"testing"
	"time"

	"github.com/placementlab/placement/impl/placement"
	"github.com/placementlab/placement/linearizability"
	"pgregory.net/rapid"
)

// FuzzImplMatchesModel: the side-by-side differential run, driven by the
// fuzzer's bytes.
func FuzzImplMatchesModel(f *testing.F) {
	for _, seed := range [][]byte{{}, {1, 2, 3, 4, 5, 6, 7, 8}, []byte("placement quarantine resolve")} {
		f.Add(seed)
	}
	f.Fuzz(rapid.MakeFuzz(func(t *rapid.T) { linearizability.SideBySide(t) }))
}

// FuzzKeys: any key is accepted or refused with ErrKeyEmpty/ErrKeyTooLong,
// by every operation that takes one, without a panic.
func FuzzKeys(f *testing.F) {
	for _, k := range []string{"", "s", "a/b", "\x00\xff", string(make([]byte, 65))} {
		f.Add(k)
	}
	c, err := placement.New[int](placement.Config[int]{IdleTTL: time.Second, ReserveTimeout: time.Second, DispatchTimeout: time.Second,
		MaxEntries: 8, MaxKeyBytes: 64, Clock: placement.NewManualClock(0)})
	if err != nil {
		f.Fatal(err)
	}
	f.Cleanup(func() { c.Close() })
	valid := func(err error) bool {
		return err == nil || errors.Is(err, placement.ErrKeyEmpty) || errors.Is(err, placement.ErrKeyTooLong) ||
			errors.Is(err, placement.ErrCapacity) || errors.Is(err, placement.ErrWouldWait) ||
			errors.Is(err, placement.ErrNotQuarantined)
	}
	f.Fuzz(func(t *testing.T, key string) {
		bad := key == "" || len(key) > 64
		a, err := c.TryAcquire(key)
		if !valid(err) || bad != (errors.Is(err, placement.ErrKeyEmpty) || errors.Is(err, placement.ErrKeyTooLong)) {
			t.Fatalf("TryAcquire(%q): %v", key, err)
		}
		if err == nil && a.Reservation != nil {
			if err := a.Reservation.Cancel(); err != nil {
				t.Fatal(err)
			}
		}
		ctx, cancel := context.WithTimeout(context.Background(), time.Millisecond)
		defer cancel()
		if a, err := c.Acquire(ctx, key); !valid(err) && !errors.Is(err, placement.ErrCancelled) {
			t.Fatalf("Acquire(%q): %v", key, err)
		} else if err == nil && a.Reservation != nil {
			_ = a.Reservation.Cancel()
		}
		if _, err := c.Query(key); !valid(err) {
			t.Fatalf("Query(%q): %v", key, err)
		}
		if _, err := c.InvalidateKey(key); !valid(err) {
			t.Fatalf("InvalidateKey(%q): %v", key, err)
		}
		if err := c.Resolve(key, 1, 1, placement.ResolveAccepted); !valid(err) {
			t.Fatalf("Resolve(%q): %v", key, err)
		}
	})
}

// FuzzConfig: New accepts exactly the valid configs and refuses the others
// with a *ConfigError naming the field, without a panic.
func FuzzConfig(f *testing.F) {
	f.Add(int64(time.Second), int64(time.Second), 1, 1, int64(0))
	f.Add(int64(0), int64(-1), 0, -5, int64(math.MaxInt64))
	f.Add(int64(366*24*time.Hour), int64(time.Hour), 65536, 256, int64(math.MaxInt64-int64(time.Second)))
	f.Add(int64(999_999_929), int64(999_999_929), 9, 47, int64(0)) // sub-second: valid on a manual clock
	f.Add(int64(0), int64(0), 0, 0, int64(0))                      // the zero Config: every default
	f.Fuzz(func(t *testing.T, ttl, init int64, maxEntries, maxKey int, clockStart int64) {
		cfg := placement.Config[int]{IdleTTL: time.Duration(ttl), ReserveTimeout: time.Duration(init), DispatchTimeout: time.Duration(init),
			MaxEntries: maxEntries, MaxKeyBytes: maxKey, Clock: placement.NewManualClock(time.Duration(clockStart))}
		// Zero is the default; otherwise, on a manual clock, 1 ns .. MaxDuration.
		inRange := func(d int64) bool { return d == 0 || d >= 1 && d <= int64(placement.MaxDuration) }
		or := func(d int64, def time.Duration) int64 {
			if d == 0 {
				return int64(def)
			}
			return d
		}
		span := max(or(ttl, placement.DefaultIdleTTL), or(init, placement.DefaultReserveTimeout),
			or(init, placement.DefaultDispatchTimeout), int64(placement.DefaultQuarantineTTL))
		valid := inRange(ttl) && inRange(init) && maxEntries >= 0 && maxKey >= 0 &&
			clockStart <= math.MaxInt64-span
		c, err := placement.New[int](cfg)
		if valid != (err == nil) {
			t.Fatalf("New(%+v): %v (valid %v)", cfg, err, valid)
		}
		var ce *placement.ConfigError
		if err != nil && (!errors.As(err, &ce) || !errors.Is(err, placement.ErrInvalidConfig)) {
			t.Fatalf("New: untyped error %v", err)
		}
		if c != nil {
			c.Close()
		}
	})
}

// FuzzClock: a manual clock accepts exactly the updates that neither go
// backwards nor overflow a deadline; a refused update changes nothing.
func FuzzClock(f *testing.F) {
	f.Add(int64(0), int64(10), int64(5))
	f.Add(int64(math.MaxInt64-100), int64(math.MaxInt64), int64(math.MaxInt64))
	f.Add(int64(1000), int64(-5), int64(-1))
	f.Fuzz(func(t *testing.T, start, to, by int64) {
		if start < 0 || start > math.MaxInt64-int64(time.Hour) {
			return // New refuses such clocks (FuzzConfig covers it)
		}
		clk := placement.NewManualClock(time.Duration(start))
		c, err := placement.New[int](placement.Config[int]{IdleTTL: time.Hour, ReserveTimeout: time.Second, DispatchTimeout: time.Second,
			MaxEntries: 4, MaxKeyBytes: 8, Clock: clk})
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		a, _ := c.TryAcquire("s")
		l, _ := a.Reservation.CommitAccepted(1, 1)
		check := func(name string, err error, want bool, before time.Duration) {
			if want != (err == nil) {
				t.Fatalf("%s from %d: %v, want ok=%v", name, before, err, want)
			}
			if err != nil && (!errors.Is(err, placement.ErrInvalidClock) || clk.Now() != before) {
				t.Fatalf("%s: refused with %v but the clock moved to %v", name, err, clk.Now())
			}
		}
		now := clk.Now()
		check("Advance", clk.Advance(time.Duration(to)), to >= int64(now) && to <= math.MaxInt64-int64(time.Hour), now)
		now = clk.Now()
		ok := by >= 0 && by <= math.MaxInt64-int64(now) && int64(now)+by <= math.MaxInt64-int64(time.Hour)
		check("AdvanceBy", clk.AdvanceBy(time.Duration(by)), ok, now)
		if i, _ := c.Query("s"); i.State != placement.StateBound {
			t.Fatal("a leased binding did not survive the clock")
		}
		_ = l.Release()
	})
}
