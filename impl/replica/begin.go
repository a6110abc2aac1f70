package replica

import (
	"context"
	"errors"
	"fmt"

	"github.com/placementlab/placement/impl/claims"
	"github.com/placementlab/placement/impl/placement"
)

// Begin starts a request of session key without choosing its target: for
// a router whose scheduler picks the target after it knows the session's
// binding (the affinity layer over replicas). A cached hit is Start's hit
// (no store call). Otherwise the turn is placing: it holds the local
// reservation and has read the session's claim (Claim: a current Bound
// claim, written by any replica), and dispatches nothing until Dispatch
// names a target: the claim's own target adopts it, another moves it
// (claims.Store.Move, fenced), and with no claim Dispatch writes one.
//
// ctx bounds Begin's wait and its read; the turn's later store calls are
// bounded by Config.StoreTimeout alone (Start's turn, by contrast, uses
// its ctx throughout).
//
// Errors are Start's: a *QuarantinedError (ErrQuarantined) while the
// claim is quarantined on any replica, a *ClosingError while it is
// closing, the core's. When the store is unreachable the turn reads no
// claim, and Dispatch places the session unclaimed.
func (c *Coordinator) Begin(ctx context.Context, key string) (Turn, error) {
	return handle(c.begin(ctx, key, true))
}

// TryBegin is Begin without waiting: while another request of the
// session places it on this replica it returns placement.ErrWouldWait.
func (c *Coordinator) TryBegin(ctx context.Context, key string) (Turn, error) {
	return handle(c.begin(ctx, key, false))
}

func (c *Coordinator) begin(ctx context.Context, key string, wait bool) (*turn, error) {
	for range maxHitRaces {
		a, err := c.core.TryAcquire(key)
		if errors.Is(err, placement.ErrWouldWait) && wait {
			c.st.waits.Add(1)
			a, err = c.core.Acquire(ctx, key)
		}
		if err != nil {
			return nil, c.coreErr(key, err)
		}
		if !a.Hit() {
			return c.beginPlacing(ctx, key, a)
		}
		if t := c.hitTurn(ctx, key, a); t != nil {
			// Its later store calls (a move) outlive ctx: detached when
			// made (the hot path allocates nothing for it).
			t.begun = true
			return t, nil
		}
		_ = a.Lease.Invalidate()
	}
	return nil, fmt.Errorf("replica: session %q: %w", key, ErrStoreMoved)
}

// hitTurn is the cached hit of a's lease, or nil when its record was
// evicted as the hit took it.
func (c *Coordinator) hitTurn(ctx context.Context, key string, a placement.Acquisition[claims.Target]) *turn {
	rec := c.cached(key, a.Lease.Version())
	if rec == nil || !c.hitLease(rec) {
		return nil
	}
	c.st.cachedHits.Add(1)
	if int64(c.core.Now())-rec.lastTouch.Load() >= int64(c.cfg.TouchInterval) {
		c.kickTouch(rec)
	}
	return newTurn(turnBody{c: c, key: key, ctx: ctx, state: turnHit, lease: a.Lease, rec: rec, target: a.Lease.Target()})
}

// beginPlacing reads key's claim for a begun placing turn holding a's
// reservation.
func (c *Coordinator) beginPlacing(ctx context.Context, key string, a placement.Acquisition[claims.Target]) (*turn, error) {
	c.st.firstTurns.Add(1)
	t := newTurn(turnBody{c: c, key: key, ctx: ctx, propose: c.propose, acq: a, s: c.useSlot(key), state: turnBegun, begun: true})
	if err := t.read(); err != nil {
		a.Done()
		releaseSlot(t.s)
		return nil, err
	}
	// The turn's later store calls (Dispatch's write or move, the hold,
	// the close) are bounded by StoreTimeout, not by ctx: a caller's
	// context for Begin (the affinity layer's Start) may end once Begin
	// returns.
	t.ctx = context.WithoutCancel(ctx)
	return t, nil
}

