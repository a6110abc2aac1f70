package affinitylin

import (
	"context"
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
	"github.com/placementlab/placement/impl/affinity"
	"github.com/placementlab/placement/impl/claims"
	"github.com/placementlab/placement/impl/claims/memstore"
	"github.com/placementlab/placement/impl/placement"
	"github.com/placementlab/placement/internal/testhooks"
	"github.com/placementlab/placement/linearizability/histfile"
)

// Plan is a concurrent run drawn from a seed.
type Plan struct {
	Seed    uint64 `json:"seed"`
	Hard    bool   `json:"hard,omitempty"` // ModeHard (else ModeSoft)
	Workers int    `json:"workers"`
	Keys    int    `json:"keys"`
	Clients int    `json:"clients"`
	// Churn: client 0 changes worker 0's membership in a tight loop (a
	// restart or departure landing inside another request's dispatch),
	// and requests favor worker 0.
	Churn bool `json:"churn,omitempty"`
	Procs int  `json:"procs"`
	Ops   int  `json:"ops"` // actions per client
	// Replica: the layer runs over a replica (Config.Replicas) on an
	// in-memory claims store. Faults: meanwhile the store loses the
	// replies of the replica's writes (each applied, its reply lost; see
	// injectFaults).
	Replica bool `json:"replica,omitempty"`
	Faults  bool `json:"faults,omitempty"`
}

// DrawPlan draws a plan of ops actions per client from seed. Seeds 0 mod 3
// run the layer in hard mode; seeds 1 mod 4 add a churning client.
func DrawPlan(seed uint64, ops int) Plan {
	rng := rand.New(rand.NewPCG(seed, 0x5eed))
	p := Plan{Seed: seed, Hard: seed%3 == 0, Workers: 2 + rng.IntN(2), Keys: 1 + rng.IntN(2),
		Clients: 4 + rng.IntN(3), Procs: 2 + rng.IntN(3), Ops: ops}
	if seed%4 == 1 {
		p.Churn, p.Workers = true, 3
	}
	return p
}

// DrawReplicaPlan is DrawPlan for the layer over a replica: even seeds add
// store faults.
func DrawReplicaPlan(seed uint64, ops int) Plan {
	p := DrawPlan(seed, ops)
	p.Replica, p.Faults = true, seed%2 == 0
	return p
}

// WaitLimit bounds a Start waiting on a session another request places:
// every placing request in a run ends promptly, so a wait this long is a
// lost wake-up (or a request that never ended).
const WaitLimit = 5 * time.Second

// RunLimit bounds a whole run; a run still going after it has a call that
// blocked for good, and fails naming the calls in flight.
const RunLimit = 15 * time.Second

// Run is a recorded run.
type Run struct {
	Plan     Plan
	History  []porcupine.Operation
	Coverage Coverage
	Stuck    int // Starts that waited WaitLimit
}

// Coverage counts what a run exercised.
type Coverage struct {
	Joined, Recovered, Restarted, Fails, Leaves int
	StartBound, StartPlacing, StartQuarantined  int
	PinConflicts, HardQuarantined, Mismatches   int
	Eligibles, IneligibleErrs                   int
	Hits, Placings, Unpinned                    int
	MovesWon, MovesLost                         int
	Binds, StaleAtBirth, Refusals, Ambiguous    int
	FinalCloses, ClosesWhileLeased              int
	Dones                                       int
	MembershipOverlappingBegins, RacyDispatches int
	// Over a replica: Starts that read the claim (not a cached hit),
	// restarts registered in the store first (OpRegister), Leaves
	// deregistered after (OpDeregister), Starts unpinned on a closing
	// claim, and store writes whose reply the faults lost.
	ClaimReads, Registers, Deregisters, ClosingUnpinned, LostReplies int
	Operations                                                       int
}

