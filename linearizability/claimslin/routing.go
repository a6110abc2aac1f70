package claimslin

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"runtime"
	"sort"
	"sync"
	"sync/atomic"
	"time"

	"github.com/anishathalye/porcupine"
	"github.com/placementlab/placement/impl/claims"
	"github.com/placementlab/placement/impl/placement"
	"github.com/placementlab/placement/impl/replica"
	"github.com/placementlab/placement/linearizability/histfile"
)

// The routing runs' own memstore faults.
const (
	// FaultReset: a replica's event stream held back while the others
	// write, then its undelivered events replaced by a Reset (memstore
	// HoldEvents and InjectReset): the Deletes it held are lost.
	FaultReset = "reset"
	// FaultRestartWorker: a worker registers again under another identity
	// (recorded: Register), so its generation moves and every replica
	// fences the claims made under the old one.
	FaultRestartWorker = "restart-worker"
)

// DrawRoutingPlan draws a routing plan (ExecuteRoutes) of turns turns per
// lane from seed on backend: two or three replicas, each an impl/replica
// Coordinator running two or three lanes of turns on one to three
// sessions. On memstore the store and every replica share a manual clock
// (the injector moves it, and ticks every replica's keepalive before and
// after), and the model checks guarantee 5 (Params.HeldNoExpiry).
func DrawRoutingPlan(seed uint64, turns int, backend string) Plan {
	rng := rand.New(rand.NewPCG(seed, 0x5017e))
	p := Plan{Seed: seed, Backend: backend, Routing: true, Replicas: 2 + rng.IntN(2), Lanes: 2 + rng.IntN(2),
		Keys: 1 + rng.IntN(3), Workers: 2 + rng.IntN(2), Ops: turns, Procs: 2 + rng.IntN(3)}
	switch backend {
	case BackendMem:
		p.Params = Params{TTL: memTTL, HeldNoExpiry: true}
		p.Faults = []string{FaultClock, FaultUnavailable, FaultLoseSession, FaultReset, FaultRestartWorker}
	case BackendEtcd1, BackendEtcd3:
		p.Faults = []string{FaultStopMember, FaultDisconnect, FaultCompact}
	}
	return p
}

// RoutingRun is a recorded routing run.
type RoutingRun struct {
	Plan Plan
	// History is every store call the replicas (and the injector) made,
	// as the model's operations.
	History []porcupine.Operation
	// Events: what each replica's event stream delivered, and when.
	Events [][]Received
	// Routes: every dispatch the replicas' turns routed; Processed:
	// every event each replica processed.
	Routes    []Route
	Processed []Processed
	// Stats: each replica's counters at the end.
	Stats    []replica.Stats
	Coverage RoutingCoverage
	// Faults: the faults injected that the history does not show.
	Faults []string
}

// RoutingCoverage counts what a routing run exercised.
type RoutingCoverage struct {
	Coverage // the store history's
	// Turns, by how they went.
	Turns, Hits, Placing, Retries, Ambiguous, Finals, Resolves int
	// LongTurns: turns that held their lease while the clock moved on by
	// more than the idle TTL.
	LongTurns int
	// Refusals: turns refused because the session was quarantined or
	// closing; StartErrors: turns refused otherwise (no target, ...).
	Quarantined, Closing, StartErrors int
	// SameKeyOverlaps: turns that overlapped a turn of another replica on
	// the same session.
	SameKeyOverlaps int
	// Summed over the replicas' replica.Stats.
	ResetEvictions, DeleteEvictions, MemberEvictions, MovedEvictions  int
	Unclaimed, Reconciles, ClosesDeleted, ClosesDeferred, ClosesStale int
	QuarantinesWritten, Touches, Holds, Unholds, Bumps                int
	// Faults injected that the history does not show.
	Resets int
}

