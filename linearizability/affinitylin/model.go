// Package affinitylin checks the affinity layer (impl/affinity) for
// linearizability with Porcupine: several goroutines drive one real
// affinity.Layer through its public calls, every call is recorded with its
// call and return times, and the history is checked against a sequential
// model of what the layer promises (this file): worker membership (Join,
// Fail, Leave) and the requests on a few session keys (Start, Eligible,
// Dispatch, Complete, Done), with soft moves (the first of concurrent
// moves wins), terminal close, and membership changes racing with hits.
//
// A request's "begin" (Start, Eligible, Dispatch) and "finish" (Complete,
// Done) are recorded as one Porcupine operation per public call: the layer
// reads the membership and the core table at each of them, not in one
// atomic step, so a begin recorded as one operation would have to be
// linearized at one point and legal histories would be rejected (a Fail
// landing between Start and Dispatch: Start keeps the lease on the binding,
// Dispatch refuses the failed worker). The client's goroutine makes the
// calls of one request in order, so each request's calls are still
// ordered in the history.
//
// The clock is a placement.ManualClock the test never advances: nothing
// expires, and time is out of the picture.
package affinitylin

import (
	"fmt"
	"hash/maphash"
	"strings"

	"github.com/anishathalye/porcupine"
)

// Bounds of the model's state (fixed arrays keep State comparable).
const (
	MaxWorkers = 3
	MaxKeys    = 3
	MaxClients = 8
)

// Op is a recorded public call.
type Op uint8

// The operations.
const (
	OpJoin     Op = iota + 1 // Layer.Join(worker, identity)
	OpFail                   // Layer.Fail(worker)
	OpLeave                  // Layer.Leave(worker)
	OpStart                  // Layer.Start(key, pin, final)
	OpEligible               // Turn.Eligible(every worker, nil)
	OpDispatch               // Turn.Dispatch(target)
	OpComplete               // Attempt.Complete(outcome)
	OpDone                   // Turn.Done
	// OpMove is the first half of a soft move inside a Dispatch: the
	// fenced invalidation of the version the request holds. The layer
	// invalidates, then reserves the session with a separate call, and
	// other requests act in between (a request preempted there sees the
	// session placed and gone again when it reserves); so a Dispatch that
	// moved is recorded as two operations over the same interval, OpMove
	// and OpDispatch, and the model takes OpMove first.
	OpMove
	// OpStartHit and OpStartMove are the beginning and the end of a lease
	// a Start takes and gives up while it runs: a Start reads the session
	// with a hit (a lease) and then judges the binding; it gives the lease
	// up when the binding must move (its worker failed, left or restarted:
	// a fenced invalidation), when the request is refused (a hard-mode pin
	// conflict: a release), or when the binding ended between the hit and
	// the judgment (a release), and reads the session again. Meanwhile the
	// lease counts: a Close by another request that ends what looks like
	// the binding's last lease leaves it closing, still answering hits,
	// until this lease ends. The layer reports each lease it gave up
	// (internal/testhooks.StartGaveUp), so a Start is recorded with exactly
	// that many pairs (Input.Moves), in slots 0, 1, ..., each pair over the
	// Start's interval; they linearize before the Start itself.
	OpStartMove
	OpStartHit
	// OpRegister is the first half of a restarting Join over a replica:
	// the store's registration of the new identity, whose generation
	// fences the worker's claims (so the bindings and first dispatches on
	// its current instance) before the Join publishes the new instance
	// (over the local core the order is the other way round: see
	// complete). The harness records it over the Join's interval, with
	// Input.Registered on the Join, and the model takes it first.
	OpRegister
	// OpDeregister is the second half of a Leave over a replica: the
	// store's deregistration, after the Leave published the membership
	// and fenced the worker's bindings here (as over the core). The
	// quarantines of the departed instance end with it, when the
	// replica's view of the store's members moves on. The harness records
	// it over the Leave's interval, with Input.Registered on the Leave,
	// and the model takes it after.
	OpDeregister
)

var opNames = [...]string{"?", "Join", "Fail", "Leave", "Start", "Eligible", "Dispatch", "Complete", "Done", "Move", "StartMove", "StartHit", "Register", "Deregister"}

// String names the operation as the reports print it.
func (o Op) String() string {
	if int(o) < len(opNames) {
		return opNames[o]
	}
	return fmt.Sprintf("Op(%d)", o)
}

// Outcomes a request reports (placement.Outcome minus one).
const (
	Accepted = iota
	NotAccepted
	Ambiguous
)

var outcomeNames = [...]string{"Accepted", "DefinitelyNotAccepted", "Ambiguous"}

// Input is one call: what the test asked for.
type Input struct {
	Op     Op  `json:"op"`
	Client int `json:"client"`
	// Worker: the worker of a membership op, or a dispatch's target
	// (worker-only targets: the workers serve no ranks).
	Worker int `json:"worker"`
	// Ident: a Join's instance identity (0 or 1: "a" or "b").
	Ident int `json:"ident,omitempty"`
	// Key, Pin (-1: none) and Final: a Start's request.
	Key   int  `json:"key,omitempty"`
	Pin   int  `json:"pin"`
	Final bool `json:"final,omitempty"`
	// Outcome: a Complete's outcome.
	Outcome int `json:"outcome,omitempty"`
	// Moves: a Start's number of OpStartHit/OpStartMove pairs (they
	// linearize before it); Slot: which pair an OpStartHit or OpStartMove
	// is.
	Moves int `json:"moves,omitempty"`
	Slot  int `json:"slot,omitempty"`
	// Invalidated: the Start gave the lease of this pair up by invalidating
	// the binding (its worker failed, left or restarted), not by a release
	// (a hard-mode pin conflict, or a binding that ended between the hit
	// and the judgment).
	Invalidated bool `json:"invalidated,omitempty"`
	// Racy: a membership op on the dispatch's target overlapped the
	// Dispatch call (set after the run, from the recorded intervals): the
	// layer's re-read of the membership after BeginDispatch may then refuse
	// the target (rolled back, nothing sent) although the model's
	// linearization point saw it eligible.
	Racy bool `json:"racy,omitempty"`
	// Registered: a restarting Join over a replica, recorded with its
	// OpRegister.
	Registered bool `json:"registered,omitempty"`
}

