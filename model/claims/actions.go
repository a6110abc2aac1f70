package claims

// The spec's actions, one function each, with the spec's names. Each takes
// a state and the action's parameters and returns the next state and
// whether the action is enabled; none changes its argument. The ghost
// ended is set by Apply (TrackEnded), never by an action.

// ops are the definitions a broken variant may replace.
type ops struct {
	Claim, PlaceLocal, Move                     func(m *Model, s *State, r, ss, w int) (State, bool)
	Route, Release, Ambiguous, Close, Reconcile func(m *Model, s *State, r, ss int) (State, bool)
	Resolve                                     func(m *Model, s *State, ss, a int, accepted bool) (State, bool)
	Expire                                      func(m *Model, s *State, ss int) (State, bool)
	BumpGeneration                              func(m *Model, s *State, w int) (State, bool)
	Receive, Duplicate, Drop                    func(m *Model, s *State, r int) (State, bool)
	Disconnect, Reconnect, Crash                func(m *Model, s *State, r int) (State, bool)
	// Unhold is a helper of Release and Close, applied to n, the next
	// state of a step from s.
	Unhold func(m *Model, s, n *State, r, ss int)
}

func defaultOps() ops {
	return ops{
		Claim: claimAct, PlaceLocal: placeLocal, Move: move, Route: route, Release: release,
		Ambiguous: ambiguous, Close: closeAct, Reconcile: reconcile, Resolve: resolve,
		Expire: expire, BumpGeneration: bumpGeneration, Receive: receive,
		Duplicate: duplicate, Drop: drop, Disconnect: disconnect, Reconnect: reconnect, Crash: crash,
		Unhold: unholdDef,
	}
}

// Claim is the spec's Claim(r, s, w): CreateOrGet with proposal w.
func (m *Model) Claim(s *State, r, ss, w int) (State, bool) { return m.ops.Claim(m, s, r, ss, w) }

// PlaceLocal is the spec's PlaceLocal(r, s, w): an unclaimed local placement.
func (m *Model) PlaceLocal(s *State, r, ss, w int) (State, bool) {
	return m.ops.PlaceLocal(m, s, r, ss, w)
}

// Move is the spec's Move(r, s, w): r rewrites s's claim to target w,
// fenced by the revision it caches.
func (m *Model) Move(s *State, r, ss, w int) (State, bool) { return m.ops.Move(m, s, r, ss, w) }

// Route is the spec's Route(r, s): a turn dispatched from the cache.
func (m *Model) Route(s *State, r, ss int) (State, bool) { return m.ops.Route(m, s, r, ss) }

// Release is the spec's Release(r, s): a request ends.
func (m *Model) Release(s *State, r, ss int) (State, bool) { return m.ops.Release(m, s, r, ss) }

// Ambiguous is the spec's Ambiguous(r, s): an ambiguous outcome quarantines.
func (m *Model) Ambiguous(s *State, r, ss int) (State, bool) { return m.ops.Ambiguous(m, s, r, ss) }

// Resolve is the spec's Resolve(s, a, o), o Accepted when accepted.
func (m *Model) Resolve(s *State, ss, a int, accepted bool) (State, bool) {
	return m.ops.Resolve(m, s, ss, a, accepted)
}

// Close is the spec's Close(r, s): the session's final request on r.
func (m *Model) Close(s *State, r, ss int) (State, bool) { return m.ops.Close(m, s, r, ss) }

// Reconcile is the spec's Reconcile(r, s): an unclaimed placement proposed.
func (m *Model) Reconcile(s *State, r, ss int) (State, bool) { return m.ops.Reconcile(m, s, r, ss) }

// Expire is the spec's Expire(s): an idle claim expires.
func (m *Model) Expire(s *State, ss int) (State, bool) { return m.ops.Expire(m, s, ss) }

// BumpGeneration is the spec's BumpGeneration(w).
func (m *Model) BumpGeneration(s *State, w int) (State, bool) { return m.ops.BumpGeneration(m, s, w) }

