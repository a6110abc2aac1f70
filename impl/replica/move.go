package replica

import (
	"context"
	"errors"
	"fmt"

	"github.com/placementlab/placement/impl/claims"
	"github.com/placementlab/placement/impl/placement"
)

// Move is Turn.Move on the turn's state.
func (t *turn) Move(target claims.Target) error {
	if t.done || !(t.state == turnHit || t.state == turnHitCompleted && t.hitOutcome == placement.DefinitelyNotAccepted) {
		return ErrTurnState
	}
	if err := claims.CheckMove(t.key, 1, target); err != nil {
		return err
	}
	if target == t.target {
		return &claims.ArgumentError{Op: "move", What: "to the hit's own target " + target.String()}
	}
	c, rec, s := t.c, t.rec, t.rec.s
	if t.begun {
		t.ctx = context.WithoutCancel(t.ctx) // a begun turn's store calls outlive Begin's ctx
	}
	if _, ok := c.view.Load().byWorker[target.Worker]; !ok {
		// Not a member in this replica's view: nothing is asked of the
		// store, and the hit stays (it may still be sent to its target).
		return fmt.Errorf("replica: move of session %q to %s: %w", t.key, target, claims.ErrUnknownWorker)
	}
	s.mu.Lock()
	rev, unclaimed := rec.rev, rec.unclaimed
	s.mu.Unlock()
	var moved claims.Claim
	epoch := c.epoch.Load()
	if !unclaimed && rev != 0 {
		cl, err := c.storeMove(t.ctx, t.key, rev, target)
		if err != nil {
			var me *claims.MoveError
			if errors.As(err, &me) {
				c.st.movesLost.Add(1)
			}
			// The hit's revision is not current (or may not be): evict it,
			// as its Delete event will.
			c.endMovedHit(t, rev, !errors.Is(err, claims.ErrUnknownWorker))
			t.state = turnOver
			return fmt.Errorf("replica: move of session %q from %s: %w", t.key, t.target, err)
		}
		moved = cl
		c.st.moves.Add(1)
	}
	c.endMovedHit(t, rev, true)
	// Place the session on target under the new claim: the reservation
	// of the local core (the binding was invalidated above), then the
	// dispatch, with the claim Move returned as the one read.
	a, err := c.core.Acquire(t.ctx, t.key)
	if err != nil {
		t.state = turnOver
		return c.coreErr(t.key, err)
	}
	if a.Hit() {
		// Another request of the session on this replica placed it since
		// (under the moved claim, or a later one): a hit on its binding
		// if it goes to target.
		if r := c.cached(t.key, a.Lease.Version()); r != nil && a.Lease.Target() == target && c.hitLease(r) {
			c.st.cachedHits.Add(1)
			t.state, t.lease, t.rec = turnHit, a.Lease, r
			return nil
		}
		_ = a.Lease.Release()
		t.state = turnOver
		return fmt.Errorf("replica: move of session %q: %w", t.key, &claims.MoveError{Key: t.key, Rev: rev, Target: target})
	}
	def := c.propose
	t.propose = func(members []claims.Member, tried []claims.Target) (claims.Target, error) {
		if !containsTarget(tried, target) {
			return target, nil
		}
		return def(members, tried)
	}
	t.acq, t.s, t.rec = a, c.useSlot(t.key), nil
	if !unclaimed && rev != 0 {
		t.known, t.knownEpoch = &moved, epoch
	}
	if err := t.place(); err != nil {
		a.Done()
		t.acq = placement.Acquisition[claims.Target]{}
		releaseSlot(t.s)
		t.s, t.state = nil, turnOver
		return err
	}
	return nil
}

// endMovedHit ends a moving hit's lease on its record: the record is
// evicted (its revision ended, or may have: evict) and the core binding
// invalidated, so no later turn on this replica routes under it. The
// store ended the old lineage's holds with the move: this replica no
// longer holds the key through rec (no Unhold is sent for it).
func (c *Coordinator) endMovedHit(t *turn, rev int64, evict bool) {
	rec, s := t.rec, t.rec.s
	if evict {
		s.mu.Lock()
		if rev != 0 {
			s.maxDeleted = max(s.maxDeleted, rev)
		}
		if s.cur.Load() == rec {
			c.evictLocked(s, rec)
		}
		rec.evicted.Store(true)
		if s.holder == rec && rev != 0 {
			s.holder = nil
		}
		s.mu.Unlock()
	}
	_ = t.lease.Invalidate()
	c.endLease(rec, t.lease, false)
	t.lease = placement.Lease[claims.Target]{}
}

// storeMove is the store's Move, bounded by StoreTimeout. A Move whose
// reply was lost (unavailable, or past its deadline: the rewrite may have
// been applied) is settled by reading the claim: a Bound claim of a new
// lineage on target, at a revision after rev, is taken as this move's (it
// is, or another replica's move to the same target, which binds the
// session where this one would have); the claim still at rev means it
// was not applied (the unavailable error is returned); any other claim
// means the claim moved on (a *claims.MoveError with it).
func (c *Coordinator) storeMove(parent context.Context, key string, rev int64, target claims.Target) (claims.Claim, error) {
	if mutant("UnfencedMove") {
		// Broken: move whatever revision the store has now.
		if cl, ok, err := c.store.Get(parent, key); err == nil && ok {
			rev = cl.Rev
		}
	}
	ctx, cancel := c.opCtx(parent)
	cl, err := c.store.Move(ctx, key, rev, target)
	cancel()
	c.noteWrite(err)
	if err == nil {
		c.lineageSeen(key, cl.Born)
	}
	if err == nil || !unknownOutcome(err) || mutant("UnsettledMove") {
		return cl, err
	}
	gctx, gcancel := c.opCtx(parent)
	cur, ok, gerr := c.store.Get(gctx, key)
	gcancel()
	c.note(gerr)
	switch {
	case gerr != nil:
		return claims.Claim{}, err
	case ok && cur.Rev > rev && cur.Born == cur.Rev && cur.Target == target && cur.State == claims.Bound:
		c.lineageSeen(key, cur.Born)
		return cur, nil
	case ok && cur.Rev == rev:
		return claims.Claim{}, err
	}
	return claims.Claim{}, &claims.MoveError{Key: key, Rev: rev, Target: target, Current: cur, Found: ok}
}

// lineageSeen marks gone the records of key at revisions before born,
// the first revision of a claim lineage this replica just wrote or read
// (a Move's, a CreateOrGet's, a read's): every earlier lineage of the key
// ended (the store ended its holds), so leases on those records, requests
// still in flight on an old binding, no longer keep the session's claim.
// A final request on the new lineage closes it without waiting for them,
// as the core's Close does not wait for leases on a version a move or a
// restart invalidated.
func (c *Coordinator) lineageSeen(key string, born int64) {
	v, ok := c.slots.Load(key)
	if !ok {
		return
	}
	s := v.(*slot)
	s.mu.Lock()
	defer s.mu.Unlock()
	s.lineageSeenLocked(born)
}