// ErrKind classifies an error a call returned.
type ErrKind uint8

// The error kinds.
const (
	ErrNone           ErrKind = iota
	ErrPinConflict            // *PinError, ErrPinConflict
	ErrQuarantined            // *QuarantinedError
	ErrIneligible             // *IneligibleError
	ErrMismatch               // *MismatchError
	ErrNoCandidates           // ErrNoCandidates
	ErrNotAccepted            // placement.ErrNotAccepted
	ErrAmbiguous              // *placement.AmbiguousError
	ErrOutcomeUnknown         // ErrOutcomeUnknown
	ErrCancelled              // Start gave up waiting (placement.ErrCancelled)
	ErrUnknownWorker          // Fail or Leave of a non-member
	ErrOther                  // anything else: never legal
)

var errNames = [...]string{"nil", "PinConflict", "Quarantined", "Ineligible", "Mismatch", "NoCandidates",
	"NotAccepted", "Ambiguous", "OutcomeUnknown", "Cancelled", "UnknownWorker", "Other"}

// String names the error kind as the reports print it.
func (e ErrKind) String() string {
	if int(e) < len(errNames) {
		return errNames[e]
	}
	return fmt.Sprintf("ErrKind(%d)", e)
}

// Attempt kinds a Dispatch returns.
const (
	AttNone     = iota
	AttHit      // a later turn on the binding (Attempt.Hit)
	AttPlacing  // a dispatch that places the session (Attempt.ID != 0)
	AttUnpinned // no binding involved
)

var attNames = [...]string{"none", "hit", "placing", "unpinned"}

// View is what a Turn's accessors say after a call: Bound (the worker, -1
// if not bound), Placing, and Unpinned (an affinity.Cause).
type View struct {
	Bound   int  `json:"bound"`
	Placing bool `json:"placing,omitempty"`
	Cause   int  `json:"cause,omitempty"`
}

// Output is what a call returned.
type Output struct {
	Err ErrKind `json:"err,omitempty"`
	// Msg is the error's text (not compared).
	Msg string `json:"msg,omitempty"`
	// Join: a Join's JoinKind.
	Join int `json:"join,omitempty"`
	// Cands: Eligible's candidates, a bit per worker.
	Cands uint8 `json:"cands,omitempty"`
	// Att and Target: a Dispatch's attempt.
	Att    int `json:"att,omitempty"`
	Target int `json:"target,omitempty"`
	// View: the Turn's accessors after Start, Dispatch and Complete.
	View View `json:"view"`
	// Read (a Start over a replica, bound): the Start read the session's
	// claim from the store, holding its reservation, rather than hit the
	// replica's cache (internal/testhooks.StartRead).
	Read bool `json:"read,omitempty"`
}

// same compares outputs, ignoring Msg.
func (o Output) same(p Output) bool { o.Msg, p.Msg = "", ""; return o == p }

// Key states.
const (
	kAbsent uint8 = iota
	kPlacing
	kBound
	kQuarantined
)

// Turn states (as impl/affinity's turnState).
const (
	tIdle uint8 = iota // no request
	tUnpinned
	tBound
	tReserved
	tMoving
	tEnded
	// tAdopting (over a replica): the Start reserved the session and read
	// its claim, a binding (W, Inst, Ver in the key's state, Read): the
	// request is bound to it, holds no lease, and its dispatch there
	// adopts it (fAdopt); meanwhile the session's other Starts wait, as
	// for any reservation.
	tAdopting
)

// Flights.
const (
	fNone uint8 = iota
	fHit
	fFirst
	fUnpinned
	// fAdopt (over a replica): the dispatch of a bound request to its
	// binding's worker adopted the session's claim read from the store
	// (the replica had not cached it, or no longer did: a membership
	// change or a Reset evicts its cache): a placing dispatch, under an
	// attempt id, of the binding (B3 over replicas).
	fAdopt
)

// Causes (affinity.Cause values the model produces).
const (
	CauseQuarantined = 5
	CauseMoveLost    = 6
	CauseClosing     = 11
)

// Join kinds (affinity.JoinKind values).
const (
	Joined    = 1
	Recovered = 2
	Restarted = 3
)

type member struct {
	Present, Failed bool
	Ident, Inst     uint8
	// Registering: an OpRegister fenced the current instance; its Join
	// (Input.Registered) publishes the new one.
	Registering bool
	// Leaving: a Leave over a replica (Input.Registered) removed the
	// instance Leaving-1; its OpDeregister ends its quarantines.
	Leaving uint8
}

type keyState struct {
	St      uint8
	By      int8  // the placing client
	W       int8  // the bound or quarantined worker
	Inst    uint8 // its instance
	Ver     uint16
	Leases  uint8
	Closing bool
	// Read (kPlacing, over a replica): the reserving request read the
	// session's claim, the binding W, Inst, Ver with its Leases and
	// Closing, which stay the session's meanwhile (requests in flight on
	// it go on); a Done without a dispatch leaves it bound.
	Read bool
	// Closed (over a replica): the session's binding closed at its final
	// request's last lease, and the replica's close of the claim may not
	// have landed in the store yet: until the session is placed again, a
	// Start may find the claim still there, being closed, and go
	// unpinned (CauseClosing), as over a claim closing on another replica.
	Closed bool
}