// Receive is the spec's Receive(r): r processes its oldest event.
func (m *Model) Receive(s *State, r int) (State, bool) { return m.ops.Receive(m, s, r) }

// Duplicate is the spec's Duplicate(r): the oldest Delete is delivered twice.
func (m *Model) Duplicate(s *State, r int) (State, bool) { return m.ops.Duplicate(m, s, r) }

// Drop is the spec's Drop(r): the oldest Delete is lost, a Reset follows.
func (m *Model) Drop(s *State, r int) (State, bool) { return m.ops.Drop(m, s, r) }

// Disconnect is the spec's Disconnect(r).
func (m *Model) Disconnect(s *State, r int) (State, bool) { return m.ops.Disconnect(m, s, r) }

// Reconnect is the spec's Reconnect(r).
func (m *Model) Reconnect(s *State, r int) (State, bool) { return m.ops.Reconnect(m, s, r) }

// Crash is the spec's Crash(r): r crashes and restarts.
func (m *Model) Crash(s *State, r int) (State, bool) { return m.ops.Crash(m, s, r) }

// --- the spec's helper definitions ---

func entryOf(c Claim) Entry { return Entry{St: c.St, Rev: c.Rev, Target: c.Target, Gen: c.Gen} }

func newClaim(s *State, w int) Claim {
	return Claim{St: StBound, Rev: s.Rev + 1, Born: s.Rev + 1, Target: w, Gen: s.Gen[w]}
}

func stale(s *State, c Claim) bool { return c.St != StNone && s.Gen[c.Target] != c.Gen }

func needsClaim(s *State, e Entry) bool {
	return e.St == StNone || (e.St.claimed() && s.Gen[e.Target] != e.Gen)
}

func routable(s *State, e Entry) bool {
	return (e.St == StBound || e.St == StUnclaimed) && s.Gen[e.Target] == e.Gen
}

func resetPending(s *State, r int) bool {
	for _, ev := range s.Chan[r] {
		if ev.Reset {
			return true
		}
	}
	return false
}

func (m *Model) push(q []Event, ev Event) []Event {
	if len(q) < m.Cfg.MaxChan {
		return append(q, ev)
	}
	return []Event{ResetEv}
}

func (m *Model) addReset(q []Event) []Event {
	if len(q) > 0 && q[len(q)-1].Reset {
		return q
	}
	return m.push(q, ResetEv)
}

// publish is the spec's Publish(s, v) applied to n, the next state of a
// step from s (whose up and cache it reads, as the spec reads unprimed ones).
func (m *Model) publish(s, n *State, ss, v int) {
	for r := range n.Chan {
		if e := s.Cache[m.ix(r, ss)]; s.Up[r] && e.St.claimed() && e.Rev == v {
			n.Chan[r] = m.push(n.Chan[r], Event{S: ss, Rev: v})
		}
	}
}

func bit(r int) uint64 { return 1 << uint(r) }

// unhold is the spec's Unhold(r, s) applied to n, the next state of a step
// from s.
func (m *Model) unhold(s, n *State, r, ss int) { m.ops.Unhold(m, s, n, r, ss) }

func unholdDef(m *Model, s, n *State, r, ss int) { unholdWith(m, s, n, r, ss, true) }

// unholdWith is Unhold; lastOnly false is its broken variant, where any
// holder's Unhold deletes a Closing claim.
func unholdWith(m *Model, s, n *State, r, ss int, lastOnly bool) {
	c := n.Claim[ss]
	if n.Holders[ss]&bit(r) != 0 && c.St == StClosing && (!lastOnly || n.Holders[ss] == bit(r)) {
		n.Claim[ss] = noClaim
		n.Holders[ss] = 0
		m.publish(s, n, ss, c.Rev)
		return
	}
	n.Holders[ss] &^= bit(r)
}

// --- the actions ---

func claimAct(m *Model, s *State, r, ss, w int) (State, bool) {
	return claimWith(m, s, r, ss, w, claimCorrect)
}

// claimBug selects a broken variant of Claim (claimCorrect: none).
type claimBug uint8

