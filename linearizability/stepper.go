package linearizability

import (
	"fmt"
	"math"
	"strconv"
	"strings"

	"github.com/placementlab/placement/model"
)

// Stepper is the sequential specification: it says, with the model's own
// transition functions, what each operation returns and how the model
// state moves.
//
// After every operation every enabled ReservationTimeout and
// DispatchTimeout is applied: the implementation applies them lazily, but
// every operation on the key does so under the key's lock with the clock
// it reads there, so none can tell lazy from eager, and applying them
// keeps the requests' program counters (Revoked, Late) in step.
//
// Expire and DropStale are not applied eagerly: an expired or stale
// binding stays in the model's table as "expired (or stale) but not yet
// swept", reading as absent to every operation, until a sweep (Reap, or an
// Advance that is not Lazy) or an operation on its key removes it. That is
// what the spec allows and what a coordinator whose clock moves without
// sweeping (the runtime clock between reaper ticks, ManualClock.Set) does.
type Stepper struct {
	M *model.Model
}

// NewStepper returns the stepper for a system of the given shape.
func NewStepper(sh Shape) (*Stepper, error) {
	sh = sh.normalized()
	cfg := model.Config{Capacity: sh.Capacity, TTL: sh.TTL, ReserveTimeout: sh.ReserveTimeout,
		DispatchTimeLimit: sh.DispatchTimeout, QuarantineTTL: sh.QuarantineTTL,
		MaxClock: math.MaxInt64 / 4}
	for i := 0; i < sh.Keys; i++ {
		cfg.Keys = append(cfg.Keys, fmt.Sprintf("k%d", i))
	}
	for i := 0; i < sh.Targets; i++ {
		cfg.Targets = append(cfg.Targets, fmt.Sprintf("t%d", i))
	}
	for i := 0; i < sh.Clients; i++ {
		cfg.Requests = append(cfg.Requests, fmt.Sprintf("r%d", i))
	}
	m, err := model.New(cfg)
	if err != nil {
		return nil, err
	}
	return &Stepper{M: m}, nil
}

// Init returns the initial model state.
func (st *Stepper) Init() model.State { return st.M.Init() }

// Settle applies every enabled ReservationTimeout and DispatchTimeout, and
// ends every quarantine that is over (QuarantineExpire, and DropStale of a
// quarantine whose target's generation moved on): the implementation
// applies them on every access to the key, and a quarantine's deadline
// does not depend on when its dispatch timeout was applied.
func (st *Stepper) Settle(s model.State) model.State {
	return st.apply(s, st.M.ReservationTimeout, st.M.DispatchTimeout, st.M.QuarantineExpire, st.dropStaleQuarantine)
}

func (st *Stepper) dropStaleQuarantine(s *model.State, k int) (model.State, model.Result, bool) {
	if s.Table[k].St != model.Quarantined {
		return model.State{}, model.Result{}, false
	}
	return st.M.DropStale(s, k)
}

// Sweep applies every enabled Expire and DropStale: what a reaper tick
// does. An operation cannot tell a swept binding from an expired or stale
// one that is still in the table.
func (st *Stepper) Sweep(s model.State) model.State {
	return st.apply(s, st.M.Expire, st.M.DropStale)
}

func (st *Stepper) apply(s model.State, actions ...func(*model.State, int) (model.State, model.Result, bool)) model.State {
	for k := range s.Table {
		for _, f := range actions {
			if n, _, ok := f(&s, k); ok {
				s = n
			}
		}
	}
	return s
}

// Expect returns what in must return in state s and the next state. ok is
// false when the model has no step for in (the client's history is not one
// a correct client produces).
func (st *Stepper) Expect(s model.State, in Input) (out Output, next model.State, ok bool) {
	out, next, ok = st.expect(s, in)
	if ok {
		next = st.Settle(next)
		st.M.Track(&s, &next)
	}
	return out, next, ok
}

