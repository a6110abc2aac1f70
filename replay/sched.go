package replay

import (
	"time"

	"github.com/placementlab/placement/impl/affinity"
	"github.com/placementlab/placement/impl/picker"
)

// Placement's scheduler (modes hard and soft; the package doc's
// "Placement's scheduler choices" says why each part is there and what the
// sweep behind it measured) is built from impl/picker's parts: a
// PrefixOverlap index fed with every accepted dispatch (as cache-aware's
// is), the filters DropOverloaded, CostWithin{CostSlack} and FollowPrefix,
// the scorers LeastInFlight and LeastBound, and in soft mode MarkCostly.
// What is the simulation's own is only the cost each candidate carries:
// per rank, the router's estimate of the prefill backlog (the uncached
// tokens of the requests it dispatched there and saw accepted that have
// not yet given their first token, each estimated from the index at
// dispatch), and a request's estimated cost at a rank, that backlog plus
// its own uncached tokens there, as a time: its estimated time to first
// token.

const (
	// followTokens: the longest indexed prefix is followed only when it
	// is at least this many tokens longer than the shortest (a shared
	// system prompt alone is not worth following): FollowConfig.MinBlocks
	// is its ceiling over BlockTokens.
	followTokens = 4096
	// followLoadFactor and followLoadSlack: the prefix is followed only
	// to a rank with at most followLoadFactor x the mean requests in
	// flight plus followLoadSlack (FollowConfig.LoadFactor, LoadSlack).
	followLoadFactor = 1.25
	followLoadSlack  = 2
)

// followConfig is placement's FollowPrefix configuration for cfg.
func followConfig(cfg *Config) picker.FollowConfig {
	return picker.FollowConfig{
		MinBlocks:  (followTokens + cfg.BlockTokens - 1) / cfg.BlockTokens,
		LoadFactor: followLoadFactor,
		LoadSlack:  followLoadSlack,
		Load:       picker.LoadInFlight,
	}
}

// estimate fills each up rank's match and each candidate's Cost for
// request r (whose prompt blocks are s.placeReq.Blocks) from the router's
// index.
func (s *sim) estimate(r *Request, pc []picker.Candidate) {
	s.matches = append(s.matches[:0], make([]int, len(pc))...)
	s.prefix.Match(s.placeReq, pc, s.matches)
	for k := range pc {
		rk := s.rankOf(pc[k].Target)
		rk.match = s.matches[k]
		pc[k].Cost = s.costOf(rk.backlog + s.uncached(r, rk.match))
	}
}

// costOf converts an estimate in tokens of prefill to the time
// picker.Candidate.Cost holds: PrefillBase (the request's own prefill's
// fixed part) plus tokens / PrefillRate, at least 1 ns (zero would mean
// unknown). Every candidate's cost carries the same PrefillBase, so the
// comparisons CostWithin and MarkCostly make are those of the tokens.
func (s *sim) costOf(tokens int) time.Duration {
	d := s.cfg.PrefillBase + time.Duration(float64(tokens)*float64(time.Second)/s.cfg.PrefillRate)
	return max(d, time.Nanosecond)
}

// uncached estimates r's uncached tokens at a rank whose index holds
// match of its prompt blocks.
func (s *sim) uncached(r *Request, match int) int {
	return max(0, r.InputTokens-match*s.cfg.BlockTokens)
}

// markCostly is soft mode's overload rule for a bound request: the
// waiting-request flags are for placing sessions, so every flag is
// cleared, and the binding's rank is then flagged (picker.MarkCostly) when
// the request's estimated cost there exceeds the cheapest up rank's by
// more than CostSlack: the layer then offers the full set, and a dispatch
// elsewhere moves the binding.
func (s *sim) markCostly(bound affinity.Target, pc []picker.Candidate) {
	for k := range pc {
		pc[k].Overloaded = false
	}
	picker.MarkCostly(pc, bound, s.cfg.CostSlack)
}