const (
	claimCorrect         claimBug = iota
	claimLiftsQuarantine          // a current quarantine is replaced by the same worker's claim
	claimIgnoresStale             // only a replica that caches nothing claims
)

func claimWith(m *Model, s *State, r, ss, w int, bug claimBug) (State, bool) {
	i := m.ix(r, ss)
	if !s.Up[r] {
		return State{}, false
	}
	if bug == claimIgnoresStale && s.Cache[i].St != StNone || bug != claimIgnoresStale && !needsClaim(s, s.Cache[i]) {
		return State{}, false
	}
	c := s.Claim[ss]
	if c.St == StNone || stale(s, c) || bug == claimLiftsQuarantine && c.St == StQuarantined && w == c.Target {
		if s.Rev >= m.Cfg.MaxRev {
			return State{}, false
		}
		n := s.Clone()
		nc := newClaim(s, w)
		n.Claim[ss] = nc
		n.Rev = s.Rev + 1
		n.Holders[ss] = 0
		n.Cache[i] = entryOf(nc)
		if c.St != StNone {
			m.publish(s, &n, ss, c.Rev)
		}
		return n, true
	}
	n := s.Clone()
	n.Cache[i] = entryOf(c)
	return n, true
}

func placeLocal(m *Model, s *State, r, ss, w int) (State, bool) {
	return placeLocalWith(m, s, r, ss, w, false)
}

// placeLocalWith is PlaceLocal; evenUp is its broken variant, which places
// locally while the store is reachable.
func placeLocalWith(m *Model, s *State, r, ss, w int, evenUp bool) (State, bool) {
	i := m.ix(r, ss)
	if (s.Up[r] && !evenUp) || !needsClaim(s, s.Cache[i]) {
		return State{}, false
	}
	n := s.Clone()
	n.Cache[i] = Entry{St: StUnclaimed, Rev: 0, Target: w, Gen: s.Gen[w]}
	return n, true
}

func move(m *Model, s *State, r, ss, w int) (State, bool) {
	return moveWith(m, s, r, ss, w, moveCorrect)
}

// moveBug selects a broken variant of Move (moveCorrect: none).
type moveBug uint8

const (
	moveCorrect        moveBug = iota
	moveUnfenced               // the revision is not checked: any Bound claim moves
	moveOverQuarantine         // the state is not checked: the cached revision moves whatever it is
)

func moveWith(m *Model, s *State, r, ss, w int, bug moveBug) (State, bool) {
	i := m.ix(r, ss)
	e, c := s.Cache[i], s.Claim[ss]
	if !s.Up[r] || !e.St.claimed() || w == e.Target {
		return State{}, false
	}
	var fenced bool
	switch bug {
	case moveUnfenced:
		fenced = c.St == StBound
	case moveOverQuarantine:
		fenced = c.St != StNone && c.Rev == e.Rev
	default:
		fenced = c.St == StBound && c.Rev == e.Rev
	}
	if fenced {
		if s.Rev >= m.Cfg.MaxRev {
			return State{}, false
		}
		n := s.Clone()
		nc := newClaim(s, w)
		n.Claim[ss] = nc
		n.Rev = s.Rev + 1
		n.Holders[ss] = 0
		n.Cache[i] = entryOf(nc)
		m.publish(s, &n, ss, c.Rev)
		return n, true
	}
	n := s.Clone()
	if c.St == StNone {
		n.Cache[i] = noEntry
	} else {
		n.Cache[i] = entryOf(c)
	}
	return n, true
}

func route(m *Model, s *State, r, ss int) (State, bool) { return routeWith(m, s, r, ss, routeCorrect) }

// routeBug selects a broken variant of Route (routeCorrect: none).
type routeBug uint8

const (
	routeCorrect        routeBug = iota
	routeByLineage               // the first turn checks the lineage (born), not the revision
	routeIgnoresGen              // the worker's generation is not checked
	routeFromQuarantine          // a Quarantined entry is routable
)