func (st *Stepper) expect(s model.State, in Input) (Output, model.State, bool) {
	m := st.M
	r := in.Client
	if r < 0 || r >= len(s.Req) {
		return Output{}, s, false
	}
	pc := s.Req[r].Pc
	if in.Again && useOf(in) < 0 {
		return Output{}, s, false // only handles are kept
	}
	if in.Again {
		// A handle the client stopped holding: to the model it is a
		// request whose pc no longer matches the handle (an idle one), so
		// its use is refused below and changes nothing.
		pc = model.PcIdle
	}
	switch in.Op {
	case OpAcquire, OpTryAcquire:
		if pc != model.PcIdle || in.Key < 0 || in.Key >= len(s.Table) {
			return Output{}, s, false
		}
		n, res, _ := m.Acquire(&s, r, in.Key)
		switch res.Kind {
		case model.ResHit:
			return Output{Kind: OutHit, Target: res.Target, Gen: uint64(res.Gen), Attempt: uint64(res.Attempt)}, n, true
		case model.ResReserved:
			return Output{Kind: OutReserved}, n, true
		case model.ResCapacity:
			return Output{Kind: OutCapacity}, n, true
		case model.ResAmbiguous:
			return Output{Kind: OutAmbiguous, Attempt: uint64(res.Attempt), Gen: uint64(res.Gen)}, n, true
		case model.ResWait:
			// TryAcquire returns at once and the client stays idle; a
			// blocking Acquire cannot return at this point (see Step).
			return Output{Kind: OutWouldWait}, s, in.Op == OpTryAcquire
		}
	case OpBeginDispatch, OpCommitAccepted:
		if pc != model.PcReserved && pc != model.PcRevoked {
			return Output{Kind: OutLost}, s, true // a reservation settled away earlier
		}
		if !m.HoldsReservation(&s, r) {
			n, _, _ := m.BeginDispatch(&s, r, in.Target)
			return Output{Kind: OutLost}, n, true
		}
		if in.Target < 0 || in.Target >= len(s.Gen) {
			return Output{}, s, false
		}
		if in.Gen != uint64(s.Gen[in.Target]) {
			return Output{Kind: OutFenced}, s, true
		}
		n, res, ok := m.BeginDispatch(&s, r, in.Target)
		if !ok {
			return Output{}, s, false
		}
		if in.Op == OpBeginDispatch {
			return Output{Kind: OutDispatched, Attempt: uint64(res.Attempt), Gen: uint64(res.Gen)}, n, true
		}
		n2, res2, _ := m.Complete(&n, r, model.Accepted)
		return Output{Kind: OutCommitted, Target: res2.Target, Gen: uint64(res2.Gen), Attempt: uint64(res2.Attempt)}, n2, true
	case OpCancel:
		if pc != model.PcReserved && pc != model.PcRevoked {
			return Output{Kind: OutLost}, s, true
		}
		n, res, _ := m.Cancel(&s, r)
		if res.Kind == model.ResCancelled {
			return Output{Kind: OutOK}, n, true
		}
		return Output{Kind: OutLost}, n, true
	case OpComplete, OpDrop:
		if pc != model.PcDispatching && pc != model.PcLate {
			if in.Op == OpDrop {
				return Output{Kind: OutOK}, s, true
			}
			return Output{Kind: OutUsed}, s, true
		}
		o := model.Ambiguous
		if in.Op == OpComplete {
			o = model.Outcome(in.Outcome)
		}
		n, res, _ := m.Complete(&s, r, o)
		switch {
		case in.Op == OpDrop:
			return Output{Kind: OutOK}, n, true
		case res.Kind == model.ResCommitted:
			return Output{Kind: OutCommitted, Target: res.Target, Gen: uint64(res.Gen), Attempt: uint64(res.Attempt)}, n, true
		case res.Kind == model.ResFenced:
			return Output{Kind: OutFenced}, n, true
		}
		return Output{Kind: OutOK}, n, true
	case OpRelease, OpAbandon, OpInvalidate, OpClose:
		if pc != model.PcHolding {
			return Output{Kind: OutUsed}, s, true
		}
		f := map[OpKind]func(*model.State, int) (model.State, model.Result, bool){
			OpRelease: m.Release, OpAbandon: m.Abandon, OpInvalidate: m.Invalidate, OpClose: m.Close,
		}[in.Op]
		n, _, _ := f(&s, r)
		return Output{Kind: OutOK}, n, true
	case OpResolve:
		if in.Key < 0 || in.Key >= len(s.Table) {
			return Output{}, s, false
		}
		e := s.Table[in.Key]
		if e.St != model.Quarantined {
			return Output{Kind: OutNotQuarantined}, s, true
		}
		if in.Attempt != uint64(e.Attempt) || in.Gen != uint64(e.TGen) {
			return Output{Kind: OutFenced}, s, true
		}
		n, _, _ := m.Resolve(&s, in.Key, e.Attempt, e.TGen, model.Resolution(in.Outcome))
		return Output{Kind: OutOK}, n, true
	case OpInvalidateKey:
		if in.Key < 0 || in.Key >= len(s.Table) {
			return Output{}, s, false
		}
		if e := &s.Table[in.Key]; e.St == model.Bound && !m.LiveBound(&s, e) {
			// Expired or stale: Expire or DropStale, then nothing to remove.
			n, _, _ := m.Expire(&s, in.Key)
			if m.Stale(&s, e) {
				n, _, _ = m.DropStale(&s, in.Key)
			}
			return Output{Kind: OutNone}, n, true
		}
		if n, _, ok := m.InvalidateKey(&s, in.Key); ok {
			return Output{Kind: OutRemoved}, n, true
		}
		return Output{Kind: OutNone}, s, true
	case OpQuery:
		if in.Key < 0 || in.Key >= len(s.Table) {
			return Output{}, s, false
		}
		return st.Observe(&s, in.Key).Output(), s, true
	case OpReap:
		return Output{Kind: OutOK}, st.Sweep(s), true
	case OpStats:
		n := st.Sweep(s)
		return st.stats(&n), n, true
	case OpBump:
		if in.Target < 0 || in.Target >= len(s.Gen) {
			return Output{}, s, false
		}
		n, res, _ := m.Bump(&s, in.Target)
		return Output{Kind: OutOK, Gen: uint64(res.Gen)}, n, true
	case OpAdvance:
		if in.By == 0 {
			return Output{Kind: OutOK}, s, true
		}
		n, _, ok := m.Advance(&s, s.Now+in.By)
		if !ok {
			return Output{}, s, false
		}
		if !in.Lazy {
			n = st.Sweep(st.Settle(n))
		}
		return Output{Kind: OutOK}, n, true
	}
	return Output{}, s, false
}

