package replay

import (
	"context"
	"fmt"
	"time"

	"github.com/placementlab/placement/impl/affinity"
	"github.com/placementlab/placement/impl/picker"
	"github.com/placementlab/placement/impl/placement"
	"github.com/placementlab/placement/impl/resolver"
	"golang.org/x/sync/errgroup"
)

// Consistency is how router replicas behind a load balancer keep their
// session bindings consistent (the package doc's "Router replicas").
type Consistency uint8

const (
	// None: each replica alone, its own affinity layer knowing nothing of
	// the others'.
	None Consistency = iota
	// BestEffort: Dynamo's best-effort sync: after each dispatch a replica
	// publishes the session's binding, delivered to the others after
	// SyncDelay; the first live binding wins (a replica that has one keeps
	// it), and each replica's TTL is its own.
	BestEffort
	// Gossip: SGLang's mesh, last writer wins: a replica broadcasts each
	// change of a binding (placed, moved), delivered after SyncDelay, and
	// the later write wins everywhere.
	Gossip
	// Claims: placement's claims on a shared store (impl/replica): a
	// session's first turn on a replica reads or creates its claim (first
	// writer wins), later turns on a replica holding it make no store
	// call, a move rewrites it fenced by its revision, the others' caches
	// learn of a rewrite EventDelay later; while the store is unreachable
	// replicas place new sessions locally and reconcile when it is back.
	Claims
	// NumConsistencies is the number of consistency policies.
	NumConsistencies
)

var consistencyNames = [NumConsistencies]string{"none", "best-effort", "gossip-lww", "claims"}

// String names c.
func (c Consistency) String() string {
	if c < NumConsistencies {
		return consistencyNames[c]
	}
	return fmt.Sprintf("Consistency(%d)", uint8(c))
}

// ParseConsistency returns the consistency policy named s (as String
// names it).
func ParseConsistency(s string) (Consistency, error) {
	for i, n := range consistencyNames {
		if n == s {
			return Consistency(i), nil
		}
	}
	return 0, &ParamError{Field: "Replicas.Policies", Reason: fmt.Sprintf("unknown consistency policy %q", s)}
}

// AllConsistencies returns every consistency policy, in the report's
// order.
func AllConsistencies() []Consistency {
	out := make([]Consistency, NumConsistencies)
	for i := range out {
		out[i] = Consistency(i)
	}
	return out
}

// ReplicaConfig configures the replicated run (RunReplicas; cmd/replay
// -replicas): router replicas behind a load balancer that sends each
// request to a random replica, compared under each consistency policy.
type ReplicaConfig struct {
	// Counts are the replica counts compared (R), each in [1, 64].
	Counts []int
	// Policies are the consistency policies compared, in this order.
	Policies []Consistency
	// Mode is the placement policy every replica runs: PlacementHard (the
	// default: a binding never leaves a healthy worker by the layer's own
	// choice, so every split turn is the replicas' disagreement) or
	// PlacementSoft.
	Mode Policy
	// SyncDelay is BestEffort's and Gossip's delivery delay of a binding
	// message from one replica to another.
	SyncDelay time.Duration
	// StoreLatency is Claims' round trip to the store: a dispatch that
	// needed a store operation reaches its worker StoreLatency after the
	// request reached the replica.
	StoreLatency time.Duration
	// EventDelay is how long after a claim's rewrite the other replicas'
	// caches learn of it (the store's watch event).
	EventDelay time.Duration
	// StoreDownAt and StoreDownFor: Claims' store is unreachable from
	// StoreDownAt for StoreDownFor (0: never).
	StoreDownAt, StoreDownFor time.Duration
}

