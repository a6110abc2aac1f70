package model

import "sort"

// Invariant is a state predicate of the spec, by name.
type Invariant struct {
	Name  string
	Holds func(m *Model, s *State) bool
}

// ActionProperty is a spec property of the form [][P]_allvars: P must hold
// of every step, from s by the step labelled l (the spec's ghost `step`) to t.
type ActionProperty struct {
	Name  string
	Holds func(m *Model, s *State, l Label, t *State) bool
}

// Invariants are the spec's invariants, by name.
var Invariants = map[string]Invariant{
	"TypeOK":                 {"TypeOK", typeOK},
	"OneInitializer":         {"OneInitializer", oneInitializer},
	"WaitQueuesMatchWaiters": {"WaitQueuesMatchWaiters", waitQueuesMatchWaiters},
	"LeasesMatchHandles":     {"LeasesMatchHandles", leasesMatchHandles},
	"LeasesReferToBinding":   {"LeasesReferToBinding", leasesReferToBinding},
	"WithinCapacity":         {"WithinCapacity", withinCapacity},
	"ClosingHoldsALease":     {"ClosingHoldsALease", closingHoldsALease},
	"InitializationBounded":  {"InitializationBounded", initializationBounded},
}

// ActionProperties are the spec's action properties, by name.
var ActionProperties = map[string]ActionProperty{}

func init() {
	for _, p := range []ActionProperty{
		{"BoundOnlyIfAccepted", boundOnlyIfAccepted},
		{"UnsettledStaysVisible", unsettledStaysVisible},
		{"FencedChangesNothing", fencedChangesNothing},
		{"DispatchedUnderCurrentGeneration", dispatchedUnderCurrentGeneration},
		{"LeasesOnlyOnLiveBindings", leasesOnlyOnLiveBindings},
		{"LeaseActsOnlyOnItsVersion", leaseActsOnlyOnItsVersion},
		{"LeasedBindingEndsOnlyByLeaseInvalidationOrGeneration", leasedBindingEndsOnlyByLeaseInvalidationOrGeneration},
		{"DeadlinesRespected", deadlinesRespected},
		{"DeadlinesMatchTimeouts", deadlinesMatchTimeouts},
		{"DispatchedBeforeReservationDeadline", dispatchedBeforeReservationDeadline},
		{"RefusedOnlyWhenFull", refusedOnlyWhenFull},
		{"WaitersServedInOrder", waitersServedInOrder},
	} {
		ActionProperties[p.Name] = p
	}
}

// PropertyNames lists every invariant, action property and liveness
// property the model knows, sorted.
func PropertyNames() []string {
	var names []string
	for n := range Invariants {
		names = append(names, n)
	}
	for n := range ActionProperties {
		names = append(names, n)
	}
	for n := range LivenessProperties {
		names = append(names, n)
	}
	for n := range WitnessInvariants {
		names = append(names, n)
	}
	for n := range WitnessActions {
		names = append(names, n)
	}
	sort.Strings(names)
	return names
}

func typeOK(m *Model, s *State) bool {
	c := &m.Cfg
	if s.Now < 0 || s.Now > c.MaxClock || s.NextAttempt < 1 ||
		(c.MaxAttempt > 0 && s.NextAttempt > c.MaxAttempt+1) {
		return false
	}
	for _, g := range s.Gen {
		if g < 1 || (c.MaxGen > 0 && g > c.MaxGen) {
			return false
		}
	}
	for _, e := range s.Table {
		if e.St > Quarantined || e.Leases < 0 || e.Attempt < 0 || e.Attempt >= s.NextAttempt {
			return false
		}
	}
	for _, q := range s.Req {
		if q.Pc > PcHolding || q.Attempt < 0 || q.Attempt >= s.NextAttempt {
			return false
		}
	}
	return true
}

