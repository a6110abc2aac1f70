package replay

import (
	"container/heap"
	"context"
	"fmt"
	"github.com/placementlab/placement/internal/blocklru"
	"time"

	"github.com/placementlab/placement/impl/affinity"
	"github.com/placementlab/placement/impl/picker"
	"github.com/placementlab/placement/impl/placement"
	"github.com/placementlab/placement/impl/resolver"
)

type evKind uint8

const (
	evSend evKind = iota
	evPrefillDone
	evDecodeDone
	evChange
	evTick
	evWindow
	evArrive     // a dispatch reaches its worker after a store round trip (claims)
	evSync       // a binding message reaches a replica (best-effort, gossip)
	evClaimEvent // a claim's rewrite reaches a replica's cache (claims)
	evStoreBack  // the claims store is reachable again
)

// imbalanceWindow is the window over which dispatches are compared with
// the workers' fair shares (Result.Imbalance).
const imbalanceWindow = 5 * time.Minute

// event is one thing that happens at a time; events at the same time
// happen in the order they were scheduled (seq).
type event struct {
	at   time.Duration
	seq  uint64
	kind evKind
	idx  int // request (evSend) or change (evChange)
	job  *job
	msg  *syncMsg
}

type eventHeap []event

func (h eventHeap) Len() int { return len(h) }
func (h eventHeap) Less(i, j int) bool {
	if h[i].at != h[j].at {
		return h[i].at < h[j].at
	}
	return h[i].seq < h[j].seq
}
func (h eventHeap) Swap(i, j int) { h[i], h[j] = h[j], h[i] }
func (h *eventHeap) Push(x any)   { *h = append(*h, x.(event)) }
func (h *eventHeap) Pop() any {
	old := *h
	e := old[len(old)-1]
	*h = old[:len(old)-1]
	return e
}

// job is one dispatch of a request at a rank.
type job struct {
	req    int
	rank   *rank
	gen    int      // the worker's instance when it was enqueued
	lost   bool     // an ambiguous dispatch the worker ran: nobody gets the answer
	hashes []uint64 // the prompt's blocks, then the output's
	np     int      // the prompt's blocks
	pos    int      // index in rank.active
	est    int      // placement's estimate of its uncached tokens (accepted dispatches)
	// split: the dispatch went elsewhere than its key's binding expected
	// (invariant 3, checked when it reaches its worker).
	split *splitCheck
}

type workerState uint8

const (
	stGone workerState = iota
	stUp
	stFailed
)

type worker struct {
	idx        int
	id         string
	instance   int
	gen        int
	state      workerState
	ranks      []*rank
	dispatched int
	ever       bool
	downAt     time.Duration // its last Fail, Leave or Restart (-1: none)
	// winDisp counts the worker's dispatches in the current imbalance
	// window, winFair its fair share of them: each dispatch adds
	// 1/(workers up) to every worker up.
	winDisp int
	winFair float64
}

type rank struct {
	w        *worker
	target   affinity.Target
	cache    *blocklru.LRU
	queue    []*job
	busy     *job
	active   []*job // queued, prefilling or decoding
	inflight int
	// backlog is placement's estimate of the rank's prefill backlog: the
	// estimated uncached tokens of the requests it accepted that have not
	// yet given their first token (see sched.go).
	backlog int
	// match is placement's estimate for the request being routed: the
	// prompt blocks the router's index says the rank holds.
	match int
}

