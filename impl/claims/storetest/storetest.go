// Package storetest is the contract suite of impl/claims: Run checks any
// claims.Store backend against docs/claims.md and the Store interface's
// docs. A backend's test calls it with a Harness that creates a fresh,
// empty store per subtest and says what the backend can do (a manual
// clock or real time, crashing a replica's session).
//
// Beyond the interface's docs, the suite fixes these points of the
// contract, which every backend keeps:
//
//   - Holds belong to a claim's lineage: they survive the claim's rewrites
//     (Quarantine, Resolve accepted, a deferred Close) and end with it (a
//     delete, an expiry, or CreateOrGet replacing it as stale). A new claim
//     of the key starts with no holds. A lineage is the revisions
//     [Born, Rev] of the current claim: every rewrite keeps Born, a new
//     claim (also one replacing a stale claim) has Born == Rev. Hold is
//     fenced by the current revision (a turn routed from a cached
//     revision learns the claim moved); claims.HoldLineage, built on it,
//     and Touch accept any revision of the current lineage (the spec's
//     Reconnect re-holds by the revision a replica's leases are on, and
//     no claim expires while a replica holds leases on its lineage),
//     ErrClaimMoved outside it; a HoldLineage racing a Close is either
//     before it (the Close defers) or refused.
//   - Resolve of a stale quarantine (its worker re-registered or left) is
//     fenced (FencedError.Stale) and changes nothing, as the spec's
//     Resolve; a Resolve that succeeds is ordered before the
//     re-registration (its revision is smaller).
//   - Close removes the closing replica's own hold; a stale Close changes
//     nothing (not even that hold).
//   - Quarantine's gen must be the claim's generation (ErrClaimMoved
//     otherwise): the attempt was dispatched under that claim.
//   - Move starts a new lineage (Born == Rev) under the target's current
//     generation, with no holds: the old lineage's holders' Hold,
//     HoldLineage and Touch by its revisions are ErrClaimMoved and their
//     Close CloseStale, and the old revision's Delete is delivered. Its
//     refusals are *claims.MoveError values carrying the claim found
//     (ErrClaimMoved, or ErrNotBound for a Quarantined or Closing claim
//     at rev), never both sentinels; of concurrent moves from one
//     revision exactly one wins and every loser is told the winner's
//     claim. A move whose reply was lost is settled by Get.
//   - Register with the identity of the worker's current registration
//     is idempotent: the same generation, no write (the revision Members
//     reads at stays), no claim made stale, and the registration stays
//     with the session that made it (it vanishes with that session, not
//     the caller's). Concurrent registrations with one identity return
//     one generation. Any other Register is a new registration (a new
//     generation): another identity (a restart), or after the
//     registration ended. Deregister of a worker not registered is not
//     an error.
//   - ReplicaID never returns a number twice, to any handle, including a
//     restarted replica of the same name.
//   - Expiry is driven by writes and Touch only: a claim expires IdleTTL
//     after its last one, and Store.IdleTTL reports that TTL on every
//     handle.
//   - Calls with a cancelled context fail with an error matching
//     ctx.Err(); calls on a store that was shut down fail with
//     claims.ErrClosed.
package storetest

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/placementlab/placement/impl/claims"
)

// Controls are what a backend lets the suite do besides calling the Store.
type Controls struct {
	// IdleTTL is the idle time-to-live the store was created with
	// (required). With real time keep it short (a few seconds at most):
	// the expiry tests wait about twice it.
	IdleTTL time.Duration
	// Advance moves the store's clock forward by d and applies expiry
	// (the Delete events of the claims that expired are queued) before
	// it returns. Nil means the backend runs on real time: the suite
	// sleeps instead.
	Advance func(d time.Duration)
	// ExpirySlack is, on real time, how late after its deadline a claim
	// may still be seen (the backend's expiry granularity, e.g. etcd's
	// lease checks). Zero means IdleTTL/2.
	ExpirySlack time.Duration
	// Crash ends replica's store sessions abruptly, as a killed process:
	// its holds and registrations vanish without a Shutdown. Nil skips
	// the crash tests.
	Crash func(replica string)
	// LoseReply makes the next call of op (the ArgumentError's name of
	// a write: "move") by replica's handles that writes reach the store
	// and be applied as usual, and then lose its reply: the call returns
	// an error matching claims.ErrUnavailable. Nil skips the lost-reply
	// tests.
	LoseReply func(replica, op string)
}

// Harness is how Run makes stores of a backend.
type Harness struct {
	// New creates a fresh, empty store for one subtest (revision and
	// registrations of its own) and returns how to open a handle on it:
	// each open is a new store session of the named replica (a new
	// process of that replica when the name was used before). New and
	// open fail t themselves on error and register their cleanup with t;
	// the suite shuts down every handle it opens.
	New func(t *testing.T) (open func(replica string) claims.Store, ctl Controls)
	// Parallel runs the subtests in parallel (t.Parallel), for real-time
	// backends.
	Parallel bool
	// EventTimeout is how long to wait for an expected event; zero means
	// 5 s.
	EventTimeout time.Duration
	// Quiet is how long no event must come to conclude none does; zero
	// means 50 ms.
	Quiet time.Duration
	// Racers is how many goroutines race CreateOrGet on one key; zero
	// means 16 (at most 8 of them race each round of moves).
	Racers int
	// MoveRounds is how many rounds of concurrent moves from one
	// revision MoveRace runs; zero means 50.
	MoveRounds int
}

// Run runs the contract suite against h's backend.
func Run(t *testing.T, h Harness) {
	if h.New == nil {
		t.Fatal("storetest: Harness.New is nil")
	}
	if h.EventTimeout <= 0 {
		h.EventTimeout = 5 * time.Second
	}
	if h.Quiet <= 0 {
		h.Quiet = 50 * time.Millisecond
	}
	if h.Racers <= 0 {
		h.Racers = 16
	}
	if h.MoveRounds <= 0 {
		h.MoveRounds = 50
	}
	// Goroutine counts are global: the leak check runs alone, first.
	t.Run("NoGoroutineLeak", func(t *testing.T) { newEnv(t, h).noLeak() })
	for _, tc := range []struct {
		name string
		f    func(e *env)
	}{
		{"CreateOrGetBasics", (*env).createOrGetBasics},
		{"CreateOrGetRace", (*env).createOrGetRace},
		{"StaleClaimReplaced", (*env).staleClaimReplaced},
		{"CurrentQuarantineNotReplaced", (*env).currentQuarantineNotReplaced},
		{"FencedWrites", (*env).fencedWrites},
		{"DeferredClose", (*env).deferredClose},
		{"HoldsFollowLineage", (*env).holdsFollowLineage},
		{"LineageHold", (*env).lineageHold},
		{"LineageHoldRace", (*env).lineageHoldRace},
		{"StaleResolveFenced", (*env).staleResolveFenced},
		{"StaleResolveRace", (*env).staleResolveRace},
		{"QuarantineResolve", (*env).quarantineResolve},
		{"Move", (*env).move},
		{"MoveRefused", (*env).moveRefused},
		{"MoveRace", (*env).moveRace},
		{"MoveLostReply", (*env).moveLostReply},
		{"BinaryKeys", (*env).binaryKeys},
		{"Expiry", (*env).expiry},
		{"Events", (*env).eventOrder},
		{"EventsAcrossHandles", (*env).eventsAcrossHandles},
		{"EventsEndWithContext", (*env).eventsEndWithContext},
		{"Members", (*env).members},
		{"RegisterRace", (*env).registerRace},
		{"ReplicaID", (*env).replicaID},
		{"InvalidArguments", (*env).invalidArguments},
		{"CancelledContext", (*env).cancelledContext},
		{"Shutdown", (*env).shutdown},
		{"Crash", (*env).crash},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if h.Parallel {
				t.Parallel()
			}
			tc.f(newEnv(t, h))
		})
	}
}

// env is one subtest's store.
type env struct {
	t    *testing.T
	h    Harness
	open func(string) claims.Store
	ctl  Controls
	ctx  context.Context
}

func newEnv(t *testing.T, h Harness) *env {
	open, ctl := h.New(t)
	require.NotNil(t, open, "Harness.New returned no open")
	require.Positive(t, ctl.IdleTTL, "Controls.IdleTTL")
	if ctl.ExpirySlack <= 0 {
		ctl.ExpirySlack = ctl.IdleTTL / 2
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	t.Cleanup(cancel)
	return &env{t: t, h: h, open: open, ctl: ctl, ctx: ctx}
}

// store opens a handle for replica, shut down at the end of the subtest.
func (e *env) store(replica string) claims.Store {
	s := e.open(replica)
	require.NotNil(e.t, s, "open(%q)", replica)
	e.t.Cleanup(func() { _ = s.Shutdown() })
	return s
}

// pass makes d of store time pass.
func (e *env) pass(d time.Duration) {
	if e.ctl.Advance != nil {
		e.ctl.Advance(d)
		return
	}
	time.Sleep(d)
}

func (e *env) manual() bool { return e.ctl.Advance != nil }

func (e *env) register(s claims.Store, worker, identity string) claims.Member {
	e.t.Helper()
	m, err := s.Register(e.ctx, worker, identity)
	require.NoError(e.t, err, "Register(%q, %q)", worker, identity)
	require.Equal(e.t, worker, m.Worker)
	require.Equal(e.t, identity, m.Identity)
	require.Positive(e.t, m.Gen)
	return m
}

// proposer proposes t and counts its calls.
type proposer struct {
	mu     sync.Mutex
	calls  int
	target claims.Target
}

func propose(w string) *proposer { return &proposer{target: claims.Target{Worker: w}} }

func (p *proposer) f() (claims.Target, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.calls++
	return p.target, nil
}

func (p *proposer) n() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.calls
}

func (e *env) create(s claims.Store, key, worker string) claims.Claim {
	e.t.Helper()
	c, created, err := s.CreateOrGet(e.ctx, key, propose(worker).f)
	require.NoError(e.t, err, "CreateOrGet(%q)", key)
	require.True(e.t, created, "CreateOrGet(%q) created", key)
	return c
}

func (e *env) get(s claims.Store, key string) (claims.Claim, bool) {
	e.t.Helper()
	c, ok, err := s.Get(e.ctx, key)
	require.NoError(e.t, err, "Get(%q)", key)
	return c, ok
}

func (e *env) mustGet(s claims.Store, key string) claims.Claim {
	e.t.Helper()
	c, ok := e.get(s, key)
	require.True(e.t, ok, "Get(%q): no claim", key)
	return c
}

func (e *env) absent(s claims.Store, key string) {
	e.t.Helper()
	c, ok := e.get(s, key)
	require.False(e.t, ok, "Get(%q) = %+v, want no claim", key, c)
}

