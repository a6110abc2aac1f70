package claims

import (
	"fmt"
	"sort"
)

// A variant is a deliberately broken definition that spec/tla/MCClaims.tla
// defines under the same name. The checks must catch every one of them.
type variant struct {
	replaces string
	doc      string
	apply    func(o *ops)
}

var variants = map[string]variant{
	"BugUnfencedClose": {"Close",
		"Close is not fenced by revision: it closes whatever claim the session has now",
		func(o *ops) { o.Close = bugUnfencedClose }},
	"BugCloseWhileHeld": {"Close",
		"Close deletes the claim while other replicas hold it",
		func(o *ops) { o.Close = bugCloseWhileHeld }},
	"BugNoEvictOnReset": {"Receive",
		"a Reset evicts nothing from the cache",
		func(o *ops) { o.Receive = bugNoEvictOnReset }},
	"BugExpireInUse": {"Expire",
		"an idle claim expires even while replicas hold it",
		func(o *ops) { o.Expire = bugExpireInUse }},
	"BugDropWithoutReset": {"Drop",
		"the watch loses an event and sends no Reset",
		func(o *ops) { o.Drop = bugDropWithoutReset }},
	"BugQuarantineNotShared": {"Ambiguous",
		"the quarantine is written in place, under the same revision: no Delete reaches the other replicas",
		func(o *ops) { o.Ambiguous = bugQuarantineNotShared }},
	"BugReconcileOverwrites": {"Reconcile",
		"the store-down reconcile writes over whatever claim the session has (last writer wins)",
		func(o *ops) { o.Reconcile = bugReconcileOverwrites }},
	"BugClaimReplacesInPlace": {"Claim",
		"CreateOrGet replaces a stale claim under its old revision",
		func(o *ops) { o.Claim = bugClaimReplacesInPlace }},
	"BugHoldAgainstLineage": {"Route",
		"the first turn's hold is checked against the claim's lineage, not its current revision",
		func(o *ops) { o.Route = bugHoldAgainstLineage }},
	"BugResolveAnyAttempt": {"Resolve",
		"a Resolve naming another attempt settles the quarantine",
		func(o *ops) { o.Resolve = bugResolveAnyAttempt }},
	"BugResolveRestartsLineage": {"Resolve",
		"an accepted Resolve restarts the claim's lineage (born)",
		func(o *ops) { o.Resolve = bugResolveRestartsLineage }},
	"BugResolveNoEvent": {"Resolve",
		"a Resolve publishes no Delete",
		func(o *ops) { o.Resolve = bugResolveNoEvent }},
	"BugCrashKeepsHolds": {"Crash",
		"a crashed replica's holds survive it",
		func(o *ops) { o.Crash = bugCrashKeepsHolds }},
	"BugPlaceLocalWhileUp": {"PlaceLocal",
		"a replica that reaches the store places a session locally",
		func(o *ops) { o.PlaceLocal = bugPlaceLocalWhileUp }},
	"BugUnholdAnyHolder": {"Unhold",
		"any holder's Unhold deletes a Closing claim, not only the last one's",
		func(o *ops) { o.Unhold = bugUnholdAnyHolder }},
	"BugRouteIgnoresGeneration": {"Route",
		"Route does not check the worker's generation: a dispatch to a restarted worker under the old incarnation's claim",
		func(o *ops) { o.Route = bugRouteIgnoresGeneration }},
	"BugRouteFromQuarantine": {"Route",
		"Route dispatches from a cached quarantine",
		func(o *ops) { o.Route = bugRouteFromQuarantine }},
	"BugClaimLiftsQuarantine": {"Claim",
		"a first turn re-binds a quarantined claim to the same worker, lifting the quarantine with no settle",
		func(o *ops) { o.Claim = bugClaimLiftsQuarantine }},
	"BugResetKeepsQuarantines": {"Receive",
		"a Reset keeps the cached quarantines",
		func(o *ops) { o.Receive = bugResetKeepsQuarantines }},
	"BugClosingInPlace": {"Close",
		"a deferred close writes Closing under the same revision, with no Delete",
		func(o *ops) { o.Close = bugClosingInPlace }},
	"BugReconcileKeepsUnclaimed": {"Reconcile",
		"a reconcile that loses keeps the local placement instead of adopting the claim",
		func(o *ops) { o.Reconcile = bugReconcileKeepsUnclaimed }},
	"BugClaimIgnoresStale": {"Claim",
		"only a replica that caches nothing claims: a stale cached claim is never read again",
		func(o *ops) { o.Claim = bugClaimIgnoresStale }},
	"BugReleaseResurrects": {"Release",
		"the last lease's release writes a deleted claim back from the cache, as a new lineage",
		func(o *ops) { o.Release = bugReleaseResurrects }},
	"BugReconcileOnlyAdopts": {"Reconcile",
		"the store-down reconcile only adopts a claim another replica wrote; with none it never reconciles",
		func(o *ops) { o.Reconcile = bugReconcileOnlyAdopts }},
	"BugAmbiguousByLineage": {"Ambiguous",
		"an ambiguous report is fenced by the lineage, not the revision",
		func(o *ops) { o.Ambiguous = bugAmbiguousByLineage }},
	"BugUnfencedMove": {"Move",
		"a move is not fenced by revision: a replica routing from a revision moved meanwhile rewrites the winner's claim",
		func(o *ops) { o.Move = bugUnfencedMove }},
	"BugMoveOverQuarantine": {"Move",
		"a move is fenced by revision only: a quarantined (or closing) claim is rewritten",
		func(o *ops) { o.Move = bugMoveOverQuarantine }},
	"BugMoveKeepsCache": {"Receive",
		"a Delete keeps the cached revision while the replica has requests in flight on it: after a move it serves the old target",
		func(o *ops) { o.Receive = bugMoveKeepsCache }},
}

