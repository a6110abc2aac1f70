package linearizability

import (
	"fmt"
	"strings"
)

// Stale handles. A client keeps the last Reservation, Dispatch guard and
// Lease it stopped holding, and uses them again (Input.Again): every such
// use must be refused (ErrReservationLost, ErrUsed; Drop does nothing) and
// change nothing. To the model a stale handle is a request whose pc no
// longer matches the handle (see Stepper.expect). Why says how the handle
// went stale, for the coverage the tests demand (Coverage.StaleMissing).

// Why says how a handle a client kept went stale.
type Why uint8

// Reasons. A reservation behind a dispatch takes the dispatch's reason
// once the dispatch ends (a DefinitelyNotAccepted in time makes it held
// again: it is no longer stale).
const (
	WhyNone               Why = iota
	WhyCancel                 // reservation: Cancel
	WhyReservationTimeout     // reservation: revoked by its timeout (a use reported it lost)
	WhyCommitAccepted         // reservation: CommitAccepted
	WhyDispatched             // reservation: its dispatch is in flight
	WhyAccepted               // dispatch (and its reservation): Complete(Accepted)
	WhyNotAccepted            // dispatch: Complete(DefinitelyNotAccepted) in time; the reservation is held again
	WhyRedispatched           // dispatch: DefinitelyNotAccepted, then its reservation dispatched again
	WhyAmbiguous              // dispatch (and its reservation): Complete(Ambiguous)
	WhyDrop                   // dispatch (and its reservation): Drop
	WhyDispatchTimeout        // dispatch (and its reservation): the dispatch timed out; its late result settled the quarantine
	WhyResolved               // dispatch (and its reservation): a Resolve settled its quarantine first (Complete was fenced)
	WhyRelease                // lease: Release
	WhyAbandon                // lease: Abandon
	WhyInvalidate             // lease: Invalidate
	WhyClose                  // lease: Close
	NumWhys
)

var whyNames = [NumWhys]string{"-", "Cancel", "reservation timeout", "CommitAccepted", "dispatch in flight",
	"Accepted", "DefinitelyNotAccepted", "DefinitelyNotAccepted, redispatched", "Ambiguous", "Drop",
	"dispatch timeout", "Resolve", "Release", "Abandon", "Invalidate", "Close"}

// String names the reason.
func (w Why) String() string {
	if w < NumWhys {
		return whyNames[w]
	}
	return fmt.Sprintf("Why(%d)", uint8(w))
}

// MarshalText writes the reason's name, so a saved history reads well and
// survives a reordering of the reasons.
func (w Why) MarshalText() ([]byte, error) { return []byte(w.String()), nil }

// UnmarshalText reads a reason's name.
func (w *Why) UnmarshalText(b []byte) error {
	for i, n := range whyNames {
		if n == string(b) {
			*w = Why(i)
			return nil
		}
	}
	return fmt.Errorf("unknown stale-handle reason %q", b)
}

// staleWhys lists, per handle, the reasons a kept handle of that kind can
// have: each must be exercised.
var staleWhys = map[Handle][]Why{
	HoldsReservation: {WhyCancel, WhyReservationTimeout, WhyCommitAccepted, WhyDispatched, WhyAccepted,
		WhyAmbiguous, WhyDrop, WhyDispatchTimeout, WhyResolved},
	HoldsDispatch: {WhyAccepted, WhyNotAccepted, WhyRedispatched, WhyAmbiguous, WhyDrop, WhyDispatchTimeout,
		WhyResolved},
	HoldsLease: {WhyRelease, WhyAbandon, WhyInvalidate, WhyClose},
}

// A stale use is what a client does with a kept handle.
const (
	useBeginDispatch = iota
	useCommitAccepted
	useCancel
	useCompleteAccepted
	useCompleteNotAccepted
	useCompleteAmbiguous
	useDrop
	useRelease
	useAbandon
	useInvalidate
	useClose
	numUses
)

var useNames = [numUses]string{"BeginDispatch", "CommitAccepted", "Cancel", "Complete(Accepted)",
	"Complete(DefinitelyNotAccepted)", "Complete(Ambiguous)", "Drop", "Release", "Abandon", "Invalidate", "Close"}

// useHandle is the handle each use acts on.
var useHandle = [numUses]Handle{HoldsReservation, HoldsReservation, HoldsReservation, HoldsDispatch,
	HoldsDispatch, HoldsDispatch, HoldsDispatch, HoldsLease, HoldsLease, HoldsLease, HoldsLease}

var handleNames = map[Handle]string{HoldsReservation: "reservation", HoldsDispatch: "dispatch", HoldsLease: "lease"}

// useOf returns in's use of a handle, or -1 if in uses none.
func useOf(in Input) int {
	switch in.Op {
	case OpBeginDispatch:
		return useBeginDispatch
	case OpCommitAccepted:
		return useCommitAccepted
	case OpCancel:
		return useCancel
	case OpComplete:
		return useCompleteAccepted + in.Outcome
	case OpDrop:
		return useDrop
	case OpRelease:
		return useRelease
	case OpAbandon:
		return useAbandon
	case OpInvalidate:
		return useInvalidate
	case OpClose:
		return useClose
	}
	return -1
}

// StaleCoverage counts the uses of stale handles.
type StaleCoverage struct {
	// Again counts the uses of kept handles, by why they are stale and
	// what the client did with them.
	Again [NumWhys][numUses]int
	// First counts the first uses of handles the coordinator had ended
	// while the client still held them: a reservation revoked by its
	// timeout (lost), a dispatch whose quarantine a Resolve settled
	// (fenced).
	First [numUses]int
}

