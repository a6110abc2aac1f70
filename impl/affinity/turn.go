package affinity

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/placementlab/placement/impl/placement"
	"github.com/placementlab/placement/impl/replica"
	"github.com/placementlab/placement/internal/testhooks"
)

// Cause says why a request was routed unpinned: with no binding consulted
// or made for it.
type Cause uint8

const (
	// CauseNone: the request is not unpinned.
	CauseNone Cause = iota
	// CauseOff: the layer's mode is ModeOff.
	CauseOff
	// CauseNoSession: the request carries no session id.
	CauseNoSession
	// CauseCapacity: the phase's table is full.
	CauseCapacity
	// CauseAdmission: the table is under pressure and this is the first
	// turn the layer has seen of the session (it binds at its second).
	CauseAdmission
	// CauseQuarantined: soft mode, and the session is quarantined.
	CauseQuarantined
	// CauseMoveLost: the request's move of the binding found the session
	// taken by a concurrent request (its move came first).
	CauseMoveLost
	// CauseMovesExhausted: the request moved the binding MaxMoves times.
	CauseMovesExhausted
	// CauseLeases: the binding holds placement.MaxLeases leases.
	CauseLeases
	// CauseReservationLost: the session's reservation ended (its
	// ReserveTimeout passed) before the request dispatched.
	CauseReservationLost
	// CauseHitRefused: the bound worker refused a later turn and
	// Config.KeepOnRefusal kept the binding: the request went elsewhere.
	CauseHitRefused
	// CauseClosing: over replicas, the session's final request ended on
	// a replica while another still holds its claim: it is deleted when
	// the last holder lets go, and meanwhile the session's requests go
	// unpinned.
	CauseClosing
	// NumCauses is the number of causes: the length of Stats.Unpinned.
	NumCauses
)

const numCauses = NumCauses

var causeNames = [numCauses]string{"none", "off", "no_session", "capacity", "admission", "quarantined",
	"move_lost", "moves_exhausted", "leases", "reservation_lost", "hit_refused", "closing"}

// String names c (the label the Prometheus adapter uses).
func (c Cause) String() string {
	if c < numCauses {
		return causeNames[c]
	}
	return fmt.Sprintf("Cause(%d)", c)
}

// MoveCause says why a binding moved.
type MoveCause uint8

const (
	// MoveWorkerGone: the bound worker left or restarted: counted for every
	// binding the Leave or the restarting Join fenced.
	MoveWorkerGone MoveCause = iota
	// MoveWorkerFailed: the bound worker's health check failed.
	MoveWorkerFailed
	// MoveRankGone: the bound worker no longer serves the bound rank.
	MoveRankGone
	// MoveFollow: soft mode: the dispatch went elsewhere (the bound target
	// was not eligible, or a pin named another), and the binding follows.
	MoveFollow
	// MoveRefused: a later turn was refused by the bound worker
	// (DefinitelyNotAccepted on a hit).
	MoveRefused
	// NumMoveCauses is the number of move causes: the length of Stats.Moves.
	NumMoveCauses
)

const numMoveCauses = NumMoveCauses

var moveNames = [numMoveCauses]string{"worker_gone", "worker_failed", "rank_gone", "follow", "refused"}

// String names c (the label the Prometheus adapter uses).
func (c MoveCause) String() string {
	if c < numMoveCauses {
		return moveNames[c]
	}
	return fmt.Sprintf("MoveCause(%d)", c)
}

type turnState uint8

const (
	turnUnpinned turnState = iota // no binding: route as the scheduler likes
	turnBound                     // a lease on the session's binding
	turnReserved                  // the request places the session
	turnMoving                    // the binding was given up: place again at Dispatch
	turnEnded                     // Done, or an outcome that ends the turn
)

// Turn is one request's hold on its session, from Start to Done: a handle
// (a value, copied freely) on the layer's pooled turn state. A Turn is
// used by one goroutine (the request's). Once Done, the state goes back to
// the pool and may serve another request: the handle's generation no
// longer matches, so the old handle is inert (Dispatch and Eligible return
// ErrTurnEnded, Done does nothing, Bound, Placing and Unpinned report
// nothing), never another request's turn. The zero Turn is such a handle.
type Turn struct {
	t   *turn
	gen uint64
}

