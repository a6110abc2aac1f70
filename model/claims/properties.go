package claims

import "sort"

// Invariant is a spec invariant: a predicate every reachable state satisfies.
type Invariant struct {
	Name  string
	Holds func(m *Model, s *State) bool
}

// ActionProperty is a spec property of the form [][P]_allvars: P must hold
// of every step (s, l, t).
type ActionProperty struct {
	Name  string
	Holds func(m *Model, s *State, l Label, t *State) bool
}

// The guarantees are said with these helpers only, as Claims.tla says them
// with its own definitions (RoutesFromCache, EndNotYetSeen, ClaimCurrent,
// LeasesOnLineage), never with an action or a helper an action uses.

// routesFromCache is the spec's RoutesFromCache(r, s).
func routesFromCache(m *Model, s *State, r, ss int) bool {
	e := s.Cache[m.ix(r, ss)]
	return e.St == StBound && s.Gen[e.Target] == e.Gen
}

// endNotYetSeen is the spec's EndNotYetSeen(r, s, v).
func endNotYetSeen(s *State, r, ss, v int) bool {
	for _, ev := range s.Chan[r] {
		if ev.Reset || (ev.S == ss && ev.Rev == v) {
			return true
		}
	}
	return false
}

// claimCurrent is the spec's ClaimCurrent(s).
func claimCurrent(s *State, ss int) bool {
	c := s.Claim[ss]
	return c.St != StNone && s.Gen[c.Target] == c.Gen
}

// leasesOnLineage is the spec's LeasesOnLineage(r, s): measured against
// the ghost lineage, never the claim's Born (which the actions write).
func leasesOnLineage(m *Model, s *State, r, ss int) bool {
	l := s.Lease[m.ix(r, ss)]
	return l.N > 0 && s.Claim[ss].St != StNone && l.Rev >= s.Lineage[ss]
}

// dispatches is the spec's Dispatches(r, s) of the step from s to t.
func dispatches(m *Model, s, t *State, r, ss int) bool {
	i := m.ix(r, ss)
	return t.Lease[i].N > s.Lease[i].N
}

func holds(s *State, r, ss int) bool { return s.Holders[ss]&(1<<uint(r)) != 0 }

func inEnded(s *State, ss, v int) bool { return v >= 0 && v < 64 && s.Ended[ss]&(1<<uint(v)) != 0 }

// windowOK: r's cached revision of s ended and r has not yet seen its end.
func windowOK(m *Model, s *State, r, ss int) bool {
	v := s.Cache[m.ix(r, ss)].Rev
	return inEnded(s, ss, v) && endNotYetSeen(s, r, ss, v)
}

// Invariants are the spec's invariants, by name.
var Invariants = map[string]Invariant{}

// ActionProperties are the spec's action properties, by name.
var ActionProperties = map[string]ActionProperty{}

// PropertyNames lists every invariant, action property, liveness property
// and witness the model checks, sorted.
func PropertyNames() []string {
	var out []string
	for _, mp := range []map[string]Invariant{Invariants, WitnessInvariants} {
		for n := range mp {
			out = append(out, n)
		}
	}
	for _, mp := range []map[string]ActionProperty{ActionProperties, WitnessActions} {
		for n := range mp {
			out = append(out, n)
		}
	}
	for n := range LivenessProperties {
		out = append(out, n)
	}
	sort.Strings(out)
	return out
}

