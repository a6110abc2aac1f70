package replay

import (
	"github.com/placementlab/placement/impl/affinity"
	"github.com/placementlab/placement/impl/picker"
	"github.com/placementlab/placement/impl/placement"
)

// handle is what a dispatch reports its outcome to: the affinity layer's
// attempt and turn for the placement policies, and the prefix index
// (cache-aware's, and placement's in modes hard and soft); est is
// placement's estimate of the request's uncached tokens at its rank.
type handle struct {
	turn   affinity.Turn
	a      affinity.Attempt
	req    *picker.Request
	prefix *picker.PrefixOverlap // the index that routed it (its replica's)
	est    int
	rep    int // the replica that routed it
	i      int // the request
	// hit: a later turn on the session's binding; bound: a dispatch that
	// binds the session if accepted (placing) or hits its binding; pinGen:
	// the instance of the binding a pinned request follows (-1: none).
	hit, bound bool
	pinGen     int
}

func (h handle) complete(s *sim, rk *rank, o placement.Outcome, ran bool) {
	if h.prefix != nil && h.req != nil {
		h.prefix.Observe(h.req, rk.target, o)
	}
	if h.a == (affinity.Attempt{}) {
		return
	}
	_ = h.a.Complete(o)
	if o == placement.Ambiguous && h.a.ID() != 0 {
		s.ranBy[h.a.ID()] = ran
	}
	var acc *rank
	if o == placement.Accepted {
		acc = rk
	}
	s.endTurn(h.turn, h.i, h.rep, acc, h.bound)
}

// newPickers builds the policy's impl/picker parts (for router replica
// k: replica 0's are the single router's).
func (s *sim) newPickers(k int) error {
	var err error
	seed := s.cfg.Seed ^ uint64(s.pol)<<32 ^ uint64(k)<<48
	switch s.pol {
	case PlacementHard, PlacementSoft:
		// Placement's scheduler for the requests the layer does not
		// narrow to one target (see sched.go and the package doc), all
		// impl/picker built-ins: not overloaded (DropOverloaded), within
		// CostSlack of the cheapest estimated time to first token
		// (CostWithin over the costs estimate sets), on the rank holding
		// the longest prefix unless it is busy (FollowPrefix); then the
		// fewest requests in flight and bound sessions.
		s.prefix, err = picker.NewPrefixOverlap(picker.PrefixConfig{Capacity: s.cfg.CacheBlocks, Seed: seed})
		if err != nil {
			return err
		}
		var follow *picker.FollowPrefix
		follow, err = picker.NewFollowPrefix(s.prefix, followConfig(s.cfg))
		s.pipe = &picker.Pipeline{
			Filters: []picker.Filter{picker.DropOverloaded{}, picker.CostWithin{Slack: s.cfg.CostSlack}, follow},
			Scorers: []picker.Weighted{{Scorer: picker.LeastInFlight{}, Weight: 1}, {Scorer: picker.LeastBound{}, Weight: 1}},
			Seed:    seed,
		}
	case PlacementOff:
		// Mode off is the control without affinity: the load-only part
		// of the scheduler (a prefix-aware picker with affinity off is
		// cache-aware routing, which the cache-aware row shows).
		s.pipe = &picker.Pipeline{
			Filters: []picker.Filter{picker.DropOverloaded{}},
			Scorers: []picker.Weighted{{Scorer: picker.LeastInFlight{}, Weight: 1}, {Scorer: picker.LeastBound{}, Weight: 1}},
			Seed:    seed,
		}
	case LeastLoaded, StickyLeastLoaded:
		s.pipe = &picker.Pipeline{Scorers: []picker.Weighted{{Scorer: picker.LeastInFlight{}, Weight: 1}}, Seed: seed}
	case ConsistentHash:
		var ch *picker.ConsistentHash
		ch, err = picker.NewConsistentHash(picker.HashConfig{Factor: s.cfg.BoundedLoadFactor, Load: picker.LoadInFlight, Seed: seed})
		s.pipe = &picker.Pipeline{Picker: ch, Seed: seed}
	case CacheAware:
		s.prefix, err = picker.NewPrefixOverlap(picker.PrefixConfig{Capacity: s.cfg.CacheBlocks, Seed: seed})
		s.pipe = &picker.Pipeline{Picker: s.prefix, Scorers: []picker.Weighted{{Scorer: picker.LeastInFlight{}, Weight: 1}}, Seed: seed}
	}
	if err != nil {
		return err
	}
	if s.pipe != nil {
		return s.pipe.Validate()
	}
	return nil
}