// sim is one policy's simulation: single-threaded, on its own clock.
type sim struct {
	cfg *Config
	pol Policy
	wl  *Workload

	now    time.Duration
	events eventHeap
	seq    uint64

	workers []*worker
	byID    map[string]*worker
	up      []*rank // the up workers' ranks, in worker then rank order
	upW     []*worker
	imbSum  float64 // sum over windows of dispatches x the window's imbalance
	imbN    int     // dispatches in the closed windows

	pipe            *picker.Pipeline
	prefix          *picker.PrefixOverlap
	pcands, pcands2 []picker.Candidate
	acands          []affinity.Candidate
	parentHint      bool
	placeReq        *picker.Request
	matches         []int

	pending    []int32
	readyAt    []time.Duration
	dependents [][]int32
	sentAt     []time.Duration
	tries      []uint32
	remaining  int
	keys       []string // routing key: "s:"+session or "g:"+parent
	lastBlocks map[string]int

	clk       *placement.ManualClock
	layer     *affinity.Layer
	akeys     []affinity.Key // the request's session or sibling-group key
	pkeys     []affinity.Key // a subagent's parent session's key
	ranBy     map[uint64]bool
	resolver  *resolver.Resolver
	cancelled context.Context

	rr     int
	sticky map[string]stick

	res  Result
	ttft []time.Duration

	// The router replicas (replicas.go): the placement policies run one,
	// a replicated run R; s.layer, s.clk, s.prefix, s.pipe and s.resolver
	// are the current replica's (use).
	reps []*replica
	cur  int
	rr2  *replicaRun // nil: not a replicated run
	// kid is each request's key's index; the split-turn bookkeeping is per
	// key (trackSplit).
	kid     []int32
	kak     []affinity.Key
	lastW   []int32
	lastGen []int
	lastAt  []time.Duration
	rstat   replicaStats
	sends   []uint32    // each request's sendings so far (the load balancer's draw)
	store   *claimStore // Claims' simulated store

	inv invState // the invariant checks (invariants.go)
}

type stick struct {
	r   *rank
	gen int
}

func newSim(cfg *Config, pol Policy, wl *Workload) (*sim, error) {
	return newSimRun(cfg, pol, wl, nil)
}

// newSimRun builds a simulation; rr, when not nil, makes it a replicated
// run (rr.replicas router replicas under rr.cons).
func newSimRun(cfg *Config, pol Policy, wl *Workload, rr *replicaRun) (*sim, error) {
	n := len(wl.Requests)
	s := &sim{
		cfg: cfg, pol: pol, wl: wl,
		byID:       map[string]*worker{},
		pending:    make([]int32, n),
		readyAt:    make([]time.Duration, n),
		dependents: make([][]int32, n),
		sentAt:     make([]time.Duration, n),
		tries:      make([]uint32, n),
		remaining:  n,
		keys:       make([]string, n),
		lastBlocks: map[string]int{},
		ranBy:      map[uint64]bool{},
		sticky:     map[string]stick{},
		rr2:        rr,
	}
	s.res.Policy = pol
	index := make(map[int]int, n)
	for i := range wl.Requests {
		r := &wl.Requests[i]
		s.sentAt[i] = -1
		if r.Parent != "" {
			s.keys[i] = "g:" + r.Parent
		} else {
			s.keys[i] = "s:" + r.Session
		}
		for _, d := range r.After {
			j, ok := index[d]
			if !ok {
				return nil, &TraceError{Line: i + 1, Reason: fmt.Sprintf("after names %d, which is not an earlier request", d)}
			}
			s.pending[i]++
			s.dependents[j] = append(s.dependents[j], int32(i))
		}
		index[r.ID] = i
	}
	if err := s.makeKeys(); err != nil {
		return nil, err
	}
	s.keyIDs()
	if pol.placement() {
		nrep := 1
		if rr != nil {
			nrep = rr.replicas
			s.sends = make([]uint32, n)
			s.store = &claimStore{claims: map[int32]*claim{}}
		}
		for k := range nrep {
			rep, err := s.newReplica(k)
			if err != nil {
				s.close()
				return nil, err
			}
			s.reps = append(s.reps, rep)
		}
		s.use(0)
		s.initInvariants()
		s.parentHint = true
		ctx, cancel := context.WithCancel(context.Background())
		cancel() // Start never waits: a request that would is refused
		s.cancelled = ctx
		return s, nil
	}
	if err := s.newPickers(0); err != nil {
		s.close()
		return nil, err
	}
	return s, nil
}