// OneInitializer: at most one request believes it initializes a key, and
// the table's Reserved/Dispatching entries name exactly that request.
func oneInitializer(m *Model, s *State) bool {
	for k := range s.Table {
		n := 0
		for _, q := range s.Req {
			if q.Key == k && (q.Pc == PcReserved || q.Pc == PcDispatching) {
				n++
			}
		}
		if n > 1 {
			return false
		}
	}
	for r, q := range s.Req {
		switch q.Pc {
		case PcReserved:
			e := &s.Table[q.Key]
			if e.St != Reserved || e.Holder != r {
				return false
			}
		case PcDispatching:
			e := &s.Table[q.Key]
			if e.St != Dispatching || e.Holder != r || e.Attempt != q.Attempt {
				return false
			}
		}
	}
	for k, e := range s.Table {
		if e.St != Reserved && e.St != Dispatching {
			continue
		}
		if e.Holder < 0 || e.Holder >= len(s.Req) {
			return false
		}
		h := s.Req[e.Holder]
		want := PcReserved
		if e.St == Dispatching {
			want = PcDispatching
		}
		if h.Key != k || h.Pc != want {
			return false
		}
	}
	return true
}

// WaitQueuesMatchWaiters: the wait queues hold exactly the waiting
// requests, each once, on the key it waits for, in the order they began to
// wait (the ghost Arrivals).
func waitQueuesMatchWaiters(m *Model, s *State) bool {
	seen := make([]bool, len(s.Req))
	for k, q := range s.Waitq {
		if len(q) != len(s.Arrivals[k]) {
			return false
		}
		for i, r := range q {
			if s.Arrivals[k][i] != r {
				return false
			}
			if r < 0 || r >= len(s.Req) || seen[r] || s.Req[r].Pc != PcWaiting || s.Req[r].Key != k {
				return false
			}
			seen[r] = true
		}
	}
	for r, q := range s.Req {
		if q.Pc == PcWaiting && !seen[r] {
			return false
		}
	}
	return true
}

// LeasesMatchHandles: leases equal the outstanding lease handles on the
// current binding version; other entry states hold none.
func leasesMatchHandles(m *Model, s *State) bool {
	for k, e := range s.Table {
		n := 0
		if e.St == Bound {
			for _, q := range s.Req {
				if q.Pc == PcHolding && q.Key == k && q.Attempt == e.Attempt {
					n++
				}
			}
		}
		if e.Leases != n {
			return false
		}
	}
	return true
}

// LeasesReferToBinding: every lease refers to its key's binding or to a
// superseded version.
func leasesReferToBinding(m *Model, s *State) bool {
	for _, q := range s.Req {
		if q.Pc != PcHolding {
			continue
		}
		e := &s.Table[q.Key]
		if q.Attempt < 1 ||
			(e.Attempt == q.Attempt && e.St != Bound) ||
			(e.St == Bound && q.Attempt > e.Attempt) {
			return false
		}
	}
	return true
}

// WithinCapacity: live entries never exceed the table's capacity.
func withinCapacity(m *Model, s *State) bool {
	return m.placesTaken(s, None) <= m.Cfg.Capacity
}

// The definitions below mirror the spec's property definitions (IsLive,
// InFlight, QuarantineHolds, TakesPlace, GuardIsCurrent, ResolveIsCurrent,
// KeepsBinding, KeepsAttempt, Settles, EndsLease, ReleasesLastLease).
// Properties use only these, the ghosts and the step's label, never the
// actions or the helpers actions use, so a broken variant cannot change what
// it is judged against (TestGoPropertiesUseOwnFunctions).

func isLive(s *State, e *Entry) bool {
	return e.St == Bound && s.Gen[e.Target] == e.TGen && !(e.Leases == 0 && e.Deadline <= s.Now)
}

func inFlight(e *Entry) bool { return e.St == Dispatching || e.St == Quarantined }

