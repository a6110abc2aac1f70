package queuelin

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"runtime"
	"sort"
	"sync/atomic"
	"time"

	"github.com/anishathalye/porcupine"
	"github.com/placementlab/placement/impl/affinity"
	"github.com/placementlab/placement/impl/placement"
	"github.com/placementlab/placement/impl/policyqueue"
	"github.com/placementlab/placement/linearizability/histfile"
)

// Plan is a concurrent run drawn from a seed.
type Plan struct {
	Seed    uint64 `json:"seed"`
	Workers int    `json:"workers"`
	// Clients: client 0 is the operator (capacity, eligibility, rechecks,
	// cancels of other clients' tickets); the others are requests.
	Clients int    `json:"clients"`
	Procs   int    `json:"procs"`
	Ops     int    `json:"ops"` // actions per client
	Limits  Limits `json:"limits"`
	// Close: the operator closes the queue in the second half of its run
	// (and stops), while the requests go on.
	Close bool `json:"close,omitempty"`
}

// DrawPlan draws a plan of ops actions per client from seed. Seeds 3 mod
// 4 close the queue.
func DrawPlan(seed uint64, ops int) Plan {
	rng := rand.New(rand.NewPCG(seed, 0x9eee))
	p := Plan{Seed: seed, Workers: 2 + rng.IntN(2), Clients: 4 + rng.IntN(3), Procs: 2 + rng.IntN(3), Ops: ops,
		Limits: Limits{MaxQueued: 3 + rng.IntN(4)}}
	if rng.IntN(2) == 0 {
		p.Limits.MaxPerLane = 1 + rng.IntN(2)
	}
	p.Close = seed%4 == 3
	return p
}

// WaitLimit bounds a Wait: every slot in a run is released promptly, and
// the operator ends by giving every worker capacity, so a Wait this long
// is a lost wake-up or a leaked slot.
const WaitLimit = 5 * time.Second

// RunLimit bounds a whole run.
const RunLimit = 20 * time.Second

// Run is a recorded run.
type Run struct {
	Plan     Plan
	History  []porcupine.Operation
	Coverage Coverage
	Stuck    int // Waits that reached WaitLimit
}

// Coverage counts what a run exercised.
type Coverage struct {
	Enqueues, AdmittedAtOnce, Full              int
	Waits, WaitsAdmitted, WaitsCancelled        int
	Releases, SecondReleases                    int
	CancelWaiting, CancelAdmitted, CancelNone   int
	ReleasesAdmitting, CapacityAdmitting        int
	EligibleChanges, Rechecks                   int
	ExactAdmitted, RankedAdmitted, SharedLaneAd int
	OtherCandidate                              int // shared admitted to a candidate after its first
	Closes, WaitsClosed, RefusedClosed          int
	Overlapping                                 int // calls overlapping another client's call
	Operations                                  int
}

// Add adds o to c.
func (c *Coverage) Add(o Coverage) {
	c.Enqueues += o.Enqueues
	c.AdmittedAtOnce += o.AdmittedAtOnce
	c.Full += o.Full
	c.Waits += o.Waits
	c.WaitsAdmitted += o.WaitsAdmitted
	c.WaitsCancelled += o.WaitsCancelled
	c.Releases += o.Releases
	c.SecondReleases += o.SecondReleases
	c.CancelWaiting += o.CancelWaiting
	c.CancelAdmitted += o.CancelAdmitted
	c.CancelNone += o.CancelNone
	c.ReleasesAdmitting += o.ReleasesAdmitting
	c.CapacityAdmitting += o.CapacityAdmitting
	c.EligibleChanges += o.EligibleChanges
	c.Rechecks += o.Rechecks
	c.ExactAdmitted += o.ExactAdmitted
	c.RankedAdmitted += o.RankedAdmitted
	c.SharedLaneAd += o.SharedLaneAd
	c.OtherCandidate += o.OtherCandidate
	c.Closes += o.Closes
	c.WaitsClosed += o.WaitsClosed
	c.RefusedClosed += o.RefusedClosed
	c.Overlapping += o.Overlapping
	c.Operations += o.Operations
}

func workerName(w int) string { return fmt.Sprintf("w%d", w) }

