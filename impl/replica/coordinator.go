package replica

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/sync/singleflight"

	"github.com/placementlab/placement/impl/claims"
	"github.com/placementlab/placement/impl/placement"
)

// Coordinator is one router replica's placement: a local core
// (impl/placement) in front of a claims.Store the replicas share. Build it
// with New and stop it with Close. It is safe for concurrent use.
type Coordinator struct {
	cfg     Config
	store   claims.Store
	id      uint64
	core    *placement.Coordinator[claims.Target]
	propose Propose

	slots sync.Map // string -> *slot
	sf    singleflight.Group
	// sfRunning counts the shared CreateOrGet calls running (Close waits
	// for them: their callers may have stopped waiting).
	sfRunning atomic.Int64
	// epoch counts the Resets processed: a claim read across one is read
	// again.
	epoch atomic.Uint64
	// downAt is when a store call last found the store unreachable (unix
	// nanoseconds; 0: reachable).
	downAt    atomic.Int64
	reconcile atomic.Bool

	memMu sync.Mutex
	view  atomic.Pointer[memberView]
	// targets are the targets dispatched to, per worker: a worker's new
	// generation bumps each of them in the core. Guarded by memMu.
	targets map[string]map[claims.Target]struct{}

	retryMu sync.Mutex
	retries []retryOp
	// retrying counts the writes a keepalive pass has taken out of
	// retries and not yet settled or put back (under retryMu), so that
	// PendingWrites never reads 0 while one is in flight.
	retrying int

	// doubts are the Resolves whose outcome is unknown, with their
	// quarantine's revision (0: unknown). Guarded by doubtMu.
	doubtMu sync.Mutex
	doubts  map[doubtKey]int64

	// reholdQ are the records to hold again by their revision
	// (claims.HoldLineage) at the next keepalive pass. Guarded by
	// reholdMu.
	reholdMu sync.Mutex
	reholdQ  map[*record]struct{}

	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup
	kickCh chan *record
	pokeCh chan struct{}
	passMu sync.Mutex
	// lastPass is how long the last keepalive pass with store work took
	// (nanoseconds, wall clock).
	lastPass  atomic.Int64
	closeOnce sync.Once

	st counters
}

// memberView is the replica's view of the registered workers.
type memberView struct {
	list     []claims.Member
	byWorker map[string]claims.Member
	rev      int64
}

// retryOp is a store write that found the store unreachable, retried by
// the keepalive pass.
type retryOp struct {
	what string
	fn   func(ctx context.Context) error
}

// New returns the coordinator of replica cfg.Name: it asks the store for
// the replica's id (attempt ids are claims.FirstAttempt(id) on), reads the
// members and subscribes to the store's events. ctx bounds these calls
// only; the coordinator's own work runs until Close.
func New(ctx context.Context, cfg Config) (*Coordinator, error) {
	cfg, err := cfg.withDefaults()
	if err != nil {
		return nil, err
	}
	c := &Coordinator{cfg: cfg, store: cfg.Store, targets: map[string]map[claims.Target]struct{}{},
		kickCh: make(chan *record, 64), pokeCh: make(chan struct{}, 1), reholdQ: map[*record]struct{}{}}
	c.propose = cfg.Propose
	if c.propose == nil {
		c.propose = c.LeastLoaded
	}
	c.id, err = c.store.ReplicaID(ctx, cfg.Name)
	c.note(err)
	if err != nil {
		return nil, fmt.Errorf("replica: replica id of %q: %w", cfg.Name, err)
	}
	c.core, err = placement.New(placement.Config[claims.Target]{
		IdleTTL:         cfg.IdleTTL - cfg.TouchInterval,
		ReserveTimeout:  cfg.ReserveTimeout,
		DispatchTimeout: cfg.DispatchTimeout,
		QuarantineTTL:   cfg.QuarantineTTL,
		MaxEntries:      cfg.MaxEntries,
		MaxKeyBytes:     cfg.MaxKeyBytes,
		Clock:           cfg.Clock,
		ClockResolution: cfg.ClockResolution,
		FirstAttempt:    claims.FirstAttempt(c.id),
		Observer:        c.observe,
	})
	if err != nil {
		return nil, fmt.Errorf("replica: the local core: %w", err)
	}
	list, rev, err := c.store.Members(ctx)
	c.note(err)
	if err != nil {
		c.core.Close()
		return nil, fmt.Errorf("replica: members: %w", err)
	}
	c.applyMembers(list, rev)
	c.ctx, c.cancel = context.WithCancel(context.Background())
	events, err := c.store.Events(c.ctx)
	c.note(err)
	if err != nil {
		c.cancel()
		c.core.Close()
		return nil, fmt.Errorf("replica: events: %w", err)
	}
	// The stream's first event is a Reset (nothing is cached relative to
	// it yet): take it here, so that it cannot evict what the first turns
	// cache. A store that delays it is waited for at most StoreTimeout.
	first := time.NewTimer(cfg.StoreTimeout)
	select {
	case ev, ok := <-events:
		if ok && ev.Kind != claims.Reset {
			c.apply(ev)
		}
	case <-first.C:
	case <-ctx.Done():
	}
	first.Stop()
	c.wg.Add(2)
	go c.watch(events)
	go c.keepalive()
	return c, nil
}