// stream reads one Events channel.
type stream struct {
	e  *env
	ch <-chan claims.Event
}

// events subscribes s and checks the first event is a Reset.
func (e *env) events(s claims.Store) *stream {
	e.t.Helper()
	ctx, cancel := context.WithCancel(e.ctx)
	e.t.Cleanup(cancel)
	ch, err := s.Events(ctx)
	require.NoError(e.t, err, "Events")
	st := &stream{e: e, ch: ch}
	first := st.next()
	require.Equal(e.t, claims.Reset, first.Kind, "the first event is a Reset: %+v", first)
	return st
}

// next returns the next event, failing after EventTimeout.
func (st *stream) next() claims.Event {
	st.e.t.Helper()
	select {
	case ev, ok := <-st.ch:
		require.True(st.e.t, ok, "event stream closed")
		return ev
	case <-time.After(st.e.h.EventTimeout):
		st.e.t.Fatalf("no event within %v", st.e.h.EventTimeout)
	}
	return claims.Event{}
}

// nextDelete returns the next Delete, skipping MembersChanged; a Reset
// fails (events would have been lost).
func (st *stream) nextDelete() claims.Event {
	st.e.t.Helper()
	for {
		ev := st.next()
		switch ev.Kind {
		case claims.MembersChanged:
			continue
		case claims.Delete:
			return ev
		}
		st.e.t.Fatalf("want a Delete, got %+v", ev)
	}
}

// deletes reads Deletes (skipping MembersChanged) and checks they are
// want, in order.
func (st *stream) deletes(want ...claims.Event) {
	st.e.t.Helper()
	for i, w := range want {
		got := st.nextDelete()
		require.Equal(st.e.t, w, got, "Delete %d of %d", i+1, len(want))
	}
}

// nextMembers returns the next MembersChanged, skipping Deletes.
func (st *stream) nextMembers() claims.Event {
	st.e.t.Helper()
	for {
		ev := st.next()
		switch ev.Kind {
		case claims.Delete:
			continue
		case claims.MembersChanged:
			return ev
		}
		st.e.t.Fatalf("want MembersChanged, got %+v", ev)
	}
}

// quiet checks no event but MembersChanged comes within Quiet.
func (st *stream) quiet() {
	st.e.t.Helper()
	deadline := time.After(st.e.h.Quiet)
	for {
		select {
		case ev, ok := <-st.ch:
			require.True(st.e.t, ok, "event stream closed")
			if ev.Kind == claims.MembersChanged {
				continue
			}
			st.e.t.Fatalf("unexpected event %+v", ev)
		case <-deadline:
			return
		}
	}
}

// closed waits for the channel to close (draining events).
func (st *stream) closed(why string) {
	st.e.t.Helper()
	deadline := time.After(st.e.h.EventTimeout)
	for {
		select {
		case _, ok := <-st.ch:
			if !ok {
				return
			}
		case <-deadline:
			st.e.t.Fatalf("event stream not closed within %v after %s", st.e.h.EventTimeout, why)
		}
	}
}

func del(key string, rev int64) claims.Event {
	return claims.Event{Kind: claims.Delete, Key: key, Rev: rev}
}

func (e *env) createOrGetBasics() {
	a, b := e.store("a"), e.store("b")
	w := e.register(a, "w1", "boot-1")
	e.absent(a, "s")

	p := &proposer{target: claims.Target{Worker: "w1", Rank: 3, HasRank: true}}
	c, created, err := a.CreateOrGet(e.ctx, "s", p.f)
	require.NoError(e.t, err)
	require.True(e.t, created)
	require.Equal(e.t, 1, p.n(), "propose called once for an absent claim")
	require.Equal(e.t, "s", c.Key)
	require.Positive(e.t, c.Rev)
	require.Equal(e.t, c.Rev, c.Born, "a new claim starts its lineage")
	require.Equal(e.t, claims.Target{Worker: "w1", Rank: 3, HasRank: true}, c.Target)
	require.Equal(e.t, w.Gen, c.Gen, "the claim carries the worker's current generation")
	require.Equal(e.t, claims.Bound, c.State)
	require.Zero(e.t, c.Attempt)
	require.Equal(e.t, c, e.mustGet(b, "s"), "another replica reads the same claim")

	p2 := propose("w1")
	c2, created, err := b.CreateOrGet(e.ctx, "s", p2.f)
	require.NoError(e.t, err)
	require.False(e.t, created)
	require.Equal(e.t, c, c2)
	require.Zero(e.t, p2.n(), "propose is not called when a current claim exists")

	// propose's error is returned as is; nothing is written.
	boom := errors.New("storetest: no target")
	_, _, err = a.CreateOrGet(e.ctx, "t", func() (claims.Target, error) { return claims.Target{}, boom })
	require.ErrorIs(e.t, err, boom)
	e.absent(a, "t")

	// A proposal of an unregistered worker.
	_, _, err = a.CreateOrGet(e.ctx, "t", propose("nobody").f)
	require.ErrorIs(e.t, err, claims.ErrUnknownWorker)
	e.absent(b, "t")

	// Revisions grow with every write.
	c3 := e.create(b, "t", "w1")
	require.Greater(e.t, c3.Rev, c.Rev)
	_, rev, err := a.Members(e.ctx)
	require.NoError(e.t, err)
	require.GreaterOrEqual(e.t, rev, c3.Rev, "Members' revision is read after the last write")
}

func (e *env) createOrGetRace() {
	setup := e.store("setup")
	e.register(setup, "w0", "1")
	e.register(setup, "w1", "1")
	const keys = 4
	replicas := make([]claims.Store, 4)
	for i := range replicas {
		replicas[i] = e.store(fmt.Sprintf("r%d", i))
	}
	type result struct {
		c       claims.Claim
		created bool
	}
	results := make([][]result, keys)
	var mu sync.Mutex
	var calls [keys]int
	start := make(chan struct{})
	var wg sync.WaitGroup
	for k := range keys {
		key := fmt.Sprintf("race-%d", k)
		for i := range e.h.Racers {
			wg.Add(1)
			go func() {
				defer wg.Done()
				<-start
				s := replicas[i%len(replicas)]
				c, created, err := s.CreateOrGet(e.ctx, key, func() (claims.Target, error) {
					mu.Lock()
					calls[k]++
					mu.Unlock()
					return claims.Target{Worker: fmt.Sprintf("w%d", i%2), Rank: i, HasRank: true}, nil
				})
				if !assert.NoError(e.t, err, "racer %d on %s", i, key) {
					return
				}
				mu.Lock()
				results[k] = append(results[k], result{c, created})
				mu.Unlock()
			}()
		}
	}
	close(start)
	wg.Wait()
	if e.t.Failed() {
		return
	}
	for k := range keys {
		key := fmt.Sprintf("race-%d", k)
		require.Len(e.t, results[k], e.h.Racers)
		winners := 0
		var won claims.Claim
		for _, r := range results[k] {
			if r.created {
				winners++
				won = r.c
			}
		}
		require.Equal(e.t, 1, winners, "%s: exactly one racer creates the claim", key)
		for i, r := range results[k] {
			require.Equal(e.t, won, r.c, "%s: racer %d returned another claim than the winner's", key, i)
		}
		require.GreaterOrEqual(e.t, calls[k], 1)
		require.LessOrEqual(e.t, calls[k], e.h.Racers)
		for _, s := range replicas {
			require.Equal(e.t, won, e.mustGet(s, key), "%s: every replica reads the winner", key)
		}
		// Now that it exists, nobody proposes.
		p := propose("w0")
		c, created, err := replicas[k%len(replicas)].CreateOrGet(e.ctx, key, p.f)
		require.NoError(e.t, err)
		require.False(e.t, created)
		require.Equal(e.t, won, c)
		require.Zero(e.t, p.n())
	}
}

func (e *env) staleClaimReplaced() {
	a, b := e.store("a"), e.store("b")
	st := e.events(b)
	w1 := e.register(a, "w", "boot-1")
	c1 := e.create(a, "s", "w")
	require.Equal(e.t, w1.Gen, c1.Gen)

	// The worker restarts: a new registration, a new generation.
	w2 := e.register(a, "w", "boot-2")
	require.Greater(e.t, w2.Gen, w1.Gen)
	require.Equal(e.t, c1, e.mustGet(b, "s"), "Get returns the stale claim as is")

	p := propose("w")
	c2, created, err := b.CreateOrGet(e.ctx, "s", p.f)
	require.NoError(e.t, err)
	require.True(e.t, created, "a stale claim is replaced")
	require.Equal(e.t, 1, p.n())
	require.Greater(e.t, c2.Rev, c1.Rev)
	require.Equal(e.t, w2.Gen, c2.Gen)
	st.deletes(del("s", c1.Rev))

	// The worker leaves: its claims are stale too, even quarantined ones.
	q, err := a.Quarantine(e.ctx, "s", c2.Rev, 42, c2.Gen)
	require.NoError(e.t, err)
	st.deletes(del("s", c2.Rev))
	require.NoError(e.t, a.Deregister(e.ctx, "w"))
	e.register(a, "x", "boot-1")
	c3, created, err := b.CreateOrGet(e.ctx, "s", propose("x").f)
	require.NoError(e.t, err)
	require.True(e.t, created, "a quarantined claim of a departed worker is replaced")
	require.Equal(e.t, "x", c3.Target.Worker)
	require.Equal(e.t, claims.Bound, c3.State)
	st.deletes(del("s", q.Rev))
}

func (e *env) currentQuarantineNotReplaced() {
	a := e.store("a")
	e.register(a, "w", "1")
	c := e.create(a, "s", "w")
	q, err := a.Quarantine(e.ctx, "s", c.Rev, 9, c.Gen)
	require.NoError(e.t, err)
	p := propose("w")
	got, created, err := a.CreateOrGet(e.ctx, "s", p.f)
	require.NoError(e.t, err)
	require.False(e.t, created)
	require.Equal(e.t, q, got, "a quarantined claim of a current worker stands")
	require.Zero(e.t, p.n())

	e.register(a, "v", "1")
	c2 := e.create(a, "t", "v")
	require.NoError(e.t, a.Hold(e.ctx, "t", c2.Rev, "a"))
	b := e.store("b")
	require.NoError(e.t, b.Hold(e.ctx, "t", c2.Rev, "b"))
	res, err := a.Close(e.ctx, "t", c2.Rev, "a")
	require.NoError(e.t, err)
	require.Equal(e.t, claims.CloseDeferred, res)
	closing := e.mustGet(a, "t")
	require.Equal(e.t, claims.Closing, closing.State)
	got, created, err = a.CreateOrGet(e.ctx, "t", p.f)
	require.NoError(e.t, err)
	require.False(e.t, created)
	require.Equal(e.t, closing, got, "a Closing claim of a current worker stands")
	require.Zero(e.t, p.n())
}

