// Package memstore is the in-memory backend of impl/claims: a linearizable
// claim store for unit tests of the layers above (impl/replica), with
// fault injection.
//
// A Backend is the shared store; Open gives one claims.Store handle per
// replica. Holds and registrations made through a handle are its store
// session's: they vanish when the handle shuts down, when the backend
// crashes it (Crash) or when its session is lost (LoseSession). Every
// operation of every handle runs under one lock, so the store is
// linearizable.
//
// Idle expiry follows docs/claims.md: a claim expires IdleTTL after its
// last write or Touch. With a manual clock (Config.Clock) expiry is applied
// at the clock's reading by every operation and by Sweep (call it after
// moving the clock to see the Delete events without another operation);
// with real time a background sweep applies it too.
//
// Fault injection, by replica name (every live handle opened with that
// name): SetUnavailable (calls fail with a *claims.UnavailableError, the
// event stream loses everything and gets a Reset when the store returns),
// LoseReply (a write is applied, then answered as unavailable: a lost
// reply), InjectReset, DuplicateNext (the next event is delivered twice),
// HoldEvents (events queue undelivered; a queue that overflows becomes a
// Reset), Crash and LoseSession.
package memstore

import (
	"errors"
	"sort"
	"sync"
	"time"

	"github.com/placementlab/placement/impl/claims"
	"github.com/placementlab/placement/impl/placement"
)

// DefaultEventBuffer is how many undelivered events a subscriber may have
// queued before its queue is replaced by a Reset, when Config leaves
// EventBuffer zero.
const DefaultEventBuffer = 1024

// ErrInjected is the cause inside the *claims.UnavailableError a handle
// returns while SetUnavailable holds it unavailable.
var ErrInjected = errors.New("memstore: injected unavailability")

// ErrReplyLost is the cause inside the *claims.UnavailableError a write
// returns when LoseReply dropped its reply (the write was applied, or
// refused, all the same).
var ErrReplyLost = errors.New("memstore: injected lost reply")

// Config configures a Backend.
type Config struct {
	// IdleTTL is a claim's idle time-to-live; zero means
	// claims.DefaultIdleTTL.
	IdleTTL time.Duration
	// Clock is the manual clock expiry reads; nil means real time (and a
	// background sweep, stopped by Close).
	Clock *placement.ManualClock
	// EventBuffer bounds each subscriber's undelivered events; zero
	// means DefaultEventBuffer.
	EventBuffer int
}

// Backend is one in-memory claim store shared by the handles Open returns.
type Backend struct {
	ttl    time.Duration
	clock  *placement.ManualClock
	start  time.Time
	bufCap int

	mu          sync.Mutex
	rev         int64
	claims      map[string]*record
	members     map[string]*registration
	replicaSeq  uint64
	handles     map[*handle]struct{}
	losses      map[lossKey]loss
	minDeadline time.Duration // no claim expires before it (a lower bound)
	closed      bool

	stop     chan struct{}
	sweepers sync.WaitGroup
}

// record is a key's current claim and the holds on its lineage.
type record struct {
	c        claims.Claim
	deadline time.Duration
	holders  map[string]*handle // replica name → the handle that made the hold
}

type registration struct {
	m     claims.Member
	owner *handle
}

// NewBackend returns an empty store (revision 0). With real time (no
// Clock) it starts a background sweep: Close the backend to stop it.
func NewBackend(cfg Config) *Backend {
	b := &Backend{
		ttl:     cfg.IdleTTL,
		clock:   cfg.Clock,
		start:   time.Now(),
		bufCap:  cfg.EventBuffer,
		claims:  map[string]*record{},
		members: map[string]*registration{},
		handles: map[*handle]struct{}{},
		losses:  map[lossKey]loss{},
		stop:    make(chan struct{}),
	}
	if b.ttl <= 0 {
		b.ttl = claims.DefaultIdleTTL
	}
	if b.bufCap <= 0 {
		b.bufCap = DefaultEventBuffer
	}
	if b.clock == nil {
		every := min(max(b.ttl/10, time.Millisecond), time.Second)
		b.sweepers.Add(1)
		go func() {
			defer b.sweepers.Done()
			tk := time.NewTicker(every)
			defer tk.Stop()
			for {
				select {
				case <-b.stop:
					return
				case <-tk.C:
					b.Sweep()
				}
			}
		}()
	}
	return b
}

// IdleTTL returns the backend's idle time-to-live.
func (b *Backend) IdleTTL() time.Duration { return b.ttl }

func (b *Backend) now() time.Duration {
	if b.clock != nil {
		return b.clock.Now()
	}
	return time.Since(b.start)
}

// Open returns a new handle for replica: its own store session. Several
// handles may share a name (a restarted replica); fault injection by name
// applies to every live one. A handle of a closed backend fails every call
// with claims.ErrClosed.
func (b *Backend) Open(replica string) claims.Store {
	h := &handle{b: b, name: replica, subs: map[*sub]struct{}{}}
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.closed {
		h.dead = true
		return h
	}
	b.handles[h] = struct{}{}
	return h
}

