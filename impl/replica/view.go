package replica

import (
	"context"
	"sort"
	"time"

	"github.com/placementlab/placement/impl/claims"
	"github.com/placementlab/placement/impl/placement"
)

// Query returns the target of key's binding in the local table when the
// replica has not seen its claim end (no store call, no lease taken).
func (c *Coordinator) Query(key string) (claims.Target, bool) {
	info, err := c.core.Query(key)
	if err != nil || info.State != placement.StateBound {
		return claims.Target{}, false
	}
	if rec := c.cached(key, info.Attempt); rec == nil {
		return claims.Target{}, false
	}
	return info.Target, true
}

// Len returns how many entries the local table holds (bound, placing or
// quarantined sessions): a few atomic loads.
func (c *Coordinator) Len() int { return c.core.Len() }

// MaxEntries returns the local table's bound (Config.MaxEntries, or the
// core's default).
func (c *Coordinator) MaxEntries() int { return c.core.Config().MaxEntries }

// Now returns the time on the replica's clock (the local core's).
func (c *Coordinator) Now() time.Duration { return c.core.Now() }

// Quarantine is a quarantined session this replica knows: its own
// attempt's, or another replica's that it read from the store.
type Quarantine struct {
	Key string
	// Attempt, Gen and Target name the attempt, as QuarantinedError does;
	// Resolve takes Key, Attempt and Gen.
	Attempt uint64
	Gen     int64
	Target  claims.Target
	// Rev is the store's revision of the quarantine (0: not recorded).
	Rev int64
	// Local: this replica dispatched the attempt.
	Local bool
	// Since, Until and DispatchedAt: an own quarantine's start, the end
	// its QuarantineTTL sets, and its attempt's dispatch, on the
	// replica's clock (zero for another replica's).
	Since, Until, DispatchedAt time.Duration
}

// Quarantined lists the quarantines this replica caches, sorted by key
// (not an own quarantine that its QuarantineTTL ended: the store's is
// settled as not accepted by the keepalive pass):
// a resolver's work list (it walks the table). A quarantine another
// replica wrote is listed once a turn of the session here read it.
func (c *Coordinator) Quarantined() []Quarantine {
	var out []Quarantine
	c.slots.Range(func(_, v any) bool {
		s := v.(*slot)
		s.mu.Lock()
		if rec := s.cur.Load(); rec != nil && !rec.evicted.Load() && rec.state == recQuarantined &&
			!(rec.own && !c.coreQuarantined(s.key, rec.attempt)) { // an own one its QuarantineTTL ended is being settled
			qe := rec.quarantinedErrLocked()
			out = append(out, Quarantine{Key: s.key, Attempt: qe.Attempt, Gen: qe.Gen, Target: qe.Target, Rev: qe.Rev, Local: qe.Local,
				Since: rec.qSince, Until: rec.qUntil, DispatchedAt: rec.qAt})
		}
		s.mu.Unlock()
		return true
	})
	sort.Slice(out, func(i, j int) bool { return out[i].Key < out[j].Key })
	return out
}

// Register registers worker with identity in the store
// (claims.Store.Register: idempotent for the same identity, a new
// generation for another) and reads the members again, so that every turn
// that starts after Register returns sees the registration (a restart's
// new generation fences this replica's bindings to the worker at once;
// other replicas' at their MembersChanged event).
func (c *Coordinator) Register(ctx context.Context, worker, identity string) (claims.Member, error) {
	sctx, cancel := c.opCtx(ctx)
	m, err := c.store.Register(sctx, worker, identity)
	cancel()
	c.note(err)
	if err != nil {
		return claims.Member{}, err
	}
	if v := c.view.Load(); v == nil || v.byWorker[worker] != m {
		if err := c.refreshMembers(ctx); err != nil {
			return m, err
		}
	}
	return m, nil
}

// Deregister removes worker's registration from the store and reads the
// members again: every replica's claims on it are stale.
func (c *Coordinator) Deregister(ctx context.Context, worker string) error {
	sctx, cancel := c.opCtx(ctx)
	err := c.store.Deregister(sctx, worker)
	cancel()
	c.note(err)
	if err != nil {
		return err
	}
	return c.refreshMembers(ctx)
}

// QuarantineTTL returns how long the local core keeps a quarantine of
// this replica's own attempt at most (Config.QuarantineTTL, or the core's
// default).
func (c *Coordinator) QuarantineTTL() time.Duration { return c.core.Config().QuarantineTTL }

// EndSession ends key's claim for a session that ended outside its
// requests (a client's logout, an operator): a current Bound claim is
// closed in the store, fenced by its revision (deleted, or Closing while
// other replicas hold it, deleted by their last Unhold), and this
// replica's cached binding is evicted at once (requests in flight finish);
// the other replicas evict theirs at its Delete event. A session being
// placed, quarantined or already closing is left alone. It reports
// whether a claim was closed.
func (c *Coordinator) EndSession(ctx context.Context, key string) (bool, error) {
	gctx, cancel := c.opCtx(ctx)
	cl, ok, err := c.store.Get(gctx, key)
	cancel()
	c.note(err)
	if err != nil || !ok || cl.State != claims.Bound {
		return false, err
	}
	cctx, ccancel := c.opCtx(ctx)
	res, err := c.store.Close(cctx, key, cl.Rev, c.cfg.Name)
	ccancel()
	c.noteWrite(err)
	if err != nil {
		return false, err
	}
	c.countClose(res)
	if res == claims.CloseStale {
		return false, nil
	}
	c.onDelete(key, cl.Rev)
	return true, nil
}

// RefreshMembers reads the store's registrations now (the replica reads
// them at every MembersChanged event too): a turn that starts after it
// returns sees every registration the store had when it was called.
func (c *Coordinator) RefreshMembers(ctx context.Context) error { return c.refreshMembers(ctx) }

// Registered reports whether this replica's view of the store has worker
// registered with identity (no store call).
func (c *Coordinator) Registered(worker, identity string) bool {
	m, ok := c.view.Load().byWorker[worker]
	return ok && m.Identity == identity
}