func (e *env) fencedWrites() {
	a := e.store("a")
	e.register(a, "w", "1")
	c1 := e.create(a, "s", "w")
	c2, err := a.Quarantine(e.ctx, "s", c1.Rev, 5, c1.Gen)
	require.NoError(e.t, err)
	require.Greater(e.t, c2.Rev, c1.Rev)
	require.Equal(e.t, claims.Quarantined, c2.State)

	// Every write fenced by the old revision is refused or does nothing.
	res, err := a.Close(e.ctx, "s", c1.Rev, "a")
	require.NoError(e.t, err)
	require.Equal(e.t, claims.CloseStale, res)
	require.Equal(e.t, c2, e.mustGet(a, "s"), "a stale Close changes nothing")
	require.ErrorIs(e.t, a.Hold(e.ctx, "s", c1.Rev, "a"), claims.ErrClaimMoved)
	require.NoError(e.t, a.Touch(e.ctx, "s", c1.Rev), "Touch by an earlier revision of the lineage")
	_, err = a.Quarantine(e.ctx, "s", c1.Rev, 6, c1.Gen)
	require.ErrorIs(e.t, err, claims.ErrClaimMoved)
	// A quarantine under another generation than the claim's.
	_, err = a.Quarantine(e.ctx, "s", c2.Rev, 6, c2.Gen+1000)
	require.ErrorIs(e.t, err, claims.ErrClaimMoved)
	require.Equal(e.t, c2, e.mustGet(a, "s"))
	// A revision from the future.
	require.ErrorIs(e.t, a.Hold(e.ctx, "s", c2.Rev+1000, "a"), claims.ErrClaimMoved)
	require.ErrorIs(e.t, a.Touch(e.ctx, "s", c2.Rev+1000), claims.ErrClaimMoved)
	res, err = a.Close(e.ctx, "s", c2.Rev+1000, "a")
	require.NoError(e.t, err)
	require.Equal(e.t, claims.CloseStale, res)

	res, err = a.Close(e.ctx, "s", c2.Rev, "a")
	require.NoError(e.t, err)
	require.Equal(e.t, claims.CloseDeleted, res)
	e.absent(a, "s")
	res, err = a.Close(e.ctx, "s", c2.Rev, "a")
	require.NoError(e.t, err)
	require.Equal(e.t, claims.CloseStale, res, "closing a deleted claim")
	require.ErrorIs(e.t, a.Hold(e.ctx, "s", c2.Rev, "a"), claims.ErrClaimMoved)
	require.ErrorIs(e.t, a.Touch(e.ctx, "s", c2.Rev), claims.ErrClaimMoved)
	_, err = a.Quarantine(e.ctx, "s", c2.Rev, 6, c2.Gen)
	require.ErrorIs(e.t, err, claims.ErrClaimMoved)

	// A stale close never deletes a newer claim of the key, and the
	// old lineage's revisions hold and touch nothing of it.
	c3 := e.create(a, "s", "w")
	res, err = a.Close(e.ctx, "s", c1.Rev, "a")
	require.NoError(e.t, err)
	require.Equal(e.t, claims.CloseStale, res)
	require.Equal(e.t, c3, e.mustGet(a, "s"))
	for _, rev := range []int64{c1.Rev, c2.Rev} {
		require.ErrorIs(e.t, a.Hold(e.ctx, "s", rev, "a"), claims.ErrClaimMoved, "Hold of rev %d of an ended lineage", rev)
		require.ErrorIs(e.t, a.Touch(e.ctx, "s", rev), claims.ErrClaimMoved, "Touch of rev %d of an ended lineage", rev)
		_, err = claims.HoldLineage(e.ctx, a, "s", rev, "a")
		require.ErrorIs(e.t, err, claims.ErrClaimMoved, "HoldLineage of rev %d of an ended lineage", rev)
	}
}

func (e *env) deferredClose() {
	a, b, c := e.store("a"), e.store("b"), e.store("c")
	st := e.events(c)
	e.register(a, "w", "1")
	cl := e.create(a, "s", "w")
	require.NoError(e.t, a.Hold(e.ctx, "s", cl.Rev, "a"))
	require.NoError(e.t, b.Hold(e.ctx, "s", cl.Rev, "b"))
	require.NoError(e.t, c.Hold(e.ctx, "s", cl.Rev, "c"))
	require.NoError(e.t, c.Hold(e.ctx, "s", cl.Rev, "c"), "Hold twice")

	res, err := a.Close(e.ctx, "s", cl.Rev, "a")
	require.NoError(e.t, err)
	require.Equal(e.t, claims.CloseDeferred, res)
	closing := e.mustGet(b, "s")
	require.Equal(e.t, claims.Closing, closing.State)
	require.Greater(e.t, closing.Rev, cl.Rev, "Closing is a new revision")
	require.Equal(e.t, cl.Target, closing.Target)
	require.Equal(e.t, cl.Gen, closing.Gen)
	st.deletes(del("s", cl.Rev))

	require.NoError(e.t, b.Unhold(e.ctx, "s", "b"))
	require.Equal(e.t, closing, e.mustGet(a, "s"), "c still holds it")
	require.NoError(e.t, b.Unhold(e.ctx, "s", "b"), "Unhold of a key not held")
	require.NoError(e.t, a.Unhold(e.ctx, "nothing", "a"), "Unhold of a key with no claim")
	st.quiet()
	require.NoError(e.t, c.Unhold(e.ctx, "s", "c"))
	e.absent(a, "s")
	st.deletes(del("s", closing.Rev))

	// A Close by a replica that holds nothing, with another holder: deferred.
	cl = e.create(a, "s", "w")
	require.NoError(e.t, b.Hold(e.ctx, "s", cl.Rev, "b"))
	res, err = a.Close(e.ctx, "s", cl.Rev, "a")
	require.NoError(e.t, err)
	require.Equal(e.t, claims.CloseDeferred, res)
	closing = e.mustGet(a, "s")
	// Closing again (the current revision) while b holds: still deferred,
	// then b's own Close (its hold removed) deletes it.
	res, err = a.Close(e.ctx, "s", closing.Rev, "a")
	require.NoError(e.t, err)
	require.Equal(e.t, claims.CloseDeferred, res)
	closing = e.mustGet(a, "s")
	res, err = b.Close(e.ctx, "s", closing.Rev, "b")
	require.NoError(e.t, err)
	require.Equal(e.t, claims.CloseDeleted, res, "the closer's own hold does not defer its close")
	e.absent(c, "s")

	// The only holder closing deletes at once.
	cl = e.create(a, "s", "w")
	require.NoError(e.t, a.Hold(e.ctx, "s", cl.Rev, "a"))
	res, err = a.Close(e.ctx, "s", cl.Rev, "a")
	require.NoError(e.t, err)
	require.Equal(e.t, claims.CloseDeleted, res)
	e.absent(b, "s")
}

func (e *env) holdsFollowLineage() {
	a, b := e.store("a"), e.store("b")
	e.register(a, "w", "1")

	// Holds survive a quarantine and its resolve.
	c1 := e.create(a, "s", "w")
	require.NoError(e.t, a.Hold(e.ctx, "s", c1.Rev, "a"))
	q, err := b.Quarantine(e.ctx, "s", c1.Rev, 77, c1.Gen)
	require.NoError(e.t, err)
	c2, ok, err := b.Resolve(e.ctx, "s", 77, q.Gen, true)
	require.NoError(e.t, err)
	require.True(e.t, ok)
	res, err := b.Close(e.ctx, "s", c2.Rev, "b")
	require.NoError(e.t, err)
	require.Equal(e.t, claims.CloseDeferred, res, "a's hold survived Quarantine and Resolve")
	require.NoError(e.t, a.Unhold(e.ctx, "s", "a"))
	e.absent(b, "s")

	// Holds end with a deleted claim: a new claim of the key has none.
	c1 = e.create(a, "s", "w")
	require.NoError(e.t, a.Hold(e.ctx, "s", c1.Rev, "a"))
	q, err = b.Quarantine(e.ctx, "s", c1.Rev, 78, c1.Gen)
	require.NoError(e.t, err)
	_, ok, err = b.Resolve(e.ctx, "s", 78, q.Gen, false)
	require.NoError(e.t, err)
	require.False(e.t, ok)
	c3 := e.create(b, "s", "w")
	res, err = b.Close(e.ctx, "s", c3.Rev, "b")
	require.NoError(e.t, err)
	require.Equal(e.t, claims.CloseDeleted, res, "a's hold on the deleted claim does not hold the new one")

	// Holds end with a stale claim that CreateOrGet replaced.
	c1 = e.create(a, "s", "w")
	require.NoError(e.t, a.Hold(e.ctx, "s", c1.Rev, "a"))
	e.register(b, "w", "2")
	c4, created, err := b.CreateOrGet(e.ctx, "s", propose("w").f)
	require.NoError(e.t, err)
	require.True(e.t, created)
	res, err = b.Close(e.ctx, "s", c4.Rev, "b")
	require.NoError(e.t, err)
	require.Equal(e.t, claims.CloseDeleted, res, "a's hold on the replaced claim does not hold the new one")

	// Holds end with an expired claim.
	c1 = e.create(a, "s", "w")
	require.NoError(e.t, a.Hold(e.ctx, "s", c1.Rev, "a"))
	e.waitExpired(b, "s", c1.Rev)
	c5 := e.create(b, "s", "w")
	res, err = b.Close(e.ctx, "s", c5.Rev, "b")
	require.NoError(e.t, err)
	require.Equal(e.t, claims.CloseDeleted, res, "a's hold on the expired claim does not hold the new one")
}