// Add adds o to c.
func (c *RoutingCoverage) Add(o RoutingCoverage) {
	c.Coverage.Add(o.Coverage)
	c.Turns += o.Turns
	c.Hits += o.Hits
	c.Placing += o.Placing
	c.Retries += o.Retries
	c.Ambiguous += o.Ambiguous
	c.Finals += o.Finals
	c.Resolves += o.Resolves
	c.LongTurns += o.LongTurns
	c.Quarantined += o.Quarantined
	c.Closing += o.Closing
	c.StartErrors += o.StartErrors
	c.SameKeyOverlaps += o.SameKeyOverlaps
	c.ResetEvictions += o.ResetEvictions
	c.DeleteEvictions += o.DeleteEvictions
	c.MemberEvictions += o.MemberEvictions
	c.MovedEvictions += o.MovedEvictions
	c.Unclaimed += o.Unclaimed
	c.Reconciles += o.Reconciles
	c.ClosesDeleted += o.ClosesDeleted
	c.ClosesDeferred += o.ClosesDeferred
	c.ClosesStale += o.ClosesStale
	c.QuarantinesWritten += o.QuarantinesWritten
	c.Touches += o.Touches
	c.Holds += o.Holds
	c.Unholds += o.Unholds
	c.Bumps += o.Bumps
	c.Resets += o.Resets
}

// barrierKey is the key of the event the recording stream sends after
// each real one: a Delete of a key no replica caches (a no-op), whose
// receipt says the replica finished processing the event before it (a
// Coordinator applies its events one at a time, in order).
const barrierKey = "claimslin-barrier"

// procStore is a replica's store handle whose event streams record when
// each event was processed (a barrier event after each).
type procStore struct {
	claims.Store
	j      *Journal
	client int

	mu   *sync.Mutex
	done *[]Processed
}

// Events implements claims.Store.
func (p *procStore) Events(ctx context.Context) (<-chan claims.Event, error) {
	in, err := p.Store.Events(ctx)
	if err != nil {
		return nil, err
	}
	out := make(chan claims.Event)
	go func() {
		defer close(out)
		defer func() {
			for range in {
			}
		}()
		for ev := range in {
			select {
			case out <- ev:
			case <-ctx.Done():
				return
			}
			at := p.j.Now()
			select {
			case out <- claims.Event{Kind: claims.Delete, Key: barrierKey}:
			case <-ctx.Done():
				return
			}
			p.mu.Lock()
			*p.done = append(*p.done, Processed{Replica: p.client, Event: ev, Delivered: at, By: p.j.Now()})
			p.mu.Unlock()

		}
	}()
	return out, nil
}

// TurnLimit bounds one turn of a routing run (Start to Done).
const TurnLimit = 5 * time.Second

// longHold bounds a long turn's hold in real time.
const longHold = 200 * time.Millisecond

