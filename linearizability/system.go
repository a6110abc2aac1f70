package linearizability

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/placementlab/placement/impl/placement"
)

// Shape is the size of a checked system. Times are in model time units
// (seconds on the coordinator).
type Shape struct {
	Clients, Keys, Targets, Capacity int
	TTL                              int64
	ReserveTimeout, DispatchTimeout  int64
	QuarantineTTL                    int64
	// InitTimeout is what histories saved before the two timeouts were
	// split carry: it stands for both, and those histories have no
	// QuarantineTTL (quarantines that never expire while they run).
	InitTimeout int64 `json:",omitempty"`
}

// noQuarantineTTL stands for "no QuarantineTTL" in old histories: longer
// than any history runs (194 days of model seconds, within Config's bound).
const noQuarantineTTL = 1 << 24

// normalized fills what an old history's shape leaves out.
func (sh Shape) normalized() Shape {
	if sh.InitTimeout != 0 {
		if sh.ReserveTimeout == 0 {
			sh.ReserveTimeout = sh.InitTimeout
		}
		if sh.DispatchTimeout == 0 {
			sh.DispatchTimeout = sh.InitTimeout
		}
	}
	if sh.QuarantineTTL == 0 {
		sh.QuarantineTTL = noQuarantineTTL
	}
	return sh
}

// Unit is one model time unit on the coordinator's manual clock.
const Unit = time.Second

// Handle is what a client of a System holds.
type Handle uint8

// Handles.
const (
	HoldsNothing Handle = iota
	HoldsReservation
	HoldsDispatch
	HoldsLease
)

type client struct {
	res   *placement.Reservation[int]
	d     *placement.Dispatch[int]
	lease placement.Lease[int]
	holds Handle
	key   int // the key the handle is for
	// stalled: the client's last operation moved the clock while it held
	// a dispatch. refused: its last operation was refused because the
	// coordinator had ended the handle it held (revoked or fenced
	// meanwhile); which kind of handle. See Choose.
	stalled bool
	refused Handle
	// resLate: res came back from a DefinitelyNotAccepted that settled a
	// timed-out dispatch's quarantine, so it is not held.
	resLate bool
	// The handles the client stopped holding, kept to be used again
	// (Input.Again).
	oldRes    kept[*placement.Reservation[int]]
	oldD      kept[*placement.Dispatch[int]]
	lastLease kept[placement.Lease[int]]
}

// kept is a handle a client stopped holding, with its key and how it went
// stale.
type kept[H any] struct {
	h   H
	key int
	why Why
	ok  bool
}

// System is the coordinator under test, with a manual clock, and what each
// client holds. Targets are ints; key i is "k<i>".
type System struct {
	C       *placement.Coordinator[int]
	Clock   *placement.ManualClock
	Shape   Shape
	clients []client
	keys    []string
	// quarantined holds every attempt the coordinator reported
	// quarantined (from its Observer): a dispatch whose Accepted or
	// DefinitelyNotAccepted finds its attempt here had timed out.
	mu          sync.Mutex
	quarantined map[uint64]bool
}

// NewSystem builds a coordinator of the given shape.
func NewSystem(sh Shape, mutate ...func(*placement.Config[int])) (*System, error) {
	sh = sh.normalized()
	clk := placement.NewManualClock(0)
	cfg := placement.Config[int]{
		IdleTTL: time.Duration(sh.TTL) * Unit, ReserveTimeout: time.Duration(sh.ReserveTimeout) * Unit,
		DispatchTimeout: time.Duration(sh.DispatchTimeout) * Unit, QuarantineTTL: time.Duration(sh.QuarantineTTL) * Unit,
		MaxEntries: sh.Capacity, MaxKeyBytes: 16, Clock: clk,
		FirstAttempt: 1, // the model's attempt ids count from 1
	}
	for _, m := range mutate {
		m(&cfg)
	}
	s := &System{Clock: clk, Shape: sh, clients: make([]client, sh.Clients), quarantined: map[uint64]bool{}}
	observer := cfg.Observer
	cfg.Observer = func(ev placement.Event[int]) {
		if ev.Kind == placement.EventQuarantined {
			s.mu.Lock()
			s.quarantined[ev.Attempt] = true
			s.mu.Unlock()
		}
		if observer != nil {
			observer(ev)
		}
	}
	c, err := placement.New[int](cfg)
	if err != nil {
		return nil, err
	}
	s.C = c
	for k := 0; k < sh.Keys; k++ {
		s.keys = append(s.keys, fmt.Sprintf("k%d", k))
	}
	return s, nil
}

