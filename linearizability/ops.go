// Package linearizability checks the production coordinator
// (impl/placement) against the executable model (model/): operations are
// performed on the real coordinator by a System, and a Stepper computes what
// the model's own transition functions say each operation must return. The
// rapid state-machine test drives both side by side; the Porcupine checker
// uses the Stepper as its sequential specification.
package linearizability

import "fmt"

// OpKind names an operation a client performs.
type OpKind uint8

// Operations. Each maps to one action of spec/tla/Placement.tla (Drop is
// Complete(Ambiguous), CommitAccepted is BeginDispatch then
// Complete(Accepted), Advance is the clock's Advance, followed by the
// reclamation it triggers unless Lazy). Query reads a key (no action: it
// may perform Expire, which the spec allows at any time); Reap is a reaper
// tick (Expire and DropStale wherever enabled); Stats reads the
// coordinator's statistics, which first reclaims what a Reap would (it
// walks every key, not atomically: only the sequential checks use it).
// An Advance's or a Reap's reclamation is not atomic either: the
// Porcupine model lets every timeout it applies fire later, as the spec
// does (see Stepper).
const (
	OpAcquire OpKind = iota
	OpTryAcquire
	OpBeginDispatch
	OpCommitAccepted
	OpCancel
	OpComplete
	OpDrop
	OpRelease
	OpAbandon
	OpInvalidate
	OpClose
	OpResolve
	OpInvalidateKey
	OpBump
	OpAdvance
	OpQuery
	OpReap
	OpStats
	NumOps
)

var opNames = [NumOps]string{"Acquire", "TryAcquire", "BeginDispatch", "CommitAccepted", "Cancel",
	"Complete", "Drop", "Release", "Abandon", "Invalidate", "Close", "Resolve", "InvalidateKey",
	"Bump", "Advance", "Query", "Reap", "Stats"}

// String returns the operation's name.
func (k OpKind) String() string {
	if k < NumOps {
		return opNames[k]
	}
	return fmt.Sprintf("OpKind(%d)", uint8(k))
}

// Input is one operation with its arguments. Client is the model request
// that performs it.
type Input struct {
	Op      OpKind `json:"op"`
	Client  int    `json:"client"`
	Key     int    `json:"key"`
	Target  int    `json:"target"`
	Gen     uint64 `json:"gen,omitempty"`
	Attempt uint64 `json:"attempt,omitempty"`
	Outcome int    `json:"outcome,omitempty"` // model.Outcome for Complete, model.Resolution for Resolve
	By      int64  `json:"by,omitempty"`      // Advance: model time units
	// Again: an operation on a handle the client kept after it stopped
	// holding it: its previous Reservation, Dispatch guard or Lease (see
	// stale.go). It must be refused ("lost", "used"; a Drop does nothing)
	// and change nothing. Stale says how the handle went stale.
	Again bool `json:"again,omitempty"`
	Stale Why  `json:"stale,omitempty"`
	// Short: a blocking Acquire with a short deadline, which may give up
	// waiting (its effect is then none).
	Short bool `json:"short,omitempty"`
	// Lazy: an Advance that moves the clock without reclaiming anything
	// (ManualClock.Set), the way the runtime clock moves between two reaper
	// ticks: expired entries stay until something touches them.
	Lazy bool `json:"lazy,omitempty"`
	// Window and Clock: an operation that sets a deadline (setsDeadline)
	// whose call began with the clock at Clock (model units). It reads the
	// clock once, before its change takes effect, so the deadline it sets
	// may come from any clock value between Clock and that moment (see
	// Stepper.Steps).
	Window bool  `json:"window,omitempty"`
	Clock  int64 `json:"clock,omitempty"`
}

// OutKind is what an operation returned.
type OutKind uint8

// Output kinds.
const (
	OutOK OutKind = iota
	OutHit
	OutReserved
	OutWouldWait
	OutCapacity
	OutAmbiguous
	OutCancelled
	OutLost
	OutFenced
	OutUsed
	OutDispatched
	OutCommitted
	OutNotQuarantined
	OutRemoved
	OutNone
	OutError
	NumOuts
)

var outNames = [NumOuts]string{"ok", "hit", "reserved", "would-wait", "capacity", "ambiguous",
	"cancelled", "lost", "fenced", "used", "dispatched", "committed", "not-quarantined", "removed",
	"none", "error"}

// String returns the output kind's name.
func (k OutKind) String() string {
	if k < NumOuts {
		return outNames[k]
	}
	return fmt.Sprintf("OutKind(%d)", uint8(k))
}