// DefaultReplicas returns the default replicated run over a workload of
// the given span: R = 1, 3 and 5, every consistency policy, hard mode,
// 100 ms sync delay, 5 ms store round trips, 50 ms watch events, and the
// store unreachable for 2 minutes from half the span (clear of
// DefaultChurn's changes at 20, 40, 60 and 80% of it).
func DefaultReplicas(span time.Duration) ReplicaConfig {
	return ReplicaConfig{
		Counts:       []int{1, 3, 5},
		Policies:     AllConsistencies(),
		Mode:         PlacementHard,
		SyncDelay:    100 * time.Millisecond,
		StoreLatency: 5 * time.Millisecond,
		EventDelay:   50 * time.Millisecond,
		StoreDownAt:  (span / 2).Truncate(time.Second),
		StoreDownFor: 2 * time.Minute,
	}
}

func (c *ReplicaConfig) validate() error {
	bad := func(field, reason string) error { return &ParamError{Field: "Replicas." + field, Reason: reason} }
	switch {
	case len(c.Counts) == 0:
		return bad("Counts", "none given")
	case len(c.Policies) == 0:
		return bad("Policies", "none given")
	case c.Mode != PlacementHard && c.Mode != PlacementSoft:
		return bad("Mode", "must be placement-hard or placement-soft")
	case c.SyncDelay < 0 || c.StoreLatency < 0 || c.EventDelay < 0:
		return bad("SyncDelay", "delays must not be negative")
	case c.StoreDownAt < 0 || c.StoreDownFor < 0:
		return bad("StoreDownAt", "must not be negative")
	}
	for _, n := range c.Counts {
		if n < 1 || n > 64 {
			return bad("Counts", fmt.Sprintf("%d replicas: must be in [1, 64]", n))
		}
	}
	for _, p := range c.Policies {
		if p >= NumConsistencies {
			return bad("Policies", fmt.Sprintf("unknown consistency policy %d", p))
		}
	}
	return nil
}

// ReplicaResult is one consistency policy's outcome with R replicas.
type ReplicaResult struct {
	Consistency Consistency
	Replicas    int
	// Result is the run's outcome as a single router's (its Moves,
	// Unpinned, Quarantines and Hits summed over the replicas' layers).
	Result
	// Turns counts the accepted dispatches of a session (or sibling
	// group) that had an earlier accepted dispatch: the later turns.
	Turns int
	// SplitTurns counts the later turns sent to a worker other than the
	// one the session's previous turn used while that worker was healthy:
	// up, the same instance, and less than the idle TTL after that turn
	// (its binding alive). SplitInOutage counts those of them where the
	// turn or the previous one fell in the store's outage window (from
	// StoreDownAt to StoreLatency + EventDelay after it ends).
	SplitTurns, SplitInOutage int
	// Ops counts Claims' store operations (a first turn's read or create,
	// a move's fenced rewrite, a reconcile), or BestEffort's and Gossip's
	// sync messages (one per replica a binding is sent to); OpsPerTurn is
	// Ops over Served.
	Ops        int
	OpsPerTurn float64
	// Unclaimed counts Claims' sessions placed locally while the store was
	// unreachable; ReconcilesLost those of them whose claim another
	// replica had written (they follow it at their next turn).
	Unclaimed, ReconcilesLost int
}

// OpsName names what Ops counts for c.
func (c Consistency) OpsName() string {
	switch c {
	case Claims:
		return "store ops"
	case None:
		return "-"
	}
	return "sync msgs"
}

// replicaRun is one replicated simulation's parameters.
type replicaRun struct {
	cfg      *ReplicaConfig
	cons     Consistency
	replicas int
}

// replicaStats are a replicated run's counters.
type replicaStats struct {
	turns, splits, splitsIn, ops, unclaimed, lost int
}

// replica is one router replica: its affinity layer on its own manual
// clock, its resolver, its scheduler's pickers and prefix index, and its
// consistency policy's state.
type replica struct {
	idx      int
	clk      *placement.ManualClock
	layer    *affinity.Layer
	resolver *resolver.Resolver
	prefix   *picker.PrefixOverlap
	pipe     *picker.Pipeline
	// view: BestEffort's bindings learned from the others; Gossip's latest
	// write known of each key (its own or learned).
	view map[int32]*viewEntry
	// cache: Claims' claims this replica read or wrote.
	cache map[int32]cachedClaim
	// pending: Claims' sessions placed while the store was unreachable,
	// in order, with their targets.
	pending  []int32
	pendingT map[int32]*rank
}