// Close stops the background sweep and shuts every handle down (their
// holds and registrations vanish, their event streams close). Claims stay
// readable through nothing: every later call fails with claims.ErrClosed.
func (b *Backend) Close() error {
	b.mu.Lock()
	if b.closed {
		b.mu.Unlock()
		return nil
	}
	b.closed = true
	close(b.stop)
	for h := range b.handles {
		b.endSessionLocked(h, true)
	}
	b.mu.Unlock()
	b.sweepers.Wait()
	return nil
}

// Sweep applies idle expiry at the clock's current reading (Delete events
// for the claims that expired).
func (b *Backend) Sweep() {
	b.mu.Lock()
	defer b.mu.Unlock()
	if !b.closed {
		b.expireLocked(true)
	}
}

// Rev returns the store's current revision.
func (b *Backend) Rev() int64 {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.rev
}

// Holders returns the replicas holding key's claim, sorted.
func (b *Backend) Holders(key string) []string {
	b.mu.Lock()
	defer b.mu.Unlock()
	r := b.claims[key]
	if r == nil {
		return nil
	}
	out := make([]string, 0, len(r.holders))
	for n := range r.holders {
		out = append(out, n)
	}
	sort.Strings(out)
	return out
}

// named calls f on every live handle opened as replica.
func (b *Backend) named(replica string, f func(h *handle)) {
	for h := range b.handles {
		if h.name == replica {
			f(h)
		}
	}
}

// SetUnavailable makes replica's handles unreachable (every call returns
// a *claims.UnavailableError wrapping ErrInjected and changes nothing;
// their event streams drop what they had queued and deliver nothing) or
// reachable again (each stream then gets a Reset). Holds and
// registrations stay: see LoseSession for a session that expired.
func (b *Backend) SetUnavailable(replica string, unavailable bool) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.setUnavailableLocked(replica, unavailable)
}

// setUnavailableLocked is SetUnavailable with b.mu held.
func (b *Backend) setUnavailableLocked(replica string, unavailable bool) {
	b.named(replica, func(h *handle) {
		if h.unavailable == unavailable {
			return
		}
		h.unavailable = unavailable
		for s := range h.subs {
			if unavailable {
				s.q = s.q[:0]
				s.disconnected = true
			} else {
				s.disconnected = false
				b.pushLocked(s, claims.Event{Kind: claims.Reset, Why: "store reachable again"})
			}
		}
	})
}

// LoseReply makes the next n calls of op (a write: "create-or-get",
// "hold", "unhold", "close", "quarantine", "resolve", "move" or "touch")
// by replica's handles lose their reply: each is applied (or refused) as
// usual, then answered with a *claims.UnavailableError wrapping
// ErrReplyLost, as when the connection drops or the deadline passes after
// the request reached the store. With cut, the handles are also made
// unreachable as the reply is lost (SetUnavailable(replica, true); undo
// it with SetUnavailable(replica, false)): the caller cannot read what
// happened until then. Calls that do not reach the store (unreachable,
// closed, a bad argument) do not count.
func (b *Backend) LoseReply(replica, op string, n int, cut bool) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if n <= 0 {
		delete(b.losses, lossKey{replica, op})
		return
	}
	b.losses[lossKey{replica, op}] = loss{n: n, cut: cut}
}

// lossKey names the calls LoseReply targets.
type lossKey struct{ replica, op string }

// loss is what LoseReply asked for.
type loss struct {
	n   int
	cut bool
}

// InjectReset drops every undelivered event of replica's streams and
// queues a Reset in their place (a Reset may lose events).
func (b *Backend) InjectReset(replica string) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.named(replica, func(h *handle) {
		for s := range h.subs {
			if s.disconnected {
				continue
			}
			s.q = append(s.q[:0], claims.Event{Kind: claims.Reset, Why: "injected reset"})
			s.signal()
		}
	})
}

// DuplicateNext makes the next event queued on each of replica's streams
// be delivered twice (as a watch that reconnects may redeliver).
func (b *Backend) DuplicateNext(replica string) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.named(replica, func(h *handle) {
		for s := range h.subs {
			s.dupNext = true
		}
	})
}

// HoldEvents stops (hold true) or resumes delivery on replica's streams.
// Held events queue; a queue that overflows Config.EventBuffer is replaced
// by a Reset. Streams opened later start as held too.
func (b *Backend) HoldEvents(replica string, hold bool) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.named(replica, func(h *handle) {
		h.held = hold
		if !hold {
			for s := range h.subs {
				s.signal()
			}
		}
	})
}

// Crash ends replica's handles as a crashed process would: their holds
// and registrations vanish (a Closing claim whose last holder it was is
// deleted), their event streams close, and every later call fails with
// claims.ErrClosed.
func (b *Backend) Crash(replica string) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.named(replica, func(h *handle) { b.endSessionLocked(h, true) })
}

