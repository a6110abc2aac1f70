package linearizability

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
	"github.com/placementlab/placement/impl/placement"
)

// Plan is a concurrent run drawn up front from a seed: the system's shape,
// each client's stream of choices, the scheduling jitter and GOMAXPROCS.
type Plan struct {
	Seed        uint64  `json:"seed"`
	Shape       Shape   `json:"shape"`
	Partitioned bool    `json:"partitioned"` // no Bump/Advance/Reap, capacity >= keys: checked per key
	Hot         bool    `json:"hot,omitempty"`
	Procs       int     `json:"procs"`
	Choices     [][]int `json:"-"`
	Jitter      [][]int `json:"-"`
}

// DrawPlan draws a plan of ops operations per client from seed. Seeds 1
// mod 4 give small unpartitioned tables (capacity couples keys, with Bump,
// Advance and Reap); seeds 3 mod 4 give one hot session (Mix.Hot, at
// GOMAXPROCS up to 4 so clients are preempted mid-operation); even seeds
// give independent keys checked partition by partition.
func DrawPlan(seed uint64, ops int) Plan {
	rng := rand.New(rand.NewPCG(seed, 0x9e3779b97f4a7c15))
	p := Plan{Seed: seed, Procs: 1 + rng.IntN(2)}
	switch seed % 4 {
	case 1:
		p.Shape = Shape{Clients: 3 + rng.IntN(3), Keys: 1 + rng.IntN(3), Targets: 1 + rng.IntN(2),
			Capacity: 1 + rng.IntN(2), TTL: 1 + int64(rng.IntN(2)), ReserveTimeout: 1 + int64(rng.IntN(2)),
			DispatchTimeout: 1 + int64(rng.IntN(2)), QuarantineTTL: 1 + int64(rng.IntN(3))}
	case 3:
		p.Hot, p.Procs = true, 2+rng.IntN(3)
		p.Shape = Shape{Clients: 3 + rng.IntN(2), Keys: 1, Targets: 1, Capacity: 1, TTL: 1, ReserveTimeout: 2,
			DispatchTimeout: 1, QuarantineTTL: 2}
	default:
		keys := 3 + rng.IntN(4)
		p.Partitioned = true
		p.Shape = Shape{Clients: 4 + rng.IntN(4), Keys: keys, Targets: 1 + rng.IntN(3),
			Capacity: keys, TTL: 2, ReserveTimeout: 2, DispatchTimeout: 2, QuarantineTTL: 3}
	}
	p.Choices = make([][]int, p.Shape.Clients)
	p.Jitter = make([][]int, p.Shape.Clients)
	for r := range p.Choices {
		for i := 0; i < ops*8; i++ {
			p.Choices[r] = append(p.Choices[r], rng.IntN(1<<30))
		}
		for i := 0; i < ops; i++ {
			p.Jitter[r] = append(p.Jitter[r], rng.IntN(100))
		}
	}
	return p
}

// WaitLimit bounds a blocking Acquire in a run. Every initializer in a run
// finishes promptly, so a waiter still waiting this long lost its wake-up.
// LINEARIZABILITY_WAIT_LIMIT (a Go duration) overrides it.
var WaitLimit = func() time.Duration {
	if d, err := time.ParseDuration(os.Getenv("LINEARIZABILITY_WAIT_LIMIT")); err == nil && d > 0 {
		return d
	}
	return 5 * time.Second
}()

// ShortWait is the deadline of the Acquires planned to give up waiting.
const ShortWait = 200 * time.Microsecond

// RunLimit bounds a whole run: a run whose clients have not all finished
// after it has an operation that blocked for good (a lock left held, say),
// and fails as such instead of hanging the test. Every run of the checks
// takes well under a second.
const RunLimit = 20 * time.Second

// finishLimit bounds the operations a client makes after its plan to end
// what it holds: a correct coordinator needs one or two.
const finishLimit = 16

// Run is a recorded concurrent run.
type Run struct {
	Plan     Plan
	History  []porcupine.Operation
	Coverage Coverage
	Overlap  float64 // fraction of operations concurrent with at least one other
	Stuck    int     // blocking Acquires that hit WaitLimit (lost wake-ups)
	Events   int     // Observer events, checked key by key (Lifecycle)
	EventErr error   // the first event out of its key's order, if any
	// Unfinished names a client that could not end what it held within
	// finishLimit operations after its plan.
	Unfinished string
}

// ErrRunBlocked says a run did not finish within RunLimit: an operation
// blocked for good.
var ErrRunBlocked = errors.New("linearizability: a run did not finish: an operation blocked")