// Close stops the coordinator's goroutines and closes the local core
// (turns in flight can still end). It does not shut the Store down: its
// Shutdown releases the replica's holds. Close is idempotent.
func (c *Coordinator) Close() error {
	c.closeOnce.Do(func() {
		c.cancel()
		c.wg.Wait()
		// Shared store calls end at once on the cancelled context.
		for deadline := time.Now().Add(c.cfg.StoreTimeout); c.sfRunning.Load() > 0 && time.Now().Before(deadline); {
			time.Sleep(time.Millisecond)
		}
		c.core.Close()
	})
	return nil
}

// ReplicaID returns the id the store gave this replica.
func (c *Coordinator) ReplicaID() uint64 { return c.id }

// Name returns the replica's name.
func (c *Coordinator) Name() string { return c.cfg.Name }

// Members returns the replica's view of the registered workers, sorted by
// name (a copy).
func (c *Coordinator) Members() []claims.Member {
	return append([]claims.Member(nil), c.view.Load().list...)
}

// Bindings returns how many sessions the local core has bound to target
// (see placement.Coordinator.Bindings).
func (c *Coordinator) Bindings(target claims.Target) int { return c.core.Bindings(target) }

// LeastLoaded is the default Propose: the member, as a worker-only
// target, with the fewest sessions bound to it on this replica, among
// those not tried; ErrNoTarget when none is left.
func (c *Coordinator) LeastLoaded(members []claims.Member, tried []claims.Target) (claims.Target, error) {
	var best claims.Target
	bestN, found := 0, false
	for _, m := range members {
		t := claims.Target{Worker: m.Worker}
		if containsTarget(tried, t) {
			continue
		}
		if n := c.core.Bindings(t); !found || n < bestN {
			best, bestN, found = t, n, true
		}
	}
	if !found {
		return claims.Target{}, ErrNoTarget
	}
	return best, nil
}

func containsTarget(ts []claims.Target, t claims.Target) bool {
	for _, x := range ts {
		if x == t {
			return true
		}
	}
	return false
}

// opCtx bounds one store call.
func (c *Coordinator) opCtx(parent context.Context) (context.Context, context.CancelFunc) {
	return context.WithTimeout(parent, c.cfg.StoreTimeout)
}

// note counts a store call and what its error says of the store.
func (c *Coordinator) note(err error) {
	c.st.storeCalls.Add(1)
	switch {
	case err == nil:
		if c.downAt.Load() != 0 {
			c.downAt.Store(0)
		}
	case errors.Is(err, claims.ErrUnavailable):
		c.st.storeErrors.Add(1)
		c.downAt.Store(time.Now().UnixNano())
	case errors.Is(err, claims.ErrClaimMoved), errors.Is(err, claims.ErrFenced),
		errors.Is(err, claims.ErrUnknownWorker), errors.Is(err, ErrNoTarget), errors.Is(err, context.Canceled):
		// an answer, or our own cancellation
	default:
		c.st.storeErrors.Add(1)
	}
}

