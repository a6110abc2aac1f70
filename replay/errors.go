package replay

import (
	"errors"
	"fmt"
)

// Sentinel errors: every error the package returns matches one of them
// with errors.Is, and the typed errors carry the details.
var (
	// ErrInvalidParams: a WorkloadParams or Config field is out of range
	// (see *ParamError).
	ErrInvalidParams = errors.New("replay: invalid parameters")
	// ErrInvalidTrace: a JSONL trace line is malformed or inconsistent
	// (see *TraceError).
	ErrInvalidTrace = errors.New("replay: invalid trace")
	// ErrStuck: a simulation could not finish: requests were still
	// waiting when it ran out of events or passed Config.MaxSimTime (no
	// worker left to serve them, say).
	ErrStuck = errors.New("replay: simulation stuck")
)

// ParamError names the parameter that is out of range.
type ParamError struct{ Field, Reason string }

// Error describes the error.
func (e *ParamError) Error() string {
	return fmt.Sprintf("replay: invalid %s: %s", e.Field, e.Reason)
}

// Is reports whether target is ErrInvalidParams.
func (e *ParamError) Is(target error) bool { return target == ErrInvalidParams }

// TraceError says which line of a trace is invalid, and why.
type TraceError struct {
	Line   int
	Reason string
}

// Error describes the error.
func (e *TraceError) Error() string {
	return fmt.Sprintf("replay: trace line %d: %s", e.Line, e.Reason)
}

// Is reports whether target is ErrInvalidTrace.
func (e *TraceError) Is(target error) bool { return target == ErrInvalidTrace }
