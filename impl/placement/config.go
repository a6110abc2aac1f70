package placement

import (
	"fmt"
	"time"
)

// MaxDuration bounds every Config duration: one year.
const MaxDuration = 365 * 24 * time.Hour

// The defaults a zero Config field means. A zero Config is a working
// configuration: New[T](Config[T]{}) places sessions with these.
const (
	// DefaultIdleTTL: a binding with no requests lives 30 minutes, long
	// enough to span the think time between an agent's turns (and most
	// human ones) while a worker still holds the session's prefix cache.
	DefaultIdleTTL = 30 * time.Minute
	// DefaultReserveTimeout: a reservation may take 30 seconds to dispatch,
	// across DefinitelyNotAccepted retries (choosing a worker, and retrying
	// refused dispatches on others).
	DefaultReserveTimeout = 30 * time.Second
	// DefaultDispatchTimeout: a dispatch has one minute to learn its
	// outcome (the worker accepting the request: response headers, not
	// the whole answer).
	DefaultDispatchTimeout = time.Minute
	// DefaultQuarantineTTL: an ambiguous attempt blocks its session for
	// ten minutes, longer than any inference request a router lets run, so
	// a quarantine outlives the request it protects against replaying.
	DefaultQuarantineTTL = 10 * time.Minute
	// DefaultMaxEntries and DefaultMaxKeyBytes are the anchor router's
	// limits: 65,536 live entries, 256-byte keys.
	DefaultMaxEntries  = 65536
	DefaultMaxKeyBytes = 256
)

// MaxFirstAttempt is the largest Config.FirstAttempt, and the top of the
// range a random start is drawn from: a counter that starts at or below it
// issues 2^63 ids before it could wrap.
const MaxFirstAttempt = 1 << 63