type client struct {
	St     uint8
	Key    int8
	Pin    int8
	Final  bool
	Cause  uint8
	Lease  bool // holds a lease on (Key, LVer), target LW
	LVer   uint16
	LW     int8
	Amb    bool // a later turn's outcome was unknown: Done abandons
	Moved  bool // a soft move invalidated the lease's version (OpMove): Dispatch reserves next
	Fly    uint8
	FW     int8
	FInst  uint8
	Fenced bool // the first dispatch's worker instance was fenced since
	// Late: a moved dispatch overlapped by a membership change of its
	// target (Input.Racy) reserved the session before the target's
	// restart and read the target's instance after it (see lateFirst).
	Late bool
	Hint int8 // soft, quarantined: the quarantined attempt's worker (Eligible narrows to it while dispatchable)
}

// transient is a lease a Start takes and gives up while it runs (see
// OpStartHit).
type transient struct {
	Stage uint8 // 0: not begun; 1: holding; 2: took nothing; 3: ended
	Key   int8
	Ver   uint16
	W     int8  // the binding's worker
	Inst  uint8 // and its instance
	// Bad: the worker was failed, gone or restarted at some point while
	// the lease was held (the Start judges the binding between its hit
	// and giving the lease up).
	Bad bool
}

// noteBad marks every transient lease on a worker that is now failed,
// gone or restarted.
func (s *State) noteBad() {
	for c := range s.T {
		for j := range s.T[c] {
			if tr := &s.T[c][j]; tr.Stage == 1 {
				m := &s.M[tr.W]
				tr.Bad = tr.Bad || !m.Present || m.Inst != tr.Inst || m.Failed
			}
		}
	}
}

// State is the model's state: the membership, each key, and what each
// client's request holds.
type State struct {
	Hard     bool
	Replica  bool // the layer runs over a replica (Config.Replicas)
	M        [MaxWorkers]member
	NextInst [MaxWorkers]uint8
	K        [MaxKeys]keyState
	C        [MaxClients]client
	T        [MaxClients][4]transient
}

// Init returns the model's initial state: nobody joined, every key absent
// (replica: the layer runs over a replica on a claims store).
func Init(hard, replica bool) State { return State{Hard: hard, Replica: replica} }

func (s *State) dispatchable(w int) bool {
	return w >= 0 && w < MaxWorkers && s.M[w].Present && !s.M[w].Failed
}

// stale reports whether key k's binding or quarantine names a worker
// instance that is no longer a member (it left or restarted).
func (s *State) stale(k int) bool {
	e := &s.K[k]
	m := &s.M[e.W]
	return !m.Present || m.Inst != e.Inst
}

func (s *State) current(k int, ver uint16) bool {
	e := &s.K[k]
	return (e.St == kBound || e.St == kPlacing && e.Read) && e.Ver == ver
}

func (s *State) view(c int) View {
	cl := &s.C[c]
	switch cl.St {
	case tBound, tAdopting:
		return View{Bound: int(cl.LW)}
	case tReserved, tMoving:
		return View{Bound: -1, Placing: true}
	case tUnpinned:
		return View{Bound: -1, Cause: int(cl.Cause)}
	}
	return View{Bound: -1}
}

// fence ends what the instance i of worker w backed: its bindings and
// quarantines (the core's generation bump), and marks the first dispatches
// in flight to it (their Accepted is stale at birth).
func (s *State) fence(w int, i uint8) {
	s.endQuarantines(w, i)
	s.fenceBindings(w, i)
}

// endQuarantines ends the quarantines of attempts on worker w's instance i.
func (s *State) endQuarantines(w int, i uint8) {
	for k := range s.K {
		if e := &s.K[k]; e.St == kQuarantined && int(e.W) == w && e.Inst == i {
			s.K[k] = keyState{Ver: e.Ver}
		}
	}
}

// fenceBindings ends the bindings to worker w's instance i and marks the
// first dispatches in flight to it fenced.
func (s *State) fenceBindings(w int, i uint8) {
	for k := range s.K {
		if e := &s.K[k]; e.St == kBound && int(e.W) == w && e.Inst == i {
			s.K[k] = keyState{Ver: e.Ver}
		} else if e.St == kPlacing && e.Read && int(e.W) == w && e.Inst == i {
			// The claim a reserving request read is stale: its dispatch
			// places the session anew (or, in flight, its commit is stale
			// at birth: marked below).
			e.Read, e.Leases, e.Closing = false, 0, false
		}
	}
	for c := range s.C {
		if cl := &s.C[c]; (cl.Fly == fFirst || cl.Fly == fAdopt) && int(cl.FW) == w && cl.FInst == i {
			cl.Fenced = true
		}
	}
}

// endLease ends client c's lease (Release, Close or Abandon): on the
// current version it decrements the count, and a closing binding goes
// with its last lease.
func (s *State) endLease(c int, close bool) {
	cl := &s.C[c]
	if !cl.Lease {
		return
	}
	k := int(cl.Key)
	if s.current(k, cl.LVer) {
		e := &s.K[k]
		e.Leases--
		if close {
			e.Closing = true
		}
		if e.Closing && e.Leases == 0 {
			if e.St == kPlacing {
				if s.C[e.By].Fly != fAdopt {
					// Read by a reserving request that has not dispatched:
					// the claim closes under it (its dispatch places the
					// session anew).
					e.Read, e.Closing = false, false
				}
				// Dispatched under the claim read: the request joins the
				// closing binding, and its lease's end closes it.
			} else {
				s.K[k] = keyState{Ver: e.Ver, Closed: s.Replica}
			}
		}
	}
	cl.Lease, cl.LVer, cl.LW = false, 0, -1
}

