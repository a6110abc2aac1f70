package model

// ResultKind says what the caller of an action observes.
type ResultKind uint8

// Result kinds.
const (
	ResHit           ResultKind = iota // Acquire: a lease on Target/Gen, binding version Attempt
	ResReserved                        // Acquire: the caller initializes the key
	ResWait                            // Acquire: the caller waits for the initializer
	ResCapacity                        // Acquire: the table is full
	ResAmbiguous                       // Acquire: quarantined under Attempt/Gen
	ResCancelled                       // Cancel: the reservation is given up
	ResLost                            // Cancel/BeginDispatch: the reservation was revoked
	ResDispatched                      // BeginDispatch: attempt Attempt to Target/Gen
	ResCommitted                       // Complete/Resolve Accepted: binding version Attempt
	ResRolledBack                      // Complete DefinitelyNotAccepted: reserved again
	ResQuarantined                     // Complete Ambiguous
	ResSettledAbsent                   // late DefinitelyNotAccepted or Resolve NotAccepted
	ResFenced                          // Complete/Resolve naming a stale attempt or generation
	ResEnded                           // Release/Abandon/Invalidate/Close on the current binding
	ResSuperseded                      // a lease on an older binding version
	ResRemoved                         // InvalidateKey, Expire, DropStale, QuarantineExpire, timeouts
	ResBumped                          // Bump
	ResAdvanced                        // Advance
)

var resultNames = [...]string{"Hit", "Reserved", "Wait", "Capacity", "Ambiguous", "Cancelled",
	"Lost", "Dispatched", "Committed", "RolledBack", "Quarantined", "SettledAbsent", "Fenced",
	"Ended", "Superseded", "Removed", "Bumped", "Advanced"}

// String returns the name of k as the spec writes it.
func (k ResultKind) String() string {
	if int(k) < len(resultNames) {
		return resultNames[k]
	}
	return "ResultKind(?)"
}

// Result is what an action's caller observes.
type Result struct {
	Kind    ResultKind
	Target  int // target index, or None
	Gen     int // generation, or 0
	Attempt int // attempt id or binding version, or 0
}

var noResult = Result{Target: None}

// Model is an executable instance of the spec for one configuration.
// Its zero value is not usable; build it with New.
type Model struct {
	Cfg Config
	ops ops
	// Variants lists the broken variants applied with Override.
	Variants []string
}

// ops are the definitions a TLC config may override (`Name <- Variant`).
type ops struct {
	Acquire            func(m *Model, s *State, r, k int) (State, Result, bool)
	BeginDispatch      func(m *Model, s *State, r, t int) (State, Result, bool)
	Complete           func(m *Model, s *State, r int, o Outcome) (State, Result, bool)
	Resolve            func(m *Model, s *State, k, a, g int, o Resolution) (State, Result, bool)
	EndLease           func(m *Model, s *State, r int, refresh bool) (State, Result, bool)
	Invalidate         func(m *Model, s *State, r int) (State, Result, bool)
	Expire             func(m *Model, s *State, k int) (State, Result, bool)
	DropStale          func(m *Model, s *State, k int) (State, Result, bool)
	QuarantineExpire   func(m *Model, s *State, k int) (State, Result, bool)
	ReservationTimeout func(m *Model, s *State, k int) (State, Result, bool)
	DispatchTimeout    func(m *Model, s *State, k int) (State, Result, bool)
	Close              func(m *Model, s *State, r int) (State, Result, bool)
	Room               func(m *Model, s *State, k int) bool
	CurrentAttempt     func(m *Model, s *State, r int) bool
	Began              func(s *State, e *Entry) int64
	Leaves             func(n *State, r, k int)
	Joins              func(n *State, r, k int)
	// noSystemFairness drops SystemFairness (BugNoSystemFairness).
	noSystemFairness bool
}

// New returns the model for cfg.
func New(cfg Config) (*Model, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	return &Model{Cfg: cfg, ops: ops{
		Acquire:            acquire,
		BeginDispatch:      beginDispatch,
		Complete:           complete,
		Resolve:            resolve,
		EndLease:           endLease,
		Invalidate:         invalidate,
		Expire:             expire,
		DropStale:          dropStale,
		QuarantineExpire:   quarantineExpire,
		ReservationTimeout: reservationTimeout,
		DispatchTimeout:    dispatchTimeout,
		Close:              closeLease,
		Room:               room,
		CurrentAttempt:     currentAttempt,
		Began:              Began,
		Leaves:             Leaves,
		Joins:              Joins,
	}}, nil
}

