package replica

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"

	"github.com/placementlab/placement/impl/claims"
	"github.com/placementlab/placement/impl/placement"
)

// turnState is where a Turn is.
type turnState uint8

const (
	// turnHit: a cached hit, its lease held.
	turnHit turnState = iota + 1
	// turnHitCompleted: a cached hit whose outcome was reported.
	turnHitCompleted
	// turnDispatching: a placing turn with a dispatch begun.
	turnDispatching
	// turnBound: a placing turn accepted: its lease held.
	turnBound
	// turnOver: the turn holds nothing but what Done cleans up.
	turnOver
	// turnBegun: a placing turn begun by Begin, its claim read, waiting
	// for Dispatch to name its target.
	turnBegun
)

// Turn is one request's hold on its session, from Start to Done: a cached
// hit (a lease on the local binding, no store round trip) or a placing
// turn (the claim read or written before its first dispatch). A Turn is
// used by one goroutine, the request's.
//
// A Turn is a handle (a value, copied freely) on pooled turn state: once
// Done, the state may serve another request, and the handle's generation
// no longer matches it, so the old handle is inert: Complete, Dispatch and
// Move return ErrTurnState, Done does nothing, the other methods report
// zero values. It never acts on another request's turn. The zero Turn is
// such a handle.
type Turn struct {
	t   *turn
	gen uint64
}

// turn is a Turn's state: pooled; gen counts its uses (bumped when one
// ends), and a handle carries the one it was given for.
type turn struct {
	gen atomic.Uint64
	turnBody
}

// turnPool holds ended turns for later requests.
var turnPool = sync.Pool{New: func() any { return new(turn) }}

// newTurn returns a pooled turn holding b.
func newTurn(b turnBody) *turn {
	t := turnPool.Get().(*turn)
	t.turnBody = b
	return t
}

// recycle ends t's use: its handles go stale, and it returns to the pool
// (its body, overwritten whole by newTurn, may keep what it referred to
// alive until then, or until the pool drops it at a GC).
func (t *turn) recycle() {
	t.gen.Add(1)
	turnPool.Put(t)
}

// handle is the Turn of t (the zero Turn with err).
func handle(t *turn, err error) (Turn, error) {
	if err != nil || t == nil {
		return Turn{}, err
	}
	return Turn{t: t, gen: t.gen.Load()}, nil
}

// live returns the state h is a handle on, or nil once it ended (only
// its generation is read then: the state may serve another request).
func (h Turn) live() *turn {
	if h.t == nil || h.t.gen.Load() != h.gen {
		return nil
	}
	return h.t
}

// Hit reports whether the turn is a cached hit: a later turn on a
// session this replica holds, sent with no attempt id.
func (h Turn) Hit() bool { t := h.live(); return t != nil && t.Hit() }

// Target returns where to send the request: the claim's target.
func (h Turn) Target() claims.Target {
	if t := h.live(); t != nil {
		return t.target
	}
	return claims.Target{}
}

// Attempt returns the placing dispatch's attempt id (0 on a hit): send it
// to the worker so that a resolver can ask about it.
func (h Turn) Attempt() uint64 {
	if t := h.live(); t != nil {
		return t.Attempt()
	}
	return 0
}

// Rev returns the revision of the session's claim the turn acts under (0
// for a session placed unclaimed).
func (h Turn) Rev() int64 {
	if t := h.live(); t != nil {
		return t.Rev()
	}
	return 0
}

// Gen returns the store generation of the target's worker the turn's
// claim was made under (for a session placed unclaimed, the generation
// the replica saw when it placed it). Replicas that hold the same claim
// revision hold the same target and generation.
func (h Turn) Gen() int64 {
	if t := h.live(); t != nil {
		return t.Gen()
	}
	return 0
}

// Unclaimed reports whether the session was placed while the store was
// unreachable and is not reconciled yet.
func (h Turn) Unclaimed() bool { t := h.live(); return t != nil && t.Unclaimed() }

// Context returns the context for the upstream call: for a placing
// dispatch it ends at the dispatch's deadline unless an outcome came
// first (placement.Dispatch.Context); on a hit (or a Turn that is Done)
// it is parent itself, with a cancel that does nothing. Call cancel when
// the call (and its body) ends.
func (h Turn) Context(parent context.Context) (context.Context, context.CancelFunc) {
	if t := h.live(); t != nil {
		return t.Context(parent)
	}
	return parent, noCancel
}

// noCancel is the cancel of a context Context did not derive.
func noCancel() {}

// Complete reports the outcome of the request's send to Target.
//
// On a placing turn: Accepted binds the session (nil; the store learns
// that this replica holds it). DefinitelyNotAccepted closes the refusing
// target's claim (fenced by its revision) and reads or writes the next
// one, proposing a target not tried: ErrRetry says to send again to
// Target; after MaxAttempts dispatches a *RefusedError. Ambiguous (or
// any other outcome) quarantines the claim in the store, seen by every
// replica: a *QuarantinedError, until Resolve.
//
// On a hit: Accepted is nil; DefinitelyNotAccepted a *RefusedError (Hit;
// the binding is kept: the router may serve the request elsewhere,
// unpinned); Ambiguous ErrOutcomeUnknown (not replayed; the binding is
// kept). Complete of a hit is optional.
// After Done: ErrTurnState.
func (h Turn) Complete(out placement.Outcome) error {
	if t := h.live(); t != nil {
		return t.Complete(out)
	}
	return ErrTurnState
}

// Done ends the turn: a lease is released, or closed when final (the
// session's final request: when this replica's last lease on the session
// ends, its claim is closed in the store, fenced by the revision held);
// a dispatch still in flight is quarantined as Ambiguous; a reservation
// is given up. Done is idempotent; defer it right after Start.
// Once Done, the handle is inert.
func (h Turn) Done(final bool) {
	if t := h.live(); t != nil {
		t.Done(final)
		t.recycle()
	}
}

// Claim returns the session's current claim a begun placing turn read
// (ok false: none, or the store was unreachable). After a refused
// dispatch it is the refused claim, which the next Dispatch moves. A
// claim whose later turn was refused on this replica (Refused) reads as
// none: the turn places the session, and its Dispatch moves that claim.
func (h Turn) Claim() (claims.Claim, bool) {
	if t := h.live(); t != nil {
		return t.Claim()
	}
	return claims.Claim{}, false
}

// Dispatch begins a turn's dispatch to target, which the caller's
// scheduler chose: send the request to Target (with Attempt), then
// Complete.
//
// On a begun placing turn: the claim the turn read is adopted when target
// is its target, and moved to target otherwise (claims.Store.Move, fenced
// by its revision: a *claims.MoveError when another replica's move or
// write came first, and the turn ends); with no claim one is written
// (CreateOrGet proposing target; a *ClaimedError when another replica's
// claim to another target came first, the turn begun again under it).
// With the store unreachable the session is placed unclaimed on target.
//
// On a cached hit: target is the hit's own (nothing to do: send the
// request there), or Move(target). After a refused dispatch (Complete
// said DefinitelyNotAccepted) Dispatch sends the request again, to target
// (a refused hit moves its binding there).
// After Done: ErrTurnState.
func (h Turn) Dispatch(target claims.Target) error {
	if t := h.live(); t != nil {
		return t.Dispatch(target)
	}
	return ErrTurnState
}

// Refused reports whether a refused hit of a turn begun by Begin ended
// its binding on this replica (false when another request's move, or an
// eviction, had ended it already). The claim itself moves with the
// turn's next Dispatch.
func (h Turn) Refused() bool { t := h.live(); return t != nil && t.Refused() }