// Add adds o to c.
func (c *Coverage) Add(o Coverage) {
	c.Joined += o.Joined
	c.Recovered += o.Recovered
	c.Restarted += o.Restarted
	c.Fails += o.Fails
	c.Leaves += o.Leaves
	c.StartBound += o.StartBound
	c.StartPlacing += o.StartPlacing
	c.StartQuarantined += o.StartQuarantined
	c.PinConflicts += o.PinConflicts
	c.HardQuarantined += o.HardQuarantined
	c.Mismatches += o.Mismatches
	c.Eligibles += o.Eligibles
	c.IneligibleErrs += o.IneligibleErrs
	c.Hits += o.Hits
	c.Placings += o.Placings
	c.Unpinned += o.Unpinned
	c.MovesWon += o.MovesWon
	c.MovesLost += o.MovesLost
	c.Binds += o.Binds
	c.StaleAtBirth += o.StaleAtBirth
	c.Refusals += o.Refusals
	c.Ambiguous += o.Ambiguous
	c.FinalCloses += o.FinalCloses
	c.ClosesWhileLeased += o.ClosesWhileLeased
	c.Dones += o.Dones
	c.MembershipOverlappingBegins += o.MembershipOverlappingBegins
	c.RacyDispatches += o.RacyDispatches
	c.ClaimReads += o.ClaimReads
	c.Registers += o.Registers
	c.Deregisters += o.Deregisters
	c.ClosingUnpinned += o.ClosingUnpinned
	c.LostReplies += o.LostReplies
	c.Operations += o.Operations
}

var idents = [2]string{"a", "b"}

func workerName(w int) string { return fmt.Sprintf("w%d", w) }

// recorder is one client's recorder.
type recorder = histfile.Recorder[Input, Output]

// stamp writes the client's number into a recorded call's input.
func stamp(in *Input, client int) { in.Client = client }

// describeCall describes a call in flight.
func describeCall(in Input) string { return Describe(in, Output{}) }

func classify(err error) ErrKind {
	var uo *affinity.UnknownOutcomeError
	switch {
	case err == nil:
		return ErrNone
	case errors.As(err, &uo) && uo.Quarantine != nil:
		return ErrAmbiguous // a placing dispatch's unknown outcome: quarantined
	case errors.As(err, &uo):
		return ErrOutcomeUnknown
	case errors.Is(err, affinity.ErrPinConflict):
		return ErrPinConflict
	case errors.Is(err, affinity.ErrQuarantined):
		return ErrQuarantined
	case errors.Is(err, affinity.ErrBindingMismatch):
		return ErrMismatch
	case errors.Is(err, affinity.ErrNoCandidates):
		return ErrNoCandidates
	case errors.Is(err, affinity.ErrOutcomeUnknown):
		return ErrOutcomeUnknown
	case errors.Is(err, affinity.ErrUnknownWorker):
		return ErrUnknownWorker
	case errors.Is(err, placement.ErrNotAccepted):
		return ErrNotAccepted
	case errors.Is(err, placement.ErrAmbiguous):
		return ErrAmbiguous
	case errors.Is(err, placement.ErrCancelled):
		return ErrCancelled
	}
	var ie *affinity.IneligibleError
	if errors.As(err, &ie) {
		return ErrIneligible
	}
	return ErrOther
}

func errOut(err error) Output {
	o := Output{Err: classify(err), View: View{Bound: -1}}
	if err != nil {
		o.Msg = err.Error()
	}
	return o
}

func workerIndex(name string) int {
	var w int
	if _, err := fmt.Sscanf(name, "w%d", &w); err != nil {
		return -2
	}
	return w
}

func viewOf(t affinity.Turn) View {
	v := View{Bound: -1, Placing: t.Placing(), Cause: int(t.Unpinned())}
	if b, ok := t.Bound(); ok {
		v.Bound = workerIndex(b.Worker)
	}
	return v
}

