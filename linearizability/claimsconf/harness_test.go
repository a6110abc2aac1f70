package claimsconf

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/placementlab/placement/impl/claims"
	"github.com/placementlab/placement/impl/claims/memstore"
	"github.com/placementlab/placement/impl/placement"
	mc "github.com/placementlab/placement/model/claims"
)

// opTimeout bounds every store call (memstore never blocks; this only
// keeps a broken wrapper from hanging the test).
const opTimeout = 5 * time.Second

// ttl is the memstore's idle TTL on the manual clock.
const ttl = time.Minute

// options select what a run drives.
type options struct {
	// wrap wraps each replica's store handle (a broken variant); nil
	// leaves it as is.
	wrap func(claims.Store) claims.Store
	// steps bounds the steps of one run.
	steps int
}

// env is the implementation (a memstore backend, one handle per
// replica, an admin handle for registrations and touches) and the model
// side by side.
type env struct {
	opt   options
	m     *mc.Model
	s     mc.State
	b     *memstore.Backend
	clock *placement.ManualClock
	admin claims.Store
	h     []claims.Store

	revMap  map[int]int64    // model claim revision → store revision
	lastRev int64            // the largest store revision mapped so far
	genMap  map[[2]int]int64 // (worker, model generation) → store generation
	cov     map[string]int
	trace   []string
}

// config is the model's constants: 3 replicas, 2 sessions, 2 workers,
// bounds wide enough that a run of opt.steps steps never meets them
// (a write disabled by MaxRev is simply not drawn).
func config() mc.Config {
	return mc.Config{
		Replicas: []string{"r0", "r1", "r2"},
		Sessions: []string{"s0", "s1"},
		Workers:  []string{"w0", "w1"},
		MaxRev:   63, MaxGen: 250, MaxLeases: 2, MaxChan: 3, MaxFaults: 250, MaxMoves: 250,
	}
}

// newEnv builds both sides in their initial states: the workers are
// registered through the admin handle (generation 1 of each).
func newEnv(opt options) (*env, error) {
	m, err := mc.New(config())
	if err != nil {
		return nil, err
	}
	clock := placement.NewManualClock(0)
	e := &env{
		opt: opt, m: m, s: m.Init(), clock: clock,
		b:      memstore.NewBackend(memstore.Config{IdleTTL: ttl, Clock: clock}),
		revMap: map[int]int64{}, genMap: map[[2]int]int64{}, cov: map[string]int{},
	}
	e.admin = e.b.Open("admin")
	for w, name := range m.Cfg.Workers {
		ctx, cancel := context.WithTimeout(context.Background(), opTimeout)
		mem, err := e.admin.Register(ctx, name, "boot")
		cancel()
		if err != nil {
			_ = e.b.Close()
			return nil, err
		}
		e.genMap[[2]int{w, 1}] = mem.Gen
	}
	for _, name := range m.Cfg.Replicas {
		e.h = append(e.h, e.open(name))
	}
	return e, nil
}

func (e *env) open(name string) claims.Store {
	st := e.b.Open(name)
	if e.opt.wrap != nil {
		st = e.opt.wrap(st)
	}
	return st
}

func (e *env) close() { _ = e.b.Close() }

func (e *env) key(ss int) string  { return e.m.Cfg.Sessions[ss] }
func (e *env) rname(r int) string { return e.m.Cfg.Replicas[r] }
func (e *env) wname(w int) string { return e.m.Cfg.Workers[w] }
func (e *env) ix(r, ss int) int   { return r*len(e.m.Cfg.Sessions) + ss }

// mismatch is a difference between the implementation and the model.
type mismatch struct {
	step  string
	what  string
	trace []string
}

func (m *mismatch) Error() string {
	return fmt.Sprintf("after %s: %s\nsteps:\n  %s", m.step, m.what, strings.Join(m.trace, "\n  "))
}

func (e *env) fail(l mc.Label, format string, args ...any) error {
	return &mismatch{step: e.m.Format(l), what: fmt.Sprintf(format, args...), trace: append([]string(nil), e.trace...)}
}