// newReplica builds router replica k of a placement policy: its own
// affinity layer on its own manual clock (attempt ids from 1 + k<<40, so
// that no two replicas share one), its resolver and its scheduler's
// pickers and prefix index. Replica 0 is built exactly as the
// single-router policy's router is.
func (s *sim) newReplica(k int) (*replica, error) {
	cfg := s.cfg
	mode := map[Policy]affinity.Mode{PlacementHard: affinity.ModeHard, PlacementSoft: affinity.ModeSoft, PlacementOff: affinity.ModeOff}[s.pol]
	rep := &replica{idx: k, clk: placement.NewManualClock(0),
		view: map[int32]*viewEntry{}, cache: map[int32]cachedClaim{}, pendingT: map[int32]*rank{}}
	l, err := affinity.New(affinity.Config{
		Mode: mode, Clock: rep.clk, QuarantineTTL: cfg.QuarantineTTL, IdleTTL: cfg.IdleTTL, FirstAttempt: 1 + uint64(k)<<40,
		MaxEntries: max(1024, 2*len(s.wl.Requests)),
	})
	if err != nil {
		return nil, err
	}
	rep.layer = l
	if cfg.ResolverInterval > 0 {
		rep.resolver, err = resolver.New(resolver.Config{
			Source: l, Status: s.status, Concurrency: 1, Seed: cfg.Seed ^ uint64(k)<<48,
			MaxCallsPerPass: 1 << 20,
		})
		if err != nil {
			l.Close()
			return nil, err
		}
	}
	if err := s.newPickers(k); err != nil {
		l.Close()
		return nil, err
	}
	rep.prefix, rep.pipe = s.prefix, s.pipe
	return rep, nil
}

// use makes replica k the current one (the router the request being
// routed reached).
func (s *sim) use(k int) {
	rep := s.reps[k]
	s.cur = k
	s.layer, s.clk, s.resolver, s.prefix, s.pipe = rep.layer, rep.clk, rep.resolver, rep.prefix, rep.pipe
}

// keyIDs numbers the requests' routing keys (s.keys) densely, for the
// per-key bookkeeping.
func (s *sim) keyIDs() {
	ids := map[string]int32{}
	s.kid = make([]int32, len(s.keys))
	for i, k := range s.keys {
		id, ok := ids[k]
		if !ok {
			id = int32(len(ids))
			ids[k] = id
			s.kak = append(s.kak, s.akeys[i])
		}
		s.kid[i] = id
	}
	n := len(ids)
	s.lastW, s.lastGen, s.lastAt = make([]int32, n), make([]int, n), make([]time.Duration, n)
	for k := range s.lastW {
		s.lastW[k] = -1
	}
}

// makeKeys derives each request's affinity key: its session's, or for a
// subagent its parent's sibling group's.
func (s *sim) makeKeys() error {
	n := len(s.wl.Requests)
	ns := affinity.Namespace{Model: "replay"}
	s.akeys, s.pkeys = make([]affinity.Key, n), make([]affinity.Key, n)
	sessions := map[string]affinity.Key{}
	sessionKey := func(id string) (affinity.Key, error) {
		if k, ok := sessions[id]; ok {
			return k, nil
		}
		k, err := ns.Session(id)
		if err != nil {
			return k, err
		}
		sessions[id] = k
		return k, nil
	}
	for i := range s.wl.Requests {
		r := &s.wl.Requests[i]
		k, err := sessionKey(r.Session)
		if r.Parent != "" && err == nil {
			var pk affinity.Key
			if pk, err = sessionKey(r.Parent); err == nil {
				s.pkeys[i] = pk
				k, err = ns.SiblingGroup(pk)
			}
		}
		if err != nil {
			return &TraceError{Line: i + 1, Reason: err.Error()}
		}
		s.akeys[i] = k
	}
	return nil
}

// status is the simulated resolver's question to a worker: did the
// attempt arrive? The simulation knows.
func (s *sim) status(_ context.Context, q affinity.Quarantine) (resolver.Verdict, error) {
	ran, ok := s.ranBy[q.Attempt]
	switch {
	case !ok:
		return resolver.Unknown, nil
	case ran:
		return resolver.Arrived, nil
	}
	return resolver.NotArrived, nil
}

func (s *sim) close() {
	for _, rep := range s.reps {
		_ = rep.layer.Close()
	}
}

func (s *sim) push(at time.Duration, kind evKind, idx int, j *job) {
	s.seq++
	heap.Push(&s.events, event{at: at, seq: s.seq, kind: kind, idx: idx, job: j})
}

