package replay

import (
	"github.com/placementlab/placement/impl/affinity"
	"github.com/placementlab/placement/impl/picker"
)

// Placement's scheduler parts beyond impl/picker's built-ins (modes hard
// and soft; the package doc's "Placement's scheduler choices" says why
// each is there and what the sweep behind it measured).
//
// The router keeps a prefix index (impl/picker's PrefixOverlap, fed with
// every accepted dispatch, as cache-aware's is) and, per rank, its
// estimate of the prefill backlog: the uncached tokens of the requests it
// dispatched there and saw accepted that have not yet given their first
// token, each estimated from the index at dispatch. A request's estimated
// cost at a rank is that backlog plus its own uncached tokens there: its
// estimated time to first token, in tokens of prefill.

const (
	// followTokens: the longest indexed prefix is followed only when it
	// is at least this many tokens longer than the shortest (a shared
	// system prompt alone is not worth following).
	followTokens = 4096
	// followLoadFactor and followLoadSlack: the prefix is followed only
	// to a rank with at most followLoadFactor x the mean requests in
	// flight plus followLoadSlack.
	followLoadFactor = 1.25
	followLoadSlack  = 2
)

// estimate fills each up rank's match and cost for request r (whose
// prompt blocks are s.placeReq.Blocks) from the router's index.
func (s *sim) estimate(r *Request, pc []picker.Candidate) {
	n := len(s.placeReq.Blocks)
	s.ratios = append(s.ratios[:0], make([]float64, len(pc))...)
	s.prefix.Score(s.placeReq, pc, s.ratios)
	for k, c := range pc {
		rk := s.rankOf(c.Target)
		rk.match = int(s.ratios[k]*float64(n) + 0.5)
		rk.cost = rk.backlog + s.uncached(r, rk.match)
	}
}

// uncached estimates r's uncached tokens at a rank whose index holds
// match of its prompt blocks.
func (s *sim) uncached(r *Request, match int) int {
	return max(0, r.InputTokens-match*s.cfg.BlockTokens)
}

// slackTokens is Config.CostSlack in tokens of prefill.
func (s *sim) slackTokens() int {
	return int(s.cfg.CostSlack.Seconds() * s.cfg.PrefillRate)
}

// markCostly is soft mode's overload rule for a bound request: its
// binding's rank is Overloaded (the layer then offers the full set, and a
// dispatch elsewhere moves the binding) when the request's estimated cost
// there exceeds the cheapest up rank's by more than CostSlack; no other
// rank is marked.
func (s *sim) markCostly(bound affinity.Target, pc []picker.Candidate) {
	lo := -1
	for _, c := range pc {
		if x := s.rankOf(c.Target).cost; lo < 0 || x < lo {
			lo = x
		}
	}
	for k := range pc {
		pc[k].Overloaded = pc[k].Target == bound && s.rankOf(pc[k].Target).cost > lo+s.slackTokens()
	}
}

// withinCost is a picker.Filter: the candidates whose estimated cost is
// within CostSlack of the cheapest.
func (s *sim) withinCost(_ *picker.Request, cands []picker.Candidate) []picker.Candidate {
	lo := -1
	for _, c := range cands {
		if x := s.rankOf(c.Target).cost; lo < 0 || x < lo {
			lo = x
		}
	}
	out := cands[:0]
	for _, c := range cands {
		if s.rankOf(c.Target).cost <= lo+s.slackTokens() {
			out = append(out, c)
		}
	}
	return out
}

// followPrefix is a picker.Filter: when the longest indexed prefix among
// the candidates is at least followTokens longer than the shortest, the
// candidates holding it whose requests in flight are at most
// followLoadFactor x the candidates' mean + followLoadSlack; all of them
// otherwise (or when none of those qualifies).
func (s *sim) followPrefix(_ *picker.Request, cands []picker.Candidate) []picker.Candidate {
	if len(cands) < 2 {
		return cands
	}
	lo, hi, sum := -1, 0, 0
	for _, c := range cands {
		m := s.rankOf(c.Target).match
		if lo < 0 || m < lo {
			lo = m
		}
		hi = max(hi, m)
		sum += c.InFlight
	}
	if (hi-lo)*s.cfg.BlockTokens < followTokens {
		return cands
	}
	limit := followLoadFactor*float64(sum)/float64(len(cands)) + followLoadSlack
	keep := func(c picker.Candidate) bool {
		return s.rankOf(c.Target).match == hi && float64(c.InFlight) <= limit
	}
	n := 0
	for _, c := range cands {
		if keep(c) {
			n++
		}
	}
	if n == 0 {
		return cands
	}
	out := cands[:0]
	for _, c := range cands {
		if keep(c) {
			out = append(out, c)
		}
	}
	return out
}
