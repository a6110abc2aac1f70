// Package claims is the backend-neutral claim store that router replicas
// share a session's placement through (docs/claims.md; the protocol is
// spec/tla/Claims.tla). A claim binds a session key to a target
// under the target's shared generation; it is immutable per revision, and
// every change of a session's claim writes a new revision, ending the old
// one. Backends: etcd (impl/claims/etcdstore), a shared directory
// (impl/claims/dirstore) and memory (impl/claims/memstore, for tests of
// the layers above). impl/claims/storetest checks any backend against the
// contract.
//
// It imports only the standard library.
package claims

import (
	"context"
	"errors"
	"fmt"
	"time"
)

// Target is where a session's requests go: a worker and, when the worker
// serves data-parallel ranks, one of them (HasRank).
type Target struct {
	Worker  string
	Rank    int
	HasRank bool
}

// String formats t as worker or worker/rank.
func (t Target) String() string {
	if !t.HasRank {
		return t.Worker
	}
	return fmt.Sprintf("%s/%d", t.Worker, t.Rank)
}

// State is a claim's state.
type State uint8

const (
	// Bound: the session's requests go to the claim's target.
	Bound State = iota + 1
	// Quarantined: an attempt's outcome is unknown; nothing is dispatched
	// for the session until Resolve settles it or the target's
	// generation moves on.
	Quarantined
	// Closing: the session's final request ended on one replica while
	// others still held leases; the last Unhold deletes the claim.
	Closing
)

// String names s.
func (s State) String() string {
	switch s {
	case Bound:
		return "bound"
	case Quarantined:
		return "quarantined"
	case Closing:
		return "closing"
	}
	return fmt.Sprintf("State(%d)", uint8(s))
}

// Claim is one revision of a session's claim.
type Claim struct {
	// Key is the session key.
	Key string
	// Rev is the store revision that wrote this claim (etcd's mod
	// revision). Two claims of a key with the same Rev are the same
	// claim.
	Rev int64
	// Born is the revision that created the claim's lineage: the Rev of
	// the CreateOrGet that wrote it (also one replacing a stale claim), or
	// of the Move that did.
	// Every rewrite of one lineage (Quarantine, Resolve accepted, a
	// deferred Close) keeps it and the target, so Born <= Rev, and Born
	// == Rev for a claim just created. Touch and HoldLineage accept any
	// revision in [Born, Rev].
	Born int64
	// Target is where the session's requests go.
	Target Target
	// Gen is the target worker's generation when the claim was written
	// (the revision of its registration).
	Gen int64
	// State is Bound, Quarantined or Closing.
	State State
	// Attempt is the quarantined attempt's id (State Quarantined).
	Attempt uint64
}

// InLineage reports whether rev is a revision of c's lineage (Born <= rev
// <= Rev): what Touch and HoldLineage accept while c is current.
func (c Claim) InLineage(rev int64) bool { return c.Born <= rev && rev <= c.Rev && rev > 0 }

// Member is a registered worker.
type Member struct {
	// Worker is the worker's name.
	Worker string
	// Identity is what the worker registered with (an instance id, new
	// for each start of the worker): a registration with another
	// identity is a restart (a new generation); one with the same
	// identity is the same registration (Store.Register changes
	// nothing), so a flap of the same instance fences nothing.
	Identity string
	// Gen is the worker's generation: the revision of its registration.
	// It moves only when the worker registers with another identity or
	// registers again after its registration ended (Deregister, or the
	// end of the store session that made it).
	Gen int64
}

// EventKind is what an Event says.
type EventKind uint8

const (
	// Delete: revision Rev of Key is no longer current (deleted, expired,
	// closed, or replaced by a newer revision).
	Delete EventKind = iota + 1
	// Reset: the stream may have lost events (a reconnect, a compaction, a
	// cancelled watch, a watch overflow, a slow consumer); drop every
	// cached claim not read again since.
	Reset
	// MembersChanged: a worker registered, re-registered with another
	// identity, or left; read Members again.
	MembersChanged
)

// String names k.
func (k EventKind) String() string {
	switch k {
	case Delete:
		return "delete"
	case Reset:
		return "reset"
	case MembersChanged:
		return "members-changed"
	}
	return fmt.Sprintf("EventKind(%d)", uint8(k))
}

// Event is one item of a Store's event stream.
type Event struct {
	Kind EventKind
	// Key and Rev: the revision that ended (Delete).
	Key string
	Rev int64
	// Why says what caused a Reset (for logs and metrics).
	Why string
}

// CloseResult is what Close did.
type CloseResult uint8