// read reads a begun turn's claim (Store.Get): a current Bound claim is
// kept in t.found; a quarantined or closing one is cached (as a placing
// turn's read caches it) and refuses the turn; none, a stale one, or an
// unreachable store leaves t.found nil.
func (t *turn) read() error {
	c, s := t.c, t.s
	t.found = nil
	waited := false
	for range maxReads {
		s.mu.Lock()
		if rec := s.cur.Load(); rec != nil && !rec.evicted.Load() {
			switch rec.state {
			case recQuarantined:
				if m, ok := c.view.Load().byWorker[rec.target.Worker]; !rec.unclaimed && (!ok || m.Gen != rec.gen) {
					// Its worker left or registered again since: the
					// quarantine is over (the store's claim is stale), as a
					// restart ends the quarantines of attempts on it; a
					// quarantine cached after the view moved on is dropped
					// here. The store's claim is then read (and replaced).
					c.evictLocked(s, rec)
					s.mu.Unlock()
					continue
				}
				if rec.own && !c.coreQuarantined(s.key, rec.attempt) {
					// Its QuarantineTTL ended it here: settle it in the
					// store now (the keepalive's retry would), then read.
					attempt := rec.attempt
					s.mu.Unlock()
					if c.settleExpired(t.ctx, s.key, attempt) == nil {
						continue
					}
					s.mu.Lock()
				}
				err := rec.quarantinedErrLocked()
				s.mu.Unlock()
				c.st.quarantineRefusals.Add(1)
				return err
			case recClosing:
				rev := rec.rev
				s.mu.Unlock()
				return &ClosingError{Key: s.key, Rev: rev}
			}
		}
		s.mu.Unlock()
		if c.isDown() {
			return nil
		}
		epoch := c.epoch.Load()
		ctx, cancel := c.opCtx(t.ctx)
		cl, ok, err := c.store.Get(ctx, s.key)
		cancel()
		c.note(err)
		switch {
		case unknownOutcome(err):
			return nil // Dispatch places the session (unclaimed, if still down)
		case err != nil:
			return err
		case !ok:
			return nil
		}
		if _, cur := c.generations(cl.Target, cl.Gen); !cur {
			if err := c.refreshMembers(t.ctx); err == nil {
				_, cur = c.generations(cl.Target, cl.Gen)
			}
			if !cur {
				return nil // stale: Dispatch's CreateOrGet replaces it
			}
		}
		s.mu.Lock()
		if c.epoch.Load() != epoch || s.maxDeleted >= cl.Rev {
			s.mu.Unlock()
			continue // it ended (or may have) as it was read
		}
		s.lineageSeenLocked(cl.Born)
		if s.closingLocked(cl) {
			s.mu.Unlock()
			if !waited {
				// This replica's close of the claim is in flight: wait
				// for it (it holds s.op), then read again.
				waited = true
				s.op.Lock()
				//lint:ignore SA2001 an empty critical section: a wait for the close in flight
				s.op.Unlock()
				continue
			}
			return &ClosingError{Key: s.key, Rev: cl.Rev}
		}
		refused := cl.Rev == s.refusedRev
		switch cl.State {
		case claims.Quarantined:
			rec := &record{s: s, rev: cl.Rev, gen: cl.Gen, target: cl.Target, attempt: cl.Attempt,
				state: recQuarantined, written: true}
			c.installLocked(s, rec)
			err := rec.quarantinedErrLocked()
			s.mu.Unlock()
			c.st.quarantinesSeen.Add(1)
			c.st.quarantineRefusals.Add(1)
			return err
		case claims.Closing:
			c.installLocked(s, &record{s: s, rev: cl.Rev, gen: cl.Gen, target: cl.Target, state: recClosing})
			s.mu.Unlock()
			return &ClosingError{Key: s.key, Rev: cl.Rev}
		}
		s.mu.Unlock()
		t.found, t.foundEpoch, t.foundOwn, t.foundRefused = &cl, epoch, false, refused
		return nil
	}
	return fmt.Errorf("replica: session %q: %w", s.key, ErrStoreMoved)
}

// Claim is Turn.Claim on the turn's state.
func (t *turn) Claim() (claims.Claim, bool) {
	if t.state != turnBegun || t.found == nil || t.foundRefused {
		return claims.Claim{}, false
	}
	return *t.found, true
}

// ClaimedError says a begun turn's Dispatch found the session claimed to
// another target by another replica since the turn read it: nothing was
// dispatched, and the turn is begun again with Current as its Claim
// (Dispatch to its target adopts it; to another moves it).
type ClaimedError struct {
	Key     string
	Target  claims.Target // the Dispatch's
	Current claims.Claim
}

