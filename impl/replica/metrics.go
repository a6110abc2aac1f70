package replica

import (
	"sync/atomic"
	"time"
)

// counter is an atomic counter on its own cache line (the hot path's
// counters are bumped by every turn).
type counter struct {
	atomic.Uint64
	_ [56]byte
}

// counters are the coordinator's cumulative counts.
type counters struct {
	cachedHits, firstTurns, storeCalls, storeErrors, shared counter

	claimsCreated, claimsAdopted counter

	deleteEvictions, resetEvictions, memberEvictions, movedEvictions counter
	resets, bumps                                                    counter

	unclaimed, reconciles, reconcilesWon, reconcileConflicts counter

	closesDeleted, closesDeferred, closesStale counter

	quarantinesWritten, quarantinesSeen, quarantineRefusals, resolves counter
	lateQuarantinesResolved, quarantinesUnrecorded                    counter

	refusals, holds, unholds, touches counter

	reholds, reholdsEnded counter

	moves, movesLost counter

	waits counter
}

// Stats is a snapshot of a Coordinator's counters (cumulative: they never
// go down) and gauges. Read it with Coordinator.Stats.
type Stats struct {
	// CachedTurns counts the turns served from the local table (a hit on
	// a binding whose claim the replica has not seen end): no store round
	// trip.
	CachedTurns uint64
	// FirstTurns counts the placing turns: the session was not bound
	// locally, so its claim was read (or written) before the dispatch.
	FirstTurns uint64
	// StoreCalls counts this replica's store round trips (every Store
	// method call, the event stream's subscriptions included).
	StoreCalls uint64
	// StoreErrors counts the store calls that failed other than with an
	// answer (unreachable, timed out, an unexpected error); fenced writes
	// (ErrClaimMoved, ErrFenced) are answers, not errors.
	StoreErrors uint64
	// SharedClaimReads counts the placing turns that joined another
	// turn's CreateOrGet of the same session on this replica instead of
	// making their own (singleflight).
	SharedClaimReads uint64
	// ClaimsCreated counts the claims this replica wrote through
	// CreateOrGet (a first turn's proposal, or a reconcile's local
	// target); ClaimsAdopted the first turns that found a claim another
	// replica (or an earlier turn here) had written.
	ClaimsCreated, ClaimsAdopted uint64
	// DeleteEvictions counts the cached claims evicted by a Delete event
	// (their revision ended); ResetEvictions those evicted by a Reset;
	// MemberEvictions those evicted because their worker's generation
	// moved or the worker left; MovedEvictions those evicted because a
	// Hold or Touch found their revision no longer current.
	DeleteEvictions, ResetEvictions, MemberEvictions, MovedEvictions uint64
	// Resets counts the Reset events processed (the event stream may have
	// lost events: every cached claim was dropped).
	Resets uint64
	// GenerationBumps counts the workers whose registration moved (a
	// restart) or ended, as the replica saw them: their bindings were
	// fenced in the local core.
	GenerationBumps uint64
	// UnclaimedPlacements counts the sessions bound while the store was
	// unreachable: placed on this replica alone, marked unclaimed.
	UnclaimedPlacements uint64
	// Reconciles counts the unclaimed sessions reconciled through
	// CreateOrGet once the store was back; ReconcilesWon those whose local
	// placement became (or already was) the claim; ReconcilesLost those
	// another replica's claim (or a quarantined or closing one) won: the
	// session follows that claim at its next turn (a reconcile conflict).
	Reconciles, ReconcilesWon, ReconcilesLost uint64
	// ClosesDeleted, ClosesDeferred and ClosesStale count this replica's
	// terminal closes by result: the claim deleted; marked Closing
	// because another replica holds it; fenced off because the revision
	// held was no longer current (nothing changed). A close whose reply
	// was lost is counted by what the store shows when it is read (no
	// claim, or a newer lineage: deleted; Closing: deferred), not as the
	// stale answer its retry would get.
	ClosesDeleted, ClosesDeferred, ClosesStale uint64
	// QuarantinesWritten counts the ambiguous dispatches of this replica
	// recorded in the store; QuarantinesShared the quarantines of other
	// replicas' attempts this replica found in the store (and refused the
	// session for); QuarantineRefusals the turns refused because the
	// session was quarantined; Resolves the quarantines settled through
	// Resolve on this replica.
	QuarantinesWritten, QuarantinesShared, QuarantineRefusals, Resolves uint64
	// LateQuarantinesResolved counts the quarantine writes that landed
	// after Resolve had settled their attempt here (the store had not
	// recorded it yet): the store was told the outcome afterwards, so
	// that other replicas do not refuse the session.
	LateQuarantinesResolved uint64
	// QuarantinesUnrecorded counts this replica's ambiguous attempts the
	// store could not record: the claim they were dispatched under ended
	// (or moved to another target or generation) before their quarantine
	// was written, typically after another replica's attempt under the
	// same revision was quarantined first and then settled not accepted.
	// Such an attempt stays quarantined on this replica (until Resolve,
	// QuarantineTTL or its worker's next generation), but other replicas
	// do not see it. (One refused while the other attempt's quarantine
	// holds the claim is written once that one is settled.) Counted too:
	// an attempt whose quarantine write's reply was lost and whose claim
	// moved on before a read could tell whether it landed (it may have
	// been settled elsewhere: it is not written again).
	QuarantinesUnrecorded uint64
	// Refusals counts placing dispatches a target refused
	// (DefinitelyNotAccepted: their claim was closed, fenced).
	Refusals uint64
	// Holds, Unholds and Touches count the successful store writes of the
	// keepalive protocol: this replica said it holds a claim, gave a hold
	// up, and restarted a claim's idle expiry.
	Holds, Unholds, Touches uint64
	// Reholds counts the claims this replica held again by the revision
	// its requests in flight are on (claims.HoldLineage), after a Reset
	// or a hold that found the store unreachable (the spec's Reconnect);
	// ReholdsEnded those whose lineage had ended meanwhile (the requests
	// finish unheld).
	Reholds, ReholdsEnded uint64
	// Moves counts the claims this replica rewrote to another target
	// (Turn.Move: claims.Store.Move, fenced by the revision the hit was
	// on); MovesLost the moves the store refused because the claim had
	// moved since this replica cached it (another replica's move first,
	// a quarantine or close elsewhere).
	Moves, MovesLost uint64
	// Waits counts the turns begun (Begin) that waited while another
	// request of the session placed it on this replica.
	Waits uint64
	// Cached is a gauge: the sessions with a current record in the local
	// table (bound, placing, or a quarantined or closing claim cached);
	// Unclaimed the bound ones not reconciled yet.
	Cached, Unclaimed int
	// PendingWrites is a gauge: store writes that found the store
	// unreachable and wait to be retried (closes, quarantines),
	// including those a keepalive pass is retrying now: it reads 0 only
	// once every such write has settled.
	PendingWrites int
	// KeepalivePass is a gauge: how long the last keepalive pass that
	// had store work took, on the wall clock (its retries, re-holds,
	// touches and unholds; the touches run in parallel, up to 64 keys at
	// once). A pass that nears TouchInterval means the store is too slow
	// for the claims in use.
	KeepalivePass time.Duration
	// OldestTouch is a gauge: the age, on the core's clock, of the oldest
	// touch among the claims this replica has requests in flight on (0
	// with none): how far the keepalive lags. It stays below
	// TouchInterval plus a pass; at IdleTTL such a claim expires in the
	// store.
	OldestTouch time.Duration
}