// noteWrite is note for a write: its unknown outcome (a lost reply, a
// deadline) does not mark the store down. The caller settles it by
// reading the store, or retries it at the keepalive pass; the reads (a
// turn's Get, the settling read) tell whether the store is reachable.
// Otherwise, between the lost reply and the read, concurrent turns would
// place their sessions unclaimed (placeUnclaimed) with the store up: a
// session whose claim they had not read would get a second, local binding
// that the reconcile then drops under its requests.
func (c *Coordinator) noteWrite(err error) {
	if unknownOutcome(err) && !mutant("WriteLossMeansDown") {
		c.st.storeCalls.Add(1)
		c.st.storeErrors.Add(1)
		return
	}
	c.note(err)
}

// isDown reports whether the store was found unreachable within
// StoreRetry (and no call or Reset since said otherwise).
func (c *Coordinator) isDown() bool {
	at := c.downAt.Load()
	return at != 0 && time.Since(time.Unix(0, at)) < c.cfg.StoreRetry
}

// useSlot returns key's slot, counted as used until releaseSlot.
func (c *Coordinator) useSlot(key string) *slot {
	for {
		v, ok := c.slots.Load(key)
		if !ok {
			v, _ = c.slots.LoadOrStore(key, &slot{key: key})
		}
		s := v.(*slot)
		s.mu.Lock()
		if !s.dead {
			s.users++
			s.mu.Unlock()
			return s
		}
		s.mu.Unlock()
	}
}

func releaseSlot(s *slot) {
	s.mu.Lock()
	s.users--
	s.mu.Unlock()
}

// installLocked makes rec s's current record; the one it replaces is
// evicted (its core binding is gone: a placing turn reserved the key).
func (c *Coordinator) installLocked(s *slot, rec *record) {
	if old := s.cur.Load(); old != nil && old != rec {
		old.evicted.Store(true)
	}
	rec.epoch = c.epoch.Load()
	s.cur.Store(rec)
}

// applyDeferredLocked applies to s's current record the Deletes and the
// Resets that came while this replica's writes of the key were in flight
// (onDelete and onReset leave a slot with s.writing > 0 alone): once the
// last write returned, a current record whose revision was deleted, or
// that was current before a Reset, is evicted. Kept: keep (the caller's
// record, already checked), unclaimed records and quarantines the store
// has not recorded. The caller holds s.mu.
func (c *Coordinator) applyDeferredLocked(s *slot, keep *record) {
	cur := s.cur.Load()
	if cur == nil || cur == keep || cur.unclaimed || cur.rev == 0 || s.waitsLocked(cur) ||
		cur.state == recQuarantined && cur.own && !cur.written || mutant("DropsDeferredDelete") {
		return
	}
	switch {
	case cur.rev <= s.maxDeleted:
		c.evictLocked(s, cur)
		c.st.deleteEvictions.Add(1)
	case cur.epoch != c.epoch.Load():
		c.evictLocked(s, cur)
		c.st.resetEvictions.Add(1)
	}
}

// evictLocked ends rec as s's cached record: the claim it caches ended
// (or may have: a Reset), so the next turn reads the store again. A bound
// record's core binding is invalidated (its requests in flight finish);
// an own quarantine's is dropped from the core (the store holds it). The
// caller holds s.mu.
func (c *Coordinator) evictLocked(s *slot, rec *record) {
	if s.cur.Load() == rec {
		s.cur.Store(nil)
	}
	if rec.evicted.Swap(true) {
		return
	}
	if s.holder == rec && rec.leases.Load() == 0 {
		c.poke() // the keepalive pass gives the hold up
	}
	switch rec.state {
	case recBound:
		if v := rec.version.Load(); v != 0 {
			// Only this record's version: a newer binding of the key would
			// have needed a new record, installed under s.mu.
			if info, err := c.core.Query(s.key); err == nil && info.State == placement.StateBound && info.Attempt == v {
				_, _ = c.core.InvalidateKey(s.key)
			}
		}
	case recQuarantined:
		if rec.own {
			_ = c.core.Resolve(s.key, rec.attempt, rec.coreGen, placement.ResolveNotAccepted)
		}
	}
}

