package model

import "sort"

// Invariant is a state predicate of the spec, by name.
type Invariant struct {
	Name  string
	Holds func(m *Model, s *State) bool
}

// ActionProperty is a spec property of the form [][P]_vars: P must hold of
// every step from s to t.
type ActionProperty struct {
	Name  string
	Holds func(m *Model, s, t *State) bool
}

// Invariants are the spec's invariants, by name.
var Invariants = map[string]Invariant{
	"TypeOK":               {"TypeOK", typeOK},
	"OneInitializer":       {"OneInitializer", oneInitializer},
	"LeasesMatchHandles":   {"LeasesMatchHandles", leasesMatchHandles},
	"LeasesReferToBinding": {"LeasesReferToBinding", leasesReferToBinding},
	"WithinCapacity":       {"WithinCapacity", withinCapacity},
}

// ActionProperties are the spec's action properties, by name.
var ActionProperties = map[string]ActionProperty{
	"BoundOnlyIfAccepted":        {"BoundOnlyIfAccepted", boundOnlyIfAccepted},
	"NoDispatchWhileQuarantined": {"NoDispatchWhileQuarantined", noDispatchWhileQuarantined},
	"FencedChangesNothing":       {"FencedChangesNothing", fencedChangesNothing},
	"NothingLeasedExpires":       {"NothingLeasedExpires", nothingLeasedExpires},
	"CloseWaitsForLastLease":     {"CloseWaitsForLastLease", closeWaitsForLastLease},
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
	return m.occupiedExcept(s, None) <= m.Cfg.Capacity
}

// is reports whether applying l to s yields t: TLC's reading of an action
// formula inside a property.
func (m *Model) is(s, t *State, l Label) bool {
	n, _, ok := m.Apply(s, l)
	return ok && n.Equal(t)
}

func (m *Model) label(act Action) Label {
	return Label{Act: act, R: None, K: None, T: None}
}

// BoundOnlyIfAccepted: a key becomes Bound (or changes binding version) only
// when an attempt on it is Accepted, by its dispatcher or a fenced Resolve.
func boundOnlyIfAccepted(m *Model, s, t *State) bool {
	for k := range s.Table {
		a, b := &s.Table[k], &t.Table[k]
		if !(b.St == Bound && (a.St != Bound || a.Attempt != b.Attempt)) {
			continue
		}
		ok := false
		for r, q := range s.Req {
			l := m.label(ActComplete)
			l.R, l.O = r, int(Accepted)
			if q.Key == k && m.CurrentAttempt(s, r) && b.Attempt == q.Attempt && m.is(s, t, l) {
				ok = true
			}
		}
		for g := 1; g <= m.genBound(s) && !ok; g++ {
			l := m.label(ActResolve)
			l.K, l.A, l.G, l.O = k, a.Attempt, g, int(ResolvedAccepted)
			if a.Attempt >= 1 && b.Attempt == a.Attempt && m.is(s, t, l) {
				ok = true
			}
		}
		if !ok {
			return false
		}
	}
	return true
}

// NoDispatchWhileQuarantined: a quarantined key leaves quarantine only when
// its attempt is settled, by a late result or a fenced Resolve.
func noDispatchWhileQuarantined(m *Model, s, t *State) bool {
	for k := range s.Table {
		a := &s.Table[k]
		if a.St != Quarantined || *a == t.Table[k] {
			continue
		}
		ok := false
		for r, q := range s.Req {
			for _, o := range []Outcome{Accepted, DefinitelyNotAccepted} {
				l := m.label(ActComplete)
				l.R, l.O = r, int(o)
				if q.Key == k && q.Attempt == a.Attempt && m.is(s, t, l) {
					ok = true
				}
			}
		}
		for _, o := range []Resolution{ResolvedAccepted, ResolvedNotAccepted} {
			l := m.label(ActResolve)
			l.K, l.A, l.G, l.O = k, a.Attempt, a.TGen, int(o)
			if m.is(s, t, l) {
				ok = true
			}
		}
		if !ok {
			return false
		}
	}
	return true
}

// FencedChangesNothing: fenced completions and resolves change nothing in
// the table.
func fencedChangesNothing(m *Model, s, t *State) bool {
	if tablesEqual(s.Table, t.Table) {
		return true
	}
	for r, q := range s.Req {
		if (q.Pc != PcDispatching && q.Pc != PcLate) || m.CurrentAttempt(s, r) {
			continue
		}
		for o := Accepted; o <= Ambiguous; o++ {
			l := m.label(ActComplete)
			l.R, l.O = r, int(o)
			if m.is(s, t, l) {
				return false
			}
		}
	}
	for k := range s.Table {
		e := &s.Table[k]
		if e.St != Quarantined {
			continue
		}
		for a := 1; a <= m.attemptBound(s); a++ {
			for g := 1; g <= m.genBound(s); g++ {
				if a == e.Attempt && g == e.TGen {
					continue
				}
				for o := ResolvedAccepted; o <= ResolvedNotAccepted; o++ {
					l := m.label(ActResolve)
					l.K, l.A, l.G, l.O = k, a, g, int(o)
					if m.is(s, t, l) {
						return false
					}
				}
			}
		}
	}
	return true
}

// NothingLeasedExpires: the clock only ever removes a binding no request
// holds.
func nothingLeasedExpires(m *Model, s, t *State) bool {
	for k := range s.Table {
		if s.Table[k].Leases == 0 || s.Table[k] == t.Table[k] {
			continue
		}
		l := m.label(ActExpire)
		l.K = k
		if m.is(s, t, l) {
			return false
		}
	}
	return true
}

// CloseWaitsForLastLease: a closing binding is removed only when its last
// lease ends.
func closeWaitsForLastLease(m *Model, s, t *State) bool {
	for r, q := range s.Req {
		if q.Pc != PcHolding || !m.HoldsLease(s, r) || t.Table[q.Key].St == Bound ||
			s.Table[q.Key].Leases == 1 {
			continue
		}
		for _, act := range []Action{ActClose, ActRelease, ActAbandon} {
			l := m.label(act)
			l.R = r
			if m.is(s, t, l) {
				return false
			}
		}
	}
	return true
}