// rev maps a model revision to the store's; ok false if the model never
// wrote it through the store.
func (e *env) rev(v int) (int64, bool) {
	r, ok := e.revMap[v]
	return r, ok
}

// mapRev records that model revision v is store revision r: the map must
// stay order preserving (model revisions are written in increasing order,
// so r must exceed every store revision mapped before).
func (e *env) mapRev(l mc.Label, v int, r int64) error {
	if old, ok := e.revMap[v]; ok && old != r {
		return e.fail(l, "model revision %d is store revision %d and now %d", v, old, r)
	}
	if r <= e.lastRev {
		return e.fail(l, "model revision %d written as store revision %d, not after %d: the revision map is not order preserving", v, r, e.lastRev)
	}
	e.revMap[v], e.lastRev = r, r
	return nil
}

// gen maps a worker's model generation to its store generation.
func (e *env) gen(w, g int) int64 { return e.genMap[[2]int{w, g}] }

// attemptID is the store attempt id of the model's attempt a (the
// revision the attempt was dispatched under): the store revision itself,
// or an id no quarantine uses when the model never wrote a.
func (e *env) attemptID(a int) uint64 {
	if r, ok := e.rev(a); ok {
		return uint64(r)
	}
	return 1<<50 + uint64(a)
}

func ctx() (context.Context, context.CancelFunc) {
	return context.WithTimeout(context.Background(), opTimeout)
}

// drivenActs are the model actions the harness draws, in Next's order.
var drivenActs = []mc.Action{mc.ActClaim, mc.ActPlaceLocal, mc.ActMove, mc.ActRoute, mc.ActRelease, mc.ActAmbiguous,
	mc.ActResolve, mc.ActClose, mc.ActReconcile, mc.ActExpire, mc.ActBumpGeneration, mc.ActReceive,
	mc.ActDuplicate, mc.ActDrop, mc.ActDisconnect, mc.ActReconnect, mc.ActCrash}

// enabled returns the model's enabled steps from the current state, by
// action, as the harness draws them: Resolve only with the quarantine's
// attempt or one other (its own revision).
func (e *env) enabled() map[mc.Action][]mc.Label {
	out := map[mc.Action][]mc.Label{}
	e.m.Steps(&e.s, func(l mc.Label, _ *mc.State) {
		if l.Act == mc.ActResolve {
			c := e.s.Claim[l.S]
			if l.A != c.Attempt && l.A != c.Rev {
				return
			}
		}
		out[l.Act] = append(out[l.Act], l)
	})
	return out
}

// rehold reports whether the model's Reconnect(r) would make r a holder
// of a claim whose current revision is not the one r's leases are on
// (a later revision of the same lineage: l.Rev >= born) and that r does
// not hold already (a hold made before r lost the store stays): the
// store's Hold, fenced by the current revision, would refuse it;
// claims.HoldLineage does it (finding D2, fixed).
func (e *env) rehold(r int) bool {
	for ss := range e.m.Cfg.Sessions {
		ls, c := e.s.Lease[e.ix(r, ss)], e.s.Claim[ss]
		if ls.N > 0 && c.St != mc.StNone && ls.Rev >= c.Born && ls.Rev != c.Rev && e.s.Holders[ss]&(1<<uint(r)) == 0 {
			return true
		}
	}
	return false
}

// step applies l to the model and the corresponding store calls to the
// implementation, checks every answer the store gives against the model's
// step, and compares the claims afterwards.
func (e *env) step(l mc.Label) error {
	pre := e.s
	n, ok := e.m.Apply(&pre, l)
	if !ok {
		return fmt.Errorf("harness: %s drawn but not enabled", e.m.Format(l))
	}
	e.trace = append(e.trace, e.m.Format(l))
	if err := e.impl(l, &pre, &n); err != nil {
		return err
	}
	e.s = n
	return e.compare(l)
}

func (e *env) count(k string) { e.cov[k]++ }