// cached returns key's record if it is current and holds version: the
// hot path's lookup (no lock).
func (c *Coordinator) cached(key string, version uint64) *record {
	v, ok := c.slots.Load(key)
	if !ok {
		return nil
	}
	rec := v.(*slot).cur.Load()
	if rec == nil || rec.version.Load() != version || rec.evicted.Load() {
		return nil
	}
	return rec
}

// generations returns target's core generation if gen is its worker's
// store generation in the replica's view, and registers target for the
// worker's bumps.
func (c *Coordinator) generations(target claims.Target, gen int64) (uint64, bool) {
	c.memMu.Lock()
	defer c.memMu.Unlock()
	m, ok := c.view.Load().byWorker[target.Worker]
	if !ok || m.Gen != gen {
		return 0, false
	}
	set := c.targets[target.Worker]
	if set == nil {
		set = map[claims.Target]struct{}{}
		c.targets[target.Worker] = set
	}
	set[target] = struct{}{}
	return c.core.Generation(target), true
}

// currentGen reports whether the replica's view of the members holds
// target's worker at the store generation gen (no side effect, unlike
// generations).
func (c *Coordinator) currentGen(target claims.Target, gen int64) bool {
	m, ok := c.view.Load().byWorker[target.Worker]
	return ok && m.Gen == gen
}

// refreshMembers reads the members again.
func (c *Coordinator) refreshMembers(parent context.Context) error {
	ctx, cancel := c.opCtx(parent)
	defer cancel()
	list, rev, err := c.store.Members(ctx)
	c.note(err)
	if err != nil {
		return err
	}
	c.applyMembers(list, rev)
	return nil
}

// applyMembers makes list (read at rev) the replica's view: every worker
// whose generation moved or who left has its targets bumped in the core
// (their bindings and quarantines are fenced) and its cached records
// evicted. A read older than the view is ignored.
func (c *Coordinator) applyMembers(list []claims.Member, rev int64) {
	c.memMu.Lock()
	old := c.view.Load()
	if old != nil && rev < old.rev {
		c.memMu.Unlock()
		return
	}
	nv := &memberView{list: append([]claims.Member(nil), list...), byWorker: make(map[string]claims.Member, len(list)), rev: rev}
	sort.Slice(nv.list, func(i, j int) bool { return nv.list[i].Worker < nv.list[j].Worker })
	for _, m := range nv.list {
		nv.byWorker[m.Worker] = m
	}
	moved := map[string]bool{}
	if old != nil {
		for w, m := range old.byWorker {
			if n, ok := nv.byWorker[w]; !ok || n.Gen != m.Gen {
				moved[w] = true
				for t := range c.targets[w] {
					c.core.BumpGeneration(t)
				}
				if !ok {
					delete(c.targets, w)
				}
				c.st.bumps.Add(1)
			}
		}
	}
	c.view.Store(nv)
	c.memMu.Unlock()
	if len(moved) == 0 {
		return
	}
	c.slots.Range(func(_, v any) bool {
		s := v.(*slot)
		s.mu.Lock()
		if rec := s.cur.Load(); rec != nil && moved[rec.target.Worker] {
			if n, ok := nv.byWorker[rec.target.Worker]; !ok || n.Gen != rec.gen {
				c.evictLocked(s, rec)
				c.st.memberEvictions.Add(1)
			}
		}
		s.mu.Unlock()
		return true
	})
}

