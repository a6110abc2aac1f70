// Package claims is the executable Go model of the cross-replica claims
// protocol (docs/claims.md).
//
// It mirrors spec/tla/Claims.tla action for action: the state variables
// (rev, gen, claim, holders, up, cache, lease, chan, the move budget's
// nmoves and the ghosts ended, lineage and moves),
// the actions (Claim, PlaceLocal, Move, Route, Release, Ambiguous, Resolve,
// Close, Reconcile, Expire, BumpGeneration, Receive, Duplicate, Drop,
// Disconnect, Reconnect, Crash), the invariants, the action properties and
// the liveness properties (checked under the spec's Fairness on the whole
// state graph) carry the same names, and the broken variants of
// spec/tla/MCClaims.tla are switchable by name (Model.Override). The ghosts
// ended, lineage and moves are written by TrackEnded, TrackLineage and
// TrackMoves, outside every action; the properties measure with them,
// never with a claim's Born. The model is pure: no wall clock, no shared state, no goroutines.
//
// Explore enumerates every reachable state of a model configured from a
// TLC config file (spec/tla/MCClaims*.cfg), breadth first, and its tests
// compare the state set with the one TLC reported (spec/tla/results): the
// same distinct states, generated steps, depth and state-set hash (the
// core's scheme: model.StateSetHash over canonical state keys).
package claims

import (
	"errors"
	"fmt"
)

// None is the index used for "no replica", "no session" and "no worker";
// the spec's model values NoReplica, NoSession and NoWorker.
const None = -1

// St is the state of a claim in the store or of a replica's cache entry.
type St uint8

// Claim and entry states. StNone is the spec's "None" (no claim, no
// entry); StUnclaimed only appears in caches (a placement made while the
// store was unreachable).
const (
	StNone St = iota
	StBound
	StQuarantined
	StClosing
	StUnclaimed
)

var stNames = [...]string{"None", "Bound", "Quarantined", "Closing", "Unclaimed"}

// String returns the spec's name of s.
func (s St) String() string {
	if int(s) < len(stNames) {
		return stNames[s]
	}
	return fmt.Sprintf("St(%d)", uint8(s))
}

// claimed reports whether s is one of the spec's ClaimStates.
func (s St) claimed() bool { return s == StBound || s == StQuarantined || s == StClosing }

// Claim is one revision of a session's claim in the store.
type Claim struct {
	St      St
	Rev     int // the revision that wrote it
	Born    int // the revision that created its lineage
	Target  int // worker index, None when St is StNone
	Gen     int
	Attempt int // a quarantined attempt, named by the revision it was dispatched under
}

// Entry is a replica's cache entry for a session.
type Entry struct {
	St     St
	Rev    int
	Target int
	Gen    int
}

// Lease is a replica's local leases on a session: how many, and the claim
// revision they are on (0 for an unclaimed placement).
type Lease struct{ N, Rev int }

// Event is one item of a watch channel: a Delete of revision Rev of
// session S, or a Reset (S None, Rev 0).
type Event struct {
	Reset bool
	S     int
	Rev   int
}

// ResetEv is the spec's ResetEv.
var ResetEv = Event{Reset: true, S: None}

// State is one state of the spec's view: every variable but the ghost step.
// Cache and Lease are indexed by r*len(Sessions)+s.
type State struct {
	Rev     int
	Faults  int // faults injected so far (Crash, Disconnect, Drop, Duplicate)
	NMoves  int // moves asked so far (the spec's nmoves, bounded by MaxMoves)
	Gen     []int
	Claim   []Claim
	Holders []uint64 // per session: a bit per replica
	Up      []bool
	Cache   []Entry
	Lease   []Lease
	Chan    [][]Event
	Ended   []uint64 // ghost, per session: bit v set when revision v ended
	Lineage []int    // ghost, per session: the revision that began its claim's lineage (0: no claim)
	Moves   [][]Move // ghost, per session: the moves made, sorted (the spec's set of <<from, to>>)
}

// Move is one element of the ghost moves: a move from revision From (the
// one the mover routed from) that wrote revision To.
type Move struct{ From, To int }

// Clone returns a deep copy of s.
func (s *State) Clone() State {
	n := State{Rev: s.Rev, Faults: s.Faults, NMoves: s.NMoves}
	n.Gen = append([]int(nil), s.Gen...)
	n.Claim = append([]Claim(nil), s.Claim...)
	n.Holders = append([]uint64(nil), s.Holders...)
	n.Up = append([]bool(nil), s.Up...)
	n.Cache = append([]Entry(nil), s.Cache...)
	n.Lease = append([]Lease(nil), s.Lease...)
	n.Chan = make([][]Event, len(s.Chan))
	for i, q := range s.Chan {
		n.Chan[i] = append([]Event(nil), q...)
	}
	n.Ended = append([]uint64(nil), s.Ended...)
	n.Lineage = append([]int(nil), s.Lineage...)
	n.Moves = make([][]Move, len(s.Moves))
	for i, ms := range s.Moves {
		n.Moves[i] = append([]Move(nil), ms...)
	}
	return n
}

// Config is a model configuration: the spec's constants.
type Config struct {
	Replicas, Sessions, Workers []string
	MaxRev, MaxGen, MaxLeases   int
	MaxChan, MaxFaults          int
	MaxMoves                    int // moves asked per behaviour (0: none)
}

