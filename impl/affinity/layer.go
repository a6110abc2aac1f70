package affinity

import (
	"errors"
	"fmt"
	"math"
	"net/http"
	"sort"
	"sync"
	"sync/atomic"
	"time"

	"github.com/placementlab/placement/impl/placement"
	"github.com/placementlab/placement/impl/replica"
	"github.com/placementlab/placement/internal/testhooks"
)

// Mode is how strictly a binding holds.
type Mode uint8

const (
	// ModeSoft (the zero Mode, the default): a binding is where a
	// session's requests go while its target is eligible; when it is not
	// (overloaded, not allowed), the scheduler chooses from the full set
	// and the binding follows the dispatch. Nothing about a binding is ever
	// an error for the client.
	ModeSoft Mode = iota
	// ModeHard: a binding is exact: a dispatch that disagrees with it, an
	// overloaded or disallowed bound target, and a quarantined session are
	// typed errors. Only the bound worker's failure or departure moves it.
	ModeHard
	// ModeOff: no binding is consulted or made; pins still hold.
	ModeOff
)

// String names m.
func (m Mode) String() string {
	switch m {
	case ModeSoft:
		return "soft"
	case ModeHard:
		return "hard"
	case ModeOff:
		return "off"
	}
	return fmt.Sprintf("Mode(%d)", m)
}

// Phase says which table a request's binding lives in: prefill and decode
// bindings are kept apart (a disaggregated deployment binds a session to a
// prefill worker and, separately, to a decode worker). Aggregated serving
// uses PhaseDecode.
type Phase uint8

const (
	// PhaseDecode: decode, or the whole request in aggregated serving.
	PhaseDecode Phase = iota
	// PhasePrefill: the prefill of a disaggregated deployment.
	PhasePrefill
	// NumPhases is the number of phases: the length of Stats.Tables.
	NumPhases = 2
	numPhases = NumPhases
)

// String names p.
func (p Phase) String() string {
	if p == PhasePrefill {
		return "prefill"
	}
	return "decode"
}

// Config configures a Layer. The zero value is valid: soft mode, the
// core's default durations and table size (per phase), DefaultHeaders,
// second-turn admission from half the table, two moves per request.
type Config struct {
	// Mode: ModeSoft (zero), ModeHard or ModeOff.
	Mode Mode
	// IdleTTL, ReserveTimeout, DispatchTimeout, QuarantineTTL, MaxEntries
	// (per phase), Clock, ClockResolution and FirstAttempt configure the
	// core coordinators (one per phase) as placement.Config says; zero
	// means the core's default. Clock, a *placement.ManualClock, drives the
	// whole layer on a simulation host's time.
	IdleTTL, ReserveTimeout, DispatchTimeout, QuarantineTTL time.Duration
	MaxEntries                                              int
	Clock                                                   *placement.ManualClock
	ClockResolution                                         time.Duration
	FirstAttempt                                            uint64
	// AdmitAllBelow is the share of a phase's table (0 < x <= 1) below
	// which every new session binds at its first turn. At or above it a new
	// session binds only at its second turn: the first is routed unpinned
	// and remembered (see the package's Admission section). Zero means 0.5.
	AdmitAllBelow float64
	// MaxMoves bounds how many times one request moves its session's
	// binding (its worker failed or left, a refused hit, a soft move) before
	// it is routed unpinned. Zero means 2.
	MaxMoves int
	// Headers says where requests carry session ids (RequestFromHeader).
	// A zero Headers means DefaultHeaders.
	Headers Headers
	// KeepOnRefusal keeps a binding whose worker refused a later turn
	// (DefinitelyNotAccepted on a hit, as a busy worker's 503): the request
	// goes elsewhere unpinned (CauseHitRefused) and the session's next turn
	// returns to the binding. By default (false) one refusal moves the
	// binding (row L1): a worker that refuses has likely lost its state.
	KeepOnRefusal bool
	// Replicas, when set, runs the layer over a claims store that router
	// replicas share (see Replicas and the package's Replicas section):
	// a router's request code is the same either way. Nil: the local core
	// alone (one router process).
	Replicas *Replicas
}

// Defaults of Config's zero fields.
const (
	DefaultAdmitAllBelow = 0.5
	DefaultMaxMoves      = 2
)

