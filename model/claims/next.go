package claims

import "fmt"

// Action names a spec action.
type Action uint8

// The spec's actions, in the order of its Next disjunction.
const (
	ActClaim Action = iota
	ActPlaceLocal
	ActMove
	ActRoute
	ActRelease
	ActAmbiguous
	ActResolve
	ActClose
	ActReconcile
	ActExpire
	ActBumpGeneration
	ActReceive
	ActDuplicate
	ActDrop
	ActDisconnect
	ActReconnect
	ActCrash
	numActions
)

// ActionNames are the spec's action names, indexed by Action, in the order
// of Claims.tla's Next.
var ActionNames = [numActions]string{"Claim", "PlaceLocal", "Move", "Route", "Release", "Ambiguous",
	"Resolve", "Close", "Reconcile", "Expire", "BumpGeneration", "Receive", "Duplicate", "Drop",
	"Disconnect", "Reconnect", "Crash"}

// String returns the name of a as the spec writes it.
func (a Action) String() string {
	if a < numActions {
		return ActionNames[a]
	}
	return fmt.Sprintf("Action(%d)", uint8(a))
}

// Label is one instance of an action: the spec's ghost step. Unused
// parameters are None (A is 0 unless the action is Resolve).
type Label struct {
	Act      Action
	R, S, W  int  // replica, session, worker
	A        int  // Resolve's attempt
	Accepted bool // Resolve's outcome
}

// Format renders l in the spec's syntax, e.g. Route(r1, s1).
func (m *Model) Format(l Label) string {
	c := &m.Cfg
	switch l.Act {
	case ActClaim, ActPlaceLocal, ActMove:
		return fmt.Sprintf("%s(%s, %s, %s)", l.Act, c.Replicas[l.R], c.Sessions[l.S], c.Workers[l.W])
	case ActRoute, ActRelease, ActAmbiguous, ActClose, ActReconcile:
		return fmt.Sprintf("%s(%s, %s)", l.Act, c.Replicas[l.R], c.Sessions[l.S])
	case ActResolve:
		o := "NotAccepted"
		if l.Accepted {
			o = "Accepted"
		}
		return fmt.Sprintf("Resolve(%s, %d, %q)", c.Sessions[l.S], l.A, o)
	case ActExpire:
		return fmt.Sprintf("Expire(%s)", c.Sessions[l.S])
	case ActBumpGeneration:
		return fmt.Sprintf("BumpGeneration(%s)", c.Workers[l.W])
	}
	return fmt.Sprintf("%s(%s)", l.Act, c.Replicas[l.R])
}

// apply performs the action l names on s, without the ghost.
func (m *Model) apply(s *State, l Label) (State, bool) {
	switch l.Act {
	case ActClaim:
		return m.Claim(s, l.R, l.S, l.W)
	case ActPlaceLocal:
		return m.PlaceLocal(s, l.R, l.S, l.W)
	case ActMove:
		return m.Move(s, l.R, l.S, l.W)
	case ActRoute:
		return m.Route(s, l.R, l.S)
	case ActRelease:
		return m.Release(s, l.R, l.S)
	case ActAmbiguous:
		return m.Ambiguous(s, l.R, l.S)
	case ActResolve:
		return m.Resolve(s, l.S, l.A, l.Accepted)
	case ActClose:
		return m.Close(s, l.R, l.S)
	case ActReconcile:
		return m.Reconcile(s, l.R, l.S)
	case ActExpire:
		return m.Expire(s, l.S)
	case ActBumpGeneration:
		return m.BumpGeneration(s, l.W)
	case ActReceive:
		return m.Receive(s, l.R)
	case ActDuplicate:
		return m.Duplicate(s, l.R)
	case ActDrop:
		return m.Drop(s, l.R)
	case ActDisconnect:
		return m.Disconnect(s, l.R)
	case ActReconnect:
		return m.Reconnect(s, l.R)
	case ActCrash:
		return m.Crash(s, l.R)
	}
	return State{}, false
}