// Output is what an operation returned, with the fields that matter for it.
type Output struct {
	Kind    OutKind `json:"kind"`
	Target  int     `json:"target,omitempty"`
	Gen     uint64  `json:"gen,omitempty"`
	Attempt uint64  `json:"attempt,omitempty"`
	Err     string  `json:"err,omitempty"` // OutError only: an error no operation may return
	// Stale: a commit (Complete(Accepted), CommitAccepted, an Accepted
	// Resolve) reported its binding stale at birth (ErrStaleAtBirth).
	Stale bool `json:"stale,omitempty"`
	// State, Leases and Closing: what a Query read (State is the state's
	// name; Target, Gen and Attempt as Observed).
	State   string `json:"state,omitempty"`
	Leases  int    `json:"leases,omitempty"`
	Closing bool   `json:"closing,omitempty"`
	// Live, Quarantined and Bindings: what Stats read (Stats.Live,
	// Stats.Quarantined, and Coordinator.Bindings of each target, as
	// "n0,n1,...").
	Live        int64  `json:"live,omitempty"`
	Quarantined int64  `json:"quarantined,omitempty"`
	Bindings    string `json:"bindings,omitempty"`
}

// String renders the output for reports.
func (o Output) String() string {
	switch {
	case o.State == "Absent", o.State == "Reserved":
		return o.State
	case o.State == "Bound":
		return fmt.Sprintf("Bound(t%d g%d v%d leases %d closing %v)", o.Target, o.Gen, o.Attempt, o.Leases, o.Closing)
	case o.State != "":
		return fmt.Sprintf("%s(t%d g%d a%d)", o.State, o.Target, o.Gen, o.Attempt)
	}
	if o.Bindings != "" {
		return fmt.Sprintf("stats(live %d, quarantined %d, bindings %s)", o.Live, o.Quarantined, o.Bindings)
	}
	if o.Stale && o.Kind == OutOK { // a Resolve
		return "ok(stale at birth)"
	}
	if o.Stale {
		return fmt.Sprintf("%s(t%d g%d v%d, stale at birth)", o.Kind, o.Target, o.Gen, o.Attempt)
	}
	switch o.Kind {
	case OutHit, OutCommitted:
		return fmt.Sprintf("%s(t%d g%d v%d)", o.Kind, o.Target, o.Gen, o.Attempt)
	case OutAmbiguous:
		return fmt.Sprintf("%s(t%d a%d g%d)", o.Kind, o.Target, o.Attempt, o.Gen)
	case OutDispatched:
		return fmt.Sprintf("%s(a%d g%d)", o.Kind, o.Attempt, o.Gen)
	case OutOK:
		if o.Gen != 0 {
			return fmt.Sprintf("ok(g%d)", o.Gen)
		}
	case OutError:
		return "error(" + o.Err + ")"
	}
	return o.Kind.String()
}

// String renders the input for reports, in the spec's vocabulary.
func (in Input) String() string {
	if in.Again {
		h, what := handleNames[useHandle[max(useOf(in), 0)]], in.Op.String()
		if in.Op == OpComplete {
			what = useNames[useOf(in)]
		}
		if in.Stale == WhyNone { // a history saved before reasons were recorded
			return fmt.Sprintf("r%d %s on its old %s", in.Client, what, h)
		}
		return fmt.Sprintf("r%d %s on its old %s (k%d, stale after %s)", in.Client, what, h, in.Key, in.Stale)
	}
	switch in.Op {
	case OpAcquire, OpTryAcquire:
		return fmt.Sprintf("r%d %s(k%d)", in.Client, in.Op, in.Key)
	case OpBeginDispatch, OpCommitAccepted:
		return fmt.Sprintf("r%d %s(t%d, g%d)", in.Client, in.Op, in.Target, in.Gen)
	case OpComplete:
		return fmt.Sprintf("r%d Complete(%s)", in.Client, []string{"Accepted", "DefinitelyNotAccepted", "Ambiguous"}[in.Outcome])
	case OpResolve:
		return fmt.Sprintf("r%d Resolve(k%d, a%d, g%d, %s)", in.Client, in.Key, in.Attempt, in.Gen,
			[]string{"Accepted", "NotAccepted"}[in.Outcome])
	case OpInvalidateKey, OpQuery:
		return fmt.Sprintf("r%d %s(k%d)", in.Client, in.Op, in.Key)
	case OpBump:
		return fmt.Sprintf("r%d Bump(t%d)", in.Client, in.Target)
	case OpAdvance:
		if in.Lazy {
			return fmt.Sprintf("r%d Set(+%d)", in.Client, in.By)
		}
		return fmt.Sprintf("r%d Advance(+%d)", in.Client, in.By)
	}
	if in.Op == OpRelease && in.Window {
		return fmt.Sprintf("r%d Release(called at %d)", in.Client, in.Clock)
	}
	if in.Window {
		return fmt.Sprintf("r%d %s (called at %d)", in.Client, in.Op, in.Clock)
	}
	return fmt.Sprintf("r%d %s", in.Client, in.Op)
}

// setsDeadline reports whether op may set a deadline from its reading of
// the clock: a reservation's (Acquire, TryAcquire), a dispatch's
// (BeginDispatch), a new binding's idle deadline (CommitAccepted, Complete
// with Accepted, Resolve with Accepted) or a released one's (Release).
func setsDeadline(op OpKind) bool {
	switch op {
	case OpAcquire, OpTryAcquire, OpBeginDispatch, OpCommitAccepted, OpComplete, OpResolve, OpRelease:
		return true
	}
	return false
}