// Stats returns the coordinator's counters and gauges. It walks the local
// table: call it from a scrape or a test, not per request.
func (c *Coordinator) Stats() Stats {
	s := &c.st
	out := Stats{
		CachedTurns:             s.cachedHits.Load(),
		FirstTurns:              s.firstTurns.Load(),
		StoreCalls:              s.storeCalls.Load(),
		StoreErrors:             s.storeErrors.Load(),
		SharedClaimReads:        s.shared.Load(),
		ClaimsCreated:           s.claimsCreated.Load(),
		ClaimsAdopted:           s.claimsAdopted.Load(),
		DeleteEvictions:         s.deleteEvictions.Load(),
		ResetEvictions:          s.resetEvictions.Load(),
		MemberEvictions:         s.memberEvictions.Load(),
		MovedEvictions:          s.movedEvictions.Load(),
		Resets:                  s.resets.Load(),
		GenerationBumps:         s.bumps.Load(),
		UnclaimedPlacements:     s.unclaimed.Load(),
		Reconciles:              s.reconciles.Load(),
		ReconcilesWon:           s.reconcilesWon.Load(),
		ReconcilesLost:          s.reconcileConflicts.Load(),
		ClosesDeleted:           s.closesDeleted.Load(),
		ClosesDeferred:          s.closesDeferred.Load(),
		ClosesStale:             s.closesStale.Load(),
		QuarantinesWritten:      s.quarantinesWritten.Load(),
		QuarantinesShared:       s.quarantinesSeen.Load(),
		QuarantineRefusals:      s.quarantineRefusals.Load(),
		Resolves:                s.resolves.Load(),
		LateQuarantinesResolved: s.lateQuarantinesResolved.Load(),
		QuarantinesUnrecorded:   s.quarantinesUnrecorded.Load(),
		Refusals:                s.refusals.Load(),
		Holds:                   s.holds.Load(),
		Unholds:                 s.unholds.Load(),
		Touches:                 s.touches.Load(),
		Reholds:                 s.reholds.Load(),
		ReholdsEnded:            s.reholdsEnded.Load(),
		Moves:                   s.moves.Load(),
		MovesLost:               s.movesLost.Load(),
		Waits:                   s.waits.Load(),
	}
	now := int64(c.core.Now())
	c.slots.Range(func(_, v any) bool {
		sl := v.(*slot)
		sl.mu.Lock()
		for _, r := range sl.leased {
			if t := r.lastTouch.Load(); t != 0 && !r.unclaimed && r.rev != 0 && !r.gone.Load() {
				out.OldestTouch = max(out.OldestTouch, time.Duration(now-t))
			}
		}
		sl.mu.Unlock()
		if rec := sl.cur.Load(); rec != nil && !rec.evicted.Load() {
			out.Cached++
			sl.mu.Lock()
			if rec.unclaimed && rec.state == recBound {
				out.Unclaimed++
			}
			sl.mu.Unlock()
		}
		return true
	})
	c.retryMu.Lock()
	out.PendingWrites = len(c.retries) + c.retrying
	c.retryMu.Unlock()
	out.KeepalivePass = time.Duration(c.lastPass.Load())
	return out
}
