package claimslin

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"runtime"
	"sort"
	"sync"
	"sync/atomic"
	"time"

	"github.com/anishathalye/porcupine"
	"github.com/placementlab/placement/impl/claims"
	"github.com/placementlab/placement/impl/claims/memstore"
	"github.com/placementlab/placement/linearizability/histfile"
)

// Backends a plan runs on.
const (
	// BackendMem is impl/claims/memstore on a manual clock, with its fault
	// hooks (unavailability, lost sessions) and claims expiring as the
	// clock moves.
	BackendMem = "mem"
	// BackendEtcd1 and BackendEtcd3 are real etcd (impl/claims/etcdstore
	// on impl/claims/etcdstore/embedded) with one and three members.
	BackendEtcd1 = "etcd1"
	BackendEtcd3 = "etcd3"
)

// Plan is a concurrent run drawn from a seed.
type Plan struct {
	Seed    uint64 `json:"seed"`
	Backend string `json:"backend"`
	// Replicas: the clients, each a replica ("r0", "r1", ...) with its own
	// store handle; the fault injector is client Replicas.
	Replicas int `json:"replicas"`
	Keys     int `json:"keys"`
	Workers  int `json:"workers"`
	Ops      int `json:"ops"` // calls per replica
	Procs    int `json:"procs"`
	// Params: what the model knows of the store (the idle TTL of a
	// manual clock).
	Params Params `json:"params"`
	// Lossy: some calls' responses are lost (the call is made, and the
	// client is told the store was unavailable), so unknown outcomes that
	// did take effect are in the history too.
	Lossy bool `json:"lossy,omitempty"`
	// Faults: the faults the injector draws from (a backend's own).
	Faults []string `json:"faults,omitempty"`
	// Routing: a routing run (ExecuteRoutes): the replicas are
	// impl/replica Coordinators, each running Lanes goroutines of Ops
	// turns, and the history is their store calls.
	Routing bool `json:"routing,omitempty"`
	Lanes   int  `json:"lanes,omitempty"`
}

// The faults.
const (
	FaultUnavailable = "unavailable"  // memstore SetUnavailable for a while
	FaultLoseSession = "lose-session" // memstore LoseSession (recorded: EndSession)
	FaultClock       = "clock"        // the manual clock moves (recorded: Advance)
	FaultStopMember  = "stop-member"  // an etcd member stopped and restarted
	FaultDisconnect  = "disconnect"   // a replica's client cut off through the proxy
	FaultCompact     = "compact"      // etcd compacted under the replicas' live watches
)

// memTTL is the memstore runs' idle TTL on the manual clock.
const memTTL = int64(100 * time.Millisecond)

// DrawPlan draws a plan of ops calls per replica from seed on backend.
// On memstore, seeds 0 mod 3 lose responses too.
func DrawPlan(seed uint64, ops int, backend string) Plan {
	rng := rand.New(rand.NewPCG(seed, 0xc1a1))
	p := Plan{Seed: seed, Backend: backend, Replicas: 3 + rng.IntN(3), Keys: 1 + rng.IntN(3), Workers: 2 + rng.IntN(2),
		Ops: ops, Procs: 2 + rng.IntN(3)}
	switch backend {
	case BackendMem:
		p.Params.TTL = memTTL
		p.Lossy = seed%3 == 0
		p.Faults = []string{FaultUnavailable, FaultLoseSession, FaultClock}
	case BackendEtcd1:
		p.Lossy = seed%2 == 0
		p.Faults = []string{FaultStopMember, FaultDisconnect, FaultCompact}
	case BackendEtcd3:
		p.Faults = []string{FaultStopMember, FaultDisconnect, FaultCompact}
	}
	return p
}

// CallLimit bounds one store call on memstore (which never blocks: a call
// this long is a lock never released); EtcdCallLimit on etcd (a call cut
// off by a fault gives up after it, its outcome unknown).
const (
	CallLimit     = 5 * time.Second
	EtcdCallLimit = 3 * time.Second
)

