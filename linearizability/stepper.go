package linearizability

import (
	"fmt"
	"math"
	"slices"
	"sort"
	"strconv"
	"strings"

	"github.com/placementlab/placement/model"
)

// Stepper is the sequential specification: it says, with the model's own
// transition functions, what each operation returns and how the model
// state moves.
//
// The system's own actions that the spec lets fire at any time once they
// are enabled (ReservationTimeout, DispatchTimeout, QuarantineExpire and
// DropStale of a quarantine) are applied two ways:
//
//   - Expect, which the sequential Driver uses, applies every enabled one
//     after each operation (Settle), and an Advance that is not Lazy or a
//     Reap sweeps at its step. Sequentially the implementation cannot be
//     told from that: every operation on a key applies the key's deadlines
//     under its lock with a clock reading that is the model's now, a full
//     table sweeps before it refuses, and a sweep ends before the next
//     operation begins.
//   - Steps, which Porcupine uses, lets each of them fire before any later
//     operation, or not yet (Fire), and sweeps at no Advance or Reap.
//     Concurrently the implementation takes that freedom: an operation
//     reads the clock before an Advance that lands inside its call, so a
//     reservation can be born already due and hold its place while a full
//     table refuses another key, a Complete judged in time can commit after
//     the dispatch's deadline, and an operation can read the clock an
//     Advance set before that Advance's sweep reaches its key.
//
// Stats, which only the sequential checks use, fires every enabled one at
// its step in both.
//
// Expire and DropStale of a binding are not applied eagerly by either: an
// expired or stale binding stays in the model's table as "expired (or
// stale) but not yet swept", reading as absent to every operation, until a
// sweep or an operation on its key removes it. No operation can tell them
// apart (an idle binding past its deadline never becomes live again, nor
// does a stale one), so they need no branching.
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
// quarantine whose target's generation moved on), each as a step of its
// own (the ghosts track each).
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
// does besides Settle. An operation cannot tell a swept binding from an
// expired or stale one that is still in the table.
func (st *Stepper) Sweep(s model.State) model.State {
	return st.apply(s, st.M.Expire, st.M.DropStale)
}

func (st *Stepper) apply(s model.State, actions ...func(*model.State, int) (model.State, model.Result, bool)) model.State {
	for k := range s.Table {
		for _, f := range actions {
			if n, _, ok := f(&s, k); ok {
				st.M.Track(&s, &n)
				s = n
			}
		}
	}
	return s
}

// Fire returns the states s may be in when in takes its step, as far as
// in's own keys tell: s, and s after any of the timeouts enabled on those
// keys have fired (each key's ReservationTimeout; its DispatchTimeout, and
// then the quarantine's end if that is over too; a quarantine's end).
// The spec's timeouts are actions of their own that may fire at any time
// once enabled, so each may have fired or not yet; each key's choice is
// independent of the others'. A timeout of a key in does not read
// commutes with in's step (it reads and writes only its key's entry and
// its holder's pc, which in's step neither reads nor writes, and its
// effect does not depend on when it fires), so it may as well fire before
// a later operation that does read its key; Steps branches on the other
// keys of an Acquire itself (acquireSteps). Expire and DropStale of a
// binding need no branch (see Stepper).
func (st *Stepper) Fire(s model.State, in Input) []model.State {
	states := []model.State{s}
	for k := range s.Table {
		if !st.ownKey(&s, in, k) {
			continue
		}
		n := len(states)
		for i := 0; i < n; i++ {
			states = append(states, st.fireKey(&states[i], k)...)
		}
	}
	return states
}

// ownKey reports whether in's step from s reads key k's entry other than
// through the count of places taken: the key in names, or the one its
// client's handle is for. Advance, Bump, Reap and Stats have none (in
// Steps the first three sweep nothing, and Stats fires every timeout).
func (st *Stepper) ownKey(s *model.State, in Input, k int) bool {
	switch in.Op {
	case OpAdvance, OpBump, OpReap, OpStats:
		return false
	}
	r := in.Client
	return k == in.Key || r >= 0 && r < len(s.Req) && s.Req[r].Key == k
}

