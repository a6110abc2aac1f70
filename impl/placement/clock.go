package placement

import (
	"math"
	"sync"
	"sync/atomic"
	"time"
)

// ManualClock is a clock a simulation host drives. Coordinators that use it
// run no reaper goroutine: each Advance reclaims expired entries and times
// out initializations synchronously, before it returns. Set moves time
// without reclaiming (as the runtime clock moves between reaper ticks) and
// Reclaim runs one reaper tick.
type ManualClock struct {
	mu   sync.Mutex
	t    atomic.Int64
	span int64 // the largest TTL or timeout of any attached coordinator
	subs map[*manualSub]struct{}
}

type manualSub struct {
	span  int64
	sweep func(now int64)
}

// NewManualClock returns a manual clock reading start.
func NewManualClock(start time.Duration) *ManualClock {
	c := &ManualClock{subs: map[*manualSub]struct{}{}}
	c.t.Store(int64(start))
	return c
}

// Now returns the clock's time.
func (c *ManualClock) Now() time.Duration { return time.Duration(c.t.Load()) }

func (c *ManualClock) now() int64 { return c.t.Load() }

// Advance moves the clock to the absolute time to and reclaims in every
// attached coordinator. Going backwards, or to a time whose deadlines
// (to + TTL or timeout) would overflow, is rejected with a *ClockError and
// changes nothing. Advancing to the current time is a no-op.
func (c *ManualClock) Advance(to time.Duration) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.advanceLocked(int64(to))
}

// Set moves the clock to the absolute time to, as Advance does, but
// reclaims nothing: expired bindings and timed-out initializations stay in
// the table until an operation on the key applies its deadline (every
// operation does, lazily), a full table's capacity path sweeps, or Reclaim
// runs. That is how the runtime clock moves between two reaper ticks; a
// simulation host uses Set to reproduce it. It is refused like Advance.
func (c *ManualClock) Set(to time.Duration) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if err := c.check(int64(to)); err != nil {
		return err
	}
	c.t.Store(int64(to))
	return nil
}

// SetBy moves the clock forward by d without reclaiming (see Set),
// atomically: two concurrent SetBy calls both take effect.
func (c *ManualClock) SetBy(d time.Duration) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	to, err := c.by(d)
	if err == nil {
		err = c.check(to)
	}
	if err != nil {
		return err
	}
	c.t.Store(to)
	return nil
}

// Reclaim runs, at the current time, the sweep that Advance runs after it
// moves the clock: in every attached coordinator, idle bindings past their
// deadline expire, stale ones are dropped and initializations past theirs
// time out (a reaper tick).
func (c *ManualClock) Reclaim() {
	c.mu.Lock()
	defer c.mu.Unlock()
	now := c.t.Load()
	for s := range c.subs {
		s.sweep(now)
	}
}

// AdvanceBy moves the clock forward by d (see Advance), atomically: two
// concurrent AdvanceBy calls both take effect.
func (c *ManualClock) AdvanceBy(d time.Duration) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	to, err := c.by(d)
	if err != nil {
		return err
	}
	return c.advanceLocked(to)
}

// by is the time d after now, if d is not negative and it does not overflow.
func (c *ManualClock) by(d time.Duration) (int64, error) {
	now := c.t.Load()
	if d < 0 {
		return 0, &ClockError{Now: now, To: now + int64(d), Reason: "time would go backwards"}
	}
	if int64(d) > math.MaxInt64-now {
		return 0, &ClockError{Now: now, To: math.MaxInt64, Reason: "the time would overflow"}
	}
	return now + int64(d), nil
}

// check refuses a move to to that goes backwards or makes a deadline
// overflow.
func (c *ManualClock) check(to int64) error {
	now := c.t.Load()
	if to < now {
		return &ClockError{Now: now, To: to, Reason: "time would go backwards"}
	}
	if to > math.MaxInt64-c.span {
		return &ClockError{Now: now, To: to, Reason: "a deadline at this time would overflow"}
	}
	return nil
}

func (c *ManualClock) advanceLocked(to int64) error {
	if err := c.check(to); err != nil {
		return err
	}
	if to == c.t.Load() {
		return nil
	}
	c.t.Store(to)
	for s := range c.subs {
		s.sweep(to)
	}
	return nil
}

// attach registers a coordinator whose deadlines reach span past now.
func (c *ManualClock) attach(span int64, sweep func(int64)) (*manualSub, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	now := c.t.Load()
	if now > math.MaxInt64-span {
		return nil, &ConfigError{Field: "Clock", Reason: "is so late that deadlines would overflow"}
	}
	s := &manualSub{span: span, sweep: sweep}
	c.subs[s] = struct{}{}
	c.recomputeSpan()
	return s, nil
}

func (c *ManualClock) detach(s *manualSub) {
	c.mu.Lock()
	defer c.mu.Unlock()
	delete(c.subs, s)
	c.recomputeSpan()
}

func (c *ManualClock) recomputeSpan() {
	c.span = 0
	for s := range c.subs {
		c.span = max(c.span, s.span)
	}
}
