// Package queuelin checks the policy queue (impl/policyqueue) for
// linearizability with Porcupine: several goroutines drive one real
// policyqueue.Queue through its public calls, every call is recorded with
// its call and return times and what it returned, and the history is
// checked against a sequential model of the queue's contract (this file,
// written again from the package doc; it does not call the queue).
//
// Admission is not an operation of its own: an item is admitted inside
// the call whose pass admitted it (an Enqueue, a Release, a Cancel, a
// SetCapacity, a SetEligible, a Recheck, a RecheckAll), and every one of
// those calls returns the slots it admitted, in order. So each recorded
// call carries its admissions (ticket and target), and the model, which
// runs the same pass at the call's linearization point, must admit exactly
// those. The blocking Wait is recorded as its own call: it linearizes when
// it reads its ticket admitted (returning the slot the admission gave) or
// ended (cancelled); a Wait that would still block at every point of its
// interval makes the history illegal, and one still blocked after
// WaitLimit fails the run (a lost wake-up or a leaked slot: every slot is
// released promptly and the operator ends by giving every worker
// capacity). Acquire is Enqueue and then Wait, so the harness calls the
// two, and both are checked.
//
// Some plans close the queue while the requests run: the waiting items end
// with ErrClosed, and the model checks what every call does after it.
//
// The items' Allow predicates are fixed per item (a mask of workers drawn
// with the item): an Allow whose answer changes between calls would have
// the queue read it at instants the history cannot place. The contract
// tests in impl/policyqueue check Recheck and RecheckAll after such
// changes; here they must admit nothing (the queue is always settled),
// which the model checks.
package queuelin

import (
	"fmt"
	"hash/maphash"
	"strings"

	"github.com/anishathalye/porcupine"
)

// Bounds of the model.
const (
	MaxWorkers = 3
	MaxRanks   = 2
	MaxCands   = 3
	MaxClients = 8
)

// Op is a recorded public call.
type Op uint8

// The operations.
const (
	OpSetCapacity Op = iota + 1 // Queue.SetCapacity(worker, n)
	OpSetEligible               // Queue.SetEligible(worker, ok)
	OpEnqueue                   // Queue.Enqueue(item)
	OpWait                      // Queue.Wait(ticket)
	OpRelease                   // Slot.Release (of the ticket's slot)
	OpCancel                    // Queue.Cancel(ticket)
	OpRecheck                   // Queue.Recheck(worker)
	OpRecheckAll                // Queue.RecheckAll()
	OpClose                     // Queue.Close()
)

var opNames = [...]string{"?", "SetCapacity", "SetEligible", "Enqueue", "Wait", "Release", "Cancel", "Recheck", "RecheckAll", "Close"}

// String names the operation as the reports print it.
func (o Op) String() string {
	if int(o) < len(opNames) {
		return opNames[o]
	}
	return fmt.Sprintf("Op(%d)", o)
}

// Tgt is a target: worker W (0 to MaxWorkers-1, named "w0", "w1", ...: the
// order of the names is the order of the indices) and rank R, -1 for any
// rank (affinity.WorkerOnly).
type Tgt struct {
	W int8 `json:"w"`
	R int8 `json:"r"`
}

// String formats the target as affinity.Target does.
func (t Tgt) String() string {
	if t.R < 0 {
		return fmt.Sprintf("w%d", t.W)
	}
	return fmt.Sprintf("w%d/%d", t.W, t.R)
}

// Input is one call: what the test asked for.
type Input struct {
	Op     Op  `json:"op"`
	Client int `json:"client"`
	// Worker: SetCapacity's, SetEligible's and Recheck's worker.
	Worker int `json:"worker,omitempty"`
	// N: SetCapacity's capacity; Ok: SetEligible's eligibility.
	N  int  `json:"n,omitempty"`
	Ok bool `json:"ok,omitempty"`
	// An Enqueue's item: Exact with Target, or shared with Cands (empty:
	// any worker) and Allow (a mask of the workers its Allow accepts; 0:
	// no Allow).
	Exact  bool  `json:"exact,omitempty"`
	Target Tgt   `json:"target"`
	Cands  []Tgt `json:"cands,omitempty"`
	Allow  uint8 `json:"allow,omitempty"`
	// Ticket: Wait's, Release's and Cancel's ticket.
	Ticket int `json:"ticket,omitempty"`
}

// ErrKind classifies an error a call returned.
type ErrKind uint8