// impl performs the store side of step l from model state pre to n.
func (e *env) impl(l mc.Label, pre, n *mc.State) error {
	c, cancel := ctx()
	defer cancel()
	r, ss := l.R, l.S
	switch l.Act {
	case mc.ActClaim:
		return e.createOrGet(c, l, pre, n, r, ss, l.W, "Claim")
	case mc.ActMove:
		return e.move(c, l, pre, n)
	case mc.ActPlaceLocal, mc.ActReceive, mc.ActDuplicate, mc.ActDrop:
		// Replica-local (cache) and watch-channel steps: no store call.
		e.count(l.Act.String())
		return nil
	case mc.ActRoute:
		i := e.ix(r, ss)
		ent, ls := pre.Cache[i], pre.Lease[i]
		if !(ls.N == 0 && pre.Up[r] && ent.St == mc.StBound) {
			e.count("Route/local")
			return nil
		}
		rv, ok := e.rev(ent.Rev)
		if !ok {
			return e.fail(l, "cached model revision %d was never written to the store", ent.Rev)
		}
		err := e.h[r].Hold(c, e.key(ss), rv, e.rname(r))
		if n.Lease[i].N == 1 {
			e.count("Route/hold")
			if err != nil {
				return e.fail(l, "Hold(%s, %d): model holds, store says %v", e.key(ss), rv, err)
			}
			return nil
		}
		e.count("Route/moved")
		if !errors.Is(err, claims.ErrClaimMoved) {
			return e.fail(l, "Hold(%s, %d): model evicts (claim moved), store says %v", e.key(ss), rv, err)
		}
		return nil
	case mc.ActRelease:
		if pre.Lease[e.ix(r, ss)].N != 1 || !pre.Up[r] {
			e.count("Release/local")
			return nil
		}
		e.count("Release/unhold")
		if err := e.h[r].Unhold(c, e.key(ss), e.rname(r)); err != nil {
			return e.fail(l, "Unhold: %v", err)
		}
		return nil
	case mc.ActAmbiguous:
		return e.quarantine(c, l, pre, n)
	case mc.ActResolve:
		return e.resolve(c, l, pre, n)
	case mc.ActClose:
		return e.closeClaim(c, l, pre, n)
	case mc.ActReconcile:
		i := e.ix(r, ss)
		if err := e.createOrGet(c, l, pre, n, r, ss, pre.Cache[i].Target, "Reconcile"); err != nil {
			return err
		}
		if n.Rev > pre.Rev && pre.Lease[i].N > 0 {
			rv, _ := e.rev(n.Rev)
			if err := e.h[r].Hold(c, e.key(ss), rv, e.rname(r)); err != nil {
				return e.fail(l, "Hold of the reconciled claim (leases in flight): %v", err)
			}
		}
		return nil
	case mc.ActExpire:
		e.count("Expire")
		return e.expire(l, ss)
	case mc.ActBumpGeneration:
		e.count("BumpGeneration")
		mem, err := e.admin.Register(c, e.wname(l.W), fmt.Sprintf("gen-%d", n.Gen[l.W]))
		if err != nil {
			return e.fail(l, "Register: %v", err)
		}
		e.genMap[[2]int{l.W, n.Gen[l.W]}] = mem.Gen
		return nil
	case mc.ActDisconnect:
		e.count("Disconnect")
		e.b.SetUnavailable(e.rname(r), true)
		return nil
	case mc.ActReconnect:
		e.count("Reconnect")
		e.b.SetUnavailable(e.rname(r), false)
		// The replica re-holds what it has leases on, by the lease's
		// revision, anywhere in the claim's lineage (HoldLineage), and
		// gives up the rest (the model's Reconnect sets its holds by
		// its leases).
		if e.rehold(r) {
			e.count("Reconnect/lineage-rehold")
		}
		for ss := range e.m.Cfg.Sessions {
			ls := pre.Lease[e.ix(r, ss)]
			if rv, ok := e.rev(ls.Rev); ls.N > 0 && ok {
				_, err := claims.HoldLineage(c, e.h[r], e.key(ss), rv, e.rname(r))
				if err != nil && !errors.Is(err, claims.ErrClaimMoved) {
					return e.fail(l, "re-Hold(%s, %d): %v", e.key(ss), rv, err)
				}
				continue
			}
			if err := e.h[r].Unhold(c, e.key(ss), e.rname(r)); err != nil {
				return e.fail(l, "Unhold(%s): %v", e.key(ss), err)
			}
		}
		return e.orphans(l, n, "Reconnect")
	case mc.ActCrash:
		e.count("Crash")
		e.b.Crash(e.rname(r))
		e.h[r] = e.open(e.rname(r))
		return e.orphans(l, n, "Crash")
	}
	return fmt.Errorf("harness: action %s is not driven", l.Act)
}