// invalidate ends client c's lease and removes the binding if the lease's
// version is current (Lease.Invalidate; on a superseded version, a
// Release).
func (s *State) invalidate(c int) {
	cl := &s.C[c]
	k := int(cl.Key)
	if cl.Lease && s.current(k, cl.LVer) {
		if e := &s.K[k]; e.St == kPlacing {
			e.Read, e.Leases, e.Closing = false, 0, false // the reservation stays
		} else {
			s.K[k] = keyState{Ver: s.K[k].Ver}
		}
	}
	cl.Lease, cl.LVer, cl.LW = false, 0, -1
}

type result struct {
	out  Output
	next State
}

// Step returns the states that may follow s when in returns out.
func Step(s State, in Input, out Output) []State {
	var next []State
	for _, r := range results(s, in) {
		if r.out.same(out) {
			next = append(next, r.next)
		}
	}
	return next
}

// results lists every (output, next state) the model allows for in in s.
func results(s State, in Input) []result {
	c := in.Client
	if c < 0 || c >= MaxClients {
		return nil
	}
	switch in.Op {
	case OpJoin, OpFail, OpLeave:
		if in.Worker < 0 || in.Worker >= MaxWorkers || in.Op == OpJoin && in.Registered != s.M[in.Worker].Registering ||
			s.M[in.Worker].Leaving != 0 {
			return nil // a registered Join comes after its OpRegister, and a Leave's OpDeregister comes first
		}
		return []result{membershipStep(s, in)}
	case OpDeregister:
		w := in.Worker
		if w < 0 || w >= MaxWorkers || s.M[w].Leaving == 0 {
			return nil
		}
		s.endQuarantines(w, s.M[w].Leaving-1)
		s.M[w].Leaving = 0
		return []result{{Output{View: View{Bound: -1}}, s}}
	case OpRegister:
		w := in.Worker
		if w < 0 || w >= MaxWorkers || !s.M[w].Present || s.M[w].Registering {
			return nil
		}
		s.M[w].Registering = true
		s.fence(w, s.M[w].Inst)
		return []result{{Output{View: View{Bound: -1}}, s}}
	case OpStart:
		if s.C[c].St != tIdle || in.Key < 0 || in.Key >= MaxKeys || in.Moves > len(s.T[c]) {
			return nil
		}
		for j := 0; j < in.Moves; j++ {
			if s.T[c][j].Stage != 3 {
				return nil // the Start's own hits and moves come first
			}
		}
		s.T[c] = [4]transient{}
		// Giving up while waiting changes nothing (the harness flags a
		// wait that reaches its limit as a lost wake-up).
		return append(start(s, in), result{Output{Err: ErrCancelled, View: View{Bound: -1}}, s})
	case OpEligible:
		if st := s.C[c].St; st == tIdle || st == tEnded {
			return nil
		}
		return []result{eligible(s, c)}
	case OpStartHit:
		j, k := in.Slot, in.Key
		if j < 0 || j >= len(s.T[c]) || k < 0 || k >= MaxKeys || s.T[c][j].Stage != 0 || (j > 0 && s.T[c][j-1].Stage != 3) {
			return nil
		}
		e := &s.K[k]
		if e.St != kBound {
			if !in.Invalidated {
				return nil
			}
			// A move of a binding to a worker instance that left or
			// restarted, hit between its Leave's (or Join's) publish and
			// the core's bump: the model fenced it at the Leave, so the
			// move changes nothing here.
			s.T[c][j] = transient{Stage: 2}
			return []result{{Output{View: View{Bound: -1}}, s}}
		}
		// The Start hit the binding (a lease); it judges it later, when
		// it gives the lease up (OpStartMove): a goroutine may be
		// descheduled between the two.
		s.T[c][j] = transient{Stage: 1, Key: int8(k), Ver: e.Ver, W: e.W, Inst: e.Inst, Bad: s.M[e.W].Failed || s.stale(k)}
		e.Leases++
		return []result{{Output{View: View{Bound: -1}}, s}}
	case OpStartMove:
		j := in.Slot
		if j < 0 || j >= len(s.T[c]) {
			return nil
		}
		switch s.T[c][j].Stage {
		case 2: // nothing held (see OpStartHit)
			s.T[c][j].Stage = 3
			return []result{{Output{View: View{Bound: -1}}, s}}
		case 1:
		default:
			return nil
		}
		tr := s.T[c][j]
		k := int(tr.Key)
		if in.Invalidated && !tr.Bad {
			return nil // a move needs its worker failed, gone or restarted, when judged
		}
		s.T[c][j].Stage = 3
		switch {
		case in.Invalidated && s.current(k, tr.Ver):
			s.K[k] = keyState{Ver: s.K[k].Ver} // the binding moves
		case !in.Invalidated && s.current(k, tr.Ver):
			e := &s.K[k]
			e.Leases--
			if e.Closing && e.Leases == 0 {
				s.K[k] = keyState{Ver: e.Ver}
			}
		}
		return []result{{Output{View: View{Bound: -1}}, s}}
	case OpMove:
		cl := &s.C[c]
		if cl.St != tBound && cl.St != tAdopting || s.Hard || cl.Fly != fNone {
			return nil
		}
		if cl.St == tAdopting {
			// The claim it read moves with its dispatch (fenced): the
			// binding ends, its reservation stays.
			e := &s.K[int(cl.Key)]
			e.Read, e.Leases, e.Closing = false, 0, false
		} else {
			s.invalidate(c)
		}
		cl.St, cl.Moved = tMoving, true
		return []result{{Output{View: View{Bound: -1}}, s}}
	case OpDispatch:
		if st := s.C[c].St; st == tIdle || st == tEnded || st == tMoving && !s.C[c].Moved || s.C[c].Fly != fNone {
			return nil
		}
		return dispatch(s, in)
	case OpComplete:
		if s.C[c].Fly == fNone {
			return nil
		}
		return complete(s, in)
	case OpDone:
		if s.C[c].St == tIdle || s.C[c].Fly != fNone {
			return nil
		}
		return []result{done(s, c)}
	}
	return nil
}

