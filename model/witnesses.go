package model

// WitnessInvariants and WitnessActions mirror spec/tla/MCPlacement.tla's
// Never* definitions: each says an interesting situation never happens, and
// its MCWitness*.cfg must report it violated, which shows that the
// constants reach the situation. They are not properties of the protocol.
var (
	WitnessInvariants = map[string]Invariant{}
	WitnessActions    = map[string]ActionProperty{}
)

func init() {
	for _, inv := range []Invariant{
		{"NeverTwoQuarantines", func(m *Model, s *State) bool {
			n := 0
			for _, e := range s.Table {
				if e.St == Quarantined {
					n++
				}
			}
			return n <= 1
		}},
		{"NeverThreeLeases", func(m *Model, s *State) bool {
			for _, e := range s.Table {
				if e.Leases >= 3 {
					return false
				}
			}
			return true
		}},
		{"NeverTwoBumps", func(m *Model, s *State) bool {
			for _, g := range s.Gen {
				if g >= 3 {
					return false
				}
			}
			return true
		}},
		{"NeverTwoWaiters", func(m *Model, s *State) bool {
			for _, q := range s.Waitq {
				if len(q) >= 2 {
					return false
				}
			}
			return true
		}},
	} {
		WitnessInvariants[inv.Name] = inv
	}
	for _, p := range []ActionProperty{
		{"NeverLateAcceptedAfterBump", func(m *Model, s *State, l Label, t *State) bool {
			if l.Act != ActComplete || Outcome(l.O) != Accepted {
				return true
			}
			q := s.Req[l.R]
			e := &s.Table[q.Key]
			return !(e.St == Quarantined && e.Attempt == q.Attempt && s.Gen[e.Target] != e.TGen)
		}},
		{"NeverStaleAtBirth", func(m *Model, s *State, l Label, t *State) bool {
			for k := range t.Table {
				b := &t.Table[k]
				if b.St == Bound && !keepsBinding(s, t, k) && t.Gen[b.Target] != b.TGen {
					return false
				}
			}
			return true
		}},
		{"NeverReleaseOnOldVersion", func(m *Model, s *State, l Label, t *State) bool {
			if l.Act != ActRelease {
				return true
			}
			q := s.Req[l.R]
			return s.Table[q.Key].Attempt == q.Attempt
		}},
		{"NeverDeadlineAtClockEnd", func(m *Model, s *State, l Label, t *State) bool {
			last := m.Cfg.MaxClock - m.MaxDelay()
			switch l.Act {
			case ActExpire, ActReservationTimeout, ActDispatchTimeout, ActQuarantineExpire:
				return s.Now != last
			}
			return true
		}},
		{"NeverQuarantineExpires", func(m *Model, s *State, l Label, t *State) bool {
			return l.Act != ActQuarantineExpire
		}},
		{"NeverStaleQuarantineDropped", func(m *Model, s *State, l Label, t *State) bool {
			return !(l.Act == ActDropStale && s.Table[l.K].St == Quarantined)
		}},
		{"NeverQueuesOnFreeKey", func(m *Model, s *State, l Label, t *State) bool {
			return !(l.Act == ActAcquire && s.Req[l.R].Pc == PcIdle && t.Req[l.R].Pc == PcWaiting &&
				m.Free(s, &s.Table[l.K]))
		}},
		{"NeverLateResultOnOverQuarantine", func(m *Model, s *State, l Label, t *State) bool {
			if l.Act != ActComplete {
				return true
			}
			q := s.Req[l.R]
			e := &s.Table[q.Key]
			return !(e.St == Quarantined && e.Attempt == q.Attempt && !m.quarantineHolds(s, q.Key))
		}},
		{"NeverResolveOnOverQuarantine", func(m *Model, s *State, l Label, t *State) bool {
			if l.Act != ActResolve {
				return true
			}
			e := &s.Table[l.K]
			return !(e.St == Quarantined && l.A == e.Attempt && l.G == e.TGen && !m.quarantineHolds(s, l.K))
		}},
	} {
		WitnessActions[p.Name] = p
	}
}