// viewEntry is a binding one replica learned or wrote.
type viewEntry struct {
	rk     *rank
	gen    int           // the worker's instance
	at     time.Duration // received or refreshed: the local TTL runs from it
	stamp  stamp         // Gossip: the write's time and writer
	remote bool          // learned from another replica
}

// stamp orders Gossip's writes: by time, then by writer.
type stamp struct {
	at     time.Duration
	writer int
}

func (a stamp) after(b stamp) bool {
	return a.at > b.at || (a.at == b.at && a.writer > b.writer)
}

// syncMsg is a binding message (BestEffort, Gossip) or a claim's rewrite
// event (Claims).
type syncMsg struct {
	key   int32
	rk    *rank
	gen   int
	stamp stamp
	rev   uint64
}

// claim is the simulated store's record of a session's binding.
type claim struct {
	rk      *rank
	gen     int
	rev     uint64
	lastUse time.Duration
	written time.Duration // created or last rewritten
}

// cachedClaim is a replica's copy of a claim.
type cachedClaim struct {
	rk  *rank
	gen int
	rev uint64
}

// claimStore is the simulated claims store, shared by the replicas.
type claimStore struct {
	claims map[int32]*claim
	rev    uint64
}

// RunReplicas simulates w with router replicas: for each count R of
// cfg.Replicas.Counts and each consistency policy, R replicas running
// cfg.Replicas.Mode behind a load balancer that sends each request (each
// sending of it) to a replica drawn from a hash of Config.Seed, the
// request and the sending, the same for every policy. Each simulation is
// single-threaded on its own clock; they run concurrently (errgroup) and
// the results come in (R, policy) order, so the same cfg and w give the
// same ReplicaReport.
func RunReplicas(ctx context.Context, cfg Config, w *Workload) (*ReplicaReport, error) {
	cfg.Policies = []Policy{cfg.Replicas.Mode}
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	if err := cfg.Replicas.validate(); err != nil {
		return nil, err
	}
	if err := w.validate(); err != nil {
		return nil, err
	}
	rc := &cfg.Replicas
	type run struct {
		r int
		c Consistency
	}
	var runs []run
	for _, r := range rc.Counts {
		for _, c := range rc.Policies {
			runs = append(runs, run{r, c})
		}
	}
	results := make([]ReplicaResult, len(runs))
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(max(1, min(len(runs), 4)))
	for k, x := range runs {
		g.Go(func() error {
			s, err := newSimRun(&cfg, rc.Mode, w, &replicaRun{cfg: rc, cons: x.c, replicas: x.r})
			if err != nil {
				return err
			}
			r, err := s.run(gctx)
			if err != nil {
				return err
			}
			st := s.rstat
			rr := ReplicaResult{
				Consistency: x.c, Replicas: x.r, Result: *r,
				Turns: st.turns, SplitTurns: st.splits, SplitInOutage: st.splitsIn,
				Ops: st.ops, Unclaimed: st.unclaimed, ReconcilesLost: st.lost,
			}
			if r.Served > 0 {
				rr.OpsPerTurn = float64(st.ops) / float64(r.Served)
			}
			results[k] = rr
			return nil
		})
	}
	if err := g.Wait(); err != nil {
		return nil, err
	}
	return &ReplicaReport{Config: cfg, Requests: len(w.Requests), Results: results}, nil
}

// idleTTL is the bindings' idle TTL (the core's default when unset).
func (s *sim) idleTTL() time.Duration {
	if s.cfg.IdleTTL > 0 {
		return s.cfg.IdleTTL
	}
	return 30 * time.Minute
}