// LoseSession ends the store session of replica's handles as an expired
// lease would, while the handles live on: their holds and registrations
// vanish and their streams get a Reset; later calls work (in a new
// session).
func (b *Backend) LoseSession(replica string) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.named(replica, func(h *handle) {
		b.endSessionLocked(h, false)
		for s := range h.subs {
			if !s.disconnected {
				b.pushLocked(s, claims.Event{Kind: claims.Reset, Why: "store session lost"})
			}
		}
	})
}

// endSessionLocked drops h's holds and registrations; with dead it also
// closes h (its streams end, later calls fail with ErrClosed).
func (b *Backend) endSessionLocked(h *handle, dead bool) {
	for key, r := range b.claims {
		for n, owner := range r.holders {
			if owner == h {
				delete(r.holders, n)
			}
		}
		if r.c.State == claims.Closing && len(r.holders) == 0 {
			b.deleteLocked(key, r)
		}
	}
	changed := false
	for w, reg := range b.members {
		if reg.owner == h {
			delete(b.members, w)
			changed = true
		}
	}
	if changed {
		b.rev++
		b.broadcastLocked(claims.Event{Kind: claims.MembersChanged, Rev: b.rev})
	}
	if dead {
		h.dead = true
		delete(b.handles, h)
		for s := range h.subs {
			s.end()
		}
	}
}

// expireLocked deletes the claims whose deadline has passed. Unless force,
// it returns at once when no deadline can have passed.
func (b *Backend) expireLocked(force bool) {
	now := b.now()
	if !force && now < b.minDeadline {
		return
	}
	next := time.Duration(1<<63 - 1)
	for key, r := range b.claims {
		if now >= r.deadline {
			b.deleteLocked(key, r)
			continue
		}
		next = min(next, r.deadline)
	}
	b.minDeadline = next
}

// deleteLocked deletes key's claim r (and its holds); its revision ends.
func (b *Backend) deleteLocked(key string, r *record) {
	delete(b.claims, key)
	b.rev++
	b.broadcastLocked(claims.Event{Kind: claims.Delete, Key: key, Rev: r.c.Rev})
}

// writeLocked makes c (Key set) key's claim at a new revision, keeping
// holders, and ends the previous revision, if any. c's Born zero starts a
// new lineage (Born = the new revision); a rewrite keeps c.Born.
func (b *Backend) writeLocked(c claims.Claim, holders map[string]*handle) claims.Claim {
	prev := b.claims[c.Key]
	b.rev++
	c.Rev = b.rev
	if c.Born == 0 {
		c.Born = c.Rev // a new lineage
	}
	if holders == nil {
		holders = map[string]*handle{}
	}
	dl := b.now() + b.ttl
	b.claims[c.Key] = &record{c: c, deadline: dl, holders: holders}
	b.minDeadline = min(b.minDeadline, dl)
	if prev != nil {
		b.broadcastLocked(claims.Event{Kind: claims.Delete, Key: c.Key, Rev: prev.c.Rev})
	}
	return c
}

// staleLocked reports whether c's target's worker is gone or has another
// generation.
func (b *Backend) staleLocked(c claims.Claim) bool {
	reg := b.members[c.Target.Worker]
	return reg == nil || reg.m.Gen != c.Gen
}

func (b *Backend) broadcastLocked(ev claims.Event) {
	for h := range b.handles {
		for s := range h.subs {
			if !s.disconnected {
				b.pushLocked(s, ev)
			}
		}
	}
}

// pushLocked queues ev on s; a full queue becomes a Reset (then ev).
func (b *Backend) pushLocked(s *sub, ev claims.Event) {
	n := 1
	if s.dupNext {
		s.dupNext = false
		n = 2
	}
	for range n {
		if len(s.q) >= b.bufCap {
			// What was queued is lost: a Reset in its place, then ev.
			s.q = append(s.q[:0], claims.Event{Kind: claims.Reset, Why: "slow consumer: event buffer overflowed"})
		}
		s.q = append(s.q, ev)
	}
	s.signal()
}

// Claim returns key's current claim as the store holds it, without
// applying expiry (a test's view of the state).
func (b *Backend) Claim(key string) (claims.Claim, bool) {
	b.mu.Lock()
	defer b.mu.Unlock()
	r := b.claims[key]
	if r == nil {
		return claims.Claim{}, false
	}
	return r.c, true
}

// Deadline returns when key's claim expires on the backend's clock.
func (b *Backend) Deadline(key string) (time.Duration, bool) {
	b.mu.Lock()
	defer b.mu.Unlock()
	r := b.claims[key]
	if r == nil {
		return 0, false
	}
	return r.deadline, true
}

// invalid is the error of a bad argument the claims checkers do not cover
// (a nil context).
func invalid(op, what string) error {
	return &claims.ArgumentError{Op: op, What: what}
}