// quarantineHolds: key k is quarantined, its target is at the attempt's
// generation, and QuarantineTTL has not passed since the quarantine began.
func (m *Model) quarantineHolds(s *State, k int) bool {
	e := &s.Table[k]
	return e.St == Quarantined && s.Gen[e.Target] == e.TGen && s.Now < s.Since[k]+m.Cfg.QuarantineTTL
}

func (m *Model) takesPlace(s *State, k int) bool {
	e := &s.Table[k]
	return e.St == Reserved || e.St == Dispatching || m.quarantineHolds(s, k) || isLive(s, e)
}

// placesTaken counts the keys other than except (None: all) that take a place.
func (m *Model) placesTaken(s *State, except int) int {
	n := 0
	for k := range s.Table {
		if k != except && m.takesPlace(s, k) {
			n++
		}
	}
	return n
}

// guardIsCurrent: request r's dispatch guard names its key's attempt, and
// the key is dispatching it or its quarantine holds.
func (m *Model) guardIsCurrent(s *State, r int) bool {
	q := s.Req[r]
	if q.Key == None {
		return false
	}
	e := &s.Table[q.Key]
	return e.Attempt == q.Attempt && (e.St == Dispatching || m.quarantineHolds(s, q.Key))
}

// resolveIsCurrent: a Resolve naming attempt a and generation g may settle
// key k: its quarantine holds, under that attempt and generation.
func (m *Model) resolveIsCurrent(s *State, k, a, g int) bool {
	e := &s.Table[k]
	return m.quarantineHolds(s, k) && a == e.Attempt && g == e.TGen
}

func keepsBinding(s, t *State, k int) bool {
	return s.Table[k].St == Bound && t.Table[k].St == Bound && t.Table[k].Attempt == s.Table[k].Attempt
}

func keepsAttempt(s, t *State, k int) bool {
	return inFlight(&s.Table[k]) && inFlight(&t.Table[k]) && t.Table[k].Attempt == s.Table[k].Attempt
}

// settles: the step settles attempt a on key k (a definite outcome from its
// dispatcher, or a Resolve naming the attempt and its generation).
func settles(s *State, l Label, k, a int) bool {
	switch l.Act {
	case ActComplete:
		q := s.Req[l.R]
		return (Outcome(l.O) == Accepted || Outcome(l.O) == DefinitelyNotAccepted) && q.Key == k && q.Attempt == a
	case ActResolve:
		return l.K == k && l.A == a && l.G == s.Table[k].TGen
	}
	return false
}

func endsLease(l Label, r int) bool {
	switch l.Act {
	case ActRelease, ActAbandon, ActInvalidate, ActClose:
		return l.R == r
	}
	return false
}

// releasesLastLease: the step releases the last lease on key k's binding.
func releasesLastLease(s *State, l Label, k int) bool {
	if l.Act != ActRelease {
		return false
	}
	q := s.Req[l.R]
	return q.Key == k && q.Attempt == s.Table[k].Attempt && s.Table[k].Leases == 1
}

// BoundOnlyIfAccepted: a key becomes Bound (or changes binding version) only
// when the target reported Accepted for that attempt while it was unsettled
// on the key, or a Resolve naming the attempt and its generation said so.
func boundOnlyIfAccepted(m *Model, s *State, l Label, t *State) bool {
	for k := range s.Table {
		b := &t.Table[k]
		if b.St != Bound || keepsBinding(s, t, k) {
			continue
		}
		switch l.Act {
		case ActComplete:
			q := s.Req[l.R]
			if Outcome(l.O) == Accepted && q.Key == k && m.guardIsCurrent(s, l.R) && b.Attempt == q.Attempt {
				continue
			}
		case ActResolve:
			if Resolution(l.O) == ResolvedAccepted && l.K == k && m.resolveIsCurrent(s, k, l.A, l.G) && b.Attempt == l.A {
				continue
			}
		}
		return false
	}
	return true
}

