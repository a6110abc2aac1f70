package replica

import (
	"sync"
	"sync/atomic"
	"time"

	"github.com/placementlab/placement/impl/claims"
)

// recState is what a record caches of its session.
type recState uint8

const (
	// recPending: a placing turn read the claim (or placed the session
	// unclaimed) and dispatches under it.
	recPending recState = iota + 1
	// recBound: the local core holds a binding for the claim.
	recBound
	// recQuarantined: the claim is quarantined: this replica's own
	// attempt (own: the core holds the quarantine too) or another's, seen.
	recQuarantined
	// recClosing: the claim is Closing (a cache of what the store said).
	recClosing
)

// slot is one session key's place in the replica's table: its current
// record, and what this replica told the store about the key.
type slot struct {
	key string
	// cur is the key's current record (nil: none); written under mu,
	// read without a lock on the hot path.
	cur atomic.Pointer[record]
	// op serializes this replica's Hold, Unhold and Close of the key, so
	// that an Unhold of an old record never lands after a Hold of a new
	// one.
	op sync.Mutex

	mu sync.Mutex
	// maxDeleted is the highest revision of the key the event stream said
	// ended.
	maxDeleted int64
	// closingRev is the highest revision this replica's close of the key
	// was sent for (a final request's, at its last lease): until it lands,
	// a read still finds that claim Bound, and a turn that adopted it
	// would route under a claim being deleted; a read of its lineage
	// (Born <= closingRev) is closing instead (ClosingError), as a claim
	// closing on another replica is.
	closingRev int64
	// writing counts this replica's writes in flight that change the
	// key's revision (Quarantine, Resolve, reconcile): events of the
	// revision they replace wait for them, for the record they write (a
	// quarantine; see waitsLocked).
	writing int
	// holder is the record whose Hold is this replica's hold on the key in
	// the store (nil: none).
	holder *record
	// users counts placing turns and other cold paths using the slot; the
	// keepalive pass deletes a slot only when it is unused and empty.
	users int
	// dead: the slot was deleted from the table; get a new one.
	dead bool
	// leases counts the turns holding a lease on any record of the key
	// (the session's leases on this replica: a Reset may leave two
	// records of one claim with leases); leased are the records with
	// leases (a slice: one record, two after a Reset; a map's insert and
	// delete per cached turn cost more than its scan). A terminal close,
	// and the release of the hold, wait for leases to be 0.
	leases int
	leased []*record
	// closeRec is a record whose final request ended while other records
	// of the key still had leases: the close runs when the last ends.
	closeRec *record
	// refusedRev is the revision of the key's claim whose later turn was
	// refused here (Turn.Refused): a turn begun later reads it as no
	// binding, and its Dispatch moves it.
	refusedRev int64
}

// waitsLocked reports whether the Deletes and Resets that reach rec, s's
// current record, wait for this replica's writes of the key in flight
// (applyDeferredLocked applies them when the last returns): only a
// quarantine waits, the record those writes rewrite (a Quarantine's, a
// Resolve's). A binding or a claim read meanwhile is evicted at once: a
// turn routed under it after its Delete came would break the routing
// window. The caller holds s.mu.
func (s *slot) waitsLocked(rec *record) bool {
	return s.writing > 0 && (rec.state == recQuarantined || mutant("DefersEveryRecord"))
}

// othersLeasedLocked reports whether a record of the key other than rec
// has leases on a claim lineage not known to have ended (gone), and on a
// binding that did not end here (refusedHere: its requests are in flight
// on a binding a refused later turn or a failed worker ended, as leases on
// a version the core invalidated, which keep nothing). The caller holds
// s.mu.
func (s *slot) othersLeasedLocked(rec *record) bool {
	for _, r := range s.leased {
		if r != rec && !r.gone.Load() && (!r.refusedHere.Load() || mutant("RefusedLeasesKeepClaim")) {
			return true
		}
	}
	return false
}

// closingLocked reports whether cl, just read, is a lineage this
// replica is closing (see closingRev). The caller holds s.mu.
func (s *slot) closingLocked(cl claims.Claim) bool {
	return cl.State == claims.Bound && cl.Born <= s.closingRev && !mutant("AdoptsClosing")
}

// lineageSeenLocked is Coordinator.lineageSeen with s.mu held.
func (s *slot) lineageSeenLocked(born int64) {
	if mutant("OldLineageKeepsClaim") {
		return
	}
	for _, r := range s.leased {
		if !r.unclaimed && r.rev != 0 && r.rev < born {
			r.gone.Store(true)
		}
	}
}