const (
	// CloseDeleted: the claim was deleted.
	CloseDeleted CloseResult = iota + 1
	// CloseDeferred: other replicas hold leases on the claim; it is now
	// Closing and the last Unhold deletes it.
	CloseDeferred
	// CloseStale: the revision is not current (already closed, expired,
	// or replaced): nothing changed.
	CloseStale
)

// String names r.
func (r CloseResult) String() string {
	switch r {
	case CloseDeleted:
		return "deleted"
	case CloseDeferred:
		return "deferred"
	case CloseStale:
		return "stale"
	}
	return fmt.Sprintf("CloseResult(%d)", uint8(r))
}

// Store is a linearizable claim store shared by router replicas. Every
// method is safe for concurrent use; every write is fenced as its doc
// says, and returns an error satisfying errors.Is(err, ErrUnavailable)
// when the store could not be reached (the write may or may not have
// happened only where the doc says so).
type Store interface {
	// CreateOrGet returns key's current claim. When there is none, or
	// the current one is stale (its target's worker is gone or has
	// another generation), it calls propose (only then), writes a Bound
	// claim to the proposed target under the worker's current generation,
	// and returns it with created true; first writer wins: a lost race
	// returns the winner's claim. propose's error is returned as is; a
	// proposal of an unregistered worker is ErrUnknownWorker.
	CreateOrGet(ctx context.Context, key string, propose func() (Target, error)) (c Claim, created bool, err error)
	// Get returns key's current claim, or ok false.
	Get(ctx context.Context, key string) (c Claim, ok bool, err error)
	// Hold records that replica holds leases on revision rev of key
	// (ErrClaimMoved unless rev is current: the first lease of a turn
	// routed from a cached revision learns that the claim moved). Holds
	// of a replica that stops (its session with the store ends) vanish.
	// Holds belong to the claim's lineage: they survive its rewrites
	// (Quarantine, Resolve accepted, a deferred Close) and end when it is
	// deleted, expires, is replaced as stale by CreateOrGet or is moved
	// (Move starts a new lineage). A replica
	// holding again after a reconnect, by the revision its leases are on,
	// uses HoldLineage, which accepts any revision of the lineage.
	Hold(ctx context.Context, key string, rev int64, replica string) error
	// Unhold removes replica's hold on key; the last Unhold of a Closing
	// claim deletes it. Unholding a key not held is not an error.
	Unhold(ctx context.Context, key string, replica string) error
	// Close is the session's final request on replica, after its last
	// local lease on the claim ended: fenced by rev (CloseStale, nothing
	// changed, unless rev is current), CloseDeleted when no other
	// replica holds the claim, CloseDeferred (the claim is now Closing)
	// when one does.
	Close(ctx context.Context, key string, rev int64, replica string) (CloseResult, error)
	// Quarantine writes key's claim Quarantined with the attempt
	// dispatched under revision rev to the claim's target at generation
	// gen; fenced by rev (ErrClaimMoved), and gen must be the claim's
	// generation (ErrClaimMoved otherwise).
	Quarantine(ctx context.Context, key string, rev int64, attempt uint64, gen int64) (Claim, error)
	// Resolve settles key's quarantine, fenced by its attempt and
	// generation and by its worker's current registration: a
	// *FencedError (errors.Is ErrFenced), changing nothing, when the
	// claim is not Quarantined with that attempt and generation, or
	// when it is stale (its worker re-registered, so its generation is
	// not gen any more, or left; FencedError.Stale). Otherwise accepted
	// writes the claim Bound again (a new revision of the same lineage,
	// returned with ok true), not accepted deletes it.
	Resolve(ctx context.Context, key string, attempt uint64, gen int64, accepted bool) (c Claim, ok bool, err error)
	// Move rewrites key's claim from revision rev to target, under the
	// target worker's current generation: a new lineage (the returned
	// claim is Bound, with Born == Rev, a new revision), fenced by rev.
	// Only a current Bound claim moves. The old revision ends as every
	// ended revision does (a Delete event for rev, so every replica's
	// cache of it is evicted), and with it its lineage's holds: a
	// replica with requests in flight on the old target re-holds
	// nothing (Hold, HoldLineage and Touch by a revision of the old
	// lineage are ErrClaimMoved, a Close by one is CloseStale); those
	// requests finish unheld, as after a stale claim's replacement.
	// Errors, each changing nothing:
	//   - ErrClaimMoved unless rev is current: a *MoveError carrying the
	//     current claim, if any, so the loser of two concurrent moves
	//     from one revision (the first wins) learns the winner's target
	//     with no second read;
	//   - ErrNotBound when the claim at rev is Quarantined or Closing: a
	//     *MoveError with Current set (a quarantine is settled by
	//     Resolve, a closing claim by its last Unhold, never by a move);
	//   - ErrUnknownWorker when target's worker is not registered;
	//   - ErrUnavailable as every write (the move may or may not have
	//     happened: settle it by Get).
	// A move to the claim's own target and generation is still a rewrite
	// (a new revision and lineage): callers don't make one.
	Move(ctx context.Context, key string, rev int64, target Target) (Claim, error)
	// Touch restarts key's idle expiry (IdleTTL) if rev is a revision of
	// the current claim's lineage (Born <= rev <= Rev; ErrClaimMoved
	// otherwise): unlike Hold, Touch fences no dispatch, and a replica
	// whose leases are on a revision the claim was rewritten from since
	// keeps it alive by that revision (the spec lets a claim expire only
	// when no replica holds leases on its lineage). A claim expires
	// IdleTTL after its last Touch or write (no sooner; see IdleTTL for
	// how much later a store may); a hold alone does not keep
	// it alive: a replica holding leases touches it at least every
	// IdleTTL/3.
	Touch(ctx context.Context, key string, rev int64) error
	// Register registers worker with identity and returns its
	// registration.
	//
	// When worker's current registration has the same identity, Register
	// is idempotent: it returns that registration (the same generation)
	// and writes nothing — no new revision, no MembersChanged, no claim
	// made stale — even when another replica's session made it. The
	// check and the write are one atomic step, so concurrent registrations
	// with one identity agree on one generation. Otherwise (no
	// registration, or another identity: a restart) it writes a new
	// registration whose generation is its revision, and every claim
	// under the old generation is stale.
	//
	// A registration lasts while the store session that wrote it does
	// (until that replica's Shutdown or crash), or until Deregister; an
	// idempotent Register does not move it to the caller's session. So
	// the registrar of a worker should be a process whose life matches
	// the worker's (its own agent, or one designated replica), not every
	// replica that sees it: a registration written by replica A vanishes
	// when A stops, and the worker is then unknown until someone
	// registers it again (a new generation). See docs/claims.md, "Who
	// registers".
	Register(ctx context.Context, worker, identity string) (Member, error)
	// Deregister removes worker's registration.
	Deregister(ctx context.Context, worker string) error
	// Members returns the registered workers and the revision read at.
	Members(ctx context.Context) ([]Member, int64, error)
	// ReplicaID returns a number unique among every replica that ever
	// asked the store for one (at least 1, at most MaxReplicaID): every
	// call returns a new number, so a restarted replica of the same name
	// never reuses its earlier attempt ids.
	ReplicaID(ctx context.Context, replica string) (uint64, error)
	// Events returns the store's event stream until ctx ends: Delete and
	// MembersChanged in revision order per key, Reset whenever events may
	// have been lost. The first event is a Reset (nothing is cached yet
	// relative to it). The channel is closed when ctx ends or the store
	// is closed.
	Events(ctx context.Context) (<-chan Event, error)
	// IdleTTL returns the idle time-to-live of the store's claims
	// (Options.IdleTTL, DefaultIdleTTL when it was zero): a claim expires
	// no sooner than IdleTTL after its last write or Touch, and a store
	// may keep it a bounded while longer (etcdstore: at most IdleTTL/16
	// more, the window in which it reuses a closed claim's lease; its
	// package doc says why). It makes no call to the
	// store; every handle of one store answers the same. A replica reads
	// it so that its keepalive can never fall behind the store's expiry.
	IdleTTL() time.Duration
	// Shutdown releases the store's resources (its session: holds and
	// registrations it made vanish).
	Shutdown() error
}