// Error describes e.
func (e *ClaimedError) Error() string {
	return fmt.Sprintf("replica: session %q: dispatch to %s: claimed meanwhile to %s (rev %d)", e.Key, e.Target, e.Current.Target, e.Current.Rev)
}

// Is reports whether target is claims.ErrClaimMoved.
func (e *ClaimedError) Is(target error) bool { return target == claims.ErrClaimMoved }

// Dispatch is Turn.Dispatch on the turn's state.
func (t *turn) Dispatch(target claims.Target) error {
	switch t.state {
	case turnHit:
		if target == t.target {
			return nil
		}
		return t.Move(target)
	case turnHitCompleted:
		if t.hitOutcome != placement.DefinitelyNotAccepted {
			return ErrTurnState
		}
		return t.Move(target)
	case turnBegun:
	default:
		return ErrTurnState
	}
	if t.done {
		return ErrTurnState
	}
	if err := claims.CheckMove(t.key, 1, target); err != nil {
		return err
	}
	c := t.c
	if _, ok := c.view.Load().byWorker[target.Worker]; !ok && !c.isDown() {
		return fmt.Errorf("replica: dispatch of session %q to %s: %w", t.key, target, claims.ErrUnknownWorker)
	}
	def := c.propose
	t.propose = func(members []claims.Member, tried []claims.Target) (claims.Target, error) {
		if !containsTarget(tried, target) {
			return target, nil
		}
		return def(members, tried)
	}
	if f := t.found; f != nil {
		if f.Target == target {
			t.known, t.knownEpoch, t.knownAdopted = f, t.foundEpoch, !t.foundOwn
		} else {
			epoch := c.epoch.Load()
			cl, err := c.storeMove(t.ctx, t.key, f.Rev, target)
			var me *claims.MoveError
			switch {
			case err == nil:
				c.st.moves.Add(1)
				t.known, t.knownEpoch, t.knownAdopted = &cl, epoch, false
			case errors.As(err, &me) && !me.Found:
				// The claim ended meanwhile (a final request closed it, it
				// expired): nothing to move; the turn, holding the
				// reservation, places the session anew (CreateOrGet).
			default:
				if me != nil {
					c.st.movesLost.Add(1)
				}
				t.found, t.state = nil, turnOver
				return fmt.Errorf("replica: move of session %q to %s: %w", t.key, target, err)
			}
		}
		t.found = nil
	}
	if err := t.place(); err != nil {
		t.state = turnOver
		return err
	}
	if t.target != target {
		// CreateOrGet found another replica's claim, written since the
		// read: nothing was sent; undo the dispatch (the reservation is
		// held again) and begin again under that claim.
		_, _ = t.d.Complete(placement.DefinitelyNotAccepted)
		rec := t.rec
		s := rec.s
		s.mu.Lock()
		cur := claims.Claim{Key: t.key, Rev: rec.rev, Target: rec.target, Gen: rec.gen, State: claims.Bound}
		s.mu.Unlock()
		t.dropPending()
		t.d, t.rec, t.dispatches = nil, nil, t.dispatches-1
		t.state, t.target = turnBegun, claims.Target{}
		t.found, t.foundEpoch, t.foundOwn, t.foundRefused = &cur, c.epoch.Load(), false, false
		return &ClaimedError{Key: t.key, Target: target, Current: cur}
	}
	return nil
}

// refusedBegun records a refused dispatch of a begun turn: the record is
// dropped here, and the claim kept as the turn's Claim, so that the next
// Dispatch moves it (or, if it is this turn's own and no dispatch
// follows, Done closes it).
func (t *turn) refusedBegun() {
	rec := t.rec
	t.rec, t.d = nil, nil
	s := rec.s
	s.mu.Lock()
	rec.evicted.Store(true)
	if s.cur.Load() == rec {
		s.cur.Store(nil)
	}
	cl := claims.Claim{Key: t.key, Rev: rec.rev, Target: rec.target, Gen: rec.gen, State: claims.Bound}
	unclaimed, adopted := rec.unclaimed, rec.adopted
	if !unclaimed && cl.Rev != 0 && adopted && !mutant("ForgetsAdoptedRefusal") {
		// Its target refused the request: later turns begun here read
		// the claim as no binding and move it, as after a refused hit
		// (a claim of its own that no dispatch follows is closed at
		// Done instead; one adopted is another's, or a write of its own
		// whose reply was lost and a read settled: left in the store).
		s.refusedRev = cl.Rev
	}
	s.mu.Unlock()
	t.state, t.target = turnBegun, claims.Target{}
	if unclaimed || cl.Rev == 0 {
		t.found = nil
		return
	}
	t.found, t.foundEpoch, t.foundOwn, t.foundRefused = &cl, t.c.epoch.Load(), !adopted, false
}

