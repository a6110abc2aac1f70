package memstore_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/placementlab/placement/impl/claims"
	"github.com/placementlab/placement/impl/claims/memstore"
	"github.com/placementlab/placement/impl/placement"
)

var bg = context.Background()

func newManual(t *testing.T, ttl time.Duration) (*memstore.Backend, *placement.ManualClock) {
	t.Helper()
	clk := placement.NewManualClock(0)
	b := memstore.NewBackend(memstore.Config{IdleTTL: ttl, Clock: clk, EventBuffer: 8})
	t.Cleanup(func() { _ = b.Close() })
	return b, clk
}

func target(w string) func() (claims.Target, error) {
	return func() (claims.Target, error) { return claims.Target{Worker: w}, nil }
}

// next reads one event or fails after a second.
func next(t *testing.T, ch <-chan claims.Event) claims.Event {
	t.Helper()
	select {
	case ev, ok := <-ch:
		require.True(t, ok, "stream closed")
		return ev
	case <-time.After(time.Second):
		t.Fatal("no event within 1s")
	}
	return claims.Event{}
}

// none asserts no event arrives within 30ms.
func none(t *testing.T, ch <-chan claims.Event) {
	t.Helper()
	select {
	case ev, ok := <-ch:
		t.Fatalf("unexpected event %+v (open %v)", ev, ok)
	case <-time.After(30 * time.Millisecond):
	}
}

// watch opens replica "a" on a manual-clock backend (IdleTTL a minute)
// and subscribes to its events until the test ends, reading the first
// Reset.
func watch(t *testing.T) (*memstore.Backend, *placement.ManualClock, claims.Store, <-chan claims.Event) {
	t.Helper()
	b, clk := newManual(t, time.Minute)
	a := b.Open("a")
	ctx, cancel := context.WithCancel(bg)
	t.Cleanup(cancel)
	ev, err := a.Events(ctx)
	require.NoError(t, err)
	require.Equal(t, claims.Reset, next(t, ev).Kind)
	return b, clk, a, ev
}

// watchRegistered is watch, then a registers worker "w" (its
// MembersChanged read).
func watchRegistered(t *testing.T) (*memstore.Backend, *placement.ManualClock, claims.Store, <-chan claims.Event) {
	t.Helper()
	b, clk, a, ev := watch(t)
	_, err := a.Register(bg, "w", "1")
	require.NoError(t, err)
	require.Equal(t, claims.MembersChanged, next(t, ev).Kind)
	return b, clk, a, ev
}

func TestUnavailableThenReset(t *testing.T) {
	b, _, a, ev := watchRegistered(t)
	b.SetUnavailable("a", true)
	_, _, err := a.CreateOrGet(bg, "s", target("w"))
	var ue *claims.UnavailableError
	require.ErrorAs(t, err, &ue)
	require.ErrorIs(t, err, claims.ErrUnavailable)
	require.ErrorIs(t, err, memstore.ErrInjected)
	_, ok := b.Claim("s")
	require.False(t, ok, "an unavailable call wrote")

	// Another replica writes meanwhile: a's stream sees nothing of it.
	o := b.Open("o")
	c, created, err := o.CreateOrGet(bg, "s", target("w"))
	require.NoError(t, err)
	require.True(t, created)
	_, err = o.Quarantine(bg, "s", c.Rev, 7, c.Gen)
	require.NoError(t, err)
	none(t, ev)

	b.SetUnavailable("a", false)
	e := next(t, ev)
	require.Equal(t, claims.Reset, e.Kind)
	got, ok, err := a.Get(bg, "s")
	require.NoError(t, err)
	require.True(t, ok)
	require.Equal(t, claims.Quarantined, got.State)
}