func routeWith(m *Model, s *State, r, ss int, bug routeBug) (State, bool) {
	i := m.ix(r, ss)
	e, l := s.Cache[i], s.Lease[i]
	ok := routable(s, e)
	switch bug {
	case routeIgnoresGen:
		ok = e.St == StBound || e.St == StUnclaimed
	case routeFromQuarantine:
		ok = ok || e.St == StQuarantined && s.Gen[e.Target] == e.Gen
	}
	if !ok || l.N >= m.Cfg.MaxLeases || (l.N > 0 && l.Rev != e.Rev) {
		return State{}, false
	}
	byLineage := bug == routeByLineage
	n := s.Clone()
	if l.N == 0 && s.Up[r] && e.St == StBound {
		if s.Claim[ss].St != StNone && (s.Claim[ss].Rev == e.Rev || byLineage && s.Claim[ss].Born <= e.Rev) {
			n.Holders[ss] |= bit(r)
			n.Lease[i] = Lease{N: 1, Rev: e.Rev}
		} else {
			n.Cache[i] = noEntry
		}
		return n, true
	}
	n.Lease[i] = Lease{N: l.N + 1, Rev: e.Rev}
	return n, true
}

func release(m *Model, s *State, r, ss int) (State, bool) { return releaseWith(m, s, r, ss, false) }

// releaseWith is Release; resurrect is its broken variant, whose last lease
// writes a deleted claim back from the cache as a new lineage.
func releaseWith(m *Model, s *State, r, ss int, resurrect bool) (State, bool) {
	i := m.ix(r, ss)
	l := s.Lease[i]
	if l.N == 0 {
		return State{}, false
	}
	n := s.Clone()
	if l.N == 1 {
		n.Lease[i] = Lease{}
	} else {
		n.Lease[i] = Lease{N: l.N - 1, Rev: l.Rev}
	}
	if e := s.Cache[i]; resurrect && l.N == 1 && s.Up[r] && s.Claim[ss].St == StNone && e.St == StBound && s.Rev < m.Cfg.MaxRev {
		n.Claim[ss] = Claim{St: StBound, Rev: s.Rev + 1, Born: s.Rev + 1, Target: e.Target, Gen: e.Gen}
		n.Rev = s.Rev + 1
		return n, true
	}
	if l.N == 1 && s.Up[r] {
		m.unhold(s, &n, r, ss)
	}
	return n, true
}

func ambiguous(m *Model, s *State, r, ss int) (State, bool) { return ambiguousWith(m, s, r, ss, false) }

// ambiguousWith is Ambiguous; byLineage is its broken variant, fenced by
// the claim's lineage (born) instead of its revision.
func ambiguousWith(m *Model, s *State, r, ss int, byLineage bool) (State, bool) {
	i := m.ix(r, ss)
	l, c := s.Lease[i], s.Claim[ss]
	if !s.Up[r] || l.N == 0 || l.Rev == 0 {
		return State{}, false
	}
	if c.St == StBound && (c.Rev == l.Rev || byLineage && l.Rev >= c.Born) {
		if s.Rev >= m.Cfg.MaxRev {
			return State{}, false
		}
		n := s.Clone()
		q := c
		q.St, q.Rev, q.Attempt = StQuarantined, s.Rev+1, l.Rev
		n.Claim[ss] = q
		n.Rev = s.Rev + 1
		n.Cache[i] = Entry{St: StQuarantined, Rev: s.Rev + 1, Target: c.Target, Gen: c.Gen}
		m.publish(s, &n, ss, c.Rev)
		return n, true
	}
	return s.Clone(), true
}

func resolve(m *Model, s *State, ss, a int, accepted bool) (State, bool) {
	return resolveWith(m, s, ss, a, accepted, resolveCorrect)
}

// resolveBug selects a broken variant of Resolve (resolveCorrect: none).
type resolveBug uint8

const (
	resolveCorrect         resolveBug = iota
	resolveAnyAttempt                 // the attempt is not checked
	resolveRestartsLineage            // an accepted Resolve moves born
	resolveNoEvent                    // no Delete is published
)

