// Package replay is a deterministic discrete-event simulation that
// replays one agentic workload under several routing policies side by
// side, the placement layer's modes among them, and reports what each
// policy is worth: the token-weighted prefix-cache hit ratio, a
// time-to-first-token proxy (queueing plus prefill), load imbalance,
// moves, unpinned fallbacks and quarantines. cmd/replay runs it and
// writes the report (benchmarks/results/replay holds the default run's).
// RunReplicas (cmd/replay -replicas) runs router replicas behind a load
// balancer under four consistency policies (see "Router replicas").
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
// # Invariants
//
// Each placement policy's simulation (Run's, and every replica's layer in
// RunReplicas) checks three invariants as it runs and reports what breaks
// them in Result.Violations (the first MaxViolations, each a sentence
// naming the invariant, the request, its session, the time and the
// workers), Result.ViolationCount and Result.InvariantChecks (the checks
// made, so that a caller can see they ran); Report.Violations and
// ReplicaReport.Violations list them all. The reports' tables do not
// change.
//
//	I1  No lease leaked (InvLeaseLeaked): when every request is answered,
//	    every turn the router started was ended (Done), and each layer,
//	    its clock moved past ReserveTimeout + DispatchTimeout,
//	    QuarantineTTL and IdleTTL, holds no entry (Stats.Live): only a
//	    lease never released keeps a binding past its idle TTL. A lease
//	    left on a binding its worker's restart fenced is not seen by the
//	    layer's count (the turns' count still sees it).
//	I2  No session routed to a departed worker (InvDepartedWorker): a
//	    placement dispatch goes to a worker that is up (the layers are told
//	    of every Fail and Leave at once), a hit never goes to a binding made
//	    on an instance before the worker's restart, and a replica
//	    following another's binding (a pin) follows the worker's current
//	    instance.
//	I3  No turn on two workers at once (InvTwoWorkers): an accepted request
//	    does not start on one worker while its key's live binding (as the
//	    replica saw it when the key's last turn ended: Layer.Query) is on
//	    another worker that is running an accepted request of the key.
//	    Allowed, as the contract allows them: requests of one key at once
//	    on one worker (sibling fan-outs, open loop); lost requests (an
//	    ambiguous dispatch the worker ran); requests a restart cut; the
//	    requests a failed or leaving worker finishes after its binding
//	    moved (B1, B2: a binding whose worker failed, left or restarted
//	    since it was seen is not held to, a flap included); a binding past
//	    its idle TTL (the simulation ends each turn at its dispatch, so the
//	    TTL runs while the request does); a final request's close (F1),
//	    quarantines and a consistency policy's EndSession (no binding
//	    seen); in soft mode a binding offered Overloaded or a pin to
//	    another target (B4, P4: the binding follows). Across replicas
//	    only claims in hard mode promise it (R4): a request follows the
//	    live claim, outside the store's outage window and EventDelay after
//	    a rewrite (a replica's cache may hold the previous revision); none,
//	    best-effort and gossip-lww split sessions across replicas by
//	    design and are held to each replica's own bindings only.
//
// Default runs find no violation (TestInvariantsHold,
// TestInvariantsHoldReplicas); a simulation broken on purpose through an
// unexported test hook is caught (TestInvariantLeakCaught,
// TestInvariantDepartedCaught, TestInvariantOldInstanceCaught,
// TestInvariantSplitCaught).
//
// # Policies
//
//   - placement-hard, placement-soft, placement-off: the affinity layer in
//     each mode, with placement's scheduler (below; mode off with its
//     load-only part).
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
// placement's own choices, what a router author configures; the
// simulation, workload, costs and baselines are untouched by them. The
// scheduler is built from impl/picker's built-ins, which a router imports:
// the filters DropOverloaded, CostWithin and FollowPrefix over a
// PrefixOverlap index, the scorers LeastInFlight and LeastBound, and in
// soft mode MarkCostly (impl/picker's package doc states their rules and
// tests). What stays here (sched.go) is what a router supplies: the cost
// each candidate carries (picker.Candidate.Cost), estimated from the
// router's view of the simulated ranks below, the Overloaded flags, and
// the sibling group's parent hint.
//
// The router keeps two things it can know: a prefix index of what it sent
// where (impl/picker's PrefixOverlap with CacheBlocks blocks per rank, fed
// with every accepted dispatch and forgotten when a worker restarts or
// leaves, exactly as cache-aware's), and per rank an estimate of the
// prefill backlog: the uncached tokens of the requests it saw accepted
// there and that have not yet given their first token, each estimated from
// the index at dispatch (a restart clears it). A request's estimated cost
// at a rank is that backlog plus its own uncached tokens there (from the
// index, PrefixOverlap.Match): its estimated time to first token, in
// tokens of prefill, which the candidate carries as a time: PrefillBase +
// tokens / PrefillRate (at least 1 ns, since zero means unknown; the same
// PrefillBase on every rank leaves every comparison as it is in tokens).
//
//   - A session being placed (new, or again after its binding idled out,
//     its worker went, or soft mode moved it), an unpinned request and a
//     soft fallback are picked by an impl/picker pipeline: DropOverloaded;
//     then the ranks within Config.CostSlack (2 s of prefill) of the
//     cheapest cost (CostWithin); then, when the longest indexed prefix
//     among them is at least 4,096 tokens longer than the shortest, the
//     ranks holding it whose requests in flight are at most 1.25x the mean
//   - 2, all of them if none is (FollowPrefix, MinBlocks the ceiling of
//     4,096 over BlockTokens); then LeastInFlight and LeastBound (weight 1
//     each), ties by rendezvous hashing of the key.
//   - A sibling group being placed goes to its parent session's binding
//     (Layer.Query) when that is eligible and not overloaded: the subagents
//     fork the parent's context, which that rank holds.
//   - Soft mode, a bound request: its binding's rank is Overloaded (the
//     layer then offers every rank, and the pick above moves the binding)
//     when the request's cost there exceeds the cheapest rank's by more
//     than CostSlack (MarkCostly; the waiting-request flags below are
//     cleared first: they apply to placing). Placing a session, soft mode
//     also drops a rank whose waiting requests (queued, not yet
//     prefilling: vLLM's num_requests_waiting) exceed 1.25x the mean plus
//     4 (OverloadFactor, OverloadSlack).
//   - IdleTTL is 45 seconds rather than the core's 30 minutes: the prefix
//     index, not the binding, keeps a session on its cache across a long
//     tool call or a user's pause, and a session placed again after a
//     pause is checked against the ranks' backlogs instead of held on a
//     rank that has since filled.
//   - Mode off keeps the load-only part (DropOverloaded, LeastInFlight,
//     LeastBound): it is the control without affinity, and a prefix-aware
//     picker without affinity is what the cache-aware row already shows.
//
// Rules of the scheduler, each with its test (sched_test.go; the
// built-ins' own rules are tested in impl/picker):
//
//	S0  A candidate's cost is PrefillBase + (its rank's backlog + the
//	    request's uncached tokens there) / PrefillRate, never zero.
//	    [TestSchedEstimate]
//	S1  A session is placed only on a rank within CostSlack of the
//	    cheapest estimated cost. [TestSchedWithinCost]
//	S2  The longest indexed prefix is followed when it is at least 4,096
//	    tokens longer than the shortest, to a rank with at most 1.25x the
//	    mean requests in flight + 2; otherwise every candidate stays.
//	    [TestSchedFollowPrefix; with S1, TestSchedFollowsPrefixEndToEnd]
//	S3  Soft mode marks a bound request's rank (and no other) Overloaded
//	    when its cost exceeds the cheapest's by more than CostSlack.
//	    [TestSchedMarkCostly]
//	S4  The backlog estimate counts an accepted dispatch's estimated
//	    uncached tokens until its first token, and is zero when the run
//	    ends. [TestSchedBacklogSettles]
//
// Moving these rules from this package into impl/picker's built-ins left
// the default run's report.md and replay.svg byte for byte as they were
// (and placement's rows on seed 2, and on seed 3 with 48-token blocks and a
// 1.5 s slack).
//
// How this was found. The scheduler before (placing on the least loaded
// rank, LeastInFlight + LeastBound, bindings idle out after 3 minutes,
// soft's overload flag on waiting requests alone) met every target of the
// default run but the p99: placement-soft 6.00 s against cache-aware's
// 3.26 s (seeds 2-4: 7.17, 7.43, 5.28 s against 4.18, 3.80, 3.06 s). Of
// its 125 slowest answers on seed 1 (the p99 tail), 44 were sessions
// placed again after their binding idled out and 8 soft fallbacks; 48 of
// the 125 prefilled on a rank holding only the system prompt while another
// rank held 400-1,700 blocks (25,000-110,000 tokens) of their context; the
// other 73 were mostly later turns waiting 5-15 s behind such prefills on
// their own rank. Two fixes follow: place a session where its prefix is, and
// measure load as prefill backlog rather than a count of requests.
//
// The sweep, placement-soft's hit % / p99 / imbalance / moves for seeds
// 1, 2, 3, 4 (targets: p99 at most cache-aware's 3.26, 4.18, 3.80,
// 3.06 s; imbalance at most 1.25), then hard mode's p99. Rows 1 and 2 were
// measured with experimental code that was not kept; row 3 is go run
// ./cmd/replay -policies placement-soft,placement-hard -seed S -idle-ttl T
// -cost-slack C:
//
//	before                    93.6/6.00/1.21/65   93.6/7.17/1.19/75   93.1/7.43/1.21/72   94.3/5.28/1.21/57   hard 6.70 10.54 7.22 6.97
//	1. PrefixOverlap as a Scorer (match ratio, weight w) + LeastInFlight + LeastBound, DropOverloaded, 3 min:
//	   w 0.5                  94.3/4.55/1.27/42   94.4/6.11/1.24/60   93.9/5.70/1.21/73   94.7/4.78/1.20/49   hard 5.58 6.01 6.40 6.60
//	   w 1                    94.7/4.38/1.19/60   94.9/5.02/1.23/68   94.4/4.92/1.27/66   95.2/3.73/1.23/51   hard 5.40 5.28 8.03 4.57
//	   w 2                    94.8/4.59/1.29/56   95.2/4.78/1.26/59   94.6/4.79/1.23/75   95.1/4.48/1.32/53   hard 5.94 18.13 6.80 5.91
//	   w 4                    93.8/5.79/1.50/93   94.0/6.58/1.49/88   94.2/5.96/1.48/94   93.7/6.81/1.73/111  hard 57.8 48.1 24.9 61.7
//	   w 1, load = waiting    94.7/4.63/1.23/64   94.9/5.03/1.27/66   94.7/5.05/1.20/62   95.1/4.19/1.23/54   hard 4.63 5.88 6.26 4.69
//	   w 2, load = waiting    93.7/5.62/1.58/77   94.7/5.20/1.42/57   94.2/5.62/1.41/75   94.4/5.21/1.66/78   hard 23.5 38.7 6.70 22.5
//	2. the cost as a weighted scorer (min-max, weight 1, with LeastInFlight and LeastBound), the prefix filter (S2) and soft's cost rule (S3):
//	   slack 3 s, 3 min       94.6/4.07/1.23/103  95.2/3.99/1.21/92   94.8/3.84/1.24/105  95.4/3.23/1.23/55   hard 5.09 9.61 9.64 3.93
//	   slack 2 s, 45 s, the
//	   prefix followed only
//	   within the slack       88.3/21.2/1.26/999  95.4/3.05/1.24/82   95.1/3.32/1.18/76   95.5/2.52/1.24/50   hard 2.95 3.43 3.02 2.59
//	3. the final scheduler (cost as a filter), idle TTL x CostSlack:
//	   30 s, slack 1.5 s      95.0/2.95/1.22/64   95.3/3.21/1.24/67   95.1/3.22/1.22/82   95.0/3.17/1.22/78   hard 3.13 3.78 3.35 2.91
//	   30 s, slack 2 s        94.8/3.27/1.25/75   95.2/3.54/1.18/86   94.8/3.60/1.19/81   95.3/3.04/1.21/54   hard 3.60 2.97 3.79 2.48
//	   30 s, slack 3 s        95.0/3.32/1.19/47   95.4/3.45/1.27/46   95.0/3.47/1.19/49   95.4/2.61/1.24/34   hard 3.29 3.15 3.88 3.05
//	   45 s, slack 1.5 s      95.2/2.72/1.19/81   95.4/3.21/1.23/98   94.9/3.45/1.29/118  95.4/2.57/1.24/67   hard 2.73 3.38 3.65 2.53
//	   45 s, slack 2 s        95.2/2.86/1.20/64   95.4/3.32/1.25/78   95.0/3.25/1.18/87   95.4/2.87/1.23/57   hard 2.46 3.60 3.40 2.63   (the default)
//	   45 s, slack 3 s        95.3/2.75/1.26/39   95.6/3.06/1.21/48   95.3/3.15/1.21/53   95.5/2.61/1.24/45   hard 3.26 3.31 2.90 2.54
//	   1 min, slack 1.5 s     95.0/3.18/1.23/97   95.2/3.50/1.24/121  94.8/3.64/1.20/115  95.4/2.74/1.29/79   hard 3.60 3.87 4.25 2.57
//	   1 min, slack 2 s       95.0/3.26/1.27/83   95.5/3.14/1.27/73   94.9/3.53/1.21/96   95.5/2.63/1.29/54   hard 3.19 5.05 4.17 2.76
//	   1 min, slack 3 s       95.1/3.20/1.21/61   95.5/3.21/1.28/63   94.8/3.75/1.21/78   95.5/2.80/1.28/41   hard 3.71 3.87 3.75 2.92
//	   3 min, slack 1.5 s     94.9/3.37/1.33/148  95.0/3.86/1.21/148  95.0/3.19/1.25/138  95.1/3.25/1.23/125  hard 6.59 6.40 12.94 10.43
//	   3 min, slack 2 s       94.6/3.76/1.32/132  95.0/3.64/1.21/130  94.7/3.58/1.24/137  95.2/3.06/1.25/99   hard 6.59 6.03 28.63 6.15
//	   3 min, slack 3 s       95.0/3.41/1.24/69   95.2/3.83/1.26/87   94.8/3.64/1.31/91   95.3/3.56/1.26/80   hard 5.83 7.55 28.06 5.51
//
// (1) cuts the tail's prefills on a rank without the context (48 of seed
// 1's 125 slowest before, 17 at w 1) but leaves the tail to waits behind
// other sessions' long prefills (at w 1, 92 of the 125 were later turns on
// their own rank), which counts of requests in flight or waiting do not
// see; a heavier prefix weight breaks the imbalance target and hard mode,
// which has no overload flag. (2) The backlog in a weighted sum with
// min-max load scores was unstable: on seed 1 with 45-second bindings soft
// made 999 moves and its p99 went to 21 s, moves landing on ranks with few
// requests in flight but long backlogs, because the load scorers outvoted
// the cost. As a filter (3) the cost cannot be outvoted, and soft mode is
// stable across the grid above (p99 at most 3.86 s; hard mode is not with
// 3-minute bindings: 28 s on seed 3). Shorter idle TTLs help because each
// placement after a pause re-checks the backlogs while the prefix index
// keeps the session on its cache when that rank is not busy; hard mode
// gains the same way (its p99 falls from 6.7-10.5 s to 2.5-3.6 s).
//
// The result, on the default run: every target met on seeds 1-4, where
// the defaults were chosen (placement-soft hit % / p99 / imbalance,
// against cache-aware's p99 and the best hit ratio):
//
//	seed 1   95.2 / 2.86 s / 1.20   cache-aware 3.26 s   best hit 95.4 (placement-hard)
//	seed 2   95.4 / 3.32 s / 1.25   cache-aware 4.18 s   best hit 95.5 (placement-hard)
//	seed 3   95.0 / 3.25 s / 1.18   cache-aware 3.80 s   best hit 95.3 (placement-hard)
//	seed 4   95.4 / 2.87 s / 1.23   cache-aware 3.06 s   best hit 95.5 (placement-hard)
//
// The margins are thin. The default is the only point of the grid that
// meets every target on all of seeds 1-4: each neighbour breaks the 1.25
// imbalance bound (45 s with slack 1.5 or 3 s: 1.29 and 1.26; 30 s with 3
// s: 1.27; every 1- and 3-minute point) or the p99 (30 s: 3.27 s against
// 3.26 s on seed 1 with slack 2 s, 3.17 s against 3.06 s on seed 4 with
// 1.5 s) on some seed. Two held-out seeds each missed one target: seed 5
// 95.1 / 2.84 s / 1.26 (imbalance over 1.25; cache-aware 3.06 s), seed 6
// 95.3 / 2.95 s / 1.22 (cache-aware's 2.79 s is lower). These figures
// predate the affinity layer's fix that ends a final request's binding
// whatever its fate (the workload's sessions end with final requests);
// with it, the default run reads 95.1 / 3.04 s / 1.18, seeds 1-5 meet
// every target, and seed 6 misses two (p99 2.93 s against cache-aware's
// 2.79 s; imbalance 1.28). Imbalance sits at
// 1.18-1.26 because a session now stays where its cache is, which
// cache-aware does with no balance bound at all (1.36-1.53). So the p99
// target is met on the default run and on seeds 1-4 by a real change
// (prefix-following, a backlog-aware load, shorter bindings: p99 down
// 46-56% on seeds 1-4), but the choice of the exact point was made on
// those seeds and the margin does not survive every seed.
//
// Nothing about the simulation itself was tuned for placement: the
// workload, costs, failures and baselines are as described here.
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
// # Router replicas
//
// RunReplicas (cmd/replay -replicas 1,3,5) puts R router replicas behind
// a load balancer that sends each request to a random replica, and
// compares on the same requests how the replicas keep their session
// bindings consistent (Config.Replicas; the policies are Consistency's):
//
//   - none: each replica alone, its own affinity layer knowing nothing of
//     the others.
//   - best-effort (Dynamo's): after each accepted dispatch of a bound
//     session the replica publishes the binding, delivered to every other
//     replica SyncDelay later; a replica that has a live binding (its
//     layer's, or a learned one whose local TTL, IdleTTL from its last
//     receipt, has not passed) keeps it: the first live binding wins. A
//     turn on a replica whose layer has no binding follows a live learned
//     one.
//   - gossip-lww (SGLang's mesh, last writer wins): a replica broadcasts
//     each change of a binding (placed, moved) stamped with its time and
//     writer, delivered SyncDelay later; a write later than any the
//     receiver knows is adopted (ending its layer's binding of the session
//     when it differs) and its next turn follows it. The replicated map
//     has no local TTL: an entry holds while its worker is up as the same
//     instance, until a later write.
//   - claims (ours, impl/replica's protocol): a simulated store of claims
//     (a target, the worker's instance, a revision, the last use). A
//     session's first turn on a replica makes one store operation
//     (CreateOrGet: a live claim is adopted and the turn pinned to it;
//     otherwise the replica's layer places the session and the claim is
//     created: first writer wins); the dispatch reaches its worker
//     StoreLatency later (its outcome is reported to the layer at once,
//     so the turn does not hold the session across the round trip). A
//     later turn on a replica whose layer holds the
//     claimed binding makes no store call. A move (the claim's worker
//     failed, restarted or left, or the claim idled out: IdleTTL after its
//     last use on any replica) rewrites the claim, fenced by the revision
//     read; the other replicas' caches evict the old revision EventDelay
//     later. From StoreDownAt for StoreDownFor the store is unreachable:
//     replicas keep serving the sessions they hold and place the others
//     locally (unclaimed, no store call); when it is back every replica's
//     cache is reset and each reconciles its unclaimed sessions through
//     CreateOrGet with its local target (first writer wins; a loser
//     follows the claim at the session's next turn).
//
// What is real and what is simulated. Each replica runs the real affinity
// layer (impl/affinity on its own placement.ManualClock, attempt ids from
// 1 + k<<40), impl/resolver on its own quarantines, and its own impl/picker
// scheduler and prefix index (placement's, as the single router's; replica
// 0's seeds are the single router's). Following another replica's binding
// is a request pinned to its target (a pin binds an unbound session; the
// layer's own binding of the session is ended first with Layer.EndSession
// when it differs). The syncing is simulated on the event queue: the
// messages, the store (its operations linearized when the request reaches
// the replica), its watch events and its outage, with fixed delays and no
// loss; there is no real store, no network and no goroutine. Every replica
// sees membership changes at once and the ranks' true loads and prefill
// backlogs. Not modelled: claims' quarantines in the store (a replica's
// quarantine stays its own), holds, keepalive touches and closes (a use
// refreshes the claim's idle TTL at no cost).
//
// The replicas run placement-hard by default (ReplicaConfig.Mode): in hard
// mode one router never sends a later turn away from a healthy worker
// whose binding is alive (a binding moves only off a worker that failed,
// restarted or left), so every split turn is the replicas' disagreement.
// Soft mode moves bindings off costly ranks and routes quarantined
// sessions unpinned by design; its splits would mix those in.
//
// A split turn is a later turn (an accepted dispatch of a session, or
// sibling group, after its first) sent to a worker other than the one its
// previous turn used while that worker was healthy: up, the same instance,
// and less than IdleTTL after that turn. Ops are claims' store operations
// (first turns' CreateOrGet, moves' rewrites, reconciles) or best-effort's
// and gossip's sync messages (one per receiving replica), per request
// served.
//
// Rules of the replicated run, each with its test (replicas_test.go):
//
//	R1  Determinism: the same Config and Workload give the same
//	    ReplicaReport, byte for byte (WriteMarkdown and WritePlot); the
//	    load balancer's draw for a request's n-th sending is a hash of
//	    Config.Seed, the request and n, the same under every policy.
//	    [TestReplicasDeterministic]
//	R2  One replica is the single router: at R = 1, none, best-effort and
//	    gossip-lww give Run's Result for the same mode, field for field
//	    (hard and soft); claims answers every request, with store
//	    operations (its first turns wait StoreLatency, so its figures
//	    differ). [TestReplicasOneAgree]
//	R3  At R = 1 in hard mode no policy splits a session.
//	    [TestReplicasOneAgree]
//	R4  Claims splits no session outside the store's outage window (from
//	    StoreDownAt to StoreLatency + EventDelay after the store is back:
//	    a split whose turn or previous turn falls in it counts in
//	    SplitInOutage). [TestReplicasSplits]
//	R5  With R > 1, none splits sessions, and best-effort and gossip-lww
//	    split fewer than none. [TestReplicasSplits]
//	R6  Best-effort: the first live binding wins (the layer's, or a
//	    learned one until its local TTL passes), and a turn without a
//	    binding follows the learned one. Gossip: a later write (time, then
//	    writer) wins, an earlier one is ignored, and the layer's differing
//	    binding is ended. [TestBestEffortFirstWins, TestGossipLastWins]
//	R7  Claims: a first turn makes one store operation and waits
//	    StoreLatency; a later turn on the holder makes none; a move
//	    rewrites the claim (a new revision) and of two movers the first
//	    wins; a rewrite's event evicts only older cached revisions; during
//	    the outage sessions are placed locally with no store call, and the
//	    reconcile is first writer wins, its loser following the claim.
//	    [TestClaimsStoreOps, TestClaimsOutage]
//	R8  Bad replica parameters are a *ParamError (ErrInvalidParams); a
//	    cancelled context stops RunReplicas. [TestReplicasBadInput]
//
// # What is not modelled
//
// Decode does not slow prefill or vice versa; a rank's KV blocks in use
// by running requests can be evicted; prefill cost is linear in uncached
// tokens (no attention quadratic term); the router sees the ranks' true
// loads at once; workers never refuse a request (no DefinitelyNotAccepted);
// one phase (aggregated serving).
package replay