// ExecuteRoutes runs a routing plan (DrawRoutingPlan) on a fresh backend:
// plan.Replicas impl/replica Coordinators, each with its own recording
// store handle, each running plan.Lanes goroutines of plan.Ops turns
// (Start, a short hold, Complete with a drawn outcome, Done, sometimes
// final; quarantines sometimes resolved) while the injector injects the
// backend's faults. It records every store call, every event delivered
// and when each replica had processed it, and every route.
func ExecuteRoutes(plan Plan) (*RoutingRun, error) {
	if !plan.Routing || plan.Lanes < 1 || plan.Replicas < 1 || plan.Replicas+1 > MaxReplicas ||
		plan.Keys > MaxKeys || plan.Workers > MaxWorkers || plan.Keys < 1 || plan.Workers < 1 {
		return nil, fmt.Errorf("claimslin: not a routing plan within the model's bounds: %+v", plan)
	}
	e, err := newEnv(plan)
	if err != nil {
		return nil, err
	}
	defer e.close()
	prev := runtime.GOMAXPROCS(plan.Procs)
	defer runtime.GOMAXPROCS(prev)

	runCtx, abort := context.WithTimeout(context.Background(), RunLimit)
	defer abort()
	j := NewJournal()
	inj := plan.Replicas // the injector's client number
	injStore, err := e.open(runCtx, replicaName(inj))
	if err != nil {
		return nil, err
	}
	injRec := j.Wrap(inj, injStore)
	defer func() { _ = injStore.Shutdown() }()
	for w := 0; w < plan.Workers; w++ {
		ctx, cancel := context.WithTimeout(runCtx, 2*e.callLimit())
		_, err := injRec.Register(ctx, workerName(w), identName(0))
		cancel()
		if err != nil {
			return nil, fmt.Errorf("claimslin: registering %s: %w", workerName(w), err)
		}
	}

	var clock *placement.ManualClock
	idle := time.Hour
	if m, ok := e.(*memEnv); ok {
		clock, idle = m.clock, time.Duration(plan.Params.TTL)
	}
	var pmu sync.Mutex
	var processed []Processed
	stores := make([]claims.Store, plan.Replicas)
	coords := make([]*replica.Coordinator, plan.Replicas)
	defer func() {
		for i, c := range coords {
			if c != nil {
				_ = c.Close()
			}
			if stores[i] != nil {
				_ = stores[i].Shutdown()
			}
		}
	}()
	for i := range coords {
		s, err := e.open(runCtx, replicaName(i))
		if err != nil {
			return nil, err
		}
		stores[i] = s
		ctx, cancel := context.WithTimeout(runCtx, 4*e.callLimit())
		coords[i], err = replica.New(ctx, replica.Config{
			Store:        &procStore{Store: j.Wrap(i, s), j: j, client: i, mu: &pmu, done: &processed},
			Name:         replicaName(i),
			IdleTTL:      idle,
			Clock:        clock,
			StoreTimeout: e.callLimit(),
			StoreRetry:   20 * time.Millisecond,
		})
		cancel()
		if err != nil {
			return nil, fmt.Errorf("claimslin: replica %s: %w", replicaName(i), err)
		}
	}
	// tick runs every replica's keepalive pass (a manual clock runs none).
	tick := func() {
		for _, c := range coords {
			ctx, cancel := context.WithTimeout(runCtx, 4*e.callLimit())
			c.Tick(ctx)
			cancel()
		}
	}

	var (
		rmu      sync.Mutex
		routes   []Route
		cov      RoutingCoverage
		progress atomic.Int64
		due      atomic.Int64
		running  atomic.Int32
	)
	due.Store(1 << 62)
	began := time.Now()
	wake, lanesDone := make(chan struct{}, 1), make(chan struct{})
	running.Store(int32(plan.Replicas * plan.Lanes))
	closing := make([]atomic.Bool, plan.Keys)
	// long holds replica i's turn's lease on session k while the manual
	// clock moves on by more than the idle TTL (a long request: its claim
	// must be kept alive meanwhile), for at most longHold. It holds on
	// across Resets and Deletes of the session: impl/replica keeps every
	// leased claim held and touched, evicted records' too.
	long := func(ctx context.Context) bool { return false }
	if clock != nil {
		long = func(ctx context.Context) bool {
			from, limit := clock.Now(), time.Now().Add(longHold)
			for clock.Now()-from <= time.Duration(plan.Params.TTL)*6/5 {
				if time.Now().After(limit) || ctx.Err() != nil {
					return false
				}
				select { // the injector moves the clock on sooner
				case wake <- struct{}{}:
				default:
				}
				time.Sleep(100 * time.Microsecond)
			}
			return true
		}
	}
	var wg sync.WaitGroup
	var faults []string
	wg.Add(1)
	go func() {
		defer wg.Done()
		rng := rand.New(rand.NewPCG(plan.Seed, 0x1e))
		live := func() bool { return running.Load() > 0 && runCtx.Err() == nil }
		for live() {
			due.Store(progress.Load() + int64(2+rng.IntN(plan.Replicas*plan.Lanes*3)))
			select {
			case <-wake:
			case <-lanesDone:
				return
			case <-runCtx.Done():
				return
			}
			if !live() {
				return
			}
			if m, ok := e.(*memEnv); ok {
				if f := injectRouting(runCtx, j, m, injRec, rng, plan, tick); f != "" {
					faults = append(faults, f)
				}
			} else {
				e.inject(runCtx, nil, rng, plan, live)
			}
		}
	}()
	for i, c := range coords {
		for l := 0; l < plan.Lanes; l++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				defer func() {
					if running.Add(-1) == 0 {
						close(lanesDone)
					}
				}()
				rng := rand.New(rand.NewPCG(plan.Seed, uint64(i*16+l)+1))
				var mine []Route
				var lc RoutingCoverage
				for n := 0; (n < plan.Ops || e.owed() && time.Since(began) < Overtime) && runCtx.Err() == nil; n++ {
					if progress.Add(1) >= due.Load() {
						select {
						case wake <- struct{}{}:
						default:
						}
					}
					mine = append(mine, laneTurn(runCtx, j, c, i, rng, plan, closing, func(ctx context.Context, k int) func() bool {
						return func() bool { return long(ctx) }
					}, &lc)...)
				}
				rmu.Lock()
				routes = append(routes, mine...)
				cov.Add(lc)
				rmu.Unlock()
			}()
		}
	}
	wg.Wait()
	if err := runCtx.Err(); err != nil {
		return nil, fmt.Errorf("claimslin: routing run of seed %d did not finish in %v: store calls in flight: %v", plan.Seed, RunLimit, j.InFlight())
	}
	// The end: every replica stops (its goroutines end), and its store
	// session ends (recorded).
	run := &RoutingRun{Plan: plan}
	for i, c := range coords {
		run.Stats = append(run.Stats, c.Stats())
		_ = c.Close()
		coords[i] = nil
	}
	for i, s := range stores {
		_ = j.Wrap(i, s).Shutdown()
		stores[i] = nil
	}
	pmu.Lock()
	run.Processed = append([]Processed(nil), processed...)
	pmu.Unlock()
	run.History = j.History()
	for i := range coords {
		run.Events = append(run.Events, j.Events(i))
	}
	sort.Slice(routes, func(a, b int) bool { return routes[a].Call < routes[b].Call })
	run.Routes = routes
	run.Faults = append(faults, e.faults()...)
	cov.Coverage = count(run.History, run.Events)
	for i, r := range routes {
		end := max(r.Return, r.End)
		for _, o := range routes[i+1:] {
			if o.Call > end {
				break
			}
			if o.Key == r.Key && o.Replica != r.Replica {
				cov.SameKeyOverlaps++
				break
			}
		}
	}
	for _, st := range run.Stats {
		cov.ResetEvictions += int(st.ResetEvictions)
		cov.DeleteEvictions += int(st.DeleteEvictions)
		cov.MemberEvictions += int(st.MemberEvictions)
		cov.MovedEvictions += int(st.MovedEvictions)
		cov.Unclaimed += int(st.UnclaimedPlacements)
		cov.Reconciles += int(st.Reconciles)
		cov.ClosesDeleted += int(st.ClosesDeleted)
		cov.ClosesDeferred += int(st.ClosesDeferred)
		cov.ClosesStale += int(st.ClosesStale)
		cov.QuarantinesWritten += int(st.QuarantinesWritten)
		cov.Touches += int(st.Touches)
		cov.Holds += int(st.Holds)
		cov.Unholds += int(st.Unholds)
		cov.Bumps += int(st.GenerationBumps)
	}
	for _, f := range run.Faults {
		switch f {
		case FaultStopMember:
			cov.MemberStops++
		case FaultDisconnect:
			cov.Disconnects++
		case FaultCompact:
			cov.Compactions++
		case FaultUnavailable:
			cov.Outages++
		case FaultReset:
			cov.Resets++
		}
	}
	run.Coverage = cov
	return run, nil
}