func bugUnfencedMove(m *Model, s *State, r, ss, w int) (State, bool) {
	return moveWith(m, s, r, ss, w, moveUnfenced)
}

func bugMoveOverQuarantine(m *Model, s *State, r, ss, w int) (State, bool) {
	return moveWith(m, s, r, ss, w, moveOverQuarantine)
}

func bugMoveKeepsCache(m *Model, s *State, r int) (State, bool) {
	return receiveWith(m, s, r, true, false, true)
}

func bugHoldAgainstLineage(m *Model, s *State, r, ss int) (State, bool) {
	return routeWith(m, s, r, ss, routeByLineage)
}

func bugResolveAnyAttempt(m *Model, s *State, ss, a int, accepted bool) (State, bool) {
	return resolveWith(m, s, ss, a, accepted, resolveAnyAttempt)
}

func bugResolveRestartsLineage(m *Model, s *State, ss, a int, accepted bool) (State, bool) {
	return resolveWith(m, s, ss, a, accepted, resolveRestartsLineage)
}

func bugResolveNoEvent(m *Model, s *State, ss, a int, accepted bool) (State, bool) {
	return resolveWith(m, s, ss, a, accepted, resolveNoEvent)
}

func bugCrashKeepsHolds(m *Model, s *State, r int) (State, bool) { return crashWith(m, s, r, true) }

func bugPlaceLocalWhileUp(m *Model, s *State, r, ss, w int) (State, bool) {
	return placeLocalWith(m, s, r, ss, w, true)
}

func bugUnholdAnyHolder(m *Model, s, n *State, r, ss int) { unholdWith(m, s, n, r, ss, false) }

func bugAmbiguousByLineage(m *Model, s *State, r, ss int) (State, bool) {
	return ambiguousWith(m, s, r, ss, true)
}

// VariantNames lists the broken variants, sorted.
func VariantNames() []string {
	out := make([]string, 0, len(variants))
	for n := range variants {
		out = append(out, n)
	}
	sort.Strings(out)
	return out
}

// ErrUnknownOverride is returned (wrapped) by Override for a definition or
// variant the model does not have.
var ErrUnknownOverride = fmt.Errorf("claims: unknown override")

// Override replaces the spec definition def with the broken variant of that
// name (TLC's `def <- variant`).
func (m *Model) Override(def, name string) error {
	v, ok := variants[name]
	if !ok {
		return fmt.Errorf("%w: no variant %s", ErrUnknownOverride, name)
	}
	if v.replaces != def {
		return fmt.Errorf("%w: variant %s replaces %s, not %s", ErrUnknownOverride, name, v.replaces, def)
	}
	v.apply(&m.ops)
	m.Variants = append(m.Variants, name)
	sort.Strings(m.Variants)
	return nil
}

