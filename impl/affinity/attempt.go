package affinity

import (
	"context"
	"errors"

	"github.com/placementlab/placement/impl/placement"
)

// testBeforeDispatch, set only by tests, runs in a placing dispatch between
// its read of the membership and BeginDispatch: where a Leave or a restart
// can land unseen by the read.
var testBeforeDispatch func()

type attemptKind uint8

const (
	attemptHit      attemptKind = iota + 1 // a later turn on the binding
	attemptFirst                           // the dispatch that places the session
	attemptUnpinned                        // no binding involved
)

// Attempt is one dispatch of a request to a target, from Turn.Dispatch to
// Complete: a handle (a value) on the turn's latest attempt. An Attempt
// of an earlier dispatch of the request, or of a Turn that is Done, is
// inert: its Complete is ErrTurnEnded (its Target, Hit and ID still say
// what it was). The zero Attempt is such a handle.
type Attempt struct {
	t      *turn
	gen    uint64 // the turn's use
	seq    uint32 // the attempt's number in the turn
	kind   attemptKind
	target Target
	id     uint64
}

// attempt is the turn's latest attempt (turnBody.cur).
type attempt struct {
	t      *turn
	target Target
	kind   attemptKind
	d      *placement.Dispatch[slot]
	seq    uint32
}

// current returns the attempt a is a handle on while it is the turn's
// latest and in flight, else nil.
func (a Attempt) current() *attempt {
	t := a.t
	if t == nil || t.gen.Load() != a.gen || t.flying == nil || t.flying.seq != a.seq {
		return nil
	}
	return t.flying
}

// Target returns where the request goes.
func (a Attempt) Target() Target { return a.target }

// ID returns the attempt id of a dispatch that places the session (a
// router sends it to the worker, so a resolver can ask what became of it),
// and 0 for a later turn or an unpinned request.
//
// Do not send it as an Idempotency-Key (or X-Idempotency-Key) header with
// Go's http.Client: the transport takes such a request for idempotent and
// re-sends it by itself when a reused connection drops, a replay neither
// the router nor the layer sees. Use a header of your own (for example
// X-Placement-Attempt), or set the request's GetBody to nil.
func (a Attempt) ID() uint64 { return a.id }

// id is the attempt id of a (see Attempt.ID).
func (a *attempt) id() uint64 {
	if a.kind == attemptFirst && a.t.onReplica() {
		return a.t.rt.Attempt()
	}
	if a.d == nil {
		return 0
	}
	return a.d.Attempt()
}

// Hit reports whether the attempt is a later turn on the session's binding.
func (a Attempt) Hit() bool { return a.kind == attemptHit }

// Context returns the context for the upstream call: for a dispatch that
// places the session (while in flight), one that ends at the dispatch's
// deadline unless an outcome came first (placement.Dispatch.Context);
// otherwise parent itself, with a cancel that does nothing (the call ends
// with the request's context, or when its response body is closed). Call
// cancel when the call (its whole body) ends.
func (a Attempt) Context(parent context.Context) (context.Context, context.CancelFunc) {
	if a.kind == attemptFirst {
		if x := a.current(); x != nil {
			if x.t.onReplica() {
				return x.t.rt.Context(parent)
			}
			if x.d != nil {
				return x.d.Context(parent)
			}
		}
	}
	return parent, noCancel
}

// noCancel is the cancel of a context Attempt.Context did not derive.
func noCancel() {}

// Dispatch sends the request to target, which the scheduler chose from
// Eligible. By the contract table: a pin is exact (a target it does not
// accept is a *MismatchError); a bound request's dispatch that the binding
// accepts is a later turn (a hit); one it does not accept is a
// *MismatchError in hard mode (nothing dispatched, the binding kept) and a
// move in soft mode (the binding follows: a fenced invalidation of the
// version this request holds, so of concurrent moves the first wins, then
// the session is placed on target); a placing request dispatches under a
// fresh attempt id. A target whose worker is not a member, failed, or does
// not serve its rank is an *IneligibleError (ErrPinnedWorkerGone).
//
// After a DefinitelyNotAccepted outcome the request may Dispatch again (to
// another target); after Accepted or an unknown outcome it may not
// (ErrTurnEnded), nor after Done.
func (h Turn) Dispatch(target Target) (Attempt, error) {
	t := h.live()
	if t == nil {
		return Attempt{}, ErrTurnEnded
	}
	a, err := t.dispatch(target)
	if err != nil {
		return Attempt{}, err
	}
	return Attempt{t: t, gen: h.gen, seq: a.seq, kind: a.kind, target: a.target, id: a.id()}, nil
}

