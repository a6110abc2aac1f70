package replay

import (
	"context"
	"testing"
	"time"

	"github.com/placementlab/placement/impl/affinity"
	"github.com/placementlab/placement/impl/picker"
	"github.com/placementlab/placement/impl/placement"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// schedSim returns a placement-soft simulation of three one-rank
// workers, up, with the default costs (64-token blocks, 10,000 tokens/s,
// PrefillBase 10 ms, CostSlack 2 s: 20,000 tokens), and its candidates.
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
	require.Equal(t, 2*time.Second, s.cfg.CostSlack)
	require.Equal(t, 10*time.Millisecond, s.cfg.PrefillBase)
	return s, s.candidates(false, false)
}

func targets(cs []picker.Candidate) []affinity.Target {
	var out []affinity.Target
	for _, c := range cs {
		out = append(out, c.Target)
	}
	return out
}

// filter runs the placement pipeline's filters (DropOverloaded,
// CostWithin, FollowPrefix) over a copy of cs.
func filter(s *sim, req *picker.Request, cs []picker.Candidate) []picker.Candidate {
	cs = append([]picker.Candidate(nil), cs...)
	for _, f := range s.pipe.Filters {
		cs = f.Filter(req, cs)
	}
	return cs
}

// The cost each candidate carries: PrefillBase + (backlog + the request's
// uncached tokens there) / PrefillRate, never zero (zero means unknown to
// impl/picker).
func TestSchedEstimate(t *testing.T) {
	s, pc := schedSim(t)
	blocks := make([]uint64, 10)
	for i := range blocks {
		blocks[i] = uint64(i + 1)
	}
	s.prefix.Observe(&picker.Request{Blocks: blocks[:4]}, s.up[1].target, placement.Accepted)
	for k, b := range []int{0, 5000, 300} {
		s.up[k].backlog = b
	}
	s.placeReq = &picker.Request{Blocks: blocks}
	r := &Request{InputTokens: 10*64 + 5}
	s.estimate(r, pc)
	assert.Equal(t, []int{0, 4, 0}, []int{s.up[0].match, s.up[1].match, s.up[2].match})
	ms := func(us int) time.Duration { return 10*time.Millisecond + time.Duration(us)*time.Microsecond }
	assert.Equal(t, []time.Duration{ms(64500), ms(5000*100 + 389*100), ms(300*100 + 645*100)},
		[]time.Duration{pc[0].Cost, pc[1].Cost, pc[2].Cost})

	s.cfg.PrefillBase = 0
	assert.Equal(t, time.Nanosecond, s.costOf(0), "a known cost is never zero")
	assert.Equal(t, 2*time.Second, s.costOf(20000))
}

// S1: a session is placed only within CostSlack of the cheapest
// estimated time to first token (picker.CostWithin in the pipeline).
func TestSchedWithinCost(t *testing.T) {
	s, pc := schedSim(t)
	for k, b := range []int{5000, 25000, 25001} {
		s.up[k].backlog = b
	}
	s.placeReq = &picker.Request{}
	s.estimate(&Request{InputTokens: 100}, pc)
	assert.Equal(t, targets(pc[:2]), targets(filter(s, s.placeReq, pc)))
}

// S2: the longest indexed prefix is followed when it is at least
// followTokens longer than the shortest, to a rank not above 1.25x the
// mean in flight + 2; otherwise every candidate stays (picker.FollowPrefix
// in the pipeline, its MinBlocks the ceiling of 4,096 tokens over the
// block size).
func TestSchedFollowPrefix(t *testing.T) {
	cfg := DefaultConfig()
	assert.Equal(t, picker.FollowConfig{MinBlocks: 64, LoadFactor: 1.25, LoadSlack: 2}, followConfig(&cfg))
	cfg.BlockTokens = 48
	assert.Equal(t, 86, followConfig(&cfg).MinBlocks, "85 x 48 = 4,080 tokens are not enough")
	cfg.BlockTokens = 8192
	assert.Equal(t, 1, followConfig(&cfg).MinBlocks)

	for _, tc := range []struct {
		lead     int
		inflight []int
		want     []int
	}{
		{64, []int{0, 0, 0}, []int{1, 2}},
		{64, []int{0, 10, 0}, []int{2}},        // limit 1.25 x 10/3 + 2 = 6.2: rank 1 is busy
		{64, []int{0, 20, 20}, []int{0, 1, 2}}, // limit 1.25 x 40/3 + 2 = 18.7: both holders busy
		{63, []int{0, 0, 0}, []int{0, 1, 2}},   // 4,032 tokens: not worth following
	} {
		s, pc := schedSim(t)
		blocks := make([]uint64, tc.lead)
		for i := range blocks {
			blocks[i] = uint64(i + 1)
		}
		for _, k := range []int{1, 2} {
			s.prefix.Observe(&picker.Request{Blocks: blocks}, s.up[k].target, placement.Accepted)
		}
		s.placeReq = &picker.Request{Blocks: blocks}
		s.estimate(&Request{InputTokens: tc.lead * 64}, pc)
		for k, n := range tc.inflight {
			pc[k].InFlight = n
		}
		var want []affinity.Target
		for _, k := range tc.want {
			want = append(want, pc[k].Target)
		}
		assert.Equal(t, want, targets(filter(s, s.placeReq, pc)), "lead %d, in flight %v", tc.lead, tc.inflight)
	}
}

// S3: soft mode's overload rule for a bound request: its binding's rank
// is Overloaded when the request's estimated cost there exceeds the
// cheapest rank's by more than CostSlack; no other rank is marked (the
// waiting-request flags are for placing sessions).
func TestSchedMarkCostly(t *testing.T) {
	s, pc := schedSim(t)
	mark := func(bound int, costs ...int) []bool {
		cs := append([]picker.Candidate(nil), pc...)
		for k := range cs {
			cs[k].Overloaded = true
			cs[k].Cost = s.costOf(costs[k])
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