// Close closes the coordinator.
func (s *System) Close() { s.C.Close() }

// Holds returns what client r holds.
func (s *System) Holds(r int) Handle { return s.clients[r].holds }

// HeldKey returns the key client r's handle is for.
func (s *System) HeldKey(r int) int { return s.clients[r].key }

// KeptHandle is a handle a client stopped holding: which kind, its key, and
// how it went stale.
type KeptHandle struct {
	Handle Handle
	Key    int
	Why    Why
}

// Refused returns the kind of handle client r's last operation used, if
// it was refused because the coordinator had ended that handle (a revoked
// reservation, a fenced dispatch); HoldsNothing otherwise.
func (s *System) Refused(r int) Handle { return s.clients[r].refused }

// Stalled reports whether client r's last operation moved the clock while
// it held a dispatch.
func (s *System) Stalled(r int) bool { return s.clients[r].stalled }

// Kept lists the handles client r keeps to use again.
func (s *System) Kept(r int) []KeptHandle {
	cl := &s.clients[r]
	var out []KeptHandle
	if cl.oldRes.ok {
		out = append(out, KeptHandle{HoldsReservation, cl.oldRes.key, cl.oldRes.why})
	}
	if cl.oldD.ok {
		out = append(out, KeptHandle{HoldsDispatch, cl.oldD.key, cl.oldD.why})
	}
	if cl.lastLease.ok {
		out = append(out, KeptHandle{HoldsLease, cl.lastLease.key, cl.lastLease.why})
	}
	return out
}

// timedOut reports whether the coordinator quarantined attempt a.
func (s *System) timedOut(a uint64) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.quarantined[a]
}

// lostWhy is why client cl's reservation, reported lost, went stale.
func (cl *client) lostWhy() Why {
	if cl.resLate {
		return WhyDispatchTimeout
	}
	return WhyReservationTimeout
}

// keepRes keeps client cl's reservation as stale for why.
func (cl *client) keepRes(why Why) {
	cl.oldRes = kept[*placement.Reservation[int]]{h: cl.res, key: cl.key, why: why, ok: true}
}

// dispatchEnded keeps client cl's dispatch, which ended for why; its
// reservation, if kept, goes stale for the same reason, unless it is held
// again.
func (cl *client) dispatchEnded(why Why) {
	cl.oldD = kept[*placement.Dispatch[int]]{h: cl.d, key: cl.key, why: why, ok: true}
	if cl.oldRes.ok && cl.oldRes.h == cl.d.Reservation() {
		if why == WhyNotAccepted {
			cl.oldRes.ok = false
		} else {
			cl.oldRes.why = why
		}
	}
}

// doAgain performs in, an operation on one of the client's kept handles
// (Input.Again). It changes nothing the client holds.
func (s *System) doAgain(cl *client, in Input) Output {
	switch in.Op {
	case OpBeginDispatch:
		d, err := cl.oldRes.h.BeginDispatch(in.Target, in.Gen)
		if err == nil {
			return Output{Kind: OutDispatched, Attempt: d.Attempt(), Gen: d.Generation()}
		}
		return errOutput(err)
	case OpCommitAccepted:
		l, err := cl.oldRes.h.CommitAccepted(in.Target, in.Gen)
		if err == nil {
			return Output{Kind: OutCommitted, Target: l.Target(), Gen: l.Generation(), Attempt: l.Version()}
		}
		return errOutput(err)
	case OpCancel:
		return errOutput(cl.oldRes.h.Cancel())
	case OpComplete:
		o := []placement.Outcome{placement.Accepted, placement.DefinitelyNotAccepted, placement.Ambiguous}[in.Outcome]
		l, err := cl.oldD.h.Complete(o)
		if err == nil && o == placement.Accepted {
			return Output{Kind: OutCommitted, Target: l.Target(), Gen: l.Generation(), Attempt: l.Version()}
		}
		return errOutput(err)
	case OpDrop:
		cl.oldD.h.Drop()
		return Output{Kind: OutOK}
	case OpRelease:
		return errOutput(cl.lastLease.h.Release())
	case OpAbandon:
		return errOutput(cl.lastLease.h.Abandon())
	case OpInvalidate:
		return errOutput(cl.lastLease.h.Invalidate())
	case OpClose:
		return errOutput(cl.lastLease.h.Close())
	}
	return Output{Kind: OutError, Err: "no kept handle for " + in.Op.String()}
}

