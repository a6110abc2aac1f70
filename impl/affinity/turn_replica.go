package affinity

import (
	"context"
	"errors"
	"fmt"

	"github.com/placementlab/placement/impl/claims"
	"github.com/placementlab/placement/impl/placement"
	"github.com/placementlab/placement/impl/replica"
	"github.com/placementlab/placement/internal/testhooks"
)

// The request path over replicas (Config.Replicas). A Turn holds a
// replica.Turn begun with Begin: a cached hit, or a placing turn that has
// read the session's claim. The contract table's rules are the same
// functions as over the local core, applied to what the replica read:
//   - a cached hit, or a current claim another replica wrote, is the
//     session's binding (turnBound): Eligible narrows to it, a dispatch it
//     accepts goes there (a claim read is adopted: the replica's first
//     dispatch of the session carries an attempt id), and a soft dispatch
//     elsewhere moves the claim (replica.Turn.Dispatch: claims.Store.Move,
//     fenced by the revision read, so the first of concurrent moves on any
//     replicas wins and the others go unpinned: CauseMoveLost);
//   - no claim: the request places the session, and its dispatch writes
//     the claim (first writer wins across replicas);
//   - a binding whose worker failed or no longer serves its rank, and a
//     refused later turn, move the claim at the request's next dispatch;
//   - a quarantine, on any replica, is Q1's; a claim closing elsewhere is
//     routed unpinned (CauseClosing).

// acquireReplica is acquire over replicas: it reads the session's entry
// (Begin) until it is bound to a live target, reserved for this request,
// or the request goes unpinned, as acquire does over the core.
func (t *turn) acquireReplica(ctx context.Context) error {
	l, c := t.l, t.l.rep[t.req.Phase]
	// The request's later store calls (a move's reservation) outlive
	// Start's ctx, as over the core nothing after Start waits on it
	// (detached where they are made: rejoin).
	t.ctx = ctx
	pk := l.phaseKey(t.req.Session, t.req.Phase)
	for round := 0; ; round++ {
		if err := ctx.Err(); err != nil && round > 0 {
			return fmt.Errorf("%w: %w", placement.ErrCancelled, err)
		}
		rt, err := c.Begin(ctx, pk)
		// qe and ce are read apart (replicaErrs), on error paths only:
		// errors.As takes their addresses, which moves them to the heap.
		var qe *replica.QuarantinedError
		var ce *replica.ClosingError
		if err != nil {
			qe, ce = replicaErrs(err)
		}
		switch {
		case err == nil:
		case qe != nil:
			if l.cfg.Mode == ModeHard {
				l.stats.errors.Add(1)
				return l.replicaQuarantinedError(t.req.Phase, qe)
			}
			if !mutant("QuarantineGoesAnywhere") {
				t.hint, t.hinted = fromClaims(qe.Target), true
			}
			if t.req.Final {
				l.finalQ[t.req.Phase].Store(qe.Attempt, struct{}{})
			}
			t.unpinned(CauseQuarantined)
			return nil
		case ce != nil:
			t.unpinned(CauseClosing)
			return nil
		case errors.Is(err, placement.ErrCapacity):
			// C1, before A1: an unseen session is remembered all the same.
			if c.Len() >= l.admit && !mutant("AdmitsFlood") {
				if _, _, seen := l.door[t.req.Phase].check(t.req.Session); !seen {
					t.remember = true
				}
			}
			t.unpinned(CauseCapacity)
			return nil
		case errors.Is(err, placement.ErrTooManyLeases):
			t.unpinned(CauseLeases)
			return nil
		default:
			return err
		}
		b, bound := bindingOf(rt)
		if !bound {
			t.rt = rt
			t.reservedReplica()
			return nil
		}
		if mc, moved := l.judgeTarget(b); moved && !mutant("FollowsDepartedWorker") {
			// The bound worker failed, left or no longer serves the rank:
			// a move. A cached binding ends here at once and the session is
			// read again (this request then reserves it, and its dispatch
			// moves the claim, fenced by the revision it was bound at); a
			// claim another replica wrote is moved by the dispatch itself.
			if rt.Hit() {
				rt.EndBinding()
				rt.Done(false)
				if testhooks.StartGaveUp != nil {
					testhooks.StartGaveUp(ctx, true)
				}
				if !t.moved(mc) {
					t.unpinned(CauseMovesExhausted)
					return nil
				}
				continue
			}
			if !t.moved(mc) {
				rt.Done(false)
				t.unpinned(CauseMovesExhausted)
				return nil
			}
			t.rt, t.rbound, t.st = rt, b, turnMoving
			return nil
		}
		if t.req.HasPin && !agreesWith(t.req.Pin, b) && l.cfg.Mode == ModeHard && !mutant("HardPinFollows") {
			rt.Done(false)
			if testhooks.StartGaveUp != nil {
				testhooks.StartGaveUp(ctx, false)
			}
			l.stats.errors.Add(1)
			return &PinError{Pin: t.req.Pin, Binding: b}
		}
		t.rt, t.rbound, t.st = rt, b, turnBound
		if !rt.Hit() && testhooks.StartRead != nil {
			testhooks.StartRead(ctx)
		}
		return nil
	}
}