// EndBinding ends a cached hit's binding on this replica at once, as a
// refused hit's (its worker failed its health check, or no longer serves
// the bound rank): later turns begun here read its claim as none, and
// this turn's Dispatch moves the claim (fenced by its revision). It
// reports whether this call ended the binding (false when a move or an
// eviction had ended it already, or the turn is not a hit).
func (h Turn) EndBinding() bool { t := h.live(); return t != nil && t.EndBinding() }

// Move sends a cached hit elsewhere: it rewrites the session's claim from
// the revision the hit is on to target (claims.Store.Move, the spec's
// Move: fenced by that revision, so of concurrent moves of one claim on
// any replicas the first wins), and makes the turn a placing dispatch to
// target under the new claim: send the request to Target with Attempt,
// then Complete it as any placing turn (Accepted binds the session to
// target on this replica; every other replica's cache of the old claim is
// evicted by its Delete event and follows the new claim at its next
// turn). Call Move on a hit before Complete (or after a Complete that said
// DefinitelyNotAccepted: the refused hit moves); the old binding ends here at
// once (other requests in flight on it finish unheld, as after any
// rewrite of a claim elsewhere). A hit on a session placed while the
// store was unreachable (unclaimed) moves locally.
//
// Errors, after which the turn holds nothing (Done it; the session's next
// Start reads the claim again):
//   - a *claims.MoveError (errors.Is claims.ErrClaimMoved) when the
//     claim moved since this replica cached it: another replica's move
//     (the first won), a quarantine or a close elsewhere. Current is the
//     claim found. The cached binding is evicted.
//   - a *claims.MoveError (claims.ErrNotBound): the claim at the hit's
//     revision is not Bound (Quarantined, Closing): evicted likewise.
//   - claims.ErrUnavailable: the store could not be reached, and a read
//     did not settle whether the move was applied; the cached binding is
//     evicted (the store may have moved it).
//   - claims.ErrUnknownWorker from the store: target's registration ended
//     as the move was asked (nothing changed in the store).
//
// claims.ErrUnknownWorker when target is not a member in this replica's
// view: nothing is asked, and the turn stays a hit. ErrTurnState when the turn is not a hit awaiting its outcome; a
// *claims.ArgumentError (claims.ErrInvalidArgument) for an empty worker,
// a negative rank, or the hit's own target (a move there is no move).
// After Done: ErrTurnState.
func (h Turn) Move(target claims.Target) error {
	if t := h.live(); t != nil {
		return t.Move(target)
	}
	return ErrTurnState
}

// turnBody is the per-request part of a turn (zeroed between uses).
type turnBody struct {
	c       *Coordinator
	key     string
	ctx     context.Context
	propose Propose
	state   turnState
	done    bool

	lease placement.Lease[claims.Target]
	acq   placement.Acquisition[claims.Target]
	d     *placement.Dispatch[claims.Target]
	rec   *record
	s     *slot // a placing turn's slot (counted as used until Done)

	target     claims.Target
	tried      []claims.Target
	dispatches int

	// known is the claim a move wrote (Turn.Move), or the one a begun
	// turn read and adopts (knownAdopted), read at knownEpoch: the
	// placing turn's first read takes it instead of the store's.
	known        *claims.Claim
	knownEpoch   uint64
	knownAdopted bool

	// begun: the turn came from Begin (the caller names each target; a
	// refusal does not choose the next one). found is a begun turn's
	// claim (read at foundEpoch; foundOwn: this turn wrote or moved it).
	begun      bool
	found      *claims.Claim
	foundEpoch uint64
	foundOwn   bool
	// foundRefused: found is a claim whose later turn was refused here.
	foundRefused bool
	// hitOutcome is the outcome a hit's Complete reported; refused: a
	// begun hit's refusal ended its binding here (Refused).
	hitOutcome placement.Outcome
	refused    bool
}

// maxHitRaces bounds how often Start retries a hit whose binding lost its
// record while the hit took it (an eviction racing the hit).
const maxHitRaces = 8

// Start begins a request of session key: a cached hit when the local
// table binds the session to a claim the replica has not seen end (no
// store call), or a placing turn: the session's claim is read, or written
// to the target propose chooses (nil: Config.Propose) when it has none, a
// stale one, before the first dispatch. While another request of the
// session places it on this replica, Start waits (until ctx ends) and
// then hits its binding. When the store is unreachable the session is
// placed on this replica alone (unclaimed) and reconciled when the store
// is back.
//
// Errors: a *QuarantinedError (ErrQuarantined) while the session's claim
// is quarantined on any replica; a *ClosingError (ErrClosing) while it is
// closing; the core's (*placement.CapacityError, placement.ErrCancelled,
// placement.ErrKeyEmpty, placement.ErrClosed, ...) and propose's as they
// are. ctx also bounds the turn's store calls.
func (c *Coordinator) Start(ctx context.Context, key string, propose Propose) (Turn, error) {
	return handle(c.start(ctx, key, propose))
}

// start is Start.
func (c *Coordinator) start(ctx context.Context, key string, propose Propose) (*turn, error) {
	for range maxHitRaces {
		a, err := c.core.Acquire(ctx, key)
		if err != nil {
			return nil, c.coreErr(key, err)
		}
		if !a.Hit() {
			return c.firstTurn(ctx, key, a, propose)
		}
		if t := c.hitTurn(ctx, key, a); t != nil {
			return t, nil
		}
		// The binding's record was evicted as the hit took it: end the
		// binding (a no-op if the eviction did) and place the session.
		_ = a.Lease.Invalidate()
	}
	return nil, fmt.Errorf("replica: session %q: %w", key, ErrStoreMoved)
}

// hitLease takes a hit's lease on rec unless it was evicted since the
// lock-free lookup (checked and counted under s.mu, so that an eviction
// processed before the lease is never routed under).
func (c *Coordinator) hitLease(rec *record) bool {
	s := rec.s
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.cur.Load() != rec || rec.evicted.Load() {
		return false
	}
	s.addLeaseLocked(rec)
	if !rec.held.Load() && !rec.unclaimed && rec.rev != 0 && !rec.needHold.Load() {
		// The placing turn's Hold has not reached the store yet (or
		// failed): this lease, too, is held by the lineage at the next
		// pass unless that Hold lands first.
		c.needRehold(rec)
		c.poke()
	}
	return true
}

// Hit reports whether the turn is a cached hit: a later turn on a
// session this replica holds, sent with no attempt id.
func (t *turn) Hit() bool { return t.state == turnHit || t.state == turnHitCompleted }

// Target returns where to send the request: the claim's target.
func (t *turn) Target() claims.Target { return t.target }

// Attempt returns the placing dispatch's attempt id (0 on a hit): send it
// to the worker so that a resolver can ask about it.
func (t *turn) Attempt() uint64 {
	if t.d == nil {
		return 0
	}
	return t.d.Attempt()
}

// Rev returns the revision of the session's claim the turn acts under (0
// for a session placed unclaimed).
func (t *turn) Rev() int64 {
	if t.rec == nil {
		return 0
	}
	t.rec.s.mu.Lock()
	defer t.rec.s.mu.Unlock()
	return t.rec.rev
}

// Gen returns the store generation of the target's worker the turn's
// claim was made under (for a session placed unclaimed, the generation
// the replica saw when it placed it). Replicas that hold the same claim
// revision hold the same target and generation.
func (t *turn) Gen() int64 {
	if t.rec == nil {
		return 0
	}
	t.rec.s.mu.Lock()
	defer t.rec.s.mu.Unlock()
	return t.rec.gen
}