// The error kinds.
const (
	ErrNone      ErrKind = iota
	ErrFull              // ErrQueueFull
	ErrCancelled         // ErrCancelled
	ErrUnknown           // ErrUnknownTicket
	ErrClosed            // ErrClosed
	ErrOther             // anything else: never legal
)

var errNames = [...]string{"nil", "Full", "Cancelled", "UnknownTicket", "Closed", "Other"}

// String names the error kind as the reports print it.
func (e ErrKind) String() string {
	if int(e) < len(errNames) {
		return errNames[e]
	}
	return fmt.Sprintf("ErrKind(%d)", e)
}

// Adm is one admission: a ticket and the slot's target.
type Adm struct {
	Ticket int `json:"t"`
	Target Tgt `json:"to"`
}

// Cancel results (policyqueue.CancelResult).
const (
	CancelNone = iota
	CancelWaiting
	CancelAdmitted
)

// Output is what a call returned.
type Output struct {
	Err ErrKind `json:"err,omitempty"`
	// Ticket: an Enqueue's ticket (0 when refused).
	Ticket int `json:"ticket,omitempty"`
	// Admitted: the slots the call admitted, in order.
	Admitted []Adm `json:"admitted,omitempty"`
	// Cancel: a Cancel's result.
	Cancel int `json:"cancel,omitempty"`
	// Slot: the target of the slot a Wait returned.
	Slot Tgt `json:"slot"`
}

// Ticket states in the model.
const (
	tWaiting uint8 = iota
	tAdmitted
	tGone   // cancelled or released
	tClosed // waiting when the queue closed
)

type wstate struct {
	Known      bool
	Ineligible bool
	Cap, In    int8
}

type tstate struct {
	St    uint8
	Exact bool
	T     Tgt // the exact target; the slot's target once admitted
	NC    int8
	Cands [MaxCands]Tgt
	Allow uint8
}

// State is the model's state: the workers and every ticket issued (ticket
// i+1 is T[i]). Steps return a new State and never change the one given.
type State struct {
	W      [MaxWorkers]wstate
	T      []tstate
	Closed bool
}

// Limits are the queue's bounds (Config.MaxQueued, Config.MaxPerLane; 0:
// none).
type Limits struct {
	MaxQueued  int `json:"max_queued"`
	MaxPerLane int `json:"max_per_lane,omitempty"`
}

func (s State) clone() State {
	c := s
	c.T = append([]tstate(nil), s.T...)
	return c
}

func (s *State) free(w int8) bool {
	ws := s.W[w]
	return ws.Known && !ws.Ineligible && ws.In < ws.Cap
}

func allowed(t *tstate, w int8) bool { return t.Allow == 0 || t.Allow&(1<<w) != 0 }

// where returns the target a waiting ticket may be admitted to in a pass
// over the workers in scope (a bit per worker), and whether it may.
func (s *State) where(t *tstate, scope uint8) (Tgt, bool) {
	in := func(w int8) bool { return scope&(1<<w) != 0 && s.free(w) }
	if t.Exact {
		return t.T, in(t.T.W)
	}
	if t.NC == 0 {
		for w := int8(0); w < MaxWorkers; w++ {
			if in(w) && allowed(t, w) {
				return Tgt{W: w, R: -1}, true
			}
		}
		return Tgt{}, false
	}
	for _, c := range t.Cands[:t.NC] {
		if in(c.W) && allowed(t, c.W) {
			return c, true
		}
	}
	return Tgt{}, false
}

// pass admits, oldest ticket first, while some waiting ticket can use a
// free worker of scope.
func (s *State) pass(scope uint8) []Adm {
	var out []Adm
	if s.Closed {
		return nil
	}
	for {
		found := false
		for i := range s.T {
			t := &s.T[i]
			if t.St != tWaiting {
				continue
			}
			if to, ok := s.where(t, scope); ok {
				t.St, t.T = tAdmitted, to
				s.W[to.W].In++
				out = append(out, Adm{Ticket: i + 1, Target: to})
				found = true
				break
			}
		}
		if !found {
			return out
		}
	}
}

func (s *State) known() uint8 {
	var m uint8
	for w := range s.W {
		if s.W[w].Known {
			m |= 1 << w
		}
	}
	return m
}