// orphans: the store deletes a Closing claim as soon as its last hold
// goes (a crashed replica's, or one given up at a reconnect); the model
// leaves it Closing with no holder until Expire, enabled right then. The
// implementation's step is the model's step followed by Expire of each
// such claim (finding F1, doc.go).
func (e *env) orphans(l mc.Label, n *mc.State, kind string) error {
	for ss := range e.m.Cfg.Sessions {
		if n.Claim[ss].St == mc.StClosing && n.Holders[ss] == 0 {
			x, ok := e.m.Apply(n, mc.Label{Act: mc.ActExpire, R: mc.None, S: ss, W: mc.None})
			if !ok {
				return e.fail(l, "model: Expire(%s) after %s is not enabled", e.key(ss), kind)
			}
			*n = x
			e.count(kind + "/closing-deleted")
			e.trace = append(e.trace, fmt.Sprintf("  (model: Expire(%s): the store deleted the Closing claim)", e.key(ss)))
		}
	}
	return nil
}

// createOrGet is the store side of Claim and Reconcile: CreateOrGet with
// proposal w; created must be the model's write, and the claim returned
// the one the model caches.
func (e *env) createOrGet(c context.Context, l mc.Label, pre, n *mc.State, r, ss, w int, kind string) error {
	proposed := false
	cl, created, err := e.h[r].CreateOrGet(c, e.key(ss), func() (claims.Target, error) {
		proposed = true
		return claims.Target{Worker: e.wname(w)}, nil
	})
	if err != nil {
		return e.fail(l, "CreateOrGet: %v", err)
	}
	want := n.Rev > pre.Rev
	if created != want {
		return e.fail(l, "CreateOrGet created=%v, the model wrote=%v (store claim %+v)", created, want, cl)
	}
	if !created && proposed && pre.Claim[ss].St != mc.StNone && pre.Gen[pre.Claim[ss].Target] == pre.Claim[ss].Gen {
		return e.fail(l, "CreateOrGet asked for a proposal with a current claim")
	}
	if created {
		e.count(kind + "/write")
		if err := e.mapRev(l, n.Rev, cl.Rev); err != nil {
			return err
		}
	} else {
		e.count(kind + "/read")
	}
	return e.sameClaim(l, "the claim CreateOrGet returned", n.Claim[ss], cl, true)
}

