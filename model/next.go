package model

import "fmt"

// Action names a spec action.
type Action uint8

// The spec's actions, in the order of its Next disjunction.
const (
	ActAcquire Action = iota
	ActCancel
	ActBeginDispatch
	ActComplete
	ActResolve
	ActRelease
	ActAbandon
	ActInvalidate
	ActClose
	ActInvalidateKey
	ActExpire
	ActDropStale
	ActQuarantineExpire
	ActReservationTimeout
	ActDispatchTimeout
	ActBump
	ActAdvance
	numActions
)

// ActionNames are the spec's action names, indexed by Action.
var ActionNames = [numActions]string{"Acquire", "Cancel", "BeginDispatch", "Complete", "Resolve",
	"Release", "Abandon", "Invalidate", "Close", "InvalidateKey", "Expire", "DropStale",
	"QuarantineExpire", "ReservationTimeout", "DispatchTimeout", "Bump", "Advance"}

// String returns the name of a as the spec writes it.
func (a Action) String() string {
	if a < numActions {
		return ActionNames[a]
	}
	return fmt.Sprintf("Action(%d)", uint8(a))
}

// Label is one instance of an action: the action and its parameters.
// Unused parameters are None.
type Label struct {
	Act     Action
	R, K, T int   // request, key, target
	A, G, O int   // attempt, generation, outcome or resolution
	Time    int64 // Advance's target time
}

// Format renders l in the spec's syntax, e.g. Acquire(r1, k2).
func (m *Model) Format(l Label) string {
	c := &m.Cfg
	switch l.Act {
	case ActAcquire:
		return fmt.Sprintf("Acquire(%s, %s)", c.Requests[l.R], c.Keys[l.K])
	case ActCancel, ActRelease, ActAbandon, ActInvalidate, ActClose:
		return fmt.Sprintf("%s(%s)", l.Act, c.Requests[l.R])
	case ActBeginDispatch:
		return fmt.Sprintf("BeginDispatch(%s, %s)", c.Requests[l.R], c.Targets[l.T])
	case ActComplete:
		return fmt.Sprintf("Complete(%s, %q)", c.Requests[l.R], Outcome(l.O).String())
	case ActResolve:
		return fmt.Sprintf("Resolve(%s, %d, %d, %q)", c.Keys[l.K], l.A, l.G, Resolution(l.O).String())
	case ActInvalidateKey, ActExpire, ActDropStale, ActQuarantineExpire, ActReservationTimeout, ActDispatchTimeout:
		return fmt.Sprintf("%s(%s)", l.Act, c.Keys[l.K])
	case ActBump:
		return fmt.Sprintf("Bump(%s)", c.Targets[l.T])
	case ActAdvance:
		return fmt.Sprintf("Advance(%d)", l.Time)
	}
	return l.Act.String()
}

// Apply performs the action l names on s.
func (m *Model) Apply(s *State, l Label) (State, Result, bool) {
	n, res, ok := m.apply(s, l)
	if ok {
		m.Track(s, &n)
	}
	return n, res, ok
}

// Track sets the ghosts of t, the state after a step from s, as the spec's
// TrackSince and TrackArrivals do: Since (a key that starts a phase,
// initializing or quarantined, records when; one that ends it forgets) and
// Arrivals (a request that stops waiting on a key leaves its sequence, one
// that begins to wait on it is appended). Like the spec's, they are written
// with helpers of their own, never with an action or a helper an action
// uses, so a bug there cannot move the ghosts with it
// (TestGoPropertiesUseOwnFunctions).
func (m *Model) Track(s, t *State) {
	since := make([]int64, len(t.Table))
	for k := range t.Table {
		switch p := phase(&t.Table[k]); {
		case p == 0:
		case p == phase(&s.Table[k]):
			since[k] = s.Since[k]
		default:
			since[k] = phaseStart(s, k)
		}
	}
	t.Since = since
	t.Arrivals = arrivalsAfter(s, t)
}

// phase is the spec's Phase: 1 initializing, 2 quarantined, 0 neither.
func phase(e *Entry) int {
	switch e.St {
	case Reserved, Dispatching:
		return 1
	case Quarantined:
		return 2
	}
	return 0
}

// phaseStart is the spec's PhaseStart(k): when a phase key k begins in a
// step from s began: now, except a quarantine whose dispatch was past its
// deadline, which began at that deadline.
func phaseStart(s *State, k int) int64 {
	if e := &s.Table[k]; e.St == Dispatching && e.Deadline <= s.Now {
		return e.Deadline
	}
	return s.Now
}

// waitsOn is the spec's WaitsOn(q, k).
func waitsOn(q Req, k int) bool { return q.Pc == PcWaiting && q.Key == k }