// RunLimit bounds a whole run: a run still going after it has a call
// that blocked for good, and fails naming the calls in flight.
const RunLimit = 40 * time.Second

// Overtime bounds how long after they began replicas go on past a
// plan's operations while a promised fault is owed (env.owed).
const Overtime = 10 * time.Second

// Run is a recorded run.
type Run struct {
	Plan     Plan
	History  []porcupine.Operation
	Coverage Coverage
	Stuck    int // memstore calls that waited CallLimit
	// Faults: the faults injected that the history does not show (those
	// it shows are its EndSession and Advance operations).
	Faults []string
	// Events: what each replica's event stream delivered, and when.
	Events [][]Received
}

// Received is one event a replica's stream delivered, with the time (as
// the history's) it was received.
type Received struct {
	At    int64        `json:"at"`
	Event claims.Event `json:"event"`
}

// Coverage counts what a run exercised.
type Coverage struct {
	Created, Got, UnknownWorker             int // CreateOrGet: created, got, refused (proposal not registered)
	GetFound, GetNone                       int
	HoldOK, HoldMoved, Unholds              int
	CloseDeleted, CloseDeferred, CloseStale int
	QuarantineOK, QuarantineMoved           int
	ResolveAccepted, ResolveNot, Fenced     int
	TouchOK, TouchMoved                     int
	MoveOK, MoveMoved, MoveNotBound         int // Move: moved, fenced out (ErrClaimMoved), refused (ErrNotBound)
	MoveUnknownWorker                       int // Move refused: the target not registered
	Registers, Deregisters, Members         int
	EndSessions, Advances                   int
	Unknown, UnknownTookEffect              int // unknown outcomes; those the harness knows took effect (lost responses)
	Unreachable                             int // calls memstore refused as unreachable (no effect)
	Resets, Deletes                         int // events delivered
	MemberStops, Disconnects, Compactions   int // etcd faults injected
	Outages                                 int // memstore unreachable spells
	Overlapping                             int // calls overlapping another client's call
	Operations                              int
}

// Add adds o to c.
func (c *Coverage) Add(o Coverage) {
	c.Created += o.Created
	c.Got += o.Got
	c.UnknownWorker += o.UnknownWorker
	c.GetFound += o.GetFound
	c.GetNone += o.GetNone
	c.HoldOK += o.HoldOK
	c.HoldMoved += o.HoldMoved
	c.Unholds += o.Unholds
	c.CloseDeleted += o.CloseDeleted
	c.CloseDeferred += o.CloseDeferred
	c.CloseStale += o.CloseStale
	c.QuarantineOK += o.QuarantineOK
	c.QuarantineMoved += o.QuarantineMoved
	c.ResolveAccepted += o.ResolveAccepted
	c.ResolveNot += o.ResolveNot
	c.Fenced += o.Fenced
	c.TouchOK += o.TouchOK
	c.TouchMoved += o.TouchMoved
	c.MoveOK += o.MoveOK
	c.MoveMoved += o.MoveMoved
	c.MoveNotBound += o.MoveNotBound
	c.MoveUnknownWorker += o.MoveUnknownWorker
	c.Registers += o.Registers
	c.Deregisters += o.Deregisters
	c.Members += o.Members
	c.EndSessions += o.EndSessions
	c.Advances += o.Advances
	c.Unknown += o.Unknown
	c.UnknownTookEffect += o.UnknownTookEffect
	c.Unreachable += o.Unreachable
	c.Resets += o.Resets
	c.MemberStops += o.MemberStops
	c.Disconnects += o.Disconnects
	c.Compactions += o.Compactions
	c.Outages += o.Outages
	c.Deletes += o.Deletes
	c.Overlapping += o.Overlapping
	c.Operations += o.Operations
}

func keyName(k int) string       { return fmt.Sprintf("s%d", k) }
func workerName(w int) string    { return fmt.Sprintf("w%d", w) }
func replicaName(r int) string   { return fmt.Sprintf("r%d", r) }
func identName(i int) string     { return string(rune('a' + i)) }
func workerIndex(s string) int   { return index(s, "w%d") }
func index(s, format string) int { n := -1; _, _ = fmt.Sscanf(s, format, &n); return n }

