package placement

import (
	"errors"
	"fmt"
	"time"
)

// Sentinel errors. Every error the package returns matches one of them with
// errors.Is; the typed errors below carry the details for errors.As.
var (
	// ErrCapacity: the table holds MaxEntries live entries (see *CapacityError).
	ErrCapacity = errors.New("placement: session table is full")
	// ErrKeyEmpty: the session key is empty.
	ErrKeyEmpty = errors.New("placement: session key is empty")
	// ErrKeyTooLong: the session key exceeds MaxKeyBytes (see *KeyTooLongError).
	ErrKeyTooLong = errors.New("placement: session key is too long")
	// ErrInvalidConfig: New was given an invalid Config (see *ConfigError).
	ErrInvalidConfig = errors.New("placement: invalid config")
	// ErrAmbiguous: the key is quarantined after an ambiguous dispatch (see *AmbiguousError).
	ErrAmbiguous = errors.New("placement: session is quarantined after an ambiguous dispatch")
	// ErrFenced: a completion, resolve or dispatch named a stale attempt or generation (see *FencedError).
	ErrFenced = errors.New("placement: stale attempt or generation")
	// ErrNotQuarantined: Resolve named a key that is not quarantined.
	ErrNotQuarantined = errors.New("placement: session is not quarantined")
	// ErrReservationLost: the reservation was cancelled, used, revoked by
	// ReserveTimeout, or ended by a late DefinitelyNotAccepted (its dispatch
	// had timed out into a quarantine, which the late result settled): to
	// place the session again, Acquire again.
	ErrReservationLost = errors.New("placement: reservation is no longer held")
	// ErrDispatchTimeout is the cause (context.Cause) of a Dispatch.Context
	// that ended because the dispatch's deadline passed with no outcome.
	ErrDispatchTimeout = errors.New("placement: the dispatch's deadline passed with no outcome")
	// ErrWouldWait: TryAcquire found another request initializing the key.
	ErrWouldWait = errors.New("placement: another request is initializing the session")
	// ErrCancelled: the context ended while Acquire waited.
	ErrCancelled = errors.New("placement: acquire cancelled")
	// ErrClosed: the coordinator was closed.
	ErrClosed = errors.New("placement: coordinator is closed")
	// ErrInvalidClock: a manual clock update was rejected (see *ClockError).
	ErrInvalidClock = errors.New("placement: invalid clock update")
	// ErrUsed: a lease or dispatch guard was used after it ended.
	ErrUsed = errors.New("placement: handle already used")
	// ErrStaleAtBirth: an accepted attempt was committed after its target's
	// generation moved on, so its binding is fenced at birth and the key
	// reads as absent (see *GenerationMovedError).
	ErrStaleAtBirth = errors.New("placement: binding is stale at birth: the target's generation moved on")
	// ErrTooManyLeases: a binding reached the maximum number of concurrent leases.
	ErrTooManyLeases = errors.New("placement: too many concurrent leases on one session")
	// ErrNotAccepted: Complete(DefinitelyNotAccepted): the target did not
	// take the request, so nothing is bound. The reservation is held again
	// (dispatch again, to another target, or Cancel), unless the dispatch
	// had timed out, in which case the late result settled its quarantine.
	ErrNotAccepted = errors.New("placement: the target did not accept the request")
)

// CapacityError says the table is full and what its bound is.
type CapacityError struct {
	MaxEntries int
}

// Error describes the error.
func (e *CapacityError) Error() string {
	return fmt.Sprintf("placement: session table is full (MaxEntries %d live entries)", e.MaxEntries)
}

// Is reports whether target is ErrCapacity.
func (e *CapacityError) Is(target error) bool { return target == ErrCapacity }

// KeyTooLongError says a key exceeds the configured bound.
type KeyTooLongError struct {
	Len, MaxKeyBytes int
}

// Error describes the error.
func (e *KeyTooLongError) Error() string {
	return fmt.Sprintf("placement: session key of %d bytes exceeds MaxKeyBytes %d", e.Len, e.MaxKeyBytes)
}

// Is reports whether target is ErrKeyTooLong.
func (e *KeyTooLongError) Is(target error) bool { return target == ErrKeyTooLong }

// ConfigError names the Config field that is invalid.
type ConfigError struct {
	Field, Reason string
}

// Error describes the error.
func (e *ConfigError) Error() string {
	return fmt.Sprintf("placement: invalid config: %s %s", e.Field, e.Reason)
}