// Expired: idle past its deadline. Stale: its target's generation moved on.
func (m *Model) Expired(s *State, e *Entry) bool {
	return e.St == Bound && e.Leases == 0 && e.Deadline <= s.Now
}

// Stale reports a Bound entry whose target's generation moved on.
func (m *Model) Stale(s *State, e *Entry) bool {
	return e.St == Bound && s.Gen[e.Target] != e.TGen
}

// LiveBound reports a Bound entry that is neither expired nor stale.
func (m *Model) LiveBound(s *State, e *Entry) bool {
	return e.St == Bound && !m.Expired(s, e) && !m.Stale(s, e)
}

// QuarantineDue reports a quarantine past its deadline (QuarantineTTL).
func (m *Model) QuarantineDue(s *State, e *Entry) bool {
	return e.St == Quarantined && e.Deadline <= s.Now
}

// StaleQuarantine reports a quarantine whose target's generation moved on.
func (m *Model) StaleQuarantine(s *State, e *Entry) bool {
	return e.St == Quarantined && s.Gen[e.Target] != e.TGen
}

// LiveQuarantine reports a quarantine that is neither due nor stale.
func (m *Model) LiveQuarantine(s *State, e *Entry) bool {
	return e.St == Quarantined && !m.QuarantineDue(s, e) && !m.StaleQuarantine(s, e)
}

// Initializing reports a Reserved or Dispatching entry.
func Initializing(e *Entry) bool { return e.St == Reserved || e.St == Dispatching }

// Began is the spec's Began: when a dispatch's attempt becomes ambiguous
// (an Ambiguous report or its timeout): now, or its deadline if that has
// passed. A quarantine holds for QuarantineTTL from then.
func Began(s *State, e *Entry) int64 {
	if e.St == Dispatching && e.Deadline <= s.Now {
		return e.Deadline
	}
	return s.Now
}

// Occupies reports an entry that counts against the table's capacity.
func (m *Model) Occupies(s *State, e *Entry) bool {
	return Initializing(e) || m.LiveQuarantine(s, e) || m.LiveBound(s, e)
}

// Free reports a key nothing live holds: the next Acquire may reserve it.
func (m *Model) Free(s *State, e *Entry) bool { return !m.Occupies(s, e) }

// Room reports whether key k may take a slot: fewer than Capacity other
// keys occupy one.
func (m *Model) Room(s *State, k int) bool { return m.ops.Room(m, s, k) }

func room(m *Model, s *State, k int) bool {
	return m.occupiedExcept(s, k) < m.Cfg.Capacity
}

func (m *Model) occupiedExcept(s *State, k int) int {
	n := 0
	for j := range s.Table {
		if j != k && m.Occupies(s, &s.Table[j]) {
			n++
		}
	}
	return n
}

func reservedEntry(r int, d int64) Entry {
	e := AbsentEntry
	e.St, e.Holder, e.Deadline, e.RDeadline = Reserved, r, d, d
	return e
}

func dispatchingEntry(r, a, t, g int, d, rd int64) Entry {
	e := AbsentEntry
	e.St, e.Holder, e.Attempt, e.Target, e.TGen, e.Deadline, e.RDeadline = Dispatching, r, a, t, g, d, rd
	return e
}

func quarantinedEntry(a, t, g int, d int64) Entry {
	e := AbsentEntry
	e.St, e.Attempt, e.Target, e.TGen, e.Deadline = Quarantined, a, t, g, d
	return e
}

func boundEntry(a, t, g, n int, d int64) Entry {
	e := AbsentEntry
	e.St, e.Attempt, e.Target, e.TGen, e.Leases, e.Deadline = Bound, a, t, g, n, d
	return e
}

func reqAt(pc Pc, k, a int) Req { return Req{Pc: pc, Key: k, Attempt: a} }

// Leaves is the spec's Leaves(r, k): r leaves k's wait queue, if it is in it.
func Leaves(n *State, r, k int) {
	q := n.Waitq[k][:0:0]
	for _, x := range n.Waitq[k] {
		if x != r {
			q = append(q, x)
		}
	}
	n.Waitq[k] = q
}

// Joins is the spec's Joins(r, k): r queues last on k.
func Joins(n *State, r, k int) {
	n.Waitq[k] = append(append([]int(nil), n.Waitq[k]...), r)
}

// Acquire(r, k): an idle request asks for key k, or a waiter on k asks again
// after k changed (a freed key: only the longest waiter).
func (m *Model) Acquire(s *State, r, k int) (State, Result, bool) { return m.ops.Acquire(m, s, r, k) }