// KeyName returns key k's name.
func (s *System) KeyName(k int) string { return s.keys[k] }

// Do performs in on the coordinator and returns what it returned. Each
// client's operations must be issued sequentially (one goroutine per
// client); different clients may run concurrently.
func (s *System) Do(ctx context.Context, in Input) Output {
	cl := &s.clients[in.Client]
	cl.stalled = in.Op == OpAdvance && cl.holds == HoldsDispatch
	if in.Again {
		cl.refused = HoldsNothing
		return s.doAgain(cl, in)
	}
	out := s.do(ctx, cl, in)
	switch u := useOf(in); {
	case u >= 0 && useHandle[u] == HoldsReservation && out.Kind == OutLost:
		cl.refused = HoldsReservation
	case in.Op == OpComplete && out.Kind == OutFenced:
		cl.refused = HoldsDispatch
	default:
		cl.refused = HoldsNothing
	}
	return out
}

// do performs in, which uses no kept handle, for client cl.
func (s *System) do(ctx context.Context, cl *client, in Input) Output {
	switch in.Op {
	case OpAcquire, OpTryAcquire:
		var a placement.Acquisition[int]
		var err error
		if in.Op == OpAcquire {
			a, err = s.C.Acquire(ctx, s.keys[in.Key])
		} else {
			a, err = s.C.TryAcquire(s.keys[in.Key])
		}
		cl.key = in.Key
		switch {
		case err == nil && a.Hit():
			cl.lease, cl.holds = a.Lease, HoldsLease
			return Output{Kind: OutHit, Target: a.Lease.Target(), Gen: a.Lease.Generation(), Attempt: a.Lease.Version()}
		case err == nil:
			cl.res, cl.holds, cl.resLate = a.Reservation, HoldsReservation, false
			return Output{Kind: OutReserved}
		}
		return errOutput(err)
	case OpBeginDispatch:
		d, err := cl.res.BeginDispatch(in.Target, in.Gen)
		switch {
		case err == nil:
			cl.keepRes(WhyDispatched)
			if cl.oldD.ok && cl.oldD.why == WhyNotAccepted && cl.oldD.h.Reservation() == cl.res {
				cl.oldD.why = WhyRedispatched
			}
			cl.d, cl.holds = d, HoldsDispatch
			return Output{Kind: OutDispatched, Attempt: d.Attempt(), Gen: d.Generation()}
		case errors.Is(err, placement.ErrReservationLost):
			cl.keepRes(cl.lostWhy())
			cl.holds = HoldsNothing
		}
		return errOutput(err)
	case OpCommitAccepted:
		l, err := cl.res.CommitAccepted(in.Target, in.Gen)
		var gm *placement.GenerationMovedError[int]
		switch {
		case err == nil:
			cl.keepRes(WhyCommitAccepted)
			cl.lease, cl.holds = l, HoldsLease
			return Output{Kind: OutCommitted, Target: l.Target(), Gen: l.Generation(), Attempt: l.Version()}
		case errors.As(err, &gm):
			// Committed, stale at birth: a Bump raced the call. No lease
			// comes with the error: the request holds nothing.
			cl.keepRes(WhyCommitAccepted)
			cl.holds = HoldsNothing
			return staleOutput(gm, l)
		case errors.Is(err, placement.ErrReservationLost):
			cl.keepRes(cl.lostWhy())
			cl.holds = HoldsNothing
		}
		return errOutput(err)
	case OpCancel:
		cl.holds = HoldsNothing
		err := cl.res.Cancel()
		if err == nil {
			cl.keepRes(WhyCancel)
		} else {
			cl.keepRes(cl.lostWhy())
		}
		return errOutput(err)
	case OpComplete:
		o := []placement.Outcome{placement.Accepted, placement.DefinitelyNotAccepted, placement.Ambiguous}[in.Outcome]
		l, err := cl.d.Complete(o)
		late := s.timedOut(cl.d.Attempt()) && o != placement.Ambiguous
		cl.holds = HoldsNothing
		var gm *placement.GenerationMovedError[int]
		stale := errors.As(err, &gm) // committed, but stale at birth: no lease
		// A Lease comes only with a nil error; DefinitelyNotAccepted
		// answers ErrNotAccepted and Ambiguous an *AmbiguousError naming
		// this very attempt. Anything else is no answer the model allows.
		if bad := completeContract(cl.d, o, l, err); bad != "" {
			return Output{Kind: OutError, Err: bad}
		}
		if o != placement.Accepted && (errors.Is(err, placement.ErrNotAccepted) || errors.Is(err, placement.ErrAmbiguous)) {
			err = nil // the outcome's own answer: the model's ok
		}
		switch {
		case errors.Is(err, placement.ErrFenced):
			cl.dispatchEnded(WhyResolved)
		case err != nil && !stale:
		case o == placement.Ambiguous:
			cl.dispatchEnded(WhyAmbiguous)
		case late:
			cl.dispatchEnded(WhyDispatchTimeout)
		case o == placement.Accepted:
			cl.dispatchEnded(WhyAccepted)
		default:
			cl.dispatchEnded(WhyNotAccepted)
		}
		switch {
		case err != nil && !stale:
			return errOutput(err)
		case stale:
			return staleOutput(gm, l)
		case o == placement.Accepted:
			cl.lease, cl.holds = l, HoldsLease
			return Output{Kind: OutCommitted, Target: l.Target(), Gen: l.Generation(), Attempt: l.Version()}
		case o == placement.DefinitelyNotAccepted:
			// The reservation is held again, unless the result came late
			// and settled a quarantine; using it then reports it lost.
			cl.res, cl.holds, cl.resLate = cl.d.Reservation(), HoldsReservation, late
		}
		return Output{Kind: OutOK}
	case OpDrop:
		cl.d.Drop()
		cl.dispatchEnded(WhyDrop)
		cl.holds = HoldsNothing
		return Output{Kind: OutOK}
	case OpRelease, OpAbandon, OpInvalidate, OpClose:
		l := cl.lease
		why := [NumOps]Why{OpRelease: WhyRelease, OpAbandon: WhyAbandon, OpInvalidate: WhyInvalidate, OpClose: WhyClose}[in.Op]
		cl.lastLease = kept[placement.Lease[int]]{h: l, key: cl.key, why: why, ok: true}
		cl.holds = HoldsNothing
		switch in.Op {
		case OpRelease:
			return errOutput(l.Release())
		case OpAbandon:
			return errOutput(l.Abandon())
		case OpInvalidate:
			return errOutput(l.Invalidate())
		}
		return errOutput(l.Close())
	case OpResolve:
		res := []placement.Resolution{placement.ResolveAccepted, placement.ResolveNotAccepted}[in.Outcome]
		err := s.C.Resolve(s.keys[in.Key], in.Attempt, in.Gen, res)
		if errors.Is(err, placement.ErrStaleAtBirth) {
			return Output{Kind: OutOK, Stale: true} // settled, stale at birth
		}
		return errOutput(err)
	case OpInvalidateKey:
		removed, err := s.C.InvalidateKey(s.keys[in.Key])
		if err != nil {
			return errOutput(err)
		}
		if removed {
			return Output{Kind: OutRemoved}
		}
		return Output{Kind: OutNone}
	case OpBump:
		return Output{Kind: OutOK, Gen: s.C.BumpGeneration(in.Target)}
	case OpAdvance:
		if in.Lazy {
			return errOutput(s.Clock.SetBy(time.Duration(in.By) * Unit))
		}
		return errOutput(s.Clock.AdvanceBy(time.Duration(in.By) * Unit))
	case OpQuery:
		o, err := s.Observe(in.Key)
		if err != nil {
			return errOutput(err)
		}
		return o.Output()
	case OpReap:
		s.Clock.Reclaim()
		return Output{Kind: OutOK}
	case OpStats:
		st := s.C.Stats()
		if st.Quarantines != st.Resolutions+st.QuarantineExpirations+st.QuarantinesDropped+st.Quarantined {
			return Output{Kind: OutError, Err: fmt.Sprintf("Stats breaks the quarantine identity: %+v", st)}
		}
		bindings := make([]int, s.Shape.Targets)
		for t := range bindings {
			bindings[t] = s.C.Bindings(t)
		}
		return Output{Kind: OutOK, Live: st.Live, Quarantined: st.Quarantined, Bindings: joinInts(bindings)}
	}
	return Output{Kind: OutError, Err: "unknown operation " + in.Op.String()}
}