func init() {
	for _, inv := range []Invariant{
		{"TypeOK", func(m *Model, s *State) bool {
			c := &m.Cfg
			if s.Faults < 0 || s.Faults > c.MaxFaults || s.Rev < 0 || s.Rev > c.MaxRev || s.NMoves < 0 || s.NMoves > c.MaxMoves {
				return false
			}
			for _, g := range s.Gen {
				if g < 1 || g > c.MaxGen {
					return false
				}
			}
			for ss, cl := range s.Claim {
				if cl.St > StClosing || cl.Rev < 0 || cl.Rev > s.Rev {
					return false
				}
				if s.Holders[ss]>>uint(len(c.Replicas)) != 0 {
					return false
				}
				if s.Ended[ss]&^((uint64(1)<<uint(s.Rev+1))-2) != 0 { // ended ⊆ 1..rev
					return false
				}
				if s.Lineage[ss] < 0 || s.Lineage[ss] > s.Rev {
					return false
				}
				for _, mv := range s.Moves[ss] { // moves ⊆ (1..rev) × (1..rev)
					if mv.From < 1 || mv.From > s.Rev || mv.To < 1 || mv.To > s.Rev {
						return false
					}
				}
			}
			for r := range c.Replicas {
				if len(s.Chan[r]) > c.MaxChan {
					return false
				}
				for ss := range c.Sessions {
					if s.Cache[m.ix(r, ss)].St > StUnclaimed {
						return false
					}
					if n := s.Lease[m.ix(r, ss)].N; n < 0 || n > c.MaxLeases {
						return false
					}
				}
			}
			return true
		}},
		{"RoutingWindow", func(m *Model, s *State) bool {
			for r := range m.Cfg.Replicas {
				for ss := range m.Cfg.Sessions {
					if !s.Up[r] || !routesFromCache(m, s, r, ss) {
						continue
					}
					cl := s.Claim[ss]
					if cl.St != StNone && cl.Target == s.Cache[m.ix(r, ss)].Target {
						continue
					}
					if !windowOK(m, s, r, ss) {
						return false
					}
				}
			}
			return true
		}},
		{"Agreement", func(m *Model, s *State) bool {
			nr := len(m.Cfg.Replicas)
			for ss := range m.Cfg.Sessions {
				for r1 := range nr {
					a := s.Cache[m.ix(r1, ss)]
					if !a.St.claimed() {
						continue
					}
					for r2 := range nr {
						b := s.Cache[m.ix(r2, ss)]
						if b.St.claimed() && a.Rev == b.Rev && (a.Target != b.Target || a.Gen != b.Gen) {
							return false
						}
					}
					if cl := s.Claim[ss]; a.Rev == cl.Rev && (a.Target != cl.Target || a.Gen != cl.Gen) {
						return false
					}
				}
			}
			return true
		}},
		{"QuarantineEverywhere", func(m *Model, s *State) bool {
			for r := range m.Cfg.Replicas {
				for ss := range m.Cfg.Sessions {
					if s.Up[r] && s.Claim[ss].St == StQuarantined && claimCurrent(s, ss) &&
						routesFromCache(m, s, r, ss) && !windowOK(m, s, r, ss) {
						return false
					}
				}
			}
			return true
		}},
		{"HoldersCoverLeases", func(m *Model, s *State) bool {
			for r := range m.Cfg.Replicas {
				for ss := range m.Cfg.Sessions {
					if s.Up[r] && leasesOnLineage(m, s, r, ss) && s.Holders[ss]&(1<<uint(r)) == 0 {
						return false
					}
				}
			}
			return true
		}},
		{"HoldsAreLeases", func(m *Model, s *State) bool {
			for ss := range m.Cfg.Sessions {
				for r := range m.Cfg.Replicas {
					if s.Up[r] && holds(s, r, ss) && !leasesOnLineage(m, s, r, ss) {
						return false
					}
				}
			}
			return true
		}},
		{"CachedClaimsCurrent", func(m *Model, s *State) bool {
			for r := range m.Cfg.Replicas {
				for ss := range m.Cfg.Sessions {
					e := s.Cache[m.ix(r, ss)]
					if !s.Up[r] || !e.St.claimed() {
						continue
					}
					if c := s.Claim[ss]; c.St == e.St && c.Rev == e.Rev {
						continue
					}
					if !windowOK(m, s, r, ss) {
						return false
					}
				}
			}
			return true
		}},
		{"OneTargetOnceSeen", func(m *Model, s *State) bool {
			for ss := range m.Cfg.Sessions {
				for r1 := range m.Cfg.Replicas {
					for r2 := range m.Cfg.Replicas {
						if !s.Up[r1] || !s.Up[r2] || !routesFromCache(m, s, r1, ss) || !routesFromCache(m, s, r2, ss) ||
							s.Cache[m.ix(r1, ss)].Target == s.Cache[m.ix(r2, ss)].Target {
							continue
						}
						if !windowOK(m, s, r1, ss) && !windowOK(m, s, r2, ss) {
							return false
						}
					}
				}
			}
			return true
		}},
		{"FirstMoveWins", func(m *Model, s *State) bool {
			for _, ms := range s.Moves {
				for _, a := range ms {
					for _, b := range ms {
						if a.From == b.From && a != b {
							return false
						}
					}
				}
			}
			return true
		}},
	} {
		Invariants[inv.Name] = inv
	}
	for _, p := range []ActionProperty{
		{"FencedClose", func(m *Model, s *State, l Label, t *State) bool {
			if l.Act != ActClose {
				return true
			}
			c := s.Claim[l.S]
			if (c.St == StBound || c.St == StQuarantined) && s.Lease[m.ix(l.R, l.S)].Rev != c.Rev {
				return t.Claim[l.S] == c
			}
			return true
		}},
		{"NoExpiryInUse", func(m *Model, s *State, l Label, t *State) bool {
			if l.Act != ActExpire {
				return true
			}
			for r := range m.Cfg.Replicas {
				if s.Up[r] && leasesOnLineage(m, s, r, l.S) {
					return false
				}
			}
			return true
		}},
		{"NoCloseUnderOthersLeases", func(m *Model, s *State, l Label, t *State) bool {
			if (l.Act != ActClose && l.Act != ActRelease) || s.Claim[l.S].St == StNone || t.Claim[l.S].St != StNone {
				return true
			}
			for r := range m.Cfg.Replicas {
				if r != l.R && s.Up[r] && leasesOnLineage(m, s, r, l.S) {
					return false
				}
			}
			return true
		}},
		{"FirstWriterWins", func(m *Model, s *State, l Label, t *State) bool {
			for ss := range m.Cfg.Sessions {
				if claimCurrent(s, ss) && t.Claim[ss].St != StNone && !(l.Act == ActMove && l.S == ss) &&
					(t.Claim[ss].Target != s.Claim[ss].Target || t.Claim[ss].Gen != s.Claim[ss].Gen) {
					return false
				}
			}
			return true
		}},
		{"DispatchesFromCurrentClaim", func(m *Model, s *State, l Label, t *State) bool {
			for r := range m.Cfg.Replicas {
				for ss := range m.Cfg.Sessions {
					if !dispatches(m, s, t, r, ss) {
						continue
					}
					i := m.ix(r, ss)
					e, c := s.Cache[i], s.Claim[ss]
					if (e.St != StBound && e.St != StUnclaimed) || s.Gen[e.Target] != e.Gen || t.Lease[i].Rev != e.Rev {
						return false
					}
					if !s.Up[r] || e.St != StBound {
						continue
					}
					current := c.St == StBound && c.Rev == e.Rev
					if s.Lease[i].N == 0 {
						if !current || !holds(t, r, ss) {
							return false
						}
					} else if !current && !windowOK(m, s, r, ss) {
						return false
					}
				}
			}
			return true
		}},
		{"QuarantineLifecycle", func(m *Model, s *State, l Label, t *State) bool {
			for ss := range m.Cfg.Sessions {
				c, nc := s.Claim[ss], t.Claim[ss]
				if nc.St == StQuarantined && nc != c {
					if l.Act != ActAmbiguous || l.S != ss || c.St != StBound {
						return false
					}
					if ls := s.Lease[m.ix(l.R, ss)]; ls.N == 0 || ls.Rev != c.Rev || nc.Attempt != c.Rev {
						return false
					}
				}
				if c.St == StQuarantined && nc != c {
					settled := l.Act == ActResolve && l.S == ss && l.A == c.Attempt && s.Gen[c.Target] == c.Gen
					expired := l.Act == ActExpire && l.S == ss
					if !settled && !expired && s.Gen[c.Target] == c.Gen {
						return false
					}
				}
			}
			return true
		}},
		{"LineagesBeginByCreate", func(m *Model, s *State, l Label, t *State) bool {
			for ss, c := range s.Claim {
				if t.Claim[ss].St == StNone || t.Lineage[ss] == s.Lineage[ss] {
					continue
				}
				if l.Act == ActMove && l.S == ss && c.St == StBound {
					continue // a move of a Bound claim
				}
				if (l.Act != ActClaim && l.Act != ActReconcile) || l.S != ss {
					return false
				}
				if c.St != StNone && s.Gen[c.Target] == c.Gen {
					return false
				}
			}
			return true
		}},
		{"UnclaimedOnlyWhenUnreachable", func(m *Model, s *State, l Label, t *State) bool {
			for r := range m.Cfg.Replicas {
				for ss := range m.Cfg.Sessions {
					i := m.ix(r, ss)
					if t.Cache[i].St == StUnclaimed && t.Cache[i] != s.Cache[i] && s.Up[r] {
						return false
					}
				}
			}
			return true
		}},
	} {
		ActionProperties[p.Name] = p
	}
}