// Unclaimed reports whether the session was placed while the store was
// unreachable and is not reconciled yet.
func (t *turn) Unclaimed() bool {
	if t.rec == nil {
		return false
	}
	t.rec.s.mu.Lock()
	defer t.rec.s.mu.Unlock()
	return t.rec.unclaimed
}

// Context returns the context for the upstream call: for a placing
// dispatch it ends at the dispatch's deadline unless an outcome came
// first (placement.Dispatch.Context); on a hit it is parent's. Call cancel
// when the call (and its body) ends.
func (t *turn) Context(parent context.Context) (context.Context, context.CancelFunc) {
	if t.d != nil && t.state == turnDispatching {
		return t.d.Context(parent)
	}
	return parent, noCancel
}

// Complete is Turn.Complete on the turn's state.
func (t *turn) Complete(out placement.Outcome) error {
	switch t.state {
	case turnHit:
		t.state, t.hitOutcome = turnHitCompleted, out
		switch out {
		case placement.Accepted:
			return nil
		case placement.DefinitelyNotAccepted:
			if t.begun {
				// The binding ends on this replica at once (its worker
				// likely lost the session's state); the claim moves with
				// the turn's next Dispatch.
				t.refused = t.c.endRefusedHit(t.rec)
			}
			return &RefusedError{Key: t.key, Tried: []claims.Target{t.target}, Hit: true}
		}
		return fmt.Errorf("replica: session %q on %s: %w", t.key, t.target, ErrOutcomeUnknown)
	case turnDispatching:
	default:
		return ErrTurnState
	}
	c := t.c
	d := t.d
	switch out {
	case placement.Accepted:
		// The placer's lease counts before the core's commit makes the
		// binding visible: a hit that comes between the commit and bound
		// then finds it (a final request among those hits closes the
		// claim only after this request ends, as the core's Close waits
		// for the placer's lease).
		early := !mutant("PlacerLeaseLate")
		s := t.rec.s
		if early {
			s.mu.Lock()
			s.addLeaseLocked(t.rec)
			s.mu.Unlock()
		}
		lease, err := d.Complete(placement.Accepted)
		if testAfterCommit != nil {
			testAfterCommit()
		}
		if err != nil {
			if early {
				s.mu.Lock()
				s.dropLeaseLocked(t.rec)
				s.mu.Unlock()
			}
			t.state = turnOver
			t.dropPending()
			return err
		}
		t.lease, t.state = lease, turnBound
		c.bound(t, early)
		return nil
	case placement.DefinitelyNotAccepted:
		_, err := d.Complete(placement.DefinitelyNotAccepted)
		if !errors.Is(err, placement.ErrNotAccepted) {
			t.state = turnOver
			t.dropPending()
			return err
		}
		c.st.refusals.Add(1)
		t.tried = append(t.tried, t.target)
		if t.begun {
			// The caller names the next target (Dispatch), which moves
			// the refused claim there.
			t.refusedBegun()
			if t.dispatches >= c.cfg.MaxAttempts {
				t.state = turnOver
			}
			return &RefusedError{Key: t.key, Tried: append([]claims.Target(nil), t.tried...)}
		}
		c.closeRefused(t.rec)
		t.rec = nil
		if t.dispatches >= c.cfg.MaxAttempts {
			t.state = turnOver
			return &RefusedError{Key: t.key, Tried: append([]claims.Target(nil), t.tried...)}
		}
		if err := t.place(); err != nil {
			t.state = turnOver
			return err
		}
		return ErrRetry
	default:
		_, err := d.Complete(placement.Ambiguous)
		t.state = turnOver
		return c.quarantine(t, err)
	}
}

// Done is Turn.Done on the turn's state.
func (t *turn) Done(final bool) {
	if t.done {
		return
	}
	t.done = true
	c := t.c
	switch t.state {
	case turnDispatching:
		_ = t.Complete(placement.Ambiguous)
	case turnHit, turnHitCompleted, turnBound:
		if t.state == turnHitCompleted && t.hitOutcome == placement.Ambiguous && !final {
			// Its outcome unknown: the lease ends without refreshing the
			// binding's idle deadline (the core's Abandon), as the
			// affinity layer's row L2 says.
			_ = t.lease.Abandon()
		}
		c.endLease(t.rec, t.lease, final)
	}
	if t.found != nil {
		t.endBegun()
	}
	if t.acq.Reservation != nil {
		t.acq.Done()
	}
	if t.s != nil {
		t.dropPending()
		releaseSlot(t.s)
	}
}

// dropPending removes the turn's record if it never bound.
func (t *turn) dropPending() {
	rec := t.rec
	if rec == nil {
		return
	}
	s := rec.s
	s.mu.Lock()
	if rec.state == recPending {
		rec.evicted.Store(true)
		if s.cur.Load() == rec {
			s.cur.Store(nil)
		}
	}
	s.mu.Unlock()
}

// firstTurn places key: the turn holds the core's reservation.
func (c *Coordinator) firstTurn(ctx context.Context, key string, a placement.Acquisition[claims.Target], propose Propose) (*turn, error) {
	c.st.firstTurns.Add(1)
	if propose == nil {
		propose = c.propose
	}
	t := newTurn(turnBody{c: c, key: key, ctx: ctx, propose: propose, acq: a, s: c.useSlot(key)})
	if err := t.place(); err != nil {
		a.Done()
		releaseSlot(t.s)
		return nil, err
	}
	return t, nil
}

// maxReads bounds how often a placing turn reads the claim again (a
// claim that ended as it was read, a Reset, a generation that moved).
const maxReads = 4

// place reads the session's claim (or places it unclaimed) and begins
// the dispatch to its target.
func (t *turn) place() error {
	c := t.c
	for range maxReads {
		rec, err := c.readClaim(t)
		if err != nil {
			return err
		}
		s := rec.s
		s.mu.Lock()
		target, gen, unclaimed := rec.target, rec.gen, rec.unclaimed
		s.mu.Unlock()
		coreGen, ok := c.generations(target, gen)
		if !ok && !unclaimed {
			// The claim names a generation the view does not: read the
			// members (the claim may be stale: the store replaces it).
			if err := c.refreshMembers(t.ctx); err == nil {
				coreGen, ok = c.generations(target, gen)
			}
		}
		if !ok {
			// The worker left or restarted as the claim was read (or the
			// session placed unclaimed): read (or place) again.
			t.rec = rec
			t.dropPending()
			t.rec = nil
			continue
		}
		d, err := t.acq.Reservation.BeginDispatch(target, coreGen)
		if err != nil {
			t.rec = rec
			t.dropPending()
			t.rec = nil
			if errors.Is(err, placement.ErrFenced) {
				continue // the worker's generation moved since it was read
			}
			return err
		}
		rec.version.Store(d.Attempt())
		s.mu.Lock()
		rec.coreGen = coreGen
		s.mu.Unlock()
		t.d, t.rec, t.target, t.state = d, rec, target, turnDispatching
		t.dispatches++
		return nil
	}
	return fmt.Errorf("replica: session %q: %w", t.key, ErrStoreMoved)
}

