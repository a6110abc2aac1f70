package placement

import (
	"math"
	"sync"
	"sync/atomic"
	"time"
)

// Resolutions of the default clock (Config.ClockResolution).
const (
	// DefaultClockResolution is the tick a zero Config.ClockResolution
	// means: 1 ms.
	DefaultClockResolution = time.Millisecond
	// MinClockResolution is the finest tick: below it the ticker's
	// wake-ups cost more than the clock readings they save.
	MinClockResolution = 100 * time.Microsecond
	// MaxClockResolution is the coarsest tick: every deadline ends within
	// one tick of its precise time (see the package's Time section), so a
	// tenth of a second keeps a one-second timeout within 10%.
	MaxClockResolution = 100 * time.Millisecond
	// PreciseClock, as Config.ClockResolution, makes the coordinator read
	// the runtime's monotonic clock at every reading, as time.Since does,
	// with no ticker: deadlines are then exact to the reading, and every
	// hit and release pays for two readings of the runtime clock.
	PreciseClock time.Duration = -1
)

// processEpoch is the zero of the process's coarse clock.
var processEpoch = time.Now()

// sinceProcessEpoch reads the runtime's monotonic clock.
func sinceProcessEpoch() int64 { return int64(time.Since(processEpoch)) }

// coarseClock is the default clock: the runtime's monotonic time at the
// last tick of a ticker, which a reading takes with one atomic load. One
// ticker serves every coordinator attached to the clock, at the finest
// resolution any of them asked for; it starts with the first and stops with
// the last (attach, detach).
type coarseClock struct {
	// t is mono's value at the last tick. It never goes backwards: every
	// write is an advance (tick).
	t atomic.Int64
	// mono reads the underlying monotonic clock; start runs tick every
	// period until stop is called, and stop returns once no tick runs.
	// Tests replace both (newCoarseClock).
	mono  func() int64
	start func(period time.Duration, tick func()) (stop func())

	mu     sync.Mutex
	users  map[time.Duration]int // attached coordinators, by resolution
	period time.Duration         // the ticker's period (the finest of users), 0 when stopped
	stop   func()
}

// processClock is the coarse clock every coordinator of the process with a
// default clock shares.
var processClock = newCoarseClock(sinceProcessEpoch, startTicker)

func newCoarseClock(mono func() int64, start func(time.Duration, func()) func()) *coarseClock {
	k := &coarseClock{mono: mono, start: start, users: map[time.Duration]int{}}
	k.t.Store(math.MinInt64) // before any tick: the first attach ticks at once
	return k
}

// now is the time of the last tick.
func (k *coarseClock) now() int64 { return k.t.Load() }

// tick moves the clock to mono's time, unless it already reads later (a
// tick that lost a race to a restart's): the clock never goes backwards.
func (k *coarseClock) tick() {
	v := k.mono()
	for {
		cur := k.t.Load()
		if v <= cur || k.t.CompareAndSwap(cur, v) {
			return
		}
	}
}

// attach registers a coordinator ticking at resolution res. The ticker
// starts if it was stopped, and speeds up if res is finer than its period;
// either way the clock ticks at once, so a first reading is fresh.
func (k *coarseClock) attach(res time.Duration) {
	k.mu.Lock()
	defer k.mu.Unlock()
	k.users[res]++
	if k.period == 0 || res < k.period {
		k.restartLocked(res)
	}
}

// detach unregisters a coordinator attached with res. The ticker slows to
// the finest resolution still attached, or stops (its goroutine has
// returned when detach does) if none is.
func (k *coarseClock) detach(res time.Duration) {
	k.mu.Lock()
	defer k.mu.Unlock()
	if k.users[res]--; k.users[res] == 0 {
		delete(k.users, res)
	}
	var finest time.Duration
	for r := range k.users {
		if finest == 0 || r < finest {
			finest = r
		}
	}
	if finest != k.period {
		k.restartLocked(finest)
	}
}

// restartLocked replaces the ticker by one with the given period (none if
// it is 0), ticking once in between.
func (k *coarseClock) restartLocked(period time.Duration) {
	if k.stop != nil {
		k.stop()
		k.stop = nil
	}
	k.period = period
	if period > 0 {
		k.tick()
		k.stop = k.start(period, k.tick)
	}
}

// startTicker runs tick every period on a goroutine of its own until the
// returned stop is called; stop returns after the goroutine has.
func startTicker(period time.Duration, tick func()) (stop func()) {
	quit, done := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(done)
		t := time.NewTicker(period)
		defer t.Stop()
		for {
			select {
			case <-quit:
				return
			case <-t.C:
				tick()
			}
		}
	}()
	return func() {
		close(quit)
		<-done
	}
}