// Execute runs plan on a fresh layer and records every call.
func Execute(plan Plan) (*Run, error) {
	if plan.Workers > MaxWorkers || plan.Keys > MaxKeys || plan.Clients > MaxClients {
		return nil, fmt.Errorf("plan %+v exceeds the model's bounds", plan)
	}
	mode := affinity.ModeSoft
	if plan.Hard {
		mode = affinity.ModeHard
	}
	clk := placement.NewManualClock(0)
	cfg := affinity.Config{Mode: mode, Clock: clk, MaxEntries: 64, AdmitAllBelow: 1, MaxMoves: 64}
	var backend *memstore.Backend
	var st *lossCounter
	if plan.Replica {
		backend = memstore.NewBackend(memstore.Config{Clock: clk})
		h := backend.Open(replicaName)
		defer func() { _ = h.Shutdown(); _ = backend.Close() }()
		st = &lossCounter{Store: h}
		cfg.Replicas = &affinity.Replicas{Store: st, Name: replicaName, StoreTimeout: 2 * time.Second,
			StoreRetry: time.Millisecond}
	}
	layer, err := affinity.New(cfg)
	if err != nil {
		return nil, err
	}
	defer layer.Close()
	keys := make([]affinity.Key, plan.Keys)
	for k := range keys {
		if keys[k], err = (affinity.Namespace{Model: "m"}).Session(fmt.Sprintf("k%d", k)); err != nil {
			return nil, err
		}
	}
	cands := make([]affinity.Candidate, plan.Workers)
	for w := range cands {
		cands[w] = affinity.Candidate{Target: affinity.WorkerOnly(workerName(w))}
	}
	prev := runtime.GOMAXPROCS(plan.Procs)
	defer runtime.GOMAXPROCS(prev)
	clients := histfile.NewClients[Input, Output](plan.Clients, stamp)
	traceMu.Lock()
	traceBegin, trace = clients.Start(), nil
	traceMu.Unlock()
	// The initial members, joined before the clients start (client 0's
	// first operations).
	setup := clients.Client(0)
	for w := 0; w < plan.Workers; w++ {
		setup.Do(Input{Op: OpJoin, Worker: w}, func() Output {
			kind, err := layer.Join(affinity.Worker{ID: workerName(w), Identity: idents[0]})
			o := errOut(err)
			o.Join = int(kind)
			return o
		})
	}
	runCtx, abort := context.WithCancel(context.Background())
	defer abort()
	if plan.Faults {
		stop := injectFaults(runCtx, backend, plan.Seed)
		defer stop()
	}
	var leases [MaxKeys]atomic.Int32 // requests holding a lease on each key (for coverage)
	var stuck, closesWhileLeased atomic.Int32
	clients.Go(func(r *recorder) {
		rng := rand.New(rand.NewPCG(plan.Seed, uint64(r.ID())+1))
		jitter := func() {
			switch j := rng.IntN(40); {
			case j < 6:
				runtime.Gosched()
			case j == 6:
				time.Sleep(time.Duration(1+rng.IntN(30)) * time.Microsecond)
			}
		}
		membership := func(w int) {
			switch j := rng.IntN(20); {
			case j < 11:
				id := 0
				if rng.IntN(4) == 0 {
					id = 1
				}
				out := r.Do(Input{Op: OpJoin, Worker: w, Ident: id}, func() Output {
					kind, err := layer.Join(affinity.Worker{ID: workerName(w), Identity: idents[id]})
					o := errOut(err)
					o.Join = int(kind)
					return o
				})
				if plan.Replica && out.Join == Restarted {
					// The store's registration fenced the old instance
					// first (see OpRegister).
					secondHalf(r, OpRegister, w)
				}
			case j < 17:
				r.Do(Input{Op: OpFail, Worker: w}, func() Output { return errOut(layer.Fail(workerName(w))) })
			default:
				out := r.Do(Input{Op: OpLeave, Worker: w}, func() Output { return errOut(layer.Leave(workerName(w))) })
				if plan.Replica && out.Err == ErrNone {
					// The store's deregistration follows the publish (see
					// OpDeregister).
					secondHalf(r, OpDeregister, w)
				}
			}
		}
		churn := plan.Churn && r.ID() == 0
		n := plan.Ops
		if churn {
			n *= 2
		}
		for i := 0; i < n && runCtx.Err() == nil; i++ {
			jitter()
			if churn {
				membership(0)
				continue
			}
			if rng.IntN(10) == 0 {
				membership(rng.IntN(plan.Workers))
				continue
			}
			k := rng.IntN(plan.Keys)
			req := affinity.Request{Session: keys[k], Final: rng.IntN(5) == 0}
			in := Input{Op: OpStart, Key: k, Pin: -1, Final: req.Final}
			if rng.IntN(5) == 0 {
				in.Pin = rng.IntN(plan.Workers)
				req.Pin, req.HasPin = affinity.WorkerOnly(workerName(in.Pin)), true
			}
			var turn affinity.Turn
			var gaveUp []bool // the leases the Start took and gave up (testhooks.StartGaveUp)
			var read bool     // the Start read the claim (testhooks.StartRead)
			out := r.Do(in, func() Output {
				ctx, cancel := context.WithTimeout(context.WithValue(context.WithValue(runCtx, gaveUpKey{}, &gaveUp), readKey{}, &read), WaitLimit)
				defer cancel()
				t, err := layer.Start(ctx, req)
				if errors.Is(ctx.Err(), context.DeadlineExceeded) {
					stuck.Add(1)
					abort()
				}
				if err != nil {
					return errOut(err)
				}
				turn = t
				return Output{View: viewOf(t), Read: read}
			})
			// The leases the Start took and gave up meanwhile (see
			// OpStartHit and OpStartMove), as the layer reported them.
			last := r.Last()
			sin := last.Input.(Input)
			sin.Moves = len(gaveUp)
			last.Input = sin
			call, ret := last.Call, last.Return
			for j, inv := range gaveUp {
				for _, op := range []Op{OpStartHit, OpStartMove} {
					r.Add(porcupine.Operation{ClientId: r.ID() + 2*MaxClients,
						Input: Input{Op: op, Client: r.ID(), Key: k, Slot: j, Invalidated: inv}, Output: Output{View: View{Bound: -1}},
						Call: call, Return: ret})
				}
			}
			if turn == (affinity.Turn{}) {
				continue
			}
			holding := out.View.Bound >= 0
			if holding {
				leases[k].Add(1)
			}
			jitter()
			var chosen []affinity.Candidate
			out = r.Do(Input{Op: OpEligible}, func() Output {
				cs, err := turn.Eligible(cands, nil)
				o := errOut(err)
				o.View = viewOf(turn)
				for _, c := range cs {
					o.Cands |= 1 << workerIndex(c.Target.Worker)
				}
				chosen = cs
				return o
			})
			var att affinity.Attempt
			if out.Err == ErrNone {
				jitter()
				t := rng.IntN(plan.Workers)
				switch {
				case in.Pin >= 0 && rng.IntN(6) != 0:
					t = in.Pin
				case plan.Churn && rng.IntN(2) == 0:
					t = 0
				case rng.IntN(2) == 0 && len(chosen) > 0:
					t = workerIndex(chosen[0].Target.Worker)
				}
				before := viewOf(turn)
				out = r.Do(Input{Op: OpDispatch, Worker: t}, func() Output {
					a, err := turn.Dispatch(affinity.WorkerOnly(workerName(t)))
					o := errOut(err)
					o.View = viewOf(turn)
					if a != (affinity.Attempt{}) {
						att = a
						o.Target = workerIndex(a.Target().Worker)
						switch {
						case a.Hit():
							o.Att = AttHit
						case a.ID() != 0:
							o.Att = AttPlacing
						default:
							o.Att = AttUnpinned
						}
					}
					return o
				})
				if !plan.Hard && before.Bound >= 0 && before.Bound != t && (out.Err == ErrNone || out.View.Placing) {
					// The Dispatch moved the binding: record its
					// invalidation as an operation of its own over the
					// same interval (see OpMove).
					last := r.Last()
					r.Add(porcupine.Operation{ClientId: r.ID() + MaxClients,
						Input: Input{Op: OpMove, Client: r.ID()}, Output: Output{View: View{Bound: -1}},
						Call: last.Call, Return: last.Return})
				}
			}
			if att != (affinity.Attempt{}) {
				if rng.IntN(4) == 0 {
					time.Sleep(time.Duration(1+rng.IntN(20)) * time.Microsecond) // let a racing membership change finish
				} else {
					jitter()
				}
				outcome := Accepted
				switch j := rng.IntN(20); {
				case j < 4:
					outcome = NotAccepted
				case j == 4:
					outcome = Ambiguous
				}
				out = r.Do(Input{Op: OpComplete, Outcome: outcome}, func() Output {
					o := errOut(att.Complete(placement.Outcome(outcome + 1)))
					if o.Err == ErrQuarantined {
						o.Err = ErrAmbiguous // a placing dispatch's quarantine: *QuarantinedError
					}
					o.View = viewOf(turn)
					return o
				})
				if !holding && out.View.Bound >= 0 {
					holding = true
					leases[k].Add(1)
				}
			}
			if holding && rng.IntN(3) == 0 {
				time.Sleep(time.Duration(1+rng.IntN(40)) * time.Microsecond) // hold the lease a while
			}
			jitter()
			if req.Final && holding && leases[k].Load() >= 2 {
				closesWhileLeased.Add(1)
			}
			r.Do(Input{Op: OpDone}, func() Output { turn.Done(); return Output{View: View{Bound: -1}} })
			if holding {
				leases[k].Add(-1)
			}
		}
	})
	if blocked, ok := clients.Wait(RunLimit, abort, describeCall); !ok {
		return nil, fmt.Errorf("affinitylin: a run did not finish in %v (seed %d): in flight: %v", RunLimit, plan.Seed, blocked)
	}
	run := &Run{Plan: plan, Stuck: int(stuck.Load()), History: clients.History()}
	run.Coverage.ClosesWhileLeased = int(closesWhileLeased.Load())
	if st != nil {
		run.Coverage.LostReplies = int(st.lost.Load())
	}
	markRacy(run.History)
	run.Coverage.Add(count(run.History))
	return run, nil
}