// Resolve settles key's quarantine of attempt (at its target's store
// generation gen), as the worker that may have taken it told: the store's
// claim is resolved (claims.Store.Resolve: fenced by attempt and gen, a
// *claims.FencedError otherwise), and this replica's core quarantine with
// it. Accepted binds the session to the attempt's target on every
// replica (this one caches the binding); not accepted deletes the claim,
// and the next turn places the session anew. A quarantine the store never
// recorded (placed while it was unreachable) is settled locally. A
// quarantine the store finds stale (its worker re-registered or left:
// claims.FencedError.Stale) is over: nothing settles it, the local
// quarantine is dropped, and the error wraps ErrQuarantineOver and the
// store's *claims.FencedError (errors.Is ErrFenced); the session's next
// turn replaces the claim (CreateOrGet). A store Resolve whose reply was
// lost is settled by reading the claim: nil when it applied (the
// quarantine's lineage bound again at gen, or gone), its unavailable
// error when it did not or when the read failed too; retry it then: a
// retry the store fences because the first try applied returns nil.
func (c *Coordinator) Resolve(ctx context.Context, key string, attempt uint64, gen int64, accepted bool) error {
	res := placement.ResolveNotAccepted
	if accepted {
		res = placement.ResolveAccepted
	}
	var s *slot
	if v, ok := c.slots.Load(key); ok {
		s = v.(*slot)
	}
	if s != nil {
		s.mu.Lock()
		rec := s.cur.Load()
		local := rec != nil && rec.state == recQuarantined && rec.own && !rec.written &&
			rec.attempt == attempt && rec.gen == gen
		if local && rec.unsure {
			// Its write's reply was lost: the store may hold it. Read
			// what the store holds first (when the read fails, it is
			// settled here, and the queued retry reads again).
			rev := rec.rev
			s.mu.Unlock()
			cl, landed, known, _ := c.readQuarantine(ctx, key, rev, attempt, gen)
			s.mu.Lock()
			if s.cur.Load() == rec && rec.state == recQuarantined && !rec.written && known {
				rec.unsure = false
				if landed {
					rec.rev, rec.written = cl.Rev, true
					c.st.quarantinesWritten.Add(1)
				}
			}
			local = s.cur.Load() == rec && rec.state == recQuarantined && !rec.written
		}
		if local && accepted && !rec.unclaimed {
			s.mu.Unlock()
			if done, err := c.resolveUnwritten(ctx, s, rec, attempt); done {
				return err
			}
			s.mu.Lock()
			local = false // its write landed meanwhile: the store settles it
		}
		if local {
			// Only this replica knows the quarantine: settle it here (a
			// queued write of it sees it settled and gives up).
			reconcile := false
			cerr := c.core.Resolve(key, attempt, rec.coreGen, res)
			rec.evicted.Store(true)
			s.cur.Store(nil)
			if cerr == nil {
				rec.settled = settledNotAccepted
				if accepted {
					rec.settled = settledAccepted
				}
			}
			if accepted && cerr == nil {
				nrec := &record{s: s, state: recBound, rev: rec.rev, gen: rec.gen, target: rec.target,
					unclaimed: rec.unclaimed, coreGen: rec.coreGen}
				nrec.version.Store(attempt)
				c.installLocked(s, nrec)
				reconcile = true // bound unclaimed: reconciled like any
			}
			s.mu.Unlock()
			if reconcile {
				c.st.unclaimed.Add(1)
				c.reconcile.Store(true)
				c.poke()
			}
			if errors.Is(cerr, placement.ErrNotQuarantined) || errors.Is(cerr, placement.ErrFenced) {
				// The core's quarantine ended by itself (its worker's
				// generation moved, QuarantineTTL): nothing to settle.
				return &claims.FencedError{Key: key, Attempt: attempt, Gen: gen}
			}
			if cerr != nil {
				return cerr
			}
			c.st.resolves.Add(1)
			return nil
		}
		s.mu.Unlock()
	}
	// The store's answer: Delete events of the quarantined revision that
	// come while the call is in flight wait for it (s.writing), so that a
	// binding resolved Accepted is cached here, not dropped by its own
	// quarantine's end.
	s = c.useSlot(key)
	defer releaseSlot(s)
	s.mu.Lock()
	s.writing++
	epoch := c.epoch.Load()
	var qRev int64 // the quarantine's revision, when this replica caches it
	if rec := s.cur.Load(); rec != nil && rec.state == recQuarantined && rec.attempt == attempt && rec.gen == gen && rec.written {
		qRev = rec.rev
	}
	s.mu.Unlock()
	cl, ok, err := c.storeResolve(ctx, key, attempt, gen, accepted, qRev)
	var hold *record
	s.mu.Lock()
	s.writing--
	rec := s.cur.Load()
	switch {
	case err != nil && isStale(err):
		// The quarantine is over: drop it here (its own core quarantine
		// with it); the next turn's CreateOrGet replaces the stale claim.
		if rec != nil && rec.state == recQuarantined && rec.attempt == attempt {
			c.evictLocked(s, rec)
		}
		c.resolveCore(key, attempt)
		err = fmt.Errorf("replica: resolve of %q attempt %d: %w: %w", key, attempt, ErrQuarantineOver, err)
	case err != nil:
		if errors.Is(err, claims.ErrFenced) && !(rec != nil && rec.state == recQuarantined && rec.own && rec.attempt == attempt) {
			// The store holds no such quarantine and this replica caches
			// none: a core quarantine of the attempt left alone is
			// dropped (the next turn reads the claim).
			c.resolveCore(key, attempt)
		}
	case rec != nil && rec.state == recQuarantined && rec.own && rec.attempt == attempt:
		cerr := c.core.Resolve(key, attempt, rec.coreGen, res)
		rec.evicted.Store(true)
		s.cur.Store(nil)
		if accepted && ok && cerr == nil && s.maxDeleted < cl.Rev && c.epoch.Load() == epoch {
			nrec := &record{s: s, state: recBound, rev: cl.Rev, gen: cl.Gen, target: cl.Target, coreGen: rec.coreGen}
			nrec.version.Store(attempt)
			nrec.lastTouch.Store(int64(c.core.Now()))
			c.installLocked(s, nrec)
			hold = nrec
		} else if info, qerr := c.core.Query(key); accepted && qerr == nil && info.State == placement.StateBound && info.Attempt == attempt {
			_, _ = c.core.InvalidateKey(key) // ended as it was resolved: read it again
		}
	case rec != nil && rec.state == recQuarantined:
		c.evictLocked(s, rec)
	default:
		c.resolveCore(key, attempt)
	}
	// Apply the Deletes and the Reset that waited for the call.
	c.applyDeferredLocked(s, hold)
	s.mu.Unlock()
	if err != nil {
		return err
	}
	c.st.resolves.Add(1)
	if hold != nil {
		c.hold(s, hold)
	}
	return nil
}