func bugUnfencedClose(m *Model, s *State, r, ss int) (State, bool) {
	i := m.ix(r, ss)
	l, c := s.Lease[i], s.Claim[ss]
	if !s.Up[r] || l.N != 1 {
		return State{}, false
	}
	if c.St != StNone && s.Holders[ss]&^bit(r) != 0 && s.Rev >= m.Cfg.MaxRev {
		return State{}, false
	}
	n := s.Clone()
	n.Lease[i] = Lease{}
	n.Cache[i] = noEntry
	switch {
	case c.St != StNone && s.Holders[ss]&^bit(r) == 0: // BUG: no c.Rev == l.Rev
		n.Claim[ss] = noClaim
		n.Holders[ss] = 0
		m.publish(s, &n, ss, c.Rev)
	case c.St != StNone:
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

func bugCloseWhileHeld(m *Model, s *State, r, ss int) (State, bool) {
	i := m.ix(r, ss)
	l, c := s.Lease[i], s.Claim[ss]
	if !s.Up[r] || l.N != 1 {
		return State{}, false
	}
	n := s.Clone()
	n.Lease[i] = Lease{}
	n.Cache[i] = noEntry
	if c.St != StNone && c.Rev == l.Rev { // BUG: other holders ignored
		n.Claim[ss] = noClaim
		n.Holders[ss] = 0
		m.publish(s, &n, ss, c.Rev)
	} else {
		m.unhold(s, &n, r, ss)
	}
	return n, true
}

func bugNoEvictOnReset(m *Model, s *State, r int) (State, bool) {
	return receiveWith(m, s, r, false, false, false)
}

func bugExpireInUse(m *Model, s *State, ss int) (State, bool) {
	if s.Claim[ss].St == StNone { // BUG: holders ignored
		return State{}, false
	}
	n := s.Clone()
	n.Claim[ss] = noClaim
	n.Holders[ss] = 0
	m.publish(s, &n, ss, s.Claim[ss].Rev)
	return n, true
}

func bugDropWithoutReset(m *Model, s *State, r int) (State, bool) {
	q := s.Chan[r]
	if len(q) == 0 || q[0].Reset {
		return State{}, false
	}
	n := s.Clone()
	n.Chan[r] = n.Chan[r][1:] // BUG: no Reset
	return n, true
}

func bugQuarantineNotShared(m *Model, s *State, r, ss int) (State, bool) {
	i := m.ix(r, ss)
	l, c := s.Lease[i], s.Claim[ss]
	if !s.Up[r] || l.N == 0 || l.Rev == 0 {
		return State{}, false
	}
	n := s.Clone()
	if c.St == StBound && c.Rev == l.Rev {
		q := c
		q.St, q.Attempt = StQuarantined, l.Rev // BUG: same revision, no Delete
		n.Claim[ss] = q
		n.Cache[i] = Entry{St: StQuarantined, Rev: c.Rev, Target: c.Target, Gen: c.Gen}
	}
	return n, true
}

func bugReconcileOverwrites(m *Model, s *State, r, ss int) (State, bool) {
	if !s.Up[r] || s.Cache[m.ix(r, ss)].St != StUnclaimed || resetPending(s, r) {
		return State{}, false
	}
	return reconcileWrite(m, s, r, ss) // BUG: whatever the claim is
}

func bugClaimReplacesInPlace(m *Model, s *State, r, ss, w int) (State, bool) {
	i := m.ix(r, ss)
	if !s.Up[r] || !needsClaim(s, s.Cache[i]) {
		return State{}, false
	}
	c := s.Claim[ss]
	switch {
	case c.St == StNone:
		return claimAct(m, s, r, ss, w)
	case stale(s, c):
		n := s.Clone()
		q := c
		q.Target, q.Gen = w, s.Gen[w] // BUG: under the old revision
		n.Claim[ss] = q
		n.Holders[ss] = 0
		n.Cache[i] = Entry{St: c.St, Rev: c.Rev, Target: w, Gen: s.Gen[w]}
		return n, true
	}
	n := s.Clone()
	n.Cache[i] = entryOf(c)
	return n, true
}

func bugRouteIgnoresGeneration(m *Model, s *State, r, ss int) (State, bool) {
	return routeWith(m, s, r, ss, routeIgnoresGen)
}

func bugRouteFromQuarantine(m *Model, s *State, r, ss int) (State, bool) {
	return routeWith(m, s, r, ss, routeFromQuarantine)
}

func bugClaimLiftsQuarantine(m *Model, s *State, r, ss, w int) (State, bool) {
	return claimWith(m, s, r, ss, w, claimLiftsQuarantine)
}

func bugClaimIgnoresStale(m *Model, s *State, r, ss, w int) (State, bool) {
	return claimWith(m, s, r, ss, w, claimIgnoresStale)
}

func bugResetKeepsQuarantines(m *Model, s *State, r int) (State, bool) {
	return receiveWith(m, s, r, true, true, false)
}

func bugClosingInPlace(m *Model, s *State, r, ss int) (State, bool) {
	return closeWith(m, s, r, ss, true)
}

func bugReconcileKeepsUnclaimed(m *Model, s *State, r, ss int) (State, bool) {
	return reconcileWith(m, s, r, ss, true)
}

func bugReleaseResurrects(m *Model, s *State, r, ss int) (State, bool) {
	return releaseWith(m, s, r, ss, true)
}

func bugReconcileOnlyAdopts(m *Model, s *State, r, ss int) (State, bool) {
	i := m.ix(r, ss)
	e, c := s.Cache[i], s.Claim[ss]
	if !s.Up[r] || e.St != StUnclaimed || resetPending(s, r) || c.St == StNone || stale(s, c) {
		return State{}, false
	}
	n := s.Clone()
	n.Cache[i] = entryOf(c)
	return n, true
}