// laneTurn runs one turn of replica i's lane and returns its routes. A
// session's final request is its last: while one is in flight (closing[k])
// no new turn of the session begins on any replica (turns in flight
// finish); once it is done, the key is a new session's.
func laneTurn(ctx context.Context, j *Journal, c *replica.Coordinator, i int, rng *rand.Rand, plan Plan, closing []atomic.Bool,
	long func(context.Context, int) func() bool, cov *RoutingCoverage) []Route {
	ctx, cancel := context.WithTimeout(ctx, TurnLimit)
	defer cancel()
	k := rng.IntN(plan.Keys)
	key := keyName(k)
	final := rng.IntN(8) == 0 && closing[k].CompareAndSwap(false, true)
	if final {
		defer closing[k].Store(false)
	} else if closing[k].Load() {
		time.Sleep(time.Duration(20+rng.IntN(200)) * time.Microsecond)
		return nil
	}
	hold := long(ctx, k)
	call := j.Now()
	t, err := c.Start(ctx, key, nil)
	ret := j.Now()
	cov.Turns++
	if err != nil {
		var qe *replica.QuarantinedError
		switch {
		case errors.As(err, &qe):
			cov.Quarantined++
			if rng.IntN(3) == 0 {
				// The worker tells how the attempt went (accepted, a
				// replica's own quarantine the store has not recorded
				// binds again only under a revision the store confirms).
				accepted := rng.IntN(2) == 0
				if c.Resolve(ctx, key, qe.Attempt, qe.Gen, accepted) == nil {
					cov.Resolves++
				}
			}
		case errors.Is(err, replica.ErrClosing):
			cov.Closing++
		default:
			cov.StartErrors++
		}
		// A client backs off before it sends the session's request again.
		time.Sleep(time.Duration(50+rng.IntN(400)) * time.Microsecond)
		return nil
	}
	var routes []Route
	r := Route{Replica: i, Key: k, Target: fromTarget(t.Target()), Rev: t.Rev(), Call: call, Return: ret, Attempt: !t.Hit()}
	if t.Unclaimed() {
		r.Rev = 0
	}
	pause := func() {
		switch rng.IntN(4) {
		case 0:
			runtime.Gosched()
		case 1:
			time.Sleep(time.Duration(1+rng.IntN(300)) * time.Microsecond)
		}
	}
	pause()
	if t.Hit() {
		cov.Hits++
		r.LeaseFrom = ret
		if rng.IntN(2) == 0 {
			_ = t.Complete(placement.Accepted)
		}
	} else {
		cov.Placing++
		for {
			out := placement.Accepted
			switch x := rng.IntN(100); {
			case x < 8:
				out = placement.DefinitelyNotAccepted
			case x < 13:
				out = placement.Ambiguous
			}
			c0 := j.Now()
			err := t.Complete(out)
			c1 := j.Now()
			if out == placement.Accepted && err == nil {
				r.LeaseFrom = c1
				break
			}
			if out == placement.Ambiguous {
				cov.Ambiguous++
			}
			if !errors.Is(err, replica.ErrRetry) {
				break
			}
			cov.Retries++
			routes = append(routes, r)
			r = Route{Replica: i, Key: k, Target: fromTarget(t.Target()), Rev: t.Rev(), Call: c0, Return: c1, Attempt: true}
			if t.Unclaimed() {
				r.Rev = 0
			}
			pause()
		}
		if r.LeaseFrom > 0 {
			pause()
		}
	}
	if r.LeaseFrom > 0 && rng.IntN(12) == 0 && hold() {
		cov.LongTurns++
	}
	if r.LeaseFrom > 0 {
		r.EndRev = t.Rev()
		if t.Unclaimed() {
			r.EndRev = 0
		}
		r.End = j.Now()
		if final {
			cov.Finals++
			r.Final = true
		}
	}
	t.Done(final)
	if r.Final {
		r.DoneAt = j.Now()
	}
	return append(routes, r)
}