// lineageHold: claims.HoldLineage and Touch accept every revision of the
// current claim's lineage, Hold only the current one (finding D2 of linearizability/claimsconf): a replica that
// lost the store while the claim was rewritten holds it again by the
// revision its requests are on, and a Close elsewhere then defers.
func (e *env) lineageHold() {
	a, b, c := e.store("a"), e.store("b"), e.store("c")
	e.register(a, "w", "1")
	c1 := e.create(a, "s", "w")
	require.Equal(e.t, c1.Rev, c1.Born)
	// b holds; a (unreachable meanwhile, serving c1 from its cache) does
	// not. b's request is ambiguous: the claim is quarantined.
	require.NoError(e.t, b.Hold(e.ctx, "s", c1.Rev, "b"))
	q, err := b.Quarantine(e.ctx, "s", c1.Rev, 11, c1.Gen)
	require.NoError(e.t, err)
	require.Equal(e.t, c1.Born, q.Born)
	require.Equal(e.t, q, e.mustGet(c, "s"))
	// A turn routed from c1 learns the claim moved.
	require.ErrorIs(e.t, a.Hold(e.ctx, "s", c1.Rev, "a"), claims.ErrClaimMoved, "Hold is fenced by the current revision")
	// a reconnects with a request in flight under c1: it holds the
	// lineage again and keeps it alive.
	held, err := claims.HoldLineage(e.ctx, a, "s", c1.Rev, "a")
	require.NoError(e.t, err, "HoldLineage of an earlier revision of the lineage")
	require.Equal(e.t, q.Rev, held, "held by the lineage's current revision")
	require.NoError(e.t, a.Touch(e.ctx, "s", c1.Rev), "Touch by an earlier revision of the lineage")
	held, err = claims.HoldLineage(e.ctx, a, "s", q.Rev, "a")
	require.NoError(e.t, err, "HoldLineage of the current revision")
	require.Equal(e.t, q.Rev, held)
	require.Equal(e.t, q, e.mustGet(c, "s"), "holds and touches write no revision")
	// The quarantine is settled; b's lease ends.
	r, ok, err := c.Resolve(e.ctx, "s", 11, q.Gen, true)
	require.NoError(e.t, err)
	require.True(e.t, ok)
	require.Equal(e.t, c1.Born, r.Born)
	require.NoError(e.t, b.Unhold(e.ctx, "s", "b"))
	// c's session ends: a's hold (made by c1's revision) defers the close.
	require.NoError(e.t, c.Hold(e.ctx, "s", r.Rev, "c"))
	res, err := c.Close(e.ctx, "s", r.Rev, "c")
	require.NoError(e.t, err)
	require.Equal(e.t, claims.CloseDeferred, res, "a holds the lineage by an earlier revision")
	closing := e.mustGet(c, "s")
	require.Equal(e.t, claims.Closing, closing.State)
	require.Equal(e.t, c1.Born, closing.Born, "a deferred close is a rewrite of the lineage")
	// Every revision of the lineage still holds; none outside it does.
	for _, rev := range []int64{c1.Rev, q.Rev, r.Rev, closing.Rev} {
		_, err := claims.HoldLineage(e.ctx, b, "s", rev, "b")
		require.NoError(e.t, err, "HoldLineage of rev %d in [%d, %d]", rev, closing.Born, closing.Rev)
		require.NoError(e.t, b.Touch(e.ctx, "s", rev), "Touch by rev %d in [%d, %d]", rev, closing.Born, closing.Rev)
	}
	for _, rev := range []int64{closing.Rev + 1000, c1.Born - 1} {
		_, err = claims.HoldLineage(e.ctx, b, "s", rev, "b")
		require.ErrorIs(e.t, err, claims.ErrClaimMoved, "HoldLineage of rev %d outside [%d, %d]", rev, closing.Born, closing.Rev)
		require.ErrorIs(e.t, b.Touch(e.ctx, "s", rev), claims.ErrClaimMoved, "Touch by rev %d outside [%d, %d]", rev, closing.Born, closing.Rev)
	}
	require.NoError(e.t, b.Unhold(e.ctx, "s", "b"))
	require.Equal(e.t, closing, e.mustGet(c, "s"), "a still holds it")
	require.NoError(e.t, a.Unhold(e.ctx, "s", "a"))
	e.absent(c, "s")

	// A new claim of the key is a new lineage: the old one's revisions
	// are refused.
	n := e.create(c, "s", "w")
	require.Equal(e.t, n.Rev, n.Born)
	require.Greater(e.t, n.Born, closing.Rev)
	for _, rev := range []int64{c1.Rev, q.Rev, closing.Rev} {
		_, err = claims.HoldLineage(e.ctx, a, "s", rev, "a")
		require.ErrorIs(e.t, err, claims.ErrClaimMoved, "rev %d of a deleted lineage", rev)
		require.ErrorIs(e.t, a.Touch(e.ctx, "s", rev), claims.ErrClaimMoved, "rev %d of a deleted lineage", rev)
	}

	// So is a claim replacing a stale one, even with no delete between
	// (its key is written over).
	q2, err := c.Quarantine(e.ctx, "s", n.Rev, 12, n.Gen)
	require.NoError(e.t, err)
	e.register(a, "w", "2")
	n2, created, err := c.CreateOrGet(e.ctx, "s", propose("w").f)
	require.NoError(e.t, err)
	require.True(e.t, created)
	require.Equal(e.t, n2.Rev, n2.Born, "a claim replacing a stale one starts a new lineage")
	require.Equal(e.t, n2, e.mustGet(a, "s"))
	for _, rev := range []int64{n.Rev, q2.Rev} {
		_, err = claims.HoldLineage(e.ctx, a, "s", rev, "a")
		require.ErrorIs(e.t, err, claims.ErrClaimMoved, "rev %d of a replaced lineage", rev)
		require.ErrorIs(e.t, a.Touch(e.ctx, "s", rev), claims.ErrClaimMoved, "rev %d of a replaced lineage", rev)
	}
	res, err = c.Close(e.ctx, "s", n2.Rev, "c")
	require.NoError(e.t, err)
	require.Equal(e.t, claims.CloseDeleted, res, "a holds nothing of the new lineage")
}

// lineageHoldRace: a HoldLineage by an earlier revision of the lineage
// races a Close of the current one by a replica holding nothing: either
// the hold is first (it succeeds and the Close defers) or the Close is
// (it deletes, and the hold is refused, also after a new claim of the
// key).
func (e *env) lineageHoldRace() {
	a, b := e.store("a"), e.store("b")
	e.register(a, "w", "1")
	const rounds = 12
	held := 0
	for i := range rounds {
		key := fmt.Sprintf("race-%d", i)
		c1 := e.create(a, key, "w")
		q, err := a.Quarantine(e.ctx, key, c1.Rev, uint64(i+1), c1.Gen)
		require.NoError(e.t, err)
		var herr error
		var res claims.CloseResult
		var cerr error
		var wg sync.WaitGroup
		wg.Add(2)
		go func() {
			defer wg.Done()
			_, herr = claims.HoldLineage(e.ctx, a, key, c1.Rev, "a")
		}()
		go func() {
			defer wg.Done()
			res, cerr = b.Close(e.ctx, key, q.Rev, "b")
			if cerr == nil && res == claims.CloseDeleted {
				// A new lineage at once: a late Hold must not land on it.
				_, _, cerr = b.CreateOrGet(e.ctx, key, propose("w").f)
			}
		}()
		wg.Wait()
		require.NoError(e.t, cerr, "%s: Close", key)
		if herr == nil {
			held++
			require.Equal(e.t, claims.CloseDeferred, res, "%s: the Hold succeeded, so the Close came after it and defers", key)
			require.NoError(e.t, a.Unhold(e.ctx, key, "a"))
			e.absent(b, key)
			continue
		}
		require.ErrorIs(e.t, herr, claims.ErrClaimMoved, "%s", key)
		require.Equal(e.t, claims.CloseDeleted, res, "%s: the Hold was refused, so the Close came first", key)
		n := e.mustGet(b, key)
		res, err = b.Close(e.ctx, key, n.Rev, "b")
		require.NoError(e.t, err)
		require.Equal(e.t, claims.CloseDeleted, res, "%s: the refused Hold holds nothing of the new lineage", key)
	}
	e.t.Logf("lineage hold race: the Hold came first in %d of %d rounds", held, rounds)
}

// staleResolveFenced: Resolve of a quarantine whose worker re-registered
// or left is fenced and changes nothing (finding D1 of
// linearizability/claimsconf; the spec's Resolve requires the worker's
// generation to be the claim's).
func (e *env) staleResolveFenced() {
	a, b := e.store("a"), e.store("b")
	st := e.events(b)
	e.register(a, "w", "1")
	c := e.create(a, "s", "w")
	q, err := a.Quarantine(e.ctx, "s", c.Rev, 21, c.Gen)
	require.NoError(e.t, err)
	st.deletes(del("s", c.Rev))
	w2 := e.register(a, "w", "2") // the worker restarts
	require.Equal(e.t, claims.MembersChanged, st.nextMembers().Kind)
	for _, accepted := range []bool{true, false} {
		_, ok, err := b.Resolve(e.ctx, "s", 21, q.Gen, accepted)
		var fe *claims.FencedError
		require.ErrorAs(e.t, err, &fe, "Resolve(accepted=%v) of a stale quarantine", accepted)
		require.ErrorIs(e.t, err, claims.ErrFenced)
		require.False(e.t, ok)
		require.True(e.t, fe.Found)
		require.True(e.t, fe.Stale, "fenced as stale: %v", err)
		require.Equal(e.t, q, fe.Current)
		require.Equal(e.t, q, e.mustGet(a, "s"), "a fenced Resolve changes nothing")
	}
	// Not by the new generation either: it is not the claim's.
	_, _, err = b.Resolve(e.ctx, "s", 21, w2.Gen, true)
	require.ErrorIs(e.t, err, claims.ErrFenced)
	st.quiet()
	// CreateOrGet replaces it.
	n, created, err := b.CreateOrGet(e.ctx, "s", propose("w").f)
	require.NoError(e.t, err)
	require.True(e.t, created)
	require.Equal(e.t, w2.Gen, n.Gen)
	st.deletes(del("s", q.Rev))

	// A worker that left: its quarantines are stale too.
	e.register(a, "v", "1")
	c2 := e.create(a, "t", "v")
	q2, err := a.Quarantine(e.ctx, "t", c2.Rev, 22, c2.Gen)
	require.NoError(e.t, err)
	require.NoError(e.t, a.Deregister(e.ctx, "v"))
	_, _, err = b.Resolve(e.ctx, "t", 22, q2.Gen, false)
	var fe *claims.FencedError
	require.ErrorAs(e.t, err, &fe)
	require.True(e.t, fe.Stale, "fenced as stale: %v", err)
	require.Equal(e.t, q2, e.mustGet(a, "t"))
}