func (t *turn) dispatch(target Target) (*attempt, error) {
	l := t.l
	if t.st == turnEnded || t.flying != nil || t.served {
		return nil, ErrTurnEnded
	}
	if err := l.dispatchableCached(target, &t.bm); err != nil {
		return nil, err
	}
	if t.req.HasPin && !t.req.Pin.Accepts(target) {
		l.stats.errors.Add(1)
		return nil, &MismatchError{Binding: t.req.Pin, Dispatch: target}
	}
	if t.onReplica() || (l.replicated() && t.st != turnUnpinned) {
		return t.dispatchReplica(target)
	}
	switch t.st {
	case turnBound:
		b := t.lease.Target().target()
		if b.Accepts(target) {
			return t.fly(attempt{t: t, target: target, kind: attemptHit}), nil
		}
		if l.cfg.Mode == ModeHard && !(mutant("HardPinFollows") && t.req.HasPin) {
			l.stats.errors.Add(1)
			return nil, &MismatchError{Binding: b, Dispatch: target}
		}
		// Soft: the binding follows the dispatch.
		if mutant("MovesWithoutFence") {
			_, _ = t.c.InvalidateKey(t.req.Session.k)
			_ = t.lease.Release()
		} else {
			_ = t.lease.Invalidate()
		}
		t.acq.Done()
		if !t.moved(MoveFollow) {
			t.unpinned(CauseMovesExhausted)
			return t.fly(attempt{t: t, target: target, kind: attemptUnpinned}), nil
		}
		t.st = turnMoving
		return t.place(target)
	case turnReserved, turnMoving:
		return t.place(target)
	default: // unpinned
		if t.remember {
			l.door[t.req.Phase].remember(t.req.Session, target)
		}
		return t.fly(attempt{t: t, target: target, kind: attemptUnpinned}), nil
	}
}

// fly records a as the attempt in flight and returns it: in the turn's
// own storage, under the next attempt number.
func (t *turn) fly(a attempt) *attempt {
	t.seq++
	a.seq = t.seq
	t.cur = a
	t.flying = &t.cur
	return t.flying
}

// dispatchableCached checks that target's worker is a member, up, and
// serves it, reading the worker from c when c read it in the current
// membership.
func (l *Layer) dispatchableCached(target Target, c *memberCache) error {
	m, ok, _ := c.lookup(l.mem, target.Worker)
	if !ok || m.failed || !m.serves(target) {
		l.stats.errors.Add(1)
		return &IneligibleError{Target: target, Cause: ErrPinnedWorkerGone}
	}
	return nil
}