// stats is what Stats reads in s, a state with nothing left to reclaim:
// the live keys (Occupies), the quarantined ones, and each target's live
// bindings.
func (st *Stepper) stats(s *model.State) Output {
	out := Output{Kind: OutOK}
	bindings := make([]int, len(s.Gen))
	for k := range s.Table {
		e := &s.Table[k]
		if st.M.Occupies(s, e) {
			out.Live++
		}
		if e.St == model.Quarantined {
			out.Quarantined++
		}
		if st.M.LiveBound(s, e) {
			bindings[e.Target]++
		}
	}
	out.Bindings = joinInts(bindings)
	return out
}

// joinInts renders ns as "n0,n1,...".
func joinInts(ns []int) string {
	var b strings.Builder
	for i, n := range ns {
		if i > 0 {
			b.WriteByte(',')
		}
		b.WriteString(strconv.Itoa(n))
	}
	return b.String()
}

// Observed is what Query reports of a key, derived from a model state.
type Observed struct {
	State   string
	Target  int
	Gen     uint64
	Attempt uint64
	Leases  int
	Closing bool
}

// Output is the Query output that reports o.
func (o Observed) Output() Output {
	return Output{Kind: OutOK, State: o.State, Target: o.Target, Gen: o.Gen, Attempt: o.Attempt,
		Leases: o.Leases, Closing: o.Closing}
}

// Observe derives key k's observable state from the model state: an
// expired or stale binding reads as Absent.
func (st *Stepper) Observe(s *model.State, k int) Observed {
	e := s.Table[k]
	switch e.St {
	case model.Reserved:
		return Observed{State: "Reserved"}
	case model.Dispatching, model.Quarantined:
		return Observed{State: e.St.String(), Target: e.Target, Gen: uint64(e.TGen), Attempt: uint64(e.Attempt)}
	case model.Bound:
		if st.M.LiveBound(s, &e) {
			return Observed{State: "Bound", Target: e.Target, Gen: uint64(e.TGen), Attempt: uint64(e.Attempt),
				Leases: e.Leases, Closing: e.Closing}
		}
	}
	return Observed{State: "Absent"}
}

// Observe reads key k's observable state from the coordinator.
func (s *System) Observe(k int) (Observed, error) {
	i, err := s.C.Query(s.keys[k])
	if err != nil {
		return Observed{}, err
	}
	o := Observed{State: i.State.String()}
	if o.State != "Absent" && o.State != "Reserved" {
		o.Target, o.Gen, o.Attempt = i.Target, i.Generation, i.Attempt
	}
	if o.State == "Bound" {
		o.Leases, o.Closing = i.Leases, i.Closing
	}
	return o, nil
}