// secondHalf marks the client's last operation (a Join or a Leave over a
// replica) Registered and records op, its store half, on worker w over the
// same interval.
func secondHalf(r *recorder, op Op, w int) {
	last := r.Last()
	in := last.Input.(Input)
	in.Registered = true
	last.Input = in
	r.Add(porcupine.Operation{ClientId: r.ID() + 3*MaxClients,
		Input: Input{Op: op, Client: r.ID(), Worker: w}, Output: Output{View: View{Bound: -1}},
		Call: last.Call, Return: last.Return})
}

// lossCounter counts the replica's store writes whose reply was lost
// (memstore.ErrReplyLost): the faults' witness.
type lossCounter struct {
	claims.Store
	lost atomic.Int64
}

func (s *lossCounter) note(err error) {
	if errors.Is(err, memstore.ErrReplyLost) {
		s.lost.Add(1)
	}
}

func (s *lossCounter) CreateOrGet(ctx context.Context, key string, propose func() (claims.Target, error)) (claims.Claim, bool, error) {
	c, created, err := s.Store.CreateOrGet(ctx, key, propose)
	s.note(err)
	return c, created, err
}

func (s *lossCounter) Hold(ctx context.Context, key string, rev int64, replica string) error {
	err := s.Store.Hold(ctx, key, rev, replica)
	s.note(err)
	return err
}