func membershipStep(s State, in Input) result {
	w := in.Worker
	m := &s.M[w]
	out := Output{View: View{Bound: -1}}
	switch in.Op {
	case OpJoin:
		ident := uint8(in.Ident + 1)
		switch {
		case !m.Present:
			out.Join = Joined
			s.NextInst[w]++
			*m = member{Present: true, Ident: ident, Inst: s.NextInst[w]}
		case m.Ident == ident:
			out.Join = Recovered
			m.Failed = false
		default:
			out.Join = Restarted
			old := m.Inst
			s.NextInst[w]++
			*m = member{Present: true, Ident: ident, Inst: s.NextInst[w]}
			for c := range s.C {
				if cl := &s.C[c]; cl.Late && cl.Fly == fFirst && int(cl.FW) == w && cl.FInst == old {
					// Its instance was read after this restart (lateFirst).
					cl.FInst, cl.Late = m.Inst, false
				}
			}
			s.fence(w, old)
		}
	case OpFail:
		if !m.Present {
			out.Err = ErrUnknownWorker
		} else {
			m.Failed = true
		}
	case OpLeave:
		switch {
		case !m.Present:
			out.Err = ErrUnknownWorker
		case in.Registered:
			// Over a replica: its quarantines end at OpDeregister.
			old := m.Inst
			*m = member{Leaving: old + 1}
			s.fenceBindings(w, old)
		default:
			old := m.Inst
			*m = member{}
			s.fence(w, old)
		}
	}
	s.noteBad()
	return result{out, s}
}

func start(s State, in Input) []result {
	c, k := in.Client, in.Key
	s.C[c] = client{St: tIdle, Key: int8(k), Pin: int8(in.Pin), Final: in.Final, LW: -1, FW: -1, Hint: -1}
	e := &s.K[k]
	errOut := func(kind ErrKind) result {
		n := s
		n.C[c] = client{LW: -1, FW: -1, Key: -1, Pin: -1, Hint: -1}
		return result{Output{Err: kind, View: View{Bound: -1}}, n}
	}
	place := func() result {
		n := s
		n.K[k] = keyState{St: kPlacing, By: int8(c), Ver: e.Ver}
		n.C[c].St = tReserved
		return result{Output{View: n.view(c)}, n}
	}
	var pinErr []result
	if in.Pin >= 0 && !s.dispatchable(in.Pin) {
		// P2: the pin is judged first, before the session is read (and
		// before any wait): an error now, or a pin judged before its
		// worker failed or left, with the session read after.
		pinErr = []result{errOut(ErrIneligible)}
	}
	return append(pinErr, startSession(s, in, errOut, place)...)
}

func startSession(s State, in Input, errOut func(ErrKind) result, place func() result) []result {
	c, k := in.Client, in.Key
	cl := &s.C[c]
	e := &s.K[k]
	switch e.St {
	case kPlacing:
		return nil // waits until the placing request ends
	case kQuarantined:
		var rs []result
		if s.stale(k) {
			// A quarantine made on an instance that left or restarted
			// while its Leave or Join ran (see complete): the core drops
			// it at that call's generation bump, which the model cannot
			// place; before it, the session still reads quarantined.
			rs = append(rs, place())
		}
		if s.Hard {
			return append(rs, errOut(ErrQuarantined))
		}
		cl.St, cl.Cause, cl.Hint = tUnpinned, CauseQuarantined, e.W
		return append(rs, result{Output{View: s.view(c)}, s})
	case kBound:
		if s.M[e.W].Failed || s.stale(k) {
			// B1, B2: the bound worker failed, left or restarted: the
			// binding moves (a fenced invalidation), the session is
			// placed anew.
			return []result{place()}
		}
		if s.Hard && in.Pin >= 0 && in.Pin != int(e.W) {
			return []result{errOut(ErrPinConflict)} // P4, hard: the binding is kept
		}
		var rs []result
		if s.Replica {
			// The replica's cache no longer holds the binding (a
			// membership change, a Reset or a refusal evicted it): the
			// Start reserves the session and reads the claim.
			read := s
			rk := &read.K[k]
			rk.St, rk.By, rk.Read = kPlacing, int8(c), true
			read.C[c].St, read.C[c].LW = tAdopting, e.W
			rs = append(rs, result{Output{View: read.view(c), Read: true}, read})
		}
		e.Leases++
		cl.St, cl.Lease, cl.LVer, cl.LW = tBound, true, e.Ver, e.W
		return append(rs, result{Output{View: s.view(c)}, s})
	}
	if e.Closed {
		// F1 over a replica: the close of the claim may still be in
		// flight.
		closing := s
		closing.C[c].St, closing.C[c].Cause = tUnpinned, CauseClosing
		return []result{place(), {Output{View: closing.view(c)}, closing}}
	}
	return []result{place()}
}