// Layer is the affinity layer a router embeds: session keys from headers,
// worker membership, the precedence of pins, bindings and the scheduler's
// choice, eligibility, and the core's lifecycle underneath. It is safe for
// concurrent use.
type Layer struct {
	cfg Config
	mem *membership
	// targets caches Targets' list for the membership's current snapshot.
	targets atomic.Pointer[targetList]
	core    [numPhases]*placement.Coordinator[slot]
	// rep are the phases' replica coordinators when the layer runs over
	// replicas (Config.Replicas; core is then unused).
	rep   [numPhases]*replica.Coordinator
	door  [numPhases]*doorkeeper
	admit int // a phase table's Len at which second-turn admission starts
	stats counters
	// finalQ holds the attempts of final requests whose placing dispatch
	// ended ambiguous: a Resolve that binds one ends the binding at once
	// (the session is over). Entries leave when their quarantine ends.
	// One map per phase: the phases' coordinators count attempt ids
	// apart, and with a fixed Config.FirstAttempt their ids coincide.
	finalQ [numPhases]sync.Map // uint64 -> struct{}
	// refusing notes the binding versions refused hits are invalidating,
	// so that Stats.Moves[MoveRefused] counts a removal, not a call.
	refusing refusals
}

// refusals are the binding versions refused hits are invalidating: the
// core's Removed event, which it emits under the key's lock during the
// Invalidate that removes the version, marks the version's entry.
type refusals struct {
	n  atomic.Int32 // entries in m: the Observer's fast path
	mu sync.Mutex
	m  map[refusalKey]*refusal
}

type refusalKey struct {
	phase   Phase
	key     string
	version uint64
}

type refusal struct {
	users   int  // refused hits of this version invalidating it now
	removed bool // the version was removed while they did (not yet counted)
}

// invalidateRefused ends t's lease on its binding with a fenced
// invalidation and reports whether this removed the binding: true once
// per removed version, whichever of its concurrent refused hits claims it,
// and false on a version another request's move (or the session's end)
// had already ended. (A removal by another request's move in the same
// instant is credited to the refusal too: the Observer cannot tell the two
// calls apart. The version is still counted once.)
func (l *Layer) invalidateRefused(t *turn) bool {
	k := refusalKey{phase: t.req.Phase, key: t.req.Session.k, version: t.lease.Version()}
	r := &l.refusing
	r.mu.Lock()
	if r.m == nil {
		r.m = map[refusalKey]*refusal{}
	}
	e := r.m[k]
	if e == nil {
		e = &refusal{}
		r.m[k] = e
		r.n.Add(1)
	}
	e.users++
	r.mu.Unlock()
	_ = t.lease.Invalidate()
	r.mu.Lock()
	removed := e.removed
	e.removed = false
	if e.users--; e.users == 0 {
		delete(r.m, k)
		r.n.Add(-1)
	}
	r.mu.Unlock()
	return removed || mutant("CountsRefusalCalls")
}

// removed marks a refused hit's version removed (the Observer, under the
// key's lock).
func (r *refusals) removed(k refusalKey) {
	if r.n.Load() == 0 {
		return
	}
	r.mu.Lock()
	if e := r.m[k]; e != nil {
		e.removed = true
	}
	r.mu.Unlock()
}