// staleResolveRace: Resolve races the worker's re-registration. Either
// the Resolve is first (it succeeds at a revision below the new
// generation) or it is fenced as stale and the claim is unchanged.
func (e *env) staleResolveRace() {
	a, b := e.store("a"), e.store("b")
	const rounds = 12
	first := 0
	for i := range rounds {
		worker := fmt.Sprintf("w%d", i)
		key := fmt.Sprintf("race-%d", i)
		e.register(a, worker, "1")
		c := e.create(a, key, worker)
		q, err := a.Quarantine(e.ctx, key, c.Rev, uint64(i+1), c.Gen)
		require.NoError(e.t, err)
		var r claims.Claim
		var ok bool
		var rerr error
		var m claims.Member
		var merr error
		var wg sync.WaitGroup
		wg.Add(2)
		go func() {
			defer wg.Done()
			r, ok, rerr = b.Resolve(e.ctx, key, uint64(i+1), q.Gen, i%2 == 0)
		}()
		go func() {
			defer wg.Done()
			m, merr = a.Register(e.ctx, worker, "2")
		}()
		wg.Wait()
		require.NoError(e.t, merr)
		if rerr == nil {
			first++
			if ok {
				require.Less(e.t, r.Rev, m.Gen, "%s: Resolve settled the quarantine after its worker re-registered", key)
				require.Equal(e.t, r, e.mustGet(a, key))
			} else {
				e.absent(a, key)
			}
			continue
		}
		var fe *claims.FencedError
		require.ErrorAs(e.t, rerr, &fe, "%s", key)
		require.True(e.t, fe.Stale, "%s: %v", key, rerr)
		require.Equal(e.t, q, e.mustGet(a, key), "%s: a fenced Resolve changes nothing", key)
	}
	e.t.Logf("stale resolve race: the Resolve came first in %d of %d rounds", first, rounds)
}

// waitExpired lets key's claim rev expire untouched and checks it is gone.
func (e *env) waitExpired(s claims.Store, key string, rev int64) {
	e.t.Helper()
	if e.manual() {
		e.pass(e.ctl.IdleTTL)
		e.absent(s, key)
		return
	}
	deadline := time.Now().Add(e.ctl.IdleTTL + e.ctl.ExpirySlack + e.h.EventTimeout)
	for {
		c, ok := e.get(s, key)
		if !ok || c.Rev != rev {
			require.False(e.t, ok, "the claim expired, not replaced: %+v", c)
			return
		}
		require.True(e.t, time.Now().Before(deadline), "claim %q rev %d did not expire", key, rev)
		time.Sleep(e.ctl.IdleTTL / 20)
	}
}

func (e *env) quarantineResolve() {
	a, b := e.store("a"), e.store("b")
	st := e.events(b)
	e.register(a, "w", "1")
	c := e.create(a, "s", "w")
	const attempt = uint64(7) << claims.AttemptShift
	q, err := a.Quarantine(e.ctx, "s", c.Rev, attempt+1, c.Gen)
	require.NoError(e.t, err)
	require.Equal(e.t, claims.Quarantined, q.State)
	require.Equal(e.t, attempt+1, q.Attempt)
	require.Equal(e.t, c.Target, q.Target)
	require.Equal(e.t, c.Gen, q.Gen)
	require.Greater(e.t, q.Rev, c.Rev)
	require.Equal(e.t, c.Born, q.Born, "a quarantine is a rewrite of the lineage")
	require.Equal(e.t, q, e.mustGet(b, "s"))
	st.deletes(del("s", c.Rev))

	// Fenced by the attempt and the generation.
	var fe *claims.FencedError
	_, _, err = b.Resolve(e.ctx, "s", attempt+2, q.Gen, true)
	require.ErrorAs(e.t, err, &fe)
	require.ErrorIs(e.t, err, claims.ErrFenced)
	require.True(e.t, fe.Found)
	require.Equal(e.t, q, fe.Current)
	require.Equal(e.t, "s", fe.Key)
	require.Equal(e.t, attempt+2, fe.Attempt)
	_, _, err = b.Resolve(e.ctx, "s", attempt+1, q.Gen+1000, false)
	require.ErrorAs(e.t, err, &fe)
	require.Equal(e.t, q, e.mustGet(b, "s"), "a fenced Resolve changes nothing")
	st.quiet()

	r, ok, err := b.Resolve(e.ctx, "s", attempt+1, q.Gen, true)
	require.NoError(e.t, err)
	require.True(e.t, ok)
	require.Equal(e.t, claims.Bound, r.State)
	require.Zero(e.t, r.Attempt)
	require.Equal(e.t, c.Target, r.Target)
	require.Equal(e.t, c.Gen, r.Gen)
	require.Greater(e.t, r.Rev, q.Rev, "Resolve accepted writes a new revision")
	require.Equal(e.t, c.Born, r.Born, "of the same lineage")
	require.Equal(e.t, r, e.mustGet(a, "s"))
	st.deletes(del("s", q.Rev))

	// Resolving again (the claim is Bound now) is fenced.
	_, _, err = b.Resolve(e.ctx, "s", attempt+1, q.Gen, true)
	require.ErrorAs(e.t, err, &fe)
	require.True(e.t, fe.Found)
	require.Equal(e.t, r, fe.Current)

	// Not accepted deletes.
	q2, err := a.Quarantine(e.ctx, "s", r.Rev, attempt+3, r.Gen)
	require.NoError(e.t, err)
	_, ok, err = a.Resolve(e.ctx, "s", attempt+3, q2.Gen, false)
	require.NoError(e.t, err)
	require.False(e.t, ok)
	e.absent(b, "s")
	st.deletes(del("s", r.Rev), del("s", q2.Rev))
	_, _, err = a.Resolve(e.ctx, "s", attempt+3, q2.Gen, false)
	require.ErrorAs(e.t, err, &fe)
	require.False(e.t, fe.Found, "no claim")
	require.ErrorIs(e.t, err, claims.ErrFenced)
}

func (e *env) expiry() {
	a, b := e.store("a"), e.store("b")
	st := e.events(b)
	e.register(a, "w", "1")
	ttl := e.ctl.IdleTTL
	// Every handle reports the TTL the store was created with (a replica
	// reads it: impl/replica's keepalive follows it).
	require.Equal(e.t, ttl, a.IdleTTL(), "Store.IdleTTL")
	require.Equal(e.t, ttl, b.IdleTTL(), "Store.IdleTTL")
	c := e.create(a, "s", "w")

	// Touches keep it alive past its TTL. On real time the steps are
	// TTL/4, leaving a loaded machine's scheduling most of a TTL.
	step, steps := ttl/2, 3
	if !e.manual() {
		step, steps = ttl/4, 6
	}
	for range steps {
		e.pass(step)
		require.NoError(e.t, b.Touch(e.ctx, "s", c.Rev), "touched every %v", step)
	}
	require.Equal(e.t, c, e.mustGet(a, "s"), "alive 1.5 TTL after its write, touched every %v", step)
	// A write restarts the expiry too: a move (on the manual clock, it
	// is then a TTL since the last touch), then a quarantine.
	e.pass(step)
	mv, err := a.Move(e.ctx, "s", c.Rev, c.Target)
	require.NoError(e.t, err)
	st.deletes(del("s", c.Rev))
	e.pass(step)
	if !e.manual() {
		e.pass(step)
	}
	require.Equal(e.t, mv, e.mustGet(a, "s"), "alive after the move, its last write")
	q, err := a.Quarantine(e.ctx, "s", mv.Rev, 3, mv.Gen)
	require.NoError(e.t, err)
	st.deletes(del("s", mv.Rev))
	e.pass(step)
	require.Equal(e.t, q, e.mustGet(a, "s"), "alive %v after its last write", step)

	if e.manual() {
		e.pass(ttl/2 - ttl/10)
		require.Equal(e.t, q, e.mustGet(a, "s"), "alive 0.9 TTL after its last write")
		e.pass(ttl / 10)
		st.deletes(del("s", q.Rev))
		e.absent(a, "s")
	} else {
		st.deletes(del("s", q.Rev))
		e.absent(a, "s")
	}
	require.ErrorIs(e.t, a.Touch(e.ctx, "s", q.Rev), claims.ErrClaimMoved, "Touch of an expired claim")

	// An expired claim makes room for a new one.
	p := propose("w")
	c2, created, err := b.CreateOrGet(e.ctx, "s", p.f)
	require.NoError(e.t, err)
	require.True(e.t, created)
	require.Equal(e.t, 1, p.n())
	require.Greater(e.t, c2.Rev, q.Rev)
}

func (e *env) eventOrder() {
	a := e.store("a")
	st := e.events(a)
	w := e.register(a, "w", "1")
	ev := st.nextMembers()
	require.Equal(e.t, claims.MembersChanged, ev.Kind)

	// One key's revisions end in order: replaced, quarantined, resolved,
	// closed.
	c1 := e.create(a, "s", "w")
	e.register(a, "w", "2")
	ev = st.nextMembers()
	require.Equal(e.t, claims.MembersChanged, ev.Kind, "re-registration")
	c2, _, err := a.CreateOrGet(e.ctx, "s", propose("w").f)
	require.NoError(e.t, err)
	q, err := a.Quarantine(e.ctx, "s", c2.Rev, 1, c2.Gen)
	require.NoError(e.t, err)
	r, _, err := a.Resolve(e.ctx, "s", 1, q.Gen, true)
	require.NoError(e.t, err)
	_, err = a.Close(e.ctx, "s", r.Rev, "a")
	require.NoError(e.t, err)
	st.deletes(del("s", c1.Rev), del("s", c2.Rev), del("s", q.Rev), del("s", r.Rev))
	st.quiet()

	// Writes that change no claim say nothing.
	c3 := e.create(a, "t", "w")
	require.NoError(e.t, a.Touch(e.ctx, "t", c3.Rev))
	require.NoError(e.t, a.Hold(e.ctx, "t", c3.Rev, "a"))
	require.NoError(e.t, a.Unhold(e.ctx, "t", "a"))
	res, err := a.Close(e.ctx, "t", c1.Rev, "a")
	require.NoError(e.t, err)
	require.Equal(e.t, claims.CloseStale, res)
	_, _, err = a.Resolve(e.ctx, "t", 99, c3.Gen, true)
	require.ErrorIs(e.t, err, claims.ErrFenced)
	st.quiet()

	require.NoError(e.t, a.Deregister(e.ctx, w.Worker))
	require.Equal(e.t, claims.MembersChanged, st.nextMembers().Kind, "deregistration")
	require.NoError(e.t, a.Deregister(e.ctx, "never-registered"))
}

func (e *env) eventsAcrossHandles() {
	a, b, c := e.store("a"), e.store("b"), e.store("c")
	sa, sb := e.events(a), e.events(b)
	e.register(c, "w", "1")
	require.Equal(e.t, claims.MembersChanged, sa.nextMembers().Kind)
	require.Equal(e.t, claims.MembersChanged, sb.nextMembers().Kind)
	var want []claims.Event
	for i := range 10 {
		key := fmt.Sprintf("k%d", i%3)
		cl, created, err := c.CreateOrGet(e.ctx, key, propose("w").f)
		require.NoError(e.t, err)
		require.True(e.t, created)
		res, err := c.Close(e.ctx, key, cl.Rev, "c")
		require.NoError(e.t, err)
		require.Equal(e.t, claims.CloseDeleted, res)
		want = append(want, del(key, cl.Rev))
	}
	sa.deletes(want...)
	sb.deletes(want...)
	// A second stream of one handle sees the same.
	sa2 := e.events(a)
	cl := e.create(c, "x", "w")
	_, err := c.Close(e.ctx, "x", cl.Rev, "c")
	require.NoError(e.t, err)
	sa.deletes(del("x", cl.Rev))
	sa2.deletes(del("x", cl.Rev))

	// A registration vanishes with its handle's session.
	d := e.store("d")
	e.register(d, "v", "1")
	require.Equal(e.t, claims.MembersChanged, sa.nextMembers().Kind)
	require.NoError(e.t, d.Shutdown())
	require.Equal(e.t, claims.MembersChanged, sa.nextMembers().Kind, "a shut-down handle's registration left")
}

