// Package replay is a deterministic discrete-event simulation that
// replays one agentic workload under several routing policies side by
// side, the placement layer's modes among them, and reports what each
// policy is worth: the token-weighted prefix-cache hit ratio, a
// time-to-first-token proxy (queueing plus prefill), load imbalance,
// moves, unpinned fallbacks and quarantines. cmd/replay runs it and
// writes the report (benchmarks/results/replay holds the default run's).
//
//	w, err := replay.Generate(replay.DefaultWorkload()) // or replay.ReadTrace(f)
//	cfg := replay.DefaultConfig()
//	cfg.Churn = replay.DefaultChurn(cfg.Workers, w.Span())
//	rep, err := replay.Run(ctx, cfg, w)
//	fmt.Print(rep.Table())
//
// # The contract
//
// Each rule has its test (replay_test.go, named in brackets).
//
//	D1  Determinism: the same Config and Workload give the same Report,
//	    byte for byte (WriteMarkdown and the SVG of WritePlot). Each
//	    policy's simulation is single-threaded, on its own simulated time
//	    (a priority queue of events ordered by time, then by the order they
//	    were scheduled); the policies run concurrently (errgroup) and their
//	    results are collected in Config.Policies' order. Nothing reads the
//	    wall clock, iterates a map into a result, or draws unseeded
//	    randomness. [TestDeterministic]
//	D2  Same conditions: every policy starts from empty caches with the
//	    same requests, the same membership changes and the same ambiguous
//	    dispatches: whether a request's n-th dispatch is ambiguous (and
//	    whether its worker ran it) is a hash of Config.Seed, the request and
//	    n, never of the policy. [TestSameAmbiguousDispatches]
//	D3  The cost model: a rank prefills one request at a time, in arrival
//	    order, in PrefillBase + uncached tokens / PrefillRate; a request's
//	    cached tokens are its leading prefix blocks the rank's cache holds
//	    when its prefill starts; decodes take OutputTokens x DecodeTokenTime,
//	    batched (they do not hold the prefill queue). The TTFT proxy runs
//	    from the client's send to the end of the prefill. [TestCostModel]
//	D4  The prefix cache is an LRU of CacheBlocks blocks per rank. A
//	    request's prompt blocks are touched at the end of its prefill, last
//	    block first, and its output's blocks join at the end of its decode
//	    just behind the prompt's last block (as vLLM frees a request's
//	    blocks tail first): under pressure a conversation loses its tail
//	    before its prefix. A partial last block is not cached. [TestLRU,
//	    TestPrefixBlocks]
//	D5  Loops: closed loop sends a request with After ThinkMS after the
//	    last of its dependencies was answered (its decode ended); open loop,
//	    and a request with no After, at AtMS. [TestCostModel, TestOpenLoop]
//	D6  Failures: a dispatch is ambiguous with probability AmbiguousProb:
//	    the worker ran it with probability AmbiguousRan (it then takes its
//	    queue time and fills the cache, unanswered), and the client sends the
//	    request again ClientTimeout later (that wait is not in the TTFT
//	    proxy). A restart (a new identity) clears the worker's caches and
//	    loses what it was running: those clients send again after RetryDelay
//	    (that wait is in the TTFT proxy). Fail stops dispatches to a worker
//	    and keeps its cache (Recover brings it back: a flap); Leave stops
//	    them and lets it finish what it runs. Every request is answered
//	    once; a simulation that cannot answer them all returns ErrStuck.
//	    [TestChurnServesEverything, TestStuck]
//	D7  Placement policies run the real affinity layer (impl/affinity) on
//	    a placement.ManualClock: Start, Eligible, Dispatch, Complete, Done,
//	    with Join/Fail/Leave on membership changes. The outcome is reported
//	    when the worker takes the request (Accepted) or as Ambiguous. Start
//	    never blocks (a cancelled context: a request that would wait is
//	    refused and sent again). Hard mode's quarantined sessions are refused
//	    (sent again after RetryDelay); soft mode routes them unpinned. A
//	    simulated resolver (impl/resolver's Pass, every ResolverInterval)
//	    asks the simulation whether each quarantined attempt arrived and
//	    settles it. [TestPlacementQuarantines]
//	D8  Honesty: round robin over N ranks reuses about 1/N of the later
//	    calls (a cache large enough to hold everything). [TestRoundRobinHonest]
//	D9  Bad input is an error, never a panic: *ParamError (ErrInvalidParams)
//	    for a Config or WorkloadParams field, *TraceError (ErrInvalidTrace)
//	    for a trace line; a cancelled context stops Run with its error, and
//	    Run leaves no goroutine behind. [TestBadInput, TestReadTraceErrors,
//	    TestCancel, TestNoGoroutineLeak]
//
// # Policies
//
//   - placement-hard, placement-soft, placement-off: the affinity layer in
//     each mode, with placement's scheduler (below).
//   - round-robin: the next up rank in turn.
//   - least-loaded: the fewest requests in flight (impl/picker's
//     LeastInFlight), ties broken at random (seeded).
//   - consistent-hash: impl/picker's ConsistentHash with bounded loads
//     (factor 1.25, load = requests in flight) over the session's (or sibling
//     group's) key.
//   - sticky-least-loaded: a session's first request to the least loaded
//     rank, the rest to the same rank while its worker is up and the same
//     instance; no load check.
//   - cache-aware: impl/picker's PrefixOverlap as the picker (SGLang's
//     cache_aware rule with impl/picker's defaults: the best prefix match
//     above 30% of the prompt, the least loaded otherwise or when max - min
//     in flight > 16 and max > 1.5 x min), its index an LRU of CacheBlocks
//     blocks per rank fed with every accepted dispatch and forgotten when a
//     worker restarts or leaves.
//
// # Placement's scheduler choices (tuning, documented)
//
// The affinity layer decides bindings; the scheduler it embeds decides
// where sessions are placed and what counts as overloaded. These are
// placement's own choices, set as follows:
//
//   - New sessions, unpinned requests and soft fallbacks are picked by an
//     impl/picker pipeline: DropOverloaded, then LeastInFlight and LeastBound
//     (weight 1 each), ties by rendezvous hashing of the key.
//   - A sibling group being placed goes to its parent session's binding
//     (Layer.Query) when that is eligible and not overloaded: the subagents
//     fork the parent's context, which that rank holds.
//   - Soft mode's Overloaded flag reads a rank's waiting requests (queued,
//     not yet prefilling: what vLLM reports as num_requests_waiting), not
//     its requests in flight: decodes fill the in-flight count without
//     delaying anyone's first token. On an earlier version of the cache
//     model, in flight at 1.25x the mean + 2 made 423 moves (hit 90.3%, p99
//     8.7 s) where waiting at the same threshold made 286 (92.3%, 8.0 s).
//     A rank is overloaded above 1.25x the mean waiting plus 4
//     (OverloadFactor, OverloadSlack).
//   - IdleTTL is 3 minutes rather than the core's 30: a binding that
//     outlives its rank's cache pins the session to a rank that must
//     prefill it all again, where a fresh placement takes the least loaded.
//
// The sweep behind the last two, on the default run (go run ./cmd/replay
// -policies placement-soft -seed S -overload-slack K -idle-ttl T), as hit %
// / p99 / imbalance / moves for seeds 1, 2, 3:
//
//	slack 2, 3 min    91.6/7.76/1.17/263   92.2/7.45/1.18/292   90.6/9.76/1.20/348
//	slack 4, 3 min    93.6/6.00/1.21/65    93.6/7.17/1.19/75    93.1/7.43/1.21/72
//	slack 8, 3 min    93.8/5.52/1.29/37    93.6/7.36/1.22/43    93.2/7.22/1.20/50
//	slack 4, 10 min   93.6/7.43/1.30/88    93.9/7.42/1.30/95    93.6/8.80/1.22/98
//	slack 4, 30 min   93.4/7.71/1.29/102   93.7/7.42/1.30/113   93.4/8.62/1.24/123
//
// Slack 8 is no better on the whole and breaks the 1.25 imbalance target on
// seed 1. Also tried and rejected: impl/picker's PrefixOverlap as
// placement's picker (cache-aware placing): soft p99 6.32, 6.78 and 6.03 s
// but imbalance 1.50, 1.53 and 1.41, and hard mode's p99 went to 26-55 s.
//
// Nothing about the simulation itself was tuned for placement: the
// workload, costs, failures and baselines are as described here, and
// placement-soft's p99 target is missed in the default run (see the
// report).
//
// # The workload and the JSONL trace format
//
// Generate builds agentic sessions from the figures in
// shared/reference/placement-quality.md (see DefaultWorkload and
// WorkloadParams): a shared 3,000-token system prompt; 1 + Poisson user
// turns (mean 3.95) of 1 + Poisson LLM calls (mean 7.8); each call appends
// lognormal tokens (mean 1,500) and outputs lognormal tokens (mean 425) to
// the conversation; tool time between calls lognormal (mean 15 s, within
// 1-100 s); gaps between user turns lognormal (median 1.6 s, sigma 2.5: mean
// about 37 s, at most 20 minutes); with probability 0.05 a call fans out to
// 2 + Poisson subagents (mean 3) of 1 + Poisson calls (mean 5) that fork the
// parent's context and share its sibling group (affinity.Namespace's
// SiblingGroup); the parent's next call waits for all of them. Sessions
// arrive as a Poisson process.
//
// A trace is JSONL, one Request per line, every request after those it
// waits for:
//
//	{"id":0,"session":"s00000","at_ms":208,"prompt":[{"stream":"sys","tokens":3000},{"stream":"s00000","tokens":450}],"input_tokens":3450,"output_tokens":707}
//	{"id":1,"session":"s00000","at_ms":23033,"after":[0],"think_ms":7685,"prompt":[{"stream":"sys","tokens":3000},{"stream":"s00000","tokens":5037}],"input_tokens":8037,"output_tokens":163}
//	{"id":31,"session":"s00000.t3c4.a0","parent":"s00000","at_ms":638363,"after":[30],"prompt":[{"stream":"sys","tokens":3000},{"stream":"s00000","tokens":55192},{"stream":"s00000.t3c4.a0","tokens":550}],"input_tokens":58742,"output_tokens":152}
//
// (the first two calls of a session: the second's prompt holds the first's
// prompt, its 707 output tokens and 3,880 new ones; then a subagent's
// first call, forking the parent's context of 55,192 tokens.)
//
// Fields: id (unique; after refers to earlier ids), session (the client's
// session id: 1 to 256 visible ASCII bytes), parent (a subagent's parent
// session: the request is routed under the parent's sibling group), at_ms
// (send time in milliseconds: open loop, and closed loop for a request with
// no after), after and think_ms (closed loop: sent think_ms after the last
// of after was answered), prompt or blocks (the prompt as segments, each the
// first tokens of a named token stream, so that prompts share exactly the
// prefix their segments agree on, and the output continues the last
// segment's stream; or the prompt's prefix block hashes, one per full block
// of Config.BlockTokens tokens, as a trace of real traffic records them),
// input_tokens (required with blocks), output_tokens, final (the session's
// last request: its binding closes). cmd/replay -write-trace writes the
// generated workload; -trace replays a file.
//
// # What is not modelled
//
// Decode does not slow prefill or vice versa; a rank's KV blocks in use
// by running requests can be evicted; prefill cost is linear in uncached
// tokens (no attention quadratic term); the router sees the ranks' true
// loads at once; workers never refuse a request (no DefinitelyNotAccepted);
// one phase (aggregated serving).
package replay