// inOutage reports whether t falls in the claims store's outage window:
// from StoreDownAt to StoreLatency + EventDelay after the store is back.
func (s *sim) inOutage(t time.Duration) bool {
	if s.rr2 == nil || s.rr2.cons != Claims || s.rr2.cfg.StoreDownFor == 0 {
		return false
	}
	c := s.rr2.cfg
	return t >= c.StoreDownAt && t < c.StoreDownAt+c.StoreDownFor+c.StoreLatency+c.EventDelay
}

// storeDown reports whether the claims store is unreachable now.
func (s *sim) storeDown() bool {
	c := s.rr2.cfg
	return c.StoreDownFor > 0 && s.now >= c.StoreDownAt && s.now < c.StoreDownAt+c.StoreDownFor
}

// trackSplit counts request i's accepted dispatch to rk as a later turn,
// and as a split turn when the session's previous turn went to another
// worker that is still healthy (up, the same instance) and whose binding
// has not idled out.
func (s *sim) trackSplit(i int, rk *rank) {
	k := s.kid[i]
	if lw := s.lastW[k]; lw >= 0 {
		s.rstat.turns++
		w := s.workers[lw]
		if w != rk.w && w.state == stUp && w.gen == s.lastGen[k] && s.now-s.lastAt[k] < s.idleTTL() {
			s.rstat.splits++
			if s.inOutage(s.now) || s.inOutage(s.lastAt[k]) {
				s.rstat.splitsIn++
			}
		}
	}
	s.lastW[k], s.lastGen[k], s.lastAt[k] = int32(rk.w.idx), rk.w.gen, s.now
}

// live reports whether rk's worker is up as instance gen.
func live(rk *rank, gen int) bool { return rk.w.state == stUp && rk.w.gen == gen }

// viewLive reports whether a binding BestEffort learned still holds on
// this replica: its worker is up as the same instance and its local TTL
// has not passed. (Gossip's replicated map has no local TTL: an entry holds
// while its worker is up as the same instance, until a later write.)
func (s *sim) viewLive(e *viewEntry) bool {
	return live(e.rk, e.gen) && s.now-e.at < s.idleTTL()
}

// lbPick is the load balancer: the replica request i's current sending
// goes to, a hash of the seed, the request and the sending.
func (s *sim) lbPick(i int) int {
	if s.rr2.replicas == 1 {
		return 0
	}
	n := s.sends[i]
	s.sends[i]++
	return int(mix(mix(s.cfg.Seed^0x1b1b, uint64(i)), uint64(n)) % uint64(s.rr2.replicas))
}

// routeReplica routes request i through the replica the load balancer
// picks, under the run's consistency policy; delay is how long the
// dispatch takes to reach its worker (Claims' store round trip).
func (s *sim) routeReplica(i int) (*rank, handle, time.Duration, bool) {
	if len(s.up) == 0 {
		return nil, handle{}, 0, false
	}
	k := s.lbPick(i)
	s.use(k)
	rep := s.reps[k]
	key, ak := s.kid[i], s.akeys[i]
	none := affinity.Target{}
	switch s.rr2.cons {
	case BestEffort:
		// The first live binding wins: the layer's own, else one learned.
		if _, ok := rep.layer.Query(ak, affinity.PhaseDecode); !ok {
			if e := rep.view[key]; e != nil && s.viewLive(e) {
				s.inv.pinGen = e.gen
				rk, h, ok := s.routePlacement(i, e.rk.target, true)
				return rk, h, 0, ok
			}
		}
	case Gossip:
		// The latest write known wins: follow it when it is another
		// replica's and the layer's binding is not it.
		if e := rep.view[key]; e != nil && e.remote && live(e.rk, e.gen) {
			if lt, ok := rep.layer.Query(ak, affinity.PhaseDecode); !ok || lt != e.rk.target {
				if ok {
					s.endSession(rep, key)
				}
				s.inv.pinGen = e.gen
				rk, h, ok := s.routePlacement(i, e.rk.target, true)
				return rk, h, 0, ok
			}
		}
	case Claims:
		return s.routeClaims(i, rep)
	}
	rk, h, ok := s.routePlacement(i, none, false)
	return rk, h, 0, ok
}