// move is the store side of Move(r, s, w): Move(s, cached revision,
// w). The model's write must be the store's (the new claim mapped to its
// revision); the model's stutter must be a *MoveError whose kind
// (ErrClaimMoved or ErrNotBound) and current claim are the model's
// (the replica's cache then holds the current claim, or none).
func (e *env) move(c context.Context, l mc.Label, pre, n *mc.State) error {
	r, ss := l.R, l.S
	ent := pre.Cache[e.ix(r, ss)]
	rv, ok := e.rev(ent.Rev)
	if !ok {
		return e.fail(l, "cached model revision %d was never written to the store", ent.Rev)
	}
	got, err := e.h[r].Move(c, e.key(ss), rv, claims.Target{Worker: e.wname(l.W)})
	if n.Rev > pre.Rev {
		e.count("Move/moved")
		if err != nil {
			return e.fail(l, "Move(%s, %d, %s): the model moves, store says %v", e.key(ss), rv, e.wname(l.W), err)
		}
		if got.Born != got.Rev {
			return e.fail(l, "Move: the moved claim %+v does not begin a lineage", got)
		}
		if err := e.mapRev(l, n.Rev, got.Rev); err != nil {
			return err
		}
		return e.sameClaim(l, "the claim Move returned", n.Claim[ss], got, true)
	}
	var me *claims.MoveError
	if !errors.As(err, &me) {
		return e.fail(l, "Move(%s, %d): the model refuses, store says %v (%+v)", e.key(ss), rv, err, got)
	}
	cur := pre.Claim[ss]
	notBound := cur.St != mc.StNone && cur.Rev == ent.Rev
	switch {
	case notBound:
		e.count("Move/not-bound")
		if !errors.Is(err, claims.ErrNotBound) {
			return e.fail(l, "Move: the model's claim at the cached revision is %v, store says %v", cur.St, err)
		}
	case cur.St == mc.StNone:
		e.count("Move/no-claim")
		if !errors.Is(err, claims.ErrClaimMoved) || me.Found {
			return e.fail(l, "Move: the model has no claim, store says %v", err)
		}
		return nil
	default:
		e.count("Move/fenced")
		if !errors.Is(err, claims.ErrClaimMoved) {
			return e.fail(l, "Move: the model's claim moved on (rev %d), store says %v", cur.Rev, err)
		}
	}
	return e.sameClaim(l, "the claim a refused Move found", cur, me.Current, me.Found)
}

func (e *env) quarantine(c context.Context, l mc.Label, pre, n *mc.State) error {
	r, ss := l.R, l.S
	ls, cl := pre.Lease[e.ix(r, ss)], pre.Claim[ss]
	rv, ok := e.rev(ls.Rev)
	if !ok {
		return e.fail(l, "leased model revision %d was never written to the store", ls.Rev)
	}
	g := e.gen(cl.Target, cl.Gen)
	if cl.St == mc.StNone {
		g = e.gen(0, 1)
	}
	q, err := e.h[r].Quarantine(c, e.key(ss), rv, e.attemptID(ls.Rev), g)
	if n.Rev == pre.Rev {
		e.count("Ambiguous/moved")
		if !errors.Is(err, claims.ErrClaimMoved) {
			return e.fail(l, "Quarantine(rev %d): the model's claim moved, store says %v (%+v)", rv, err, q)
		}
		return nil
	}
	e.count("Ambiguous/quarantine")
	if err != nil {
		return e.fail(l, "Quarantine(rev %d): %v", rv, err)
	}
	return e.mapRev(l, n.Rev, q.Rev)
}

func (e *env) resolve(c context.Context, l mc.Label, pre, n *mc.State) error {
	cl := pre.Claim[l.S]
	got, ok, err := e.admin.Resolve(c, e.key(l.S), e.attemptID(l.A), e.gen(cl.Target, cl.Gen), l.Accepted)
	switch {
	case n.Claim[l.S] == pre.Claim[l.S]:
		e.count("Resolve/fenced")
		if !errors.Is(err, claims.ErrFenced) {
			return e.fail(l, "Resolve: the model's quarantine is fenced, store says ok=%v err=%v (%+v)", ok, err, got)
		}
		if stale := l.A == cl.Attempt && pre.Gen[cl.Target] != cl.Gen; stale {
			// The quarantine's own attempt, its worker re-registered
			// (finding D1, fixed): fenced as stale.
			e.count("Resolve/stale")
			var fe *claims.FencedError
			if !errors.As(err, &fe) || !fe.Stale {
				return e.fail(l, "Resolve of a stale quarantine: store fenced it, but not as stale: %v", err)
			}
		}
		return nil
	case err != nil:
		return e.fail(l, "Resolve: %v", err)
	case l.Accepted:
		e.count("Resolve/accepted")
		if !ok {
			return e.fail(l, "Resolve accepted: store wrote nothing")
		}
		return e.mapRev(l, n.Rev, got.Rev)
	default:
		e.count("Resolve/not-accepted")
		if ok {
			return e.fail(l, "Resolve not accepted: store wrote %+v", got)
		}
		return nil
	}
}