func toTarget(t Tgt) claims.Target {
	if t.R < 0 {
		return claims.Target{Worker: workerName(int(t.W))}
	}
	return claims.Target{Worker: workerName(int(t.W)), Rank: int(t.R), HasRank: true}
}

func fromTarget(t claims.Target) Tgt {
	r := int8(-1)
	if t.HasRank {
		r = int8(t.Rank)
	}
	return Tgt{W: int8(workerIndex(t.Worker)), R: r}
}

func fromClaim(c claims.Claim) Claim {
	return Claim{Rev: c.Rev, T: fromTarget(c.Target), Gen: c.Gen, St: uint8(c.State), Att: c.Attempt, Born: c.Born}
}

// classify returns err's kind; an unavailable store (or a call that gave
// up waiting for it) leaves the outcome unknown.
func classify(err error) (ErrKind, bool) {
	switch {
	case err == nil:
		return ErrNone, false
	case errors.Is(err, memstore.ErrInjected):
		return ErrUnavailable, false // memstore: an unreachable store changes nothing
	case errors.Is(err, claims.ErrUnavailable), errors.Is(err, context.DeadlineExceeded), errors.Is(err, context.Canceled):
		return ErrUnavailable, true
	case errors.Is(err, claims.ErrClosed):
		return ErrStoreClosed, false
	case errors.Is(err, claims.ErrClaimMoved):
		return ErrMoved, false
	case errors.Is(err, claims.ErrFenced):
		return ErrFenced, false
	case errors.Is(err, claims.ErrUnknownWorker):
		return ErrUnknownWorker, false
	case errors.Is(err, claims.ErrNotBound):
		return ErrNotBound, false
	}
	return ErrOther, false
}

// errOut is the output of a call that returned err.
func errOut(err error) Output {
	k, unknown := classify(err)
	o := Output{Err: k, Unknown: unknown}
	if err != nil {
		o.Msg = err.Error()
	}
	var fe *claims.FencedError
	if errors.As(err, &fe) && fe.Found {
		o.Has, o.Claim = true, fromClaim(fe.Current)
	}
	var me *claims.MoveError
	if errors.As(err, &me) && me.Found {
		o.Has, o.Claim = true, fromClaim(me.Current)
	}
	return o
}

// recorder is one client's recorder.
type recorder = histfile.Recorder[Input, Output]

// stamp writes the client's number into a recorded call's input.
func stamp(in *Input, client int) { in.Client = client }

// describeCall describes a call in flight.
func describeCall(in Input) string { return Describe(in, Output{}) }

// env is a backend a run's replicas share.
type env interface {
	// open returns a new handle (a new store session) for replica.
	open(ctx context.Context, replica string) (claims.Store, error)
	// callLimit bounds one call.
	callLimit() time.Duration
	// inject injects one of the plan's faults (drawn with rng) on r, the
	// injector's recorder, and returns when it is over.
	inject(ctx context.Context, r *recorder, rng *rand.Rand, plan Plan, live func() bool)
	// faults returns the faults inject injected that the history does not
	// record, in order.
	faults() []string
	// owed reports whether a fault the plan promises (one inject injects
	// once per run) has not been injected yet, or is still under way:
	// the replicas go on past the plan's operations until it is over
	// (for at most Overtime), so that every run has them all under live
	// traffic.
	owed() bool
	// close releases the backend.
	close()
}

// client is one replica's view: its store handle and what it learned.
type client struct {
	id    int
	name  string
	store claims.Store
	rng   *rand.Rand
	// seen: the last claim of each key it saw; old: earlier revisions
	// (to be fenced out with).
	seen map[int]claims.Claim
	old  map[int][]int64
	// quar: the last quarantine it saw of each key.
	quar map[int]claims.Claim
	next uint64 // its next attempt id
}