// staleOutput is a commit's answer when its binding was stale at birth: the
// committed attempt, from the error, which must come without a lease.
func staleOutput(gm *placement.GenerationMovedError[int], l placement.Lease[int]) Output {
	if l != (placement.Lease[int]{}) {
		return Output{Kind: OutError, Err: "a lease came with ErrStaleAtBirth"}
	}
	return Output{Kind: OutCommitted, Target: gm.Target, Gen: gm.Generation, Attempt: gm.Attempt, Stale: true}
}

// completeContract says what is wrong with Complete(o)'s answer (l, err) for
// guard d beyond what the model decides, or "" if nothing is: a lease comes
// only with a nil error (and never for an outcome other than Accepted); a
// DefinitelyNotAccepted that is not refused otherwise answers
// ErrNotAccepted; an Ambiguous one an *AmbiguousError naming d's attempt,
// target and generation.
func completeContract(d *placement.Dispatch[int], o placement.Outcome, l placement.Lease[int], err error) string {
	zero := l == (placement.Lease[int]{})
	var amb *placement.AmbiguousError[int]
	switch {
	case err != nil && !zero, o != placement.Accepted && !zero:
		return fmt.Sprintf("Complete(%v) returned a lease with error %v", o, err)
	case err == nil && o != placement.Accepted:
		return fmt.Sprintf("Complete(%v) returned no error", o)
	case o == placement.DefinitelyNotAccepted && errors.Is(err, placement.ErrAmbiguous),
		o == placement.Ambiguous && errors.Is(err, placement.ErrNotAccepted):
		return fmt.Sprintf("Complete(%v) returned %v", o, err)
	case errors.As(err, &amb) && (amb.Attempt != d.Attempt() || amb.Target != d.Target() || amb.Generation != d.Generation()):
		return fmt.Sprintf("Complete(Ambiguous) of attempt %d (target %d, generation %d) returned %v",
			d.Attempt(), d.Target(), d.Generation(), err)
	}
	return ""
}

func errOutput(err error) Output {
	var amb *placement.AmbiguousError[int]
	switch {
	case err == nil:
		return Output{Kind: OutOK}
	case errors.As(err, &amb):
		return Output{Kind: OutAmbiguous, Attempt: amb.Attempt, Gen: amb.Generation, Target: amb.Target}
	case errors.Is(err, placement.ErrCapacity):
		return Output{Kind: OutCapacity}
	case errors.Is(err, placement.ErrWouldWait):
		return Output{Kind: OutWouldWait}
	case errors.Is(err, placement.ErrCancelled):
		return Output{Kind: OutCancelled}
	case errors.Is(err, placement.ErrReservationLost):
		return Output{Kind: OutLost}
	case errors.Is(err, placement.ErrFenced):
		return Output{Kind: OutFenced}
	case errors.Is(err, placement.ErrUsed):
		return Output{Kind: OutUsed}
	case errors.Is(err, placement.ErrNotQuarantined):
		return Output{Kind: OutNotQuarantined}
	}
	return Output{Kind: OutError, Err: err.Error()}
}
