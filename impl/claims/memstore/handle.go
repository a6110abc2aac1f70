package memstore

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"time"

	"github.com/placementlab/placement/impl/claims"
)

// handle is one replica's claims.Store on a Backend.
type handle struct {
	b    *Backend
	name string

	// Guarded by b.mu.
	unavailable bool
	held        bool
	dead        bool
	subs        map[*sub]struct{}
}

var _ claims.Store = (*handle)(nil)

// begin locks the backend and checks that h can serve op: ctx live, h
// open and reachable. On success the caller holds b.mu and must unlock it;
// expiry has been applied at the current time.
func (h *handle) begin(ctx context.Context, op string) error {
	if ctx == nil {
		return invalid(op, "nil context")
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	h.b.mu.Lock()
	switch {
	case h.dead || h.b.closed:
		h.b.mu.Unlock()
		return fmt.Errorf("memstore: %s: %w", op, claims.ErrClosed)
	case h.unavailable:
		h.b.mu.Unlock()
		return &claims.UnavailableError{Op: op, Err: ErrInjected}
	}
	h.b.expireLocked(false)
	return nil
}

// createOrGet is CreateOrGet, before a lost reply is injected.
func (h *handle) createOrGet(ctx context.Context, key string, propose func() (claims.Target, error)) (claims.Claim, bool, error) {
	const op = "create-or-get"
	if err := claims.CheckCreateOrGet(key, propose); err != nil {
		return claims.Claim{}, false, err
	}
	b := h.b
	for {
		if err := h.begin(ctx, op); err != nil {
			return claims.Claim{}, false, err
		}
		var seen int64
		if r := b.claims[key]; r != nil {
			if !b.staleLocked(r.c) {
				c := r.c
				b.mu.Unlock()
				return c, false, nil
			}
			seen = r.c.Rev
		}
		b.mu.Unlock()

		t, err := propose()
		if err != nil {
			return claims.Claim{}, false, err
		}
		if err := claims.CheckProposal(t); err != nil {
			return claims.Claim{}, false, err
		}

		if err := h.begin(ctx, op); err != nil {
			return claims.Claim{}, false, err
		}
		var cur int64
		if r := b.claims[key]; r != nil {
			cur = r.c.Rev
		}
		if cur != seen {
			// Lost the race: read the winner (or propose again if it is
			// stale already).
			b.mu.Unlock()
			continue
		}
		reg := b.members[t.Worker]
		if reg == nil {
			b.mu.Unlock()
			return claims.Claim{}, false, fmt.Errorf("memstore: %s %q: proposed worker %q: %w", op, key, t.Worker, claims.ErrUnknownWorker)
		}
		// A stale claim's lineage ends: a new claim starts with no holds.
		c := b.writeLocked(claims.Claim{Key: key, Target: t, Gen: reg.m.Gen, State: claims.Bound}, nil)
		b.mu.Unlock()
		return c, true, nil
	}
}

// Get implements claims.Store.
func (h *handle) Get(ctx context.Context, key string) (claims.Claim, bool, error) {
	if err := claims.CheckGet(key); err != nil {
		return claims.Claim{}, false, err
	}
	if err := h.begin(ctx, "get"); err != nil {
		return claims.Claim{}, false, err
	}
	defer h.b.mu.Unlock()
	r := h.b.claims[key]
	if r == nil {
		return claims.Claim{}, false, nil
	}
	return r.c, true, nil
}

// beginLineage is begin, then key's claim if rev is a revision of its
// lineage (Born <= rev <= Rev) or an ErrClaimMoved error. On success the
// caller holds b.mu and must unlock it.
func (h *handle) beginLineage(ctx context.Context, op, key string, rev int64) (*record, error) {
	if err := h.begin(ctx, op); err != nil {
		return nil, err
	}
	r := h.b.claims[key]
	var err error
	switch {
	case r == nil:
		err = fmt.Errorf("memstore: %s %q rev %d: no claim: %w", op, key, rev, claims.ErrClaimMoved)
	case !r.c.InLineage(rev):
		err = fmt.Errorf("memstore: %s %q rev %d: not in the current lineage [%d, %d]: %w", op, key, rev, r.c.Born, r.c.Rev, claims.ErrClaimMoved)
	}
	if err != nil {
		h.b.mu.Unlock()
		return nil, err
	}
	return r, nil
}

// beginCurrent is begin, then key's claim if its revision is rev or an
// ErrClaimMoved error. On success the caller holds b.mu and must unlock
// it.
func (h *handle) beginCurrent(ctx context.Context, op, key string, rev int64) (*record, error) {
	if err := h.begin(ctx, op); err != nil {
		return nil, err
	}
	r := h.b.claims[key]
	var err error
	switch {
	case r == nil:
		err = fmt.Errorf("memstore: %s %q rev %d: no claim: %w", op, key, rev, claims.ErrClaimMoved)
	case r.c.Rev != rev:
		err = fmt.Errorf("memstore: %s %q rev %d: current rev is %d: %w", op, key, rev, r.c.Rev, claims.ErrClaimMoved)
	}
	if err != nil {
		h.b.mu.Unlock()
		return nil, err
	}
	return r, nil
}

// hold is Hold, before a lost reply is injected.
func (h *handle) hold(ctx context.Context, key string, rev int64, replica string) error {
	if err := claims.CheckHold(key, rev, replica); err != nil {
		return err
	}
	r, err := h.beginCurrent(ctx, "hold", key, rev)
	if err != nil {
		return err
	}
	defer h.b.mu.Unlock()
	r.holders[replica] = h
	return nil
}

// unhold is Unhold, before a lost reply is injected.
func (h *handle) unhold(ctx context.Context, key string, replica string) error {
	if err := claims.CheckUnhold(key, replica); err != nil {
		return err
	}
	if err := h.begin(ctx, "unhold"); err != nil {
		return err
	}
	defer h.b.mu.Unlock()
	r := h.b.claims[key]
	if r == nil {
		return nil
	}
	if _, ok := r.holders[replica]; !ok {
		return nil
	}
	delete(r.holders, replica)
	if r.c.State == claims.Closing && len(r.holders) == 0 {
		h.b.deleteLocked(key, r)
	}
	return nil
}

// close is Close, before a lost reply is injected.
func (h *handle) close(ctx context.Context, key string, rev int64, replica string) (claims.CloseResult, error) {
	if err := claims.CheckClose(key, rev, replica); err != nil {
		return 0, err
	}
	if err := h.begin(ctx, "close"); err != nil {
		return 0, err
	}
	defer h.b.mu.Unlock()
	r := h.b.claims[key]
	if r == nil || r.c.Rev != rev {
		return claims.CloseStale, nil
	}
	delete(r.holders, replica)
	if len(r.holders) == 0 {
		h.b.deleteLocked(key, r)
		return claims.CloseDeleted, nil
	}
	if r.c.State != claims.Closing {
		c := r.c
		c.State = claims.Closing
		c.Attempt = 0
		h.b.writeLocked(c, r.holders)
	}
	return claims.CloseDeferred, nil
}

// quarantine is Quarantine, before a lost reply is injected.
func (h *handle) quarantine(ctx context.Context, key string, rev int64, attempt uint64, gen int64) (claims.Claim, error) {
	const op = "quarantine"
	if err := claims.CheckQuarantine(key, rev, gen); err != nil {
		return claims.Claim{}, err
	}
	r, err := h.beginCurrent(ctx, op, key, rev)
	if err != nil {
		return claims.Claim{}, err
	}
	defer h.b.mu.Unlock()
	if r.c.Gen != gen {
		return claims.Claim{}, fmt.Errorf("memstore: %s %q rev %d: generation %d is not the claim's %d: %w", op, key, rev, gen, r.c.Gen, claims.ErrClaimMoved)
	}
	c := r.c
	c.State = claims.Quarantined
	c.Attempt = attempt
	return h.b.writeLocked(c, r.holders), nil
}

// resolve is Resolve, before a lost reply is injected.
func (h *handle) resolve(ctx context.Context, key string, attempt uint64, gen int64, accepted bool) (claims.Claim, bool, error) {
	if err := claims.CheckResolve(key, gen); err != nil {
		return claims.Claim{}, false, err
	}
	if err := h.begin(ctx, "resolve"); err != nil {
		return claims.Claim{}, false, err
	}
	defer h.b.mu.Unlock()
	r := h.b.claims[key]
	if r == nil {
		return claims.Claim{}, false, &claims.FencedError{Key: key, Attempt: attempt, Gen: gen}
	}
	if r.c.State != claims.Quarantined || r.c.Attempt != attempt || r.c.Gen != gen {
		return claims.Claim{}, false, &claims.FencedError{Key: key, Attempt: attempt, Gen: gen, Current: r.c, Found: true}
	}
	if h.b.staleLocked(r.c) {
		// The worker re-registered or left: nothing settles a stale
		// claim (CreateOrGet replaces it).
		return claims.Claim{}, false, &claims.FencedError{Key: key, Attempt: attempt, Gen: gen, Current: r.c, Found: true, Stale: true}
	}
	if !accepted {
		h.b.deleteLocked(key, r)
		return claims.Claim{}, false, nil
	}
	c := r.c
	c.State = claims.Bound
	c.Attempt = 0
	return h.b.writeLocked(c, r.holders), true, nil
}

// move is Move, before a lost reply is injected: fenced by rev, only a
// Bound claim, to a registered worker; the new lineage starts with no
// holds, and the old revision's Delete event goes out.
func (h *handle) move(ctx context.Context, key string, rev int64, t claims.Target) (claims.Claim, error) {
	const op = "move"
	if err := claims.CheckMove(key, rev, t); err != nil {
		return claims.Claim{}, err
	}
	if err := h.begin(ctx, op); err != nil {
		return claims.Claim{}, err
	}
	defer h.b.mu.Unlock()
	b := h.b
	r := b.claims[key]
	switch {
	case r == nil:
		return claims.Claim{}, &claims.MoveError{Key: key, Rev: rev, Target: t}
	case r.c.Rev != rev, r.c.State != claims.Bound:
		return claims.Claim{}, &claims.MoveError{Key: key, Rev: rev, Target: t, Current: r.c, Found: true}
	}
	reg := b.members[t.Worker]
	if reg == nil {
		return claims.Claim{}, fmt.Errorf("memstore: %s %q rev %d: target worker %q: %w", op, key, rev, t.Worker, claims.ErrUnknownWorker)
	}
	// Born zero: a new lineage; no holders: the old lineage's holds end.
	return b.writeLocked(claims.Claim{Key: key, Target: t, Gen: reg.m.Gen, State: claims.Bound}, nil), nil
}

// touch is Touch, before a lost reply is injected.
func (h *handle) touch(ctx context.Context, key string, rev int64) error {
	if err := claims.CheckTouch(key, rev); err != nil {
		return err
	}
	r, err := h.beginLineage(ctx, "touch", key, rev)
	if err != nil {
		return err
	}
	defer h.b.mu.Unlock()
	r.deadline = h.b.now() + h.b.ttl
	return nil
}

// Register implements claims.Store: a registration with the identity of
// worker's current one returns it and changes nothing (it stays with the
// handle that made it).
func (h *handle) Register(ctx context.Context, worker, identity string) (claims.Member, error) {
	if err := claims.CheckRegister(worker); err != nil {
		return claims.Member{}, err
	}
	if err := h.begin(ctx, "register"); err != nil {
		return claims.Member{}, err
	}
	defer h.b.mu.Unlock()
	b := h.b
	if reg, ok := b.members[worker]; ok && reg.m.Identity == identity {
		return reg.m, nil
	}
	b.rev++
	m := claims.Member{Worker: worker, Identity: identity, Gen: b.rev}
	b.members[worker] = &registration{m: m, owner: h}
	b.broadcastLocked(claims.Event{Kind: claims.MembersChanged, Key: worker, Rev: b.rev})
	return m, nil
}

// Deregister implements claims.Store.
func (h *handle) Deregister(ctx context.Context, worker string) error {
	if err := claims.CheckDeregister(worker); err != nil {
		return err
	}
	if err := h.begin(ctx, "deregister"); err != nil {
		return err
	}
	defer h.b.mu.Unlock()
	b := h.b
	if _, ok := b.members[worker]; !ok {
		return nil
	}
	delete(b.members, worker)
	b.rev++
	b.broadcastLocked(claims.Event{Kind: claims.MembersChanged, Key: worker, Rev: b.rev})
	return nil
}

// Members implements claims.Store.
func (h *handle) Members(ctx context.Context) ([]claims.Member, int64, error) {
	if err := h.begin(ctx, "members"); err != nil {
		return nil, 0, err
	}
	defer h.b.mu.Unlock()
	out := make([]claims.Member, 0, len(h.b.members))
	for _, reg := range h.b.members {
		out = append(out, reg.m)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Worker < out[j].Worker })
	return out, h.b.rev, nil
}