// readClaim returns the record a placing turn dispatches under: the
// session's claim read (or written) through CreateOrGet, or a local
// placement when the store is unreachable. A quarantined or closing claim
// is cached, and later placing turns are refused from the cache until the
// claim's revision ends or its worker leaves or restarts: one whose
// worker's generation the replica's view no longer holds (read, or
// cached, before the change) is stale, and is read again, which replaces
// it in the store.
func (c *Coordinator) readClaim(t *turn) (*record, error) {
	s := t.s
	waited, refreshed := false, false
	for range maxReads {
		s.mu.Lock()
		if rec := s.cur.Load(); rec != nil && !rec.evicted.Load() && (rec.unclaimed || c.currentGen(rec.target, rec.gen) || mutant("RefusesStaleClaim")) {
			// A quarantined or closing record whose worker left or
			// restarted since is not refused from (the spec's NeedsClaim:
			// a stale entry needs a claim): the store replaces the claim,
			// as Begin's read drops such a record. (One the store never
			// recorded stays until it is settled.)
			switch rec.state {
			case recQuarantined:
				err := rec.quarantinedErrLocked()
				s.mu.Unlock()
				c.st.quarantineRefusals.Add(1)
				return nil, err
			case recClosing:
				rev := rec.rev
				s.mu.Unlock()
				return nil, &ClosingError{Key: s.key, Rev: rev}
			}
		}
		s.mu.Unlock()
		if c.isDown() {
			return c.placeUnclaimed(t)
		}
		epoch := c.epoch.Load()
		tried := t.tried
		var (
			cl        claims.Claim
			created   bool
			callEpoch uint64
			err       error
		)
		if t.known != nil {
			// The claim this turn's move wrote (its own write, as a
			// created claim), checked against the Resets and Deletes
			// since the move was asked for, like any claim read.
			cl, created, epoch, callEpoch = *t.known, !t.knownAdopted, t.knownEpoch, t.knownEpoch
			t.known = nil
		} else {
			cl, created, callEpoch, err = c.createOrGet(t.ctx, s.key, func() (claims.Target, error) {
				return t.propose(c.view.Load().list, tried)
			})
		}
		if err != nil {
			if errors.Is(err, claims.ErrUnavailable) {
				return c.placeUnclaimed(t)
			}
			return nil, err
		}
		if (cl.State == claims.Quarantined || cl.State == claims.Closing) && !c.currentGen(cl.Target, cl.Gen) && !mutant("RefusesStaleClaim") {
			// The claim was read before its worker left or restarted (a
			// read shared with a turn that began earlier, or a member
			// change as it returned): it is stale, and the store replaces
			// it at the next read (the spec's Claim: a stale claim is
			// written anew). The view may lag the store: read the members
			// once before reading the claim again.
			if refreshed {
				continue
			}
			refreshed = true
			if err := c.refreshMembers(t.ctx); err != nil || !c.currentGen(cl.Target, cl.Gen) {
				continue
			}
		}
		now := int64(c.core.Now())
		s.mu.Lock()
		if c.epoch.Load() != epoch || callEpoch != epoch || s.maxDeleted >= cl.Rev {
			s.mu.Unlock()
			continue // the claim ended (or may have) as it was read
		}
		s.lineageSeenLocked(cl.Born)
		if !created && s.closingLocked(cl) {
			s.mu.Unlock()
			if !waited {
				// This replica's close of the claim is in flight: wait
				// for it (it holds s.op), then ask again.
				waited = true
				s.op.Lock()
				//lint:ignore SA2001 an empty critical section: a wait for the close in flight
				s.op.Unlock()
				continue
			}
			return nil, &ClosingError{Key: s.key, Rev: cl.Rev}
		}
		rec := &record{s: s, rev: cl.Rev, gen: cl.Gen, target: cl.Target, attempt: cl.Attempt}
		switch cl.State {
		case claims.Quarantined:
			rec.state, rec.written = recQuarantined, true
			c.installLocked(s, rec)
			err := rec.quarantinedErrLocked()
			s.mu.Unlock()
			c.st.quarantinesSeen.Add(1)
			c.st.quarantineRefusals.Add(1)
			return nil, err
		case claims.Closing:
			rec.state = recClosing
			c.installLocked(s, rec)
			s.mu.Unlock()
			return nil, &ClosingError{Key: s.key, Rev: cl.Rev}
		}
		rec.state = recPending
		if created {
			rec.lastTouch.Store(now)
		} else {
			rec.adopted = true
			c.st.claimsAdopted.Add(1)
		}
		c.installLocked(s, rec)
		s.mu.Unlock()
		return rec, nil
	}
	return nil, fmt.Errorf("replica: session %q: %w", s.key, ErrStoreMoved)
}

// placeUnclaimed places t's session with the store unreachable: propose
// chooses among the members the replica knows.
func (c *Coordinator) placeUnclaimed(t *turn) (*record, error) {
	view := c.view.Load()
	target, err := t.propose(view.list, t.tried)
	if err != nil {
		return nil, err
	}
	m, ok := view.byWorker[target.Worker]
	if !ok {
		return nil, fmt.Errorf("replica: session %q: proposed %s: %w", t.key, target, claims.ErrUnknownWorker)
	}
	s := t.s
	rec := &record{s: s, state: recPending, gen: m.Gen, target: target, unclaimed: true}
	s.mu.Lock()
	c.installLocked(s, rec)
	s.mu.Unlock()
	return rec, nil
}

// claimResult is a shared CreateOrGet's answer.
type claimResult struct {
	c       claims.Claim
	created bool
	// epoch is the Reset count when the shared call began: a caller that
	// joined it after a Reset gets a claim read before that Reset.
	epoch uint64
}

// createOrGet is the store's CreateOrGet for key, shared by concurrent
// callers on this replica (one round trip), bounded by StoreTimeout; ctx
// ends the caller's wait, not the shared call. epoch is the Reset count
// when the shared call began (a claim read across a Reset is read again).
func (c *Coordinator) createOrGet(ctx context.Context, key string, propose func() (claims.Target, error)) (cl claims.Claim, created bool, epoch uint64, err error) {
	started := false
	ch := c.sf.DoChan(key, func() (any, error) {
		started = true
		epoch := c.epoch.Load()
		c.sfRunning.Add(1)
		defer c.sfRunning.Add(-1)
		sctx, cancel := c.opCtx(c.ctx)
		defer cancel()
		cl, created, err := c.store.CreateOrGet(sctx, key, propose)
		c.noteWrite(err)
		if unknownOutcome(err) && !mutant("UnsettledCreate") {
			// Its reply was lost: the claim may have been written. Read
			// it (taken as adopted: its idle deadline is touched); none
			// means it was not (the session is placed unclaimed).
			gctx, gcancel := c.opCtx(c.ctx)
			g, ok, gerr := c.store.Get(gctx, key)
			gcancel()
			c.note(gerr)
			if gerr == nil && ok {
				cl, created, err = g, false, nil
			}
		}
		if err == nil && created {
			c.st.claimsCreated.Add(1)
		}
		return claimResult{cl, created, epoch}, err
	})
	select {
	case r := <-ch:
		if !started {
			c.st.shared.Add(1)
		}
		if r.Err != nil {
			return claims.Claim{}, false, 0, r.Err
		}
		cr := r.Val.(claimResult)
		return cr.c, cr.created, cr.epoch, nil
	case <-ctx.Done():
		return claims.Claim{}, false, 0, fmt.Errorf("%w: %w", placement.ErrCancelled, context.Cause(ctx))
	}
}

// Test hooks (nil outside tests): testAfterCommit runs between a placing
// turn's commit in the local core (its binding visible to hits) and
// bound; testLeaseEnded between a record's last lease's count and what
// follows it (the close or the unhold).
var testAfterCommit, testLeaseEnded func()