func acquire(m *Model, s *State, r, k int) (State, Result, bool) {
	if !m.acquireEnabled(s, r, k, true) {
		return State{}, noResult, false
	}
	e := &s.Table[k]
	return acquireCases(m, s, r, k, m.LiveBound(s, e), m.LiveQuarantine(s, e), m.queues(s, r, k))
}

// acquireEnabled is Acquire's enabling condition: r is idle, or waits on k
// and k is not initializing (if k is free, and headOnly, r must be the
// longest waiter).
func (m *Model) acquireEnabled(s *State, r, k int, headOnly bool) bool {
	e := &s.Table[k]
	q := s.Req[r]
	return q.Pc == PcIdle || q.Pc == PcWaiting && q.Key == k && !Initializing(e) &&
		(!headOnly || !m.Free(s, e) || s.Waitq[k][0] == r)
}

// queues reports whether an idle r must queue on a free k behind waiters.
func (m *Model) queues(s *State, r, k int) bool {
	return m.Free(s, &s.Table[k]) && s.Req[r].Pc == PcIdle && len(s.Waitq[k]) > 0
}

// acquireCases is Acquire's CASE, once enabled: hit is the live-binding
// guard, amb the Ambiguous one, queue whether r queues behind waiters.
func acquireCases(m *Model, s *State, r, k int, hit, amb, queue bool) (State, Result, bool) {
	e := s.Table[k]
	n := s.Clone()
	switch {
	case hit: // hit: take a lease
		n.Table[k].Leases++
		n.Req[r] = reqAt(PcHolding, k, e.Attempt)
		m.ops.Leaves(&n, r, k)
		return n, Result{Kind: ResHit, Target: e.Target, Gen: e.TGen, Attempt: e.Attempt}, true
	case Initializing(&e) || queue: // someone initializes, or waiters are ahead: wait
		n.Req[r] = reqAt(PcWaiting, k, 0)
		m.ops.Joins(&n, r, k)
		return n, Result{Kind: ResWait, Target: None}, true
	case amb: // Ambiguous error
		n.Req[r] = IdleReq
		m.ops.Leaves(&n, r, k)
		return n, Result{Kind: ResAmbiguous, Target: e.Target, Gen: e.TGen, Attempt: e.Attempt}, true
	default: // absent, expired, stale or over
		m.ops.Leaves(&n, r, k)
		if m.Room(s, k) {
			n.Table[k] = reservedEntry(r, s.Now+m.Cfg.ReserveTimeout)
			n.Req[r] = reqAt(PcReserved, k, 0)
			return n, Result{Kind: ResReserved, Target: None}, true
		}
		n.Req[r] = IdleReq // Capacity error
		return n, Result{Kind: ResCapacity, Target: None}, true
	}
}

// HoldsReservation reports whether request r holds its key's reservation.
func (m *Model) HoldsReservation(s *State, r int) bool {
	k := s.Req[r].Key
	if k == None {
		return false
	}
	e := &s.Table[k]
	return e.St == Reserved && e.Holder == r
}

// Cancel(r): the initializer gives up before dispatching. A revoked
// reservation is an error that changes nothing.
func (m *Model) Cancel(s *State, r int) (State, Result, bool) {
	q := s.Req[r]
	if q.Pc != PcReserved && q.Pc != PcRevoked {
		return State{}, noResult, false
	}
	n := s.Clone()
	res := Result{Kind: ResLost, Target: None}
	if m.HoldsReservation(s, r) {
		n.Table[q.Key] = AbsentEntry
		res.Kind = ResCancelled
	}
	n.Req[r] = IdleReq
	return n, res, true
}

// BeginDispatch(r, t): dispatch to t under a fresh attempt id and t's
// current generation.
func (m *Model) BeginDispatch(s *State, r, t int) (State, Result, bool) {
	return m.ops.BeginDispatch(m, s, r, t)
}

func beginDispatch(m *Model, s *State, r, t int) (State, Result, bool) {
	return dispatchUnder(m, s, r, t, s.Gen[t])
}

