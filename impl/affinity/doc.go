// Package affinity is the session-affinity layer a router embeds on top of
// the placement core (impl/placement): session keys from HTTP headers under
// a trusted namespace, worker membership with data-parallel ranks and
// instance identities, explicit pins, the precedence of a pin, a binding
// and the scheduler's choice, eligibility, table pressure, and what an
// operator watches. Every rule below is a row of the contract table, and
// each row has its test (contract_test.go, named for the row).
//
// It imports the standard library, the core, and, for a layer over
// replicas, impl/replica and impl/claims (whose only third-party module is
// golang.org/x/sync); no store backend: the caller passes the store.
//
// # A request
//
//	req, err := layer.RequestFromHeader(ns, r.Header, affinity.PhaseDecode)
//	if err != nil { ... 400: *SessionIDError ... }
//	turn, err := layer.Start(ctx, req)
//	if err != nil { ... *PinError, *QuarantinedError (hard mode) ... }
//	defer turn.Done()
//	for {
//		cands, err := turn.Eligible(all, nil)    // narrowed to the binding when eligible
//		if err != nil { ... *IneligibleError (pin, hard binding) ... }
//		a, err := turn.Dispatch(pick(cands))     // the scheduler's choice
//		if err != nil { ... }
//		actx, cancel := a.Context(ctx)
//		out, relay := forward(actx, a.Target(), a.ID()) // at the worker's first answer
//		err = a.Complete(out)                   // Accepted, DefinitelyNotAccepted, Ambiguous
//		relay()                                 // the body streams on under actx
//		cancel()
//		if !errors.Is(err, placement.ErrNotAccepted) {
//			return err // nil: served (and bound, if it placed the session)
//		}
//		all = without(all, a.Target())          // refused: try another target
//	}
//
// # Targets and membership
//
// A Target is a worker and, optionally, a data-parallel rank; a target
// without a rank means any rank of its worker. Workers Join with an
// instance Identity (a boot id, a pod uid) and a rank range. A Join with a
// new identity is a restart: every binding to the worker, whatever its rank,
// is fenced in one step (a binding names the worker's instance, and the
// membership is one atomically published snapshot), and every quarantine of
// an attempt on it ends. The same identity back after Fail is a flap: nothing
// is fenced, and the bindings that no request moved meanwhile serve again.
// Leave fences like a restart. A worker that is not a member, or failed, is
// never dispatched to by a request that reads the membership after the
// change: a placing dispatch re-reads it after BeginDispatch and rolls back
// (nothing was sent) if the worker changed in between.
//
// # Session identity
//
// RequestFromHeader reads the canonical header (Headers.Session, default
// X-Session-ID), which wins, then the agent clients' headers in order
// (DefaultHeaders), and the final-request headers. A session id is 1 to 256
// bytes of visible ASCII (*SessionIDError otherwise). Keys encode the
// trusted Namespace (model, group, tenant) and the id injectively, so no
// client id reaches another namespace's binding and no two inputs share a
// key, and every key is at most MaxKeyBytes (64) whatever the client sent:
// when the namespace's fields (each under 128 bytes) and the id fit, the
// key is their raw encoding (a kind byte, each field after its one-byte
// length, the id last: no hash to compute, collision-free by
// construction); otherwise it is the SHA-256 of the fields and the id,
// each after its 8-byte length (33 bytes). Both forms are the same on
// every replica. A sibling group's key (SiblingGroup, shared by an agent's
// subagents) is always hashed, from its parent's hashed form, and begins
// with a byte no session key has. Key.String and the doorkeeper's
// fingerprint read a key's hashed form (a raw key's is computed for them:
// a log line, or a first turn under table pressure), so they are what they
// were before the raw form.
//
// Keys are not persisted by the layer over the local core. Over replicas
// they name claims in the shared store: a version before the raw form
// hashed every id, so during a rolling upgrade from it a short id's claim
// would have two names (the session bound twice, once per form, and the
// old claims left to their idle TTL). Replicas.LegacyKeys names claims by
// the hashed form alone (a SHA-256 per request) until no old replica
// runs.
//
// # The contract table
//
// Rows are checked in this order: the first that applies decides. "Off",
// "soft" and "hard" are the Mode. A pin is exact in every mode; it is
// phase-local (a request carries the pin of its own phase).
//
//	row  situation                                off          soft                                  hard
//	N1   mode off                                 unpinned     -                                     -
//	N2   no session id                            unpinned     unpinned (CauseNoSession)             same as soft
//	P1   pin with an empty worker id, or a        *PinError    *PinError (at Start)                  same as soft
//	     negative rank
//	P2   pin's worker not a member or failed      typed error  *IneligibleError (at Start)           same as soft
//	     (ErrPinnedWorkerGone); a rank it does
//	     not serve (*PinError, ErrInvalidPin);
//	     not allowed or overloaded                typed error  *IneligibleError (at Eligible)        same as soft
//	P3   pin agrees with the live binding         -            hit (the dispatch goes to the pin)    same as soft
//	     (a worker-only pin, a binding to one of               narrowed to the binding's rank; not   B4's *IneligibleError
//	     its worker's ranks)                                   eligible: the pin's set, as B4
//	P4   pin disagrees with the live binding      -            dispatch to the pin; the binding      *PinError (ErrPinConflict)
//	                                                           follows (move "follow")               at Start; binding kept
//	P5   pin, session not bound                   -            the pin's dispatch binds the session  same as soft
//	B1   binding, worker left or restarted        -            fenced: the session is placed anew    same as soft
//	B2   binding, worker failed, or no longer     -            moved: invalidated, placed anew       same as soft
//	     serves the bound rank                                 (at most MaxMoves per request)
//	B3   binding eligible                         -            narrowed to it: a hit                 same as soft
//	B4   binding overloaded or not allowed        -            the full set; if the dispatch goes    *IneligibleError; binding
//	                                                           elsewhere the binding follows         kept
//	B5   dispatch disagrees with the binding      -            the binding follows (fenced move:     *MismatchError; nothing
//	                                                           the first concurrent move wins)       dispatched; binding kept
//	B6   a worker-only binding, any rank of its   -            a hit                                 a hit
//	     worker; a ranked binding, another rank   -            a move (B5)                           *MismatchError
//	S1   session unbound, nobody placing          -            placing: the dispatch binds           same as soft
//	S2   another request is placing the session   -            wait (until ctx ends)                 same as soft
//	Q1   session quarantined                      -            unpinned (CauseQuarantined): no       *QuarantinedError with
//	                                                           binding made, the quarantine kept;    Until, RetryAfter
//	                                                           narrowed to the quarantined attempt's
//	                                                           target while it is eligible
//	C1   table full                               -            unpinned (CauseCapacity), never an    same as soft
//	                                                           error (an unseen session is also
//	                                                           remembered, as in A1)
//	A1   table at AdmitAllBelow, session unseen   -            unpinned (CauseAdmission); its        same as soft
//	                                                           target remembered
//	A2   table at AdmitAllBelow, second turn      -            placing, narrowed to the first        same as soft
//	                                                           turn's target when eligible
//	L1   a later turn refused (DNA on a hit)      -            binding moves at once (1 refusal);    same as soft
//	                                                           the request may dispatch elsewhere;
//	                                                           with KeepOnRefusal the binding stays
//	                                                           and the request goes unpinned
//	L2   a later turn timed out or cut            -            ErrOutcomeUnknown: not replayed;      same as soft
//	     (Ambiguous on a hit)                                  binding kept; timeouts alone never
//	                                                           move it (the health check does: Fail)
//	F1   the session's final request              -            the binding closes when the last      same as soft
//	                                                           request holding it ends, whatever
//	                                                           the final request's outcome (a
//	                                                           timeout, a refusal kept by
//	                                                           KeepOnRefusal); found quarantined,
//	                                                           it is served unpinned and a later
//	                                                           Resolve Accepted binds nothing
//	M1   a request moved MaxMoves times           -            unpinned (CauseMovesExhausted)        same as soft
//
// Every row holds over replicas too (Config.Replicas; the contract tests
// run on both backends). Where a row's meaning differs across replicas
// (B1-B6, P3, P4, S2, Q1, C1, A1, A2, L1, L2, F1), the Replicas section
// below says how and why.
//
// Why quarantines differ by mode (Q1): engines such as vLLM and SGLang have
// no endpoint that answers "did attempt N arrive?", so with them an
// ambiguous first turn can only end by QuarantineTTL. Soft mode keeps the
// session served meanwhile, unpinned, and never makes a binding that a late
// Accepted of the quarantined attempt would contradict; hard mode says when
// the session can be placed again.
//
// # Moves, and why they need no new core action
//
// A move (B2, B5, L1, and a soft pin's P4) is two actions the core's spec
// already has: Lease.Invalidate, which removes the binding only if the
// version the request holds is still current (the compare-and-swap on the
// version: of concurrent moves of one binding, only the first removes it),
// then a TryAcquire that reserves the session for the mover, which
// dispatches under a fresh attempt like any first turn (attempt ids,
// generations, quarantines all apply). A mover that finds the session
// already reserved or bound by someone else does not wait and does not
// move it again: it routes unpinned (CauseMoveLost), or, if the new
// binding accepts its target, hits it. So soft moves add no protocol state
// and spec/tla is unchanged; linearizability/affinitylin checks the
// composition under concurrency.
//
// # Admission under pressure
//
// The core never evicts a live binding, so a flood of one-off session ids
// (the anchor router's table filled at about 18 new ids a second) can only
// fill the table and starve the sessions that come next. Below
// AdmitAllBelow of a phase's table (default half), every session binds at
// its first turn. At or above it, a session the layer has not seen binds
// only at its second turn: the first is routed unpinned (a first turn has
// no cache to lose) and its target remembered in a fixed array of slots (a
// doorkeeper: overwritten, never grown, by a flood), and the second is
// narrowed to that target, so its cache is reused. One-off ids then never
// take an entry past the mark, the rest of the table stays for sessions
// that have shown a second turn, and established sessions are never
// touched. A reserve for established sessions alone would not do: new
// sessions that are real would be refused with the flood.
//
// # Replicas
//
// Config.Replicas runs the same layer over a claims store that several
// router replicas share (impl/claims, specified in spec/tla/Claims.tla):
// each phase's table is an impl/replica Coordinator, a local core in front
// of the store, so a session's binding is one claim that every replica
// routes by, and its quarantine is seen by every replica. A router's
// request code does not change: Start, Eligible, Dispatch, Complete and
// Done are the same calls, and every row of the contract table holds over
// replicas (the contract tests run on both backends). Where a row's
// meaning differs across replicas:
//
//   - B3, B4, B6, P3, P4: a session bound by another replica is bound here
//     too: Start reads its claim (one store read for a session this
//     replica has not cached), and a dispatch the binding accepts adopts
//     it; that first dispatch on this replica carries an attempt id (the
//     replica dispatches it as it places a session), so an Ambiguous
//     outcome quarantines the claim on every replica rather than keeping
//     it (L2 holds for the later turns of a session this replica holds).
//   - B2, B5, L1, P4 (moves): a move rewrites the claim, fenced by the
//     revision the request read (claims.Store.Move, the spec's Move): of
//     concurrent moves on any replicas the first wins; a loser adopts the
//     winner's binding if it accepts its target, and otherwise goes
//     unpinned (CauseMoveLost). A binding whose worker failed, and a
//     refused later turn, end the binding on this replica at once, and
//     the claim moves with the request's next dispatch: a request that
//     gives up without one leaves the claim where it was on the other
//     replicas (their next turn goes there, and is moved if refused).
//   - B1 and membership: Join registers the worker in the store
//     (claims.Store.Register, idempotent for the same identity), so a
//     restart's new identity is a new generation that fences every
//     replica's bindings to the worker (this replica's at once, the
//     others' at the store's MembersChanged event), and a flap (Fail, then
//     Join with the same identity) fences nothing anywhere. Fail is local
//     (each replica's health check). Leave deregisters the worker: every
//     replica's claims on it are stale. The registration lives with the
//     store session that wrote it first (see docs/claims.md, "Who
//     registers"): in production a worker's own agent registers it, and
//     the replicas' Joins with its identity change nothing.
//   - Q1: a quarantine another replica opened refuses (hard) or unpins
//     (soft) here too; its Until is this replica's QuarantineTTL from now
//     (the other's times are not known). A QuarantineTTL that ends this
//     replica's own quarantine settles the store's as not accepted, so the
//     session is free on every replica. Resolve settles a quarantine from
//     any replica that lists it (Quarantined: its own, and those it read),
//     through the store, once: a second Resolve is fenced.
//   - F1: a final request closes the claim when this replica's last lease
//     ends: deleted, or Closing while another replica holds it (deleted by
//     that one's last release); meanwhile the session's requests go
//     unpinned (CauseClosing). A final request's quarantine resolved
//     Accepted binds nothing (it is settled as not accepted).
//   - C1, A1, A2: the table is this replica's; a session bound by another
//     replica is never refused for this one's pressure (its claim is read
//     first), and the doorkeeper is per replica.
//   - S2: a request waits for another request placing the session on
//     this replica; one placing it on another replica does not make it
//     wait (the first claim written wins, and the other adopts it).
//
// While the store is unreachable each replica serves the sessions it
// holds and places new ones locally, reconciled when the store is back
// (impl/replica's doc).
//
// linearizability/affinitylin checks the layer over a replica as it checks
// it over the core (Porcupine against the same sequential model, with the
// differences above as steps of their own), with the store losing the
// replies of the replica's writes.
//
// # Observability
//
// Stats (through the Source interface) gives what an operator watches:
// hits, new bindings, waits, unpinned requests by Cause, moves by MoveCause,
// quarantines opened, resolved (accepted or not), expired and dropped,
// binding expirations, live entries, and bound sessions per worker. The
// Prometheus adapter is impl/affinityprom; this package imports no metrics
// library.
//
// # Time
//
// Config.Clock, a *placement.ManualClock, passes through to the core, so a
// simulation host drives the whole layer on its own time.
//
// # The request path's allocations
//
// None of the following changes a protocol step (the core's actions and
// their order are the same; nothing in spec/tla moves); they only change
// where a request's small objects live:
//
//   - Turn.Eligible's result is a sub-slice of the caller's candidates
//     (its capacity capped at its length) when the eligible ones are one
//     run of them, as a binding's candidates are: treat it as read-only
//     (Eligibility.Select).
//   - A Turn is a handle (a pointer and a generation) on turn state from
//     a sync.Pool: Done returns the state to the pool and bumps its
//     generation, so the old handle, and every Attempt of it, is inert
//     (ErrTurnEnded) rather than another request's turn. An Attempt is a
//     handle too (the turn's generation and the attempt's number, with its
//     target, kind and id): the turn keeps its latest attempt only, and an
//     Attempt superseded by a later Dispatch completes with ErrTurnEnded.
//   - Attempt.Context derives a context only for a placing dispatch (its
//     deadline); a hit's or an unpinned attempt's is the request's own,
//     with a cancel that does nothing (context.WithCancel cost two
//     allocations per request).
//   - Headers made canonical by New look a request's header map up once
//     per name (no second, canonicalizing lookup); a session id is
//     validated eight bytes at a time; a short id's key is its raw
//     encoding (no SHA-256).
//   - A binding's narrowing (Eligible) reads its worker's membership once.
//
// A later turn then allocates its Key alone (RequestFromHeader: the string
// the core's table is keyed by); Start through Done allocate nothing.
package affinity