func eligible(s State, c int) result {
	cl := &s.C[c]
	view := s.view(c)
	all := uint8(0)
	for w := range s.M {
		if s.dispatchable(w) {
			all |= 1 << w
		}
	}
	switch {
	case cl.Pin >= 0:
		if !s.dispatchable(int(cl.Pin)) {
			return result{Output{Err: ErrIneligible, View: view}, s}
		}
		return result{Output{Cands: 1 << cl.Pin, View: view}, s}
	case cl.St == tUnpinned && cl.Cause == CauseQuarantined && cl.Hint >= 0 && s.dispatchable(int(cl.Hint)):
		// Q1, soft: narrowed to the quarantined attempt's worker.
		return result{Output{Cands: 1 << cl.Hint, View: view}, s}
	case cl.St == tBound || cl.St == tAdopting:
		if s.dispatchable(int(cl.LW)) {
			return result{Output{Cands: 1 << cl.LW, View: view}, s}
		}
		if s.Hard {
			return result{Output{Err: ErrIneligible, View: view}, s}
		}
	}
	if all == 0 {
		return result{Output{Err: ErrNoCandidates, View: view}, s}
	}
	return result{Output{Cands: all, View: view}, s}
}

func dispatch(s State, in Input) []result {
	c, t := in.Client, in.Worker
	cl := &s.C[c]
	k := int(cl.Key)
	// (A moved request passed these checks before its OpMove.)
	if !cl.Moved && !s.dispatchable(t) {
		return []result{{Output{Err: ErrIneligible, View: s.view(c)}, s}}
	}
	if !cl.Moved && cl.Pin >= 0 && int(cl.Pin) != t {
		return []result{{Output{Err: ErrMismatch, View: s.view(c)}, s}}
	}
	var rs []result
	switch cl.St {
	case tUnpinned:
		cl.Fly, cl.FW = fUnpinned, int8(t)
		return []result{{Output{Att: AttUnpinned, Target: t, View: s.view(c)}, s}}
	case tAdopting:
		if int(cl.LW) == t {
			cl.Fly, cl.FW, cl.FInst = fAdopt, int8(t), s.M[t].Inst
			rs = append(rs, result{Output{Att: AttPlacing, Target: t, View: s.view(c)}, s})
			if in.Racy {
				// Refused at the re-read of the membership after the
				// dispatch began: rolled back, the claim kept.
				n := s
				n.C[c].Fly = fNone
				rs = append(rs, result{Output{Err: ErrIneligible, View: n.view(c)}, n})
			}
			return rs
		}
		if s.Hard {
			return []result{{Output{Err: ErrMismatch, View: s.view(c)}, s}}
		}
		return nil // a soft move: OpMove comes first
	case tReserved:
		rs = append(rs, placeFirst(s, c, t))
		if in.Racy {
			// Refused at the re-read after BeginDispatch: rolled back.
			rs = append(rs, result{Output{Err: ErrIneligible, View: s.view(c)}, s})
		}
		return rs
	case tBound:
		if int(cl.LW) == t {
			cl.Fly, cl.FW = fHit, int8(t)
			return []result{{Output{Att: AttHit, Target: t, View: s.view(c)}, s}}
		}
		if s.Hard {
			return []result{{Output{Err: ErrMismatch, View: s.view(c)}, s}}
		}
	}
	if cl.St == tBound {
		return nil // a soft move: OpMove comes first
	}
	// The second half of a soft move (OpMove invalidated the version the
	// request held): the session is placed anew without waiting.
	cl.Moved = false
	e := &s.K[k]
	switch e.St {
	case kBound:
		if int(e.W) == t && !s.stale(k) {
			// Another request placed the session on t since: its binding
			// serves this request (a hit on it).
			e.Leases++
			cl.St, cl.Lease, cl.LVer, cl.LW = tBound, true, e.Ver, e.W
			cl.Fly, cl.FW = fHit, int8(t)
			rs = append(rs, result{Output{Att: AttHit, Target: t, View: s.view(c)}, s})
			if in.Racy {
				// Its worker restarted between the layer's reads: lost.
				lost := s
				lost.K[k].Leases--
				lost.C[c] = client{St: tUnpinned, Cause: CauseMoveLost, Key: cl.Key, Pin: cl.Pin, Final: cl.Final,
					LW: -1, Fly: fUnpinned, FW: int8(t), Hint: -1}
				rs = append(rs, result{Output{Att: AttUnpinned, Target: t, View: lost.view(c)}, lost})
			}
			return rs
		}
		fallthrough
	case kPlacing:
		if e.St == kPlacing && int(e.By) == c { // (not a bound key fallen through)
			// This request's own reservation (it read the claim it moves).
			cl.St = tReserved
			if !s.dispatchable(t) {
				return []result{{Output{Err: ErrIneligible, View: s.view(c)}, s}}
			}
			rs = append(rs, placeFirst(s, c, t))
			if in.Racy {
				rs = append(rs, lateFirst(s, c, t), result{Output{Err: ErrIneligible, View: s.view(c)}, s})
			}
			return rs
		}
		fallthrough
	case kQuarantined:
		// A concurrent move came first: route unpinned, leave its state.
		cl.St, cl.Cause = tUnpinned, CauseMoveLost
		cl.Fly, cl.FW = fUnpinned, int8(t)
		return append(rs, result{Output{Att: AttUnpinned, Target: t, View: s.view(c)}, s})
	}
	*e = keyState{St: kPlacing, By: int8(c), Ver: e.Ver}
	cl.St = tReserved
	if !s.dispatchable(t) {
		// The target failed or left since the request's first look.
		return []result{{Output{Err: ErrIneligible, View: s.view(c)}, s}}
	}
	rs = append(rs, placeFirst(s, c, t))
	if in.Racy {
		rs = append(rs, lateFirst(s, c, t), result{Output{Err: ErrIneligible, View: s.view(c)}, s})
	}
	return rs
}