// live returns the turn h is a handle on, or nil when it ended (its state
// may serve another request now: only its generation is read).
func (h Turn) live() *turn {
	if h.t == nil || h.t.gen.Load() != h.gen {
		return nil
	}
	return h.t
}

// turn is a Turn's state: pooled, reused by later requests; gen counts
// its uses (bumped when one ends), and a handle carries the one it was
// given for.
type turn struct {
	gen atomic.Uint64
	turnBody
}

// turnPool holds ended turns for later requests' Start.
var turnPool = sync.Pool{New: func() any { return new(turn) }}

// recycle ends t's use: handles on it go stale, and it returns to the pool
// holding nothing (no layer, lease or context kept alive by the pool).
func (t *turn) recycle() {
	t.turnBody = turnBody{}
	t.gen.Add(1)
	turnPool.Put(t)
}

// turnBody is the per-request part of a turn (zeroed between uses).
type turnBody struct {
	l       *Layer
	req     Request
	c       *placement.Coordinator[slot]
	acq     placement.Acquisition[slot]
	lease   placement.Lease[slot] // turnBound: the lease the request holds
	st      turnState
	cause   Cause
	hint    Target
	hinted  bool
	moves   int
	pending MoveCause // the cause of a move not yet counted
	hasPending,
	served, // an attempt was Accepted: no more dispatches
	remember bool // an unseen session's first turn: the doorkeeper records its target
	flying  *attempt          // &cur while an attempt is in flight
	outcome placement.Outcome // of the last attempt on a hit
	// cur is the storage of the turn's latest attempt, seq its number (an
	// Attempt handle of an earlier one no longer matches it: its Complete
	// is ErrTurnEnded).
	cur attempt
	seq uint32

	// Over replicas (Config.Replicas): the replica's turn, and the
	// session's binding it holds or read (turnBound, turnMoving).
	rt     replica.Turn
	rbound Target
	ctx    context.Context

	// bm is the binding's worker as Start judged it (over the local
	// core), for Eligible's and Dispatch's reads of it.
	bm memberCache
}

// Start begins a request: it reads the session's binding in the request's
// phase (waiting while another request places the session, until ctx is
// done) and decides, by the contract table, whether the request is bound
// (Bound), places the session (Placing) or is routed unpinned (Unpinned).
// Errors: an invalid pin (*PinError, ErrInvalidPin: row P1), a pin to a
// worker that is not a member or has failed (*IneligibleError,
// ErrPinnedWorkerGone: row P2), ctx ending while waiting
// (placement.ErrCancelled), the layer's Close (placement.ErrClosed), and
// in hard mode a pin that disagrees with the binding (*PinError,
// ErrPinConflict) and a quarantined session (*QuarantinedError).
// Every Turn must end with Done; a live Turn is returned only with a nil
// error (the zero Turn otherwise).
func (l *Layer) Start(ctx context.Context, req Request) (Turn, error) {
	if req.Phase >= numPhases {
		return Turn{}, fmt.Errorf("%w: phase %d", placement.ErrInvalidArgument, req.Phase)
	}
	if !req.HasPin && req.Pin != (Target{}) {
		// A pin the layer would ignore: say so rather than route unpinned.
		return Turn{}, fmt.Errorf("%w: Pin %v set without HasPin", placement.ErrInvalidArgument, req.Pin)
	}
	t := turnPool.Get().(*turn)
	t.l, t.req = l, req
	if err := t.start(ctx); err != nil {
		t.recycle()
		return Turn{}, err
	}
	return Turn{t: t, gen: t.gen.Load()}, nil
}

