package affinity

import (
	"errors"
	"fmt"
	"time"

	"github.com/placementlab/placement/impl/placement"
)

// Sentinel errors. Every error the layer returns matches one of them (or
// one of the core's, from impl/placement) with errors.Is; the typed errors
// carry the details for errors.As.
var (
	// ErrInvalidSessionID: a client's session id is empty, too long or has
	// bytes outside visible ASCII (see *SessionIDError).
	ErrInvalidSessionID = errors.New("affinity: invalid session id")
	// ErrInvalidWorker: Join was given an invalid Worker (see *WorkerError).
	ErrInvalidWorker = errors.New("affinity: invalid worker")
	// ErrUnknownWorker: Fail or Leave named a worker that is not a member.
	ErrUnknownWorker = errors.New("affinity: unknown worker")
	// ErrInvalidConfig: New was given an invalid Config.
	ErrInvalidConfig = errors.New("affinity: invalid config")
	// ErrInvalidPin: a pin names no worker, a negative rank, or a rank its
	// worker does not serve (see *PinError).
	ErrInvalidPin = errors.New("affinity: invalid pin")
	// ErrPinConflict: in hard mode, a pin disagrees with the session's live
	// binding; the binding is kept (see *PinError).
	ErrPinConflict = errors.New("affinity: pin disagrees with the session's binding")
	// ErrPinnedWorkerGone: the pinned or (hard) bound worker is not a
	// member, or its health check failed (see *IneligibleError).
	ErrPinnedWorkerGone = errors.New("affinity: pinned worker is gone")
	// ErrPinnedWorkerNotAllowed: the pinned or (hard) bound target is not
	// among the candidates the scheduler allows (see *IneligibleError).
	ErrPinnedWorkerNotAllowed = errors.New("affinity: pinned worker is not allowed")
	// ErrPinnedWorkerOverloaded: the pinned or (hard) bound target is
	// overloaded (see *IneligibleError).
	ErrPinnedWorkerOverloaded = errors.New("affinity: pinned worker is overloaded")
	// ErrNoCandidates: no candidate is eligible at all.
	ErrNoCandidates = errors.New("affinity: no eligible candidate")
	// ErrBindingMismatch: in hard mode, a dispatch disagrees with the
	// session's binding (or a pin); nothing is dispatched, the binding is
	// kept (see *MismatchError).
	ErrBindingMismatch = errors.New("affinity: dispatch disagrees with the session's binding")
	// ErrQuarantined: in hard mode, the session is quarantined after an
	// ambiguous dispatch (see *QuarantinedError: when it ends).
	ErrQuarantined = errors.New("affinity: session is quarantined")
	// ErrOutcomeUnknown: a dispatch timed out or its stream was cut: the
	// worker may have run it, so it must not be replayed (see
	// *UnknownOutcomeError).
	ErrOutcomeUnknown = errors.New("affinity: the outcome of a later turn is unknown")
	// ErrTurnEnded: a Turn or Attempt was used after it ended (Done, or an
	// Attempt completed twice).
	ErrTurnEnded = errors.New("affinity: turn already ended")
)

// SessionIDError says why a session id was refused.
type SessionIDError struct{ Reason string }

// Error describes the error.
func (e *SessionIDError) Error() string { return "affinity: invalid session id: " + e.Reason }

// Is reports whether target is ErrInvalidSessionID.
func (e *SessionIDError) Is(target error) bool { return target == ErrInvalidSessionID }

// WorkerError says why a Worker was refused, or names an unknown one.
type WorkerError struct{ Worker, Reason string }

// Error describes the error.
func (e *WorkerError) Error() string {
	return fmt.Sprintf("affinity: worker %q: %s", e.Worker, e.Reason)
}

// Is reports whether target is ErrInvalidWorker (or ErrUnknownWorker for
// an unknown worker).
func (e *WorkerError) Is(target error) bool {
	if e.Reason == reasonUnknown {
		return target == ErrUnknownWorker
	}
	return target == ErrInvalidWorker
}

const reasonUnknown = "not a member"

// ConfigError names the Config field that is invalid.
type ConfigError struct{ Field, Reason string }

// Error describes the error.
func (e *ConfigError) Error() string {
	return fmt.Sprintf("affinity: invalid config: %s: %s", e.Field, e.Reason)
}

// Is reports whether target is ErrInvalidConfig.
func (e *ConfigError) Is(target error) bool { return target == ErrInvalidConfig }