func (c *StaleCoverage) add(o StaleCoverage) {
	for w := range c.Again {
		for u := range c.Again[w] {
			c.Again[w][u] += o.Again[w][u]
		}
	}
	for u := range c.First {
		c.First[u] += o.First[u]
	}
}

// count notes in, which returned out, if it used a stale handle.
func (c *StaleCoverage) count(in Input, out Output) {
	u := useOf(in)
	switch {
	case u < 0:
	case in.Again:
		c.Again[in.Stale][u]++
	case out.Kind == OutLost && useHandle[u] == HoldsReservation, out.Kind == OutFenced && in.Op == OpComplete:
		c.First[u]++
	}
}

// Missing lists the kinds of stale use never exercised: every reason a
// kept handle of each kind can have, every use of each kind of handle, and
// the first use of a revoked reservation and of a fenced dispatch.
func (c *StaleCoverage) Missing() []string {
	var out []string
	for _, h := range []Handle{HoldsReservation, HoldsDispatch, HoldsLease} {
		for _, w := range staleWhys[h] {
			n := 0
			for u := range c.Again[w] {
				if useHandle[u] == h {
					n += c.Again[w][u]
				}
			}
			if n == 0 {
				out = append(out, fmt.Sprintf("%s after %s", handleNames[h], w))
			}
		}
	}
	for u := 0; u < numUses; u++ {
		n := 0
		for w := range c.Again {
			n += c.Again[w][u]
		}
		if n == 0 {
			out = append(out, fmt.Sprintf("%s on a stale %s", useNames[u], handleNames[useHandle[u]]))
		}
	}
	lost, fenced := c.First[useBeginDispatch]+c.First[useCommitAccepted]+c.First[useCancel], 0
	for u := useCompleteAccepted; u <= useCompleteAmbiguous; u++ {
		fenced += c.First[u]
	}
	if lost == 0 {
		out = append(out, "first use of a revoked reservation")
	}
	if fenced == 0 {
		out = append(out, "first use of a dispatch resolved meanwhile")
	}
	return out
}

// Total is the number of stale uses counted.
func (c *StaleCoverage) Total() int {
	n := 0
	for w := range c.Again {
		for _, k := range c.Again[w] {
			n += k
		}
	}
	for _, k := range c.First {
		n += k
	}
	return n
}

// String renders the counts as a table: one row per kind of handle and
// reason, one column per use.
func (c *StaleCoverage) String() string {
	var b strings.Builder
	for _, h := range []Handle{HoldsReservation, HoldsDispatch, HoldsLease} {
		var cols []int
		for u := 0; u < numUses; u++ {
			if useHandle[u] == h {
				cols = append(cols, u)
			}
		}
		fmt.Fprintf(&b, "%-48s", "stale "+handleNames[h]+", after")
		for _, u := range cols {
			fmt.Fprintf(&b, " %*s", max(len(useNames[u]), 5), useNames[u])
		}
		b.WriteByte('\n')
		row := func(name string, counts func(u int) int) {
			fmt.Fprintf(&b, "  %-46s", name)
			for _, u := range cols {
				fmt.Fprintf(&b, " %*d", max(len(useNames[u]), 5), counts(u))
			}
			b.WriteByte('\n')
		}
		for _, w := range staleWhys[h] {
			row(w.String(), func(u int) int { return c.Again[w][u] })
		}
		switch h {
		case HoldsReservation:
			row("(first use after its timeout: lost)", func(u int) int { return c.First[u] })
		case HoldsDispatch:
			row("(first use after a Resolve: fenced)", func(u int) int { return c.First[u] })
		}
	}
	return b.String()
}

// StaleOneIn: Choose picks a use of a kept, stale handle (if the client
// keeps one) once in this many choices, and once in two right after the
// coordinator refused a handle the client held (revoked or fenced: the
// client retries blindly) or while a guard's successor from the same
// reservation is in flight.
const StaleOneIn = 8

// chooseStale picks a use of one of the handles client r keeps (in carries
// the client), now and then (see StaleOneIn); ok is false when it picks
// none.
func chooseStale(sys *System, in Input, pick func(n int) int) (Input, bool) {
	kept := sys.Kept(in.Client)
	if len(kept) == 0 {
		return in, false
	}
	refused, successor := sys.Refused(in.Client), -1
	for i, k := range kept {
		if k.Why == WhyRedispatched && sys.Holds(in.Client) == HoldsDispatch {
			successor = i
		}
	}
	if pick(StaleOneIn) != 0 && (refused == HoldsNothing && successor < 0 || pick(2) != 0) {
		return in, false
	}
	h := kept[pick(len(kept))]
	for i, k := range kept {
		// The handle just refused is the one tried again; a guard whose
		// successor is in flight gets at least half the picks.
		if k.Handle == refused || i == successor && pick(2) == 0 {
			h = k
		}
	}
	in.Again, in.Key, in.Stale = true, h.Key, h.Why
	switch h.Handle {
	case HoldsReservation:
		in.Target = pick(sys.Shape.Targets)
		in.Gen = sys.C.Generation(in.Target)
		in.Op = []OpKind{OpBeginDispatch, OpCommitAccepted, OpCancel}[pick(3)]
	case HoldsDispatch:
		if pick(4) == 0 {
			in.Op = OpDrop
		} else {
			in.Op, in.Outcome = OpComplete, pick(3)
		}
	default:
		in.Op = []OpKind{OpRelease, OpAbandon, OpInvalidate, OpClose}[pick(4)]
	}
	return in, true
}