// ErrConfig is returned (wrapped) for a configuration the model cannot
// explore.
var ErrConfig = errors.New("claims: invalid config")

// Validate checks the bounds the model relies on.
func (c *Config) Validate() error {
	switch {
	case len(c.Replicas) == 0 || len(c.Sessions) == 0 || len(c.Workers) == 0:
		return fmt.Errorf("%w: Replicas, Sessions and Workers must be non-empty", ErrConfig)
	case len(c.Replicas) > 64:
		return fmt.Errorf("%w: at most 64 replicas", ErrConfig)
	case c.MaxRev < 0 || c.MaxRev > 63:
		return fmt.Errorf("%w: MaxRev must be in 0..63", ErrConfig)
	case c.MaxFaults < 0 || c.MaxFaults > 250:
		return fmt.Errorf("%w: MaxFaults must be in 0..250", ErrConfig)
	case c.MaxMoves < 0 || c.MaxMoves > 250:
		return fmt.Errorf("%w: MaxMoves must be in 0..250", ErrConfig)
	case c.MaxGen < 1 || c.MaxGen > 250 || c.MaxLeases < 1 || c.MaxLeases > 250 || c.MaxChan < 1 || c.MaxChan > 250:
		return fmt.Errorf("%w: MaxGen, MaxLeases and MaxChan must be in 1..250", ErrConfig)
	case len(c.Sessions) > 250 || len(c.Workers) > 250:
		return fmt.Errorf("%w: at most 250 sessions and workers", ErrConfig)
	}
	return nil
}

// Model is a configured model, with the broken variants applied (if any).
type Model struct {
	Cfg      Config
	Variants []string
	ops      ops
}

// New returns the model of cfg with the spec's own definitions.
func New(cfg Config) (*Model, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	return &Model{Cfg: cfg, ops: defaultOps()}, nil
}

// ix is the index of (r, s) in Cache and Lease.
func (m *Model) ix(r, s int) int { return r*len(m.Cfg.Sessions) + s }

// Init is the spec's initial state.
func (m *Model) Init() State {
	c := &m.Cfg
	nr, ns := len(c.Replicas), len(c.Sessions)
	s := State{
		Gen:     make([]int, len(c.Workers)),
		Claim:   make([]Claim, ns),
		Holders: make([]uint64, ns),
		Up:      make([]bool, nr),
		Cache:   make([]Entry, nr*ns),
		Lease:   make([]Lease, nr*ns),
		Chan:    make([][]Event, nr),
		Ended:   make([]uint64, ns),
		Lineage: make([]int, ns),
		Moves:   make([][]Move, ns),
	}
	for w := range s.Gen {
		s.Gen[w] = 1
	}
	for i := range s.Claim {
		s.Claim[i] = noClaim
	}
	for r := range s.Up {
		s.Up[r] = true
	}
	for i := range s.Cache {
		s.Cache[i] = noEntry
	}
	return s
}

var (
	noClaim = Claim{St: StNone, Target: None}
	noEntry = Entry{St: StNone, Target: None}
)

// Key is a compact canonical encoding of s: two states are equal exactly
// when their keys are. The explorer deduplicates on it and the state-set
// hash (model.StateSetHash) is computed over it.
func (s *State) Key() string { return string(appendKey(nil, s)) }

func appendKey(b []byte, s *State) []byte {
	w := func(v int) { b = append(b, byte(v+1)) } // None (-1) is 0
	w(s.Rev)
	w(s.Faults)
	w(s.NMoves)
	for _, g := range s.Gen {
		w(g)
	}
	for i, c := range s.Claim {
		w(int(c.St))
		w(c.Rev)
		w(c.Born)
		w(c.Target)
		w(c.Gen)
		w(c.Attempt)
		b = appendU64(b, s.Holders[i])
		b = appendU64(b, s.Ended[i])
		w(s.Lineage[i])
		w(len(s.Moves[i]))
		for _, mv := range s.Moves[i] {
			w(mv.From)
			w(mv.To)
		}
	}
	for _, u := range s.Up {
		if u {
			b = append(b, 1)
		} else {
			b = append(b, 0)
		}
	}
	for i, e := range s.Cache {
		w(int(e.St))
		w(e.Rev)
		w(e.Target)
		w(e.Gen)
		w(s.Lease[i].N)
		w(s.Lease[i].Rev)
	}
	for _, q := range s.Chan {
		w(len(q))
		for _, ev := range q {
			if ev.Reset {
				b = append(b, 0)
			} else {
				b = append(b, 1)
			}
			w(ev.S)
			w(ev.Rev)
		}
	}
	return b
}

func appendU64(b []byte, v uint64) []byte {
	for v >= 0x80 {
		b = append(b, byte(v)|0x80)
		v >>= 7
	}
	return append(b, byte(v))
}

// addMove returns a new slice: ms with mv added, kept sorted and without
// duplicates (the spec's set of <<from, to>>). ms is not changed.
func addMove(ms []Move, mv Move) []Move {
	out := make([]Move, 0, len(ms)+1)
	added := false
	for _, x := range ms {
		if !added && (x.From > mv.From || x.From == mv.From && x.To >= mv.To) {
			if x != mv {
				out = append(out, mv)
			}
			added = true
		}
		out = append(out, x)
	}
	if !added {
		out = append(out, mv)
	}
	return out
}
