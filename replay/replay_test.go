package replay

import (
	"bytes"
	"context"
	"errors"
	"math"
	"math/rand/v2"
	"runtime"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// small returns a small generated workload for tests.
func small(t *testing.T, sessions int, seed uint64) *Workload {
	t.Helper()
	p := DefaultWorkload()
	p.Sessions, p.SessionRate, p.Seed = sessions, 0.2, seed
	w, err := Generate(p)
	require.NoError(t, err)
	return w
}

// smallConfig is a small cluster: 5 workers of 2 ranks, the default
// churn over w, every policy.
func smallConfig(w *Workload) Config {
	cfg := DefaultConfig()
	cfg.Workers = 5
	cfg.BlockTokens, cfg.CacheBlocks = 256, 2048 // fewer blocks: faster tests
	cfg.Churn = DefaultChurn(cfg.Workers, w.Span())
	return cfg
}

func render(t *testing.T, rep *Report) (md, svg []byte) {
	t.Helper()
	var a, b bytes.Buffer
	require.NoError(t, rep.WriteMarkdown(&a, "replay.svg"))
	require.NoError(t, rep.WritePlot(&b))
	return a.Bytes(), b.Bytes()
}

// D1.
func TestDeterministic(t *testing.T) {
	w := small(t, 12, 7)
	cfg := smallConfig(w)
	cfg.AmbiguousProb = 0.02
	r1, err := Run(context.Background(), cfg, w)
	require.NoError(t, err)
	r2, err := Run(context.Background(), cfg, small(t, 12, 7))
	require.NoError(t, err)
	md1, svg1 := render(t, r1)
	md2, svg2 := render(t, r2)
	require.Equal(t, string(md1), string(md2), "same seed, different report")
	require.True(t, bytes.Equal(svg1, svg2), "same seed, different SVG")

	cfg.Seed = 8
	cfg.Policies = []Policy{PlacementSoft, RoundRobin}
	r3, err := Run(context.Background(), cfg, small(t, 12, 8))
	require.NoError(t, err)
	md3, _ := render(t, r3)
	require.NotEqual(t, string(md1), string(md3), "another seed should change the report")
}

// D2: without churn every request's dispatches meet the same ambiguous
// draws whatever the policy.
func TestSameAmbiguousDispatches(t *testing.T) {
	w := small(t, 10, 3)
	cfg := DefaultConfig()
	cfg.Workers = 4
	cfg.BlockTokens, cfg.CacheBlocks = 256, 2048
	cfg.AmbiguousProb = 0.05
	rep, err := Run(context.Background(), cfg, w)
	require.NoError(t, err)
	first := rep.Results[0].Ambiguous
	require.Positive(t, first)
	for _, r := range rep.Results {
		assert.Equal(t, first, r.Ambiguous, "%s", r.Policy)
		assert.Equal(t, len(w.Requests), r.Served, "%s", r.Policy)
	}
}

// D3 and D5 on a hand-made trace: one rank, 10-token blocks, 1,000
// tokens/s, 10 ms per output token.
func TestCostModel(t *testing.T) {
	w := &Workload{Requests: []Request{
		{ID: 0, Session: "a", Prompt: []Segment{{"a", 1000}}, InputTokens: 1000, OutputTokens: 100},
		{ID: 1, Session: "a", After: []int{0}, ThinkMS: 500, AtMS: 1500, Prompt: []Segment{{"a", 1300}}, InputTokens: 1300, OutputTokens: 50},
		{ID: 2, Session: "b", AtMS: 500, Prompt: []Segment{{"b", 500}}, InputTokens: 500, OutputTokens: 10},
	}}
	cfg := DefaultConfig()
	cfg.Workers, cfg.Ranks, cfg.BlockTokens, cfg.CacheBlocks = 1, 1, 10, 1000
	cfg.PrefillRate, cfg.PrefillBase, cfg.DecodeTokenTime = 1000, 0, 10*time.Millisecond
	cfg.AmbiguousProb = 0
	cfg.Policies = []Policy{RoundRobin, PlacementSoft}

	// Closed loop: request 0 prefills 0-1 s (TTFT 1 s) and decodes to 2 s;
	// request 2 waits 0.5-1 s, prefills to 1.5 s (TTFT 1 s); request 1 is
	// sent at 2.5 s, finds 1,100 tokens (the first prompt and its output)
	// cached, prefills 200 in 0.2 s, decodes 0.5 s: the end at 3.2 s.
	rep, err := Run(context.Background(), cfg, w)
	require.NoError(t, err)
	for _, r := range rep.Results {
		assert.Equal(t, time.Second, r.TTFTp50, "%s", r.Policy)
		assert.Equal(t, time.Second, r.TTFTp99, "%s", r.Policy)
		assert.Equal(t, int64(2800), r.PromptTokens)
		assert.Equal(t, int64(1100), r.CachedTokens)
		assert.Equal(t, 3200*time.Millisecond, r.End)
		assert.Equal(t, 1, r.LaterCalls)
		assert.Equal(t, 1, r.Reused)
	}

	// Open loop: request 1 is sent at 1.5 s, while request 0 decodes: only
	// the first prompt's 1,000 tokens are cached; it waits for nothing
	// (request 2's prefill ends at 1.5 s), prefills 300 in 0.3 s and
	// decodes 0.5 s: the end at 2.3 s.
	cfg.Loop = Open
	rep, err = Run(context.Background(), cfg, w)
	require.NoError(t, err)
	for _, r := range rep.Results {
		assert.Equal(t, int64(1000), r.CachedTokens, "%s", r.Policy)
		assert.Equal(t, 2300*time.Millisecond, r.End, "%s", r.Policy)
	}
}

// D5: open loop sends at the timestamps whatever the answers; a generated
// workload runs to the end under every policy.
func TestOpenLoop(t *testing.T) {
	w := small(t, 8, 5)
	cfg := smallConfig(w)
	cfg.Loop = Open
	rep, err := Run(context.Background(), cfg, w)
	require.NoError(t, err)
	for _, r := range rep.Results {
		assert.Equal(t, len(w.Requests), r.Served, "%s", r.Policy)
		assert.GreaterOrEqual(t, r.End, w.Span(), "%s", r.Policy)
	}
}

// D4: blocks are chained over the prompt's content.
func TestPrefixBlocks(t *testing.T) {
	a := prefixBlocks(nil, []Segment{{"sys", 64}, {"s1", 40}}, 0, 32)
	b := prefixBlocks(nil, []Segment{{"sys", 64}, {"s2", 40}}, 0, 32)
	require.Len(t, a, 3, "104 tokens: 3 full blocks of 32, the partial one not hashed")
	require.Equal(t, a[:2], b[:2], "the shared system prompt's blocks")
	require.NotEqual(t, a[2], b[2])

	longer := prefixBlocks(nil, []Segment{{"sys", 64}, {"s1", 100}}, 0, 32)
	require.Equal(t, a, longer[:3], "a stream's prefix is a prompt's prefix")
	withOut := prefixBlocks(nil, []Segment{{"sys", 64}, {"s1", 40}}, 60, 32)
	require.Equal(t, longer[:5], withOut, "the output continues the last segment's stream")

	shifted := prefixBlocks(nil, []Segment{{"sys", 60}, {"s1", 44}}, 0, 32)
	require.Equal(t, a[0], shifted[0])
	require.NotEqual(t, a[1], shifted[1], "other content in a block: another hash")
	require.NotEqual(t, a[2], shifted[2], "and every block after it")

	c1, c2 := chainBlocks(nil, []uint64{7, 8, 9}), chainBlocks(nil, []uint64{6, 8, 9})
	require.Len(t, c1, 3)
	require.NotEqual(t, c1[1], c2[1], "given hashes are chained")
}

// D6: with the default churn (a flap, a restart, a join, a leave) every
// policy answers every request once, and the restart loses work.
func TestChurnServesEverything(t *testing.T) {
	w := small(t, 15, 11)
	cfg := smallConfig(w)
	cfg.AmbiguousProb = 0.01
	rep, err := Run(context.Background(), cfg, w)
	require.NoError(t, err)
	lost := 0
	for _, r := range rep.Results {
		assert.Equal(t, len(w.Requests), r.Served, "%s", r.Policy)
		assert.Len(t, r.WorkerRequests, cfg.Workers+1, "%s: the joined worker", r.Policy)
		lost += r.Lost
	}
	require.Positive(t, lost, "the restart should have cut some requests")
}

// D6: no worker left: ErrStuck, not a hang.
func TestStuck(t *testing.T) {
	w := small(t, 2, 1)
	cfg := DefaultConfig()
	cfg.Workers = 1
	cfg.Churn = []Change{{At: 0, Worker: 0, Kind: Leave}}
	cfg.MaxSimTime = time.Hour
	cfg.Policies = []Policy{LeastLoaded}
	_, err := Run(context.Background(), cfg, w)
	require.ErrorIs(t, err, ErrStuck)
}

// D7: ambiguous placing dispatches quarantine their sessions; the
// resolver settles them; without it, soft mode routes the retries
// unpinned and hard mode refuses them.
func TestPlacementQuarantines(t *testing.T) {
	w := small(t, 10, 4)
	cfg := DefaultConfig()
	cfg.Workers = 4
	cfg.BlockTokens, cfg.CacheBlocks = 256, 2048
	cfg.AmbiguousProb = 0.1
	cfg.Policies = []Policy{PlacementHard, PlacementSoft, PlacementOff}
	rep, err := Run(context.Background(), cfg, w)
	require.NoError(t, err)
	hard, soft, off := rep.Results[0], rep.Results[1], rep.Results[2]
	for _, r := range []Result{hard, soft} {
		assert.Positive(t, r.Quarantines, "%s", r.Policy)
		assert.Positive(t, r.Resolved, "%s", r.Policy)
		assert.Positive(t, r.Hits, "%s", r.Policy)
	}
	assert.Zero(t, off.Quarantines)
	assert.Zero(t, off.Hits)

	cfg.ResolverInterval, cfg.ClientTimeout = 0, time.Second
	rep, err = Run(context.Background(), cfg, w)
	require.NoError(t, err)
	hard, soft = rep.Results[0], rep.Results[1]
	assert.Zero(t, soft.Resolved)
	assert.Positive(t, soft.Unpinned, "soft: a quarantined session's retry goes unpinned")
	assert.Positive(t, hard.Refused, "hard: a quarantined session's retry is refused")
	assert.Equal(t, len(w.Requests), hard.Served)
}

// D8.
func TestRoundRobinHonest(t *testing.T) {
	w := small(t, 20, 9)
	cfg := DefaultConfig()
	cfg.Workers, cfg.Ranks, cfg.BlockTokens, cfg.CacheBlocks, cfg.AmbiguousProb = 4, 1, 256, 1<<18, 0
	cfg.Policies = []Policy{RoundRobin, StickyLeastLoaded}
	rep, err := Run(context.Background(), cfg, w)
	require.NoError(t, err)
	rr, sticky := rep.Results[0], rep.Results[1]
	assert.InDelta(t, 0.25, rr.TurnReuse, 0.08, "round robin over 4 ranks")
	assert.Greater(t, sticky.TurnReuse, 0.99, "a sticky policy with room for everything")
	assert.Less(t, rr.HitRatio, sticky.HitRatio)
	checks := rep.Targets
	require.NotEmpty(t, checks)
	assert.True(t, checks[len(checks)-1].Met, "%+v", checks[len(checks)-1])
}

// The generator's distributions and the workload's shape.
func TestGenerateMeans(t *testing.T) {
	p := DefaultWorkload()
	g := &gen{p: p, rng: rand.New(rand.NewPCG(3, 4))}
	const n = 40000
	var tool, appended, out, pois float64
	var gaps []float64
	for range n {
		tool += g.toolTime().Seconds()
		appended += float64(g.tokens(p.AppendMean, p.AppendSigma))
		out += float64(g.tokens(p.OutputMean, p.OutputSigma))
		pois += float64(g.poisson(6.8))
		gaps = append(gaps, g.turnGap().Seconds())
	}
	sort.Float64s(gaps)
	assert.InEpsilon(t, 15, tool/n, 0.08, "tool time mean (clipped to 1-100 s)")
	assert.InEpsilon(t, 1500, appended/n, 0.05)
	assert.InEpsilon(t, 425, out/n, 0.05)
	assert.InEpsilon(t, 6.8, pois/n, 0.03)
	assert.InEpsilon(t, 1.6, gaps[n/2], 0.08, "turn gap median")
	assert.InEpsilon(t, 44, gaps[n*9/10], 0.2, "turn gap p90 (the trace's 44 s)")
	assert.InEpsilon(t, 75, g.poisson(75)+0.0, 0.5)

	p.Sessions, p.Seed = 300, 5
	w, err := Generate(p)
	require.NoError(t, err)
	calls, sessions, subagents, finals := 0, map[string]bool{}, map[string]bool{}, 0
	for _, r := range w.Requests {
		if r.Parent == "" {
			calls++
			sessions[r.Session] = true
		} else {
			subagents[r.Session] = true
			assert.True(t, sessions[r.Parent])
		}
		if r.Final {
			finals++
		}
		assert.Equal(t, "sys", r.Prompt[0].Stream)
		assert.Equal(t, 3000, r.Prompt[0].Tokens)
	}
	assert.Len(t, sessions, 300)
	assert.Equal(t, 300, finals)
	assert.InEpsilon(t, 3.95*7.8, float64(calls)/300, 0.1, "calls per session")
	assert.InEpsilon(t, 3.95*7.8*0.05*3, float64(len(subagents))/300, 0.25, "subagents per session")
	last := 0.0 // the last session's arrival: 300 at 0.4/s, about 750 s
	for _, r := range w.Requests {
		if r.Prompt[1].Tokens == r.InputTokens-3000 && len(r.After) == 0 {
			last = max(last, float64(r.AtMS)/1000)
		}
	}
	assert.InEpsilon(t, 300/0.4, last, 0.15)
	assert.Greater(t, w.Span().Seconds(), last+600, "the last session lasts its calls")
}

// The JSONL trace round-trips, and a trace of block hashes replays.
func TestTraceRoundTrip(t *testing.T) {
	w := small(t, 6, 2)
	var buf bytes.Buffer
	require.NoError(t, w.WriteTrace(&buf))
	require.Equal(t, len(w.Requests), strings.Count(buf.String(), "\n"))
	back, err := ReadTrace(&buf)
	require.NoError(t, err)
	require.Equal(t, w, back)

	blocks := "{\"id\":10,\"session\":\"x\",\"at_ms\":0,\"blocks\":[1,2,3],\"input_tokens\":200,\"output_tokens\":5}\n\n" +
		"{\"id\":11,\"session\":\"x\",\"after\":[10],\"think_ms\":100,\"blocks\":[1,2,3,4],\"input_tokens\":260,\"output_tokens\":5,\"final\":true}\n"
	bw, err := ReadTrace(strings.NewReader(blocks))
	require.NoError(t, err)
	cfg := DefaultConfig()
	cfg.Workers, cfg.Ranks = 1, 1
	cfg.AmbiguousProb = 0
	cfg.Policies = []Policy{PlacementSoft}
	rep, err := Run(context.Background(), cfg, bw)
	require.NoError(t, err)
	assert.Equal(t, int64(3*64), rep.Results[0].CachedTokens, "the three shared blocks")
	assert.Equal(t, 1, rep.Results[0].Reused)
}

// D9: trace lines.
func TestReadTraceErrors(t *testing.T) {
	ok := `{"id":0,"session":"a","prompt":[{"stream":"a","tokens":5}],"output_tokens":1}`
	cases := map[string]string{
		"not json":       `{"id":`,
		"no session":     `{"id":1,"prompt":[{"stream":"a","tokens":5}],"output_tokens":1}`,
		"duplicate id":   `{"id":0,"session":"a","prompt":[{"stream":"a","tokens":5}],"output_tokens":1}`,
		"negative id":    `{"id":-1,"session":"a","prompt":[{"stream":"a","tokens":5}],"output_tokens":1}`,
		"forward after":  `{"id":1,"session":"a","after":[2],"prompt":[{"stream":"a","tokens":5}],"output_tokens":1}`,
		"no output":      `{"id":1,"session":"a","prompt":[{"stream":"a","tokens":5}]}`,
		"no prompt":      `{"id":1,"session":"a","output_tokens":1}`,
		"both":           `{"id":1,"session":"a","prompt":[{"stream":"a","tokens":5}],"blocks":[1],"output_tokens":1}`,
		"empty segment":  `{"id":1,"session":"a","prompt":[{"stream":"","tokens":5}],"output_tokens":1}`,
		"input mismatch": `{"id":1,"session":"a","prompt":[{"stream":"a","tokens":5}],"input_tokens":6,"output_tokens":1}`,
		"negative time":  `{"id":1,"session":"a","at_ms":-5,"prompt":[{"stream":"a","tokens":5}],"output_tokens":1}`,
	}
	for name, line := range cases {
		_, err := ReadTrace(strings.NewReader(ok + "\n" + line + "\n"))
		require.ErrorIs(t, err, ErrInvalidTrace, name)
		var te *TraceError
		require.ErrorAs(t, err, &te, name)
		if name != "not json" {
			require.Equal(t, 2, te.Line, name)
		}
	}
	_, err := ReadTrace(strings.NewReader("\n"))
	require.ErrorIs(t, err, ErrInvalidTrace, "no requests")

	// An invalid session id is caught when the replay derives its keys.
	w, err := ReadTrace(strings.NewReader(`{"id":0,"session":"has space","prompt":[{"stream":"a","tokens":5}],"output_tokens":1}`))
	require.NoError(t, err)
	_, err = Run(context.Background(), DefaultConfig(), w)
	require.ErrorIs(t, err, ErrInvalidTrace)
}

// D9: parameters.
func TestBadInput(t *testing.T) {
	w := small(t, 2, 1)
	bad := []func(*Config){
		func(c *Config) { c.Workers = 0 },
		func(c *Config) { c.Ranks = 0 },
		func(c *Config) { c.BlockTokens = 0 },
		func(c *Config) { c.CacheBlocks = -1 },
		func(c *Config) { c.PrefillRate = math.NaN() },
		func(c *Config) { c.AmbiguousProb = 1 },
		func(c *Config) { c.RetryDelay = 0 },
		func(c *Config) { c.BoundedLoadFactor = 0.5 },
		func(c *Config) { c.CostSlack = -time.Second },
		func(c *Config) { c.Policies = nil },
		func(c *Config) { c.Policies = []Policy{NumPolicies} },
		func(c *Config) { c.Churn = []Change{{At: 2, Kind: Fail}, {At: 1, Kind: Recover}} },
		func(c *Config) { c.Churn = []Change{{Kind: 0}} },
		func(c *Config) { c.Loop = 9 },
	}
	for i, f := range bad {
		cfg := DefaultConfig()
		f(&cfg)
		_, err := Run(context.Background(), cfg, w)
		require.ErrorIs(t, err, ErrInvalidParams, "case %d", i)
		var pe *ParamError
		require.ErrorAs(t, err, &pe)
	}
	_, err := Run(context.Background(), DefaultConfig(), nil)
	require.ErrorIs(t, err, ErrInvalidParams)
	for _, r := range []Request{
		{ID: 0, Session: "a", Prompt: []Segment{{"a", 5}}, OutputTokens: 1},                 // no InputTokens
		{ID: 0, Session: "a", After: []int{0}, InputTokens: 5, OutputTokens: 1},             // waits for itself
		{ID: 0, Session: "a", Prompt: []Segment{{"a", 5}}, InputTokens: 5, OutputTokens: 0}, // no output
	} {
		_, err = Run(context.Background(), DefaultConfig(), &Workload{Requests: []Request{r}})
		require.ErrorIs(t, err, ErrInvalidTrace, "%+v", r)
	}

	badW := []func(*WorkloadParams){
		func(p *WorkloadParams) { p.Sessions = 0 },
		func(p *WorkloadParams) { p.SessionRate = 0 },
		func(p *WorkloadParams) { p.UserTurnsMean = 0.5 },
		func(p *WorkloadParams) { p.AppendSigma = -1 },
		func(p *WorkloadParams) { p.FanoutProb = 2 },
		func(p *WorkloadParams) { p.ToolTimeMax = 0 },
	}
	for i, f := range badW {
		p := DefaultWorkload()
		f(&p)
		_, err := Generate(p)
		require.ErrorIs(t, err, ErrInvalidParams, "case %d", i)
	}
	_, err = ParsePolicy("nope")
	require.ErrorIs(t, err, ErrInvalidParams)
	for _, p := range AllPolicies() {
		q, err := ParsePolicy(p.String())
		require.NoError(t, err)
		require.Equal(t, p, q)
	}
	require.Equal(t, "Policy(200)", Policy(200).String())
	require.Equal(t, "restart", Restart.String())
	require.Equal(t, "open", Open.String())
}

// D9: cancellation.
func TestCancel(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	_, err := Run(ctx, DefaultConfig(), small(t, 3, 1))
	require.True(t, errors.Is(err, context.Canceled), "%v", err)
}

// D9: Run leaves no goroutine behind (the errgroup's, the layers').
func TestNoGoroutineLeak(t *testing.T) {
	before := runtime.NumGoroutine()
	w := small(t, 4, 1)
	_, err := Run(context.Background(), smallConfig(w), w)
	require.NoError(t, err)
	deadline := time.Now().Add(5 * time.Second)
	for runtime.NumGoroutine() > before && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	require.LessOrEqual(t, runtime.NumGoroutine(), before)
}

// The report states each target, met or missed, with its numbers.
func TestReportTargets(t *testing.T) {
	rs := []Result{
		{Policy: PlacementSoft, HitRatio: 0.90, TTFTp99: 2 * time.Second, Imbalance: 1.3},
		{Policy: CacheAware, HitRatio: 0.95, TTFTp99: time.Second},
		{Policy: RoundRobin, HitRatio: 0.2, TTFTp99: 9 * time.Second, TurnReuse: 0.1, Targets: 10},
	}
	ts := evaluate(rs)
	require.Len(t, ts, 4)
	for _, tc := range ts[:3] {
		assert.False(t, tc.Met, "%+v", tc)
	}
	assert.Contains(t, ts[0].Detail, "5.0 points behind")
	assert.Contains(t, ts[1].Detail, "cache-aware 1.00 s")
	assert.True(t, ts[3].Met)

	rep := &Report{Config: DefaultConfig(), Results: rs, Targets: ts}
	md, svg := render(t, rep)
	assert.Contains(t, string(md), "**MISSED**: placement-soft busiest worker")
	assert.Contains(t, string(md), "**MET**: round robin")
	assert.Contains(t, string(svg), "<svg")
	assert.Contains(t, rep.Table(), "| placement-soft |  90.0 |")
}