// arrivalsAfter is the spec's TrackArrivals: each key's arrivals in s that
// still wait on it in t, then the one request that began to wait on it in
// the step (none if several did).
func arrivalsAfter(s, t *State) [][]int {
	out := make([][]int, len(t.Table))
	for k := range t.Table {
		var q []int
		if k < len(s.Arrivals) {
			for _, r := range s.Arrivals[k] {
				if waitsOn(t.Req[r], k) {
					q = append(q, r)
				}
			}
		}
		joined, n := None, 0
		for r := range t.Req {
			if waitsOn(t.Req[r], k) && !waitsOn(s.Req[r], k) {
				joined, n = r, n+1
			}
		}
		if n == 1 {
			q = append(q, joined)
		}
		out[k] = q
	}
	return out
}

func (m *Model) apply(s *State, l Label) (State, Result, bool) {
	switch l.Act {
	case ActAcquire:
		return m.Acquire(s, l.R, l.K)
	case ActCancel:
		return m.Cancel(s, l.R)
	case ActBeginDispatch:
		return m.BeginDispatch(s, l.R, l.T)
	case ActComplete:
		return m.Complete(s, l.R, Outcome(l.O))
	case ActResolve:
		return m.Resolve(s, l.K, l.A, l.G, Resolution(l.O))
	case ActRelease:
		return m.Release(s, l.R)
	case ActAbandon:
		return m.Abandon(s, l.R)
	case ActInvalidate:
		return m.Invalidate(s, l.R)
	case ActClose:
		return m.Close(s, l.R)
	case ActInvalidateKey:
		return m.InvalidateKey(s, l.K)
	case ActExpire:
		return m.Expire(s, l.K)
	case ActDropStale:
		return m.DropStale(s, l.K)
	case ActQuarantineExpire:
		return m.QuarantineExpire(s, l.K)
	case ActReservationTimeout:
		return m.ReservationTimeout(s, l.K)
	case ActDispatchTimeout:
		return m.DispatchTimeout(s, l.K)
	case ActBump:
		return m.Bump(s, l.T)
	case ActAdvance:
		return m.Advance(s, l.Time)
	}
	return State{}, noResult, false
}

// Steps calls yield for every enabled instance of the spec's Next in s, in
// the order of its disjunction, with the successor state. Stuttering steps
// (successor equal to s) are included, as TLC generates them.
func (m *Model) Steps(s *State, yield func(Label, *State)) {
	c := &m.Cfg
	nr, nk, nt := len(c.Requests), len(c.Keys), len(c.Targets)
	try := func(l Label) {
		if n, _, ok := m.Apply(s, l); ok {
			yield(l, &n)
		}
	}
	base := Label{R: None, K: None, T: None}
	for r := 0; r < nr; r++ {
		for k := 0; k < nk; k++ {
			l := base
			l.Act, l.R, l.K = ActAcquire, r, k
			try(l)
		}
	}
	for r := 0; r < nr; r++ {
		l := base
		l.Act, l.R = ActCancel, r
		try(l)
	}
	for r := 0; r < nr; r++ {
		for t := 0; t < nt; t++ {
			l := base
			l.Act, l.R, l.T = ActBeginDispatch, r, t
			try(l)
		}
	}
	for r := 0; r < nr; r++ {
		for o := Accepted; o <= Ambiguous; o++ {
			l := base
			l.Act, l.R, l.O = ActComplete, r, int(o)
			try(l)
		}
	}
	for k := 0; k < nk; k++ {
		if s.Table[k].St != Quarantined {
			continue
		}
		for a := 1; a <= m.attemptBound(s); a++ {
			for g := 1; g <= m.genBound(s); g++ {
				for o := ResolvedAccepted; o <= ResolvedNotAccepted; o++ {
					l := base
					l.Act, l.K, l.A, l.G, l.O = ActResolve, k, a, g, int(o)
					try(l)
				}
			}
		}
	}
	for _, act := range []Action{ActRelease, ActAbandon, ActInvalidate, ActClose} {
		for r := 0; r < nr; r++ {
			l := base
			l.Act, l.R = act, r
			try(l)
		}
	}
	for _, act := range []Action{ActInvalidateKey, ActExpire, ActDropStale, ActQuarantineExpire, ActReservationTimeout, ActDispatchTimeout} {
		for k := 0; k < nk; k++ {
			l := base
			l.Act, l.K = act, k
			try(l)
		}
	}
	for t := 0; t < nt; t++ {
		l := base
		l.Act, l.T = ActBump, t
		try(l)
	}
	for t := s.Now + 1; t <= c.MaxClock; t++ {
		l := base
		l.Act, l.Time = ActAdvance, t
		try(l)
	}
}

// attemptBound and genBound are the ranges Resolve's fenced arguments are
// drawn from (the spec's Attempts and 1..MaxGen); unbounded configs use what
// the state has issued so far.
func (m *Model) attemptBound(s *State) int {
	if m.Cfg.MaxAttempt > 0 {
		return m.Cfg.MaxAttempt
	}
	return s.NextAttempt - 1
}

func (m *Model) genBound(s *State) int {
	if m.Cfg.MaxGen > 0 {
		return m.Cfg.MaxGen
	}
	g := 1
	for _, x := range s.Gen {
		g = max(g, x)
	}
	return g
}