func (e *env) eventsEndWithContext() {
	a := e.store("a")
	ctx, cancel := context.WithCancel(e.ctx)
	ch, err := a.Events(ctx)
	require.NoError(e.t, err)
	st := &stream{e: e, ch: ch}
	cancel()
	st.closed("its context was cancelled")
	// The handle still works and streams again.
	e.register(a, "w", "1")
	st2 := e.events(a)
	e.register(a, "w", "2")
	require.Equal(e.t, claims.MembersChanged, st2.nextMembers().Kind)
}

func (e *env) members() {
	a, b := e.store("a"), e.store("b")
	ms, _, err := a.Members(e.ctx)
	require.NoError(e.t, err)
	require.Empty(e.t, ms)
	w1 := e.register(a, "w1", "i1")
	w2 := e.register(b, "w2", "i2")
	require.Greater(e.t, w2.Gen, w1.Gen)
	ms, rev, err := b.Members(e.ctx)
	require.NoError(e.t, err)
	require.ElementsMatch(e.t, []claims.Member{w1, w2}, ms)
	require.GreaterOrEqual(e.t, rev, w2.Gen)

	// Registering again with the same identity, from either session, is
	// the same registration: same generation, nothing written, and a
	// claim under it stays current.
	cl := e.create(a, "s", "w1")
	st := e.events(b)
	for _, s := range []claims.Store{a, b, a} {
		again := e.register(s, "w1", "i1")
		require.Equal(e.t, w1, again, "a registration with the same identity is the same registration")
	}
	ms, revSame, err := a.Members(e.ctx)
	require.NoError(e.t, err)
	require.ElementsMatch(e.t, []claims.Member{w1, w2}, ms)
	require.Greater(e.t, revSame, rev)
	p := propose("w2")
	got, created, err := b.CreateOrGet(e.ctx, "s", p.f)
	require.NoError(e.t, err)
	require.False(e.t, created, "the claim under w1's unchanged generation is not stale")
	require.Equal(e.t, cl, got)
	require.Zero(e.t, p.n())

	// Another identity is a restart: a new generation, the claim stale.
	w1c := e.register(b, "w1", "i1-restarted")
	require.Greater(e.t, w1c.Gen, w1.Gen)
	// The same identity's registrations wrote nothing: the first
	// MembersChanged since they began is the restart's.
	require.Equal(e.t, claims.Event{Kind: claims.MembersChanged, Key: "w1", Rev: w1c.Gen}, st.nextMembers(),
		"a registration with the same identity wrote a new revision")
	ms, rev2, err := a.Members(e.ctx)
	require.NoError(e.t, err)
	require.ElementsMatch(e.t, []claims.Member{w1c, w2}, ms)
	require.Greater(e.t, rev2, revSame)
	require.Equal(e.t, w1c, e.register(a, "w1", "i1-restarted"))

	require.NoError(e.t, b.Deregister(e.ctx, "w1"))
	ms, _, err = a.Members(e.ctx)
	require.NoError(e.t, err)
	require.ElementsMatch(e.t, []claims.Member{w2}, ms)

	// A registration lasts while the session that made it does; an
	// idempotent Register from another session does not take it over.
	w3 := e.register(a, "w3", "i3")
	require.Equal(e.t, w3, e.register(b, "w3", "i3"))
	require.NoError(e.t, b.Shutdown())
	ms, _, err = a.Members(e.ctx)
	require.NoError(e.t, err)
	require.ElementsMatch(e.t, []claims.Member{w3}, ms,
		"w2's registration vanished with b's session, w3's (made by a) did not")
	c := e.store("c")
	require.Equal(e.t, w3, e.register(c, "w3", "i3"))
	require.NoError(e.t, a.Shutdown())
	ms, _, err = c.Members(e.ctx)
	require.NoError(e.t, err)
	require.Empty(e.t, ms, "w3's registration vanished with a's session, the one that made it")
	// Registered again after it ended: a new registration.
	w3b := e.register(c, "w3", "i3")
	require.Greater(e.t, w3b.Gen, w3.Gen)
}

// registerRace: concurrent registrations of one worker with one identity,
// from several sessions, return one generation.
func (e *env) registerRace() {
	stores := []claims.Store{e.store("a"), e.store("b"), e.store("c")}
	const n = 12
	gens := make([]int64, n)
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			var m claims.Member
			m, errs[i] = stores[i%len(stores)].Register(e.ctx, "w", "i1")
			gens[i] = m.Gen
		}()
	}
	wg.Wait()
	for i := range n {
		require.NoError(e.t, errs[i], "Register %d", i)
		require.Equal(e.t, gens[0], gens[i], "concurrent registrations with one identity: generations %v", gens)
	}
	ms, _, err := stores[0].Members(e.ctx)
	require.NoError(e.t, err)
	require.Equal(e.t, []claims.Member{{Worker: "w", Identity: "i1", Gen: gens[0]}}, ms)
}