// replicaErrs returns the replica's quarantine or closing error err
// carries, if any (the quarantine first).
func replicaErrs(err error) (*replica.QuarantinedError, *replica.ClosingError) {
	var qe *replica.QuarantinedError
	if errors.As(err, &qe) {
		return qe, nil
	}
	var ce *replica.ClosingError
	if errors.As(err, &ce) {
		return nil, ce
	}
	return nil, nil
}

// reservedReplica records that the request holds the session's
// reservation (a begun turn with no binding), counting the move that led
// to it, if any.
func (t *turn) reservedReplica() {
	t.st = turnReserved
	if t.hasPending {
		t.l.stats.moves[t.pending].Add(1)
		t.hasPending = false
	}
}

// bindingOf is the session's binding a begun replica turn holds or read:
// a cached hit's target, or a current claim another replica wrote; bound
// false when the turn holds the session's reservation with no binding.
func bindingOf(rt replica.Turn) (Target, bool) {
	if rt.Hit() {
		return fromClaims(rt.Target()), true
	}
	if cl, ok := rt.Claim(); ok {
		return fromClaims(cl.Target), true
	}
	return Target{}, false
}

// judgeTarget is judge for a binding over replicas (a worker's restart is
// the store's new generation, which the replica fences itself): its
// worker left, failed, or no longer serves its rank.
func (l *Layer) judgeTarget(b Target) (MoveCause, bool) {
	m, ok := l.mem.load().current(b.Worker)
	switch {
	case !ok:
		return MoveWorkerGone, true
	case m.failed:
		return MoveWorkerFailed, true
	case !m.serves(b):
		return MoveRankGone, true
	}
	return 0, false
}

// endReplica ends the replica turn the request holds.
func (t *turn) endReplica() {
	if t.onReplica() {
		t.rt.Done(t.req.Final)
		t.rt = replica.Turn{}
	}
}

// dispatchReplica is Dispatch over replicas, after the checks every
// backend makes.
func (t *turn) dispatchReplica(target Target) (*attempt, error) {
	l := t.l
	switch t.st {
	case turnBound:
		b := t.rbound
		if b.Accepts(target) {
			// The binding's own target: a cached hit stays one, a claim
			// read is adopted.
			m := l.mem.load()[target.Worker]
			if testBeforeDispatch != nil && !t.rt.Hit() {
				testBeforeDispatch()
			}
			if err := t.rt.Dispatch(toClaims(b)); err != nil {
				return t.replicaLost(target, err)
			}
			if !t.rt.Hit() {
				if err := t.recheck(target, m); err != nil {
					return nil, err
				}
				return t.fly(attempt{t: t, target: target, kind: attemptFirst}), nil
			}
			return t.fly(attempt{t: t, target: target, kind: attemptHit}), nil
		}
		if l.cfg.Mode == ModeHard && !(mutant("HardPinFollows") && t.req.HasPin) {
			l.stats.errors.Add(1)
			return nil, &MismatchError{Binding: b, Dispatch: target}
		}
		// Soft: the binding follows the dispatch.
		if t.rt.Hit() {
			// A cached binding: it ends here (fenced by the version this
			// request holds), then the request reserves the session anew.
			t.rt.EndBinding()
			t.endReplica()
		}
		if !t.moved(MoveFollow) {
			t.endReplica()
			t.unpinned(CauseMovesExhausted)
			return t.fly(attempt{t: t, target: target, kind: attemptUnpinned}), nil
		}
		t.st = turnMoving
		return t.placeReplica(target)
	case turnReserved, turnMoving:
		return t.placeReplica(target)
	default: // unpinned
		if t.remember {
			l.door[t.req.Phase].remember(t.req.Session, target)
		}
		return t.fly(attempt{t: t, target: target, kind: attemptUnpinned}), nil
	}
}

