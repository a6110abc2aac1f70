package placement

import (
	"context"
	"errors"
	"testing"
	"time"
)

// A zero Config is a working configuration: every zero field means its
// documented default, which the coordinator then uses (each duration is
// read back from the deadline it sets on a manual clock).
func TestConfig_ZeroValueGivesTheDefaults(t *testing.T) {
	noLeaks(t)
	clk := NewManualClock(0)
	c, err := New(Config[target]{Clock: clk})
	must(t, err)
	defer c.Close()
	if c.cfg.MaxEntries != DefaultMaxEntries || c.cfg.MaxKeyBytes != DefaultMaxKeyBytes {
		t.Fatalf("limits %d and %d, want the defaults", c.cfg.MaxEntries, c.cfg.MaxKeyBytes)
	}
	r := reserve(t, c, "s")
	d, err := r.BeginDispatch(w1, 1)
	must(t, err)
	if d.Deadline() != DefaultDispatchTimeout {
		t.Fatalf("dispatch deadline %v, want DefaultDispatchTimeout", d.Deadline())
	}
	_, err = d.Complete(Ambiguous)
	wantIs(t, err, ErrAmbiguous)
	if qs := c.Quarantined(); len(qs) != 1 || qs[0].Expires != DefaultQuarantineTTL {
		t.Fatalf("quarantines %+v, want one ending after DefaultQuarantineTTL", qs)
	}
	must(t, c.Resolve("s", d.Attempt(), 1, ResolveNotAccepted))
	must(t, bind(t, c, "s", w1).Release())
	if i := state(t, c, "s"); i.IdleDeadline != DefaultIdleTTL {
		t.Fatalf("idle deadline %v, want DefaultIdleTTL", i.IdleDeadline)
	}
	must(t, clk.Advance(DefaultReserveTimeout-1))
	r = reserve(t, c, "t")
	must(t, clk.Advance(2*DefaultReserveTimeout-2)) // reserved at RT-1: one ns before its deadline
	if _, err := r.BeginDispatch(w1, 1); err != nil {
		t.Fatalf("one nanosecond before DefaultReserveTimeout: %v", err)
	}
	long := make([]byte, DefaultMaxKeyBytes+1)
	for i := range long {
		long[i] = 'k'
	}
	if _, err := c.TryAcquire(string(long)); !errors.Is(err, ErrKeyTooLong) {
		t.Fatalf("a key of DefaultMaxKeyBytes+1 bytes: %v", err)
	}
}

// Durations are bounded by what the clock can tell apart, not by a second:
// a manual clock (a simulation host) and PreciseClock take a nanosecond,
// the default coarse clock its tick; shorter, negative or longer than a
// year is a *ConfigError naming the field.
func TestConfig_DurationsBoundedByTheClock(t *testing.T) {
	noLeaks(t)
	ok := []Config[target]{
		{Clock: NewManualClock(0), IdleTTL: time.Nanosecond, ReserveTimeout: time.Nanosecond,
			DispatchTimeout: time.Nanosecond, QuarantineTTL: time.Nanosecond},
		{ClockResolution: PreciseClock, IdleTTL: time.Microsecond, DispatchTimeout: 50 * time.Millisecond},
		{IdleTTL: DefaultClockResolution, DispatchTimeout: 250 * time.Millisecond},
		{ClockResolution: 10 * time.Millisecond, QuarantineTTL: 10 * time.Millisecond},
	}
	for i, cfg := range ok {
		c, err := New(cfg)
		if err != nil {
			t.Fatalf("config %d: %v", i, err)
		}
		must(t, c.Close())
	}
	bad := []struct {
		cfg   Config[target]
		field string
	}{
		{Config[target]{IdleTTL: DefaultClockResolution - 1}, "IdleTTL"},
		{Config[target]{ClockResolution: 10 * time.Millisecond, QuarantineTTL: 9 * time.Millisecond}, "QuarantineTTL"},
		{Config[target]{ClockResolution: PreciseClock, ReserveTimeout: -1}, "ReserveTimeout"},
		{Config[target]{Clock: NewManualClock(0), DispatchTimeout: MaxDuration + 1}, "DispatchTimeout"},
		{Config[target]{MaxEntries: -1}, "MaxEntries"},
		{Config[target]{MaxKeyBytes: -5}, "MaxKeyBytes"},
	}
	for _, b := range bad {
		_, err := New(b.cfg)
		var ce *ConfigError
		if !errors.As(err, &ce) || ce.Field != b.field || !errors.Is(err, ErrInvalidConfig) {
			t.Errorf("%s: %v, want a *ConfigError for it", b.field, err)
		}
	}
}

