package replica

import (
	"context"
	"errors"
	"time"

	"golang.org/x/sync/errgroup"

	"github.com/placementlab/placement/impl/claims"
	"github.com/placementlab/placement/impl/placement"
)

// keepalive runs the keepalive pass every TouchInterval/2 (with the
// runtime clock), when poked (a Reset, an eviction), StoreRetry after a
// pass that left work for the store, and touches the claims a hit found
// due.
func (c *Coordinator) keepalive() {
	defer c.wg.Done()
	var tick <-chan time.Time
	// retry runs a pass StoreRetry after one that left work for a
	// reachable store (unclaimed sessions, queued writes).
	retry := time.NewTimer(time.Hour)
	retry.Stop()
	defer retry.Stop()
	if c.cfg.Clock == nil {
		t := time.NewTicker(max(c.cfg.TouchInterval/2, time.Millisecond))
		defer t.Stop()
		tick = t.C
	}
	armed := false
	for {
		ran := false
		select {
		case <-c.ctx.Done():
			return
		case <-tick:
			c.pass(c.ctx)
			ran = true
		case <-c.pokeCh:
			c.pass(c.ctx)
			ran = true
		case <-retry.C:
			armed = false
			c.pass(c.ctx)
			ran = true
		case rec := <-c.kickCh:
			c.touchOne(c.ctx, rec)
		}
		if ran && !armed && c.cfg.Clock == nil && c.owesStore() {
			retry.Reset(c.cfg.StoreRetry)
			armed = true
		}
	}
}

// owesStore reports whether a pass left work for the store: sessions
// placed unclaimed to reconcile, or writes to retry.
func (c *Coordinator) owesStore() bool {
	if c.reconcile.Load() {
		return true
	}
	c.reholdMu.Lock()
	reholds := len(c.reholdQ)
	c.reholdMu.Unlock()
	c.retryMu.Lock()
	defer c.retryMu.Unlock()
	return len(c.retries) > 0 || reholds > 0
}

// Tick runs one keepalive pass now: it retries the store writes that
// found the store unreachable, reconciles the unclaimed sessions after a
// Reset, holds again (by the revision their requests are on) the claims
// it has requests in flight on after a Reset or a failed hold, touches
// every claim this replica holds leases on (and every one used since the
// last pass), and gives up the holds of entries that expired locally or
// were evicted. With the runtime clock a pass runs every TouchInterval/2
// by itself; with a manual Clock nothing runs it periodically: a
// simulation host calls Tick after advancing the clock.
func (c *Coordinator) Tick(ctx context.Context) {
	c.pass(ctx)
}