// acquireSteps is Steps for an Acquire of in.Key from s, whose own key's
// timeouts have fired or not (Fire). The other keys count only through
// Room, the places they take, and firing a timeout only ever frees a
// place. So it tries their firings fewest first, and skips any that
// includes one already explaining out: with the same answer, the step has
// the same effect on its key, and the state it leads to is the one the
// smaller firing leads to once the rest have fired, which they still may
// before the next operation that reads their keys. Without that pruning,
// every Acquire would multiply the states by every combination of due
// timeouts in the table.
func (st *Stepper) acquireSteps(s model.State, in Input, out Output) []model.State {
	var keys, levels []int
	for k := range s.Table {
		if k == in.Key {
			continue
		}
		if n := len(st.fireKey(&s, k)); n > 0 {
			keys, levels = append(keys, k), append(levels, n)
		}
	}
	if len(keys) == 0 {
		return st.stepsFrom(s, in, out)
	}
	// Every vector of levels (how far each key's chain fired), fewest
	// firings first.
	vecs := [][]int{{}}
	for _, n := range levels {
		var next [][]int
		for _, v := range vecs {
			for l := 0; l <= n; l++ {
				next = append(next, append(append([]int(nil), v...), l))
			}
		}
		vecs = next
	}
	sum := func(v []int) int {
		t := 0
		for _, l := range v {
			t += l
		}
		return t
	}
	sort.SliceStable(vecs, func(i, j int) bool { return sum(vecs[i]) < sum(vecs[j]) })
	var states []model.State
	var explained [][]int
	for _, v := range vecs {
		if slices.ContainsFunc(explained, func(w []int) bool { return below(w, v) }) {
			continue
		}
		x := s
		for i, l := range v {
			if l > 0 {
				x = st.fireKey(&x, keys[i])[l-1]
			}
		}
		if n := st.stepsFrom(x, in, out); len(n) > 0 {
			states = append(states, n...)
			explained = append(explained, v)
		}
	}
	return states
}

// below reports w <= v, componentwise.
func below(w, v []int) bool {
	for i := range w {
		if w[i] > v[i] {
			return false
		}
	}
	return true
}

// fireKey lists the states that firing one or more of key k's enabled
// timeouts in s leads to.
func (st *Stepper) fireKey(s *model.State, k int) []model.State {
	var out []model.State
	step := func(from *model.State, f func(*model.State, int) (model.State, model.Result, bool)) bool {
		n, _, ok := f(from, k)
		if ok {
			st.M.Track(from, &n)
			out = append(out, n)
		}
		return ok
	}
	switch s.Table[k].St {
	case model.Reserved:
		step(s, st.M.ReservationTimeout)
	case model.Dispatching:
		if step(s, st.M.DispatchTimeout) {
			q := out[0]
			if !step(&q, st.M.QuarantineExpire) {
				step(&q, st.dropStaleQuarantine)
			}
		}
	case model.Quarantined:
		if !step(s, st.M.QuarantineExpire) {
			step(s, st.dropStaleQuarantine)
		}
	}
	return out
}

// Expect returns what in must return in state s and the next state, with
// every enabled timeout applied after it (Settle), and the sweep an
// Advance that is not Lazy or a Reap promises applied at its step: the
// sequential Driver's step. ok is false when the model has no step for in
// (the client's history is not one a correct client produces).
func (st *Stepper) Expect(s model.State, in Input) (out Output, next model.State, ok bool) {
	out, next, ok = st.step(s, in, true)
	if ok {
		next = st.Settle(next)
	}
	return out, next, ok
}

// step is in's own step from s: its action, with the ghosts tracked. A
// Stats, and if sweep is set an Advance that is not Lazy and a Reap, then
// reclaims everything that is over in every key (Sweep after Settle).
//
// Those promise to have swept before they return, not at one instant: a
// concurrent operation can read the clock an Advance set while its sweep
// has not yet reached the key the operation uses, and the spec allows
// that (Advance is only the clock's move; each timeout is an action of
// its own). So Steps sweeps at none of them (sweep unset); Stats, which
// only the sequential checks use, sweeps always.
func (st *Stepper) step(s model.State, in Input, sweep bool) (out Output, next model.State, ok bool) {
	out, next, ok = st.expect(s, in)
	if !ok {
		return out, next, ok
	}
	st.M.Track(&s, &next)
	if in.Op == OpStats || sweep && (in.Op == OpReap || in.Op == OpAdvance && !in.Lazy && in.By != 0) {
		next = st.Sweep(st.Settle(next))
	}
	if in.Op == OpStats {
		out = st.stats(&next)
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
		if !m.LiveQuarantine(&s, &e) {
			// Not quarantined, or a quarantine that is over and whose end
			// has not fired yet: the spec's Resolve changes nothing there,
			// and the implementation, which ends it on access, answers
			// as for no quarantine.
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
	case OpReap, OpStats: // see step
		return Output{Kind: OutOK}, s, true
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
		return Output{Kind: OutOK}, n, true // see step
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