// bound records an accepted placing dispatch: the record is the session's
// binding, and the store learns that this replica holds it. counted: the
// request's lease on it was counted already.
func (c *Coordinator) bound(t *turn, counted bool) {
	rec, s := t.rec, t.rec.s
	s.mu.Lock()
	if !counted {
		s.addLeaseLocked(rec)
	}
	rec.state = recBound
	evicted := rec.evicted.Load()
	if rec.rev != 0 && rec.rev == s.refusedRev && (!evicted || mutant("BoundForgetsRefusal")) {
		// Bound again under the revision whose binding ended here (a
		// dispatch to the same target adopted it): it is the session's
		// binding again. Not if a refused hit on this very binding ended
		// it as the commit landed (the hit came between the core's commit
		// and this call): the refusal stands.
		s.refusedRev = 0
	}
	if evicted {
		// The claim ended while the request was dispatched: the request
		// was served; the binding is not kept.
		if info, err := c.core.Query(s.key); err == nil && info.State == placement.StateBound && info.Attempt == rec.version.Load() {
			_, _ = c.core.InvalidateKey(s.key)
		}
	}
	unclaimed, adopted := rec.unclaimed, rec.adopted
	s.mu.Unlock()
	if unclaimed {
		c.st.unclaimed.Add(1)
		// Reconciled when the store answers again: after its Reset, or by
		// the keepalive's retry if the store was back already.
		c.reconcile.Store(true)
		c.poke()
		return
	}
	if evicted {
		// Its request is in flight all the same: hold the claim's
		// lineage by the revision it was dispatched under (a Reset or a
		// rewrite elsewhere evicted it; HoldLineage tells a lineage that
		// ended).
		c.needRehold(rec)
		c.poke()
		return
	}
	c.hold(s, rec)
	if adopted {
		c.kickTouch(rec) // another's claim: its idle deadline is unknown
	}
}

// quarantine records an Ambiguous placing dispatch: the core quarantined
// it (coreErr); the store's claim is quarantined too, so every replica
// refuses the session.
func (c *Coordinator) quarantine(t *turn, coreErr error) error {
	rec, s := t.rec, t.rec.s
	var amb *placement.AmbiguousError[claims.Target]
	if !errors.As(coreErr, &amb) {
		t.dropPending()
		return coreErr // settled already (a resolver, a late result)
	}
	s.mu.Lock()
	if s.cur.Load() != rec || rec.evicted.Load() {
		// The claim was evicted while the attempt was out (a Delete, a
		// Reset): the core's quarantine is this replica's own truth all
		// the same. Cache it afresh, so that Resolve and the refusals
		// find it (no placing turn can have installed another record:
		// the core's reservation was this turn's).
		nrec := &record{s: s, rev: rec.rev, gen: rec.gen, target: rec.target, unclaimed: rec.unclaimed}
		nrec.version.Store(rec.version.Load())
		c.installLocked(s, nrec)
		rec, t.rec = nrec, nrec
	}
	rec.state, rec.own, rec.attempt, rec.coreGen = recQuarantined, true, amb.Attempt, amb.Generation
	rec.qSince, rec.qUntil, rec.qAt = c.core.Now(), amb.Expires, amb.DispatchedAt
	qe := rec.quarantinedErrLocked()
	if rec.unclaimed {
		s.mu.Unlock()
		return qe
	}
	rev, gen := rec.rev, rec.gen
	s.writing++
	epoch := c.epoch.Load()
	s.mu.Unlock()
	err := c.writeQuarantine(context.WithoutCancel(t.ctx), rec, rev, amb.Attempt, gen, epoch, false)
	if retryable(err) {
		c.addRetry("quarantine", func(ctx context.Context) error {
			s.mu.Lock()
			pending := rec.state == recQuarantined && !rec.written && s.cur.Load() == rec
			// Settled or ended here meanwhile, but the store may hold the
			// quarantine all the same (a write whose reply was lost): read
			// what it holds (the late-quarantine path settles it there).
			unsure := rec.unsure && !rec.written
			reopens := mutant("ReopensSettled") // broken: the settled attempt's write is retried anyway
			if !pending && !unsure && !reopens {
				s.mu.Unlock()
				return nil
			}
			s.writing++
			epoch := c.epoch.Load()
			s.mu.Unlock()
			return c.writeQuarantine(ctx, rec, rev, amb.Attempt, gen, epoch, !pending && !reopens)
		})
	}
	s.mu.Lock()
	qe = rec.quarantinedErrLocked()
	s.mu.Unlock()
	return qe
}

// writeQuarantine writes rec's quarantine to the store, fenced by rev
// (with readOnly, it only reads whether an earlier write of it landed).
// A write whose outcome is unknown (its reply lost) or that was refused
// as moved (an earlier write of it may have landed) is settled by reading
// the store (readQuarantine), never assumed either way; when the read
// fails too, rec stays unsure and the caller's retry reads again. The
// caller counted the write in s.writing; it is uncounted here, and the
// events that waited for it are applied.
func (c *Coordinator) writeQuarantine(parent context.Context, rec *record, rev int64, attempt uint64, gen int64, epoch uint64, readOnly bool) error {
	s := rec.s
	s.mu.Lock()
	target, wasUnsure, unsureRev := rec.target, rec.unsure, rec.unsureRev
	s.mu.Unlock()
	wrote := rev // the revision the write whose outcome is read was fenced by
	var q claims.Claim
	var err error = errUnsettled
	if !readOnly {
		ctx, cancel := c.opCtx(parent)
		q, err = c.store.Quarantine(ctx, s.key, rev, attempt, gen)
		cancel()
		c.noteWrite(err)
	}
	known := err == nil
	if err != nil && (unknownOutcome(err) || errors.Is(err, claims.ErrClaimMoved)) && !mutant("UnsettledQuarantine") {
		cl, landed, ok, gerr := c.readQuarantine(parent, s.key, rev, attempt, gen)
		known = ok
		switch {
		case landed:
			q, err = cl, nil
		case ok && readOnly:
			err = nil // it never landed: nothing to settle in the store
		case ok && cl.Rev != rev:
			// The claim moved on without this quarantine: another
			// replica's attempt under the same revision was quarantined
			// first (and maybe settled since), or the claim ended. This
			// attempt's outcome is still unknown: it is written on the
			// claim's target and generation whenever the store holds
			// them (at once if the claim is bound again; after the other
			// quarantine is settled), never dropped. Unless a write of it
			// may have landed (its reply lost): then the claim may have
			// moved on because this very quarantine was settled
			// elsewhere, and writing it again would quarantine a settled
			// attempt: it is counted as unrecorded instead.
			if errors.Is(err, claims.ErrClaimMoved) && (!wasUnsure || cl.Rev == unsureRev) {
				// (An earlier write fenced by the claim's current
				// revision did not land: the revision would have moved.)
				q, err = c.requarantine(parent, s.key, cl, target, attempt, gen)
				if unknownOutcome(err) {
					known, wrote = false, cl.Rev // its reply lost: read again
				}
			} else {
				c.st.quarantinesUnrecorded.Add(1)
				err = fmt.Errorf("replica: quarantine of %q rev %d: the claim moved on (rev %d): %w", s.key, rev, cl.Rev, claims.ErrClaimMoved)
			}
		case !ok && readOnly:
			err = gerr
		}
	} else if mutant("UnsettledQuarantine") {
		known = true
	}
	s.mu.Lock()
	s.writing--
	if known {
		rec.unsure = false
	} else if unknownOutcome(err) {
		rec.unsure, rec.unsureRev = true, wrote
	}
	if err == nil && q.Rev == 0 {
		// Read only: it never landed.
		defer s.mu.Unlock()
		c.applyDeferredLocked(s, rec)
		return nil
	}
	if err == nil {
		c.st.quarantinesWritten.Add(1)
		rec.rev, rec.written = q.Rev, true
	}
	settled := rec.settled
	if err == nil && settled != settledNone && !mutant("ForgetsLateQuarantine") {
		// Resolve settled the attempt here while the write was out: the
		// store's quarantine would make every replica refuse the session
		// until the claim expired. The store learns the outcome (fenced by
		// the attempt and generation, like any Resolve); the Deletes it
		// brings evict what is cached.
		s.writing++
		qRev := rec.rev
		s.mu.Unlock()
		_, _, rerr := c.storeResolve(context.WithoutCancel(parent), s.key, attempt, gen, settled == settledAccepted, qRev)
		if rerr == nil {
			c.st.lateQuarantinesResolved.Add(1)
		} else if unknownOutcome(rerr) {
			c.addRetry("resolve", func(ctx context.Context) error {
				_, _, err := c.storeResolve(ctx, s.key, attempt, gen, settled == settledAccepted, qRev)
				if err == nil {
					c.st.lateQuarantinesResolved.Add(1)
				}
				return err
			})
		}
		s.mu.Lock()
		s.writing--
	}
	defer s.mu.Unlock()
	if s.cur.Load() == rec && rec.written && (s.maxDeleted >= rec.rev || c.epoch.Load() != epoch) {
		c.evictLocked(s, rec) // the quarantine ended (or may have) as it was written
		c.st.deleteEvictions.Add(1)
	}
	if s.cur.Load() == rec && rec.written {
		rec.epoch = epoch // checked above: current across the write
	}
	// The Deletes and Resets that waited for the write, for whatever
	// record is current now (a Resolve may have replaced rec).
	c.applyDeferredLocked(s, rec)
	return err
}