// MaxReplicaID is the largest replica id: attempt ids are
// replicaID<<AttemptShift | a local counter.
const MaxReplicaID = 1<<(64-AttemptShift) - 1

// AttemptShift is how far a replica id is shifted in its attempt ids.
const AttemptShift = 40

// FirstAttempt returns the first attempt id of the replica with id id:
// every replica's ids are disjoint for 2^40 attempts.
func FirstAttempt(id uint64) uint64 { return id << AttemptShift }

var (
	// ErrUnavailable: the store could not be reached.
	ErrUnavailable = errors.New("claims: store unavailable")
	// ErrClaimMoved: the revision a write was fenced by is not current.
	ErrClaimMoved = errors.New("claims: claim revision is not current")
	// ErrFenced: a Resolve's attempt or generation is not the
	// quarantine's, or the quarantined claim is stale.
	ErrFenced = errors.New("claims: fenced")
	// ErrUnknownWorker: a proposal names a worker that is not registered.
	ErrUnknownWorker = errors.New("claims: unknown worker")
	// ErrNotBound: a Move's revision is current but the claim is not
	// Bound (it is Quarantined or Closing); a *MoveError says which.
	ErrNotBound = errors.New("claims: claim is not bound")
	// ErrClosed: the store was closed.
	ErrClosed = errors.New("claims: store closed")
	// ErrInvalidArgument: an empty key, worker or replica name, a
	// revision or generation that is not positive, and the like (an
	// *ArgumentError says which).
	ErrInvalidArgument = errors.New("claims: invalid argument")
)