func (c *client) learn(k int, cl claims.Claim) {
	if prev, ok := c.seen[k]; ok && prev.Rev != cl.Rev {
		c.old[k] = append(c.old[k], prev.Rev)
		if len(c.old[k]) > 6 {
			c.old[k] = c.old[k][1:]
		}
	}
	c.seen[k] = cl
	if cl.State == claims.Quarantined {
		c.quar[k] = cl
	}
}

func (c *client) forget(k int) {
	if prev, ok := c.seen[k]; ok {
		c.old[k] = append(c.old[k], prev.Rev)
		delete(c.seen, k)
	}
}

// rev draws the revision a fenced call on k uses: mostly the last seen,
// sometimes an older one (to be fenced out).
func (c *client) rev(k int) int64 {
	cur, ok := c.seen[k]
	switch old := c.old[k]; {
	case ok && c.rng.IntN(5) != 0:
		return cur.Rev
	case len(old) > 0:
		return old[c.rng.IntN(len(old))]
	case ok:
		return cur.Rev
	}
	return 1 + c.rng.Int64N(50)
}

// Execute runs plan on a fresh backend and records every call.
func Execute(plan Plan) (*Run, error) { return execute(plan, nil) }

// execute is Execute with every store handle passed through wrap (nil:
// none), for the tests' broken stores.
func execute(plan Plan, wrap func(claims.Store) claims.Store) (*Run, error) {
	if plan.Replicas > MaxReplicas || plan.Replicas < 1 || plan.Keys > MaxKeys || plan.Workers > MaxWorkers {
		return nil, fmt.Errorf("plan %+v exceeds the model's bounds", plan)
	}
	e, err := newEnv(plan)
	if err != nil {
		return nil, err
	}
	defer e.close()
	if wrap != nil {
		e = wrapped{env: e, wrap: wrap}
	}
	prev := runtime.GOMAXPROCS(plan.Procs)
	defer runtime.GOMAXPROCS(prev)

	runCtx, abort := context.WithCancel(context.Background())
	defer abort()
	clients := histfile.NewClients[Input, Output](plan.Replicas+1, stamp)
	cs := make([]*client, plan.Replicas)
	for i := range cs {
		s, err := e.open(runCtx, replicaName(i))
		if err != nil {
			return nil, err
		}
		cs[i] = &client{id: i, name: replicaName(i), store: s, rng: rand.New(rand.NewPCG(plan.Seed, uint64(i)+1)),
			seen: map[int]claims.Claim{}, old: map[int][]int64{}, quar: map[int]claims.Claim{}}
	}
	defer func() {
		for _, c := range cs {
			_ = c.store.Shutdown()
		}
	}()
	// Replica ids (not checked by the model): unique across replicas.
	ids := map[uint64]int{}
	for _, c := range cs {
		ctx, cancel := context.WithTimeout(runCtx, 2*e.callLimit())
		id, err := c.store.ReplicaID(ctx, c.name)
		cancel()
		if err != nil {
			return nil, fmt.Errorf("replica id of %s: %w", c.name, err)
		}
		if o, dup := ids[id]; dup {
			return nil, fmt.Errorf("replicas r%d and %s got the same replica id %d", o, c.name, id)
		}
		ids[id], c.next = c.id, claims.FirstAttempt(id)+1
	}
	// Every replica watches the store's events for the run.
	events := make([][]Received, plan.Replicas)
	var watchers sync.WaitGroup
	watchCtx, stopWatch := context.WithCancel(runCtx)
	defer stopWatch()
	start := clients.Start()
	for i, c := range cs {
		ch, err := c.store.Events(watchCtx)
		if err != nil {
			return nil, fmt.Errorf("events of %s: %w", c.name, err)
		}
		watchers.Add(1)
		go func() {
			defer watchers.Done()
			for ev := range ch {
				events[i] = append(events[i], Received{At: time.Since(start).Nanoseconds(), Event: ev})
			}
		}()
	}
	// Setup: r0 registers every worker.
	for w := 0; w < plan.Workers; w++ {
		c := cs[0]
		clients.Client(0).Do(Input{Op: OpRegister, Worker: w}, func() Output { return c.register(runCtx, e, w, 0) })
	}

	var stuck atomic.Int32
	var running atomic.Int32
	var progress atomic.Int64 // calls the replicas began
	var due atomic.Int64      // the injector's next fault is due at this progress
	due.Store(1 << 62)
	began := time.Now()
	wake, replicasDone := make(chan struct{}, 1), make(chan struct{})
	running.Store(int32(plan.Replicas))
	clients.Go(func(r *recorder) {
		rng := rand.New(rand.NewPCG(plan.Seed, uint64(r.ID())+100))
		if r.ID() == plan.Replicas {
			// The injector paces itself on the replicas' progress: a
			// fault every few dozen calls, whatever a call costs.
			live := func() bool { return running.Load() > 0 && runCtx.Err() == nil }
			for live() {
				due.Store(progress.Load() + int64(3+rng.IntN(plan.Replicas*5)))
				select {
				case <-wake:
				case <-replicasDone:
					return
				case <-runCtx.Done():
					return
				}
				if live() {
					e.inject(runCtx, r, rng, plan, live)
				}
			}
			return
		}
		defer func() {
			if running.Add(-1) == 0 {
				close(replicasDone)
			}
		}()
		c := cs[r.ID()]
		for i := 0; (i < plan.Ops || e.owed() && time.Since(began) < Overtime) && runCtx.Err() == nil; i++ {
			if progress.Add(1) >= due.Load() {
				select {
				case wake <- struct{}{}:
				default:
				}
			}
			if c.step(runCtx, e, r, plan) {
				stuck.Add(1)
				if plan.Backend == BackendMem {
					abort()
				}
			}
		}
	})
	if blocked, ok := clients.Wait(RunLimit, abort, describeCall); !ok {
		return nil, fmt.Errorf("claimslin: a run did not finish in %v (seed %d): in flight: %v", RunLimit, plan.Seed, blocked)
	}
	stopWatch()
	watchers.Wait()
	run := &Run{Plan: plan, History: clients.History(), Events: events, Faults: e.faults()}
	if plan.Backend == BackendMem {
		run.Stuck = int(stuck.Load())
	}
	// A call the store reported unavailable may take effect until the end
	// (an etcd request the client gave up on may still commit); one whose
	// response the harness lost had taken effect, or not, when it
	// returned.
	end := int64(0)
	for _, op := range run.History {
		end = max(end, op.Return)
	}
	for i := range run.History {
		if out := run.History[i].Output.(Output); out.Unknown && out.Msg != lostOut.Msg {
			run.History[i].Return = end + 1
		}
	}
	run.Coverage = count(run.History, events)
	for _, f := range run.Faults {
		switch f {
		case FaultStopMember:
			run.Coverage.MemberStops++
		case FaultDisconnect:
			run.Coverage.Disconnects++
		case FaultCompact:
			run.Coverage.Compactions++
		case FaultUnavailable:
			run.Coverage.Outages++
		}
	}
	return run, nil
}