// closeRefused closes the claim a refused placing dispatch was made
// under, fenced by its revision.
func (c *Coordinator) closeRefused(rec *record) {
	s := rec.s
	s.mu.Lock()
	rec.evicted.Store(true)
	if s.cur.Load() == rec {
		s.cur.Store(nil)
	}
	rev, unclaimed := rec.rev, rec.unclaimed
	s.mu.Unlock()
	if !unclaimed {
		c.storeClose(s, rec, rev)
	}
}

// endLease ends a turn's lease on rec; the last local lease of a closing
// or evicted record closes or unholds its claim.
func (c *Coordinator) endLease(rec *record, lease placement.Lease[claims.Target], final bool) {
	if final && rec.refusedHere.Load() {
		// Its binding ended here already: the final request closes
		// nothing (its lease is released, as the core's Close of a lease
		// on an invalidated binding does).
		final = false
	}
	if final {
		rec.closing.Store(true)
		_ = lease.Close()
	} else {
		_ = lease.Release()
	}
	if !rec.used.Load() {
		rec.used.Store(true)
	}
	s := rec.s
	s.mu.Lock()
	n := rec.leases.Add(-1)
	if n == 0 {
		s.unleaseLocked(rec)
	}
	s.leases--
	others := s.othersLeasedLocked(rec) && !mutant("LeasesPerRecord")
	if n == 0 && others && rec.closing.Load() {
		// The session's final request, while another record of the key
		// (a copy read again after a Reset) still has leases: the close
		// waits for them.
		s.closeRec = rec
	}
	if n == 0 && !others && s.closeRec != nil && s.closeRec != rec {
		// The last lease of the session ended: the final request that
		// arrived on another record closes the claim now, if this record
		// is a copy of that claim and its binding still stands (a refused
		// later turn, or a move, ended it: then there is nothing to close,
		// as the core's closing binding ends with its invalidation).
		cr := s.closeRec
		s.closeRec = nil
		if cr.rev == rec.rev && !cr.refusedHere.Load() && !rec.refusedHere.Load() && !cr.gone.Load() ||
			mutant("ClosesEndedBinding") {
			rec.closing.Store(true)
		}
	} else if !others {
		s.closeRec = nil
	}
	if n == 0 && !others && rec.closing.Load() && !mutant("LateEviction") && s.cur.Load() == rec {
		// The binding's last lease ended: no hit may take a lease on it
		// from now on (hitLease checks evicted under s.mu), or the close
		// below would delete the claim under that hit.
		s.cur.Store(nil)
		rec.evicted.Store(true)
		if !rec.unclaimed && !rec.refusedHere.Load() {
			// and a read of the claim before the close lands is closing
			// (closingRev), not a binding to adopt.
			s.closingRev = max(s.closingRev, rec.rev)
		}
	}
	s.mu.Unlock()
	if testLeaseEnded != nil && n == 0 {
		testLeaseEnded()
	}
	if final && mutant("CloseWhileHeld") {
		c.lastLeaseEnded(rec)
		return
	}
	if n == 0 && (rec.closing.Load() || rec.evicted.Load()) {
		if others {
			// Other records of the key have leases: no close, and the
			// store's hold stays (their last lease ends it).
			c.endQuietly(rec)
			return
		}
		c.lastLeaseEnded(rec)
	}
}

// endQuietly ends rec (evicted, no store write) while other records of its
// key have leases: their last lease closes the claim or gives the hold up.
func (c *Coordinator) endQuietly(rec *record) {
	if !rec.ended.CompareAndSwap(false, true) {
		return
	}
	s := rec.s
	s.mu.Lock()
	if s.cur.Load() == rec {
		s.cur.Store(nil)
	}
	rec.evicted.Store(true)
	s.mu.Unlock()
}

// lastLeaseEnded runs once per record when its last local lease ended and
// the session closed (the claim is closed in the store, fenced by the
// revision the replica holds) or the record was evicted (the replica's
// hold is given up).
func (c *Coordinator) lastLeaseEnded(rec *record) {
	if !rec.ended.CompareAndSwap(false, true) {
		return
	}
	s := rec.s
	s.mu.Lock()
	if s.cur.Load() == rec {
		s.cur.Store(nil)
	}
	rec.evicted.Store(true)
	rev, unclaimed := rec.rev, rec.unclaimed
	// A closing binding that a refused later turn (or a failed worker)
	// ended here closes nothing: the session may be bound again under
	// the same revision since (a dispatch to the same target adopted it),
	// as the core's closing binding ends with its invalidation.
	closing := rec.closing.Load() && (!rec.refusedHere.Load() || mutant("ClosesEndedBinding"))
	handed := false
	if closing && !unclaimed {
		if cur := s.cur.Load(); cur != nil && cur != rec && !cur.evicted.Load() && !cur.unclaimed && cur.rev == rev &&
			!mutant("ClosesUnderAdopter") {
			// Another request of the session here dispatched under the
			// same claim (it read the claim and adopts it): it joins the
			// closing binding, as a hit on the core's closing binding
			// does, and its last lease closes the claim.
			cur.closing.Store(true)
			handed = true
		} else {
			s.closingRev = max(s.closingRev, rev)
		}
	}
	s.mu.Unlock()
	switch {
	case unclaimed, handed:
	case closing:
		c.storeClose(s, rec, rev)
	default:
		c.unhold(s, rec)
	}
}