// New returns a layer for cfg. Close it to stop the core's background work.
func New(cfg Config) (*Layer, error) {
	if cfg.Mode > ModeOff {
		return nil, &ConfigError{Field: "Mode", Reason: fmt.Sprintf("unknown mode %d", cfg.Mode)}
	}
	if cfg.AdmitAllBelow == 0 {
		cfg.AdmitAllBelow = DefaultAdmitAllBelow
	}
	if !(cfg.AdmitAllBelow > 0 && cfg.AdmitAllBelow <= 1) {
		return nil, &ConfigError{Field: "AdmitAllBelow", Reason: fmt.Sprintf("%v is not in (0, 1]", cfg.AdmitAllBelow)}
	}
	if cfg.MaxMoves == 0 {
		cfg.MaxMoves = DefaultMaxMoves
	}
	if cfg.MaxMoves < 0 || cfg.MaxMoves > 64 {
		return nil, &ConfigError{Field: "MaxMoves", Reason: fmt.Sprintf("%d is not in [1, 64]", cfg.MaxMoves)}
	}
	if cfg.Headers.Session == "" && len(cfg.Headers.Alternates) == 0 {
		cfg.Headers = DefaultHeaders
	}
	cfg.Headers = cfg.Headers.canonical()
	l := &Layer{cfg: cfg, mem: newMembership()}
	if cfg.Replicas != nil {
		if err := l.newReplicas(cfg); err != nil {
			return nil, err
		}
		l.admit = int(math.Ceil(cfg.AdmitAllBelow * float64(l.rep[0].MaxEntries())))
		return l, nil
	}
	for p := range l.core {
		finalQ := &l.finalQ[p]
		c, err := placement.New(placement.Config[slot]{
			IdleTTL: cfg.IdleTTL, ReserveTimeout: cfg.ReserveTimeout, DispatchTimeout: cfg.DispatchTimeout,
			QuarantineTTL: cfg.QuarantineTTL, MaxEntries: cfg.MaxEntries, Clock: cfg.Clock,
			ClockResolution: cfg.ClockResolution, FirstAttempt: cfg.FirstAttempt,
			Observer: func(ev placement.Event[slot]) { l.observe(Phase(p), finalQ, ev) },
		})
		if err != nil {
			for _, c := range l.core[:p] {
				c.Close()
			}
			var ce *placement.ConfigError
			if errors.As(err, &ce) {
				return nil, &ConfigError{Field: ce.Field, Reason: ce.Reason}
			}
			return nil, err
		}
		l.core[p] = c
		l.door[p] = newDoorkeeper(c.Config().MaxEntries)
	}
	l.admit = int(math.Ceil(cfg.AdmitAllBelow * float64(l.core[0].Config().MaxEntries)))
	return l, nil
}

// Close stops the core coordinators' background work and wakes every
// waiting request with placement.ErrClosed (see placement.Coordinator.Close:
// what requests hold can still be ended).
func (l *Layer) Close() error {
	if l.replicated() {
		for _, c := range l.rep {
			_ = c.Close()
		}
		return nil
	}
	for _, c := range l.core {
		c.Close()
	}
	return nil
}

// Now returns the time on the layer's clock (placement.Coordinator.Now).
func (l *Layer) Now() time.Duration {
	if l.replicated() {
		return l.rep[0].Now()
	}
	return l.core[0].Now()
}

// Mode returns the layer's mode.
func (l *Layer) Mode() Mode { return l.cfg.Mode }

// Join registers w, or records that it is back. A worker the layer does
// not know joins; the same Identity back (after Fail, or a repeated Join)
// recovers and fences nothing; a new Identity is a restart: in one step
// every binding to the worker, whatever its rank, stops being a binding for
// every request that starts after Join returns, and every quarantine of an
// attempt on it ends (the restarted worker has neither the cache nor the
// request). A changed rank range takes effect at once: bindings to ranks
// the worker no longer serves move when their sessions' next requests come.
func (l *Layer) Join(w Worker) (JoinKind, error) {
	if err := w.validate(); err != nil {
		return 0, err
	}
	l.mem.mu.Lock()
	defer l.mem.mu.Unlock()
	if l.replicated() && !mutant("JoinLocalOnly") {
		// The store's registration first: its generation is what fences
		// every replica's claims on a restart; the same identity changes
		// nothing there (a flap fences nothing anywhere).
		if err := l.registerAll(w); err != nil {
			return 0, err
		}
	}
	old, known := l.mem.load().current(w.ID)
	kind := Joined
	switch {
	case known && old.Identity == w.Identity:
		kind = Recovered
	case known:
		kind = Restarted
	}
	inst := uint64(0)
	if kind == Recovered && !mutant("FlapFences") {
		inst = old.instance
	} else {
		l.mem.instance++
		inst = l.mem.instance
	}
	l.mem.publish(func(ms members) { ms[w.ID] = &member{Worker: w, instance: inst} })
	if kind == Restarted || (kind == Recovered && mutant("FlapFences")) {
		l.fence(old)
	}
	return kind, nil
}

// Fail records that w's health check failed: it is not dispatched to, and
// a request of a session bound to it moves the binding (invalidate, and
// place the session again). Nothing is fenced: if w joins again with the
// same identity before a session's next request, that binding serves again.
func (l *Layer) Fail(worker string) error {
	l.mem.mu.Lock()
	defer l.mem.mu.Unlock()
	old, ok := l.mem.load().current(worker)
	if !ok {
		return &WorkerError{Worker: worker, Reason: reasonUnknown}
	}
	l.mem.publish(func(ms members) { m := *old; m.failed = true; ms[worker] = &m })
	return nil
}