func toTarget(t Tgt) affinity.Target {
	if t.R < 0 {
		return affinity.WorkerOnly(workerName(int(t.W)))
	}
	return affinity.Ranked(workerName(int(t.W)), int(t.R))
}

func fromTarget(t affinity.Target) Tgt {
	var w int
	if _, err := fmt.Sscanf(t.Worker, "w%d", &w); err != nil {
		return Tgt{W: -1, R: -1}
	}
	r := int8(-1)
	if t.HasRank {
		r = int8(t.Rank)
	}
	return Tgt{W: int8(w), R: r}
}

func adms(s []*policyqueue.Slot) []Adm {
	var out []Adm
	for _, x := range s {
		out = append(out, Adm{Ticket: int(x.Ticket()), Target: fromTarget(x.Target())})
	}
	return out
}

func classify(err error) ErrKind {
	switch {
	case err == nil:
		return ErrNone
	case errors.Is(err, policyqueue.ErrQueueFull):
		return ErrFull
	case errors.Is(err, policyqueue.ErrCancelled):
		return ErrCancelled
	case errors.Is(err, policyqueue.ErrUnknownTicket):
		return ErrUnknown
	case errors.Is(err, policyqueue.ErrClosed):
		return ErrClosed
	}
	return ErrOther
}

// recorder is one client's recorder.
type recorder = histfile.Recorder[Input, Output]

// stamp writes the client's number into a recorded call's input.
func stamp(in *Input, client int) { in.Client = client }

// describeCall describes a call in flight.
func describeCall(in Input) string { return Describe(in, Output{}) }

// drawItem draws an Enqueue's item: exact on a worker (any rank, or rank
// 0 or 1), or shared with up to MaxCands candidates (none: any worker) and
// sometimes an Allow mask that accepts at least one of them.
func drawItem(rng *rand.Rand, workers int) Input {
	in := Input{Op: OpEnqueue}
	tgt := func() Tgt { return Tgt{W: int8(rng.IntN(workers)), R: int8(rng.IntN(MaxRanks+1) - 1)} }
	if rng.IntN(5) < 2 {
		in.Exact, in.Target = true, tgt()
		return in
	}
	for n := rng.IntN(MaxCands + 1); len(in.Cands) < n; {
		in.Cands = append(in.Cands, tgt())
	}
	if rng.IntN(3) == 0 {
		in.Allow = uint8(rng.IntN(1 << workers))
		must := rng.IntN(workers)
		if len(in.Cands) > 0 {
			must = int(in.Cands[rng.IntN(len(in.Cands))].W)
		}
		in.Allow |= 1 << must
	}
	return in
}

func itemOf(in Input) policyqueue.Item {
	if in.Exact {
		return policyqueue.Exact(toTarget(in.Target))
	}
	it := policyqueue.Item{Kind: policyqueue.LaneShared}
	for _, c := range in.Cands {
		it.Candidates = append(it.Candidates, toTarget(c))
	}
	if mask := in.Allow; mask != 0 {
		it.Allow = func(t affinity.Target) bool { return mask&(1<<fromTarget(t).W) != 0 }
	}
	return it
}

