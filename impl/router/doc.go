// Package router is the router kit: what a router built on the affinity
// layer (impl/affinity) needs around it, so that its author writes a few
// lines of placement handling instead of the request loop, the HTTP
// classification, the error mapping and the membership upkeep.
//
//   - Driver runs one request per call (Do): Start, Eligible (without the
//     workers that refused it), the one candidate left or the picker
//     pipeline's choice (impl/picker), Dispatch, the transport's Send under
//     the attempt's context, Complete, a retry elsewhere after a refusal,
//     the relay, Done. It is transport agnostic.
//   - Proxy is an http.Handler on a Driver: session headers in, the
//     request forwarded and classified with impl/httpoutcome, the response
//     streamed back, errors answered with httpoutcome's statuses.
//   - Health keeps the layer's membership from the workers' health checks:
//     Join (a new identity is a restart, the same one after a failure a
//     flap), Fail, Leave.
//
// A router: NewHTTP makes the whole of it (the layer, the driver, the
// Proxy over a transport with connect, response-header and body bounds,
// the health poller with passive ejection, the quarantine resolver
// (impl/resolver)); Serve runs it until its context ends, then Close.
// cmd/router is the reference. The parts stay usable on their own: New a
// Driver over a layer, serve a Proxy, Run a Health and a resolver beside
// it.
//
// Disaggregated serving (prefill and decode workers): one layer keeps both
// phases' bindings apart, and its membership holds both pools. Make one
// Driver per phase on the layer, each with Config.Allow admitting its own
// pool (or Config.Candidates listing it), and one Proxy per phase
// (Proxy.Phase); the router's handler runs the prefill Proxy, then the
// decode one. Each Driver's Stats are then its phase's.
//
// It imports the standard library, the core (impl/placement), the affinity
// layer, the kit's packages (impl/picker, impl/httpoutcome, and
// impl/resolver for NewHTTP's resolver) and, for the
// health poller's concurrent checks, golang.org/x/sync/errgroup.
//
// # The driver's contract
//
// Each rule has its test (in parentheses).
//
//	D1  A refusal (DefinitelyNotAccepted) sends the request to another
//	    worker; a refused attempt excludes its worker, every rank of it,
//	    from the request's later attempts, so no worker is sent the request
//	    twice (TestDoRetriesRefusalElsewhere, TestDoAllRefusedEachWorkerOnce).
//	D2  At most Config.MaxAttempts sends per request (TestDoMaxAttempts).
//	D3  An unknown outcome (Ambiguous, or an outcome outside the three) is
//	    never sent again; the layer's *affinity.UnknownOutcomeError comes
//	    back, with its quarantine for a placing dispatch; a later turn's
//	    binding is kept (TestDoAmbiguousNotReplayed,
//	    TestDoInvalidOutcomeIsAmbiguous, TestDoAmbiguousHitKeepsBinding).
//	D4  The layer's errors come back unchanged: errors.Is and errors.As
//	    work on them (TestDoHardModeErrors).
//	D5  When every attempt was refused and no other target is eligible, or
//	    MaxAttempts is reached, the error is a *RefusedError (ErrRefused and
//	    placement.ErrNotAccepted): the request never ran (TestDoAllRefusedEachWorkerOnce,
//	    TestDoPinRefused).
//	D6  A dispatch the layer refuses because the worker failed or left
//	    after Eligible excludes that worker and counts toward MaxAttempts,
//	    with no send (TestDoWorkerFailsBeforeDispatch).
//	D7  An attempt counts as in flight to its target from its dispatch
//	    until its relay returns, or its outcome when it has none: once;
//	    the counts return to zero (every test's assertNoneInFlight; the
//	    fake transport checks the count during the send and the relay).
//	D8  A later turn's refusal moves the binding (the layer's row L1) and
//	    the same request places the session elsewhere
//	    (TestDoLaterTurnRefusalMovesBinding).
//	D9  The transport's context is the attempt's (affinity.Attempt.Context):
//	    a placing dispatch's ends at the dispatch's deadline, with
//	    placement.ErrDispatchTimeout as its cause (TestDoDispatchDeadlineReachesSend);
//	    a later turn's and an unpinned one's is the request's own (the
//	    send ends with it, or when its response body is closed).
//	D10 One eligible candidate is dispatched to as it is; among several,
//	    the pipeline picks; the pipeline observes every send's outcome
//	    (TestDoPipelineObservesAndPicks).
//	D11 With the default candidates, a target with Config.MaxInFlight
//	    requests in flight is overloaded: a soft binding to it falls back to
//	    the full set and follows the dispatch (TestDoMaxInFlightOverloads).
//	D12 A relay that fails after an Accepted outcome is a *RelayError, and
//	    the request counts as served (TestDoRelayError).
//	D13 A refusal after the request's context ended is not tried
//	    elsewhere: the error is a *CancelledError, matching
//	    placement.ErrCancelled (TestDoCancelledAfterRefusal).
//	D14 Bad input (no Layer, a negative bound, an invalid pipeline, a nil
//	    Send, an unknown phase, a SessionQueue without MaxPerSession) is an
//	    error, never a panic (TestNewAndDoBadInput, TestNewSessionLimitBadInput).
//	D15 With Config.MaxPerSession, at most that many requests of a session
//	    are in flight through the driver; a later one waits, in the order
//	    they came, until a slot frees (TestDoSessionLimitOrder), or is
//	    refused at once past SessionQueue waiting ones with a
//	    *SessionBusyError, which httpoutcome answers 503 with Retry-After
//	    (TestDoSessionLimitRefuses); a waiting request whose context ends
//	    leaves the line unsent, and the slot goes to the next
//	    (TestDoSessionLimitCancelFreesTheSlot); no session state outlives
//	    its requests (TestDoSessionLimitNoLeak).
//
// # The proxy's contract
//
//	P1  The session comes from the request's headers under the trusted
//	    Namespace; a placing dispatch carries its attempt id in
//	    httpoutcome's attempt header and a ranked target its rank in
//	    RankHeader; a client's own attempt or rank header never reaches a
//	    worker; the path and query are appended to the upstream URL
//	    (TestProxyEndToEnd).
//	P2  A refusal is retried with the whole body; when every worker
//	    refused, the client gets 503 with Retry-After, and no refusal's
//	    body (TestProxyRefusalRetriedThenAllRefused).
//	P3  A placing dispatch past its deadline is a 504 and is not sent
//	    again; a worker's ambiguous answer (a 502) is relayed as it came
//	    (TestProxyTimeoutAndAmbiguousAnswer).
//	P4  An invalid session id is a 400, a body over MaxBodyBytes a 413, a
//	    Proxy without Driver or Upstream a 500, and nothing is sent; a
//	    request without a session id is routed unpinned (TestProxyBadInput).
//	P5  A relay that fails after the response's headers were written (the
//	    worker's stream cut or timed out, the client gone) aborts the
//	    response (panic(http.ErrAbortHandler)), so the client sees the
//	    truncation, never a clean, complete answer; a worker's cut is
//	    counted in ProxyStats.Cut (TestProxyCutStreamAborts).
//	P6  Headers the client's Connection header names are hop-by-hop and
//	    are not forwarded (TestProxyConnectionNamedHeadersNotForwarded).
//	P7  The path is forwarded escaped as it came: %2F stays %2F
//	    (TestProxyEscapedPathKept).
//	P8  A request body not read within BodyReadTimeout is a 408, and
//	    nothing is sent (TestProxyBodyReadTimeout).
//	P9  A connect that never completed sent nothing: it is a refusal,
//	    bounded by the Client's ConnectTimeout apart from the dispatch's
//	    deadline, and the request goes elsewhere with no quarantine
//	    (TestProxyBlackHoledWorkerIsRefusal, on a black-holed loopback
//	    address).
//
// # The health poller's contract
//
//	H1  A passing check of a worker that is not a member joins it with the
//	    identity and ranks it reports (headers win over the JSON body)
//	    (TestHealthRestartVersusFlap).
//	H2  FailAfter failed checks in a row fail a member that is up, once
//	    (TestHealthRestartVersusFlap).
//	H3  The same identity after a failure is a flap: the bindings serve
//	    again; a new identity is a restart: they are fenced, whether the
//	    worker was up or failed (TestHealthRestartVersusFlap).
//	H4  A removed endpoint's worker leaves, if this poller joined it
//	    (TestHealthRestartVersusFlap).
//	H5  An answer without an identity fails the check unless the Endpoint
//	    gives one; a malformed rank header, a bad URL, no answer fail it
//	    (TestHealthIdentityRules).
//	H6  A pass whose context ends changes nothing (TestHealthCancelledPassChangesNothing).
//	H7  A pass applies the answers in the endpoints' order, so what it does
//	    depends only on the answers (the tests compare whole change lists).
//	H8  Passive ejection: EjectAfter refusals or failed connects in a row
//	    (Observe; a Proxy with Health set tells every send) fail a watched
//	    worker that is up at once; it is not picked while ejected; a check
//	    that passes after the ejection joins it back
//	    (TestHealthEjectsAfterRefusals).
//
// Nothing here leaks a goroutine once the servers, the poller and the
// layer are closed (TestNoGoroutineLeak).
package router