// Config configures a Coordinator of targets of type T. The zero value is
// valid: every zero field means its default (see the Default constants).
//
// Durations may be as short as the clock can tell apart: at least the
// default clock's ClockResolution (1 ms unless set), or 1 ns with
// PreciseClock or a ManualClock, and at most MaxDuration. Nothing in the
// protocol needs more (spec/tla counts time in ticks); a duration of d
// ticks of the coarse clock ends within one tick of its precise time (see
// ClockResolution), so keep durations at many ticks where that matters.
type Config[T comparable] struct {
	// IdleTTL is how long a binding with no active leases lives. Zero
	// means DefaultIdleTTL.
	IdleTTL time.Duration
	// ReserveTimeout bounds how long a reservation may take to dispatch,
	// counted from when the key was reserved and across
	// DefinitelyNotAccepted retries. A reservation past it is released
	// (the next waiter gets the key). Zero means DefaultReserveTimeout.
	ReserveTimeout time.Duration
	// DispatchTimeout bounds how long each dispatch may take to learn its
	// outcome; a dispatch past it is quarantined (Dispatch.Deadline and
	// Dispatch.Context give a router its time for the upstream call). An
	// initialization ends within ReserveTimeout + DispatchTimeout of its
	// reservation, however many DefinitelyNotAccepted retries it makes.
	// Zero means DefaultDispatchTimeout.
	DispatchTimeout time.Duration
	// QuarantineTTL bounds how long an unsettled (ambiguous) attempt blocks
	// its session: the operator's stated bound on how long a request the
	// target may have accepted keeps a replay away. After it the session is
	// absent again (EventQuarantineExpired) and the next request dispatches
	// anew. A quarantine also ends when it is settled (a late result,
	// Resolve) or its target's generation moves on. Zero means
	// DefaultQuarantineTTL.
	QuarantineTTL time.Duration
	// MaxEntries bounds the live entries in the table. Zero means
	// DefaultMaxEntries.
	MaxEntries int
	// MaxKeyBytes bounds a session key's length. Zero means
	// DefaultMaxKeyBytes.
	MaxKeyBytes int
	// Clock is the time source: nil for the runtime's monotonic clock (with a
	// background reaper), read through a coarse clock (see ClockResolution),
	// or a *ManualClock a simulation host advances (no reaper goroutine;
	// Advance reclaims).
	Clock *ManualClock
	// ClockResolution is the tick of the default clock (Clock nil): a
	// coarse monotonic clock, the runtime's monotonic time at the last tick,
	// which a hit or a release reads with one atomic load instead of
	// reading the runtime clock. Zero means DefaultClockResolution (1 ms);
	// otherwise MinClockResolution .. MaxClockResolution (100µs .. 100ms),
	// or PreciseClock to read the runtime clock at every reading (no
	// ticker). It must be zero with a manual Clock.
	//
	// All the coordinators of a process share one ticker goroutine, started
	// with the first of them and stopped when the last is closed; it ticks
	// at the finest resolution among the open ones, so two ticks are at
	// most ClockResolution apart (plus the ticker goroutine's scheduling
	// delay).
	//
	// Precision: every deadline and every check reads this clock, so
	// relative to it nothing ends early or late. Relative to the runtime
	// clock, an idle binding, a reservation, a dispatch or a quarantine
	// that an operation at time t set to end after d (IdleTTL,
	// ReserveTimeout, DispatchTimeout, or QuarantineTTL after an Ambiguous
	// outcome; DispatchTimeout + QuarantineTTL for a dispatch that timed
	// out) ends strictly between t + d - g and t + d + g, where g is the
	// gap between two ticks, and never before d has passed since the tick
	// the operation read: within one tick, early or late. The package's
	// Time section derives it.
	ClockResolution time.Duration
	// FirstAttempt is the first attempt id the coordinator issues (see
	// Dispatch.Attempt); it counts up from there. 0, the default, draws the
	// start at random from [1, MaxFirstAttempt], so that ids stay unique
	// across coordinators and restarts. Set it only where ids must be
	// reproducible, as in a deterministic simulation host; at most
	// MaxFirstAttempt.
	FirstAttempt uint64
	// Observer, if set, is called on every state change of the cold paths
	// (never on a hit or a release that keeps the binding), while the key's
	// entry is locked, so each key's events arrive in order (see Event). It
	// must not block or call back into the coordinator.
	//
	// A panic in the Observer is recovered where the Observer was called,
	// counted in Stats.ObserverPanics, and otherwise ignored: the change it
	// reported goes ahead as if the Observer had returned, no lock stays
	// held, the caller of the operation (a request, the reaper, a manual
	// clock's Advance) sees no panic, and later events are delivered as
	// usual. An Observer is monitoring; a bug in it never stops placement.
	Observer func(Event[T])
}

// resolution is the finest duration the clock of a validated config can
// tell apart: the coarse clock's tick, or 1 ns.
func (c *Config[T]) resolution() time.Duration {
	if c.Clock == nil && c.ClockResolution > 0 {
		return c.ClockResolution
	}
	return time.Nanosecond
}

func (c *Config[T]) validate() (Config[T], error) {
	out := *c
	if err := validateResolution(c, &out); err != nil {
		return out, err
	}
	durations := []struct {
		name string
		d    *time.Duration
		def  time.Duration
	}{{"IdleTTL", &out.IdleTTL, DefaultIdleTTL}, {"ReserveTimeout", &out.ReserveTimeout, DefaultReserveTimeout},
		{"DispatchTimeout", &out.DispatchTimeout, DefaultDispatchTimeout},
		{"QuarantineTTL", &out.QuarantineTTL, DefaultQuarantineTTL}}
	floor := out.resolution()
	for _, d := range durations {
		if *d.d == 0 {
			*d.d = d.def
		}
		if *d.d < floor || *d.d > MaxDuration {
			return out, &ConfigError{Field: d.name, Reason: "must be 0 (the default) or between the clock's resolution (" +
				floor.String() + ") and 1 year, got " + d.d.String()}
		}
	}
	if out.MaxEntries == 0 {
		out.MaxEntries = DefaultMaxEntries
	}
	if out.MaxEntries < 0 {
		return out, &ConfigError{Field: "MaxEntries", Reason: fmt.Sprintf("must be 0 (the default) or positive, got %d", c.MaxEntries)}
	}
	if out.MaxKeyBytes == 0 {
		out.MaxKeyBytes = DefaultMaxKeyBytes
	}
	if out.MaxKeyBytes < 0 {
		return out, &ConfigError{Field: "MaxKeyBytes", Reason: fmt.Sprintf("must be 0 (the default) or positive, got %d", c.MaxKeyBytes)}
	}
	if c.FirstAttempt > MaxFirstAttempt {
		return out, &ConfigError{Field: "FirstAttempt", Reason: fmt.Sprintf("must be at most 2^63, got %d", c.FirstAttempt)}
	}
	return out, nil
}