// pushMsg schedules a message's delivery to replica to.
func (s *sim) pushMsg(at time.Duration, kind evKind, to int, m *syncMsg) {
	s.seq++
	heap.Push(&s.events, event{at: at, seq: s.seq, kind: kind, idx: to, msg: m})
}

// chance returns a deterministic draw in [0, 1) for request i's try-th
// dispatch: the same for every policy, so every policy meets the same
// ambiguous dispatches.
func (s *sim) chance(i int, try uint32, salt uint64) float64 {
	h := mix(mix(mix(s.cfg.Seed^0xa5a5, uint64(i)), uint64(try)), salt)
	return float64(h>>11) / (1 << 53)
}

// run simulates the workload to the end.
func (s *sim) run(ctx context.Context) (*Result, error) {
	defer s.close()
	for i := range s.cfg.Workers {
		s.join(i)
	}
	for i, ch := range s.cfg.Churn {
		s.push(ch.At, evChange, i, nil)
	}
	for i := range s.wl.Requests {
		r := &s.wl.Requests[i]
		if s.cfg.Loop == Open || len(r.After) == 0 {
			s.push(time.Duration(r.AtMS)*time.Millisecond, evSend, i, nil)
		}
	}
	if len(s.reps) > 0 {
		s.push(s.cfg.ResolverInterval, evTick, 0, nil)
	}
	if s.rr2 != nil && s.rr2.cons == Claims && s.rr2.cfg.StoreDownFor > 0 {
		s.push(s.rr2.cfg.StoreDownAt+s.rr2.cfg.StoreDownFor, evStoreBack, 0, nil)
	}
	s.push(imbalanceWindow, evWindow, 0, nil)
	for n := 0; s.remaining > 0; n++ {
		if n&4095 == 0 {
			if err := ctx.Err(); err != nil {
				return nil, err
			}
		}
		if len(s.events) == 0 {
			return nil, fmt.Errorf("%w: %s: %d requests unserved and nothing left to happen", ErrStuck, s.pol, s.remaining)
		}
		ev := heap.Pop(&s.events).(event)
		if ev.at > s.cfg.MaxSimTime {
			return nil, fmt.Errorf("%w: %s: %d requests unserved at %v", ErrStuck, s.pol, s.remaining, s.cfg.MaxSimTime)
		}
		s.now = ev.at
		for _, rep := range s.reps {
			if rep.clk.Now() < s.now {
				if err := rep.clk.Set(s.now); err != nil {
					return nil, err
				}
			}
		}
		switch ev.kind {
		case evSend:
			s.send(ev.idx)
		case evPrefillDone:
			s.prefillDone(ev.job)
		case evDecodeDone:
			s.decodeDone(ev.job)
		case evChange:
			s.change(s.cfg.Churn[ev.idx])
		case evTick:
			s.tick()
		case evWindow:
			s.closeWindow()
			s.push(s.now+imbalanceWindow, evWindow, 0, nil)
		case evArrive:
			s.arrive(ev.job)
		case evSync:
			s.receive(ev.idx, ev.msg)
		case evClaimEvent:
			s.claimEvent(ev.idx, ev.msg)
		case evStoreBack:
			s.storeBack()
		}
	}
	res := s.finish()
	s.checkEnd(res)
	return res, nil
}

// send is a client sending request i (again).
func (s *sim) send(i int) {
	if s.sentAt[i] < 0 {
		s.sentAt[i] = s.now
	}
	var rk *rank
	var h handle
	var delay time.Duration
	ok := false
	s.inv.claim = nil
	if s.rr2 != nil {
		rk, h, delay, ok = s.routeReplica(i)
	} else {
		rk, h, ok = s.route(i)
	}
	if !ok {
		s.res.Refused++
		s.push(s.now+s.cfg.RetryDelay, evSend, i, nil)
		return
	}
	if testBreak != "" && h.turn != (affinity.Turn{}) {
		rk = s.breakRoute(i, rk)
	}
	s.dispatch(i, rk, h, delay)
}

