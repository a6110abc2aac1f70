package replica

import (
	"errors"
	"fmt"
	"time"

	"github.com/placementlab/placement/impl/claims"
	"github.com/placementlab/placement/impl/placement"
)

// Sentinel errors. Errors of the core (impl/placement) and of the store
// (impl/claims) come back as they are, or wrapped so that errors.Is
// matches their sentinels.
var (
	// ErrQuarantined: the session's claim is quarantined after an
	// ambiguous dispatch, on this replica or another (see
	// *QuarantinedError). It also matches placement.ErrAmbiguous.
	ErrQuarantined = errors.New("replica: session is quarantined after an ambiguous dispatch")
	// ErrClosing: the session's final request ended on a replica while
	// others still held it; the claim is deleted when the last holder lets
	// go (see *ClosingError).
	ErrClosing = errors.New("replica: session is closing")
	// ErrRetry: Turn.Complete(DefinitelyNotAccepted) on a placing turn:
	// the refusing target's claim was closed and the turn now carries a
	// new claim: dispatch again, to Turn.Target.
	ErrRetry = errors.New("replica: the target refused; dispatch again to the turn's new target")
	// ErrRefused: every target a placing turn was sent to refused it (see
	// *RefusedError), or a later turn's target refused it. It also matches
	// placement.ErrNotAccepted.
	ErrRefused = errors.New("replica: the request was refused")
	// ErrOutcomeUnknown: a later turn (a cached hit) ended Ambiguous: the
	// request is not replayed and the binding is kept.
	ErrOutcomeUnknown = errors.New("replica: a later turn's outcome is unknown")
	// ErrNoTarget: the default proposal found no member left to try.
	ErrNoTarget = errors.New("replica: no target to propose")
	// ErrInvalidConfig: New was given an invalid Config (see *ConfigError).
	ErrInvalidConfig = errors.New("replica: invalid config")
	// ErrTurnState: a Turn method was called in a state that does not
	// allow it (Complete twice, after Done, ...).
	ErrTurnState = errors.New("replica: the turn is not in a state for this call")
	// ErrQuarantineOver: Coordinator.Resolve found the quarantine stale
	// in the store (its worker re-registered or left), so nothing settles
	// it: the local quarantine was dropped, and the session's next turn
	// replaces the claim. The error also wraps the store's
	// *claims.FencedError (Stale; errors.Is claims.ErrFenced).
	ErrQuarantineOver = errors.New("replica: the quarantine is over: its worker re-registered or left")
	// ErrStoreMoved: the claim a placing turn read ended while it was read
	// again and again (a store whose claim changes faster than it can be
	// read); the turn gave up.
	ErrStoreMoved = errors.New("replica: the session's claim kept moving")
)

// QuarantinedError says the session's claim is quarantined: nothing is
// dispatched for it on any replica until Coordinator.Resolve settles it
// (naming Attempt and Gen), or its target's generation moves on.
type QuarantinedError struct {
	Key string
	// Attempt is the quarantined attempt; Gen the store generation of its
	// target when it was dispatched. Resolve names both.
	Attempt uint64
	Gen     int64
	// Target is the attempt's target: the worker to ask what became of it.
	Target claims.Target
	// Rev is the quarantined claim's revision (0 when the store has not
	// recorded the quarantine: the replica placed the session while the
	// store was unreachable, or the write is still to be retried).
	Rev int64
	// Local: this replica dispatched the attempt.
	Local bool
	// Until is when this replica's QuarantineTTL ends its own quarantine
	// at the latest, and DispatchedAt when the attempt was dispatched, on
	// the replica's clock (Coordinator.Now); both zero for another
	// replica's quarantine, whose times this replica does not know.
	Until, DispatchedAt time.Duration
}

// Error describes e.
func (e *QuarantinedError) Error() string {
	return fmt.Sprintf("replica: session %q is quarantined: attempt %d on %s at generation %d (claim rev %d)",
		e.Key, e.Attempt, e.Target, e.Gen, e.Rev)
}

// Is reports whether target is ErrQuarantined or placement.ErrAmbiguous.
func (e *QuarantinedError) Is(target error) bool {
	return target == ErrQuarantined || target == placement.ErrAmbiguous
}

// ClosingError says the session's claim is Closing.
type ClosingError struct {
	Key string
	Rev int64
}

// Error describes e.
func (e *ClosingError) Error() string {
	return fmt.Sprintf("replica: session %q is closing (claim rev %d)", e.Key, e.Rev)
}

// Is reports whether target is ErrClosing.
func (e *ClosingError) Is(target error) bool { return target == ErrClosing }

// RefusedError says the targets a request was sent to refused it
// (DefinitelyNotAccepted): the request never ran.
type RefusedError struct {
	Key string
	// Tried lists the targets that refused, in order.
	Tried []claims.Target
	// Hit: a later turn's target refused it; the binding is kept.
	Hit bool
}

// Error describes e.
func (e *RefusedError) Error() string {
	if e.Hit {
		return fmt.Sprintf("replica: session %q: its target %v refused a later turn", e.Key, e.Tried)
	}
	return fmt.Sprintf("replica: session %q: every target tried refused: %v", e.Key, e.Tried)
}

// Is reports whether target is ErrRefused or placement.ErrNotAccepted.
func (e *RefusedError) Is(target error) bool {
	return target == ErrRefused || target == placement.ErrNotAccepted
}

// ConfigError names the Config field that is invalid.
type ConfigError struct {
	Field, Reason string
}

// Error describes e.
func (e *ConfigError) Error() string {
	return fmt.Sprintf("replica: invalid config: %s %s", e.Field, e.Reason)
}

// Is reports whether target is ErrInvalidConfig.
func (e *ConfigError) Is(target error) bool { return target == ErrInvalidConfig }