// UnsettledStaysVisible: a dispatching or quarantined key keeps its attempt
// until the attempt is settled, or, once quarantined, until its target's
// generation moves on or QuarantineTTL has passed; never before.
func unsettledStaysVisible(m *Model, s *State, l Label, t *State) bool {
	for k := range s.Table {
		e := &s.Table[k]
		if inFlight(e) && !keepsAttempt(s, t, k) && !settles(s, l, k, e.Attempt) &&
			!(e.St == Quarantined && !m.quarantineHolds(s, k)) {
			return false
		}
	}
	return true
}

// FencedChangesNothing: a completion or Resolve naming an attempt (or a
// generation) that is not the key's unsettled one, or whose quarantine is
// over, changes nothing.
func fencedChangesNothing(m *Model, s *State, l Label, t *State) bool {
	switch l.Act {
	case ActComplete:
		if !m.guardIsCurrent(s, l.R) {
			return tablesEqual(s.Table, t.Table)
		}
	case ActResolve:
		if !m.resolveIsCurrent(s, l.K, l.A, l.G) {
			return tablesEqual(s.Table, t.Table)
		}
	}
	return true
}

// DispatchedUnderCurrentGeneration: every dispatch uses a fresh attempt id
// and the target's current generation; an attempt keeps its target and
// generation while in flight, quarantined or bound.
func dispatchedUnderCurrentGeneration(m *Model, s *State, l Label, t *State) bool {
	carries := func(e *Entry) bool { return inFlight(e) || e.St == Bound }
	for k := range s.Table {
		a, b := &s.Table[k], &t.Table[k]
		if b.St == Dispatching && !keepsAttempt(s, t, k) {
			if l.Act != ActBeginDispatch || b.Target != l.T || b.TGen != s.Gen[l.T] ||
				b.Attempt != s.NextAttempt || t.NextAttempt <= s.NextAttempt {
				return false
			}
		}
		if carries(a) && carries(b) && a.Attempt == b.Attempt && (a.Target != b.Target || a.TGen != b.TGen) {
			return false
		}
	}
	return true
}

// LeasesOnlyOnLiveBindings: a hit takes a lease only on a live binding.
func leasesOnlyOnLiveBindings(m *Model, s *State, l Label, t *State) bool {
	if l.Act != ActAcquire || t.Req[l.R].Pc != PcHolding {
		return true
	}
	e := &s.Table[l.K]
	return isLive(s, e) && t.Req[l.R].Attempt == e.Attempt
}

// LeaseActsOnlyOnItsVersion: ending a lease on a superseded version changes
// nothing in the table.
func leaseActsOnlyOnItsVersion(m *Model, s *State, l Label, t *State) bool {
	for r, q := range s.Req {
		if endsLease(l, r) && q.Key != None && s.Table[q.Key].Attempt != q.Attempt && !tablesEqual(s.Table, t.Table) {
			return false
		}
	}
	return true
}

// LeasedBindingEndsOnlyByLeaseInvalidationOrGeneration: a leased binding
// ends only through its own leases, an invalidation of its key, or its
// target's generation moving on.
func leasedBindingEndsOnlyByLeaseInvalidationOrGeneration(m *Model, s *State, l Label, t *State) bool {
	for k := range s.Table {
		a := &s.Table[k]
		if a.St != Bound || a.Leases == 0 || keepsBinding(s, t, k) {
			continue
		}
		if s.Gen[a.Target] != a.TGen || l.Act == ActInvalidateKey && l.K == k {
			continue
		}
		ok := false
		for r, q := range s.Req {
			if endsLease(l, r) && q.Key == k && q.Attempt == a.Attempt &&
				(l.Act == ActInvalidate || a.Leases == 1 && (a.Closing || l.Act == ActClose)) {
				ok = true
			}
		}
		if !ok {
			return false
		}
	}
	return true
}