// dispatchUnder is BeginDispatch recording generation g for target t.
func dispatchUnder(m *Model, s *State, r, t, g int) (State, Result, bool) {
	q := s.Req[r]
	if q.Pc != PcReserved && q.Pc != PcRevoked {
		return State{}, noResult, false
	}
	if !m.HoldsReservation(s, r) { // reservation lost
		n := s.Clone()
		n.Req[r] = IdleReq
		return n, Result{Kind: ResLost, Target: None}, true
	}
	if m.Cfg.MaxAttempt > 0 && s.NextAttempt > m.Cfg.MaxAttempt || s.Now >= s.Table[q.Key].Deadline {
		return State{}, noResult, false // no attempt id left, or the reservation is due to time out
	}
	n := s.Clone()
	a := s.NextAttempt
	n.Table[q.Key] = dispatchingEntry(r, a, t, g, s.Now+m.Cfg.DispatchTimeLimit, s.Table[q.Key].RDeadline)
	n.Req[r] = reqAt(PcDispatching, q.Key, a)
	n.NextAttempt = a + 1
	return n, Result{Kind: ResDispatched, Target: t, Gen: g, Attempt: a}, true
}

// CurrentAttempt reports whether the attempt request r's dispatch guard
// names is still its key's Dispatching attempt, or its Quarantined one and
// the quarantine is not over.
func (m *Model) CurrentAttempt(s *State, r int) bool { return m.ops.CurrentAttempt(m, s, r) }

func currentAttempt(m *Model, s *State, r int) bool {
	q := s.Req[r]
	if q.Key == None {
		return false
	}
	e := &s.Table[q.Key]
	return (e.St == Dispatching || m.LiveQuarantine(s, e)) && e.Attempt == q.Attempt
}

// Complete(r, o): the dispatcher learns outcome o. A stale attempt is fenced;
// a late result settles a quarantined attempt.
func (m *Model) Complete(s *State, r int, o Outcome) (State, Result, bool) {
	return m.ops.Complete(m, s, r, o)
}

func complete(m *Model, s *State, r int, o Outcome) (State, Result, bool) {
	q := s.Req[r]
	if q.Pc != PcDispatching && q.Pc != PcLate {
		return State{}, noResult, false
	}
	n := s.Clone()
	if !m.CurrentAttempt(s, r) { // fenced
		n.Req[r] = IdleReq
		return n, Result{Kind: ResFenced, Target: None, Attempt: q.Attempt}, true
	}
	return settle(m, s, n, r, o)
}

// settle applies outcome o to request r's current attempt.
func settle(m *Model, s *State, n State, r int, o Outcome) (State, Result, bool) {
	k := s.Req[r].Key
	e := s.Table[k]
	switch {
	case o == Accepted:
		n.Table[k] = boundEntry(e.Attempt, e.Target, e.TGen, 1, s.Now+m.Cfg.TTL)
		n.Req[r] = reqAt(PcHolding, k, e.Attempt)
		return n, Result{Kind: ResCommitted, Target: e.Target, Gen: e.TGen, Attempt: e.Attempt}, true
	case o == DefinitelyNotAccepted && e.St == Dispatching: // the reservation's own deadline
		n.Table[k] = reservedEntry(r, e.RDeadline)
		n.Req[r] = reqAt(PcReserved, k, 0)
		return n, Result{Kind: ResRolledBack, Target: None}, true
	case o == DefinitelyNotAccepted: // late: settles to absent
		n.Table[k] = AbsentEntry
		n.Req[r] = IdleReq
		return n, Result{Kind: ResSettledAbsent, Target: None, Attempt: e.Attempt}, true
	case e.St == Quarantined: // a late Ambiguous changes nothing
		n.Req[r] = IdleReq
		return n, Result{Kind: ResQuarantined, Target: e.Target, Gen: e.TGen, Attempt: e.Attempt}, true
	default: // Ambiguous: quarantine
		n.Table[k] = quarantinedEntry(e.Attempt, e.Target, e.TGen, m.ops.Began(s, &e)+m.Cfg.QuarantineTTL)
		n.Req[r] = IdleReq
		return n, Result{Kind: ResQuarantined, Target: e.Target, Gen: e.TGen, Attempt: e.Attempt}, true
	}
}

// Resolve(k, a, g, o): settle a quarantined key, fenced by attempt id and
// generation; a mismatch, or a quarantine that is over, is rejected and
// changes nothing.
func (m *Model) Resolve(s *State, k, a, g int, o Resolution) (State, Result, bool) {
	return m.ops.Resolve(m, s, k, a, g, o)
}

func resolve(m *Model, s *State, k, a, g int, o Resolution) (State, Result, bool) {
	e := s.Table[k]
	if e.St != Quarantined {
		return State{}, noResult, false
	}
	if !m.LiveQuarantine(s, &e) || a != e.Attempt || g != e.TGen {
		return s.Clone(), Result{Kind: ResFenced, Target: e.Target, Gen: e.TGen, Attempt: e.Attempt}, true
	}
	return applyResolution(m, s, k, o)
}