// Leave removes w from the membership: it is never dispatched to again
// (by a request that starts after Leave returns), every binding to it is
// fenced and every quarantine of an attempt on it ends, as for a restart.
func (l *Layer) Leave(worker string) error {
	l.mem.mu.Lock()
	defer l.mem.mu.Unlock()
	old, ok := l.mem.load().current(worker)
	if !ok {
		return &WorkerError{Worker: worker, Reason: reasonUnknown}
	}
	l.mem.publish(func(ms members) { delete(ms, worker) })
	l.fence(old)
	if l.replicated() && !mutant("JoinLocalOnly") {
		// After the membership: a request that finds its binding fenced
		// by the store's change finds the worker gone too, as over the
		// core (the publish, then the fence). A store that cannot be
		// reached keeps the registration: the error says so, and the
		// other replicas keep the worker until it is deregistered.
		if err := l.deregisterAll(worker); err != nil {
			return err
		}
	}
	return nil
}

// fence bumps, in both phases, the core generation of every target of the
// member's instance m: the membership already fences them for the layer
// (a binding names its instance); the bumps end the quarantines of attempts
// on it and let the core reclaim its bindings.
func (l *Layer) fence(m *member) {
	if testBeforeFence != nil {
		testBeforeFence()
	}
	if l.replicated() {
		// The store's new generation (or the registration's end) fences
		// the claims: registerAll and deregisterAll read it back into
		// each phase's replica before this.
		for p := range l.rep {
			l.stats.moves[MoveWorkerGone].Add(uint64(l.replicaBound(Phase(p), m, WorkerOnly(m.ID))))
		}
		return
	}
	bump := func(c *placement.Coordinator[slot], s slot) {
		l.stats.moves[MoveWorkerGone].Add(uint64(c.Bindings(s)))
		c.BumpGeneration(s)
	}
	for _, c := range l.core {
		bump(c, slot{worker: m.ID, instance: m.instance})
		for r := m.FirstRank; r < m.FirstRank+m.Ranks; r++ {
			bump(c, slot{worker: m.ID, rank: r, hasRank: true, instance: m.instance})
		}
	}
}

// testBeforeFence, set only by tests, runs in a Leave or a restarting Join
// after the membership is published and before the core is bumped.
var testBeforeFence func()

// WorkerInfo is a member as Workers reports it.
type WorkerInfo struct {
	Worker
	State WorkerState
	// Bound counts the sessions bound to the worker's current instance,
	// over its ranks and both phases.
	Bound int
}

// Workers lists the members, with their states and bound sessions.
func (l *Layer) Workers() []WorkerInfo {
	ms := l.mem.load()
	out := make([]WorkerInfo, 0, len(ms))
	for _, m := range ms {
		out = append(out, WorkerInfo{Worker: m.Worker, State: m.state(), Bound: l.bound(m)})
	}
	sortWorkers(out)
	return out
}

// Targets returns the targets a request may be dispatched to now: every
// rank of every member that is up (a worker-only target for a member that
// serves no ranks), sorted by worker id, then rank. It is a router's list of
// candidates before its own load signals; it reads the membership's
// snapshot (the list is computed once per membership change) and returns
// a copy the caller may change.
func (l *Layer) Targets() []Target { return l.AppendTargets(nil) }

// AppendTargets appends Targets' list to dst and returns the extended
// slice: with a dst of enough capacity (a buffer a router reuses across
// requests) it allocates nothing.
func (l *Layer) AppendTargets(dst []Target) []Target {
	return append(dst, l.targetList().ts...)
}

// targetList returns Targets' list for the membership's current snapshot,
// computing it once per membership change.
func (l *Layer) targetList() *targetList {
	snap := l.mem.snap.Load()
	c := l.targets.Load()
	if c == nil || c.snap != snap {
		c = &targetList{snap: snap}
		for _, m := range *snap {
			switch {
			case m.failed:
			case m.Ranks == 0:
				c.ts = append(c.ts, WorkerOnly(m.ID))
			default:
				for r := m.FirstRank; r < m.FirstRank+m.Ranks; r++ {
					c.ts = append(c.ts, Ranked(m.ID, r))
				}
			}
		}
		sort.Slice(c.ts, func(i, j int) bool {
			a, b := c.ts[i], c.ts[j]
			return a.Worker < b.Worker || (a.Worker == b.Worker && a.Rank < b.Rank)
		})
		l.targets.Store(c)
	}
	return c
}