// pass is one keepalive pass (see Tick).
func (c *Coordinator) pass(ctx context.Context) {
	c.passMu.Lock()
	defer c.passMu.Unlock()
	start := time.Now()
	if c.isDown() {
		// Found unreachable a moment ago: the retries and the reconcile
		// wait (the keepalive tries again after StoreRetry).
	} else {
		c.runRetries(ctx)
		if c.reconcile.Swap(false) {
			c.reconcileAll(ctx)
		}
		c.runReholds(ctx)
	}
	now := int64(c.core.Now())
	half := int64(c.cfg.TouchInterval / 2)
	type job struct {
		s      *slot
		rec    *record
		rev    int64
		touch  bool
		unhold *record
		// old: evicted records with requests in flight here, touched by
		// their revisions (revisions of the lineage) until a touch finds
		// the lineage ended.
		old []*record
	}
	var jobs []job
	c.slots.Range(func(k, v any) bool {
		s := v.(*slot)
		j := job{s: s}
		s.mu.Lock()
		rec := s.cur.Load()
		switch {
		case rec != nil && rec.state == recBound && !rec.unclaimed && !rec.evicted.Load():
			leased := rec.leases.Load() > 0
			dirty := rec.used.Load()
			if leased && mutant("ExpiresInUse") {
				leased, dirty = false, false
			}
			// Passes run every TouchInterval/2 and touch what was last
			// touched TouchInterval/2 ago or more: a claim in use is
			// touched at least every TouchInterval, and one used since
			// its last touch once more after its last use.
			if (dirty || leased) && now-rec.lastTouch.Load() >= half {
				rec.used.Store(false)
				j.touch, j.rec, j.rev = true, rec, rec.rev
			}
			if !leased && !dirty && rec.leases.Load() == 0 && !c.coreHolds(s.key, rec) {
				c.evictLocked(s, rec) // expired locally: give the claim up
			}
		case rec != nil && rec.state == recBound && rec.unclaimed && rec.leases.Load() == 0 && !c.coreHolds(s.key, rec):
			c.evictLocked(s, rec)
		case rec != nil && rec.state == recQuarantined && rec.own && !rec.written:
			if info, err := c.core.Query(s.key); err == nil && (info.State != placement.StateQuarantined || info.Attempt != rec.attempt) {
				rec.evicted.Store(true) // the core's quarantine ended (QuarantineTTL, a bump)
				s.cur.Store(nil)
			}
		}
		if h := s.holder; h != nil && h != s.cur.Load() && h.leases.Load() == 0 && !s.othersLeasedLocked(h) {
			j.unhold = h
		} else if h != nil && h != s.cur.Load() && h.leases.Load() == 0 && !h.unclaimed && h.rev != 0 &&
			!h.gone.Load() && now-h.lastTouch.Load() >= half {
			// Kept for another record's leases: a claim this replica
			// holds is kept alive.
			j.old = append(j.old, h)
		}
		for _, r := range s.leased {
			if (r != s.cur.Load() || r.evicted.Load()) && !r.unclaimed && r.rev != 0 && !r.gone.Load() &&
				r.state == recBound && now-r.lastTouch.Load() >= half {
				j.old = append(j.old, r)
			}
		}
		// A slot goes when nothing refers to it: no current record, no
		// hold, no turn using it, no write in flight, and no request in
		// flight on any of its records (a record a Reset evicted before
		// its hold was made again: the slot's passes keep its claim
		// touched), and no claim revision refused here that may still be
		// current (refusedRev: dropped, the next turn would adopt it as
		// the session's binding again; kept until its Delete).
		if s.cur.Load() == nil && s.holder == nil && s.users == 0 && s.writing == 0 &&
			(s.leases == 0 && s.closeRec == nil || mutant("DropsLeasedSlot")) &&
			(s.refusedRev == 0 || s.maxDeleted >= s.refusedRev || mutant("DropsRefusedSlot")) {
			s.dead = true
			c.slots.CompareAndDelete(k, s)
		}
		s.mu.Unlock()
		if j.touch || len(j.old) > 0 || j.unhold != nil {
			jobs = append(jobs, j)
		}
		return true
	})
	// The keys' store calls run in parallel (each key's in order): a pass
	// takes about len(jobs)/keepaliveParallel store round trips, not
	// len(jobs), so a slow store that still answers keeps every claim in
	// use alive (one at a time, 40 touches of 156 ms outlast a 3 s TTL).
	var g errgroup.Group
	if mutant("SerialTouches") {
		g.SetLimit(1)
	} else {
		g.SetLimit(keepaliveParallel)
	}
	for _, j := range jobs {
		if ctx.Err() != nil {
			break
		}
		g.Go(func() error {
			if j.unhold != nil {
				c.unhold(j.s, j.unhold)
			}
			if j.touch {
				c.touch(ctx, j.rec, j.rev)
			}
			for _, r := range j.old {
				c.touch(ctx, r, r.rev)
			}
			return nil
		})
	}
	_ = g.Wait()
	if len(jobs) > 0 || c.owesStore() {
		c.lastPass.Store(int64(time.Since(start)))
	}
}

// keepaliveParallel bounds the keys a keepalive pass touches (or
// unholds) at once.
const keepaliveParallel = 64

// coreHolds reports whether the core still binds key to rec's version.
func (c *Coordinator) coreHolds(key string, rec *record) bool {
	info, err := c.core.Query(key)
	return err == nil && info.State == placement.StateBound && info.Attempt == rec.version.Load()
}