// endBegun ends a begun turn that dispatches no more: a claim it wrote
// (or moved) and that its target refused is closed, fenced by its
// revision, as a refused placing turn's is.
func (t *turn) endBegun() {
	f := t.found
	t.found = nil
	if f == nil || !t.foundOwn {
		return
	}
	rec := &record{s: t.s, rev: f.Rev, gen: f.Gen, target: f.Target, state: recPending}
	rec.evicted.Store(true)
	t.c.storeClose(t.s, rec, f.Rev)
}

// endRefusedHit ends a refused begun hit's binding on this replica: rec
// is evicted (its core binding invalidated) unless a move or an eviction
// ended it first; it reports whether this call did.
func (c *Coordinator) endRefusedHit(rec *record) bool {
	s := rec.s
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.cur.Load() != rec || rec.evicted.Load() {
		return false
	}
	c.evictLocked(s, rec)
	s.refusedRev = rec.rev
	rec.refusedHere.Store(true)
	return true
}

// Refused is Turn.Refused on the turn's state.
func (t *turn) Refused() bool { return t.refused }

// EndBinding is Turn.EndBinding on the turn's state.
func (t *turn) EndBinding() bool {
	if t.state != turnHit || t.done {
		return false
	}
	ended := t.c.endRefusedHit(t.rec)
	t.refused = t.refused || ended
	return ended
}

// coreQuarantined reports whether the local core still holds key's
// quarantine of attempt (its QuarantineTTL may have ended it).
func (c *Coordinator) coreQuarantined(key string, attempt uint64) bool {
	info, err := c.core.Query(key)
	return err == nil && info.State == placement.StateQuarantined && info.Attempt == attempt
}

// observe is the local core's observer: a quarantine of this replica's
// own attempt that QuarantineTTL ended is settled in the store too (as
// not accepted, fenced by its attempt and generation: the session is free
// again on every replica, as it is here), by the keepalive pass; then the
// Config's observer is called. It runs under the core's key lock: it only
// queues.
func (c *Coordinator) observe(ev placement.Event[claims.Target]) {
	if ev.Kind == placement.EventQuarantineExpired && !mutant("KeepsExpiredQuarantine") {
		key, attempt := ev.Key, ev.Attempt
		c.addRetry("expired quarantine", func(ctx context.Context) error { return c.settleExpired(ctx, key, attempt) })
		c.poke()
	}
	if c.cfg.Observer != nil {
		c.cfg.Observer(ev)
	}
}

// settleExpired settles in the store an own quarantine of key's attempt
// that the local core's QuarantineTTL ended: Resolve not accepted (fenced
// by the attempt and generation; a stale or settled one needs nothing),
// and the cached record is evicted. A quarantine the store never recorded
// ends here alone.
func (c *Coordinator) settleExpired(ctx context.Context, key string, attempt uint64) error {
	v, ok := c.slots.Load(key)
	if !ok {
		return nil
	}
	s := v.(*slot)
	s.mu.Lock()
	rec := s.cur.Load()
	if rec == nil || rec.evicted.Load() || rec.state != recQuarantined || !rec.own || rec.attempt != attempt ||
		c.coreQuarantined(key, attempt) {
		s.mu.Unlock()
		return nil
	}
	if !rec.written && !rec.unsure {
		c.evictLocked(s, rec)
		s.mu.Unlock()
		return nil
	}
	gen, rev := rec.gen, rec.rev
	if !rec.written {
		rev = 0
	}
	s.writing++
	s.mu.Unlock()
	_, _, err := c.storeResolve(ctx, key, attempt, gen, false, rev)
	s.mu.Lock()
	defer s.mu.Unlock()
	s.writing--
	if err == nil || errors.Is(err, claims.ErrFenced) {
		if s.cur.Load() == rec {
			c.evictLocked(s, rec)
		}
		c.applyDeferredLocked(s, nil)
		return nil
	}
	c.applyDeferredLocked(s, rec)
	return err
}