func (s *lossCounter) Unhold(ctx context.Context, key, replica string) error {
	err := s.Store.Unhold(ctx, key, replica)
	s.note(err)
	return err
}

func (s *lossCounter) Close(ctx context.Context, key string, rev int64, replica string) (claims.CloseResult, error) {
	r, err := s.Store.Close(ctx, key, rev, replica)
	s.note(err)
	return r, err
}

func (s *lossCounter) Quarantine(ctx context.Context, key string, rev int64, attempt uint64, gen int64) (claims.Claim, error) {
	c, err := s.Store.Quarantine(ctx, key, rev, attempt, gen)
	s.note(err)
	return c, err
}

func (s *lossCounter) Resolve(ctx context.Context, key string, attempt uint64, gen int64, accepted bool) (claims.Claim, bool, error) {
	c, ok, err := s.Store.Resolve(ctx, key, attempt, gen, accepted)
	s.note(err)
	return c, ok, err
}

func (s *lossCounter) Move(ctx context.Context, key string, rev int64, t claims.Target) (claims.Claim, error) {
	c, err := s.Store.Move(ctx, key, rev, t)
	s.note(err)
	return c, err
}

func (s *lossCounter) Touch(ctx context.Context, key string, rev int64) error {
	err := s.Store.Touch(ctx, key, rev)
	s.note(err)
	return err
}