// targetList is Targets' list for one membership snapshot.
type targetList struct {
	snap *members
	ts   []Target
}

// Bound returns how many sessions are bound to t now (a worker-only t:
// over every rank of its worker) in phase p. It suits a least-loaded
// policy: a few atomic loads.
func (l *Layer) Bound(p Phase, t Target) int {
	m, ok := l.mem.load().current(t.Worker)
	if !ok || p >= numPhases {
		return 0
	}
	if l.replicated() {
		return l.replicaBound(p, m, t)
	}
	c := l.core[p]
	if t.HasRank {
		return c.Bindings(slotOf(t, m.instance))
	}
	n := c.Bindings(slot{worker: m.ID, instance: m.instance})
	for r := m.FirstRank; r < m.FirstRank+m.Ranks; r++ {
		n += c.Bindings(slot{worker: m.ID, rank: r, hasRank: true, instance: m.instance})
	}
	return n
}

func (l *Layer) bound(m *member) int {
	n := 0
	for p := Phase(0); p < numPhases; p++ {
		n += l.Bound(p, WorkerOnly(m.ID))
	}
	return n
}

// Request is one request as the layer sees it.
type Request struct {
	// Session is the session's key; the zero Key routes the request
	// unpinned (no binding consulted or made).
	Session Key
	// Phase is the table the binding lives in.
	Phase Phase
	// Pin, when HasPin, is the request's explicit target for this phase:
	// exact in every mode (see the contract table). A non-zero Pin
	// without HasPin is an error (placement.ErrInvalidArgument), never
	// silently ignored.
	Pin    Target
	HasPin bool
	// Final marks the session's final request: its binding closes when the
	// last request holding it ends.
	Final bool
}

// RequestFromHeader reads a request's session id and final flag from h
// (Config.Headers) and derives its key under ns. A request without a
// session id returns a Request with the zero Key (routed unpinned); an
// invalid id returns a *SessionIDError.
func (l *Layer) RequestFromHeader(ns Namespace, h http.Header, p Phase) (Request, error) {
	id, final, found, err := l.cfg.Headers.SessionID(h)
	if err != nil || !found {
		return Request{Phase: p, Final: final}, err
	}
	k, err := ns.Session(id)
	return Request{Session: k, Phase: p, Final: final}, err
}

// Query returns the target of key's live binding in phase p, without
// taking a lease or creating anything (query-only selection). A binding to
// a worker that failed, left or restarted reads as none.
func (l *Layer) Query(key Key, p Phase) (Target, bool) {
	if key.IsZero() || p >= numPhases {
		return Target{}, false
	}
	if l.replicated() {
		return l.replicaQuery(key, p)
	}
	info, err := l.core[p].Query(key.k)
	if err != nil || info.State != placement.StateBound {
		return Target{}, false
	}
	m, ok := l.mem.load().current(info.Target.worker)
	if !ok || m.instance != info.Target.instance || m.failed || !m.serves(info.Target.target()) {
		return Target{}, false
	}
	return info.Target.target(), true
}

// Quarantine is a quarantined session, as Quarantined lists it.
type Quarantine struct {
	Key   Key
	Phase Phase
	// Target, Attempt and Generation name the ambiguous attempt: a
	// resolver asks Target whether attempt Attempt arrived.
	Target              Target
	Attempt, Generation uint64
	// Identity is the instance identity of Target's worker the attempt was
	// sent to: a resolver whose answer comes from another instance (the
	// worker restarted) cannot settle it (a restart's Join ends it).
	Identity string
	// Since and Expires: when it began and when QuarantineTTL ends it, on
	// the layer's clock.
	Since, Expires time.Duration
	// DispatchedAt: when the attempt was dispatched, on the layer's clock
	// (at most DispatchTimeout before Since). The request was sent at or
	// after it: a resolver bounds the attempt's age by Now - DispatchedAt.
	DispatchedAt time.Duration
	// Final: the attempt was its session's final request: a Resolve that
	// binds it ends the binding at once.
	Final bool
}