// injectRouting injects one of a memstore routing plan's faults and
// returns its name when the history does not record it ("" otherwise).
func injectRouting(ctx context.Context, j *Journal, m *memEnv, inj claims.Store, rng *rand.Rand, plan Plan, tick func()) string {
	victim := replicaName(rng.IntN(plan.Replicas))
	fault := plan.Faults[rng.IntN(len(plan.Faults))]
	if rng.IntN(2) == 0 {
		fault = FaultClock // the clock moves most often
	}
	sleep := func(lo, spread int) {
		time.Sleep(time.Duration(lo+rng.IntN(spread)) * time.Microsecond)
	}
	switch fault {
	case FaultClock:
		// Every replica's keepalive runs before the clock moves (writes
		// that found the store unreachable are retried, due touches made)
		// and after (touches due at the new time, local expiries given
		// up). A step is at most a sixth of the idle TTL: a claim in use
		// is touched long before it could expire.
		tick()
		d := 1 + rng.Int64N(plan.Params.TTL/6)
		j.do(plan.Replicas, Input{Op: OpAdvance, D: d}, func(*Input) Output {
			if err := m.clock.AdvanceBy(time.Duration(d)); err != nil {
				return Output{Err: ErrOther, Msg: err.Error()}
			}
			m.b.Sweep()
			return Output{}
		})
		tick()
		return ""
	case FaultUnavailable:
		m.b.SetUnavailable(victim, true)
		sleep(200, 1500)
		m.b.SetUnavailable(victim, false)
	case FaultLoseSession:
		if rng.IntN(3) != 0 {
			return ""
		}
		v := index(victim, "r%d")
		in := Input{Op: OpEndSession, Replica: v}
		call := j.Now()
		j.do(plan.Replicas, in, func(*Input) Output {
			m.b.LoseSession(victim)
			return Output{}
		})
		in.Client, in.Op = plan.Replicas, OpDropRegistrations
		j.Add(porcupine.Operation{ClientId: plan.Replicas, Input: in, Output: Output{}, Call: call, Return: j.Now()})
		return ""
	case FaultReset:
		m.b.HoldEvents(victim, true)
		sleep(300, 2000)
		m.b.InjectReset(victim)
		m.b.HoldEvents(victim, false)
	case FaultRestartWorker:
		if rng.IntN(3) != 0 {
			return ""
		}
		w := rng.IntN(plan.Workers)
		cctx, cancel := context.WithTimeout(ctx, CallLimit)
		_, _ = inj.Register(cctx, workerName(w), identName(rng.IntN(2)))
		cancel()
		return ""
	}
	return fault
}