// route chooses request i's rank by the simulation's policy; ok false means
// the request was refused (the client sends it again after RetryDelay).
func (s *sim) route(i int) (*rank, handle, bool) {
	if len(s.up) == 0 {
		return nil, handle{}, false
	}
	switch s.pol {
	case PlacementHard, PlacementSoft, PlacementOff:
		return s.routePlacement(i, affinity.Target{}, false)
	case RoundRobin:
		s.rr++
		return s.up[(s.rr-1)%len(s.up)], handle{}, true
	case LeastLoaded:
		return s.pick(&picker.Request{}, s.candidates(false, false)), handle{}, true
	case ConsistentHash:
		return s.stickTo(i, s.pick(&picker.Request{Key: s.akeys[i]}, s.candidates(false, false))), handle{}, true
	case StickyLeastLoaded:
		if st, ok := s.sticky[s.keys[i]]; ok && st.r.w.state == stUp && st.r.w.gen == st.gen {
			return st.r, handle{}, true
		}
		return s.stickTo(i, s.pick(&picker.Request{}, s.candidates(false, false))), handle{}, true
	default: // CacheAware
		req := &picker.Request{Key: s.akeys[i], Blocks: s.promptBlocks(nil, i, false)}
		return s.pick(req, s.candidates(false, false)), handle{req: req, prefix: s.prefix}, true
	}
}

// pick runs the policy's pipeline; the candidates are never empty here.
func (s *sim) pick(req *picker.Request, cands []picker.Candidate) *rank {
	c, err := s.pipe.Pick(req, cands)
	if err != nil {
		return s.rankOf(cands[0].Target)
	}
	return s.rankOf(c.Target)
}

// stickTo records rk as the session's target, counting a move when the
// session had another one.
func (s *sim) stickTo(i int, rk *rank) *rank {
	k := s.keys[i]
	if st, ok := s.sticky[k]; ok && st.r != rk {
		s.res.Moves++
	}
	s.sticky[k] = stick{r: rk, gen: rk.w.gen}
	return rk
}

// overloadThreshold returns the waiting requests (queued, not yet
// prefilling) above which soft mode marks a rank Overloaded (negative:
// none is).
func (s *sim) overloadThreshold() float64 {
	if s.cfg.OverloadFactor <= 0 {
		return -1
	}
	sum := 0
	for _, rk := range s.up {
		sum += len(rk.queue)
	}
	return s.cfg.OverloadFactor*float64(sum)/float64(len(s.up)) + float64(s.cfg.OverloadSlack)
}

// candidates lists the up ranks with their loads for impl/picker (in
// flight: queued, prefilling or decoding), marking them Overloaded when
// markOverload, and their bound sessions when bound.
func (s *sim) candidates(markOverload, bound bool) []picker.Candidate {
	s.pcands = s.pcands[:0]
	thr := -1.0
	if markOverload {
		thr = s.overloadThreshold()
	}
	for _, rk := range s.up {
		c := picker.Candidate{Target: rk.target, InFlight: rk.inflight, Overloaded: thr >= 0 && float64(len(rk.queue)) > thr}
		if bound {
			c.Bound = s.layer.Bound(affinity.PhaseDecode, rk.target)
		}
		s.pcands = append(s.pcands, c)
	}
	return s.pcands
}