// placeReplica dispatches a placing or moving request to target: the
// replica writes the claim there (or moves it, fenced by the revision it
// was read at) before the dispatch.
func (t *turn) placeReplica(target Target) (*attempt, error) {
	if t.st == turnMoving && !t.onReplica() {
		// The binding was given up: reserve the session without waiting
		// (a session another request holds means a concurrent move won),
		// as the core's path does.
		if a := t.rejoin(target); a != nil {
			return a, nil
		}
		if !t.onReplica() {
			t.hasPending = false
			t.unpinned(CauseMoveLost)
			return t.fly(attempt{t: t, target: target, kind: attemptUnpinned}), nil
		}
	}
	m := t.l.mem.load()[target.Worker]
	if m == nil || m.failed {
		t.l.stats.errors.Add(1)
		return nil, &IneligibleError{Target: target, Cause: ErrPinnedWorkerGone}
	}
	if testBeforeDispatch != nil {
		testBeforeDispatch()
	}
	if err := t.rt.Dispatch(toClaims(target)); err != nil {
		return t.replicaLost(target, err)
	}
	if err := t.recheck(target, m); err != nil {
		return nil, err
	}
	if t.st == turnMoving && t.hasPending {
		t.l.stats.moves[t.pending].Add(1)
		t.hasPending = false
	}
	t.st = turnReserved
	return t.fly(attempt{t: t, target: target, kind: attemptFirst}), nil
}

// replicaLost handles a replica Dispatch that did not begin: a move
// another replica's came before, a claim written meanwhile, the store
// unreachable during a move (the request goes unpinned: CauseMoveLost),
// or an unknown worker (ineligible).
func (t *turn) replicaLost(target Target, err error) (*attempt, error) {
	l := t.l
	switch {
	case errors.Is(err, claims.ErrUnknownWorker):
		l.stats.errors.Add(1)
		return nil, &IneligibleError{Target: target, Cause: ErrPinnedWorkerGone}
	case errors.Is(err, claims.ErrClaimMoved), errors.Is(err, claims.ErrNotBound), errors.Is(err, claims.ErrUnavailable):
		t.endReplica()
		t.hasPending = false
		if errors.Is(err, claims.ErrClaimMoved) {
			// Another request moved or placed the session first: keep its
			// binding if it accepts target (without waiting: a session
			// another request holds means a concurrent move won), else go
			// unpinned and leave it alone.
			if a := t.rejoin(target); a != nil {
				return a, nil
			}
			if t.onReplica() {
				// The session is unbound now (the claim ended meanwhile)
				// and this request holds its reservation: place it, as the
				// core's path places a session it reserves after a move.
				if err := t.rt.Dispatch(toClaims(target)); err == nil {
					t.reservedReplica()
					return t.fly(attempt{t: t, target: target, kind: attemptFirst}), nil
				}
				t.endReplica()
			}
		}
		t.unpinned(CauseMoveLost)
		return t.fly(attempt{t: t, target: target, kind: attemptUnpinned}), nil
	case errors.Is(err, placement.ErrClosed):
		t.endReplica()
		t.st = turnEnded
		return nil, err
	}
	return nil, err
}

