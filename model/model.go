// Package model is the executable Go model of the placement protocol.
//
// It mirrors spec/tla/Placement.tla action for action: the state variables
// (now, gen, nextAttempt, table, req, waitq), the actions (Acquire, Cancel,
// BeginDispatch, Complete, Resolve, Release, Abandon, Invalidate, Close,
// InvalidateKey, Expire, DropStale, QuarantineExpire, ReservationTimeout,
// DispatchTimeout, Bump, Advance), the invariants and the action properties carry the same
// names. The model is pure: no wall clock, no shared state, and its actions
// start no goroutines. Every action takes a State and returns the next
// State, a Result that says what the caller observes, and whether the
// action was enabled.
//
// The explorer in this package enumerates every reachable state of a model
// configured from a TLC config file, breadth first, on every core
// (Options.Workers) with the report sequential BFS gives, and CI compares
// its state set with the one TLC reported (spec/tla/results).
package model

import (
	"fmt"
)

// None is the index used for "no key", "no target" and "no request"; the
// spec's model values NoKey, NoTarget and NoReq.
const None = -1

// EntryState is the state of a key's table entry.
type EntryState uint8

// Entry states, as in the spec's EntryStates.
const (
	Absent EntryState = iota
	Reserved
	Dispatching
	Bound
	Quarantined
)

var entryStateNames = [...]string{"Absent", "Reserved", "Dispatching", "Bound", "Quarantined"}

// String returns the name of s as the spec writes it.
func (s EntryState) String() string {
	if int(s) < len(entryStateNames) {
		return entryStateNames[s]
	}
	return fmt.Sprintf("EntryState(%d)", uint8(s))
}

// Pc is what a request holds (its program counter in the spec).
type Pc uint8

// Request program counters, as in the spec's Pcs.
const (
	PcIdle        Pc = iota // holds nothing
	PcWaiting               // waits for the key's initializer
	PcReserved              // holds the key's reservation
	PcRevoked               // held a reservation the initialization timeout revoked
	PcDispatching           // holds a dispatch guard for a current attempt
	PcLate                  // holds a dispatch guard whose attempt was quarantined
	PcHolding               // holds a lease on binding version Attempt
)

var pcNames = [...]string{"Idle", "Waiting", "Reserved", "Revoked", "Dispatching", "Late", "Holding"}

// String returns the name of p as the spec writes it.
func (p Pc) String() string {
	if int(p) < len(pcNames) {
		return pcNames[p]
	}
	return fmt.Sprintf("Pc(%d)", uint8(p))
}

// Outcome is what a dispatcher learns about its attempt.
type Outcome uint8

// Dispatch outcomes, as in the spec's Outcomes.
const (
	Accepted Outcome = iota
	DefinitelyNotAccepted
	Ambiguous
)

var outcomeNames = [...]string{"Accepted", "DefinitelyNotAccepted", "Ambiguous"}

// String returns the name of o as the spec writes it.
func (o Outcome) String() string {
	if int(o) < len(outcomeNames) {
		return outcomeNames[o]
	}
	return fmt.Sprintf("Outcome(%d)", uint8(o))
}

// Resolution settles a quarantined attempt, as in the spec's Resolutions.
type Resolution uint8

// Resolutions.
const (
	ResolvedAccepted Resolution = iota
	ResolvedNotAccepted
)

// String returns the name of r as the spec writes it.
func (r Resolution) String() string {
	switch r {
	case ResolvedAccepted:
		return "Accepted"
	case ResolvedNotAccepted:
		return "NotAccepted"
	}
	return fmt.Sprintf("Resolution(%d)", uint8(r))
}

// Entry is one key's table entry. Fields a state does not use hold their
// zero value (None for Holder and Target), exactly as in the spec.
type Entry struct {
	St       EntryState
	Holder   int   // request holding the reservation or dispatch, or None
	Attempt  int   // attempt id; for Bound, the binding version
	Target   int   // provisional or bound target, or None
	TGen     int   // that target's generation, or 0
	Deadline int64 // initialization, quarantine or idle deadline, or 0
	// RDeadline is the reservation's own deadline (Reserved, Dispatching),
	// set when the key is reserved and kept across dispatches, or 0.
	RDeadline int64
	Leases    int  // active leases (Bound only)
	Closing   bool // the session's final request has arrived (Bound only)
}

// AbsentEntry is the entry of a key that holds nothing.
var AbsentEntry = Entry{St: Absent, Holder: None, Target: None}

// Req is what one request holds.
type Req struct {
	Pc      Pc
	Key     int // the key, or None
	Attempt int // the attempt (dispatch guards) or binding version (leases), or 0
}

// IdleReq is a request that holds nothing.
var IdleReq = Req{Pc: PcIdle, Key: None}