// dropLeaseLocked uncounts a lease addLeaseLocked counted that was never
// taken (the commit it was counted for failed). The caller holds s.mu.
func (s *slot) dropLeaseLocked(rec *record) {
	if rec.leases.Add(-1) == 0 {
		s.unleaseLocked(rec)
	}
	s.leases--
}

// unleaseLocked removes rec, whose last lease ended, from s.leased. The
// caller holds s.mu.
func (s *slot) unleaseLocked(rec *record) {
	for i, r := range s.leased {
		if r == rec {
			last := len(s.leased) - 1
			s.leased[i] = s.leased[last]
			s.leased[last] = nil
			s.leased = s.leased[:last]
			return
		}
	}
}

// addLeaseLocked counts a lease on rec. The caller holds s.mu.
func (s *slot) addLeaseLocked(rec *record) {
	if rec.leases.Add(1) == 1 {
		s.leased = append(s.leased, rec)
	}
	s.leases++
}

// record is what the replica caches of one revision of a session's claim
// (or of a session placed unclaimed), with its local leases.
type record struct {
	s *slot
	// version is the core binding's version (the accepted attempt id): a
	// hit's lease matches it. 0 until the record's dispatch began.
	version atomic.Uint64
	// leases counts the turns holding a lease on the record.
	leases atomic.Int64
	// used: a turn ended since the keepalive last touched the claim.
	used atomic.Bool
	// lastTouch is when the claim was last written or touched, on the
	// core's clock (nanoseconds).
	lastTouch atomic.Int64
	// evicted: the record is no longer its key's current one (the claim
	// ended, a Reset, a membership change, a newer record).
	evicted atomic.Bool
	// closing: the session's final request arrived.
	closing atomic.Bool
	// ended: the record's last lease ended and its close or unhold ran.
	ended atomic.Bool
	// needHold: the record is queued to be held again by its revision
	// (Coordinator.rehold): its hold failed, or a Reset came while it had
	// requests in flight.
	needHold atomic.Bool
	// held: a Hold (or re-hold) of the record's revision succeeded.
	held atomic.Bool
	// gone: a touch or a re-hold found the record's lineage ended (no
	// more touches; its leases no longer keep the key's hold).
	gone atomic.Bool
	// refusedHere: the record's binding was ended on this replica by a
	// refused later turn or a failed worker (Turn.Refused, EndBinding):
	// a final request's lease on it closes nothing (as the core's Close
	// of a lease on an invalidated binding), since the claim's revision
	// may be the session's binding again (adopted by a dispatch to the
	// same target).
	refusedHere atomic.Bool

	// Guarded by s.mu.
	// epoch is the coordinator's Reset count when the record became the
	// key's current one: a current record from before a Reset survived
	// it only because a write of the key was in flight (s.writing).
	epoch     uint64
	state     recState
	rev       int64 // the claim's revision; 0 while unclaimed
	gen       int64 // the target's store generation
	target    claims.Target
	unclaimed bool   // placed while the store was unreachable
	attempt   uint64 // the quarantined attempt
	coreGen   uint64 // the core generation the record's attempt was dispatched at
	own       bool   // quarantined: the local core holds the quarantine
	written   bool   // quarantined: the store recorded it
	// unsure: quarantined, not written: a write of the quarantine ended
	// with its outcome unknown (its reply lost) and no read of the store
	// has settled it since: the store may hold the quarantine.
	unsure bool
	// unsureRev is the revision the unsure write was fenced by.
	unsureRev int64
	adopted   bool // the claim was another's (its idle deadline is unknown)
	// qSince, qUntil and qAt: an own quarantine's start, the end its
	// QuarantineTTL sets, and its attempt's dispatch, on the core's clock
	// (zero for another replica's quarantine, read from the store).
	qSince, qUntil, qAt time.Duration
	// settled is how Resolve settled this own quarantine locally, before
	// the store recorded it (settledNone: not settled so): a write of it
	// that lands afterwards is followed by the store's Resolve.
	settled settlement
}

// settlement is how a quarantine was settled locally.
type settlement uint8

const (
	settledNone settlement = iota
	settledAccepted
	settledNotAccepted
)

// quarantinedErrLocked describes a quarantined record as an error. The
// caller holds r.s.mu.
func (r *record) quarantinedErrLocked() *QuarantinedError {
	qe := &QuarantinedError{Key: r.s.key, Attempt: r.attempt, Gen: r.gen, Target: r.target, Local: r.own,
		Until: r.qUntil, DispatchedAt: r.qAt}
	if r.written {
		qe.Rev = r.rev
	}
	return qe
}
