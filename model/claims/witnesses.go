package claims

import "math/bits"

// WitnessInvariants and WitnessActions mirror spec/tla/MCClaims.tla's
// Never* definitions: each says an interesting situation never happens, and
// its MCClaimsWitness*.cfg must report it violated, which shows that the
// constants reach the situation. They are not properties of the protocol.
var (
	WitnessInvariants = map[string]Invariant{}
	WitnessActions    = map[string]ActionProperty{}
)

func init() {
	for _, inv := range []Invariant{
		{"NeverQuarantineSeenByTwo", func(m *Model, s *State) bool {
			for ss := range m.Cfg.Sessions {
				n := 0
				for r := range m.Cfg.Replicas {
					if s.Cache[m.ix(r, ss)].St == StQuarantined {
						n++
					}
				}
				if n >= 2 {
					return false
				}
			}
			return true
		}},
		{"NeverCloseDeferred", func(m *Model, s *State) bool {
			for _, c := range s.Claim {
				if c.St == StClosing {
					return false
				}
			}
			return true
		}},
		{"NeverMove", func(m *Model, s *State) bool {
			for _, ms := range s.Moves {
				if len(ms) > 0 {
					return false
				}
			}
			return true
		}},
		{"NeverClosingTwoHolders", func(m *Model, s *State) bool {
			for ss, c := range s.Claim {
				if c.St == StClosing && bits.OnesCount64(s.Holders[ss]) >= 2 {
					return false
				}
			}
			return true
		}},
	} {
		WitnessInvariants[inv.Name] = inv
	}
	for _, p := range []ActionProperty{
		{"NeverResetEvicts", func(m *Model, s *State, l Label, t *State) bool {
			if l.Act != ActReceive || !s.Chan[l.R][0].Reset {
				return true
			}
			for ss := range m.Cfg.Sessions {
				if s.Cache[m.ix(l.R, ss)].St.claimed() {
					return false
				}
			}
			return true
		}},
		{"NeverStaleDelete", func(m *Model, s *State, l Label, t *State) bool {
			if l.Act != ActReceive || s.Chan[l.R][0].Reset {
				return true
			}
			ev := s.Chan[l.R][0]
			e := s.Cache[m.ix(l.R, ev.S)]
			return !(e.St.claimed() && e.Rev > ev.Rev)
		}},
		{"NeverCrashWhileHolding", func(m *Model, s *State, l Label, t *State) bool {
			if l.Act != ActCrash {
				return true
			}
			for _, h := range s.Holders {
				if h&(1<<uint(l.R)) != 0 {
					return false
				}
			}
			return true
		}},
		{"NeverReconcileConflict", func(m *Model, s *State, l Label, t *State) bool {
			if l.Act != ActReconcile {
				return true
			}
			c := s.Claim[l.S]
			return !(c.St != StNone && s.Gen[c.Target] == c.Gen && c.Target != s.Cache[m.ix(l.R, l.S)].Target)
		}},
		{"NeverExpireCached", func(m *Model, s *State, l Label, t *State) bool {
			if l.Act != ActExpire {
				return true
			}
			for r := range m.Cfg.Replicas {
				e := s.Cache[m.ix(r, l.S)]
				if e.St.claimed() && e.Rev == s.Claim[l.S].Rev {
					return false
				}
			}
			return true
		}},
		{"NeverRouteInWindow", func(m *Model, s *State, l Label, t *State) bool {
			if l.Act != ActRoute || !s.Up[l.R] {
				return true
			}
			i := m.ix(l.R, l.S)
			e, c := s.Cache[i], s.Claim[l.S]
			return !(t.Lease[i].N > s.Lease[i].N && e.St == StBound && !(c.St != StNone && c.Target == e.Target))
		}},
		{"NeverConcurrentMoves", func(m *Model, s *State, l Label, t *State) bool {
			if l.Act != ActMove {
				return true
			}
			from := s.Cache[m.ix(l.R, l.S)].Rev
			for _, mv := range s.Moves[l.S] {
				if mv.From == from {
					return false
				}
			}
			return true
		}},
		{"NeverMoveSeenByOther", func(m *Model, s *State, l Label, t *State) bool {
			if l.Act != ActReceive || s.Chan[l.R][0].Reset {
				return true
			}
			ev := s.Chan[l.R][0]
			if e := s.Cache[m.ix(l.R, ev.S)]; !e.St.claimed() || e.Rev != ev.Rev {
				return true
			}
			for _, mv := range s.Moves[ev.S] {
				if mv.From == ev.Rev {
					return false
				}
			}
			return true
		}},
		{"NeverRequarantine", func(m *Model, s *State, l Label, t *State) bool {
			for ss, c := range s.Claim {
				if c.St == StBound && c.Rev > s.Lineage[ss] && t.Claim[ss].St == StQuarantined {
					return false
				}
			}
			return true
		}},
		{"NeverReholdRewritten", func(m *Model, s *State, l Label, t *State) bool {
			if l.Act != ActReconnect {
				return true
			}
			for ss, c := range s.Claim {
				ls := s.Lease[m.ix(l.R, ss)]
				if ls.N > 0 && c.St == StBound && ls.Rev >= s.Lineage[ss] && ls.Rev != c.Rev {
					return false
				}
			}
			return true
		}},
	} {
		WitnessActions[p.Name] = p
	}
}