// resolveUnwritten settles as Accepted rec, this replica's own quarantine
// the store has not recorded (its write found the store unreachable, or
// is in flight). The session is bound again under rec's revision only if
// the store confirms that the revision is current (a Hold fenced by it,
// made before the binding is cached; a Delete or Reset that comes
// meanwhile waits for it, s.writing); otherwise (the revision ended, the
// quarantine write landed, the store is unreachable) the attempt's core
// binding is dropped and the next turn reads the claim.
//
// done is false if the quarantine's write landed meanwhile: the caller
// settles it in the store.
func (c *Coordinator) resolveUnwritten(ctx context.Context, s *slot, rec *record, attempt uint64) (done bool, err error) {
	s.op.Lock()
	defer s.op.Unlock()
	s.mu.Lock()
	rev := rec.rev
	s.writing++
	epoch := c.epoch.Load()
	s.mu.Unlock()
	hctx, cancel := c.opCtx(ctx)
	herr := c.store.Hold(hctx, s.key, rev, c.cfg.Name)
	cancel()
	c.noteWrite(herr)
	s.mu.Lock()
	defer s.mu.Unlock()
	s.writing--
	if s.cur.Load() != rec || rec.state != recQuarantined || rec.written || rec.attempt != attempt {
		// Settled or replaced meanwhile (its write landed, a Resolve).
		if herr == nil {
			c.heldEndedLocked(s, rev)
		}
		c.applyDeferredLocked(s, nil)
		return false, nil
	}
	cerr := c.core.Resolve(s.key, attempt, rec.coreGen, placement.ResolveAccepted)
	rec.evicted.Store(true)
	s.cur.Store(nil)
	if cerr != nil {
		if herr == nil {
			c.heldEndedLocked(s, rev)
		}
		c.applyDeferredLocked(s, nil)
		if errors.Is(cerr, placement.ErrNotQuarantined) || errors.Is(cerr, placement.ErrFenced) {
			return true, &claims.FencedError{Key: s.key, Attempt: attempt, Gen: rec.gen}
		}
		return true, cerr
	}
	c.st.resolves.Add(1)
	rec.settled = settledAccepted
	if herr == nil && s.maxDeleted < rev && c.epoch.Load() == epoch || mutant("ResolveUnchecked") {
		nrec := &record{s: s, state: recBound, rev: rev, gen: rec.gen, target: rec.target, coreGen: rec.coreGen}
		nrec.version.Store(attempt)
		nrec.lastTouch.Store(int64(c.core.Now()))
		c.installLocked(s, nrec)
		s.holder = nrec
		nrec.held.Store(true)
		c.st.holds.Add(1)
		c.applyDeferredLocked(s, nrec)
		return true, nil
	}
	// The revision is not confirmed current: drop the binding; the next
	// turn reads the claim.
	if info, qerr := c.core.Query(s.key); qerr == nil && info.State == placement.StateBound && info.Attempt == attempt {
		_, _ = c.core.InvalidateKey(s.key)
	}
	if herr == nil {
		c.heldEndedLocked(s, rev)
	}
	c.applyDeferredLocked(s, nil)
	return true, nil
}