// Apply performs the step l names on s, the ghosts ended, lineage and
// moves included (the spec's Next /\ TrackEnded /\ TrackLineage /\
// TrackMoves), and reports whether it is enabled. Like the spec's Did, it
// counts faults against MaxFaults and moves against MaxMoves.
func (m *Model) Apply(s *State, l Label) (State, bool) {
	fault := l.Act.IsFault()
	if fault && s.Faults >= m.Cfg.MaxFaults || l.Act == ActMove && s.NMoves >= m.Cfg.MaxMoves {
		return State{}, false
	}
	n, ok := m.apply(s, l)
	if ok {
		if fault {
			n.Faults = s.Faults + 1
		}
		if l.Act == ActMove {
			n.NMoves = s.NMoves + 1
		}
		TrackEnded(s, &n)
		TrackLineage(s, &n)
		TrackMoves(s, l, &n)
	}
	return n, ok
}

// IsFault reports whether a is one of the spec's FaultActions, which count
// against the fault budget MaxFaults (Did in the spec).
func (a Action) IsFault() bool {
	switch a {
	case ActBumpGeneration, ActDuplicate, ActDrop, ActDisconnect, ActCrash:
		return true
	}
	return false
}

// TrackEnded sets the ghost ended of t, the state after a step from s, as
// the spec's TrackEnded does: a claim revision that stops being current
// is recorded. It uses no action or helper an action uses.
func TrackEnded(s, t *State) {
	for ss, c := range s.Claim {
		if c.St != StNone && (t.Claim[ss].St == StNone || t.Claim[ss].Rev != c.Rev) {
			t.Ended[ss] = s.Ended[ss] | 1<<uint(c.Rev)
		} else {
			t.Ended[ss] = s.Ended[ss]
		}
	}
}

// TrackLineage sets the ghost lineage of t, the state after a step from s,
// as the spec's TrackLineage does: written as history, from the claims'
// states, targets and generations, never from their Born (which the
// actions write).
func TrackLineage(s, t *State) {
	for ss, c := range s.Claim {
		nc := t.Claim[ss]
		switch {
		case nc.St == StNone:
			t.Lineage[ss] = 0
		case c.St == StNone || nc.Target != c.Target || nc.Gen != c.Gen:
			t.Lineage[ss] = nc.Rev
		default:
			t.Lineage[ss] = s.Lineage[ss]
		}
	}
}

// TrackMoves sets the ghost moves of t, the state after step l from s, as
// the spec's TrackMoves does: a Move step that changes the session's claim
// records <<from, to>>, the revision the mover cached before the step and
// the claim's new revision. It reads the label, the cache and the claims,
// never the action's fence.
func TrackMoves(s *State, l Label, t *State) {
	for ss := range s.Claim {
		if nc := t.Claim[ss]; l.Act == ActMove && l.S == ss && nc != s.Claim[ss] && nc.St != StNone {
			t.Moves[ss] = addMove(s.Moves[ss], Move{From: s.Cache[l.R*len(s.Claim)+ss].Rev, To: nc.Rev})
		}
	}
}

// Steps calls yield with every step Next allows from s, in the order of
// Next's disjuncts and of their bound variables, as TLC generates them:
// one per enabled instance, stuttering ones included.
func (m *Model) Steps(s *State, yield func(Label, *State)) {
	c := &m.Cfg
	nr, ns, nw := len(c.Replicas), len(c.Sessions), len(c.Workers)
	try := func(l Label) {
		if n, ok := m.Apply(s, l); ok {
			yield(l, &n)
		}
	}
	for _, act := range []Action{ActClaim, ActPlaceLocal, ActMove} {
		for r := range nr {
			for ss := range ns {
				for w := range nw {
					try(Label{Act: act, R: r, S: ss, W: w})
				}
			}
		}
	}
	rs := func(act Action) {
		for r := range nr {
			for ss := range ns {
				try(Label{Act: act, R: r, S: ss, W: None})
			}
		}
	}
	rs(ActRoute)
	rs(ActRelease)
	rs(ActAmbiguous)
	for ss := range ns {
		for a := 1; a <= c.MaxRev; a++ {
			for _, acc := range []bool{true, false} {
				try(Label{Act: ActResolve, R: None, S: ss, W: None, A: a, Accepted: acc})
			}
		}
	}
	rs(ActClose)
	rs(ActReconcile)
	for ss := range ns {
		try(Label{Act: ActExpire, R: None, S: ss, W: None})
	}
	for w := range nw {
		try(Label{Act: ActBumpGeneration, R: None, S: None, W: w})
	}
	for _, act := range []Action{ActReceive, ActDuplicate, ActDrop, ActDisconnect, ActReconnect, ActCrash} {
		for r := range nr {
			try(Label{Act: act, R: r, S: None, W: None})
		}
	}
}