// ReplicaID implements claims.Store: every call returns a new number.
func (h *handle) ReplicaID(ctx context.Context, replica string) (uint64, error) {
	if err := claims.CheckReplicaID(replica); err != nil {
		return 0, err
	}
	if err := h.begin(ctx, "replica-id"); err != nil {
		return 0, err
	}
	defer h.b.mu.Unlock()
	if h.b.replicaSeq >= claims.MaxReplicaID {
		return 0, fmt.Errorf("memstore: replica-id: all %d replica ids are used", uint64(claims.MaxReplicaID))
	}
	h.b.replicaSeq++
	return h.b.replicaSeq, nil
}

// Events implements claims.Store.
func (h *handle) Events(ctx context.Context) (<-chan claims.Event, error) {
	if ctx == nil {
		return nil, invalid("events", "nil context")
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	b := h.b
	b.mu.Lock()
	if h.dead || b.closed {
		b.mu.Unlock()
		return nil, fmt.Errorf("memstore: events: %w", claims.ErrClosed)
	}
	s := &sub{
		h:    h,
		ch:   make(chan claims.Event),
		wake: make(chan struct{}, 1),
		done: make(chan struct{}),
	}
	h.subs[s] = struct{}{}
	if h.unavailable {
		s.disconnected = true // the first Reset comes when the store returns
	} else {
		b.pushLocked(s, claims.Event{Kind: claims.Reset, Why: "stream start"})
	}
	b.mu.Unlock()
	go s.pump(ctx)
	return s.ch, nil
}

// IdleTTL implements claims.Store: the backend's idle time-to-live.
func (h *handle) IdleTTL() time.Duration { return h.b.ttl }

// Shutdown implements claims.Store: h's holds and registrations vanish,
// its streams close, later calls fail with claims.ErrClosed.
func (h *handle) Shutdown() error {
	h.b.mu.Lock()
	defer h.b.mu.Unlock()
	if !h.dead {
		h.b.endSessionLocked(h, true)
	}
	return nil
}

// sub is one event stream.
type sub struct {
	h    *handle
	ch   chan claims.Event
	wake chan struct{} // a token: the queue or hold changed
	done chan struct{} // closed when the handle ends

	// Guarded by h.b.mu.
	q            []claims.Event
	disconnected bool
	dupNext      bool
	ended        bool
}

func (s *sub) signal() {
	select {
	case s.wake <- struct{}{}:
	default:
	}
}

// end closes s's done channel once. The caller holds b.mu.
func (s *sub) end() {
	if !s.ended {
		s.ended = true
		close(s.done)
	}
}

// pump delivers s's queue to its channel until ctx or the handle ends.
func (s *sub) pump(ctx context.Context) {
	b := s.h.b
	defer func() {
		b.mu.Lock()
		delete(s.h.subs, s)
		s.end()
		s.q = nil
		b.mu.Unlock()
		close(s.ch)
	}()
	for {
		b.mu.Lock()
		var ev claims.Event
		ok := !s.h.held && len(s.q) > 0
		if ok {
			ev = s.q[0]
			s.q = s.q[1:]
		}
		b.mu.Unlock()
		if !ok {
			select {
			case <-s.wake:
				continue
			case <-s.done:
				return
			case <-ctx.Done():
				return
			}
		}
		select {
		case s.ch <- ev:
		case <-s.done:
			return
		case <-ctx.Done():
			return
		}
	}
}

// CreateOrGet implements claims.Store.
func (h *handle) CreateOrGet(ctx context.Context, key string, propose func() (claims.Target, error)) (claims.Claim, bool, error) {
	c, created, err := h.createOrGet(ctx, key, propose)
	if lerr := h.lost("create-or-get", err); lerr != nil {
		return claims.Claim{}, false, lerr
	}
	return c, created, err
}

// Hold implements claims.Store.
func (h *handle) Hold(ctx context.Context, key string, rev int64, replica string) error {
	err := h.hold(ctx, key, rev, replica)
	if lerr := h.lost("hold", err); lerr != nil {
		return lerr
	}
	return err
}

// Unhold implements claims.Store.
func (h *handle) Unhold(ctx context.Context, key string, replica string) error {
	err := h.unhold(ctx, key, replica)
	if lerr := h.lost("unhold", err); lerr != nil {
		return lerr
	}
	return err
}

// Close implements claims.Store.
func (h *handle) Close(ctx context.Context, key string, rev int64, replica string) (claims.CloseResult, error) {
	res, err := h.close(ctx, key, rev, replica)
	if lerr := h.lost("close", err); lerr != nil {
		return 0, lerr
	}
	return res, err
}

// Quarantine implements claims.Store.
func (h *handle) Quarantine(ctx context.Context, key string, rev int64, attempt uint64, gen int64) (claims.Claim, error) {
	c, err := h.quarantine(ctx, key, rev, attempt, gen)
	if lerr := h.lost("quarantine", err); lerr != nil {
		return claims.Claim{}, lerr
	}
	return c, err
}

// Resolve implements claims.Store.
func (h *handle) Resolve(ctx context.Context, key string, attempt uint64, gen int64, accepted bool) (claims.Claim, bool, error) {
	c, ok, err := h.resolve(ctx, key, attempt, gen, accepted)
	if lerr := h.lost("resolve", err); lerr != nil {
		return claims.Claim{}, false, lerr
	}
	return c, ok, err
}

// Move implements claims.Store.
func (h *handle) Move(ctx context.Context, key string, rev int64, target claims.Target) (claims.Claim, error) {
	c, err := h.move(ctx, key, rev, target)
	if lerr := h.lost("move", err); lerr != nil {
		return claims.Claim{}, lerr
	}
	return c, err
}

// Touch implements claims.Store.
func (h *handle) Touch(ctx context.Context, key string, rev int64) error {
	err := h.touch(ctx, key, rev)
	if lerr := h.lost("touch", err); lerr != nil {
		return lerr
	}
	return err
}

// lost returns the *claims.UnavailableError (wrapping ErrReplyLost) that
// replaces the reply of op, which ended with err, when LoseReply asked for
// it, and nil otherwise. Only a call that reached the store (applied, or
// refused with the store's answer) has its reply lost.
func (h *handle) lost(op string, err error) error {
	if err != nil && !errors.Is(err, claims.ErrClaimMoved) && !errors.Is(err, claims.ErrFenced) &&
		!errors.Is(err, claims.ErrUnknownWorker) && !errors.Is(err, claims.ErrNotBound) {
		return nil
	}
	b := h.b
	b.mu.Lock()
	defer b.mu.Unlock()
	k := lossKey{h.name, op}
	l, ok := b.losses[k]
	if !ok || h.dead {
		return nil
	}
	if l.n--; l.n <= 0 {
		delete(b.losses, k)
	} else {
		b.losses[k] = l
	}
	if l.cut {
		b.setUnavailableLocked(h.name, true)
	}
	return &claims.UnavailableError{Op: op, Err: ErrReplyLost}
}