// CheckRouting checks a routing run's observations against the
// guarantees (CheckGuarantees) and its event streams against its store
// history (CheckEvents), and returns what each found broken as text.
func CheckRouting(run *RoutingRun) []string {
	var all []Received
	for _, evs := range run.Events {
		all = append(all, evs...)
	}
	var out []string
	for _, v := range CheckGuarantees(run.History, all, run.Routes, run.Processed) {
		out = append(out, v.String())
	}
	for _, v := range CheckEvents(run.History, run.Events) {
		out = append(out, "event streams: "+v)
	}
	return out
}

// SavedRouting is a routing run written to disk: its store history (as
// the core's histories are saved: re-checkable by Porcupine alone), what
// the replicas observed, and what the checks found. ReadRouting reads it
// and RecheckRouting checks it again, deterministically.
type SavedRouting struct {
	SavedHistory
	Events    [][]Received `json:"events"`
	Routes    []Route      `json:"routes"`
	Processed []Processed  `json:"processed"`
	// Violations: what CheckRouting found (none: the run passed).
	Violations []string `json:"violations,omitempty"`
}

// SaveRouting returns run as a SavedRouting, with the Porcupine result res
// and what CheckRouting found.
func SaveRouting(run *RoutingRun, res porcupine.CheckResult, violations []string) *SavedRouting {
	return &SavedRouting{
		SavedHistory: histfile.Record[Plan, Input, Output](run.Plan, run.History, res, ""),
		Events:       run.Events, Routes: run.Routes, Processed: run.Processed, Violations: violations,
	}
}

// WriteRouting writes s as JSON to path.
func WriteRouting(path string, s *SavedRouting) error {
	b, err := json.MarshalIndent(s, "", " ")
	if err != nil {
		return err
	}
	return os.WriteFile(path, b, 0o644)
}

// ReadRouting reads a routing run written by WriteRouting.
func ReadRouting(path string) (*SavedRouting, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var s SavedRouting
	if err := json.Unmarshal(b, &s); err != nil {
		return nil, fmt.Errorf("claimslin: %s: %w", path, err)
	}
	if !s.Plan.Routing {
		return nil, fmt.Errorf("claimslin: %s: not a routing run", path)
	}
	return &s, nil
}

// RecheckRouting checks a saved routing run again: Porcupine on its store
// history (within timeout) and CheckRouting on its observations. It
// returns what they found; a run that was saved as it was checked gives
// the same answers (the checks are deterministic).
func RecheckRouting(s *SavedRouting, timeout time.Duration) (porcupine.CheckResult, []string) {
	res, _, _ := Check(&s.SavedHistory, timeout)
	run := &RoutingRun{Plan: s.Plan, History: s.Operations(), Events: s.Events, Routes: s.Routes, Processed: s.Processed}
	return res, CheckRouting(run)
}