// FencedError is a Resolve that does not match key's quarantine.
type FencedError struct {
	Key     string
	Attempt uint64
	Gen     int64
	// Current is the claim found, if any (Found).
	Current Claim
	Found   bool
	// Stale: Current is the quarantine asked for (attempt and
	// generation match), but its worker re-registered or left, so the
	// claim is stale and nothing settles it; CreateOrGet replaces it.
	Stale bool
}

// Error describes e.
func (e *FencedError) Error() string {
	if !e.Found {
		return fmt.Sprintf("claims: resolve of %q attempt %d gen %d: no claim", e.Key, e.Attempt, e.Gen)
	}
	if e.Stale {
		return fmt.Sprintf("claims: resolve of %q attempt %d gen %d: the claim at rev %d is stale (worker %q re-registered or left)",
			e.Key, e.Attempt, e.Gen, e.Current.Rev, e.Current.Target.Worker)
	}
	return fmt.Sprintf("claims: resolve of %q attempt %d gen %d: claim is %s attempt %d gen %d at rev %d",
		e.Key, e.Attempt, e.Gen, e.Current.State, e.Current.Attempt, e.Current.Gen, e.Current.Rev)
}

// Is makes errors.Is(err, ErrFenced) true.
func (e *FencedError) Is(target error) bool { return target == ErrFenced }

// MoveError is a Move refused by the claim it found: errors.Is(err,
// ErrClaimMoved) when Rev is not the current revision (no claim, or
// another revision: the first of two concurrent moves from one revision
// wins, and the loser finds the winner's claim in Current), and
// errors.Is(err, ErrNotBound) when Rev is current but the claim is
// Quarantined or Closing.
type MoveError struct {
	// Key, Rev and Target are the Move's arguments.
	Key    string
	Rev    int64
	Target Target
	// Current is the claim found, if any (Found).
	Current Claim
	Found   bool
}

// NotBound reports whether e is ErrNotBound: the revision moved from is
// current, and the claim is not Bound.
func (e *MoveError) NotBound() bool { return e.Found && e.Current.Rev == e.Rev }

// Error describes e.
func (e *MoveError) Error() string {
	switch {
	case !e.Found:
		return fmt.Sprintf("claims: move of %q rev %d to %v: no claim: %v", e.Key, e.Rev, e.Target, ErrClaimMoved)
	case e.NotBound():
		return fmt.Sprintf("claims: move of %q rev %d to %v: the claim is %s: %v", e.Key, e.Rev, e.Target, e.Current.State, ErrNotBound)
	}
	return fmt.Sprintf("claims: move of %q rev %d to %v: current rev is %d (%s to %v): %v",
		e.Key, e.Rev, e.Target, e.Current.Rev, e.Current.State, e.Current.Target, ErrClaimMoved)
}

// Is makes errors.Is(err, ErrNotBound) true when e.NotBound(), and
// errors.Is(err, ErrClaimMoved) true otherwise.
func (e *MoveError) Is(target error) bool {
	if e.NotBound() {
		return target == ErrNotBound
	}
	return target == ErrClaimMoved
}

// UnavailableError wraps a backend's error when the store could not be
// reached.
type UnavailableError struct {
	Op  string
	Err error
}

// Error describes e.
func (e *UnavailableError) Error() string {
	return "claims: " + e.Op + ": store unavailable: " + e.Err.Error()
}

// Unwrap returns the backend's error.
func (e *UnavailableError) Unwrap() error { return e.Err }

// Is makes errors.Is(err, ErrUnavailable) true.
func (e *UnavailableError) Is(target error) bool { return target == ErrUnavailable }

// Options are what every backend takes.
type Options struct {
	// IdleTTL is how long a claim lives after its last use on any
	// replica. Zero means DefaultIdleTTL.
	IdleTTL time.Duration
	// Prefix namespaces the store's keys. Zero means DefaultPrefix.
	Prefix string
}

// DefaultIdleTTL is a claim's idle time-to-live when Options leave it zero.
const DefaultIdleTTL = 30 * time.Minute

// DefaultPrefix is the key prefix when Options leave it empty.
const DefaultPrefix = "placement/"