func applyResolution(m *Model, s *State, k int, o Resolution) (State, Result, bool) {
	e := s.Table[k]
	n := s.Clone()
	if o == ResolvedAccepted {
		n.Table[k] = boundEntry(e.Attempt, e.Target, e.TGen, 0, s.Now+m.Cfg.TTL)
		return n, Result{Kind: ResCommitted, Target: e.Target, Gen: e.TGen, Attempt: e.Attempt}, true
	}
	n.Table[k] = AbsentEntry
	return n, Result{Kind: ResSettledAbsent, Target: None, Attempt: e.Attempt}, true
}

// HoldsLease reports whether request r's lease names its key's current
// binding version.
func (m *Model) HoldsLease(s *State, r int) bool {
	q := s.Req[r]
	if q.Key == None {
		return false
	}
	e := &s.Table[q.Key]
	return e.St == Bound && e.Attempt == q.Attempt
}

// EndLease(r, refresh): the count drops; a closing binding goes at its last
// lease; a lease on a superseded version changes nothing but itself.
func (m *Model) EndLease(s *State, r int, refresh bool) (State, Result, bool) {
	return m.ops.EndLease(m, s, r, refresh)
}

func endLease(m *Model, s *State, r int, refresh bool) (State, Result, bool) {
	q := s.Req[r]
	if q.Pc != PcHolding {
		return State{}, noResult, false
	}
	n := s.Clone()
	n.Req[r] = IdleReq
	if !m.HoldsLease(s, r) {
		return n, Result{Kind: ResSuperseded, Target: None, Attempt: q.Attempt}, true
	}
	e := s.Table[q.Key]
	switch {
	case e.Leases == 1 && e.Closing:
		n.Table[q.Key] = AbsentEntry
	default:
		n.Table[q.Key].Leases--
		if refresh && e.Leases == 1 {
			n.Table[q.Key].Deadline = s.Now + m.Cfg.TTL
		}
	}
	return n, Result{Kind: ResEnded, Target: None, Attempt: q.Attempt}, true
}

// Release(r): the request is done; at zero leases the idle deadline restarts.
func (m *Model) Release(s *State, r int) (State, Result, bool) { return m.EndLease(s, r, true) }

// Abandon(r): the lease ends without refreshing the idle deadline.
func (m *Model) Abandon(s *State, r int) (State, Result, bool) { return m.EndLease(s, r, false) }

// Invalidate(r): the binding is bad; remove it if still current, else act as
// Release.
func (m *Model) Invalidate(s *State, r int) (State, Result, bool) { return m.ops.Invalidate(m, s, r) }

func invalidate(m *Model, s *State, r int) (State, Result, bool) {
	q := s.Req[r]
	if q.Pc != PcHolding {
		return State{}, noResult, false
	}
	if !m.HoldsLease(s, r) {
		return m.Release(s, r)
	}
	n := s.Clone()
	n.Table[q.Key] = AbsentEntry
	n.Req[r] = IdleReq
	return n, Result{Kind: ResEnded, Target: None, Attempt: q.Attempt}, true
}

// Close(r): the session's final request. The binding is removed when its
// last lease ends, never while others still hold leases.
func (m *Model) Close(s *State, r int) (State, Result, bool) { return m.ops.Close(m, s, r) }

func closeLease(m *Model, s *State, r int) (State, Result, bool) {
	q := s.Req[r]
	if q.Pc != PcHolding {
		return State{}, noResult, false
	}
	n := s.Clone()
	n.Req[r] = IdleReq
	if !m.HoldsLease(s, r) {
		return n, Result{Kind: ResSuperseded, Target: None, Attempt: q.Attempt}, true
	}
	if s.Table[q.Key].Leases == 1 {
		n.Table[q.Key] = AbsentEntry
	} else {
		n.Table[q.Key].Leases--
		n.Table[q.Key].Closing = true
	}
	return n, Result{Kind: ResEnded, Target: None, Attempt: q.Attempt}, true
}

func (m *Model) removeIf(s *State, k int, cond bool) (State, Result, bool) {
	if !cond {
		return State{}, noResult, false
	}
	n := s.Clone()
	n.Table[k] = AbsentEntry
	return n, Result{Kind: ResRemoved, Target: None}, true
}

