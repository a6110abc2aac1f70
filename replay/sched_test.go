package replay

import (
	"context"
	"testing"
	"time"

	"github.com/placementlab/placement/impl/affinity"
	"github.com/placementlab/placement/impl/picker"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// schedSim returns a placement-soft simulation of three one-rank
// workers, up, with the default costs (64-token blocks, 10,000 tokens/s,
// CostSlack 2 s: 20,000 tokens), and its candidates.
func schedSim(t *testing.T) (*sim, []picker.Candidate) {
	t.Helper()
	cfg := DefaultConfig()
	cfg.Workers, cfg.Ranks = 3, 1
	w := &Workload{Requests: []Request{{ID: 0, Session: "a", Prompt: []Segment{{"a", 100}}, InputTokens: 100, OutputTokens: 1}}}
	s, err := newSim(&cfg, PlacementSoft, w)
	require.NoError(t, err)
	t.Cleanup(s.close)
	for i := range cfg.Workers {
		s.join(i)
	}
	require.Len(t, s.up, 3)
	require.Equal(t, 20000, s.slackTokens())
	return s, s.candidates(false, false)
}

func targets(cs []picker.Candidate) []affinity.Target {
	var out []affinity.Target
	for _, c := range cs {
		out = append(out, c.Target)
	}
	return out
}

// S1: a session is placed only within CostSlack of the cheapest
// estimated time to first token.
func TestSchedWithinCost(t *testing.T) {
	s, pc := schedSim(t)
	for k, c := range []int{5000, 25000, 25001} {
		s.up[k].cost = c
	}
	got := s.withinCost(nil, append([]picker.Candidate(nil), pc...))
	assert.Equal(t, targets(pc[:2]), targets(got))
}

// S2: the longest indexed prefix is followed when it is at least
// followTokens longer than the shortest, to a rank not above 1.25x the
// mean in flight + 2; otherwise every candidate stays.
func TestSchedFollowPrefix(t *testing.T) {
	s, pc := schedSim(t)
	set := func(match ...int) {
		for k, m := range match {
			s.up[k].match = m
		}
	}
	follow := func(inflight ...int) []affinity.Target {
		cs := append([]picker.Candidate(nil), pc...)
		for k, n := range inflight {
			cs[k].InFlight = n
		}
		return targets(s.followPrefix(nil, cs))
	}
	set(0, 100, 100) // 100 blocks of 64 tokens: 6,400 tokens more
	assert.Equal(t, targets(pc[1:]), follow(0, 0, 0))
	assert.Equal(t, targets(pc[2:]), follow(0, 10, 0), "limit 1.25 x 10/3 + 2 = 6.2: rank 1 is busy")
	set(0, 100, 0)
	assert.Equal(t, targets(pc), follow(0, 10, 0), "the only holder is busy: every candidate")
	set(0, 63, 0) // 4,032 tokens: not worth following
	assert.Equal(t, targets(pc), follow(0, 0, 0))
	set(0, 64, 0)
	assert.Equal(t, targets(pc[1:2]), follow(0, 0, 0))
}

// S3: soft mode's overload rule for a bound request: its binding's rank
// is Overloaded when the request's estimated cost there exceeds the
// cheapest rank's by more than CostSlack; no other rank is marked.
func TestSchedMarkCostly(t *testing.T) {
	s, pc := schedSim(t)
	mark := func(bound int, costs ...int) []bool {
		for k, c := range costs {
			s.up[k].cost = c
		}
		cs := append([]picker.Candidate(nil), pc...)
		for k := range cs {
			cs[k].Overloaded = true
		}
		s.markCostly(pc[bound].Target, cs)
		var out []bool
		for _, c := range cs {
			out = append(out, c.Overloaded)
		}
		return out
	}
	assert.Equal(t, []bool{false, false, false}, mark(0, 20000, 0, 50000))
	assert.Equal(t, []bool{true, false, false}, mark(0, 20001, 0, 50000))
	assert.Equal(t, []bool{false, false, false}, mark(2, 0, 20001, 20000))
}

// S4: the router's backlog estimate counts accepted dispatches until
// their first token (a restart clears it), so it is zero once every
// request is answered, churn and ambiguous dispatches included.
func TestSchedBacklogSettles(t *testing.T) {
	s, _ := schedSim(t)
	s.cfg.AmbiguousProb = 0
	s.clk.Set(time.Second)
	s.now = time.Second
	s.send(0) // 100 tokens, nothing cached: prefilling
	total := 0
	for _, rk := range s.up {
		total += rk.backlog
	}
	assert.Equal(t, 100, total)
	s.prefillDone(s.events[0].job)
	assert.Zero(t, s.up[0].backlog+s.up[1].backlog+s.up[2].backlog)

	w := small(t, 12, 3)
	cfg := smallConfig(w)
	cfg.AmbiguousProb = 0.05
	for _, p := range []Policy{PlacementHard, PlacementSoft} {
		s, err := newSim(&cfg, p, w)
		require.NoError(t, err)
		seen := 0
		r, err := s.run(context.Background())
		require.NoError(t, err)
		require.Equal(t, len(w.Requests), r.Served)
		for _, wk := range s.workers {
			for _, rk := range wk.ranks {
				assert.Zero(t, rk.backlog, "%s %s", p, rk.target)
				seen++
			}
		}
		assert.Positive(t, seen)
	}
}

// S1 and S2 end to end: with bindings that expire between calls, every later
// call is placed again, and placement's scheduler sends it back to the
// rank holding its conversation (turn reuse near 100%, where load alone
// would scatter the calls over the four ranks).
func TestSchedFollowsPrefixEndToEnd(t *testing.T) {
	w := small(t, 6, 2)
	cfg := DefaultConfig()
	cfg.Workers, cfg.Ranks, cfg.BlockTokens, cfg.CacheBlocks = 2, 2, 256, 1<<14
	cfg.AmbiguousProb = 0
	cfg.IdleTTL = time.Millisecond
	cfg.Policies = []Policy{PlacementHard, PlacementSoft, PlacementOff}
	rep, err := Run(context.Background(), cfg, w)
	require.NoError(t, err)
	for _, r := range rep.Results[:2] {
		assert.Greater(t, r.TurnReuse, 0.9, "%s", r.Policy)
	}
	assert.Less(t, rep.Results[2].TurnReuse, 0.7, "off: load alone")
}