// routeClaims is Claims' request path on replica rep.
func (s *sim) routeClaims(i int, rep *replica) (*rank, handle, time.Duration, bool) {
	key, ak := s.kid[i], s.akeys[i]
	none := affinity.Target{}
	if cl := s.store.claims[key]; s.pol == PlacementHard && cl != nil && s.claimLive(cl) && !s.storeDown() {
		s.inv.claim = cl // invariant 3: the turn must follow it (checkDispatch)
	}
	lt, lok := rep.layer.Query(ak, affinity.PhaseDecode)
	if c, ok := rep.cache[key]; ok && lok && lt == c.rk.target && live(c.rk, c.gen) {
		// A later turn on a replica holding the claim: no store call.
		rk, h, ok := s.routePlacement(i, none, false)
		return rk, h, 0, ok
	}
	if s.storeDown() {
		// The store is unreachable (its calls fail at once): place
		// locally, unclaimed, and reconcile when it is back.
		rk, h, ok := s.routePlacement(i, none, false)
		if ok {
			if _, seen := rep.pendingT[key]; !seen {
				rep.pending = append(rep.pending, key)
				s.rstat.unclaimed++
			}
			rep.pendingT[key] = rk
		}
		return rk, h, 0, ok
	}
	lat := s.rr2.cfg.StoreLatency
	st := s.store
	cl := st.claims[key]
	if cl != nil && s.claimLive(cl) {
		// CreateOrGet found a live claim: adopt it.
		if lok && lt != cl.rk.target {
			s.endSession(rep, key)
		}
		s.inv.pinGen = cl.gen
		rk, h, ok := s.routePlacement(i, cl.rk.target, true)
		if ok {
			s.rstat.ops++
			rep.cache[key] = cachedClaim{rk: cl.rk, gen: cl.gen, rev: cl.rev}
		}
		return rk, h, lat, ok
	}
	// No live claim (none, idled out, or its worker gone): the layer
	// places or moves the session, and the store op creates the claim or
	// rewrites it, fenced by the revision just read (current: the store
	// linearizes the op when the request reaches the replica).
	rk, h, ok := s.routePlacement(i, none, false)
	if !ok {
		return rk, h, 0, false
	}
	s.rstat.ops++
	s.writeClaim(rep, key, rk, cl)
	return rk, h, lat, true
}

// claimLive reports whether a claim binds: its worker up as the same
// instance, used less than the idle TTL ago on any replica.
func (s *sim) claimLive(cl *claim) bool {
	return live(cl.rk, cl.gen) && s.now-cl.lastUse < s.idleTTL()
}

// writeClaim creates key's claim on rk (or rewrites old, a new revision),
// caches it on rep and sends the rewrite's event to the other replicas.
func (s *sim) writeClaim(rep *replica, key int32, rk *rank, old *claim) {
	st := s.store
	st.rev++
	st.claims[key] = &claim{rk: rk, gen: rk.w.gen, rev: st.rev, lastUse: s.now, written: s.now}
	rep.cache[key] = cachedClaim{rk: rk, gen: rk.w.gen, rev: st.rev}
	if old == nil {
		return
	}
	m := &syncMsg{key: key, rev: st.rev}
	for _, o := range s.reps {
		if o != rep {
			s.pushMsg(s.now+s.rr2.cfg.EventDelay, evClaimEvent, o.idx, m)
		}
	}
}

// claimEvent is a claim's rewrite reaching replica to's cache: the
// revision it ends is evicted (the next turn reads the claim again).
func (s *sim) claimEvent(to int, m *syncMsg) {
	rep := s.reps[to]
	if c, ok := rep.cache[m.key]; ok && c.rev < m.rev {
		delete(rep.cache, m.key)
	}
}

