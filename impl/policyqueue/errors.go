package policyqueue

import (
	"errors"
	"fmt"

	"github.com/placementlab/placement/impl/affinity"
)

// Sentinel errors. Every error the queue returns matches one of them with
// errors.Is; the typed errors carry the details for errors.As.
var (
	// ErrQueueFull: Enqueue found the queue (MaxQueued) or the item's lane
	// (MaxPerLane) full, and the item could not be admitted at once (see
	// *FullError). A router answers 503 with Retry-After.
	ErrQueueFull = errors.New("policyqueue: queue is full")
	// ErrClosed: the queue was closed (Close): waiting items end with it,
	// and nothing is enqueued after.
	ErrClosed = errors.New("policyqueue: queue is closed")
	// ErrCancelled: the ticket was cancelled while it waited (Cancel, or the
	// context of Wait or Acquire ended; then the context's cause is wrapped
	// too), or cancelled after its admission (its slot released).
	ErrCancelled = errors.New("policyqueue: cancelled")
	// ErrUnknownTicket: Wait named a ticket the queue does not hold: never
	// issued, or already ended (released, cancelled) before Wait began.
	ErrUnknownTicket = errors.New("policyqueue: unknown ticket")
	// ErrInvalidItem: Enqueue or Acquire was given an invalid Item (see
	// *ItemError).
	ErrInvalidItem = errors.New("policyqueue: invalid item")
	// ErrInvalidArgument: an empty worker name or a negative capacity.
	ErrInvalidArgument = errors.New("policyqueue: invalid argument")
	// ErrInvalidConfig: New was given an invalid Config (see *ConfigError).
	ErrInvalidConfig = errors.New("policyqueue: invalid config")
)

// FullError says which bound refused an Enqueue.
type FullError struct {
	// Lane is the refused item's lane kind; Target its exact target
	// (LaneExact only).
	Lane   LaneKind
	Target affinity.Target
	// PerLane: the lane's bound (MaxPerLane) refused it, not the queue's.
	PerLane bool
	// Waiting is how many items waited in the queue (or the lane, with
	// PerLane); Limit is the bound.
	Waiting, Limit int
}

// Error describes the error.
func (e *FullError) Error() string {
	if e.PerLane {
		return fmt.Sprintf("policyqueue: queue is full: lane %s holds %d waiting items (MaxPerLane %d)", laneName(e.Lane, e.Target), e.Waiting, e.Limit)
	}
	return fmt.Sprintf("policyqueue: queue is full: %d waiting items (MaxQueued %d)", e.Waiting, e.Limit)
}

// Unwrap returns ErrQueueFull.
func (e *FullError) Unwrap() error { return ErrQueueFull }

// ItemError says what is wrong with an Item.
type ItemError struct{ Reason string }

// Error describes the error.
func (e *ItemError) Error() string { return "policyqueue: invalid item: " + e.Reason }

// Unwrap returns ErrInvalidItem.
func (e *ItemError) Unwrap() error { return ErrInvalidItem }

// ConfigError names the Config field that is invalid.
type ConfigError struct{ Field, Reason string }

// Error describes the error.
func (e *ConfigError) Error() string {
	return fmt.Sprintf("policyqueue: invalid config: %s: %s", e.Field, e.Reason)
}

// Unwrap returns ErrInvalidConfig.
func (e *ConfigError) Unwrap() error { return ErrInvalidConfig }

func laneName(k LaneKind, t affinity.Target) string {
	if k == LaneExact {
		return "exact " + t.String()
	}
	return "shared"
}
