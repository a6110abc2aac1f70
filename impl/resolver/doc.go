// Package resolver settles the affinity layer's quarantines before their
// QuarantineTTL ends them: a loop (Resolver) that asks, for each
// quarantined attempt, a Status the router supplies ("did attempt N reach
// its target?") and settles the answer through the layer's fenced Resolve;
// and the worker side that can answer that question (Ledger: a middleware
// that records attempt ids as requests arrive, and a handler that answers
// GET <prefix>/attempts/{id}), with HTTPStatus, the Status that asks it.
//
// It imports only the standard library, the core (impl/placement) and
// impl/affinity.
//
// # Why
//
// A placing dispatch whose outcome is unknown (a timeout, a cut
// connection) quarantines its session: the worker may or may not have the
// request, so the layer makes no binding a late Accepted could contradict.
// Without an answer, the quarantine ends only at QuarantineTTL (ten minutes
// by default), and meanwhile the session is routed unpinned (soft mode) or
// refused (hard mode). Engines such as vLLM and SGLang have no endpoint
// that answers whether a request id arrived (ENGINES.md gives the sources),
// so the answer has to come from something in front of the engine that
// records arrivals: a Ledger, in the worker or in a sidecar proxy.
//
// # The resolver's contract
//
// Each rule has its test (resolver_test.go, named for the rule).
//
//	R1  Arrived settles the quarantine with placement.ResolveAccepted: the
//	    session binds to the attempt's target.
//	R2  NotArrived settles it with placement.ResolveNotAccepted: the
//	    session is free to be placed anew.
//	R3  Unknown, an error, a panic or a call past PerCallTimeout settles
//	    nothing; the n-th such answer in a row puts the quarantine off by a
//	    backoff b = min(MaxBackoff, MinBackoff·2^(n-1)), jittered into
//	    [b/2, b], counted from the Source's clock when the pass's calls
//	    have returned.
//	R4  The jitter is a hash of Seed, the attempt, its generation and
//	    phase, and n: the same Seed, quarantines and answers give the same
//	    schedule, whatever order the calls return in.
//	R5  A pass makes at most MaxCallsPerPass calls; with CallsPerSecond
//	    set, a token bucket (Burst tokens, refilled on the Source's clock)
//	    bounds them over time too. A due quarantine left out by the budget
//	    is counted (BudgetExhausted) and asked in a later pass, with no
//	    backoff added.
//	R6  A quarantine whose Expires is at most ExpiryMargin away is not
//	    asked; it is counted once in Expired. A tracked quarantine that
//	    disappears from the listing at or after its Expires counts there
//	    too.
//	R7  Resolve is fenced by the layer: a quarantine settled by someone
//	    else between the listing and the Resolve (a late result, another
//	    resolver, its worker's restart, its TTL) returns
//	    placement.ErrNotQuarantined or a *placement.FencedError; the
//	    resolver counts it as Fenced and changes nothing. A
//	    placement.ErrStaleAtBirth (settled, nothing bound) is counted as
//	    StaleAtBirth.
//	R8  State is kept only for quarantines the last listing returned (a
//	    settled, expired or dropped quarantine is forgotten at the next
//	    pass): memory is bounded by the layer's quarantines.
//	R9  Pass lists in the Source's order and settles in that order, after
//	    every call of the pass returned (at most Concurrency at once); with
//	    Concurrency 1 the calls, too, are made in that order.
//	R10 Run passes every Interval until its context ends (it returns the
//	    context's error) or a Resolve reports the Source closed
//	    (placement.ErrClosed); no goroutine it started outlives it. A
//	    Status must honour its context.
//	R11 Asked = Arrived + NotArrived + Unknown + Errors, always.
//
// The resolver reads time only from the Source (Layer.Now, which is the
// layer's *placement.ManualClock when it has one), so a simulation host
// drives it with Pass and its own clock: PassResult.NextDue says when the
// next quarantine is due. Run waits Interval on the runtime clock; it is
// for a running router.
//
// # The worker side, and the fence
//
// A Ledger's Middleware reads the attempt id from the router's header
// (DefaultHeader, X-Placement-Attempt: never Idempotency-Key, see
// affinity.Attempt.ID) and records it before the worker runs the request.
// The router asks GET <prefix>/attempts/{id}?age_ms=A&fence=1, A being how
// long ago, at most, it sent the attempt (HTTPStatus sends Now minus the
// quarantine's DispatchedAt, on the Resolver's clock unless HTTPConfig.Now
// is set). Each rule has its test (ledger_test.go):
//
//	L1  An attempt the ledger recorded answers "arrived".
//	L2  The fence: answering "not-arrived" is a promise, so the ledger
//	    tombstones the id, and a later arrival of that attempt (it may
//	    still have been on the network) is refused with RefusedStatus (425
//	    Too Early by default) before the worker runs anything. Otherwise the router
//	    would settle NotAccepted while the worker runs the request.
//	    Arrive and Ask are atomic under one lock: for every id, either
//	    the arrival is admitted and every answer after it is "arrived",
//	    or the answer was "not-arrived" and the arrival is refused.
//	L3  An attempt the ledger does not remember answers "not-arrived" only
//	    if the ledger would remember it had it arrived: A plus Slack is
//	    below what the ledger covers (the time since it started, since the
//	    newest arrival it forgot, and Horizon). Otherwise "unknown", with
//	    a reason (no-age, horizon, too-old). So a ledger that restarted, or
//	    that forgot arrivals under load, says "unknown", never a wrong
//	    "not-arrived".
//	L4  A second arrival of an attempt id is refused too (a router sends
//	    each attempt once; a second copy is a replay).
//	L5  Tombstones are kept for Horizon; at the Tombstones bound the ledger
//	    answers "unknown" (reason full) rather than make a promise it could
//	    not keep.
//	L6  Memory is bounded: at most Capacity arrivals and Tombstones
//	    tombstones; what is older than Horizon is forgotten.
//	L7  Every answer carries the ledger's Identity (the worker instance's):
//	    HTTPStatus takes an answer from another instance than the
//	    quarantine's Identity as an error, so Unknown. (The layer ends a
//	    quarantine when its worker restarts anyway.)
//	L8  A request without the header runs unrecorded; an invalid header
//	    (empty, over MaxAttemptIDBytes, not visible ASCII, or given twice)
//	    is a 400.
//	L9  Fence (fence=1): where L3 answers "unknown" for an id the ledger
//	    does not remember, it fences the id (a tombstone: its later
//	    arrival is refused, as in L2) if it has room (L5), and the answer
//	    says so with the window it covered (covered_ms: since it started,
//	    since the newest arrival it forgot, or since it fenced the id:
//	    no arrival of the id came in it). A later question judges the age
//	    against that window and answers "not-arrived" once L3 holds in it.
//
// A young ledger: an age is known only up to Slack (the question's time on
// the network, the clocks' rates), so by L3 alone an attempt sent less
// than Slack after the ledger started is never "not-arrived". The fenced
// answer lets the asker decide instead: HTTPStatus reads its clock before
// the question (the age) and after the answer, so the window the ledger
// covered began, on the router's timeline, at most covered_ms before the
// answer came (less the drift of the two clocks over it, MaxDrift, and
// the router clock's resolution, ClockMargin); an attempt dispatched after
// that did not arrive, and the fence says it never will. So an ambiguous
// first turn sent a second after the worker started is settled as soon as
// it is quarantined, not when QuarantineTTL ends it.
//
// What the ledger assumes: attempt ids are unique per worker (the core
// draws each coordinator's first id at random from [1, 2^63]; a router
// with a fixed FirstAttempt, as a simulation host, or several such routers
// sharing workers, must make them unique with HTTPConfig.AttemptID, for
// example by prefixing a router id and the phase), and a request reaches
// the worker within Horizon of being sent, or never.
//
// What "arrived" means: the request reached the middleware, in front of
// the worker's handler. A worker that then refused it (a 503) still
// answers "arrived", and the session binds there; in soft mode its next
// turn is a refused hit and moves at once (row L1 of the affinity table).
//
// # Engines without a ledger
//
// ENGINES.md records what vLLM and SGLang expose for a request id (a
// client-supplied id, abort endpoints, metrics), with the source files.
// None answers whether a given id arrived, and their abort endpoints do
// not say whether the id was known, so no sound Status can be built on
// them alone: for such a worker the quarantine ends at QuarantineTTL.
// Put a Ledger in front of it instead (Example_sidecar: the Middleware
// around an httputil.ReverseProxy).
package resolver