// replicaName is the one router replica's name in a Replica plan.
const replicaName = "r1"

// storeWrites are the store's writes whose replies injectFaults loses.
var storeWrites = []string{"create-or-get", "hold", "unhold", "close", "quarantine", "resolve", "move", "touch"}

// injectFaults loses the reply of one of the replica's store writes every
// few hundred microseconds until ctx ends or the returned stop is called
// (each write is applied, then answered as unavailable, and the replica
// settles its outcome by reading the store). The connection stays up and
// the event stream loses nothing: a cut makes the replica serve from its
// own table, reconciled later, and a Reset evicts its cache under the
// requests in flight (the documented differences of an unreachable store,
// which impl/replica's TestRandomFaults and linearizability/claimslin
// check; over the layer, histories with Resets still show divergences the
// model does not explain yet). stop waits for it and leaves no fault
// pending.
func injectFaults(ctx context.Context, b *memstore.Backend, seed uint64) (stop func()) {
	ctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		rng := rand.New(rand.NewPCG(seed, 0xfa17))
		for ctx.Err() == nil {
			time.Sleep(time.Duration(50+rng.IntN(450)) * time.Microsecond)
			b.LoseReply(replicaName, storeWrites[rng.IntN(len(storeWrites))], 1, false)
		}
	}()
	return func() {
		cancel()
		<-done
		for _, op := range storeWrites {
			b.LoseReply(replicaName, op, 0, false)
		}
	}
}

// markRacy sets Input.Racy on every Dispatch that a membership operation
// on its target overlapped.
func markRacy(h []porcupine.Operation) {
	var mem []porcupine.Operation
	for _, op := range h {
		if in := op.Input.(Input); in.Op <= OpLeave {
			mem = append(mem, op)
		}
	}
	for i, op := range h {
		in := op.Input.(Input)
		if in.Op != OpDispatch {
			continue
		}
		for _, m := range mem {
			if m.Input.(Input).Worker == in.Worker && m.Call <= op.Return && op.Call <= m.Return {
				in.Racy = true
				h[i].Input = in
				break
			}
		}
	}
}