// hold tells the store that this replica holds rec's claim: the first
// hold of a record, fenced by its current revision (Store.Hold: a claim
// that moved is evicted). A record evicted before it was held, and a hold
// that failed, are held again by their revision at the next keepalive
// pass (rehold) while they have requests in flight.
func (c *Coordinator) hold(s *slot, rec *record) {
	s.op.Lock()
	defer s.op.Unlock()
	s.mu.Lock()
	rev := rec.rev
	ok := !rec.evicted.Load() && s.cur.Load() == rec
	s.mu.Unlock()
	if mutant("SkipsHold") {
		return
	}
	if !ok {
		if rec.leases.Load() > 0 {
			c.needRehold(rec)
			c.poke()
		}
		return
	}
	ctx, cancel := c.opCtx(c.ctx)
	err := c.store.Hold(ctx, s.key, rev, c.cfg.Name)
	cancel()
	c.noteWrite(err)
	switch {
	case err == nil:
		rec.needHold.Store(false)
		rec.held.Store(true)
		c.st.holds.Add(1)
		s.mu.Lock()
		s.holder = rec
		if rec.evicted.Load() && rec.leases.Load() == 0 {
			c.poke() // evicted as it was held: give the hold up
		}
		s.mu.Unlock()
	case errors.Is(err, claims.ErrClaimMoved):
		rec.needHold.Store(false)
		s.mu.Lock()
		if s.cur.Load() == rec {
			c.evictLocked(s, rec)
			c.st.movedEvictions.Add(1)
		}
		leased := rec.leases.Load() > 0
		s.mu.Unlock()
		if leased {
			// Rewritten elsewhere (a quarantine, a deferred close) with
			// requests in flight here: hold the lineage by their revision
			// (HoldLineage tells a lineage that ended).
			c.needRehold(rec)
			c.poke()
		}
	default:
		c.maybeHeld(s, rec, err)
		c.needRehold(rec) // the keepalive pass holds it again (HoldLineage)
	}
}

// maybeHeld records that a Hold of rec's claim whose outcome is unknown
// (err: its reply lost) may have landed: unless a record holds the key
// already, rec is the key's holder, so that the hold is given up when rec
// ends, as one that surely landed (Unhold of a hold that never landed
// changes nothing).
func (c *Coordinator) maybeHeld(s *slot, rec *record, err error) {
	if !unknownOutcome(err) || mutant("UnsettledHold") {
		return
	}
	s.mu.Lock()
	if s.holder == nil {
		s.holder = rec
		if rec.evicted.Load() && rec.leases.Load() == 0 {
			c.poke() // ended already: give it up
		}
	}
	s.mu.Unlock()
}

// needRehold queues rec to be held again at the next keepalive pass, by
// the revision its requests in flight are on (rehold).
func (c *Coordinator) needRehold(rec *record) {
	rec.needHold.Store(true)
	c.reholdMu.Lock()
	c.reholdQ[rec] = struct{}{}
	c.reholdMu.Unlock()
}

// runReholds holds again the queued records (rehold); those that find the
// store unreachable stay queued.
func (c *Coordinator) runReholds(ctx context.Context) {
	c.reholdMu.Lock()
	q := c.reholdQ
	c.reholdQ = map[*record]struct{}{}
	c.reholdMu.Unlock()
	var keep []*record
	for rec := range q {
		if ctx.Err() != nil {
			keep = append(keep, rec)
			continue
		}
		if err := c.rehold(ctx, rec); errors.Is(err, claims.ErrUnavailable) || errors.Is(err, context.DeadlineExceeded) {
			keep = append(keep, rec)
		}
	}
	if len(keep) > 0 {
		c.reholdMu.Lock()
		for _, rec := range keep {
			c.reholdQ[rec] = struct{}{}
		}
		c.reholdMu.Unlock()
	}
}

// rehold holds rec's claim again by rec's revision (claims.HoldLineage:
// any revision of the current lineage; the spec's Reconnect), while rec
// has requests in flight (or is the key's current binding): after a
// Reset (the store came back, or events were lost: the replica's holds
// may have vanished with its store session, or were never made), or a
// hold that failed. nil: this replica holds the claim again;
// ErrClaimMoved: the lineage ended, and the requests finish unheld (a
// current record is evicted); ErrUnavailable: the next pass tries again.
func (c *Coordinator) rehold(parent context.Context, rec *record) error {
	s := rec.s
	s.op.Lock()
	defer s.op.Unlock()
	s.mu.Lock()
	rev, unclaimed := rec.rev, rec.unclaimed
	current := s.cur.Load() == rec && !rec.evicted.Load() && rec.state == recBound
	live := !rec.ended.Load() && (rec.leases.Load() > 0 || current)
	s.mu.Unlock()
	if !live || unclaimed || rev == 0 || mutant("SkipsHold") || mutant("NoRehold") {
		rec.needHold.Store(false)
		return nil
	}
	ctx, cancel := c.opCtx(parent)
	_, err := claims.HoldLineage(ctx, c.store, s.key, rev, c.cfg.Name)
	cancel()
	c.noteWrite(err)
	switch {
	case err == nil:
		rec.needHold.Store(false)
		rec.held.Store(true)
		c.st.reholds.Add(1)
		s.mu.Lock()
		// The store's hold is the key's: rec makes it unless a current
		// binding that holds already does.
		if h := s.holder; h == nil || h == rec || h != s.cur.Load() || h.evicted.Load() {
			s.holder = rec
		}
		if rec.evicted.Load() && rec.leases.Load() == 0 {
			c.poke() // its requests ended as it was held: give the hold up
		}
		s.mu.Unlock()
	case unknownOutcome(err):
		c.maybeHeld(s, rec, err)
	case errors.Is(err, claims.ErrClaimMoved):
		rec.needHold.Store(false)
		rec.gone.Store(true)
		c.st.reholdsEnded.Add(1)
		s.mu.Lock()
		if s.cur.Load() == rec {
			c.evictLocked(s, rec)
			c.st.movedEvictions.Add(1)
		}
		s.mu.Unlock()
	}
	return err
}

// unhold gives up this replica's hold on s's key if rec made it.
func (c *Coordinator) unhold(s *slot, rec *record) {
	s.op.Lock()
	defer s.op.Unlock()
	c.unholdOpLocked(s, rec)
}

// unholdOpLocked is unhold with s.op held.
func (c *Coordinator) unholdOpLocked(s *slot, rec *record) {
	s.mu.Lock()
	// The hold is the key's: it stays while any record has leases.
	mine := s.holder == rec && (!s.othersLeasedLocked(rec) && rec.leases.Load() == 0 || mutant("LeasesPerRecord"))
	s.mu.Unlock()
	if !mine {
		return
	}
	ctx, cancel := c.opCtx(c.ctx)
	err := c.store.Unhold(ctx, s.key, c.cfg.Name)
	cancel()
	c.noteWrite(err)
	if err != nil {
		return // the keepalive pass retries a stale holder
	}
	c.st.unholds.Add(1)
	s.mu.Lock()
	if s.holder == rec {
		s.holder = nil
	}
	s.mu.Unlock()
}

// storeClose closes the session's claim at rev (the revision the replica
// holds): deleted with no other holder, deferred (Closing) with one,
// stale (nothing changed) if rev is not current.
func (c *Coordinator) storeClose(s *slot, rec *record, rev int64) {
	s.op.Lock()
	defer s.op.Unlock()
	if mutant("UnfencedClose") {
		ctx, cancel := c.opCtx(c.ctx)
		if cl, ok, err := c.store.Get(ctx, s.key); err == nil && ok {
			rev = cl.Rev
		}
		cancel()
	}
	res, err := c.closeSettled(c.ctx, s.key, rev, false)
	if err != nil {
		if unknownOutcome(err) {
			c.addRetry("close", func(ctx context.Context) error {
				res, err := c.closeSettled(ctx, s.key, rev, true)
				if err == nil {
					c.countClose(res)
				}
				return err
			})
		}
		return
	}
	c.countClose(res)
	s.mu.Lock()
	h, cur := s.holder, s.cur.Load()
	if res != claims.CloseStale {
		// The store dropped this replica's hold with the close.
		s.holder = nil
	} else if s.closingRev == rev {
		// The lineage was rewritten (not closed): it is not closing.
		s.closingRev = 0
	}
	s.mu.Unlock()
	if res == claims.CloseStale && h != nil && h != cur {
		c.unholdOpLocked(s, h)
	}
}