// storeBack is the claims store reachable again: every replica's cache is
// reset (the next turn of each session reads its claim), and each replica
// reconciles the sessions it placed meanwhile through CreateOrGet with its
// local target: first writer wins; a loser follows the claim found at the
// session's next turn.
func (s *sim) storeBack() {
	for _, rep := range s.reps {
		clear(rep.cache)
	}
	for _, rep := range s.reps {
		for _, key := range rep.pending {
			rk := rep.pendingT[key]
			s.rstat.ops++
			cl := s.store.claims[key]
			switch {
			case cl != nil && s.claimLive(cl):
				if cl.rk != rk {
					s.rstat.lost++
				} else {
					rep.cache[key] = cachedClaim{rk: cl.rk, gen: cl.gen, rev: cl.rev}
				}
			case rk.w.state == stUp:
				s.writeClaim(rep, key, rk, cl)
			}
		}
		rep.pending = rep.pending[:0]
		clear(rep.pendingT)
	}
}

// afterAccept is the consistency policy's part after an accepted dispatch
// of request i to rk by replica h.rep.
func (s *sim) afterAccept(i int, rk *rank, h handle) {
	rep := s.reps[h.rep]
	key, ak := s.kid[i], s.akeys[i]
	switch s.rr2.cons {
	case BestEffort:
		// Publish after dispatch: the session's binding, to every other
		// replica.
		if t, ok := rep.layer.Query(ak, affinity.PhaseDecode); ok && t == rk.target {
			s.broadcast(rep, evSync, &syncMsg{key: key, rk: rk, gen: rk.w.gen})
		}
	case Gossip:
		t, ok := rep.layer.Query(ak, affinity.PhaseDecode)
		if !ok || t != rk.target {
			return
		}
		if e := rep.view[key]; e != nil && e.rk == rk && e.gen == rk.w.gen {
			e.at = s.now // no change: the local TTL restarts
			return
		}
		// A change (placed, moved): a new write, broadcast.
		m := &syncMsg{key: key, rk: rk, gen: rk.w.gen, stamp: stamp{at: s.now, writer: rep.idx}}
		rep.view[key] = &viewEntry{rk: rk, gen: rk.w.gen, at: s.now, stamp: m.stamp}
		s.broadcast(rep, evSync, m)
	case Claims:
		// Used: the claim's idle TTL restarts (the keepalive's touch, not
		// counted as a store operation).
		if cl := s.store.claims[key]; cl != nil && cl.rk == rk {
			cl.lastUse = s.now
		}
	}
}

// broadcast sends m from rep to every other replica, SyncDelay later,
// one message each.
func (s *sim) broadcast(rep *replica, kind evKind, m *syncMsg) {
	for _, o := range s.reps {
		if o != rep {
			s.rstat.ops++
			s.pushMsg(s.now+s.rr2.cfg.SyncDelay, kind, o.idx, m)
		}
	}
}

// receive is a binding message reaching replica to.
func (s *sim) receive(to int, m *syncMsg) {
	rep := s.reps[to]
	ak := s.kak[m.key]
	switch s.rr2.cons {
	case BestEffort:
		// The first live binding wins: a replica with one keeps it (a
		// message that agrees with it restarts its local TTL).
		lt, lok := rep.layer.Query(ak, affinity.PhaseDecode)
		if lok && lt != m.rk.target {
			return
		}
		if e := rep.view[m.key]; !lok && e != nil && s.viewLive(e) && (e.rk != m.rk || e.gen != m.gen) {
			return
		}
		rep.view[m.key] = &viewEntry{rk: m.rk, gen: m.gen, at: s.now, remote: true}
	case Gossip:
		// The later write wins everywhere.
		if e := rep.view[m.key]; e != nil && !m.stamp.after(e.stamp) {
			return
		}
		rep.view[m.key] = &viewEntry{rk: m.rk, gen: m.gen, at: s.now, stamp: m.stamp, remote: true}
		if t, ok := rep.layer.Query(ak, affinity.PhaseDecode); ok && t != m.rk.target {
			s.endSession(rep, m.key)
		}
	}
}