func TestHoldEventsOverflowBecomesReset(t *testing.T) {
	b, _, a, ev := watchRegistered(t)
	b.HoldEvents("a", true)
	c, _, err := a.CreateOrGet(bg, "k", target("w"))
	require.NoError(t, err)
	_, err = a.Close(bg, "k", c.Rev, "a")
	require.NoError(t, err)
	none(t, ev)
	b.HoldEvents("a", false)
	require.Equal(t, claims.Event{Kind: claims.Delete, Key: "k", Rev: c.Rev}, next(t, ev))

	// Held past the buffer (8): the queue becomes one Reset, never a
	// silent drop.
	b.HoldEvents("a", true)
	for i := range 20 {
		_, err := a.Register(bg, "w", fmt.Sprintf("restart-%d", i)) // each a new registration
		require.NoError(t, err)
	}
	b.HoldEvents("a", false)
	e := next(t, ev)
	require.Equal(t, claims.Reset, e.Kind)
	for {
		select {
		case e := <-ev:
			require.Equal(t, claims.MembersChanged, e.Kind, "after the Reset only the later events")
			continue
		case <-time.After(30 * time.Millisecond):
		}
		break
	}
}

func TestInjectResetAndDuplicate(t *testing.T) {
	b, _, a, ev := watch(t)
	b.InjectReset("a")
	require.Equal(t, claims.Event{Kind: claims.Reset, Why: "injected reset"}, next(t, ev))
	b.DuplicateNext("a")
	m, err := a.Register(bg, "w", "1")
	require.NoError(t, err)
	want := claims.Event{Kind: claims.MembersChanged, Key: "w", Rev: m.Gen}
	require.Equal(t, want, next(t, ev))
	require.Equal(t, want, next(t, ev))
	none(t, ev)
}

func TestCrashDropsHoldsAndCompletesDeferredClose(t *testing.T) {
	b, _ := newManual(t, time.Minute)
	a, o := b.Open("a"), b.Open("o")
	_, err := o.Register(bg, "w", "1")
	require.NoError(t, err)
	c, _, err := a.CreateOrGet(bg, "s", target("w"))
	require.NoError(t, err)
	require.NoError(t, a.Hold(bg, "s", c.Rev, "a"))
	require.NoError(t, o.Hold(bg, "s", c.Rev, "o"))
	res, err := o.Close(bg, "s", c.Rev, "o")
	require.NoError(t, err)
	require.Equal(t, claims.CloseDeferred, res)
	require.Equal(t, []string{"a"}, b.Holders("s"))
	b.Crash("a")
	_, ok, err := o.Get(bg, "s")
	require.NoError(t, err)
	require.False(t, ok, "the crashed last holder's hold vanished and the Closing claim went with it")
	_, _, err = a.Get(bg, "s")
	require.ErrorIs(t, err, claims.ErrClosed)
	// o's registration lives; a's crash did not touch it.
	ms, _, err := o.Members(bg)
	require.NoError(t, err)
	require.Len(t, ms, 1)
}

func TestLoseSession(t *testing.T) {
	b, _, a, ev := watchRegistered(t)
	b.LoseSession("a")
	require.Equal(t, claims.MembersChanged, next(t, ev).Kind)
	require.Equal(t, claims.Reset, next(t, ev).Kind)
	ms, _, err := a.Members(bg)
	require.NoError(t, err, "the handle lives on")
	require.Empty(t, ms)
}

func TestManualExpiryNeedsSweepOrAnOperation(t *testing.T) {
	b, clk, a, ev := watchRegistered(t)
	c, _, err := a.CreateOrGet(bg, "s", target("w"))
	require.NoError(t, err)
	require.NoError(t, clk.AdvanceBy(time.Minute))
	none(t, ev)
	b.Sweep()
	require.Equal(t, claims.Event{Kind: claims.Delete, Key: "s", Rev: c.Rev}, next(t, ev))
}

func TestRealTimeBackgroundSweep(t *testing.T) {
	b := memstore.NewBackend(memstore.Config{IdleTTL: 20 * time.Millisecond})
	defer func() { _ = b.Close() }()
	a := b.Open("a")
	_, err := a.Register(bg, "w", "1")
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(bg)
	defer cancel()
	ev, err := a.Events(ctx)
	require.NoError(t, err)
	require.Equal(t, claims.Reset, next(t, ev).Kind)
	c, _, err := a.CreateOrGet(bg, "s", target("w"))
	require.NoError(t, err)
	// Nobody calls anything: the background sweep expires it.
	require.Equal(t, claims.Event{Kind: claims.Delete, Key: "s", Rev: c.Rev}, next(t, ev))
}