func sameAdm(a, b []Adm) bool {
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

func validTgt(t Tgt) bool { return t.W >= 0 && t.W < MaxWorkers && t.R >= -1 && t.R < MaxRanks }

// Step applies one call to s: whether the call could return out from s,
// and the state after it.
func Step(lim Limits, s State, in Input, out Output) (bool, State) {
	if out.Err == ErrOther {
		return false, s
	}
	n := s.clone()
	w := int8(in.Worker)
	if s.Closed && (in.Op == OpSetCapacity || in.Op == OpSetEligible || in.Op == OpEnqueue) {
		return out.Err == ErrClosed && out.Ticket == 0 && len(out.Admitted) == 0, s
	}
	switch in.Op {
	case OpClose:
		n.Closed = true
		for i := range n.T {
			if n.T[i].St == tWaiting {
				n.T[i].St = tClosed
			}
		}
		return out.Err == ErrNone, n
	case OpSetCapacity:
		n.W[w].Known, n.W[w].Cap = true, int8(in.N)
		return out.Err == ErrNone && sameAdm(n.pass(1<<w), out.Admitted), n
	case OpSetEligible:
		n.W[w].Known, n.W[w].Ineligible = true, !in.Ok
		return out.Err == ErrNone && sameAdm(n.pass(1<<w), out.Admitted), n
	case OpRecheck:
		if !n.W[w].Known {
			return len(out.Admitted) == 0, n
		}
		return sameAdm(n.pass(1<<w), out.Admitted), n
	case OpRecheckAll:
		return sameAdm(n.pass(n.known()), out.Admitted), n
	case OpEnqueue:
		t := tstate{Exact: in.Exact, T: in.Target, Allow: in.Allow, NC: int8(len(in.Cands))}
		var scope uint8
		if in.Exact {
			if !validTgt(in.Target) {
				return false, s
			}
			n.W[in.Target.W].Known = true
			scope = 1 << in.Target.W
		} else {
			if len(in.Cands) > MaxCands {
				return false, s
			}
			copy(t.Cands[:], in.Cands)
			scope = n.known()
			if len(in.Cands) > 0 {
				scope = 0
				for _, c := range in.Cands {
					if validTgt(c) && n.W[c.W].Known {
						scope |= 1 << c.W
					}
				}
			}
		}
		n.T = append(n.T, t)
		me := len(n.T) - 1
		adm := n.pass(scope)
		if !sameAdm(adm, out.Admitted) {
			return false, s
		}
		if n.T[me].St == tWaiting && n.full(lim, me) {
			n.T = n.T[:me]
			return out.Err == ErrFull && out.Ticket == 0, n
		}
		return out.Err == ErrNone && out.Ticket == me+1, n
	case OpWait:
		if in.Ticket < 1 || in.Ticket > len(n.T) {
			return out.Err == ErrUnknown || n.Closed && out.Err == ErrClosed, n
		}
		switch t := n.T[in.Ticket-1]; t.St {
		case tWaiting:
			return false, s // Wait blocks here
		case tAdmitted:
			return out.Err == ErrNone && out.Slot == t.T, n
		case tClosed:
			return out.Err == ErrClosed, n
		default: // gone: a Wait that parked reads it cancelled; one that
			// began after finds no ticket (ErrClosed once closed)
			if n.Closed {
				return out.Err == ErrCancelled || out.Err == ErrClosed, n
			}
			return out.Err == ErrCancelled || out.Err == ErrUnknown, n
		}
	case OpRelease, OpCancel:
		res := CancelNone
		var adm []Adm
		if in.Ticket >= 1 && in.Ticket <= len(n.T) {
			t := &n.T[in.Ticket-1]
			switch {
			case t.St == tWaiting && in.Op == OpCancel:
				t.St, res = tGone, CancelWaiting
			case t.St == tAdmitted:
				t.St, res = tGone, CancelAdmitted
				n.W[t.T.W].In--
				adm = n.pass(1 << t.T.W)
			}
		}
		return (in.Op == OpRelease || out.Cancel == res) && sameAdm(adm, out.Admitted), n
	}
	return false, s
}

// full reports whether the waiting ticket me finds the queue or its lane
// full (counting the others that wait).
func (s *State) full(lim Limits, me int) bool {
	var all, lane int
	mine := &s.T[me]
	for i := range s.T {
		t := &s.T[i]
		if i == me || t.St != tWaiting {
			continue
		}
		all++
		if t.Exact == mine.Exact && (!t.Exact || t.T == mine.T) {
			lane++
		}
	}
	return all >= lim.MaxQueued || lim.MaxPerLane > 0 && lane >= lim.MaxPerLane
}

// Init is the model's initial state: no workers, no tickets.
func Init() State { return State{} }

var seed = maphash.MakeSeed()

// NewModel returns the Porcupine model of a queue with lim's bounds.
func NewModel(lim Limits) porcupine.Model {
	return porcupine.Model{
		Init: func() any { return Init() },
		Step: func(st, in, out any) (bool, any) {
			ok, next := Step(lim, st.(State), in.(Input), out.(Output))
			return ok, next
		},
		Equal: func(a, b any) bool {
			x, y := a.(State), b.(State)
			if x.W != y.W || x.Closed != y.Closed || len(x.T) != len(y.T) {
				return false
			}
			for i := range x.T {
				if x.T[i] != y.T[i] {
					return false
				}
			}
			return true
		},
		Hash: func(st any) uint64 {
			s := st.(State)
			var h maphash.Hash
			h.SetSeed(seed)
			if s.Closed {
				_ = h.WriteByte(0xc1)
			}
			for _, w := range s.W {
				var flags byte
				if w.Known {
					flags |= 1
				}
				if w.Ineligible {
					flags |= 2
				}
				_, _ = h.Write([]byte{flags, byte(w.Cap), byte(w.In)})
			}
			for _, t := range s.T {
				_ = h.WriteByte(t.St)
				_ = h.WriteByte(byte(t.T.W))
				_ = h.WriteByte(byte(t.T.R))
			}
			return h.Sum64()
		},
		DescribeOperation: func(in, out any) string { return Describe(in.(Input), out.(Output)) },
		DescribeState:     func(st any) string { return DescribeState(st.(State)) },
	}
}

// Describe formats a call and its result.
func Describe(in Input, out Output) string {
	var b strings.Builder
	switch in.Op {
	case OpSetCapacity:
		fmt.Fprintf(&b, "SetCapacity(w%d, %d)", in.Worker, in.N)
	case OpSetEligible:
		fmt.Fprintf(&b, "SetEligible(w%d, %v)", in.Worker, in.Ok)
	case OpRecheck:
		fmt.Fprintf(&b, "Recheck(w%d)", in.Worker)
	case OpRecheckAll:
		b.WriteString("RecheckAll()")
	case OpClose:
		b.WriteString("Close()")
	case OpEnqueue:
		if in.Exact {
			fmt.Fprintf(&b, "Enqueue(exact %s)", in.Target)
		} else {
			fmt.Fprintf(&b, "Enqueue(shared %v allow %03b)", in.Cands, in.Allow)
		}
		fmt.Fprintf(&b, " -> ticket %d", out.Ticket)
	case OpWait:
		fmt.Fprintf(&b, "Wait(%d)", in.Ticket)
		if out.Err == ErrNone {
			fmt.Fprintf(&b, " -> slot %s", out.Slot)
		}
	case OpRelease:
		fmt.Fprintf(&b, "Release(%d)", in.Ticket)
	case OpCancel:
		fmt.Fprintf(&b, "Cancel(%d) -> %s", in.Ticket, [...]string{"none", "waiting", "admitted"}[out.Cancel%3])
	default:
		b.WriteString(in.Op.String())
	}
	if out.Err != ErrNone {
		fmt.Fprintf(&b, " err %s", out.Err)
	}
	if len(out.Admitted) > 0 {
		b.WriteString(" admits")
		for _, a := range out.Admitted {
			fmt.Fprintf(&b, " %d@%s", a.Ticket, a.Target)
		}
	}
	return fmt.Sprintf("c%d %s", in.Client, b.String())
}

// DescribeState formats the model's state.
func DescribeState(s State) string {
	var b strings.Builder
	if s.Closed {
		b.WriteString("closed; ")
	}
	for w, ws := range s.W {
		if ws.Known {
			fmt.Fprintf(&b, "w%d %d/%d", w, ws.In, ws.Cap)
			if ws.Ineligible {
				b.WriteString(" ineligible")
			}
			b.WriteString("; ")
		}
	}
	b.WriteString("waiting:")
	for i, t := range s.T {
		if t.St == tWaiting {
			fmt.Fprintf(&b, " %d", i+1)
		}
	}
	b.WriteString("; admitted:")
	for i, t := range s.T {
		if t.St == tAdmitted {
			fmt.Fprintf(&b, " %d@%s", i+1, t.T)
		}
	}
	return b.String()
}