// enqueueAt puts j in rk's queue after delay (a store round trip).
func (s *sim) enqueueAt(rk *rank, j *job, delay time.Duration) {
	if delay <= 0 {
		s.enqueue(rk, j)
		return
	}
	j.rank, j.gen = rk, rk.w.gen
	s.push(s.now+delay, evArrive, 0, j)
}

// arrive is a dispatch reaching its worker after a store round trip; one
// whose worker went down or restarted meanwhile is lost (its client sends
// it again after RetryDelay, as after a restart).
func (s *sim) arrive(j *job) {
	rk := j.rank
	if rk.w.state != stUp || rk.w.gen != j.gen {
		if !j.lost {
			s.res.Lost++
			s.push(s.now+s.cfg.RetryDelay, evSend, j.req, nil)
		}
		return
	}
	s.enqueue(rk, j)
}

// dispatch sends request i to rk, reaching it after delay: ambiguous (D6)
// or accepted. The outcome is reported to the layer at once (the
// request's turn does not hold its session across the delay).
func (s *sim) dispatch(i int, rk *rank, h handle, delay time.Duration) {
	s.tries[i]++
	try := s.tries[i]
	ambiguous := s.chance(i, try, 1) < s.cfg.AmbiguousProb
	var sc *splitCheck
	if h.turn != (affinity.Turn{}) {
		sc = s.checkDispatch(i, rk, h, !ambiguous)
	}
	if ambiguous {
		ran := s.chance(i, try, 2) < s.cfg.AmbiguousRan
		s.res.Ambiguous++
		h.complete(s, rk, placement.Ambiguous, ran)
		if ran {
			s.enqueueAt(rk, &job{req: i, lost: true}, delay)
		}
		s.sentAt[i] = -1 // the client's timeout is not the policy's doing
		s.push(s.now+s.cfg.ClientTimeout, evSend, i, nil)
		return
	}
	h.complete(s, rk, placement.Accepted, true)
	s.enqueueAt(rk, &job{req: i, est: h.est, split: sc}, delay)
	s.trackSplit(i, rk)
	if s.rr2 != nil {
		s.afterAccept(i, rk, h)
	}
}

// promptBlocks returns request i's prefix block hashes (prompt only, or
// followed by its output's when withOutput; a trace's given blocks have no
// output blocks).
func (s *sim) promptBlocks(dst []uint64, i int, withOutput bool) []uint64 {
	r := &s.wl.Requests[i]
	if len(r.Blocks) > 0 {
		return chainBlocks(dst[:0], r.Blocks)
	}
	if len(r.Prompt) == 0 {
		return dst[:0]
	}
	extra := 0
	if withOutput {
		extra = r.OutputTokens
	}
	return prefixBlocks(dst[:0], r.Prompt, extra, s.cfg.BlockTokens)
}

func (s *sim) enqueue(rk *rank, j *job) {
	j.rank, j.gen = rk, rk.w.gen
	rk.backlog += j.est
	j.pos = len(rk.active)
	rk.active = append(rk.active, j)
	rk.queue = append(rk.queue, j)
	rk.inflight++
	rk.w.dispatched++
	rk.w.winDisp++
	for _, w := range s.upW {
		w.winFair += 1 / float64(len(s.upW))
	}
	s.jobStarted(j)
	if rk.busy == nil {
		s.startPrefill(rk)
	}
}

func (s *sim) startPrefill(rk *rank) {
	if len(rk.queue) == 0 {
		return
	}
	j := rk.queue[0]
	rk.queue[0] = nil
	rk.queue = rk.queue[1:]
	r := &s.wl.Requests[j.req]
	j.hashes = s.promptBlocks(nil, j.req, true)
	j.np = len(j.hashes)
	if len(r.Blocks) == 0 {
		j.np = min(j.np, r.InputTokens/s.cfg.BlockTokens)
	}
	hit := rk.cache.Match(j.hashes[:j.np])
	cached := min(hit*s.cfg.BlockTokens, r.InputTokens)
	uncached := r.InputTokens - cached
	dur := s.cfg.PrefillBase + time.Duration(float64(uncached)/s.cfg.PrefillRate*float64(time.Second))
	rk.busy = j
	if !j.lost {
		s.res.PromptTokens += int64(r.InputTokens)
		s.res.CachedTokens += int64(cached)
		prev, ok := s.lastBlocks[r.Session]
		if ok && prev > 0 {
			s.res.LaterCalls++
			if hit >= prev {
				s.res.Reused++
			}
		}
	}
	s.res.PrefillTokens += int64(uncached)
	s.push(s.now+dur, evPrefillDone, 0, j)
}