// count computes a history's coverage (all but ClosesWhileLeased, which
// the run counts as it goes).
func count(h []porcupine.Operation) Coverage {
	var c Coverage
	c.Operations = len(h)
	byClient := map[int][]porcupine.Operation{}
	var begins []porcupine.Operation
	for _, op := range h {
		byClient[op.ClientId] = append(byClient[op.ClientId], op)
		if in := op.Input.(Input); in.Op == OpStart || in.Op == OpDispatch {
			begins = append(begins, op)
		}
	}
	sort.Slice(begins, func(i, j int) bool { return begins[i].Call < begins[j].Call })
	for _, ops := range byClient {
		var last Output
		var final bool
		for _, op := range ops {
			in, out := op.Input.(Input), op.Output.(Output)
			switch in.Op {
			case OpJoin:
				switch out.Join {
				case Joined:
					c.Joined++
				case Recovered:
					c.Recovered++
				case Restarted:
					c.Restarted++
				}
			case OpFail:
				if out.Err == ErrNone {
					c.Fails++
				}
			case OpLeave:
				if out.Err == ErrNone {
					c.Leaves++
				}
			case OpRegister:
				c.Registers++
			case OpDeregister:
				c.Deregisters++
			case OpStart:
				final = in.Final
				if out.Read {
					c.ClaimReads++
				}
				if out.View.Cause == CauseClosing {
					c.ClosingUnpinned++
				}
				switch {
				case out.Err == ErrPinConflict:
					c.PinConflicts++
				case out.Err == ErrQuarantined:
					c.HardQuarantined++
				case out.View.Bound >= 0:
					c.StartBound++
				case out.View.Placing:
					c.StartPlacing++
				case out.View.Cause == CauseQuarantined:
					c.StartQuarantined++
				}
			case OpEligible:
				c.Eligibles++
				if out.Err == ErrIneligible {
					c.IneligibleErrs++
				}
			case OpDispatch:
				if in.Racy {
					c.RacyDispatches++
				}
				switch out.Err {
				case ErrMismatch:
					c.Mismatches++
				case ErrIneligible:
					c.IneligibleErrs++
				}
				switch out.Att {
				case AttHit:
					c.Hits++
				case AttPlacing:
					c.Placings++
				case AttUnpinned:
					c.Unpinned++
				}
				if last.View.Bound >= 0 && last.View.Bound != in.Worker && out.Err == ErrNone {
					if out.View.Cause == CauseMoveLost {
						c.MovesLost++
					} else {
						c.MovesWon++
					}
				}
			case OpComplete:
				switch {
				case in.Outcome == NotAccepted:
					c.Refusals++
				case in.Outcome == Ambiguous:
					c.Ambiguous++
				case last.Att == AttPlacing && out.View.Bound >= 0:
					c.Binds++
				case last.Att == AttPlacing:
					c.StaleAtBirth++
				}
			case OpDone:
				c.Dones++
				if final && last.View.Bound >= 0 {
					c.FinalCloses++
				}
			}
			if in.Op != OpDone {
				last = out
			}
		}
	}
	for _, op := range h {
		in := op.Input.(Input)
		if in.Op > OpLeave || op.ClientId == 0 && op.Call < firstBegin(begins) {
			continue
		}
		for _, b := range begins {
			if b.Call > op.Return {
				break
			}
			if b.ClientId != op.ClientId && b.Return >= op.Call {
				c.MembershipOverlappingBegins++
				break
			}
		}
	}
	return c
}

func firstBegin(b []porcupine.Operation) int64 {
	if len(b) == 0 {
		return 0
	}
	return b[0].Call
}

// gaveUpKey is the context key under which a Start's ctx carries the list
// testhooks.StartGaveUp appends to.
type gaveUpKey struct{}

// readKey is the context key under which a Start's ctx carries the flag
// testhooks.StartRead sets.
type readKey struct{}

func init() {
	testhooks.StartGaveUp = func(ctx context.Context, invalidated bool) {
		if l, ok := ctx.Value(gaveUpKey{}).(*[]bool); ok {
			*l = append(*l, invalidated)
		}
	}
	testhooks.StartRead = func(ctx context.Context) {
		if b, ok := ctx.Value(readKey{}).(*bool); ok {
			*b = true
		}
	}
	if os.Getenv("AFFINITYLIN_TRACE") != "" {
		testhooks.CoreEvent = func(kind, key string, attempt, seq uint64) {
			traceMu.Lock()
			trace = append(trace, fmt.Sprintf("%d %s %s attempt=%d seq=%d", time.Since(traceBegin).Nanoseconds(), kind, key, attempt, seq))
			traceMu.Unlock()
		}
	}
}

// The core's events of the last run, with AFFINITYLIN_TRACE set (a
// debugging aid: TraceOfLastRun).
var (
	traceMu    sync.Mutex
	traceBegin time.Time
	trace      []string
)

// TraceOfLastRun returns the core's events of the last run (empty unless
// AFFINITYLIN_TRACE is set), each as "nanoseconds kind key attempt seq".
func TraceOfLastRun() []string {
	traceMu.Lock()
	defer traceMu.Unlock()
	return append([]string(nil), trace...)
}