// validateResolution checks c.ClockResolution and sets out's default.
func validateResolution[T comparable](c, out *Config[T]) error {
	r := c.ClockResolution
	switch {
	case c.Clock != nil:
		if r != 0 {
			return &ConfigError{Field: "ClockResolution", Reason: "must be 0 with a manual Clock, got " + r.String()}
		}
	case r == 0:
		out.ClockResolution = DefaultClockResolution
	case r != PreciseClock && (r < MinClockResolution || r > MaxClockResolution):
		return &ConfigError{Field: "ClockResolution", Reason: "must be between " + MinClockResolution.String() +
			" and " + MaxClockResolution.String() + ", 0 (the default) or PreciseClock, got " + r.String()}
	}
	return nil
}

// EventKind says what an Event reports.
type EventKind uint8

// Event kinds.
const (
	EventReserved EventKind = iota + 1
	EventCommitted
	EventRolledBack
	EventQuarantined
	EventResolved
	EventRemoved
	EventExpired
	EventCapacityRejected
	EventQuarantineExpired
	EventQuarantineDropped
)

var eventNames = [...]string{"", "Reserved", "Committed", "RolledBack", "Quarantined", "Resolved",
	"Removed", "Expired", "CapacityRejected", "QuarantineExpired", "QuarantineDropped"}

// String returns the name of k as the spec writes it.
func (k EventKind) String() string {
	if int(k) < len(eventNames) {
		return eventNames[k]
	}
	return "EventKind(?)"
}

// Event is an observable state change of one key.
//
// The Observer receives one key's events in the order the changes happened
// (it is called while that key's entry is locked). Events of different keys
// may reach it concurrently, from different goroutines; Seq orders all of
// a coordinator's events: a consumer that queues them elsewhere can restore
// the order by Seq.
//
// A binding begins with Committed (an Accepted dispatch in time, or
// CommitAccepted) or with Resolved whose Outcome is Accepted (a late
// Accepted, or Resolve(ResolveAccepted)); it ends with Expired, or Removed
// naming its version (a stale-at-birth binding's Removed follows at once).
// So an Observer can keep its own per-target counts; Coordinator.Bindings
// keeps them too.
type Event[T comparable] struct {
	Kind EventKind
	Key  string
	// Attempt and Generation: the attempt (Committed, RolledBack,
	// Quarantined, Resolved, QuarantineExpired, QuarantineDropped: its
	// target's generation moved on) or the binding version (Expired, and
	// Removed when a binding ends), with its target's generation.
	Attempt    uint64
	Generation uint64
	// Seq is the event's place in the coordinator's sequence (1, 2, ...).
	Seq uint64
	// Target is the target the event concerns: the attempt's (Committed,
	// RolledBack, Quarantined, Resolved, QuarantineExpired,
	// QuarantineDropped) or the binding's (Expired, and Removed when a
	// binding ends), so a resolver of a quarantine needs no Query. It is
	// the zero T for Reserved, CapacityRejected and the Removed of a
	// reservation (HasTarget says which).
	Target T
	// HasTarget reports whether Target names a target.
	HasTarget bool
	// Outcome is what settled the attempt: Accepted (Committed, and a
	// Resolved that binds), DefinitelyNotAccepted (RolledBack, and a
	// Resolved that makes the key absent: a late DefinitelyNotAccepted or
	// Resolve(ResolveNotAccepted)) or Ambiguous (Quarantined); zero for
	// the other kinds.
	Outcome Outcome
}