// touchOne touches rec's claim if it is still current (a hit found it
// due).
func (c *Coordinator) touchOne(ctx context.Context, rec *record) {
	if c.isDown() {
		return
	}
	s := rec.s
	s.mu.Lock()
	ok := s.cur.Load() == rec && rec.state == recBound && !rec.unclaimed && !rec.evicted.Load()
	rev := rec.rev
	s.mu.Unlock()
	if !ok || mutant("ExpiresInUse") && rec.leases.Load() > 0 {
		return
	}
	c.touch(ctx, rec, rev)
}

// touch restarts the idle expiry of rec's claim by rev (any revision of
// the claim's lineage: a record evicted by a rewrite elsewhere keeps the
// claim alive by the revision its requests are on); ErrClaimMoved means
// the lineage ended: a current record is evicted.
func (c *Coordinator) touch(parent context.Context, rec *record, rev int64) {
	s := rec.s
	now := int64(c.core.Now())
	ctx, cancel := c.opCtx(parent)
	err := c.store.Touch(ctx, s.key, rev)
	cancel()
	c.noteWrite(err)
	switch {
	case err == nil:
		c.st.touches.Add(1)
		rec.lastTouch.Store(now)
	case errors.Is(err, claims.ErrClaimMoved):
		rec.gone.Store(true)
		s.mu.Lock()
		if s.cur.Load() == rec && rec.rev == rev {
			c.evictLocked(s, rec)
			c.st.movedEvictions.Add(1)
		}
		s.mu.Unlock()
	default:
		rec.used.Store(true) // touch it at the next pass
	}
}

// reconcileAll reconciles every session placed unclaimed: CreateOrGet
// proposing its local target. First writer wins: a claim written to its
// target makes it claimed; another replica's claim elsewhere (or a
// quarantined or closing one) evicts it, so its next turn follows that
// claim (a reconcile conflict).
func (c *Coordinator) reconcileAll(ctx context.Context) {
	var recs []*record
	c.slots.Range(func(_, v any) bool {
		s := v.(*slot)
		s.mu.Lock()
		if rec := s.cur.Load(); rec != nil && rec.unclaimed && rec.state == recBound && !rec.evicted.Load() {
			recs = append(recs, rec)
		}
		s.mu.Unlock()
		return true
	})
	for _, rec := range recs {
		if ctx.Err() != nil {
			return
		}
		if err := c.reconcileOne(ctx, rec); errors.Is(err, claims.ErrUnavailable) {
			c.reconcile.Store(true) // the next pass tries again
			return
		}
	}
}

func (c *Coordinator) reconcileOne(ctx context.Context, rec *record) error {
	s := rec.s
	s.mu.Lock()
	target := rec.target
	s.writing++
	epoch := c.epoch.Load()
	s.mu.Unlock()
	cl, created, callEpoch, err := c.createOrGet(ctx, s.key, func() (claims.Target, error) { return target, nil })
	now := int64(c.core.Now())
	s.mu.Lock()
	s.writing--
	var hold bool
	switch {
	case err != nil && !errors.Is(err, claims.ErrUnknownWorker):
	case s.cur.Load() != rec || rec.evicted.Load() || !rec.unclaimed:
		// ended or settled meanwhile
	case err != nil:
		c.st.reconciles.Add(1)
		c.evictLocked(s, rec) // its worker left
	case c.epoch.Load() != epoch || callEpoch != epoch:
		c.reconcile.Store(true) // read across a Reset: again at the next pass
	default:
		c.st.reconciles.Add(1)
		if cl.State == claims.Bound && cl.Target == rec.target && cl.Gen == rec.gen && s.maxDeleted < cl.Rev {
			rec.rev, rec.unclaimed, rec.epoch = cl.Rev, false, epoch
			c.st.reconcilesWon.Add(1)
			if created {
				rec.lastTouch.Store(now)
			} else {
				rec.used.Store(true) // another's claim: touch it at the next pass
			}
			hold = true
			break
		}
		if cl.Target != rec.target || cl.State != claims.Bound {
			c.st.reconcileConflicts.Add(1)
		}
		c.evictLocked(s, rec)
	}
	c.applyDeferredLocked(s, rec) // the Deletes and Resets that waited
	s.mu.Unlock()
	if hold {
		c.hold(s, rec)
	}
	if err != nil && !errors.Is(err, claims.ErrUnknownWorker) {
		return err
	}
	return nil
}