// start is Start on the turn's state.
func (t *turn) start(ctx context.Context) error {
	l, req := t.l, t.req
	if req.HasPin {
		if err := l.validPin(req.Pin); err != nil {
			l.stats.errors.Add(1)
			return err
		}
	}
	switch {
	case l.cfg.Mode == ModeOff:
		t.unpinned(CauseOff)
		return nil
	case req.Session.IsZero():
		t.unpinned(CauseNoSession)
		return nil
	}
	if l.replicated() {
		if err := t.acquireReplica(ctx); err != nil {
			return err
		}
		t.admitReplica()
		return nil
	}
	t.c = l.core[req.Phase]
	if t.c.Len() >= l.admit && !mutant("AdmitsFlood") {
		if info, err := t.c.Query(req.Session.k); err == nil && info.State == placement.StateAbsent {
			hint, ok, seen := l.door[req.Phase].check(req.Session)
			if !seen {
				t.remember = true
				if t.c.Len() >= t.c.Config().MaxEntries {
					t.unpinned(CauseCapacity) // C1 comes before A1
					return nil
				}
				t.unpinned(CauseAdmission)
				return nil
			}
			t.hint, t.hinted = hint, ok
		}
	}
	if err := t.acquire(ctx); err != nil {
		return err
	}
	return nil
}

// validPin checks a pin (rows P1 and P2, before any binding is read): a
// worker id, no negative rank, a worker that is a member and up, and a rank
// it serves. Whether the scheduler allows the pin, and its load, are the
// candidates' business (Eligible).
func (l *Layer) validPin(p Target) error {
	if p.Worker == "" {
		return &PinError{Pin: p, Reason: "a pin needs a worker (a rank without a worker is not a pin)"}
	}
	if p.HasRank && p.Rank < 0 {
		return &PinError{Pin: p, Reason: "negative rank"}
	}
	m, ok := l.mem.load().current(p.Worker)
	if !ok || m.failed {
		return &IneligibleError{Target: p, Cause: ErrPinnedWorkerGone}
	}
	if !m.serves(p) {
		return &PinError{Pin: p, Reason: "the worker does not serve that rank"}
	}
	return nil
}

func (t *turn) unpinned(c Cause) *turn {
	t.st, t.cause, t.hasPending = turnUnpinned, c, false
	t.l.stats.unpinned[c].Add(1)
	return t
}

// acquire reads the session's entry until it is bound to a live target, is
// reserved for this request, or the request goes unpinned.
func (t *turn) acquire(ctx context.Context) error {
	l, key := t.l, t.req.Session.k
	for round := 0; ; round++ {
		// Each round after the first follows one that ended something (a
		// dead binding moved, a gone worker's quarantine ended); ctx
		// bounds them, so a core that never lets them end cannot hold the
		// request forever.
		if err := ctx.Err(); err != nil && round > 0 {
			return fmt.Errorf("%w: %w", placement.ErrCancelled, err)
		}
		a, err := t.c.TryAcquire(key)
		if errors.Is(err, placement.ErrWouldWait) {
			l.stats.waits.Add(1)
			a, err = t.c.Acquire(ctx, key)
		}
		// amb is declared where the error paths need it: errors.As takes
		// its address, which moves it to the heap, and the hit path must
		// not pay that allocation.
		amb := (*placement.AmbiguousError[slot])(nil)
		if err != nil {
			amb = asAmbiguous(err)
		}
		switch {
		case err == nil && a.Hit():
			if testAfterHit != nil {
				testAfterHit()
			}
			b := a.Lease.Target()
			if mc, moved := l.judgeCached(b, &t.bm); moved {
				// The bound worker failed, left or restarted: move (a
				// fenced invalidation: only this binding version goes).
				if mutant("FollowsDepartedWorker") {
					t.acq, t.lease, t.st = a, a.Lease, turnBound
					return nil
				}
				_ = a.Lease.Invalidate()
				a.Done()
				if testhooks.StartGaveUp != nil {
					testhooks.StartGaveUp(ctx, true)
				}
				if !t.moved(mc) {
					t.unpinned(CauseMovesExhausted)
					return nil
				}
				continue
			}
			if !a.Lease.Current() && !mutant("TrustsOldHit") {
				// The membership was judged after the hit: a binding that
				// ended in between (a concurrent move, a restart's bump)
				// is no longer the session's. Give the lease up and read
				// the session again, so that what Start returns held at
				// one instant: the binding live under the membership it
				// was judged by.
				a.Done()
				if testhooks.StartGaveUp != nil {
					testhooks.StartGaveUp(ctx, false)
				}
				continue
			}
			if t.req.HasPin && !agreesWith(t.req.Pin, b.target()) && l.cfg.Mode == ModeHard && !mutant("HardPinFollows") {
				a.Done()
				if testhooks.StartGaveUp != nil {
					testhooks.StartGaveUp(ctx, false)
				}
				l.stats.errors.Add(1)
				return &PinError{Pin: t.req.Pin, Binding: b.target()}
			}
			t.acq, t.lease, t.st = a, a.Lease, turnBound
			return nil
		case err == nil:
			t.reserved(a)
			return nil
		case amb != nil && l.gone(amb.Target) && !mutant("KeepsGoneQuarantine"):
			// The quarantined attempt's worker left or restarted: its
			// Leave or Join has published the membership and not yet
			// bumped the core. The quarantine is over for every request
			// that reads the membership after the publish: end it now (the
			// bump the Leave or Join makes is then a no-op for it).
			t.c.BumpGeneration(amb.Target)
			continue
		case amb != nil:
			if l.cfg.Mode == ModeHard {
				l.stats.errors.Add(1)
				return quarantined(amb, t.c.Now())
			}
			// Soft: served unpinned, narrowed to the quarantined
			// attempt's target while it is eligible (its cache is warm,
			// and the attempt may be running there).
			if !mutant("QuarantineGoesAnywhere") {
				t.hint, t.hinted = amb.Target.target(), true
			}
			if t.req.Final {
				// The session's final request is served unpinned: a
				// Resolve that binds the quarantined attempt ends the
				// binding at once (F1), as for a final placing dispatch.
				l.finalQ[t.req.Phase].Store(amb.Attempt, struct{}{})
			}
			t.unpinned(CauseQuarantined)
			return nil
		case errors.Is(err, placement.ErrCapacity):
			t.unpinned(CauseCapacity)
			return nil
		case errors.Is(err, placement.ErrTooManyLeases):
			t.unpinned(CauseLeases)
			return nil
		default:
			return err
		}
	}
}