func (e *env) closeClaim(c context.Context, l mc.Label, pre, n *mc.State) error {
	r, ss := l.R, l.S
	ls, cl := pre.Lease[e.ix(r, ss)], pre.Claim[ss]
	want := claims.CloseStale
	switch {
	case cl.St != mc.StNone && cl.Rev == ls.Rev && n.Claim[ss].St == mc.StNone:
		want = claims.CloseDeleted
	case cl.St != mc.StNone && cl.Rev == ls.Rev:
		want = claims.CloseDeferred
	}
	var res claims.CloseResult
	if rv, ok := e.rev(ls.Rev); ok {
		var err error
		if res, err = e.h[r].Close(c, e.key(ss), rv, e.rname(r)); err != nil {
			return e.fail(l, "Close(rev %d): %v", rv, err)
		}
	} else {
		// A lease on an unclaimed placement (revision 0): nothing to
		// close in the store.
		res = claims.CloseStale
	}
	e.count("Close/" + want.String())
	if res != want {
		return e.fail(l, "Close: store says %v, the model %v", res, want)
	}
	if res == claims.CloseDeferred {
		if err := e.mapRev(l, n.Rev, e.current(ss).Rev); err != nil {
			return err
		}
	}
	if res == claims.CloseStale {
		// The model's stale Close gives up the replica's hold, as the
		// replica does after a stale close.
		if err := e.h[r].Unhold(c, e.key(ss), e.rname(r)); err != nil {
			return e.fail(l, "Unhold after a stale Close: %v", err)
		}
	}
	return nil
}

// current is the store's claim of session ss (zero when none).
func (e *env) current(ss int) claims.Claim {
	cl, _ := e.b.Claim(e.key(ss))
	return cl
}

// expire makes only session ss's claim expire: every other claim is
// touched a tick later, then the clock moves to ss's deadline and the
// backend sweeps.
func (e *env) expire(l mc.Label, ss int) error {
	c, cancel := ctx()
	defer cancel()
	now := e.clock.Now()
	touch := func() error {
		for o := range e.m.Cfg.Sessions {
			if cl, ok := e.b.Claim(e.key(o)); ok && o != ss {
				if err := e.admin.Touch(c, e.key(o), cl.Rev); err != nil {
					return e.fail(l, "Touch(%s): %v", e.key(o), err)
				}
			}
		}
		return nil
	}
	// Touched now, the others outlive a tick; touched a tick later, they
	// outlive ss's deadline (at most now+ttl).
	if err := touch(); err != nil {
		return err
	}
	if err := e.clock.Advance(now + 1); err != nil {
		return err
	}
	if err := touch(); err != nil {
		return err
	}
	// ss's claim may have expired with the tick already (its deadline
	// was now+1).
	if dl, ok := e.b.Deadline(e.key(ss)); ok {
		if err := e.clock.Advance(max(dl, now+1)); err != nil {
			return err
		}
	}
	e.b.Sweep()
	return nil
}

var stMap = map[mc.St]claims.State{mc.StBound: claims.Bound, mc.StQuarantined: claims.Quarantined, mc.StClosing: claims.Closing}