// Execute runs plan on a fresh queue and records every call.
func Execute(plan Plan) (*Run, error) {
	if plan.Workers > MaxWorkers || plan.Clients > MaxClients || plan.Clients < 2 {
		return nil, fmt.Errorf("plan %+v exceeds the model's bounds", plan)
	}
	q, err := policyqueue.New(policyqueue.Config{MaxQueued: plan.Limits.MaxQueued, MaxPerLane: plan.Limits.MaxPerLane,
		Clock: placement.NewManualClock(0)})
	if err != nil {
		return nil, err
	}
	defer q.Close()
	prev := runtime.GOMAXPROCS(plan.Procs)
	defer runtime.GOMAXPROCS(prev)
	clients := histfile.NewClients[Input, Output](plan.Clients, stamp)
	setup := clients.Client(0)
	setCap := func(r *recorder, w, n int) {
		r.Do(Input{Op: OpSetCapacity, Worker: w, N: n}, func() Output {
			adm, err := q.SetCapacity(workerName(w), n)
			return Output{Err: classify(err), Admitted: adms(adm)}
		})
	}
	setElig := func(r *recorder, w int, ok bool) {
		r.Do(Input{Op: OpSetEligible, Worker: w, Ok: ok}, func() Output {
			adm, err := q.SetEligible(workerName(w), ok)
			return Output{Err: classify(err), Admitted: adms(adm)}
		})
	}
	for w := 0; w < plan.Workers; w++ {
		setCap(setup, w, 1+w%2)
	}
	runCtx, abort := context.WithCancel(context.Background())
	defer abort()
	var stuck atomic.Int32
	var recent [16]atomic.Int64 // tickets lately issued, for the operator's cancels
	var issued atomic.Int64
	clients.Go(func(r *recorder) {
		rng := rand.New(rand.NewPCG(plan.Seed, uint64(r.ID())+1))
		jitter := func() {
			switch j := rng.IntN(30); {
			case j < 6:
				runtime.Gosched()
			case j == 6:
				time.Sleep(time.Duration(1+rng.IntN(30)) * time.Microsecond)
			}
		}
		if r.ID() == 0 {
			operate(r, q, rng, plan, jitter, setCap, setElig, &recent, runCtx)
			return
		}
		for i := 0; i < plan.Ops && runCtx.Err() == nil; i++ {
			jitter()
			in := drawItem(rng, plan.Workers)
			var mine *policyqueue.Slot
			out := r.Do(in, func() Output {
				tk, adm, err := q.Enqueue(itemOf(in))
				for _, s := range adm {
					if s.Ticket() == tk {
						mine = s
					}
				}
				return Output{Err: classify(err), Ticket: int(tk), Admitted: adms(adm)}
			})
			if out.Err != ErrNone {
				continue
			}
			tk := policyqueue.Ticket(out.Ticket)
			recent[issued.Add(1)%int64(len(recent))].Store(int64(tk))
			if mine == nil {
				jitter()
				if rng.IntN(7) == 0 {
					r.Do(Input{Op: OpCancel, Ticket: int(tk)}, func() Output {
						res, adm := q.Cancel(tk)
						return Output{Cancel: int(res), Admitted: adms(adm)}
					})
					continue
				}
				out = r.Do(Input{Op: OpWait, Ticket: int(tk)}, func() Output {
					ctx, cancel := context.WithTimeout(runCtx, WaitLimit)
					defer cancel()
					s, err := q.Wait(ctx, tk)
					if ctx.Err() != nil {
						stuck.Add(1)
						abort()
					}
					o := Output{Err: classify(err)}
					if s != nil {
						mine, o.Slot = s, fromTarget(s.Target())
					}
					return o
				})
				if mine == nil {
					continue
				}
			}
			if rng.IntN(3) == 0 {
				time.Sleep(time.Duration(1+rng.IntN(40)) * time.Microsecond) // hold the slot a while
			} else {
				jitter()
			}
			if rng.IntN(10) == 0 {
				r.Do(Input{Op: OpCancel, Ticket: int(tk)}, func() Output { // cancel after admission
					res, adm := q.Cancel(tk)
					return Output{Cancel: int(res), Admitted: adms(adm)}
				})
			}
			for n := 1 + rng.IntN(6)/5; n > 0; n-- { // sometimes twice
				r.Do(Input{Op: OpRelease, Ticket: int(tk)}, func() Output { return Output{Admitted: adms(mine.Release())} })
			}
		}
	})
	if blocked, ok := clients.Wait(RunLimit, abort, describeCall); !ok {
		return nil, fmt.Errorf("queuelin: a run did not finish in %v (seed %d): in flight: %v", RunLimit, plan.Seed, blocked)
	}
	run := &Run{Plan: plan, Stuck: int(stuck.Load()), History: clients.History()}
	run.Coverage = count(run.History)
	return run, nil
}