// completeReplica is Complete over replicas for a hit or a placing
// attempt.
func (a *attempt) completeReplica(o placement.Outcome) error {
	t, l := a.t, a.t.l
	rt := t.rt
	err := rt.Complete(o)
	if a.kind == attemptHit {
		switch o {
		case placement.Accepted:
			l.stats.hits.Add(1)
			return nil
		case placement.DefinitelyNotAccepted:
			if l.cfg.KeepOnRefusal {
				t.endReplica()
				t.unpinned(CauseHitRefused)
				return placement.ErrNotAccepted
			}
			// L1: the binding ends here at once; the request's next
			// dispatch reserves the session and moves the claim.
			if rt.Refused() || mutant("CountsRefusalCalls") {
				l.stats.moves[MoveRefused].Add(1)
			}
			t.endReplica()
			if !t.moved(MoveRefused) {
				t.unpinned(CauseMovesExhausted)
			} else {
				t.st, t.hasPending = turnMoving, false
			}
			return placement.ErrNotAccepted
		default:
			t.st = turnEnded
			return &UnknownOutcomeError{Target: a.target}
		}
	}
	var qe *replica.QuarantinedError
	switch {
	case errors.Is(err, placement.ErrStaleAtBirth):
		// The worker restarted before the commit: served, not bound.
		l.stats.staleAtBirth.Add(1)
		t.st = turnEnded
		return nil
	case err == nil:
		if t.st != turnBound {
			l.stats.binds.Add(1)
		}
		t.rbound, t.st = fromClaims(rt.Target()), turnBound
		return nil
	case errors.Is(err, placement.ErrNotAccepted):
		if _, ok := rt.Claim(); ok {
			t.st = turnMoving // the refused claim moves with the next dispatch
		} else {
			t.st = turnReserved
		}
		return placement.ErrNotAccepted
	case errors.As(err, &qe):
		t.st = turnEnded
		l.stats.quarantined.Add(1)
		if t.req.Final {
			l.finalQ[t.req.Phase].Store(qe.Attempt, struct{}{})
		}
		q := l.replicaQuarantinedError(t.req.Phase, qe)
		return &UnknownOutcomeError{Target: a.target, Attempt: qe.Attempt, Quarantine: q}
	}
	t.st = turnEnded
	return fmt.Errorf("affinity: %w", err)
}

// rejoin begins the request again, without waiting, after it gave its
// binding up or lost a move to another request's: a hit on the new
// binding, or the new claim adopted, when it accepts target (an Attempt);
// a reservation (t.rt set, nil returned: the caller dispatches under it);
// nil with t.rt nil otherwise (nothing held).
func (t *turn) rejoin(target Target) *attempt {
	c := t.l.rep[t.req.Phase]
	rt, err := c.TryBegin(context.WithoutCancel(t.ctx), t.l.phaseKey(t.req.Session, t.req.Phase))
	if err != nil {
		return nil
	}
	b, bound := bindingOf(rt)
	if !bound {
		t.rt = rt
		return nil
	}
	if _, moved := t.l.judgeTarget(b); moved || !b.Accepts(target) || rt.Dispatch(toClaims(b)) != nil {
		rt.Done(false)
		return nil
	}
	t.rt, t.rbound, t.st = rt, b, turnBound
	kind := attemptHit
	if !rt.Hit() {
		kind = attemptFirst
	}
	return t.fly(attempt{t: t, target: target, kind: kind})
}

// replicaQuarantinedError is the layer's error for a replica's
// quarantine: its own attempt's carries the end its QuarantineTTL sets;
// another replica's, whose times this replica does not know, says
// QuarantineTTL from now.
func (l *Layer) replicaQuarantinedError(p Phase, qe *replica.QuarantinedError) *QuarantinedError {
	c := l.rep[p]
	now, until := c.Now(), qe.Until
	if until == 0 {
		until = now + c.QuarantineTTL()
	}
	return &QuarantinedError{Target: fromClaims(qe.Target), Attempt: qe.Attempt, Generation: uint64(qe.Gen),
		Until: until, RetryAfter: max(0, until-now), DispatchedAt: qe.DispatchedAt}
}

// recheck is the core path's rule for a dispatch that places (or adopts):
// a Leave, a restart or a Fail of target's worker that landed between the
// read of the membership (m) and the replica's dispatch rolls it back
// (nothing was sent: DefinitelyNotAccepted, the reservation and the claim
// kept for another dispatch) and is an *IneligibleError.
func (t *turn) recheck(target Target, m *member) error {
	now := t.l.mem.load()[target.Worker]
	if mutant("DispatchesToDeparted") || (now != nil && m != nil && now.instance == m.instance && !now.failed) {
		return nil
	}
	_ = t.rt.Complete(placement.DefinitelyNotAccepted)
	if _, ok := t.rt.Claim(); ok && t.st != turnBound {
		t.st = turnMoving
	}
	t.l.stats.errors.Add(1)
	return &IneligibleError{Target: target, Cause: ErrPinnedWorkerGone}
}

// onReplica reports whether the turn holds a replica turn.
func (t *turn) onReplica() bool { return t.rt != (replica.Turn{}) }