// PinError says how a pin disagrees with its worker or the binding.
type PinError struct {
	Pin Target
	// Binding is the session's binding a conflicting pin disagreed with
	// (ErrPinConflict); the zero Target for an invalid pin.
	Binding Target
	Reason  string
}

// Error describes the error.
func (e *PinError) Error() string {
	if e.Binding != (Target{}) {
		return fmt.Sprintf("affinity: pin %v disagrees with the session's binding to %v", e.Pin, e.Binding)
	}
	return fmt.Sprintf("affinity: invalid pin %v: %s", e.Pin, e.Reason)
}

// Is reports whether target is ErrPinConflict (a pin that disagrees with
// the binding: Binding is set) or, for every other PinError,
// ErrInvalidPin.
func (e *PinError) Is(target error) bool {
	if e.Binding != (Target{}) {
		return target == ErrPinConflict
	}
	return target == ErrInvalidPin
}

// IneligibleError says why the exact target of a pin (or of a hard
// binding) cannot take the request: Cause is ErrPinnedWorkerGone,
// ErrPinnedWorkerNotAllowed or ErrPinnedWorkerOverloaded.
type IneligibleError struct {
	Target Target
	// Bound is true when Target is the session's hard binding, false for
	// a pin.
	Bound bool
	Cause error
}

// Error describes the error.
func (e *IneligibleError) Error() string {
	what := "pinned"
	if e.Bound {
		what = "bound"
	}
	return fmt.Sprintf("affinity: %s target %v: %v", what, e.Target, e.Cause)
}

// Unwrap returns the cause.
func (e *IneligibleError) Unwrap() error { return e.Cause }

// MismatchError says a hard-mode dispatch disagreed with the binding.
type MismatchError struct{ Binding, Dispatch Target }

// Error describes the error.
func (e *MismatchError) Error() string {
	return fmt.Sprintf("affinity: dispatch to %v disagrees with the session's binding to %v", e.Dispatch, e.Binding)
}

// Is reports whether target is ErrBindingMismatch.
func (e *MismatchError) Is(target error) bool { return target == ErrBindingMismatch }

// QuarantinedError says a session is quarantined and when the quarantine
// ends unless a late result or a resolver settles it first. Start returns
// it in hard mode for a quarantined session (a router answers 503 with
// Retry-After); an *UnknownOutcomeError carries it for the ambiguous
// placing dispatch that quarantined the session.
type QuarantinedError struct {
	// Target is the quarantined attempt's target.
	Target Target
	// Attempt and Generation name the quarantined attempt (what a resolver
	// passes to Resolve).
	Attempt, Generation uint64
	// Until is when the quarantine ends at the latest, on the layer's clock
	// (Layer.Now); RetryAfter how long that is from the error.
	Until, RetryAfter time.Duration
	// DispatchedAt is when the quarantined attempt was dispatched, on the
	// layer's clock.
	DispatchedAt time.Duration
}

// Error describes the error.
func (e *QuarantinedError) Error() string {
	return fmt.Sprintf("affinity: session is quarantined (attempt %d on %v) for up to %v", e.Attempt, e.Target, e.RetryAfter)
}

// UnknownOutcomeError says a request's outcome is unknown (a timeout, a cut
// stream after the request was written): the worker may have run it, so
// it must not be replayed (a router answers 504).
type UnknownOutcomeError struct {
	Target Target
	// Attempt is the placing dispatch's attempt id (0 for a later turn or
	// an unpinned request).
	Attempt uint64
	// Quarantine, for a placing dispatch, is the quarantine it opened; nil
	// for a later turn (its binding is kept) or an unpinned request.
	Quarantine *QuarantinedError
}

// Error describes the error.
func (e *UnknownOutcomeError) Error() string {
	if e.Quarantine != nil {
		return fmt.Sprintf("affinity: the outcome of attempt %d on %v is unknown: the session is quarantined", e.Attempt, e.Target)
	}
	return fmt.Sprintf("affinity: the outcome of the request on %v is unknown", e.Target)
}

// Is reports whether target is ErrOutcomeUnknown, or, for a placing
// dispatch, the core's placement.ErrAmbiguous.
func (e *UnknownOutcomeError) Is(target error) bool {
	return target == ErrOutcomeUnknown || (e.Quarantine != nil && target == placement.ErrAmbiguous)
}

// Is reports whether target is ErrQuarantined.
func (e *QuarantinedError) Is(target error) bool { return target == ErrQuarantined }
