package router

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"

	"github.com/placementlab/placement/impl/affinity"
	"github.com/placementlab/placement/impl/placement"
)

// ErrSessionBusy: the session already has Config.MaxPerSession requests in
// flight through the driver and Config.SessionQueue more waiting (see
// *SessionBusyError).
var ErrSessionBusy = errors.New("router: the session has too many requests in flight")

// SessionBusyError says a request was refused by the per-session limit:
// nothing was started or sent, so the client may send it again later. It
// matches ErrSessionBusy and placement.ErrWouldWait, so impl/httpoutcome
// answers it 503 with a Retry-After (its "busy" row).
type SessionBusyError struct {
	// InFlight and Waiting are the session's requests in flight and
	// waiting when it was refused.
	InFlight, Waiting int
}

// Error describes the error.
func (e *SessionBusyError) Error() string {
	return fmt.Sprintf("router: the session has %d request(s) in flight and %d waiting", e.InFlight, e.Waiting)
}

// Is reports whether target is ErrSessionBusy or placement.ErrWouldWait.
func (e *SessionBusyError) Is(target error) bool {
	return target == ErrSessionBusy || target == placement.ErrWouldWait
}

// sessionLimit holds each session to max requests in flight, with at
// most queue more waiting in arrival order. Only sessions with a request
// in flight have a gate: memory is bounded by the requests in flight and
// waiting.
type sessionLimit struct {
	max, queue int
	mu         sync.Mutex
	gates      map[affinity.Key]*sessionGate
	waits      atomic.Uint64 // requests that waited
	refused    atomic.Uint64 // requests refused (SessionBusyError)
	waiting    atomic.Int64  // requests waiting now (changed under mu)
}

type sessionGate struct {
	inFlight int              // requests holding a slot
	waiters  []*sessionWaiter // FIFO; non-empty only while inFlight == max
}

type sessionWaiter struct {
	ready  chan struct{} // closed when a leaving request hands it its slot
	handed bool          // under mu
}

// enter takes one of key's slots, waiting in line (until ctx ends) when
// they are all taken; it returns the function that gives the slot back.
// A zero key (no session), or no limit, takes nothing.
func (s *sessionLimit) enter(ctx context.Context, key affinity.Key) (leave func(), err error) {
	if s.max == 0 || key.IsZero() {
		return func() {}, nil
	}
	s.mu.Lock()
	g := s.gates[key]
	if g == nil {
		if s.gates == nil {
			s.gates = map[affinity.Key]*sessionGate{}
		}
		g = &sessionGate{}
		s.gates[key] = g
	}
	if g.inFlight < s.max && len(g.waiters) == 0 {
		g.inFlight++
		s.mu.Unlock()
		return func() { s.leave(key, g) }, nil
	}
	if len(g.waiters) >= s.queue {
		err := &SessionBusyError{InFlight: g.inFlight, Waiting: len(g.waiters)}
		s.mu.Unlock()
		s.refused.Add(1)
		return nil, err
	}
	w := &sessionWaiter{ready: make(chan struct{})}
	g.waiters = append(g.waiters, w)
	s.waiting.Add(1)
	s.waits.Add(1)
	s.mu.Unlock()
	select {
	case <-w.ready:
		return func() { s.leave(key, g) }, nil
	case <-ctx.Done():
	}
	s.mu.Lock()
	if w.handed {
		// The slot came as ctx ended: pass it on.
		s.mu.Unlock()
		s.leave(key, g)
	} else {
		for i, x := range g.waiters {
			if x == w {
				g.waiters = append(g.waiters[:i], g.waiters[i+1:]...)
				break
			}
		}
		s.waiting.Add(-1)
		s.mu.Unlock()
	}
	return nil, fmt.Errorf("router: waiting for the session's request in flight: %w: %w", placement.ErrCancelled, context.Cause(ctx))
}

// leave gives a slot of key back: to the first waiting request, if any,
// else to the session (whose gate goes with its last slot).
func (s *sessionLimit) leave(key affinity.Key, g *sessionGate) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(g.waiters) > 0 {
		w := g.waiters[0]
		g.waiters[0] = nil
		g.waiters = g.waiters[1:]
		w.handed = true
		s.waiting.Add(-1)
		close(w.ready)
		return
	}
	g.inFlight--
	if g.inFlight == 0 {
		delete(s.gates, key)
	}
}

// sessions returns how many sessions hold a slot now.
func (s *sessionLimit) sessions() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.gates)
}