// LivenessProperty is a spec property \A r, s : P(r, s) ~> ~P(r, s) under
// the spec's Fairness: a situation P that must end does end.
type LivenessProperty struct {
	Name string
	Due  func(m *Model, s *State, r, ss int) bool // P(r, s)
}

// LivenessProperties are the spec's liveness properties, by name.
var LivenessProperties = map[string]LivenessProperty{
	"EndedEvicted":        {Name: "EndedEvicted", Due: evictionDue},
	"UnclaimedReconciled": {Name: "UnclaimedReconciled", Due: reconcileDue},
	"StaleReread":         {Name: "StaleReread", Due: rereadDue},
}

// evictionDue is the spec's EvictionDue(r, s).
func evictionDue(m *Model, s *State, r, ss int) bool {
	e := s.Cache[m.ix(r, ss)]
	return s.Up[r] && e.St.claimed() && inEnded(s, ss, e.Rev)
}

// reconcileDue is the spec's ReconcileDue(r, s).
func reconcileDue(m *Model, s *State, r, ss int) bool {
	return s.Up[r] && s.Cache[m.ix(r, ss)].St == StUnclaimed && s.Rev < m.Cfg.MaxRev
}

// rereadDue is the spec's RereadDue(r, s).
func rereadDue(m *Model, s *State, r, ss int) bool {
	e := s.Cache[m.ix(r, ss)]
	return s.Up[r] && e.St.claimed() && s.Gen[e.Target] != e.Gen && (claimCurrent(s, ss) || s.Rev < m.Cfg.MaxRev)
}