func resolveWith(m *Model, s *State, ss, a int, accepted bool, bug resolveBug) (State, bool) {
	c := s.Claim[ss]
	if c.St != StQuarantined {
		return State{}, false
	}
	if (a != c.Attempt && bug != resolveAnyAttempt) || s.Gen[c.Target] != c.Gen {
		return s.Clone(), true
	}
	if accepted && s.Rev >= m.Cfg.MaxRev {
		return State{}, false
	}
	n := s.Clone()
	if accepted {
		b := c
		b.St, b.Rev, b.Attempt = StBound, s.Rev+1, 0
		if bug == resolveRestartsLineage {
			b.Born = s.Rev + 1
		}
		n.Claim[ss] = b
		n.Rev = s.Rev + 1
	} else {
		n.Claim[ss] = noClaim
		n.Holders[ss] = 0
	}
	if bug != resolveNoEvent {
		m.publish(s, &n, ss, c.Rev)
	}
	return n, true
}

func closeAct(m *Model, s *State, r, ss int) (State, bool) { return closeWith(m, s, r, ss, false) }

// closeWith is Close; closingInPlace is its broken variant, which writes a
// deferred close Closing under the same revision, with no Delete.
func closeWith(m *Model, s *State, r, ss int, closingInPlace bool) (State, bool) {
	i := m.ix(r, ss)
	l, c := s.Lease[i], s.Claim[ss]
	if !s.Up[r] || l.N != 1 {
		return State{}, false
	}
	if c.St != StNone && c.Rev == l.Rev && s.Holders[ss]&^bit(r) != 0 && s.Rev >= m.Cfg.MaxRev && !closingInPlace {
		return State{}, false
	}
	n := s.Clone()
	n.Lease[i] = Lease{}
	n.Cache[i] = noEntry
	switch {
	case c.St != StNone && c.Rev == l.Rev && s.Holders[ss]&^bit(r) == 0:
		n.Claim[ss] = noClaim
		n.Holders[ss] = 0
		m.publish(s, &n, ss, c.Rev)
	case c.St != StNone && c.Rev == l.Rev && closingInPlace:
		q := c
		q.St = StClosing
		n.Claim[ss] = q
		n.Holders[ss] &^= bit(r)
	case c.St != StNone && c.Rev == l.Rev:
		q := c
		q.St, q.Rev = StClosing, s.Rev+1
		n.Claim[ss] = q
		n.Holders[ss] &^= bit(r)
		n.Rev = s.Rev + 1
		m.publish(s, &n, ss, c.Rev)
	default:
		m.unhold(s, &n, r, ss)
	}
	return n, true
}

func reconcile(m *Model, s *State, r, ss int) (State, bool) { return reconcileWith(m, s, r, ss, false) }

// reconcileWith is Reconcile; keepUnclaimed is its broken variant, which
// keeps the local placement when it loses instead of adopting the claim.
func reconcileWith(m *Model, s *State, r, ss int, keepUnclaimed bool) (State, bool) {
	i := m.ix(r, ss)
	e, c := s.Cache[i], s.Claim[ss]
	if !s.Up[r] || e.St != StUnclaimed || resetPending(s, r) {
		return State{}, false
	}
	if c.St == StNone || stale(s, c) {
		return reconcileWrite(m, s, r, ss)
	}
	n := s.Clone()
	if !keepUnclaimed {
		n.Cache[i] = entryOf(c)
	}
	return n, true
}

// reconcileWrite is the write of Reconcile (and of its broken variant that
// writes whatever the session's claim is).
func reconcileWrite(m *Model, s *State, r, ss int) (State, bool) {
	i := m.ix(r, ss)
	e, c := s.Cache[i], s.Claim[ss]
	if s.Rev >= m.Cfg.MaxRev {
		return State{}, false
	}
	n := s.Clone()
	nc := newClaim(s, e.Target)
	n.Claim[ss] = nc
	n.Rev = s.Rev + 1
	n.Holders[ss] = 0
	if s.Lease[i].N > 0 {
		n.Holders[ss] = bit(r)
		n.Lease[i] = Lease{N: s.Lease[i].N, Rev: s.Rev + 1}
	} else {
		n.Lease[i] = Lease{}
	}
	n.Cache[i] = entryOf(nc)
	if c.St != StNone {
		m.publish(s, &n, ss, c.Rev)
	}
	return n, true
}