func (e *env) replicaID() {
	seen := map[uint64]string{}
	check := func(s claims.Store, name string) {
		e.t.Helper()
		id, err := s.ReplicaID(e.ctx, name)
		require.NoError(e.t, err)
		require.GreaterOrEqual(e.t, id, uint64(1))
		require.LessOrEqual(e.t, id, uint64(claims.MaxReplicaID))
		prev, dup := seen[id]
		require.False(e.t, dup, "replica id %d given to %s and %s", id, prev, name)
		seen[id] = name
	}
	a, b, c := e.store("a"), e.store("b"), e.store("c")
	check(a, "a")
	check(b, "b")
	check(c, "c")
	// A restarted replica (a new session of the same name).
	require.NoError(e.t, a.Shutdown())
	check(e.store("a"), "a")

	// Concurrently.
	var mu sync.Mutex
	var wg sync.WaitGroup
	ids := map[uint64]int{}
	for i := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			s := []claims.Store{b, c}[i%2]
			id, err := s.ReplicaID(e.ctx, fmt.Sprintf("r%d", i))
			if assert.NoError(e.t, err) {
				mu.Lock()
				ids[id]++
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	for id, n := range ids {
		require.Equal(e.t, 1, n, "replica id %d given %d times", id, n)
		_, dup := seen[id]
		require.False(e.t, dup, "replica id %d given twice", id)
	}
}

// moveErr checks err is a *claims.MoveError of a Move of key from rev to
// target that found want (found false: no claim), matching sentinel
// (claims.ErrClaimMoved or claims.ErrNotBound) and not the other one.
func (e *env) moveErr(err error, key string, rev int64, target claims.Target, want claims.Claim, found bool, sentinel error) {
	e.t.Helper()
	require.ErrorIs(e.t, err, sentinel)
	other := claims.ErrNotBound
	if sentinel == claims.ErrNotBound {
		other = claims.ErrClaimMoved
	}
	require.NotErrorIs(e.t, err, other)
	var me *claims.MoveError
	require.ErrorAs(e.t, err, &me, "a refused Move is a *claims.MoveError")
	require.Equal(e.t, &claims.MoveError{Key: key, Rev: rev, Target: target, Current: want, Found: found}, me)
}

// move: a Move from the current revision of a Bound claim writes a new
// lineage at the target, under its worker's current generation; the old
// revision ends (its Delete event) with its lineage's holds: the old
// holder's Hold, HoldLineage and Touch by it are refused, its Close is
// CloseStale, and the new lineage's first Close deletes.
// binaryKeys: a key is any bytes, not only text (the affinity layer's
// keys are a phase byte and a raw digest): a claim written under a key
// that is not valid UTF-8 is found again by that key, by every handle,
// moved and closed by it, and its Delete events carry it unchanged.
func (e *env) binaryKeys() {
	a, b := e.store("a"), e.store("b")
	e.register(a, "w0", "1")
	e.register(a, "w1", "1")
	sb := e.events(b)
	for _, key := range []string{"d/\xff\xfe\x00\x80s", "\xc3\x28", string([]byte{0xef, 0xbf, 0xbd})} {
		c := e.create(a, key, "w0")
		require.Equal(e.t, key, c.Key)
		require.Equal(e.t, c, e.mustGet(b, key), "another handle reads the claim by the same bytes")
		again, created, err := b.CreateOrGet(e.ctx, key, func() (claims.Target, error) { return claims.Target{Worker: "w1"}, nil })
		require.NoError(e.t, err)
		require.False(e.t, created, "the claim of %q is found again, not written anew", key)
		require.Equal(e.t, c, again)
		mv, err := b.Move(e.ctx, key, c.Rev, claims.Target{Worker: "w1"})
		require.NoError(e.t, err)
		sb.deletes(del(key, c.Rev))
		res, err := a.Close(e.ctx, key, mv.Rev, "a")
		require.NoError(e.t, err)
		require.Equal(e.t, claims.CloseDeleted, res)
		sb.deletes(del(key, mv.Rev))
		e.absent(b, key)
	}
	// The key that is U+FFFD's own bytes is not the same as a key whose
	// invalid bytes a text encoding would replace with it.
	c := e.create(a, "\xff", "w0")
	e.absent(b, string([]byte{0xef, 0xbf, 0xbd}))
	require.Equal(e.t, c, e.mustGet(b, "\xff"))
}

func (e *env) move() {
	a, b := e.store("a"), e.store("b")
	m0 := e.register(a, "w0", "1")
	m1 := e.register(a, "w1", "1")
	sb := e.events(b)
	c1 := e.create(a, "s", "w0")
	require.Equal(e.t, m0.Gen, c1.Gen)
	require.NoError(e.t, a.Hold(e.ctx, "s", c1.Rev, "a"))
	// A rewritten lineage (Born < Rev) moves from its current revision.
	q, err := a.Quarantine(e.ctx, "s", c1.Rev, 9, c1.Gen)
	require.NoError(e.t, err)
	c2, ok, err := b.Resolve(e.ctx, "s", 9, q.Gen, true)
	require.NoError(e.t, err)
	require.True(e.t, ok)
	require.Less(e.t, c2.Born, c2.Rev)
	sb.deletes(del("s", c1.Rev), del("s", q.Rev))

	to := claims.Target{Worker: "w1", Rank: 3, HasRank: true}
	mv, err := b.Move(e.ctx, "s", c2.Rev, to)
	require.NoError(e.t, err, "Move from the current revision")
	require.Equal(e.t, claims.Claim{Key: "s", Rev: mv.Rev, Born: mv.Rev, Target: to, Gen: m1.Gen, State: claims.Bound}, mv,
		"a new lineage, Bound to the target under its worker's generation")
	require.Greater(e.t, mv.Rev, c2.Rev)
	require.Equal(e.t, mv, e.mustGet(a, "s"), "every handle reads the moved claim")
	sb.deletes(del("s", c2.Rev))

	// The old lineage's holds are gone, and its revisions fence nothing.
	for _, rev := range []int64{c1.Rev, c2.Rev} {
		require.ErrorIs(e.t, a.Hold(e.ctx, "s", rev, "a"), claims.ErrClaimMoved, "Hold by rev %d of the old lineage", rev)
		require.ErrorIs(e.t, a.Touch(e.ctx, "s", rev), claims.ErrClaimMoved, "Touch by rev %d of the old lineage", rev)
		_, err = claims.HoldLineage(e.ctx, a, "s", rev, "a")
		require.ErrorIs(e.t, err, claims.ErrClaimMoved, "HoldLineage by rev %d of the old lineage", rev)
		res, err := a.Close(e.ctx, "s", rev, "a")
		require.NoError(e.t, err)
		require.Equal(e.t, claims.CloseStale, res, "the old holder's Close by rev %d", rev)
	}
	require.Equal(e.t, mv, e.mustGet(a, "s"), "the old lineage's calls changed nothing")
	require.NoError(e.t, b.Touch(e.ctx, "s", mv.Rev))
	res, err := b.Close(e.ctx, "s", mv.Rev, "b")
	require.NoError(e.t, err)
	require.Equal(e.t, claims.CloseDeleted, res, "a's hold on the old lineage does not hold the moved claim")
	sb.deletes(del("s", mv.Rev))
	e.absent(a, "s")

	// A move to the claim's own target is still a rewrite: a new
	// revision and lineage.
	c3 := e.create(a, "s", "w0")
	same, err := a.Move(e.ctx, "s", c3.Rev, c3.Target)
	require.NoError(e.t, err)
	require.Greater(e.t, same.Rev, c3.Rev)
	require.Equal(e.t, claims.Claim{Key: "s", Rev: same.Rev, Born: same.Rev, Target: c3.Target, Gen: c3.Gen, State: claims.Bound}, same)
	sb.deletes(del("s", c3.Rev))

	// A move of a stale claim (its worker restarted) takes the target's
	// current generation.
	m0b := e.register(b, "w0", "2")
	again, err := a.Move(e.ctx, "s", same.Rev, claims.Target{Worker: "w0"})
	require.NoError(e.t, err)
	require.Equal(e.t, m0b.Gen, again.Gen)
	sb.deletes(del("s", same.Rev))
}

// moveRefused: a Move from a revision that is not current (ErrClaimMoved,
// carrying the current claim), of a key with no claim, of a Quarantined
// or Closing claim (ErrNotBound), to an unregistered worker
// (ErrUnknownWorker) changes nothing and ends no revision.
func (e *env) moveRefused() {
	a, b := e.store("a"), e.store("b")
	e.register(a, "w0", "1")
	e.register(a, "w1", "1")
	to := claims.Target{Worker: "w1"}
	_, err := a.Move(e.ctx, "s", 1, to)
	e.moveErr(err, "s", 1, to, claims.Claim{}, false, claims.ErrClaimMoved)
	e.absent(a, "s")

	c1 := e.create(a, "s", "w0")
	sb := e.events(b)
	mv, err := a.Move(e.ctx, "s", c1.Rev, to)
	require.NoError(e.t, err)
	sb.deletes(del("s", c1.Rev))
	// A stale revision: the current claim comes with the refusal.
	_, err = b.Move(e.ctx, "s", c1.Rev, claims.Target{Worker: "w0"})
	e.moveErr(err, "s", c1.Rev, claims.Target{Worker: "w0"}, mv, true, claims.ErrClaimMoved)
	// A revision from the future.
	_, err = b.Move(e.ctx, "s", mv.Rev+1000, to)
	e.moveErr(err, "s", mv.Rev+1000, to, mv, true, claims.ErrClaimMoved)
	// An unregistered worker, one that left.
	for _, w := range []string{"nobody", "w0"} {
		if w == "w0" {
			require.NoError(e.t, a.Deregister(e.ctx, "w0"))
		}
		_, err = b.Move(e.ctx, "s", mv.Rev, claims.Target{Worker: w})
		require.ErrorIs(e.t, err, claims.ErrUnknownWorker, "Move to %s", w)
		require.NotErrorIs(e.t, err, claims.ErrClaimMoved)
	}
	require.Equal(e.t, mv, e.mustGet(b, "s"), "refused moves changed nothing")
	sb.quiet()

	// A quarantined claim is settled by Resolve, never moved.
	q, err := a.Quarantine(e.ctx, "s", mv.Rev, 4, mv.Gen)
	require.NoError(e.t, err)
	sb.deletes(del("s", mv.Rev))
	_, err = b.Move(e.ctx, "s", q.Rev, to)
	e.moveErr(err, "s", q.Rev, to, q, true, claims.ErrNotBound)
	_, err = b.Move(e.ctx, "s", mv.Rev, to)
	e.moveErr(err, "s", mv.Rev, to, q, true, claims.ErrClaimMoved)
	require.Equal(e.t, q, e.mustGet(b, "s"))
	c2, ok, err := a.Resolve(e.ctx, "s", 4, q.Gen, true)
	require.NoError(e.t, err)
	require.True(e.t, ok)
	sb.deletes(del("s", q.Rev))

	// A closing claim is ended by its last Unhold, never moved.
	require.NoError(e.t, b.Hold(e.ctx, "s", c2.Rev, "b"))
	res, err := a.Close(e.ctx, "s", c2.Rev, "a")
	require.NoError(e.t, err)
	require.Equal(e.t, claims.CloseDeferred, res)
	closing := e.mustGet(a, "s")
	require.Equal(e.t, claims.Closing, closing.State)
	sb.deletes(del("s", c2.Rev))
	_, err = b.Move(e.ctx, "s", closing.Rev, to)
	e.moveErr(err, "s", closing.Rev, to, closing, true, claims.ErrNotBound)
	require.Equal(e.t, closing, e.mustGet(b, "s"))
	sb.quiet()
	require.NoError(e.t, b.Unhold(e.ctx, "s", "b"))
	sb.deletes(del("s", closing.Rev))
}

// moveRace: of concurrent moves from one revision, exactly one wins; every
// loser gets ErrClaimMoved with the winner's claim. Round after round,
// from the winner's revision.
func (e *env) moveRace() {
	setup := e.store("setup")
	const workers = 3
	for w := range workers {
		e.register(setup, fmt.Sprintf("w%d", w), "1")
	}
	replicas := make([]claims.Store, 4)
	for i := range replicas {
		replicas[i] = e.store(fmt.Sprintf("r%d", i))
	}
	racers := min(e.h.Racers, 8)
	cur := e.create(setup, "s", "w0")
	for round := range e.h.MoveRounds {
		type result struct {
			target claims.Target
			c      claims.Claim
			err    error
		}
		results := make([]result, racers)
		start := make(chan struct{})
		var wg sync.WaitGroup
		for i := range racers {
			wg.Add(1)
			go func() {
				defer wg.Done()
				<-start
				t := claims.Target{Worker: fmt.Sprintf("w%d", (i+round)%workers), Rank: i, HasRank: true}
				c, err := replicas[i%len(replicas)].Move(e.ctx, "s", cur.Rev, t)
				results[i] = result{t, c, err}
			}()
		}
		close(start)
		wg.Wait()
		var won *result
		for i := range results {
			if results[i].err == nil {
				require.Nil(e.t, won, "round %d: two moves from rev %d won: %+v and %+v", round, cur.Rev, won, results[i])
				won = &results[i]
			}
		}
		require.NotNil(e.t, won, "round %d: no move from rev %d won", round, cur.Rev)
		require.Equal(e.t, won.target, won.c.Target)
		require.Equal(e.t, won.c.Rev, won.c.Born)
		for _, r := range results {
			if r.err != nil {
				e.moveErr(r.err, "s", cur.Rev, r.target, won.c, true, claims.ErrClaimMoved)
			}
		}
		require.Equal(e.t, won.c, e.mustGet(setup, "s"), "round %d: the store holds the winner's claim", round)
		cur = won.c
	}
}

// moveLostReply: a Move whose reply is lost (ErrUnavailable) may or may
// not have happened; a Get settles which.
func (e *env) moveLostReply() {
	if e.ctl.LoseReply == nil {
		e.t.Skip("the backend cannot lose a reply (Controls.LoseReply is nil)")
	}
	a := e.store("a")
	e.register(a, "w0", "1")
	e.register(a, "w1", "1")
	c1 := e.create(a, "s", "w0")
	to := claims.Target{Worker: "w1"}
	e.ctl.LoseReply("a", "move")
	_, err := a.Move(e.ctx, "s", c1.Rev, to)
	require.ErrorIs(e.t, err, claims.ErrUnavailable, "the move's reply was lost")
	got := e.mustGet(a, "s")
	require.Greater(e.t, got.Rev, c1.Rev, "the move was applied: Get settles it")
	require.Equal(e.t, claims.Claim{Key: "s", Rev: got.Rev, Born: got.Rev, Target: to, Gen: got.Gen, State: claims.Bound}, got)
	// Retrying from the old revision is refused with the moved claim.
	_, err = a.Move(e.ctx, "s", c1.Rev, to)
	e.moveErr(err, "s", c1.Rev, to, got, true, claims.ErrClaimMoved)
	require.Equal(e.t, got, e.mustGet(a, "s"), "the refused retry changed nothing")
}

func (e *env) invalidArguments() {
	a := e.store("a")
	e.register(a, "w", "1")
	c := e.create(a, "s", "w")
	p := propose("w").f
	ctx := e.ctx
	calls := map[string]func() error{
		"CreateOrGet empty key": func() error { _, _, err := a.CreateOrGet(ctx, "", p); return err },
		"CreateOrGet nil propose": func() error {
			_, _, err := a.CreateOrGet(ctx, "new", nil)
			return err
		},
		"Get empty key":        func() error { _, _, err := a.Get(ctx, ""); return err },
		"Hold empty key":       func() error { return a.Hold(ctx, "", c.Rev, "a") },
		"Hold zero rev":        func() error { return a.Hold(ctx, "s", 0, "a") },
		"Hold negative rev":    func() error { return a.Hold(ctx, "s", -1, "a") },
		"Hold empty replica":   func() error { return a.Hold(ctx, "s", c.Rev, "") },
		"Unhold empty key":     func() error { return a.Unhold(ctx, "", "a") },
		"Unhold empty replica": func() error { return a.Unhold(ctx, "s", "") },
		"Close empty key":      func() error { _, err := a.Close(ctx, "", c.Rev, "a"); return err },
		"Close zero rev":       func() error { _, err := a.Close(ctx, "s", 0, "a"); return err },
		"Close empty replica":  func() error { _, err := a.Close(ctx, "s", c.Rev, ""); return err },
		"Quarantine empty key": func() error { _, err := a.Quarantine(ctx, "", c.Rev, 1, c.Gen); return err },
		"Quarantine zero rev":  func() error { _, err := a.Quarantine(ctx, "s", 0, 1, c.Gen); return err },
		"Quarantine zero gen":  func() error { _, err := a.Quarantine(ctx, "s", c.Rev, 1, 0); return err },
		"Resolve empty key":    func() error { _, _, err := a.Resolve(ctx, "", 1, c.Gen, true); return err },
		"Resolve zero gen":     func() error { _, _, err := a.Resolve(ctx, "s", 1, 0, true); return err },
		"Move empty key":       func() error { _, err := a.Move(ctx, "", c.Rev, c.Target); return err },
		"Move zero rev":        func() error { _, err := a.Move(ctx, "s", 0, c.Target); return err },
		"Move empty worker":    func() error { _, err := a.Move(ctx, "s", c.Rev, claims.Target{}); return err },
		"Move negative rank": func() error {
			_, err := a.Move(ctx, "s", c.Rev, claims.Target{Worker: "w", Rank: -1, HasRank: true})
			return err
		},
		"Touch empty key":       func() error { return a.Touch(ctx, "", c.Rev) },
		"Touch zero rev":        func() error { return a.Touch(ctx, "s", 0) },
		"Register empty worker": func() error { _, err := a.Register(ctx, "", "1"); return err },
		"Deregister empty":      func() error { return a.Deregister(ctx, "") },
		"ReplicaID empty":       func() error { _, err := a.ReplicaID(ctx, ""); return err },
	}
	for name, call := range calls {
		require.ErrorIs(e.t, call(), claims.ErrInvalidArgument, name)
	}
	require.Equal(e.t, c, e.mustGet(a, "s"), "invalid calls changed nothing")
	e.absent(a, "new")
	ms, _, err := a.Members(ctx)
	require.NoError(e.t, err)
	require.Len(e.t, ms, 1)
}

func (e *env) cancelledContext() {
	a := e.store("a")
	e.register(a, "w", "1")
	c := e.create(a, "s", "w")
	ctx, cancel := context.WithCancel(e.ctx)
	cancel()
	p := propose("w")
	calls := map[string]func() error{
		"CreateOrGet": func() error { _, _, err := a.CreateOrGet(ctx, "new", p.f); return err },
		"Get":         func() error { _, _, err := a.Get(ctx, "s"); return err },
		"Hold":        func() error { return a.Hold(ctx, "s", c.Rev, "a") },
		"Unhold":      func() error { return a.Unhold(ctx, "s", "a") },
		"Close":       func() error { _, err := a.Close(ctx, "s", c.Rev, "a"); return err },
		"Quarantine":  func() error { _, err := a.Quarantine(ctx, "s", c.Rev, 1, c.Gen); return err },
		"Resolve":     func() error { _, _, err := a.Resolve(ctx, "s", 1, c.Gen, true); return err },
		"Move":        func() error { _, err := a.Move(ctx, "s", c.Rev, c.Target); return err },
		"Touch":       func() error { return a.Touch(ctx, "s", c.Rev) },
		"Register":    func() error { _, err := a.Register(ctx, "v", "1"); return err },
		"Deregister":  func() error { return a.Deregister(ctx, "w") },
		"Members":     func() error { _, _, err := a.Members(ctx); return err },
		"ReplicaID":   func() error { _, err := a.ReplicaID(ctx, "a"); return err },
	}
	for name, call := range calls {
		require.ErrorIs(e.t, call(), context.Canceled, name)
	}
	require.Zero(e.t, p.n(), "propose not called under a cancelled context")
	require.Equal(e.t, c, e.mustGet(a, "s"), "cancelled calls changed nothing")
	e.absent(a, "new")
	ms, _, err := a.Members(e.ctx)
	require.NoError(e.t, err)
	require.Equal(e.t, []claims.Member{{Worker: "w", Identity: "1", Gen: c.Gen}}, ms)

	// Cancelled during propose: the write does not happen.
	ctx2, cancel2 := context.WithCancel(e.ctx)
	_, _, err = a.CreateOrGet(ctx2, "new", func() (claims.Target, error) {
		cancel2()
		return claims.Target{Worker: "w"}, nil
	})
	require.ErrorIs(e.t, err, context.Canceled)
	e.absent(a, "new")

	// Events with a cancelled context: an error, or a stream that closes.
	ch, err := a.Events(ctx)
	if err == nil {
		(&stream{e: e, ch: ch}).closed("Events under a cancelled context")
	} else {
		require.ErrorIs(e.t, err, context.Canceled)
	}
}

func (e *env) shutdown() {
	a, b := e.store("a"), e.store("b")
	e.register(a, "w", "1")
	e.register(a, "v", "1")
	c := e.create(b, "s", "w")
	require.NoError(e.t, a.Hold(e.ctx, "s", c.Rev, "a"))
	sb := e.events(b)
	ch, err := a.Events(e.ctx)
	require.NoError(e.t, err)
	sa := &stream{e: e, ch: ch}

	require.NoError(e.t, a.Shutdown())
	sa.closed("Shutdown")
	require.Equal(e.t, claims.MembersChanged, sb.nextMembers().Kind)
	ms, _, err := b.Members(e.ctx)
	require.NoError(e.t, err)
	require.Empty(e.t, ms, "a's registrations vanished")
	// a's hold vanished: b's close deletes.
	e.register(b, "w", "1")
	res, err := b.Close(e.ctx, "s", c.Rev, "b")
	require.NoError(e.t, err)
	require.Equal(e.t, claims.CloseDeleted, res)
	sb.deletes(del("s", c.Rev))

	// Every call on a's handle now fails with ErrClosed.
	_, _, err = a.Get(e.ctx, "s")
	require.ErrorIs(e.t, err, claims.ErrClosed)
	_, _, err = a.CreateOrGet(e.ctx, "s", propose("w").f)
	require.ErrorIs(e.t, err, claims.ErrClosed)
	_, err = a.Register(e.ctx, "w", "1")
	require.ErrorIs(e.t, err, claims.ErrClosed)
	_, err = a.Move(e.ctx, "s", c.Rev, claims.Target{Worker: "w"})
	require.ErrorIs(e.t, err, claims.ErrClosed)
	_, err = a.Events(e.ctx)
	require.ErrorIs(e.t, err, claims.ErrClosed)
	if err := a.Shutdown(); err != nil {
		require.ErrorIs(e.t, err, claims.ErrClosed, "a second Shutdown")
	}

	// Deferred close completed by the last holder's Shutdown.
	c = e.create(b, "s", "w")
	d := e.store("d")
	require.NoError(e.t, d.Hold(e.ctx, "s", c.Rev, "d"))
	res, err = b.Close(e.ctx, "s", c.Rev, "b")
	require.NoError(e.t, err)
	require.Equal(e.t, claims.CloseDeferred, res)
	closing := e.mustGet(b, "s")
	sb.deletes(del("s", c.Rev))
	require.NoError(e.t, d.Shutdown())
	sb.deletes(del("s", closing.Rev))
	e.absent(b, "s")
}

func (e *env) crash() {
	if e.ctl.Crash == nil {
		e.t.Skip("the backend cannot crash a replica (Controls.Crash is nil)")
	}
	a, b := e.store("a"), e.store("b")
	sb := e.events(b)
	e.register(a, "w", "1")
	require.Equal(e.t, claims.MembersChanged, sb.nextMembers().Kind)
	e.register(b, "v", "1")
	c := e.create(b, "s", "v")
	require.NoError(e.t, a.Hold(e.ctx, "s", c.Rev, "a"))
	res, err := b.Close(e.ctx, "s", c.Rev, "b")
	require.NoError(e.t, err)
	require.Equal(e.t, claims.CloseDeferred, res)
	closing := e.mustGet(b, "s")
	sb.deletes(del("s", c.Rev))

	e.ctl.Crash("a")
	// Its hold vanished, so the deferred close completes; its
	// registration left.
	sb.deletes(del("s", closing.Rev))
	e.absent(b, "s")
	deadline := time.Now().Add(e.h.EventTimeout)
	for {
		ms, _, err := b.Members(e.ctx)
		require.NoError(e.t, err)
		if len(ms) == 1 {
			require.Equal(e.t, "v", ms[0].Worker)
			break
		}
		require.True(e.t, time.Now().Before(deadline), "the crashed replica's registration is still there: %+v", ms)
		time.Sleep(10 * time.Millisecond)
	}
}

// noLeak: handles with streams (cancelled, live, abandoned), holds and
// registrations leave no goroutine once shut down.
func (e *env) noLeak() {
	before := runtime.NumGoroutine()
	func() {
		a, b := e.open("a"), e.open("b")
		defer func() { _ = b.Shutdown() }()
		defer func() { _ = a.Shutdown() }()
		ctx, cancel := context.WithCancel(e.ctx)
		_, err := a.Events(ctx)
		require.NoError(e.t, err)
		cancel()
		_, err = b.Events(e.ctx) // never read, ended by Shutdown
		require.NoError(e.t, err)
		st := e.events(a)
		e.register(a, "w", "1")
		c := e.create(b, "s", "w")
		require.NoError(e.t, a.Hold(e.ctx, "s", c.Rev, "a"))
		_, err = b.Close(e.ctx, "s", c.Rev, "b")
		require.NoError(e.t, err)
		st.nextDelete()
	}()
	deadline := time.Now().Add(5 * time.Second)
	for runtime.NumGoroutine() > before {
		if time.Now().After(deadline) {
			buf := make([]byte, 1<<20)
			n := runtime.Stack(buf, true)
			e.t.Fatalf("goroutine leak: %d before, %d after shutdown\n%s", before, runtime.NumGoroutine(),
				strings.TrimSpace(string(buf[:n])))
		}
		time.Sleep(10 * time.Millisecond)
	}
}