func (s *sim) rankOf(t affinity.Target) *rank {
	w := s.byID[t.Worker]
	if w == nil || !t.HasRank || t.Rank < 0 || t.Rank >= len(w.ranks) {
		return nil
	}
	return w.ranks[t.Rank]
}

// routePlacement runs the current replica's affinity layer's request loop
// (Start, Eligible, Dispatch), with the request pinned to pin when hasPin
// (a replicated run following another replica's binding); placement's
// picker chooses among the eligible candidates when the layer leaves more
// than one.
func (s *sim) routePlacement(i int, pin affinity.Target, hasPin bool) (*rank, handle, bool) {
	r := &s.wl.Requests[i]
	pinGen := -1
	if hasPin {
		pinGen = s.inv.pinGen
	}
	s.inv.pinGen = -1
	turn, err := s.layer.Start(s.cancelled, affinity.Request{Session: s.akeys[i], Phase: affinity.PhaseDecode, Final: r.Final, Pin: pin, HasPin: hasPin})
	if err != nil {
		return nil, handle{}, false // hard mode's quarantine, or a session being placed
	}
	s.turnStarted(turn, i)
	pc := s.candidates(s.pol == PlacementSoft, true)
	s.placeReq = &picker.Request{Key: s.akeys[i]}
	if s.prefix != nil {
		s.placeReq.Blocks = s.promptBlocks(nil, i, false)
		s.estimate(r, pc)
		if bt, ok := turn.Bound(); ok && s.pol == PlacementSoft {
			s.markCostly(bt, pc)
		}
	}
	s.acands = s.acands[:0]
	for _, c := range pc {
		s.acands = append(s.acands, affinity.Candidate{Target: c.Target, Overloaded: c.Overloaded})
	}
	el, err := turn.Eligible(s.acands, nil)
	if err != nil {
		s.endTurn(turn, i, s.cur, nil, false)
		return nil, handle{}, false
	}
	t := el[0].Target
	if len(el) > 1 {
		t = s.pickPlacement(i, turn, el, pc)
	}
	placing := turn.Placing()
	a, err := turn.Dispatch(t)
	if err != nil {
		s.endTurn(turn, i, s.cur, nil, false)
		return nil, handle{}, false
	}
	rk := s.rankOf(a.Target())
	if rk == nil {
		_ = a.Complete(placement.DefinitelyNotAccepted)
		s.endTurn(turn, i, s.cur, nil, false)
		return nil, handle{}, false
	}
	h := handle{turn: turn, a: a, rep: s.cur, i: i, hit: a.Hit(), bound: placing || a.Hit(), pinGen: pinGen}
	if s.prefix != nil {
		h.req, h.prefix, h.est = s.placeReq, s.prefix, s.uncached(r, rk.match)
	}
	return rk, h, true
}

// pickPlacement is placement's scheduler for a request the layer left
// several candidates for (a session to place, an unpinned request, a soft
// binding's fallback): a sibling group being placed goes to its parent
// session's binding when that is eligible and not overloaded (the
// subagents fork the parent's context); otherwise the pipeline picks.
func (s *sim) pickPlacement(i int, turn affinity.Turn, el []affinity.Candidate, pc []picker.Candidate) affinity.Target {
	r := &s.wl.Requests[i]
	if r.Parent != "" && s.parentHint && turn.Placing() {
		if pt, ok := s.layer.Query(s.pkeys[i], affinity.PhaseDecode); ok {
			for _, c := range el {
				if c.Target == pt && !c.Overloaded {
					return pt
				}
			}
		}
	}
	sub := s.pcands2[:0]
	for _, c := range el {
		for _, p := range pc {
			if p.Target == c.Target {
				sub = append(sub, p)
				break
			}
		}
	}
	s.pcands2 = sub
	c, err := s.pipe.Pick(s.placeReq, sub)
	if err != nil {
		return el[0].Target
	}
	return c.Target
}