// DeadlinesRespected: an idle current binding leaves before its deadline
// only by an invalidation; a reservation or dispatch changes before its
// deadline only by its holder's own step.
func deadlinesRespected(m *Model, s *State, l Label, t *State) bool {
	for k := range s.Table {
		a := &s.Table[k]
		if a.St == Bound && a.Leases == 0 && s.Gen[a.Target] == a.TGen && !keepsBinding(s, t, k) &&
			!(l.Act == ActInvalidateKey && l.K == k) && a.Deadline > s.Now {
			return false
		}
		if (a.St == Reserved || a.St == Dispatching) && *a != t.Table[k] && l.R != a.Holder && a.Deadline > s.Now {
			return false
		}
		if a.St == Reserved && *a != t.Table[k] && l.R != a.Holder && s.Now < s.Since[k]+m.Cfg.ReserveTimeout {
			return false
		}
	}
	return true
}

// DeadlinesMatchTimeouts: every deadline is the one its timeout sets: a
// reservation's is Since + ReserveTimeout (also after a rollback); a new
// dispatch's is now + DispatchTimeLimit, kept while it dispatches; a new
// binding's, or one whose last lease is released, now + TTL, kept
// otherwise; a quarantine's Since + QuarantineTTL.
func deadlinesMatchTimeouts(m *Model, s *State, l Label, t *State) bool {
	c := &m.Cfg
	for k := range t.Table {
		a, b := &s.Table[k], &t.Table[k]
		var want int64
		switch b.St {
		case Reserved:
			want = t.Since[k] + c.ReserveTimeout
		case Quarantined:
			want = t.Since[k] + c.QuarantineTTL
		case Dispatching:
			want = s.Now + c.DispatchTimeLimit
			if a.St == Dispatching && keepsAttempt(s, t, k) {
				want = a.Deadline
			}
		case Bound:
			want = s.Now + c.TTL
			if keepsBinding(s, t, k) && !releasesLastLease(s, l, k) {
				want = a.Deadline
			}
		default:
			continue
		}
		if b.Deadline != want {
			return false
		}
	}
	return true
}

// DispatchedBeforeReservationDeadline: a dispatch begins strictly before
// ReserveTimeout has passed since its key was reserved.
func dispatchedBeforeReservationDeadline(m *Model, s *State, l Label, t *State) bool {
	for k := range t.Table {
		if t.Table[k].St == Dispatching && !keepsAttempt(s, t, k) && s.Now >= s.Since[k]+m.Cfg.ReserveTimeout {
			return false
		}
	}
	return true
}

// RefusedOnlyWhenFull: a request is refused for capacity only when the
// other keys take every place.
func refusedOnlyWhenFull(m *Model, s *State, l Label, t *State) bool {
	if l.Act != ActAcquire || t.Req[l.R].Pc != PcIdle || m.quarantineHolds(s, l.K) {
		return true
	}
	return m.placesTaken(s, l.K) >= m.Cfg.Capacity
}

// WaitersServedInOrder: a key that was not initializing is reserved only by
// the request that has waited on it longest (the first of the ghost
// Arrivals, not the head of the queue the actions keep), if any waits.
func waitersServedInOrder(m *Model, s *State, l Label, t *State) bool {
	for k := range s.Table {
		a := &s.Table[k]
		if a.St != Reserved && a.St != Dispatching && t.Table[k].St == Reserved && len(s.Arrivals[k]) > 0 &&
			l.R != s.Arrivals[k][0] {
			return false
		}
	}
	return true
}

// InitializationBounded: every deadline an initialization carries is at
// most since + ReserveTimeout + DispatchTimeLimit.
func initializationBounded(m *Model, s *State) bool {
	for k, e := range s.Table {
		if (e.St == Reserved || e.St == Dispatching) && e.Deadline > s.Since[k]+m.Cfg.ReserveTimeout+m.Cfg.DispatchTimeLimit {
			return false
		}
	}
	return true
}

// ClosingHoldsALease: a closing binding always has a lease.
func closingHoldsALease(m *Model, s *State) bool {
	for _, e := range s.Table {
		if e.St == Bound && e.Closing && e.Leases < 1 {
			return false
		}
	}
	return true
}