func (s *sim) prefillDone(j *job) {
	rk := j.rank
	if rk.busy != j || j.gen != rk.w.gen {
		return // its worker restarted
	}
	rk.cache.Insert(j.hashes[:j.np])
	rk.busy = nil
	rk.backlog -= j.est
	if !j.lost {
		s.ttft = append(s.ttft, s.now-s.sentAt[j.req])
		s.lastBlocks[s.wl.Requests[j.req].Session] = j.np
	}
	r := &s.wl.Requests[j.req]
	s.push(s.now+time.Duration(r.OutputTokens)*s.cfg.DecodeTokenTime, evDecodeDone, 0, j)
	s.startPrefill(rk)
}

func (s *sim) removeActive(j *job) {
	rk := j.rank
	last := rk.active[len(rk.active)-1]
	rk.active[j.pos] = last
	last.pos = j.pos
	rk.active = rk.active[:len(rk.active)-1]
	rk.inflight--
}

func (s *sim) decodeDone(j *job) {
	rk := j.rank
	if j.gen != rk.w.gen {
		return
	}
	s.removeActive(j)
	if out := j.hashes[j.np:]; len(out) > 0 {
		if j.np > 0 {
			rk.cache.InsertAfter(j.hashes[j.np-1], out)
		} else {
			rk.cache.Insert(out)
		}
	}
	j.hashes = nil
	s.jobEnded(j)
	if j.lost {
		return
	}
	i := j.req
	s.remaining--
	s.res.Served++
	for _, d := range s.dependents[i] {
		s.readyAt[d] = max(s.readyAt[d], s.now)
		s.pending[d]--
		if s.pending[d] == 0 && s.cfg.Loop == Closed {
			s.push(s.readyAt[d]+time.Duration(s.wl.Requests[d].ThinkMS)*time.Millisecond, evSend, int(d), nil)
		}
	}
}

// tick runs the layer's reaper (ManualClock.Reclaim) and, every
// ResolverInterval, a pass of impl/resolver, which settles the quarantines
// by asking the simulation whether each attempt arrived.
func (s *sim) tick() {
	for _, rep := range s.reps {
		rep.clk.Reclaim()
		if rep.resolver != nil {
			s.res.Resolved += rep.resolver.Pass(context.Background()).Resolved
		}
	}
	every := s.cfg.ResolverInterval
	if every <= 0 {
		every = 5 * time.Second
	}
	s.push(s.now+every, evTick, 0, nil)
}

// join brings worker i up: new, or back after leaving (a new instance).
func (s *sim) join(i int) {
	for len(s.workers) <= i {
		k := len(s.workers)
		w := &worker{idx: k, id: fmt.Sprintf("w%d", k), downAt: -1}
		for r := range s.cfg.Ranks {
			rk := &rank{w: w, target: affinity.Ranked(w.id, r), cache: blocklru.New(s.cfg.CacheBlocks)}
			w.ranks = append(w.ranks, rk)
		}
		s.workers = append(s.workers, w)
		s.byID[w.id] = w
	}
	w := s.workers[i]
	if w.state == stUp {
		return
	}
	if w.ever && w.state == stGone {
		s.restart(w) // back after leaving: a new instance
	}
	w.ever = true
	s.setUp(w)
	s.layerJoin(w)
	s.membershipChanged()
}

func (s *sim) layerJoin(w *worker) {
	for _, rep := range s.reps {
		_, _ = rep.layer.Join(affinity.Worker{ID: w.id, Identity: fmt.Sprintf("%s#%d", w.id, w.instance), Ranks: s.cfg.Ranks})
	}
}