// Quarantined lists the quarantined sessions of both phases, oldest first
// within a phase: a resolver's work list (it costs a walk of the tables).
func (l *Layer) Quarantined() []Quarantine {
	if l.replicated() {
		return l.replicaQuarantined()
	}
	var out []Quarantine
	ms := l.mem.load()
	for p, c := range l.core {
		for _, q := range c.Quarantined() {
			id := ""
			if m, ok := ms[q.Target.worker]; ok && m.instance == q.Target.instance {
				id = m.Identity
			}
			_, final := l.finalQ[p].Load(q.Attempt)
			out = append(out, Quarantine{Key: Key{k: q.Key}, Phase: Phase(p), Target: q.Target.target(), Identity: id,
				Attempt: q.Attempt, Generation: q.Generation, Since: q.Since, Expires: q.Expires,
				DispatchedAt: q.DispatchedAt, Final: final})
		}
	}
	return out
}

// Resolve settles a quarantine as placement.Coordinator.Resolve does,
// fenced by its attempt and generation: ResolveAccepted binds the session
// to the attempt's target (with no lease; a final request's binding is
// ended at once), ResolveNotAccepted makes it absent. It returns
// placement.ErrNotQuarantined or a *placement.FencedError when the
// quarantine is over or is another attempt's (nothing left to settle), a
// *placement.GenerationMovedError (placement.ErrStaleAtBirth) when its
// worker restarted meanwhile (settled, nothing bound), placement.ErrClosed
// after Close.
func (l *Layer) Resolve(q Quarantine, res placement.Resolution) error {
	if q.Phase >= numPhases || q.Key.IsZero() {
		return placement.ErrInvalidArgument
	}
	if l.replicated() {
		return l.replicaResolve(q, res)
	}
	c := l.core[q.Phase]
	err := c.Resolve(q.Key.k, q.Attempt, q.Generation, res)
	switch {
	case err == nil && res == placement.ResolveAccepted:
		l.stats.binds.Add(1)
		if _, final := l.finalQ[q.Phase].LoadAndDelete(q.Attempt); final {
			_, _ = c.InvalidateKey(q.Key.k)
		}
	case errors.Is(err, placement.ErrStaleAtBirth):
		l.stats.staleAtBirth.Add(1)
	}
	return err
}

// EndSession removes key's bindings in both phases, whoever holds leases
// on them (their requests finish where they are): for a session that
// ended outside its requests (a client's logout, an operator). A session
// being placed or quarantined is left alone. It reports whether a binding
// was removed.
func (l *Layer) EndSession(key Key) (bool, error) {
	if key.IsZero() {
		return false, nil
	}
	if l.replicated() {
		return l.replicaEndSession(key)
	}
	removed := false
	for _, c := range l.core {
		ok, err := c.InvalidateKey(key.k)
		if err != nil {
			return removed, err
		}
		removed = removed || ok
	}
	return removed, nil
}

// observe counts the core's events (called under the key's lock: atomics
// only).
func (l *Layer) observe(p Phase, finalQ *sync.Map, ev placement.Event[slot]) {
	if testhooks.CoreEvent != nil {
		testhooks.CoreEvent(ev.Kind.String(), Key{k: ev.Key}.String(), ev.Attempt, ev.Seq)
	}
	s := &l.stats
	switch ev.Kind {
	case placement.EventQuarantined:
		s.quarantined.Add(1)
	case placement.EventResolved:
		if ev.Outcome == placement.Accepted {
			s.resolvedAccepted.Add(1)
		} else {
			s.resolvedNotAccepted.Add(1)
			finalQ.Delete(ev.Attempt)
		}
	case placement.EventQuarantineExpired:
		s.quarantineExpired.Add(1)
		finalQ.Delete(ev.Attempt)
	case placement.EventQuarantineDropped:
		s.quarantineDropped.Add(1)
		finalQ.Delete(ev.Attempt)
	case placement.EventExpired:
		s.expired.Add(1)
	case placement.EventRemoved:
		if ev.HasTarget {
			l.refusing.removed(refusalKey{phase: p, key: ev.Key, version: ev.Attempt})
		}
	}
}

// counter is an atomic counter on its own cache line.
type counter struct {
	atomic.Uint64
	_ [56]byte
}