func expire(m *Model, s *State, ss int) (State, bool) {
	if s.Claim[ss].St == StNone || s.Holders[ss] != 0 {
		return State{}, false
	}
	n := s.Clone()
	n.Claim[ss] = noClaim
	m.publish(s, &n, ss, s.Claim[ss].Rev)
	return n, true
}

func bumpGeneration(m *Model, s *State, w int) (State, bool) {
	if s.Gen[w] >= m.Cfg.MaxGen {
		return State{}, false
	}
	n := s.Clone()
	n.Gen[w]++
	return n, true
}

func receive(m *Model, s *State, r int) (State, bool) {
	return receiveWith(m, s, r, true, false, false)
}

// receiveWith is Receive, whose Reset evicts the cached claims when
// evictOnReset (its broken variant's does not), the quarantines among them
// unless keepQuarantines (another broken variant); keepInFlight is a third
// broken variant, whose Delete keeps an entry the replica has leases on.
func receiveWith(m *Model, s *State, r int, evictOnReset, keepQuarantines, keepInFlight bool) (State, bool) {
	if len(s.Chan[r]) == 0 {
		return State{}, false
	}
	ev := s.Chan[r][0]
	n := s.Clone()
	for ss := range m.Cfg.Sessions {
		i := m.ix(r, ss)
		e := s.Cache[i]
		if ev.Reset {
			if e.St != StUnclaimed && evictOnReset && !(keepQuarantines && e.St == StQuarantined) {
				n.Cache[i] = noEntry
			}
		} else if ss == ev.S && e.St.claimed() && e.Rev == ev.Rev && !(keepInFlight && s.Lease[i].N > 0) {
			n.Cache[i] = noEntry
		}
	}
	n.Chan[r] = n.Chan[r][1:]
	return n, true
}

func duplicate(m *Model, s *State, r int) (State, bool) {
	q := s.Chan[r]
	if len(q) == 0 || len(q) >= m.Cfg.MaxChan || q[0].Reset {
		return State{}, false
	}
	n := s.Clone()
	n.Chan[r] = append([]Event{q[0]}, q...)
	return n, true
}

func drop(m *Model, s *State, r int) (State, bool) {
	q := s.Chan[r]
	if len(q) == 0 || q[0].Reset {
		return State{}, false
	}
	n := s.Clone()
	n.Chan[r] = m.addReset(n.Chan[r][1:])
	return n, true
}

func disconnect(m *Model, s *State, r int) (State, bool) {
	if !s.Up[r] {
		return State{}, false
	}
	n := s.Clone()
	n.Up[r] = false
	return n, true
}

func reconnect(m *Model, s *State, r int) (State, bool) {
	if s.Up[r] {
		return State{}, false
	}
	n := s.Clone()
	n.Up[r] = true
	n.Chan[r] = m.addReset(n.Chan[r])
	for ss := range m.Cfg.Sessions {
		l, c := s.Lease[m.ix(r, ss)], s.Claim[ss]
		if l.N > 0 && c.St != StNone && l.Rev >= c.Born {
			n.Holders[ss] |= bit(r)
		} else {
			n.Holders[ss] &^= bit(r)
		}
	}
	return n, true
}

func crash(m *Model, s *State, r int) (State, bool) { return crashWith(m, s, r, false) }

// crashWith is Crash; keepHolds is its broken variant, whose holds survive.
func crashWith(m *Model, s *State, r int, keepHolds bool) (State, bool) {
	n := s.Clone()
	for ss := range m.Cfg.Sessions {
		n.Cache[m.ix(r, ss)] = noEntry
		n.Lease[m.ix(r, ss)] = Lease{}
		if !keepHolds {
			n.Holders[ss] &^= bit(r)
		}
	}
	n.Chan[r] = []Event{ResetEv}
	n.Up[r] = true
	return n, true
}