// A dispatch's deadline is BeginDispatch's reading plus DispatchTimeout,
// on the coordinator's clock; Remaining counts down to zero; Context is
// done at the deadline with a runtime clock if no outcome came (cause
// ErrDispatchTimeout), outlives it once the outcome is reported (a body may
// stream longer), and adds no deadline with a manual clock.
func TestDispatch_DeadlineAndContext(t *testing.T) {
	c, clk := manual(t, func(c *Config[target]) { c.DispatchTimeout = 3 * time.Second })
	must(t, clk.Advance(time.Second))
	d, err := reserve(t, c, "s").BeginDispatch(w1, 1)
	must(t, err)
	if d.Deadline() != 4*time.Second || d.Remaining() != 3*time.Second {
		t.Fatalf("deadline %v, remaining %v", d.Deadline(), d.Remaining())
	}
	jump(clk, 5*time.Second)
	if d.Remaining() != 0 {
		t.Fatalf("remaining %v past the deadline", d.Remaining())
	}
	ctx, cancel := d.Context(context.Background())
	if _, has := ctx.Deadline(); has {
		t.Fatal("a manual clock's dispatch context has a deadline")
	}
	cancel()
	if ctx.Err() == nil {
		t.Fatal("cancel did not end the context")
	}

	noLeaks(t)
	rc, err := New(Config[target]{DispatchTimeout: 50 * time.Millisecond})
	must(t, err)
	defer rc.Close()
	a, err := rc.TryAcquire("s")
	must(t, err)
	defer a.Done()
	rd, err := a.Reservation.BeginDispatch(w1, 1)
	must(t, err)
	rctx, rcancel := rd.Context(context.Background())
	defer rcancel()
	if _, has := rctx.Deadline(); has {
		t.Fatal("the dispatch's context carries a fixed deadline; it must end only while the dispatch is in flight")
	}
	sent := time.Now()
	select {
	case <-rctx.Done():
		if !errors.Is(context.Cause(rctx), ErrDispatchTimeout) {
			t.Fatalf("the context ended with cause %v, want ErrDispatchTimeout", context.Cause(rctx))
		}
		if took := time.Since(sent); took < 45*time.Millisecond {
			t.Fatalf("the context ended %v after BeginDispatch, before its 50 ms DispatchTimeout", took)
		}
	case <-time.After(2 * time.Second):
		t.Fatal("the dispatch's context outlived its deadline")
	}
	// The context and the coarse clock end the dispatch within a tick of
	// each other.
	for start := time.Now(); state(t, rc, "s").State != StateQuarantined; time.Sleep(time.Millisecond) {
		if time.Since(start) > time.Second {
			t.Fatalf("a second after the context ended the key reads %v, want Quarantined", state(t, rc, "s").State)
		}
	}
	// A parent with an earlier deadline keeps it.
	parent, pcancel := context.WithTimeout(context.Background(), time.Millisecond)
	defer pcancel()
	b, err := rc.TryAcquire("t")
	must(t, err)
	defer b.Done()
	bd, err := b.Reservation.BeginDispatch(w1, 1)
	must(t, err)
	bctx, bcancel := bd.Context(parent)
	defer bcancel()
	if pdl, _ := parent.Deadline(); func() bool { got, _ := bctx.Deadline(); return !got.Equal(pdl) }() {
		t.Fatal("the dispatch's context replaced an earlier parent deadline")
	}

	// An outcome reported in time releases the context from the deadline:
	// the accepted response's body may take longer than DispatchTimeout.
	c2, err := rc.TryAcquire("u")
	must(t, err)
	defer c2.Done()
	cd, err := c2.Reservation.BeginDispatch(w1, 1)
	must(t, err)
	cctx, ccancel := cd.Context(context.Background())
	_, err = cd.Complete(Accepted)
	must(t, err)
	select {
	case <-cctx.Done():
		t.Fatalf("the context of a completed dispatch ended: %v", context.Cause(cctx))
	case <-time.After(150 * time.Millisecond): // three times DispatchTimeout
	}
	ccancel()
	if !errors.Is(context.Cause(cctx), context.Canceled) {
		t.Fatalf("cancel: cause %v", context.Cause(cctx))
	}
}