func TestCloseEndsEverything(t *testing.T) {
	b, _ := newManual(t, time.Minute)
	a := b.Open("a")
	ev, err := a.Events(bg)
	require.NoError(t, err)
	require.NoError(t, b.Close())
	for e := range ev {
		require.Equal(t, claims.Reset, e.Kind, "only the first Reset, then the close")
	}
	_, _, err = a.Get(bg, "s")
	require.ErrorIs(t, err, claims.ErrClosed)
	_, _, err = b.Open("x").Members(bg)
	require.ErrorIs(t, err, claims.ErrClosed)
	assert.NoError(t, b.Close(), "Close twice")
	assert.NoError(t, a.Shutdown(), "Shutdown after Close")
}

// LoseReply applies the write and answers it as unavailable (wrapping
// ErrReplyLost), n times; with cut the handle is unreachable afterwards.
func TestLoseReply(t *testing.T) {
	b, _ := newManual(t, time.Minute)
	a, w := b.Open("a"), b.Open("w")
	_, err := w.Register(bg, "w1", "boot")
	require.NoError(t, err)
	c, _, err := a.CreateOrGet(bg, "s", target("w1"))
	require.NoError(t, err)

	b.LoseReply("a", "quarantine", 1, false)
	_, err = a.Quarantine(bg, "s", c.Rev, 7, c.Gen)
	require.ErrorIs(t, err, claims.ErrUnavailable)
	require.ErrorIs(t, err, memstore.ErrReplyLost)
	q, ok, err := a.Get(bg, "s")
	require.NoError(t, err, "the handle is reachable: only the reply was lost")
	require.True(t, ok)
	assert.Equal(t, claims.Quarantined, q.State, "the write was applied")
	assert.Equal(t, uint64(7), q.Attempt)

	// A refused write's reply is lost too; the count is spent after n.
	b.LoseReply("a", "close", 2, false)
	_, err = a.Close(bg, "s", c.Rev, "a") // stale
	require.ErrorIs(t, err, memstore.ErrReplyLost)
	_, err = a.Close(bg, "s", q.Rev, "a")
	require.ErrorIs(t, err, memstore.ErrReplyLost)
	_, ok = b.Claim("s")
	assert.False(t, ok, "the second close deleted the claim")
	c, _, err = a.CreateOrGet(bg, "s", target("w1"))
	require.NoError(t, err)
	res, err := a.Close(bg, "s", c.Rev, "a")
	require.NoError(t, err)
	assert.Equal(t, claims.CloseDeleted, res)

	// cut: the store is unreachable once the reply is lost.
	c, _, err = a.CreateOrGet(bg, "s", target("w1"))
	require.NoError(t, err)
	b.LoseReply("a", "touch", 1, true)
	require.ErrorIs(t, a.Touch(bg, "s", c.Rev), memstore.ErrReplyLost)
	_, _, err = a.Get(bg, "s")
	require.ErrorIs(t, err, memstore.ErrInjected)
	b.SetUnavailable("a", false)
	require.NoError(t, a.Touch(bg, "s", c.Rev))

	// A refused move's reply is lost too (ErrNotBound, ErrClaimMoved):
	// nothing changed.
	q, err = a.Quarantine(bg, "s", c.Rev, 8, c.Gen)
	require.NoError(t, err)
	b.LoseReply("a", "move", 2, false)
	_, err = a.Move(bg, "s", q.Rev, claims.Target{Worker: "w1"})
	require.ErrorIs(t, err, memstore.ErrReplyLost, "a Move refused as not Bound")
	_, err = a.Move(bg, "s", c.Rev, claims.Target{Worker: "w1"})
	require.ErrorIs(t, err, memstore.ErrReplyLost, "a Move refused as moved")
	got, ok := b.Claim("s")
	require.True(t, ok)
	assert.Equal(t, q, got, "the refused moves changed nothing")
}