// Execute runs plan on a fresh coordinator, one goroutine per client, each
// performing ops operations, and records every call with a monotonic clock.
// No lock is held around the operations under test.
//
// It fails fast: the first blocking Acquire that waits WaitLimit (a lost
// wake-up) ends the run (every other wait is cut short, and the clients
// stop after ending what they hold); a client that cannot end what it holds
// is reported (Run.Unfinished); and a run that has not finished after
// RunLimit returns an error wrapping ErrRunBlocked naming the operations in
// flight (their goroutines are left behind: the run has failed).
func Execute(plan Plan, ops int, mutate ...func(*placement.Config[int])) (*Run, error) {
	var life Lifecycle
	mutate = append([]func(*placement.Config[int]){func(c *placement.Config[int]) { c.Observer = life.Observe }}, mutate...)
	sys, err := NewSystem(plan.Shape, mutate...)
	if err != nil {
		return nil, err
	}
	defer sys.Close()
	prev := runtime.GOMAXPROCS(plan.Procs)
	defer runtime.GOMAXPROCS(prev)
	start := time.Now()
	histories := make([][]porcupine.Operation, plan.Shape.Clients)
	covs := make([]Coverage, plan.Shape.Clients)
	stuck := make([]int, plan.Shape.Clients)
	unfinished := make([]bool, plan.Shape.Clients)
	inflight := make([]atomic.Pointer[Input], plan.Shape.Clients)
	// abort ends the run early: after a lost wake-up, every other wait is
	// cut short and no client starts a planned operation.
	runCtx, abort := context.WithCancel(context.Background())
	defer abort()
	var wg sync.WaitGroup
	for r := 0; r < plan.Shape.Clients; r++ {
		wg.Add(1)
		go func(r int) {
			defer wg.Done()
			choices, ci := plan.Choices[r], 0
			pick := func(n int) int {
				v := choices[ci%len(choices)] % n
				ci++
				return v
			}
			lastAmb := map[int][2]uint64{}
			// After its planned operations a client finishes what it holds,
			// as a real request does: waiters must never be left waiting on
			// an initializer that has simply stopped.
			finishing := 0
			for i := 0; ; i++ {
				planned := i < ops && runCtx.Err() == nil
				if !planned {
					if sys.Holds(r) == HoldsNothing {
						break
					}
					if finishing == finishLimit {
						unfinished[r] = true
						break
					}
					finishing++
				}
				var in Input
				if planned {
					in = Choose(sys, r, lastAmb, pick, Mix{Env: !plan.Partitioned, Hot: plan.Hot})
				} else {
					in = finish(sys, r, pick)
				}
				if in.Op == OpTryAcquire && pick(3) != 0 {
					in.Op = OpAcquire // mostly blocking acquires: waiters
					in.Short = pick(6) == 0
				}
				switch j := plan.Jitter[r][i%len(plan.Jitter[r])]; {
				case j < 20:
					runtime.Gosched()
				case j < 23:
					time.Sleep(time.Duration(j) * time.Microsecond)
				}
				limit := WaitLimit
				if in.Short {
					limit = ShortWait
				}
				ctx, cancel := context.WithTimeout(runCtx, limit)
				if setsDeadline(in.Op) && !in.Again {
					// A deadline the call sets comes from a clock reading
					// within the call (see Stepper.Steps).
					in.Window, in.Clock = true, int64(sys.Clock.Now()/Unit)
				}
				inflight[r].Store(&in)
				call := time.Since(start).Nanoseconds()
				out := sys.Do(ctx, in)
				ret := time.Since(start).Nanoseconds()
				lost := errors.Is(ctx.Err(), context.DeadlineExceeded)
				cancel()
				inflight[r].Store(nil)
				if in.Op == OpAcquire && out.Kind == OutCancelled && !in.Short && lost {
					stuck[r]++ // waited WaitLimit: a lost wake-up; end the run
					abort()
				}
				NoteAmbiguity(lastAmb, in, out)
				covs[r].Count(in, out)
				histories[r] = append(histories[r], porcupine.Operation{
					ClientId: r, Input: in, Output: out, Call: call, Return: ret})
			}
		}(r)
	}
	finished := make(chan struct{})
	go func() { wg.Wait(); close(finished) }()
	select {
	case <-finished:
	case <-time.After(RunLimit):
		abort()
		var blocked []string
		for r := range inflight {
			if in := inflight[r].Load(); in != nil {
				blocked = append(blocked, in.String())
			}
		}
		return nil, fmt.Errorf("%w after %v (seed %d); in flight: %v", ErrRunBlocked, RunLimit, plan.Seed, blocked)
	}
	run := &Run{Plan: plan, Events: life.Events(), EventErr: life.Err()}
	for r := range histories {
		run.History = append(run.History, histories[r]...)
		run.Coverage.Add(covs[r])
		run.Stuck += stuck[r]
		if unfinished[r] && run.Unfinished == "" {
			run.Unfinished = fmt.Sprintf("client %d still held %v after %d operations to end it", r, sys.Holds(r), finishLimit)
		}
	}
	run.Overlap = overlap(run.History)
	return run, nil
}

// overlap is the fraction of operations whose interval meets another's.
func overlap(h []porcupine.Operation) float64 {
	if len(h) == 0 {
		return 0
	}
	sorted := append([]porcupine.Operation(nil), h...)
	sortByCall(sorted)
	n := 0
	maxRet := int64(-1 << 62)
	over := make([]bool, len(sorted))
	for i, op := range sorted {
		if op.Call <= maxRet {
			over[i] = true
			for j := i - 1; j >= 0 && sorted[j].Return >= op.Call; j-- {
				over[j] = true
			}
		}
		maxRet = max(maxRet, op.Return)
	}
	for _, o := range over {
		if o {
			n++
		}
	}
	return float64(n) / float64(len(h))
}

func sortByCall(h []porcupine.Operation) {
	sort.Slice(h, func(i, j int) bool { return h[i].Call < h[j].Call })
}

// finish is the operation that ends what client r holds.
func finish(sys *System, r int, pick func(int) int) Input {
	in := Input{Client: r, Key: sys.HeldKey(r)}
	switch sys.Holds(r) {
	case HoldsReservation:
		in.Op = OpCancel
	case HoldsDispatch:
		in.Op, in.Outcome = OpComplete, pick(3)
	default:
		in.Op = OpRelease
	}
	return in
}