// sameClaim compares a model claim with a store claim (present).
func (e *env) sameClaim(l mc.Label, what string, m mc.Claim, got claims.Claim, present bool) error {
	if m.St == mc.StNone {
		if present {
			return e.fail(l, "%s: the model has no claim, the store %+v", what, got)
		}
		return nil
	}
	if !present {
		return e.fail(l, "%s: the store has no claim, the model %+v", what, m)
	}
	rv, ok := e.rev(m.Rev)
	var diffs []string
	if !ok || rv != got.Rev {
		diffs = append(diffs, fmt.Sprintf("revision: model %d (store %d, mapped %v), store %d", m.Rev, rv, ok, got.Rev))
	}
	if stMap[m.St] != got.State {
		diffs = append(diffs, fmt.Sprintf("state: model %v, store %v", m.St, got.State))
	}
	if e.wname(m.Target) != got.Target.Worker {
		diffs = append(diffs, fmt.Sprintf("target: model %s, store %s", e.wname(m.Target), got.Target.Worker))
	}
	if g := e.gen(m.Target, m.Gen); g != got.Gen {
		diffs = append(diffs, fmt.Sprintf("generation: model %d (store %d), store %d", m.Gen, g, got.Gen))
	}
	wantAttempt := uint64(0)
	if m.St == mc.StQuarantined {
		wantAttempt = e.attemptID(m.Attempt)
	}
	if wantAttempt != got.Attempt {
		diffs = append(diffs, fmt.Sprintf("attempt: model %d (store %d), store %d", m.Attempt, wantAttempt, got.Attempt))
	}
	if len(diffs) > 0 {
		return e.fail(l, "%s differs: %s", what, strings.Join(diffs, "; "))
	}
	return nil
}

// compare checks every session's claim and holders in the store against
// the model's.
func (e *env) compare(l mc.Label) error {
	for ss := range e.m.Cfg.Sessions {
		got, ok := e.b.Claim(e.key(ss))
		m := e.s.Claim[ss]
		if err := e.sameClaim(l, "claim of "+e.key(ss), m, got, ok); err != nil {
			return err
		}
		if m.St == mc.StNone {
			continue
		}
		var want []string
		for r, name := range e.m.Cfg.Replicas {
			if e.s.Holders[ss]&(1<<uint(r)) != 0 {
				want = append(want, name)
			}
		}
		have := e.b.Holders(e.key(ss))
		sort.Strings(want)
		if strings.Join(want, ",") != strings.Join(have, ",") {
			return e.fail(l, "holders of %s: model [%s], store [%s]", e.key(ss), strings.Join(want, ","), strings.Join(have, ","))
		}
	}
	return nil
}

// coverage sums the outcome counts of many runs.
type coverage struct {
	mu sync.Mutex
	n  map[string]int
}

func (c *coverage) add(m map[string]int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.n == nil {
		c.n = map[string]int{}
	}
	for k, v := range m {
		c.n[k] += v
	}
}

// count sums the counts of kinds.
func (c *coverage) count(kinds ...string) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	n := 0
	for _, k := range kinds {
		n += c.n[k]
	}
	return n
}

// missing lists the outcomes seen fewer than min times.
func (c *coverage) missing(kinds []string, min int) []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	var out []string
	for _, k := range kinds {
		if c.n[k] < min {
			out = append(out, fmt.Sprintf("%s (%d)", k, c.n[k]))
		}
	}
	return out
}

func (c *coverage) String() string {
	c.mu.Lock()
	defer c.mu.Unlock()
	keys := make([]string, 0, len(c.n))
	for k := range c.n {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	var b strings.Builder
	for _, k := range keys {
		fmt.Fprintf(&b, "%s=%d ", k, c.n[k])
	}
	return b.String()
}

// outcomes are the step outcomes the store-level test must reach.
var outcomes = []string{
	"Claim/write", "Claim/read", "PlaceLocal", "Move/moved", "Move/not-bound", "Move/fenced", "Move/no-claim", "Route/hold", "Route/moved", "Route/local",
	"Release/unhold", "Release/local", "Ambiguous/quarantine", "Ambiguous/moved",
	"Resolve/accepted", "Resolve/not-accepted", "Resolve/fenced", "Resolve/stale",
	"Close/deleted", "Close/deferred", "Close/stale", "Reconcile/write", "Reconcile/read",
	"Expire", "BumpGeneration", "Receive", "Duplicate", "Drop", "Disconnect", "Reconnect",
	"Crash",
}

// rareOutcomes are reached a few times per run (a Closing claim whose
// last holder crashes or gives its hold up at a reconnect).
var rareOutcomes = []string{"Crash/closing-deleted", "Reconnect/closing-deleted"}