// placeFirst dispatches client c's reserved session to t under a fresh
// attempt, on t's current instance.
func placeFirst(s State, c, t int) result {
	cl := &s.C[c]
	cl.Fly, cl.FW, cl.FInst, cl.Fenced, cl.Late = fFirst, int8(t), s.M[t].Inst, false, false
	return result{Output{Att: AttPlacing, Target: t, View: s.view(c)}, s}
}

// lateFirst is placeFirst for a moved dispatch that a membership change
// of its target overlapped (Input.Racy): the layer reserves the session
// (Turn.place's TryAcquire) and reads the target's instance for
// BeginDispatch in two steps, so a restarting Join of the target between
// them sends the attempt to the new instance, which the binding is then
// on. The contract allows it (row B5: the binding follows the dispatch by
// a fenced move; row B1 and "Targets and membership": a restart fences
// what names the old instance, and a placing dispatch reads the
// membership when it dispatches, not when it reserved the session). The model takes the reservation here and lets the first restart
// of the target that comes after (in membershipStep) move the attempt to
// the new instance instead of fencing it; no other change is allowed.
// (The campaign of 2026-12-05, affinity seed 859763584: a move reserved
// before the Join of w1's new identity and bound w1's new instance; the
// model had it on the old one and refused the next Start's hit.)
func lateFirst(s State, c, t int) result {
	r := placeFirst(s, c, t)
	r.next.C[c].Late = true
	return r
}

func complete(s State, in Input) []result {
	rs := []result{completeOne(s, in)}
	if cl := &s.C[in.Client]; (cl.Fly == fFirst || cl.Fly == fAdopt) && cl.Fenced && in.Outcome != NotAccepted {
		// The Leave or restarting Join that fenced the attempt's instance
		// publishes the membership first and bumps the core's generations
		// after: a Complete in between commits (or quarantines) on the old
		// instance, which the layer then judges moved (or the bump drops).
		cl.Fenced = false
		rs = append(rs, completeOne(s, in))
	}
	return rs
}

func completeOne(s State, in Input) result {
	c := in.Client
	cl := &s.C[c]
	k := int(cl.Key)
	fly := cl.Fly
	cl.Fly = fNone
	var err ErrKind
	switch fly {
	case fFirst:
		e := &s.K[k]
		switch in.Outcome {
		case Accepted:
			if cl.Fenced {
				// Stale at birth: served, not bound.
				*e = keyState{Ver: e.Ver}
				cl.St = tEnded
				break
			}
			*e = keyState{St: kBound, W: cl.FW, Inst: cl.FInst, Ver: e.Ver + 1, Leases: 1}
			cl.St, cl.Lease, cl.LVer, cl.LW = tBound, true, e.Ver, cl.FW
		case NotAccepted:
			err = ErrNotAccepted // the reservation is held again
		default:
			err = ErrAmbiguous
			if cl.Fenced {
				*e = keyState{Ver: e.Ver} // its generation moved on: over at once
			} else {
				*e = keyState{St: kQuarantined, W: cl.FW, Inst: cl.FInst, Ver: e.Ver}
			}
			cl.St = tEnded
		}
	case fAdopt:
		e := &s.K[k]
		switch in.Outcome {
		case Accepted:
			switch {
			case cl.Fenced || !e.Read && (!s.M[cl.FW].Present || s.M[cl.FW].Inst != cl.FInst):
				// Stale at birth: served, not bound.
				*e = keyState{Ver: e.Ver}
				cl.St = tEnded
			case e.Read:
				// The claim adopted: the session's binding, leased (still
				// closing, if the session's final request ended meanwhile).
				e.St, e.By, e.Read = kBound, 0, false
				e.Leases++
				cl.St, cl.Lease, cl.LVer = tBound, true, e.Ver
			default:
				// The claim ended under it: placed anew.
				*e = keyState{St: kBound, W: cl.FW, Inst: cl.FInst, Ver: e.Ver + 1, Leases: 1}
				cl.St, cl.Lease, cl.LVer, cl.LW = tBound, true, e.Ver, cl.FW
			}
		case NotAccepted:
			// The refused claim moves with the next dispatch (L1); the
			// reservation stays.
			err = ErrNotAccepted
			e.Read, e.Leases, e.Closing = false, 0, false
			cl.St = tMoving
		default:
			// A placing dispatch's unknown outcome: the claim is
			// quarantined.
			err = ErrAmbiguous
			if cl.Fenced {
				*e = keyState{Ver: e.Ver}
			} else {
				*e = keyState{St: kQuarantined, W: cl.FW, Inst: cl.FInst, Ver: e.Ver}
			}
			cl.St = tEnded
		}
	case fHit:
		switch in.Outcome {
		case Accepted:
		case NotAccepted:
			// L1: the bound worker refused a later turn: the binding moves.
			err = ErrNotAccepted
			s.invalidate(c)
			cl.St = tMoving
		default:
			err = ErrOutcomeUnknown // L2: the binding is kept
			cl.St, cl.Amb = tEnded, true
		}
	default:
		switch in.Outcome {
		case Accepted:
		case NotAccepted:
			err = ErrNotAccepted
		default:
			err = ErrOutcomeUnknown
			cl.St = tEnded
		}
	}
	cl.FW, cl.FInst, cl.Fenced, cl.Late = -1, 0, false, false
	return result{Output{Err: err, View: s.view(c)}, s}
}