// lost reports whether this call's response is to be lost (a lossy plan).
func (c *client) lost(plan Plan) bool { return plan.Lossy && c.rng.IntN(30) == 0 }

// lostOut is the output of a call whose response was lost.
var lostOut = Output{Err: ErrUnavailable, Unknown: true, Msg: "response lost (injected by the harness after the call)"}

// call runs f with the call deadline and reports whether it waited it out.
func call(ctx context.Context, e env, f func(ctx context.Context) Output) (Output, bool) {
	ctx, cancel := context.WithTimeout(ctx, e.callLimit())
	defer cancel()
	out := f(ctx)
	return out, ctx.Err() == context.DeadlineExceeded
}

func (c *client) register(ctx context.Context, e env, w, ident int) Output {
	out, _ := call(ctx, e, func(ctx context.Context) Output {
		m, err := c.store.Register(ctx, workerName(w), identName(ident))
		o := errOut(err)
		o.Gen = m.Gen
		return o
	})
	return out
}

// step makes one random call; it returns true when the call waited out
// its deadline.
func (c *client) step(ctx context.Context, e env, r *recorder, plan Plan) bool {
	rng := c.rng
	switch j := rng.IntN(30); {
	case j < 2:
		time.Sleep(time.Duration(1+rng.IntN(200)) * time.Microsecond)
		return false
	case j < 3:
		runtime.Gosched()
		return false
	}
	k := rng.IntN(plan.Keys)
	key := keyName(k)
	lose := c.lost(plan)
	var timedOut bool
	do := func(in Input, f func(ctx context.Context) Output) Output {
		return r.Do(in, func() Output {
			out, to := call(ctx, e, f)
			timedOut = timedOut || to
			if lose && !out.Unknown {
				return lostOut
			}
			return out
		})
	}
	learned := func(out Output, cl claims.Claim) {
		if !out.Unknown && out.Err == ErrNone && out.Has {
			c.learn(k, cl)
		}
	}
	switch op := rng.IntN(100); {
	case op < 16:
		t := Tgt{W: int8(rng.IntN(plan.Workers)), R: int8(rng.IntN(3) - 1)}
		if rng.IntN(12) == 0 {
			t.W = int8(min(plan.Workers, MaxWorkers-1)) // maybe never registered
		}
		var cl claims.Claim
		out := do(Input{Op: OpCreateOrGet, Key: k, Target: t}, func(ctx context.Context) Output {
			got, created, err := c.store.CreateOrGet(ctx, key, func() (claims.Target, error) { return toTarget(t), nil })
			o := errOut(err)
			if err == nil {
				o.Has, o.Claim, o.Created, cl = true, fromClaim(got), created, got
			}
			return o
		})
		learned(out, cl)
	case op < 24:
		// A move, mostly from the revision last seen, to any worker
		// (sometimes one never registered).
		rev := c.rev(k)
		t := Tgt{W: int8(rng.IntN(plan.Workers)), R: int8(rng.IntN(3) - 1)}
		if rng.IntN(12) == 0 {
			t.W = int8(min(plan.Workers, MaxWorkers-1))
		}
		var cl claims.Claim
		out := do(Input{Op: OpMove, Key: k, Rev: rev, Target: t}, func(ctx context.Context) Output {
			got, err := c.store.Move(ctx, key, rev, toTarget(t))
			o := errOut(err)
			if err == nil {
				o.Has, o.Claim, cl = true, fromClaim(got), got
			}
			return o
		})
		learned(out, cl)
		if !out.Unknown && (out.Err == ErrMoved || out.Err == ErrNotBound) && out.Has {
			c.learn(k, claimOf(key, out.Claim)) // the *MoveError's current claim
		}
	case op < 28:
		var cl claims.Claim
		out := do(Input{Op: OpGet, Key: k}, func(ctx context.Context) Output {
			got, ok, err := c.store.Get(ctx, key)
			o := errOut(err)
			if err == nil && ok {
				o.Has, o.Claim, cl = true, fromClaim(got), got
			}
			return o
		})
		learned(out, cl)
		if !out.Unknown && out.Err == ErrNone && !out.Has {
			c.forget(k)
		}
	case op < 42:
		rev := c.rev(k)
		do(Input{Op: OpHold, Key: k, Rev: rev}, func(ctx context.Context) Output {
			return errOut(c.store.Hold(ctx, key, rev, c.name))
		})
	case op < 52:
		do(Input{Op: OpUnhold, Key: k}, func(ctx context.Context) Output {
			return errOut(c.store.Unhold(ctx, key, c.name))
		})
	case op < 62:
		rev := c.rev(k)
		out := do(Input{Op: OpClose, Key: k, Rev: rev}, func(ctx context.Context) Output {
			res, err := c.store.Close(ctx, key, rev, c.name)
			o := errOut(err)
			o.Close = int(res)
			return o
		})
		if out.Close == CloseDeleted {
			c.forget(k)
		}
	case op < 71:
		rev := c.rev(k)
		gen := c.seen[k].Gen
		if gen == 0 || rng.IntN(10) == 0 {
			gen = c.seen[k].Gen + 1
		}
		att := c.next
		c.next++
		var cl claims.Claim
		out := do(Input{Op: OpQuarantine, Key: k, Rev: rev, Attempt: att, Gen: gen}, func(ctx context.Context) Output {
			got, err := c.store.Quarantine(ctx, key, rev, att, gen)
			o := errOut(err)
			if err == nil {
				o.Has, o.Claim, cl = true, fromClaim(got), got
			}
			return o
		})
		learned(out, cl)
	case op < 80:
		q, ok := c.quar[k]
		if cur, seen := c.seen[k]; seen && cur.State == claims.Quarantined {
			q, ok = cur, true // the quarantine the replica last read: most likely current
		}
		if !ok || rng.IntN(8) == 0 {
			q = claims.Claim{Attempt: c.next + 1000, Gen: c.seen[k].Gen}
			if q.Gen == 0 {
				q.Gen = 1
			}
		}
		accepted := rng.IntN(2) == 0
		var cl claims.Claim
		out := do(Input{Op: OpResolve, Key: k, Attempt: q.Attempt, Gen: q.Gen, Accepted: accepted}, func(ctx context.Context) Output {
			got, ok, err := c.store.Resolve(ctx, key, q.Attempt, q.Gen, accepted)
			o := errOut(err)
			if err == nil && ok {
				o.Has, o.Claim, cl = true, fromClaim(got), got
			}
			return o
		})
		learned(out, cl)
		if !out.Unknown && out.Err == ErrFenced && out.Has {
			c.learn(k, claimOf(key, out.Claim))
		}
		if !out.Unknown && out.Err == ErrNone && !accepted {
			c.forget(k)
		}
	case op < 88:
		rev := c.rev(k)
		do(Input{Op: OpTouch, Key: k, Rev: rev}, func(ctx context.Context) Output {
			return errOut(c.store.Touch(ctx, key, rev))
		})
	case op < 92:
		w, ident := rng.IntN(plan.Workers), rng.IntN(2)
		r.Do(Input{Op: OpRegister, Worker: w, Ident: ident}, func() Output {
			if lose {
				c.register(ctx, e, w, ident)
				return lostOut
			}
			return c.register(ctx, e, w, ident)
		})
	case op < 94:
		w := rng.IntN(plan.Workers)
		do(Input{Op: OpDeregister, Worker: w}, func(ctx context.Context) Output {
			return errOut(c.store.Deregister(ctx, workerName(w)))
		})
	case op < 99:
		do(Input{Op: OpMembers}, func(ctx context.Context) Output {
			ms, rev, err := c.store.Members(ctx)
			return membersOut(ms, rev, err)
		})
	default:
		// A restart: the replica's store session ends and a new one begins.
		endSession(r, c.id, func() Output {
			out := sessionOut(c.store.Shutdown())
			s, err := e.open(ctx, c.name)
			if err != nil {
				return Output{Err: ErrOther, Msg: "opening the store again: " + err.Error()}
			}
			c.store = s
			return out
		})
	}
	return timedOut
}