// forgetWorker drops w from every prefix index (each replica's, or the
// policy's).
func (s *sim) forgetWorker(w *worker) {
	if len(s.reps) == 0 {
		if s.prefix != nil {
			s.prefix.ForgetWorker(w.id)
		}
		return
	}
	for _, rep := range s.reps {
		if rep.prefix != nil {
			rep.prefix.ForgetWorker(w.id)
		}
	}
}

// restart makes w a new instance: empty caches, everything it ran lost
// (the clients send those requests again).
func (s *sim) restart(w *worker) {
	w.gen++
	w.instance++
	w.downAt = s.now
	for _, rk := range w.ranks {
		for _, j := range rk.active {
			s.jobEnded(j)
			if !j.lost {
				s.res.Lost++
				s.push(s.now+s.cfg.RetryDelay, evSend, j.req, nil)
			}
		}
		rk.active, rk.queue, rk.busy, rk.inflight, rk.backlog = nil, nil, nil, 0, 0
		rk.cache.Clear()
	}
	s.forgetWorker(w)
}

func (s *sim) setUp(w *worker) { w.state = stUp }

func (s *sim) setDown(w *worker, st workerState) { w.state, w.downAt = st, s.now }

// closeWindow adds the window's imbalance (the largest ratio of a
// worker's dispatches to its fair share), weighted by the window's
// dispatches, and starts a new window.
func (s *sim) closeWindow() {
	total, worst := 0, 0.0
	for _, w := range s.workers {
		total += w.winDisp
		if w.winFair > 0 {
			worst = max(worst, float64(w.winDisp)/w.winFair)
		}
		w.winDisp, w.winFair = 0, 0
	}
	s.imbSum += float64(total) * worst
	s.imbN += total
}

func (s *sim) change(c Change) {
	if c.Worker >= len(s.workers) {
		if c.Kind == Join {
			s.join(c.Worker)
		}
		return
	}
	w := s.workers[c.Worker]
	switch c.Kind {
	case Fail:
		if w.state != stUp {
			return
		}
		s.setDown(w, stFailed)
		for _, rep := range s.reps {
			_ = rep.layer.Fail(w.id)
		}
	case Recover:
		if w.state != stFailed {
			return
		}
		s.setUp(w)
		s.layerJoin(w)
	case Restart:
		if w.state == stGone {
			return
		}
		s.restart(w)
		s.setUp(w) // a restarted worker is up, with a new identity
		if !s.breakOnce("unannounced", len(s.reps) > 0) {
			s.layerJoin(w)
		}
	case Leave:
		if w.state == stGone {
			return
		}
		s.setDown(w, stGone)
		for _, rep := range s.reps {
			_ = rep.layer.Leave(w.id)
		}
		s.forgetWorker(w)
	case Join:
		s.join(c.Worker)
		return
	}
	s.membershipChanged()
}

func (s *sim) membershipChanged() {
	s.up, s.upW = s.up[:0], s.upW[:0]
	for _, w := range s.workers {
		if w.state == stUp {
			s.up = append(s.up, w.ranks...)
			s.upW = append(s.upW, w)
		}
	}
}

func (s *sim) finish() *Result {
	res := s.res
	res.End = s.now
	res.TTFTp50, res.TTFTp99 = percentile(s.ttft, 0.50), percentile(s.ttft, 0.99)
	if res.PromptTokens > 0 {
		res.HitRatio = float64(res.CachedTokens) / float64(res.PromptTokens)
	}
	if res.LaterCalls > 0 {
		res.TurnReuse = float64(res.Reused) / float64(res.LaterCalls)
	}
	s.closeWindow()
	if s.imbN > 0 {
		res.Imbalance = s.imbSum / float64(s.imbN)
	}
	for _, w := range s.workers {
		res.WorkerRequests = append(res.WorkerRequests, w.dispatched)
	}
	res.Targets = len(s.workers[0].ranks) * s.cfg.Workers
	for _, rep := range s.reps {
		st := rep.layer.Stats()
		for _, m := range st.Moves {
			res.Moves += int(m)
		}
		for c, u := range st.Unpinned {
			if affinity.Cause(c) != affinity.CauseOff {
				res.Unpinned += int(u)
			}
		}
		res.Quarantines += int(st.QuarantinesOpened)
		res.Hits += int(st.Hits)
	}
	return &res
}