// operate is client 0's loop: capacity and eligibility changes, rechecks
// and cancels of recent tickets; it ends by giving every worker capacity
// 2 and eligibility, so every waiting item is served, or (plan.Close) by
// closing the queue, so every waiting item ends.
func operate(r *recorder, q *policyqueue.Queue, rng *rand.Rand, plan Plan, jitter func(),
	setCap func(*recorder, int, int), setElig func(*recorder, int, bool), recent *[16]atomic.Int64, runCtx context.Context) {
	closeAt := plan.Ops
	if plan.Close {
		closeAt = plan.Ops/2 + rng.IntN(plan.Ops/2+1)
	}
	for i := 0; i < plan.Ops && runCtx.Err() == nil; i++ {
		if i == closeAt {
			r.Do(Input{Op: OpClose}, func() Output { return Output{Err: classify(q.Close())} })
			return
		}
		jitter()
		w := rng.IntN(plan.Workers)
		switch j := rng.IntN(20); {
		case j < 6:
			setCap(r, w, rng.IntN(3))
		case j < 9:
			setElig(r, w, rng.IntN(3) != 0)
		case j < 11:
			r.Do(Input{Op: OpRecheck, Worker: w}, func() Output { return Output{Admitted: adms(q.Recheck(workerName(w)))} })
		case j < 13:
			r.Do(Input{Op: OpRecheckAll}, func() Output { return Output{Admitted: adms(q.RecheckAll())} })
		case j < 16:
			tk := policyqueue.Ticket(recent[rng.IntN(len(recent))].Load())
			if tk == 0 {
				continue
			}
			r.Do(Input{Op: OpCancel, Ticket: int(tk)}, func() Output {
				res, adm := q.Cancel(tk)
				return Output{Cancel: int(res), Admitted: adms(adm)}
			})
		default:
			time.Sleep(time.Duration(1+rng.IntN(50)) * time.Microsecond)
		}
	}
	for w := 0; w < plan.Workers; w++ {
		setElig(r, w, true)
		setCap(r, w, 2)
	}
}

// count computes a history's coverage.
func count(h []porcupine.Operation) Coverage {
	var c Coverage
	c.Operations = len(h)
	released := map[int]bool{}
	enq := map[int]Input{}
	sorted := append([]porcupine.Operation(nil), h...)
	sort.Slice(sorted, func(i, j int) bool { return sorted[i].Call < sorted[j].Call })
	for _, op := range sorted {
		in, out := op.Input.(Input), op.Output.(Output)
		if in.Op == OpEnqueue && out.Err == ErrNone {
			enq[out.Ticket] = in
		}
	}
	for _, op := range sorted {
		in, out := op.Input.(Input), op.Output.(Output)
		switch in.Op {
		case OpClose:
			c.Closes++
		case OpEnqueue:
			c.Enqueues++
			switch out.Err {
			case ErrFull:
				c.Full++
			case ErrClosed:
				c.RefusedClosed++
			}
			for _, a := range out.Admitted {
				if a.Ticket == out.Ticket {
					c.AdmittedAtOnce++
				}
			}
		case OpWait:
			c.Waits++
			switch out.Err {
			case ErrNone:
				c.WaitsAdmitted++
			case ErrCancelled, ErrUnknown:
				c.WaitsCancelled++
			case ErrClosed:
				c.WaitsClosed++
			}
		case OpRelease:
			c.Releases++
			if released[in.Ticket] {
				c.SecondReleases++
			}
			released[in.Ticket] = true
			if len(out.Admitted) > 0 {
				c.ReleasesAdmitting++
			}
		case OpCancel:
			switch out.Cancel {
			case CancelWaiting:
				c.CancelWaiting++
			case CancelAdmitted:
				c.CancelAdmitted++
			default:
				c.CancelNone++
			}
		case OpSetCapacity:
			if len(out.Admitted) > 0 {
				c.CapacityAdmitting++
			}
		case OpSetEligible:
			c.EligibleChanges++
		case OpRecheck, OpRecheckAll:
			c.Rechecks++
		}
		for _, a := range out.Admitted {
			it := enq[a.Ticket]
			switch {
			case it.Exact && it.Target.R >= 0:
				c.RankedAdmitted++
				c.ExactAdmitted++
			case it.Exact:
				c.ExactAdmitted++
			default:
				c.SharedLaneAd++
				if len(it.Cands) > 1 && a.Target != it.Cands[0] {
					c.OtherCandidate++
				}
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