// heldEndedLocked records a Hold of s's key at rev that no record keeps:
// the next keepalive pass gives it up (unless a record holds the key
// already). The caller holds s.mu.
func (c *Coordinator) heldEndedLocked(s *slot, rev int64) {
	if s.holder != nil {
		return
	}
	h := &record{s: s, state: recBound, rev: rev}
	h.evicted.Store(true)
	h.ended.Store(true)
	s.holder = h
	c.poke()
}

// isStale reports whether err is a Resolve fenced because the quarantine
// is stale (its worker re-registered or left).
func isStale(err error) bool {
	var fe *claims.FencedError
	return errors.As(err, &fe) && fe.Stale
}

// resolveCore drops the core's quarantine of attempt on key, if it holds
// one: the store holds the session's truth, read at its next turn.
func (c *Coordinator) resolveCore(key string, attempt uint64) {
	if info, err := c.core.Query(key); err == nil && info.State == placement.StateQuarantined && info.Attempt == attempt {
		_ = c.core.Resolve(key, attempt, info.Generation, placement.ResolveNotAccepted)
	}
}

// addRetry queues a store write to retry when the store is back.
func (c *Coordinator) addRetry(what string, fn func(ctx context.Context) error) {
	c.retryMu.Lock()
	c.retries = append(c.retries, retryOp{what: what, fn: fn})
	c.retryMu.Unlock()
}

// runRetries retries the queued writes; those that find the store still
// unreachable stay queued.
func (c *Coordinator) runRetries(ctx context.Context) {
	c.retryMu.Lock()
	ops := c.retries
	c.retries = nil
	c.retrying += len(ops)
	c.retryMu.Unlock()
	var keep []retryOp
	for i, op := range ops {
		if ctx.Err() != nil {
			keep = append(keep, ops[i:]...)
			break
		}
		if retryable(op.fn(ctx)) {
			keep = append(keep, op) // still counted by retrying
			continue
		}
		c.retryMu.Lock()
		c.retrying--
		c.retryMu.Unlock()
	}
	if len(keep) > 0 {
		c.retryMu.Lock()
		c.retries = append(keep, c.retries...)
		c.retrying -= len(keep)
		c.retryMu.Unlock()
	}
}