// place dispatches a placing request (reserved, or moving: it reserves the
// session first, without waiting: a session another request holds means a
// concurrent move won) to target under a fresh attempt.
func (t *turn) place(target Target) (*attempt, error) {
	l := t.l
	if t.st == turnMoving {
		a, err := t.c.TryAcquire(t.req.Session.k)
		switch {
		case err == nil && a.Hit():
			// Another request placed the session since: keep its binding
			// if it accepts target, else go unpinned and leave it alone.
			if a.Lease.Target().target().Accepts(target) && l.mem.load()[target.Worker] != nil &&
				l.mem.load()[target.Worker].instance == a.Lease.Target().instance {
				t.acq, t.lease, t.st = a, a.Lease, turnBound
				return t.fly(attempt{t: t, target: target, kind: attemptHit}), nil
			}
			a.Done()
			t.unpinned(CauseMoveLost)
		case err == nil:
			t.reserved(a)
		case errors.Is(err, placement.ErrCapacity):
			t.unpinned(CauseCapacity)
		default: // ErrWouldWait, a quarantine, too many leases, closed
			if errors.Is(err, placement.ErrClosed) {
				t.st = turnEnded
				return nil, err
			}
			t.unpinned(CauseMoveLost)
		}
		if t.st == turnUnpinned {
			return t.fly(attempt{t: t, target: target, kind: attemptUnpinned}), nil
		}
	}
	r := t.acq.Reservation
	for tries := 0; ; tries++ {
		m := l.mem.load()[target.Worker]
		if m == nil || m.failed {
			l.stats.errors.Add(1)
			return nil, &IneligibleError{Target: target, Cause: ErrPinnedWorkerGone}
		}
		s := slotOf(target, m.instance)
		if testBeforeDispatch != nil {
			testBeforeDispatch()
		}
		d, err := r.BeginDispatch(s, t.c.Generation(s))
		switch {
		case errors.Is(err, placement.ErrFenced) && tries < 3:
			continue // the worker restarted between the two reads
		case errors.Is(err, placement.ErrReservationLost):
			t.acq.Done()
			t.unpinned(CauseReservationLost)
			return t.fly(attempt{t: t, target: target, kind: attemptUnpinned}), nil
		case err != nil:
			return nil, err
		}
		// A Join (restart) or Leave that landed between the read of the
		// membership and BeginDispatch: nothing was sent, so roll back.
		if now := l.mem.load()[target.Worker]; !mutant("DispatchesToDeparted") && (now == nil || now.instance != m.instance || now.failed) {
			_, _ = d.Complete(placement.DefinitelyNotAccepted)
			l.stats.errors.Add(1)
			return nil, &IneligibleError{Target: target, Cause: ErrPinnedWorkerGone}
		}
		return t.fly(attempt{t: t, target: target, kind: attemptFirst, d: d}), nil
	}
}

// Complete reports the attempt's outcome (placement.Accepted: the worker
// took the request, its response headers came; DefinitelyNotAccepted: it
// refused, or the request never reached it; Ambiguous: a timeout or a cut
// stream after the request was written). It returns nil when the request
// was served; otherwise:
//
//   - placement.ErrNotAccepted: the request may Dispatch again, to another
//     target. A placing dispatch's reservation is held again; a later
//     turn's refusal moves the binding (the next Dispatch places the
//     session anew), or with Config.KeepOnRefusal keeps it and routes this
//     request unpinned (CauseHitRefused); an unpinned one changes nothing.
//   - an *UnknownOutcomeError (ErrOutcomeUnknown): the request may have run,
//     so it must not be replayed. For a placing dispatch its Quarantine says
//     the session is quarantined until a late result, a Resolve, its
//     worker's restart or QuarantineTTL settles it; a later turn's binding
//     is kept (and not refreshed).
//   - a *placement.FencedError: a placing dispatch that had timed out
//     reported after its quarantine was settled (by a resolver, its
//     QuarantineTTL or its worker's restart): nothing changes; the session
//     is as the settlement left it.
//   - ErrTurnEnded (used twice), placement.ErrInvalidArgument (an unknown
//     outcome), placement.ErrClosed (the layer closed: nothing committed).
//
// An Accepted placing dispatch binds the session (the request holds its
// first lease until Done); if the worker restarted meanwhile the binding
// is stale at birth and the session stays unbound (counted in Stats), but
// the request was served: nil.
func (a Attempt) Complete(o placement.Outcome) error {
	x := a.current()
	if x == nil {
		return ErrTurnEnded
	}
	return x.complete(o)
}