// State is the model's state: the spec's variables.
type State struct {
	Now         int64
	Gen         []int // target -> current generation
	NextAttempt int
	Table       []Entry // key -> entry
	Req         []Req   // request -> what it holds
	// Waitq is the spec's waitq: key -> its waiting requests, longest
	// waiter first.
	Waitq [][]int
	// Since is the spec's ghost `since`: when each key's current phase
	// (initialization or quarantine) began, or 0 (see Track).
	Since []int64
	// Arrivals is the spec's ghost `arrivals`: key -> the requests waiting
	// on it, in the order they began to wait (see Track). It equals Waitq
	// whenever the protocol is right.
	Arrivals [][]int
}

// Clone returns a deep copy of s.
func (s *State) Clone() State {
	c := State{Now: s.Now, NextAttempt: s.NextAttempt}
	c.Gen = append([]int(nil), s.Gen...)
	c.Table = append([]Entry(nil), s.Table...)
	c.Req = append([]Req(nil), s.Req...)
	c.Since = append([]int64(nil), s.Since...)
	c.Waitq = cloneQueues(s.Waitq)
	c.Arrivals = cloneQueues(s.Arrivals)
	return c
}

func cloneQueues(qs [][]int) [][]int {
	if qs == nil {
		return nil
	}
	c := make([][]int, len(qs))
	for k, q := range qs {
		if len(q) > 0 {
			c[k] = append([]int(nil), q...)
		}
	}
	return c
}

func queuesEqual(a, b [][]int) bool {
	if len(a) != len(b) {
		return false
	}
	for k := range a {
		if len(a[k]) != len(b[k]) {
			return false
		}
		for i := range a[k] {
			if a[k][i] != b[k][i] {
				return false
			}
		}
	}
	return true
}

// Equal reports whether s and t are the same state.
func (s *State) Equal(t *State) bool {
	if s.Now != t.Now || s.NextAttempt != t.NextAttempt ||
		len(s.Gen) != len(t.Gen) || len(s.Table) != len(t.Table) || len(s.Req) != len(t.Req) {
		return false
	}
	for i := range s.Gen {
		if s.Gen[i] != t.Gen[i] {
			return false
		}
	}
	for i := range s.Table {
		if s.Table[i] != t.Table[i] {
			return false
		}
	}
	for i := range s.Req {
		if s.Req[i] != t.Req[i] {
			return false
		}
	}
	if len(s.Since) != len(t.Since) || !queuesEqual(s.Waitq, t.Waitq) || !queuesEqual(s.Arrivals, t.Arrivals) {
		return false
	}
	for i := range s.Since {
		if s.Since[i] != t.Since[i] {
			return false
		}
	}
	return true
}

func tablesEqual(a, b []Entry) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// Config holds the spec's constants.
type Config struct {
	Keys     []string // names of the keys (model values in the TLC config)
	Targets  []string // names of the targets
	Requests []string // names of the requests
	MaxGen   int      // generations range over 1..MaxGen; 0 means unbounded
	Capacity int      // live entries allowed in the table
	TTL      int64    // idle time-to-live of a binding
	// ReserveTimeout is how long a reservation may take to dispatch,
	// across DefinitelyNotAccepted retries.
	ReserveTimeout int64
	// DispatchTimeLimit is how long one dispatch may take to learn its
	// outcome (the spec's constant; DispatchTimeout is the action).
	DispatchTimeLimit int64
	// QuarantineTTL is how long an unsettled attempt blocks its key.
	QuarantineTTL int64
	MaxClock      int64 // the largest representable instant
	MaxAttempt    int   // bound on attempt ids; 0 means unbounded
}

// Validate reports a configuration the model cannot run.
func (c *Config) Validate() error {
	switch {
	case len(c.Keys) == 0 || len(c.Targets) == 0 || len(c.Requests) == 0:
		return fmt.Errorf("model: config needs at least one key, target and request")
	case c.Capacity < 0:
		return fmt.Errorf("model: Capacity %d is negative", c.Capacity)
	case c.TTL < 1 || c.ReserveTimeout < 1 || c.DispatchTimeLimit < 1 || c.QuarantineTTL < 1:
		return fmt.Errorf("model: TTL %d, ReserveTimeout %d, DispatchTimeLimit %d and QuarantineTTL %d must be at least 1",
			c.TTL, c.ReserveTimeout, c.DispatchTimeLimit, c.QuarantineTTL)
	case c.MaxGen < 0 || c.MaxAttempt < 0 || c.MaxClock < 0:
		return fmt.Errorf("model: MaxGen, MaxAttempt and MaxClock must not be negative")
	}
	return nil
}

// Init returns the spec's initial state.
func (m *Model) Init() State {
	s := State{Now: 0, NextAttempt: 1}
	s.Gen = make([]int, len(m.Cfg.Targets))
	for i := range s.Gen {
		s.Gen[i] = 1
	}
	s.Table = make([]Entry, len(m.Cfg.Keys))
	for i := range s.Table {
		s.Table[i] = AbsentEntry
	}
	s.Req = make([]Req, len(m.Cfg.Requests))
	for i := range s.Req {
		s.Req[i] = IdleReq
	}
	s.Since = make([]int64, len(m.Cfg.Keys))
	s.Waitq = make([][]int, len(m.Cfg.Keys))
	s.Arrivals = make([][]int, len(m.Cfg.Keys))
	return s
}