// doubtKey names a Resolve whose outcome is unknown (its reply lost, and
// the read that would settle it failed too).
type doubtKey struct {
	key      string
	attempt  uint64
	gen      int64
	accepted bool
}

// maxDoubts bounds the Resolves in doubt a replica remembers.
const maxDoubts = 1024

// storeResolve is the store's Resolve of key's quarantine of attempt (at
// gen; qRev is its revision when known, else 0), bounded by StoreTimeout.
// A Resolve whose outcome is unknown (its reply lost) is settled by
// reading the claim (resolvedBy); when that read fails too, the Resolve is
// remembered as in doubt and its unavailable error returned, and a retry
// of it that the store fences is judged by the claim the store reports
// (FencedError.Current): a retried Resolve whose first try applied
// succeeds.
func (c *Coordinator) storeResolve(parent context.Context, key string, attempt uint64, gen int64, accepted bool, qRev int64) (claims.Claim, bool, error) {
	ctx, cancel := c.opCtx(parent)
	cl, ok, err := c.store.Resolve(ctx, key, attempt, gen, accepted)
	cancel()
	c.noteWrite(err)
	if err == nil || mutant("UnsettledResolve") {
		return cl, ok, err
	}
	dk := doubtKey{key, attempt, gen, accepted}
	var fe *claims.FencedError
	switch {
	case unknownOutcome(err):
		rctx, cancel := c.opCtx(parent)
		cur, found, gerr := c.store.Get(rctx, key)
		cancel()
		c.note(gerr)
		if gerr != nil {
			c.doubtMu.Lock()
			if c.doubts == nil {
				c.doubts = map[doubtKey]int64{}
			}
			if len(c.doubts) >= maxDoubts {
				for k := range c.doubts {
					delete(c.doubts, k)
					break
				}
			}
			c.doubts[dk] = qRev
			c.doubtMu.Unlock()
			return cl, ok, err
		}
		if found && cur.State == claims.Quarantined && cur.Attempt == attempt && cur.Gen == gen {
			return cl, ok, err // not applied: the caller may try again
		}
		if resolvedBy(cur, found, gen, accepted, qRev) {
			return resolveResult(cur, found, accepted)
		}
		return claims.Claim{}, false, &claims.FencedError{Key: key, Attempt: attempt, Gen: gen, Current: cur, Found: found}
	case errors.As(err, &fe) && !fe.Stale:
		c.doubtMu.Lock()
		q, doubt := c.doubts[dk]
		delete(c.doubts, dk)
		c.doubtMu.Unlock()
		if doubt && resolvedBy(fe.Current, fe.Found, gen, accepted, q) {
			return resolveResult(fe.Current, fe.Found, accepted)
		}
	}
	return cl, ok, err
}

// resolvedBy reports whether cur (found: the claim read after a Resolve of
// a quarantine at gen, quarantined at revision qRev if known, whose
// outcome was unknown) is what that Resolve leaves: accepted, the
// quarantine's lineage bound again at gen (a revision after qRev); not
// accepted, the lineage gone (no claim, or a newer lineage).
func resolvedBy(cur claims.Claim, found bool, gen int64, accepted bool, qRev int64) bool {
	if accepted {
		return found && cur.State == claims.Bound && cur.Gen == gen && (qRev == 0 || cur.Born <= qRev && cur.Rev > qRev)
	}
	return !found || qRev != 0 && cur.Born > qRev || qRev == 0 && cur.Gen != gen
}

// resolveResult is a Resolve's answer when it applied, from the claim read.
func resolveResult(cur claims.Claim, found, accepted bool) (claims.Claim, bool, error) {
	if accepted && found {
		return cur, true, nil
	}
	return claims.Claim{}, false, nil
}