// asAmbiguous returns the core's quarantine error err carries, or nil. It
// is apart from acquire so that the variable errors.As needs is allocated
// only on an error path.
func asAmbiguous(err error) *placement.AmbiguousError[slot] {
	var amb *placement.AmbiguousError[slot]
	if errors.As(err, &amb) {
		return amb
	}
	return nil
}

// testAfterHit, set only by tests, runs in Start between the hit that
// takes a lease and the judgment of the binding.
var testAfterHit func()

// quarantined is the layer's error for the core's quarantine amb.
func quarantined(amb *placement.AmbiguousError[slot], now time.Duration) *QuarantinedError {
	return &QuarantinedError{Target: amb.Target.target(), Attempt: amb.Attempt, Generation: amb.Generation,
		Until: amb.Expires, RetryAfter: max(0, amb.Expires-now), DispatchedAt: amb.DispatchedAt}
}

// gone reports whether s's worker instance is no longer a member (it left
// or restarted).
func (l *Layer) gone(s slot) bool {
	m, ok := l.mem.load().current(s.worker)
	return !ok || m.instance != s.instance
}

// judgeCached reports whether a binding to b must move, and why: its
// worker left or restarted (another instance), failed, or no longer serves
// b's rank. It records the worker's entry it read in c.
func (l *Layer) judgeCached(b slot, c *memberCache) (MoveCause, bool) {
	m, ok, snap := c.lookup(l.mem, b.worker)
	c.snap, c.m = snap, m
	switch {
	case !ok || m.instance != b.instance:
		return MoveWorkerGone, true
	case m.failed:
		return MoveWorkerFailed, true
	case !m.serves(b.target()):
		return MoveRankGone, true
	}
	return 0, false
}

// moved records that the request gave up its binding for cause c; it
// reports false when the request has used up its moves. The move is
// counted (Stats.Moves) when the request goes on to place the session
// itself, or at once for a refused hit (the binding ends there); a request
// that finds the session placed by someone else meanwhile moved nothing.
func (t *turn) moved(c MoveCause) bool {
	t.moves++
	t.pending, t.hasPending = c, true
	return t.moves <= t.l.cfg.MaxMoves
}