// Is reports whether target is ErrInvalidConfig.
func (e *ConfigError) Is(target error) bool { return target == ErrInvalidConfig }

// AmbiguousError carries the quarantined attempt and its generation, which
// Resolve must name, and the attempt's target. Acquire returns it for a
// quarantined key, Complete(Ambiguous) for the quarantine it made. Match it
// with errors.As and a *AmbiguousError of the coordinator's target type:
//
//	var q *placement.AmbiguousError[Worker]
//	if errors.As(err, &q) { ... q.Target ... }
type AmbiguousError[T comparable] struct {
	Key        string
	Attempt    uint64
	Generation uint64
	// Target is the quarantined attempt's target (a resolver asks that
	// target what became of the attempt).
	Target T
	// Expires is when QuarantineTTL ends the quarantine unless something
	// settles it first, on the coordinator's clock (Coordinator.Now's
	// timeline): a caller that must wait for the session can say when it
	// may try again. Zero after a late Ambiguous (the quarantine it names
	// may be over).
	Expires time.Duration
	// DispatchedAt is when the attempt was dispatched (its BeginDispatch),
	// on the same clock: the request was sent at or after it, so a
	// resolver that asks the target bounds the attempt's age by it.
	DispatchedAt time.Duration
}

// Error describes the error.
func (e *AmbiguousError[T]) Error() string {
	return fmt.Sprintf("placement: session %q is quarantined: attempt %d (target %v, generation %d) may have been accepted",
		e.Key, e.Attempt, e.Target, e.Generation)
}

// Is reports whether target is ErrAmbiguous.
func (e *AmbiguousError[T]) Is(target error) bool { return target == ErrAmbiguous }

// FencedError says which attempt and generation were named and which are
// current (zero when the key holds none).
type FencedError struct {
	Attempt, Generation               uint64
	CurrentAttempt, CurrentGeneration uint64
}

// Error describes the error.
func (e *FencedError) Error() string {
	return fmt.Sprintf("placement: attempt %d generation %d is fenced (current: attempt %d generation %d)",
		e.Attempt, e.Generation, e.CurrentAttempt, e.CurrentGeneration)
}

// Is reports whether target is ErrFenced.
func (e *FencedError) Is(target error) bool { return target == ErrFenced }

// GenerationMovedError says a commit (Dispatch.Complete(Accepted),
// Reservation.CommitAccepted or Coordinator.Resolve(ResolveAccepted)) made
// a binding that is stale at birth: the attempt's target was bumped after
// the dispatch and before the commit. The attempt did commit (its
// Committed or Resolved event is followed by Removed), but the binding
// reads as absent, holds no slot, and the next Acquire reserves the key
// again. No lease comes with it: the request holds nothing on the session.
type GenerationMovedError[T comparable] struct {
	Key     string
	Attempt uint64 // the committed attempt: the binding's version
	// Target is the attempt's target.
	Target T
	// Generation is the target's generation at dispatch (the binding's);
	// CurrentGeneration the one it had moved on to at the commit.
	Generation, CurrentGeneration uint64
}

// Error describes the error.
func (e *GenerationMovedError[T]) Error() string {
	return fmt.Sprintf("placement: session %q: attempt %d committed stale: target %v moved from generation %d to %d",
		e.Key, e.Attempt, e.Target, e.Generation, e.CurrentGeneration)
}

// Is reports whether target is ErrStaleAtBirth.
func (e *GenerationMovedError[T]) Is(target error) bool { return target == ErrStaleAtBirth }

// ClockError says why a manual clock update was rejected.
type ClockError struct {
	Now, To int64 // nanoseconds
	Reason  string
}

// Error describes the error.
func (e *ClockError) Error() string {
	return fmt.Sprintf("placement: clock update from %d to %d rejected: %s", e.Now, e.To, e.Reason)
}

// Is reports whether target is ErrInvalidClock.
func (e *ClockError) Is(target error) bool { return target == ErrInvalidClock }

// cancelledError wraps the context's error so both match.
type cancelledError struct{ cause error }

// Error describes the error.
func (e *cancelledError) Error() string   { return "placement: acquire cancelled: " + e.cause.Error() }
func (e *cancelledError) Unwrap() []error { return []error{ErrCancelled, e.cause} }

// ErrInvalidArgument: an argument is out of range (an unknown outcome or
// resolution, a zero Lease).
var ErrInvalidArgument = errors.New("placement: invalid argument")