func done(s State, c int) result {
	cl := &s.C[c]
	switch {
	case cl.Lease && cl.Amb && !cl.Final:
		s.endLease(c, false) // Abandon
	case cl.Lease:
		s.endLease(c, cl.Final) // Close for the final request, else Release
	}
	if k := int(cl.Key); k >= 0 && s.K[k].St == kPlacing && int(s.K[k].By) == c {
		if e := &s.K[k]; e.Read {
			e.St, e.By, e.Read = kBound, 0, false // the claim read stays the binding
		} else {
			s.K[k] = keyState{Ver: s.K[k].Ver}
		}
	}
	s.C[c] = client{Key: -1, Pin: -1, LW: -1, FW: -1}
	return result{Output{View: View{Bound: -1}}, s}
}

var seed = maphash.MakeSeed()

// NewModel returns the Porcupine model of the layer (hard: ModeHard;
// replica: over a replica, Config.Replicas).
func NewModel(hard, replica bool) porcupine.Model {
	nm := porcupine.NondeterministicModel{
		Init: func() []any { return []any{Init(hard, replica)} },
		Step: func(state, input, output any) []any {
			var out []any
			for _, n := range Step(state.(State), input.(Input), output.(Output)) {
				out = append(out, n)
			}
			return out
		},
		Equal:             func(a, b any) bool { return a.(State) == b.(State) },
		Hash:              func(a any) uint64 { return maphash.Comparable(seed, a.(State)) },
		DescribeOperation: func(in, out any) string { return Describe(in.(Input), out.(Output)) },
		DescribeState:     func(a any) string { st := a.(State); return st.String() },
	}
	return nm.ToModel()
}

// Describe formats one operation.
func Describe(in Input, out Output) string {
	var b strings.Builder
	fmt.Fprintf(&b, "c%d %s", in.Client, in.Op)
	switch in.Op {
	case OpJoin:
		fmt.Fprintf(&b, "(w%d, %c)", in.Worker, 'a'+in.Ident)
	case OpFail, OpLeave, OpRegister, OpDeregister:
		fmt.Fprintf(&b, "(w%d)", in.Worker)
	case OpStart:
		fmt.Fprintf(&b, "(k%d", in.Key)
		if in.Pin >= 0 {
			fmt.Fprintf(&b, ", pin w%d", in.Pin)
		}
		if in.Final {
			b.WriteString(", final")
		}
		b.WriteString(")")
	case OpDispatch:
		fmt.Fprintf(&b, "(w%d)", in.Worker)
		if in.Racy {
			b.WriteString("[racy]")
		}
	case OpComplete:
		fmt.Fprintf(&b, "(%s)", outcomeNames[in.Outcome])
	}
	b.WriteString(" -> ")
	if out.Err != ErrNone {
		b.WriteString(out.Err.String())
		if out.Msg != "" {
			fmt.Fprintf(&b, " (%s)", out.Msg)
		}
		b.WriteString(" ")
	}
	switch in.Op {
	case OpJoin:
		b.WriteString([...]string{"?", "joined", "recovered", "restarted"}[out.Join%4])
	case OpEligible:
		fmt.Fprintf(&b, "cands %03b ", out.Cands)
	case OpDispatch:
		if out.Att != AttNone {
			fmt.Fprintf(&b, "%s w%d ", attNames[out.Att], out.Target)
		}
	}
	if in.Op >= OpStart && in.Op <= OpComplete {
		fmt.Fprintf(&b, "%s", out.View)
	}
	if out.Read {
		b.WriteString(" (claim read)")
	}
	return strings.TrimSpace(b.String())
}

// String prints the view as Porcupine's visualization shows it.
func (v View) String() string {
	switch {
	case v.Bound >= 0:
		return fmt.Sprintf("[bound w%d]", v.Bound)
	case v.Placing:
		return "[placing]"
	case v.Cause != 0:
		return fmt.Sprintf("[unpinned cause %d]", v.Cause)
	}
	return "[-]"
}

// String prints the state as Porcupine's visualization shows it.
func (s State) String() string {
	var b strings.Builder
	for w, m := range s.M {
		switch {
		case !m.Present:
			fmt.Fprintf(&b, "w%d gone; ", w)
		default:
			fmt.Fprintf(&b, "w%d %c#%d failed=%v; ", w, 'a'+m.Ident-1, m.Inst, m.Failed)
		}
	}
	b.WriteString("\n")
	for k, e := range s.K {
		switch e.St {
		case kAbsent:
			fmt.Fprintf(&b, "k%d absent", k)
			if e.Closed {
				b.WriteString(" (its close may be in flight)")
			}
			b.WriteString("\n")
		case kPlacing:
			fmt.Fprintf(&b, "k%d placing by c%d\n", k, e.By)
		case kBound:
			fmt.Fprintf(&b, "k%d bound v%d w%d#%d leases=%d closing=%v\n", k, e.Ver, e.W, e.Inst, e.Leases, e.Closing)
		case kQuarantined:
			fmt.Fprintf(&b, "k%d quarantined on w%d#%d\n", k, e.W, e.Inst)
		}
	}
	for c, cl := range s.C {
		if cl.St == tIdle {
			continue
		}
		fmt.Fprintf(&b, "c%d k%d st=%d lease=%v(v%d w%d) fly=%d(w%d#%d fenced=%v late=%v)\n", c, cl.Key, cl.St, cl.Lease, cl.LVer, cl.LW,
			cl.Fly, cl.FW, cl.FInst, cl.Fenced, cl.Late)
	}
	return b.String()
}