// endSession records f, which ends replica's store session, as the two
// operations of a session's end (OpEndSession, OpDropRegistrations) over
// its interval.
func endSession(r *recorder, replica int, f func() Output) {
	r.Do(Input{Op: OpEndSession, Replica: replica}, f)
	op := *r.Last()
	in := op.Input.(Input)
	in.Op = OpDropRegistrations
	op.Input = in
	r.Add(op)
}

// sessionOut is the output of a session's end that returned err: one that
// could not release everything (the store unreachable) may complete late
// (the session lease expires).
func sessionOut(err error) Output {
	if err == nil {
		return Output{}
	}
	return Output{Err: ErrUnavailable, Unknown: true, Msg: err.Error()}
}

func claimOf(key string, c Claim) claims.Claim {
	t := claims.Target{Worker: workerName(int(c.T.W)), Rank: int(c.T.R), HasRank: c.T.R >= 0}
	return claims.Claim{Key: key, Rev: c.Rev, Born: c.Born, Target: t, Gen: c.Gen, State: claims.State(c.St), Attempt: c.Att}
}

// count computes a run's coverage.
func count(h []porcupine.Operation, events [][]Received) Coverage {
	var c Coverage
	c.Operations = len(h)
	sorted := append([]porcupine.Operation(nil), h...)
	sort.Slice(sorted, func(i, j int) bool { return sorted[i].Call < sorted[j].Call })
	for _, op := range sorted {
		in, out := op.Input.(Input), op.Output.(Output)
		if out.Unknown {
			c.Unknown++
			if out.Msg == lostOut.Msg {
				c.UnknownTookEffect++
			}
			continue
		}
		if out.Err == ErrUnavailable {
			c.Unreachable++
			continue
		}
		switch in.Op {
		case OpCreateOrGet:
			switch {
			case out.Created:
				c.Created++
			case out.Err == ErrUnknownWorker:
				c.UnknownWorker++
			case out.Err == ErrNone:
				c.Got++
			}
		case OpGet:
			if out.Has {
				c.GetFound++
			} else {
				c.GetNone++
			}
		case OpHold:
			if out.Err == ErrNone {
				c.HoldOK++
			} else {
				c.HoldMoved++
			}
		case OpUnhold:
			c.Unholds++
		case OpClose:
			switch out.Close {
			case CloseDeleted:
				c.CloseDeleted++
			case CloseDeferred:
				c.CloseDeferred++
			case CloseStale:
				c.CloseStale++
			}
		case OpQuarantine:
			if out.Err == ErrNone {
				c.QuarantineOK++
			} else {
				c.QuarantineMoved++
			}
		case OpResolve:
			switch {
			case out.Err == ErrFenced:
				c.Fenced++
			case in.Accepted:
				c.ResolveAccepted++
			default:
				c.ResolveNot++
			}
		case OpTouch:
			if out.Err == ErrNone {
				c.TouchOK++
			} else {
				c.TouchMoved++
			}
		case OpMove:
			switch out.Err {
			case ErrNone:
				c.MoveOK++
			case ErrMoved:
				c.MoveMoved++
			case ErrNotBound:
				c.MoveNotBound++
			case ErrUnknownWorker:
				c.MoveUnknownWorker++
			}
		case OpRegister:
			c.Registers++
		case OpDeregister:
			c.Deregisters++
		case OpMembers:
			c.Members++
		case OpEndSession:
			c.EndSessions++
		case OpAdvance:
			c.Advances++
		}
	}
	for _, evs := range events {
		for _, ev := range evs {
			switch ev.Event.Kind {
			case claims.Reset:
				c.Resets++
			case claims.Delete:
				c.Deletes++
			}
		}
	}
	for i, op := range sorted {
		for j := i + 1; j < len(sorted) && sorted[j].Call <= op.Return; j++ {
			if sorted[j].ClientId != op.ClientId {
				c.Overlapping++
				break
			}
		}
	}
	return c
}

// wrapped is an env whose handles are wrapped.
type wrapped struct {
	env
	wrap func(claims.Store) claims.Store
}

func (w wrapped) open(ctx context.Context, replica string) (claims.Store, error) {
	s, err := w.env.open(ctx, replica)
	if err != nil {
		return nil, err
	}
	return w.wrap(s), nil
}

// newEnv starts the plan's backend.
func newEnv(plan Plan) (env, error) {
	switch plan.Backend {
	case BackendMem:
		return newMemEnv(plan), nil
	case BackendEtcd1, BackendEtcd3:
		return newEtcdEnv(plan)
	}
	return nil, fmt.Errorf("claimslin: backend %q is not available", plan.Backend)
}