// InvalidateKey(k): the router drops k's binding.
func (m *Model) InvalidateKey(s *State, k int) (State, Result, bool) {
	return m.removeIf(s, k, s.Table[k].St == Bound)
}

// Expire(k): an idle binding past its deadline is reclaimed (lazily on access
// and by the reaper).
func (m *Model) Expire(s *State, k int) (State, Result, bool) { return m.ops.Expire(m, s, k) }

func expire(m *Model, s *State, k int) (State, Result, bool) {
	return m.removeIf(s, k, m.Expired(s, &s.Table[k]))
}

// DropStale(k): a binding whose target's generation moved on is removed,
// leases or not (the reaper's eager half of the generation fence), and so
// is a quarantine whose target's generation moved on.
func (m *Model) DropStale(s *State, k int) (State, Result, bool) { return m.ops.DropStale(m, s, k) }

func dropStale(m *Model, s *State, k int) (State, Result, bool) {
	return m.removeIf(s, k, m.Stale(s, &s.Table[k]) || m.StaleQuarantine(s, &s.Table[k]))
}

// QuarantineExpire(k): a quarantine past its QuarantineTTL ends: the key is
// absent; a late guard is fenced from then on.
func (m *Model) QuarantineExpire(s *State, k int) (State, Result, bool) {
	return m.ops.QuarantineExpire(m, s, k)
}

func quarantineExpire(m *Model, s *State, k int) (State, Result, bool) {
	return m.removeIf(s, k, m.QuarantineDue(s, &s.Table[k]))
}

// ReservationTimeout(k): reserved too long -> absent; the holder's
// reservation is revoked.
func (m *Model) ReservationTimeout(s *State, k int) (State, Result, bool) {
	return m.ops.ReservationTimeout(m, s, k)
}

func reservationTimeout(m *Model, s *State, k int) (State, Result, bool) {
	e := s.Table[k]
	if e.St != Reserved || e.Deadline > s.Now {
		return State{}, noResult, false
	}
	n := s.Clone()
	n.Table[k] = AbsentEntry
	n.Req[e.Holder].Pc = PcRevoked
	return n, Result{Kind: ResRemoved, Target: None}, true
}

// DispatchTimeout(k): dispatching too long -> quarantined; the guard is now
// late and may still deliver the real result. QuarantineTTL counts from the
// dispatch's deadline, however late the timeout is applied.
func (m *Model) DispatchTimeout(s *State, k int) (State, Result, bool) {
	return m.ops.DispatchTimeout(m, s, k)
}

func dispatchTimeout(m *Model, s *State, k int) (State, Result, bool) {
	e := s.Table[k]
	if e.St != Dispatching || e.Deadline > s.Now {
		return State{}, noResult, false
	}
	n := s.Clone()
	n.Table[k] = quarantinedEntry(e.Attempt, e.Target, e.TGen, m.ops.Began(s, &e)+m.Cfg.QuarantineTTL)
	n.Req[e.Holder].Pc = PcLate
	return n, Result{Kind: ResQuarantined, Target: e.Target, Gen: e.TGen, Attempt: e.Attempt}, true
}

// Bump(t): target t left or rejoined; its generation moves on.
func (m *Model) Bump(s *State, t int) (State, Result, bool) {
	if m.Cfg.MaxGen > 0 && s.Gen[t] >= m.Cfg.MaxGen {
		return State{}, noResult, false
	}
	n := s.Clone()
	n.Gen[t]++
	return n, Result{Kind: ResBumped, Target: t, Gen: n.Gen[t]}, true
}

// Advance(t): the clock moves forward to t. Going backwards, or to a time
// whose deadlines would not be representable, is rejected.
func (m *Model) Advance(s *State, t int64) (State, Result, bool) {
	if !m.AdvanceAllowed(s, t) {
		return State{}, noResult, false
	}
	n := s.Clone()
	n.Now = t
	return n, Result{Kind: ResAdvanced, Target: None}, true
}

// MaxDelay is the spec's MaxDelay: the longest delay a deadline is set at.
func (m *Model) MaxDelay() int64 {
	return max(m.Cfg.TTL, m.Cfg.QuarantineTTL, m.Cfg.ReserveTimeout, m.Cfg.DispatchTimeLimit)
}

// AdvanceAllowed is Advance's guard: t > now and t + MaxDelay fits below
// MaxClock (checked without overflowing).
func (m *Model) AdvanceAllowed(s *State, t int64) bool {
	return t > s.Now && t <= m.Cfg.MaxClock-m.MaxDelay()
}