// closeSettled is the store's Close of key at rev by this replica (with
// readFirst, a retry of one whose outcome is unknown: the claim is read
// first). A Close whose outcome is unknown (its reply lost) is settled by
// reading the claim, and its result is what the claim read shows: none,
// or a newer lineage: CloseDeleted (the lineage ended, by this close or
// otherwise); Closing in rev's lineage: CloseDeferred; rev still current:
// not applied (the error, as it was: the caller retries, reading first);
// rewritten otherwise: CloseStale. When the read fails, its error.
func (c *Coordinator) closeSettled(parent context.Context, key string, rev int64, readFirst bool) (claims.CloseResult, error) {
	if mutant("UnsettledClose") {
		readFirst = false
	}
	var err error = errUnsettled
	if !readFirst {
		ctx, cancel := c.opCtx(parent)
		var res claims.CloseResult
		res, err = c.store.Close(ctx, key, rev, c.cfg.Name)
		cancel()
		c.noteWrite(err)
		if !unknownOutcome(err) || mutant("UnsettledClose") {
			return res, err
		}
	}
	ctx, cancel := c.opCtx(parent)
	cl, found, gerr := c.store.Get(ctx, key)
	cancel()
	c.note(gerr)
	switch {
	case gerr != nil:
		return 0, gerr
	case found && cl.Rev == rev && readFirst:
		return c.closeSettled(parent, key, rev, false) // not applied: close now
	case found && cl.Rev == rev:
		return 0, err // not applied: retried
	case !found || cl.Born > rev:
		return claims.CloseDeleted, nil
	case cl.InLineage(rev) && cl.State == claims.Closing:
		return claims.CloseDeferred, nil
	}
	return claims.CloseStale, nil
}

func (c *Coordinator) countClose(res claims.CloseResult) {
	switch res {
	case claims.CloseDeleted:
		c.st.closesDeleted.Add(1)
	case claims.CloseDeferred:
		c.st.closesDeferred.Add(1)
	case claims.CloseStale:
		c.st.closesStale.Add(1)
	}
}

// coreErr translates the core's answer to Acquire: its quarantine is a
// *QuarantinedError naming the store's generation.
func (c *Coordinator) coreErr(key string, err error) error {
	var amb *placement.AmbiguousError[claims.Target]
	if !errors.As(err, &amb) {
		return err
	}
	c.st.quarantineRefusals.Add(1)
	if v, ok := c.slots.Load(key); ok {
		s := v.(*slot)
		s.mu.Lock()
		defer s.mu.Unlock()
		if rec := s.cur.Load(); rec != nil && rec.state == recQuarantined && rec.own && rec.attempt == amb.Attempt {
			return rec.quarantinedErrLocked()
		}
	}
	qe := &QuarantinedError{Key: key, Attempt: amb.Attempt, Target: amb.Target, Local: true,
		Until: amb.Expires, DispatchedAt: amb.DispatchedAt}
	if m, ok := c.view.Load().byWorker[amb.Target.Worker]; ok {
		qe.Gen = m.Gen
	}
	return qe
}

// kickTouch asks the keepalive to touch rec's claim now (dropped when the
// queue is full: the periodic pass touches it).
func (c *Coordinator) kickTouch(rec *record) {
	select {
	case c.kickCh <- rec:
	default:
	}
}

// errUnsettled stands for the unknown outcome of a write that an earlier
// call left unsettled (its reply lost, and the store not read since).
var errUnsettled = &claims.UnavailableError{Op: "settle", Err: errors.New("replica: a write's outcome is not known yet")}

// unknownOutcome reports whether a store write that ended with err may or
// may not have been applied: its reply was lost (the store unreachable as
// it answered, the connection cut after the request was sent, or the
// call's deadline passed). The project treats such a write as it treats
// a dispatch: its outcome is settled by reading the store, never assumed.
func unknownOutcome(err error) bool {
	return errors.Is(err, claims.ErrUnavailable) || errors.Is(err, context.DeadlineExceeded)
}

// readQuarantine reads key's claim to settle a Quarantine of attempt (at
// gen, fenced by rev) whose outcome is unknown: landed when the claim is
// quarantined with attempt at gen (attempt ids are unique: it is this
// write's); otherwise cl is the claim read (zero when there is none).
// known is false when the read failed (gerr).
func (c *Coordinator) readQuarantine(parent context.Context, key string, rev int64, attempt uint64, gen int64) (cl claims.Claim, landed, known bool, gerr error) {
	ctx, cancel := c.opCtx(parent)
	cl, ok, gerr := c.store.Get(ctx, key)
	cancel()
	c.note(gerr)
	if gerr != nil {
		return claims.Claim{}, false, false, gerr
	}
	if !ok {
		return claims.Claim{}, false, true, nil
	}
	return cl, cl.State == claims.Quarantined && cl.Attempt == attempt && cl.Gen == gen, true, nil
}

// errQuarantineWaits: an own quarantine the store refused because
// another attempt's quarantine holds the claim (both dispatched under one
// revision): it is written once that one is settled (retried by the
// keepalive).
var errQuarantineWaits = fmt.Errorf("replica: another attempt's quarantine holds the claim: %w", claims.ErrClaimMoved)

// retryable reports whether a write that ended with err is queued for the
// keepalive to retry: its outcome is unknown, or it waits for another
// attempt's quarantine.
func retryable(err error) bool {
	return unknownOutcome(err) || errors.Is(err, errQuarantineWaits)
}

// requarantine records attempt (dispatched to target at generation gen)
// on key's claim cl, read after the Quarantine fenced by the attempt's
// revision was refused as moved: cl is bound to the same target and
// generation (the other attempt's quarantine settled accepted, or a new
// claim there): a Quarantine fenced by cl's revision; cl quarantined
// there by another attempt: errQuarantineWaits (retried); otherwise (no
// claim, another target or generation, Closing) the store cannot hold it:
// the attempt stays quarantined on this replica alone, counted in
// Stats.QuarantinesUnrecorded, and the error says so.
func (c *Coordinator) requarantine(parent context.Context, key string, cl claims.Claim, target claims.Target, attempt uint64, gen int64) (claims.Claim, error) {
	if mutant("DropsSecondQuarantine") {
		return claims.Claim{}, fmt.Errorf("replica: quarantine of %q: %w", key, claims.ErrClaimMoved)
	}
	switch {
	case cl.Rev != 0 && cl.Target == target && cl.Gen == gen && cl.State == claims.Bound:
		ctx, cancel := c.opCtx(parent)
		q, err := c.store.Quarantine(ctx, key, cl.Rev, attempt, gen)
		cancel()
		c.noteWrite(err)
		if errors.Is(err, claims.ErrClaimMoved) {
			return claims.Claim{}, errQuarantineWaits // moved again: read again at the next pass
		}
		return q, err
	case cl.Rev != 0 && cl.Target == target && cl.Gen == gen && cl.State == claims.Quarantined:
		return claims.Claim{}, errQuarantineWaits
	}
	c.st.quarantinesUnrecorded.Add(1)
	return claims.Claim{}, fmt.Errorf("replica: quarantine of %q attempt %d: the claim it was dispatched under ended: "+
		"the store cannot record it (kept on this replica): %w", key, attempt, claims.ErrClaimMoved)
}
