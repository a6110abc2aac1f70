// Package httpoutcome is the net/http side of a router's request: it forwards
// a request to a worker (an LLM engine such as vLLM or SGLang, usually
// streaming server-sent events), classifies what happened to it as the
// placement outcome the affinity layer's Attempt.Complete takes, relays the
// streamed body with a release that runs exactly once, and maps the layer's
// and the core's errors to HTTP statuses with Retry-After.
//
// It imports only the standard library, the core (impl/placement) and the
// affinity layer (impl/affinity).
//
// # A request
//
// The affinity layer's request loop (go doc impl/affinity), with Do as its
// forward and Relay as its relay:
//
//	a, err := turn.Dispatch(pick(cands))
//	actx, cancel := a.Context(ctx)
//	resp, out, err := client.Do(actx, newRequest(a.Target()), a.ID(), func(e httpoutcome.End) {
//		cancel()     // the body ended: the attempt's context is done
//		count(e)     // e.Kind, e.Outcome: a stream cut after Accepted is counted here
//	})
//	cerr := a.Complete(out) // at the worker's first answer (its headers), or its failure
//	if errors.Is(cerr, placement.ErrNotAccepted) {
//		if resp != nil {
//			resp.Body.Close() // a refusal (503, 429): try another target
//		}
//		continue
//	}
//	if resp == nil {
//		httpoutcome.WriteError(w, cerr) // no answer: 504 (outcome unknown), ...
//		return
//	}
//	if err := httpoutcome.Relay(w, resp); err != nil { // relays the worker's answer, even an ambiguous 502
//		panic(http.ErrAbortHandler) // cut after the headers: the client must see the truncation
//	}
//
// The request body is read by each attempt: a router that may dispatch again
// keeps the body's bytes and gives each Do a fresh reader.
//
// # Outcomes
//
// Do returns at the worker's first answer. What it reports:
//
//	what happened                                              outcome
//	the connection was refused, the dial or DNS failed, the    DefinitelyNotAccepted
//	write failed, ctx ended (deadline or cancel): before the
//	transport reported the request written whole; no
//	connection within Client.ConnectTimeout (at most half
//	the time ctx has left: a black-holed worker), reported
//	with ErrConnectTimeout
//	response headers came                                      the Table's row for the status
//	a timeout (ctx's deadline, the transport's                 Ambiguous
//	ResponseHeaderTimeout), a reset, an EOF, ctx cancelled,
//	a malformed response: after the request was written
//	the request was written, then a connection was got again   Ambiguous, whatever came after
//	(a retrying RoundTripper replayed it)
//
// "Written" is httptrace's WroteRequest with no error: the transport has
// taken the whole request (headers and body) for the connection. The client
// cannot know more: bytes in its socket may or may not have been read, so a
// server that resets the connection without reading the request is
// Ambiguous as well, unless the transport saw the connection fail before it
// took the request (then DefinitelyNotAccepted: *ForwardError.Written says
// which). A worker acts only on a whole request (an engine parses the JSON
// body first), so a request never written whole is DefinitelyNotAccepted.
// Go's transport reports WroteRequest before it flushes its buffer, so a
// flush that fails after it is Ambiguous: conservative, never the other way.
//
// # The status table
//
// Rows are read at the response headers, before any body. "Accepted" means
// the worker's answer is final: the router relays it and does not try
// elsewhere (and a placing dispatch binds, which is harmless: the worker is
// up, and the session's next turn warms its cache). DefinitelyNotAccepted
// means the worker said it did not take the request: trying another target is
// safe and useful. Ambiguous means something between the router and the
// engine answered without saying whether the engine has the request.
//
//	status                         outcome                 why
//	1xx (101), 2xx                 Accepted                the worker took the request
//	3xx                            Accepted                a final answer, relayed (Do never
//	                                                       follows a redirect: that re-sends)
//	400-499 but the four below     Accepted                the worker read the request and
//	                                                       answered it (bad request, unknown
//	                                                       model, prompt too long): another
//	                                                       worker would answer the same
//	408 Request Timeout            DefinitelyNotAccepted   the worker never had the whole request
//	421 Misdirected Request        DefinitelyNotAccepted   RFC 9110: retry on another connection,
//	                                                       whatever the method
//	425 Too Early                  DefinitelyNotAccepted   RFC 8470: not processed
//	429 Too Many Requests          DefinitelyNotAccepted   the worker refuses load: try elsewhere
//	500 Internal Server Error      Accepted                the engine had the request and failed
//	                                                       it: its outcome is known (a resolver
//	                                                       would answer "arrived"); not replayed
//	501, 505                       Accepted                final answers about the request
//	502 Bad Gateway                Ambiguous               a proxy in front of the engine lost
//	                                                       its answer: the engine may have it
//	503 Service Unavailable        DefinitelyNotAccepted   the engine refuses (overloaded, not
//	                                                       ready): try elsewhere
//	504 Gateway Timeout            Ambiguous               a proxy timed out: the engine may run it
//	other 5xx (506-599)            Ambiguous               not known to be the engine's answer
//	outside 100-599                Ambiguous (fixed)       not an HTTP status
//
// Table.With changes a row. A deployment whose proxy in front of the engines
// answers 503 for an upstream reset after it forwarded the request (Envoy
// does: "upstream connect error or disconnect/reset before headers") must
// set With(503, placement.Ambiguous): that 503 is not a refusal.
//
// # Streams
//
// An Accepted response is completed (Attempt.Complete) at its headers, and
// its body streams on. What happens to the body is reported, once, through
// the release given to Do (an End) and Response.End: EndComplete (read to
// io.EOF, closed after all of its Content-Length, or no body), EndClosed
// (closed before its end: the caller stopped, or Relay's downstream client
// went away), EndCut (a read failed: a reset, a chunked stream ended
// mid-chunk, a short Content-Length body), EndCancelled (ctx cancelled)
// and EndTimedOut (ctx's deadline, or a cancel whose cause is
// placement.ErrDispatchTimeout, as Attempt.Context ends). End.Outcome is the outcome of the whole exchange: the
// headers' outcome, except that an Accepted response whose body was cut or
// timed out is Ambiguous (the engine ran the request and its answer did not
// arrive whole). A router that completes after the body (one that buffers
// the answer) reports End.Outcome; a streaming relay has reported Accepted
// already and counts the cut from its release: the request must not be
// replayed (the client saw part of an answer). A body that ends by the
// server closing the connection (no Content-Length, not chunked) cannot be
// told from a cut when the close is clean: it reads as EndComplete.
//
// The release runs exactly once per Do, on the goroutine that ended the
// exchange, before Close, the read that ended the body, or Do (no response)
// returns; concurrent Close calls wait for it. It runs when ctx ends even if
// nobody reads or closes the body (context.AfterFunc, no goroutine before
// that). It must not call back into the Response; a panic in it is not
// recovered. Ending the body from another goroutine closes the transport's
// body while a read may be blocked in it, which net/http's bodies allow (a
// custom RoundTripper's must too).
//
// # Replays
//
// Go's http.Transport re-sends a request by itself when a reused keep-alive
// connection fails, and for a request it takes for idempotent (a GET, HEAD,
// OPTIONS or TRACE, or one with an Idempotency-Key or X-Idempotency-Key
// header, and with no body or a GetBody) it does so even after the request
// was written: a replay neither the router nor the layer would see, which
// could turn an Ambiguous attempt into an Accepted one that ran twice. Do
// makes every request one the transport never re-sends: it sets GetBody to
// nil, and gives a request without a body that the transport would take for
// idempotent an empty body that is not http.NoBody (for the methods that
// usually lack a body the transport probes it and sends no body, so the
// wire is unchanged; otherwise it is sent as an empty chunked body). Through
// httptrace, Do also sees a replay made by anything else (a retrying
// RoundTripper): a connection got after the request was written makes the
// outcome Ambiguous, whatever came after.
//
// Over HTTP/2 the transport re-sends only streams the server said it did not
// process (REFUSED_STREAM, or past a GOAWAY's last stream id). Do sees those
// re-sends too, and reports Ambiguous when the first copy had been written:
// conservative, and untested here (the tests run HTTP/1.1 on loopback).
//
// # Keep-alive
//
// The transport's own safe retry (nothing written on a reused connection)
// is off with replays, and a request written on a keep-alive connection the
// worker had just closed is Ambiguous (the client cannot tell that close
// from a crash after reading it). Uvicorn, which serves vLLM and SGLang,
// closes idle connections after 5 s by default, and http.DefaultTransport
// keeps them 90 s: give Do a transport whose IdleConnTimeout is below the
// workers' keep-alive timeout (for example 4 s), so it closes idle
// connections first.
//
// # Attempt ids
//
// A placing dispatch's attempt id (Attempt.ID, not zero) is sent in
// Client.AttemptHeader (default X-Placement-Attempt), so a resolver can ask
// the worker what became of it. A header of that name from the client is
// always removed, so a client cannot forge it. Idempotency-Key and
// X-Idempotency-Key are refused as the attempt header.
//
// # Errors to statuses
//
// Status and WriteError map errors by this table, first match wins. A
// Retry-After is given where a retry can succeed, in whole seconds rounded
// up; the JSON body's message is the row's text, never the error's.
//
//	error (errors.Is / As)                 status  Retry-After      why
//	affinity.ErrOutcomeUnknown             504     none             the request may have run: a client
//	                                                                must not replay it automatically
//	*ForwardError, Ambiguous               504     none             the same, before the layer saw it
//	placement.ErrFenced                    504     none             the dispatch timed out and a resolver
//	                                                                (or the TTL, a restart) settled its
//	                                                                quarantine before its own outcome
//	                                                                came: for this request, unknown
//	affinity.ErrQuarantined                503     its RetryAfter   hard mode: the session can be placed
//	                                                                again when the quarantine ends
//	placement.ErrAmbiguous (the core's)    503     1 s              quarantined; the core's error does
//	                                                                not say when on the wall clock
//	context.DeadlineExceeded,              504     none             a timeout
//	placement.ErrDispatchTimeout
//	context.Canceled,                      499     none             the client went away (nginx's code)
//	placement.ErrCancelled
//	*ForwardError, DefinitelyNotAccepted   502     1 s              the worker could not be reached;
//	                                                                nothing was sent
//	placement.ErrNotAccepted               503     1 s              the worker refused (503, 429)
//	affinity.ErrNoCandidates               503     1 s              no eligible worker now: they come
//	                                                                back, load drops
//	affinity.ErrPinnedWorkerOverloaded     503     1 s              the pinned worker is busy, not the
//	                                                                client over its rate (not 429)
//	affinity.ErrPinnedWorkerGone           503     1 s              a failed worker often comes back
//	affinity.ErrPinnedWorkerNotAllowed     409     none             the pin conflicts with the
//	                                                                scheduler's rules
//	affinity.ErrPinConflict                409     none             hard mode: the pin disagrees with
//	                                                                the binding; the same request fails
//	                                                                the same way
//	affinity.ErrBindingMismatch            409     none             hard mode: the dispatch disagrees
//	                                                                with the binding
//	affinity.ErrInvalidPin                 400     none             the request is wrong
//	affinity.ErrInvalidSessionID           400     none             the request is wrong
//	placement.ErrClosed                    503     1 s              the router is shutting down:
//	                                                                another replica can serve
//	placement.ErrCapacity,                 503     1 s              transient pressure on the table
//	ErrTooManyLeases, ErrReservationLost,
//	ErrWouldWait
//	anything else                          500     none             a bug (ErrTurnEnded,
//	                                                                ErrInvalidArgument, ...)
package httpoutcome