// reserved records that the request holds the session's reservation,
// counting the move that led to it, if any.
func (t *turn) reserved(a placement.Acquisition[slot]) {
	t.acq, t.st = a, turnReserved
	if t.hasPending {
		t.l.stats.moves[t.pending].Add(1)
		t.hasPending = false
	}
}

// Bound returns the session's binding this request holds a lease on.
func (h Turn) Bound() (Target, bool) {
	t := h.live()
	if t == nil {
		return Target{}, false
	}
	return t.bound()
}

func (t *turn) bound() (Target, bool) {
	if t.st != turnBound {
		return Target{}, false
	}
	return t.boundTarget(), true
}

// boundTarget is the binding a bound request holds (or, over replicas,
// read).
func (t *turn) boundTarget() Target {
	if t.onReplica() {
		return t.rbound
	}
	return t.lease.Target().target()
}

// admitReplica applies second-turn admission over replicas once the
// session's claim was read: a session with no claim anywhere, on a
// replica whose table is under pressure, that the doorkeeper has not seen
// goes unpinned (its read wrote nothing); a second turn is narrowed to
// the first's target. A session another replica bound is never refused
// for this replica's pressure: its binding is read first.
func (t *turn) admitReplica() {
	l, c := t.l, t.l.rep[t.req.Phase]
	// The table's entries other than this turn's own reservation (the
	// core's path measures before it reserves).
	n := c.Len() - 1
	if t.st != turnReserved || !t.onReplica() || n < l.admit || mutant("AdmitsFlood") {
		return
	}
	if _, ok := t.rt.Claim(); ok {
		return
	}
	hint, ok, seen := l.door[t.req.Phase].check(t.req.Session)
	if !seen {
		t.endReplica()
		t.remember = true
		if n >= c.MaxEntries() {
			t.unpinned(CauseCapacity)
			return
		}
		t.unpinned(CauseAdmission)
		return
	}
	t.hint, t.hinted = hint, ok
}

// Placing reports whether the request places the session: its next
// dispatch, if Accepted, binds the session. It is false once an attempt
// completed (Bound then reports the binding it made).
func (h Turn) Placing() bool {
	t := h.live()
	return t != nil && (t.st == turnReserved || t.st == turnMoving)
}

// Unpinned returns why the request is routed unpinned (CauseNone if not).
func (h Turn) Unpinned() Cause {
	t := h.live()
	if t == nil || t.st != turnUnpinned {
		return CauseNone
	}
	return t.cause
}

// Eligible returns the candidates the scheduler may choose from for this
// request: the layer's Eligibility with the request's pin, its binding (or
// the hint its session's first turn left, or, for a quarantined session in
// soft mode, the quarantined attempt's target), and allow (nil: every
// worker).
// See Eligibility for the rules and the errors. After Done: ErrTurnEnded.
func (h Turn) Eligible(cands []Candidate, allow func(worker string) bool) ([]Candidate, error) {
	t := h.live()
	if t == nil {
		return nil, ErrTurnEnded
	}
	return t.eligible(cands, allow)
}

func (t *turn) eligible(cands []Candidate, allow func(worker string) bool) ([]Candidate, error) {
	e := t.l.Eligibility().WithAllow(allow)
	if t.bm.snap == e.cached.snap {
		e.cached.m = t.bm.m // the membership Start read the binding's worker in
	}
	switch {
	case t.req.HasPin && t.st == turnBound:
		// The pin agrees with the binding (Start refuses a pin that
		// conflicts in hard mode; in soft mode a disagreeing pin wins).
		e = e.WithPin(t.req.Pin).WithBinding(t.boundTarget())
	case t.req.HasPin:
		e = e.WithPin(t.req.Pin)
	case t.st == turnBound:
		e = e.WithBinding(t.boundTarget())
	case t.hinted && (t.st != turnUnpinned || t.cause == CauseQuarantined):
		e = e.WithHint(t.hint)
	}
	out, err := e.Select(cands)
	if err != nil {
		t.l.stats.errors.Add(1)
	}
	return out, err
}