func (a *attempt) complete(o placement.Outcome) error {
	t := a.t
	if o < placement.Accepted || o > placement.Ambiguous {
		return placement.ErrInvalidArgument
	}
	t.flying = nil
	l := t.l
	if o == placement.Accepted {
		t.served = true
	}
	if t.onReplica() && a.kind != attemptUnpinned {
		return a.completeReplica(o)
	}
	switch a.kind {
	case attemptFirst:
		lease, err := a.d.Complete(o)
		switch {
		case err == nil:
			t.lease, t.st = lease, turnBound
			l.stats.binds.Add(1)
			return nil
		case errors.Is(err, placement.ErrStaleAtBirth):
			l.stats.staleAtBirth.Add(1)
			t.st = turnEnded
			return nil
		case errors.Is(err, placement.ErrNotAccepted):
			return err // held again (a lost one shows at the next Dispatch)
		default: // ambiguous (quarantined), fenced, closed
			t.st = turnEnded
			var amb *placement.AmbiguousError[slot]
			if errors.As(err, &amb) {
				if t.req.Final {
					l.finalQ[t.req.Phase].Store(a.d.Attempt(), struct{}{})
				}
				return &UnknownOutcomeError{Target: a.target, Attempt: a.d.Attempt(), Quarantine: quarantined(amb, t.c.Now())}
			}
			return err
		}
	case attemptHit:
		switch o {
		case placement.Accepted:
			l.stats.hits.Add(1)
			return nil
		case placement.DefinitelyNotAccepted:
			if l.cfg.KeepOnRefusal {
				// The binding stays (its worker was only busy): this
				// request goes elsewhere, unpinned. A final request
				// still closes it (F1): the session is over.
				if t.req.Final {
					_ = t.lease.Close()
				} else {
					_ = t.lease.Release()
				}
				t.acq.Done()
				t.lease, t.acq = placement.Lease[slot]{}, placement.Acquisition[slot]{}
				t.unpinned(CauseHitRefused)
				return placement.ErrNotAccepted
			}
			// The bound worker refused a later turn: the binding moves
			// (fenced by the version this request holds).
			if l.invalidateRefused(t) {
				l.stats.moves[MoveRefused].Add(1)
			}
			t.acq.Done()
			if !t.moved(MoveRefused) {
				t.unpinned(CauseMovesExhausted)
			} else {
				t.st, t.hasPending = turnMoving, false
			}
			return placement.ErrNotAccepted
		default:
			t.outcome = placement.Ambiguous
			t.st = turnEnded
			return &UnknownOutcomeError{Target: a.target}
		}
	default:
		switch o {
		case placement.Accepted:
			return nil
		case placement.DefinitelyNotAccepted:
			return placement.ErrNotAccepted
		default:
			t.st = turnEnded
			return &UnknownOutcomeError{Target: a.target}
		}
	}
}

// Done ends whatever the request still holds: an attempt in flight (a
// placing one is quarantined: its outcome is unknown), the lease on the
// binding (released; closed for the session's final request, whatever
// its outcome, so the binding goes when the last request holding it ends;
// abandoned, without refreshing the idle TTL, after an unknown outcome), a
// reservation never
// dispatched. Done is idempotent: the Turn's state then serves later
// requests, and this handle (and its Attempts) are inert.
func (h Turn) Done() {
	t := h.live()
	if t == nil {
		return
	}
	t.done()
	t.recycle()
}

func (t *turn) done() {
	if t.onReplica() {
		t.flying = nil
		t.endReplica()
		t.st = turnEnded
		return
	}
	if t.st == turnEnded && t.lease == (placement.Lease[slot]{}) && t.acq == (placement.Acquisition[slot]{}) {
		return
	}
	if a := t.flying; a != nil && a.d != nil {
		a.d.Drop()
	}
	t.flying = nil
	if t.lease != (placement.Lease[slot]{}) {
		switch {
		case t.req.Final && !mutant("FinalInvalidates"):
			// The session is over whatever became of its final request
			// (an unknown outcome included): F1 before L2.
			_ = t.lease.Close()
		case t.req.Final:
			_ = t.lease.Invalidate()
		case t.outcome == placement.Ambiguous:
			_ = t.lease.Abandon()
		default:
			_ = t.lease.Release()
		}
	}
	t.acq.Done()
	t.lease, t.acq, t.st = placement.Lease[slot]{}, placement.Acquisition[slot]{}, turnEnded
}
