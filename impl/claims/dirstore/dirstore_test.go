//go:build linux

package dirstore_test

import (
	"context"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/placementlab/placement/impl/claims"
	"github.com/placementlab/placement/impl/claims/dirstore"
)

var bg = context.Background()

func open(t *testing.T, cfg dirstore.Config, replica string) *dirstore.Store {
	t.Helper()
	s, err := dirstore.Open(cfg, replica)
	require.NoError(t, err)
	t.Cleanup(func() { _ = s.Shutdown() })
	return s
}

func toW() (claims.Target, error) { return claims.Target{Worker: "w"}, nil }

// subscribe returns a's stream with its first Reset read.
func subscribe(t *testing.T, s *dirstore.Store) <-chan claims.Event {
	t.Helper()
	ctx, cancel := context.WithCancel(bg)
	t.Cleanup(cancel)
	ch, err := s.Events(ctx)
	require.NoError(t, err)
	require.Equal(t, claims.Reset, nextEvent(t, ch).Kind)
	return ch
}

// TestInotifyDeliversOtherHandlesWrites: with polling off, another
// handle's writes reach a stream through the inotify watch alone.
func TestInotifyDeliversOtherHandlesWrites(t *testing.T) {
	cfg := dirstore.Config{Dir: t.TempDir(), PollEvery: time.Hour, RescanEvery: time.Hour}
	a, b := open(t, cfg, "a"), open(t, cfg, "b")
	ch := subscribe(t, a)
	_, err := b.Register(bg, "w", "1")
	require.NoError(t, err)
	require.Equal(t, claims.MembersChanged, nextEvent(t, ch).Kind)
	for range 20 {
		c, _, err := b.CreateOrGet(bg, "s", toW)
		require.NoError(t, err)
		_, err = b.Close(bg, "s", c.Rev, "b")
		require.NoError(t, err)
		require.Equal(t, claims.Event{Kind: claims.Delete, Key: "s", Rev: c.Rev}, nextEvent(t, ch))
	}
}

// TestJournalGapIsReset: a writer that crashed after taking a revision
// and before journaling it leaves a gap; the next record shows it and the
// stream gets a Reset, then goes on.
func TestJournalGapIsReset(t *testing.T) {
	cfg := dirstore.Config{Dir: t.TempDir(), RescanEvery: time.Hour}
	a := open(t, cfg, "a")
	ch := subscribe(t, a)
	_, err := a.Register(bg, "w", "1")
	require.NoError(t, err)
	require.Equal(t, claims.MembersChanged, nextEvent(t, ch).Kind)

	revFile := filepath.Join(cfg.Dir, "rev")
	data, err := os.ReadFile(revFile)
	require.NoError(t, err)
	rev, err := strconv.ParseInt(strings.TrimSpace(string(data)), 10, 64)
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(revFile, []byte(strconv.FormatInt(rev+1, 10)), 0o644))

	c, _, err := a.CreateOrGet(bg, "s", toW)
	require.NoError(t, err)
	ev := nextEvent(t, ch)
	require.Equal(t, claims.Reset, ev.Kind)
	require.Contains(t, ev.Why, "gap")
	_, err = a.Close(bg, "s", c.Rev, "a")
	require.NoError(t, err)
	require.Equal(t, claims.Event{Kind: claims.Delete, Key: "s", Rev: c.Rev}, nextEvent(t, ch))
}

// TestRescanDifferenceIsReset: a claim changed behind the journal's back
// (here its file removed) is found by the rescan: a Reset.
func TestRescanDifferenceIsReset(t *testing.T) {
	cfg := dirstore.Config{Dir: t.TempDir(), RescanEvery: 30 * time.Millisecond}
	a := open(t, cfg, "a")
	ch := subscribe(t, a)
	_, err := a.Register(bg, "w", "1")
	require.NoError(t, err)
	require.Equal(t, claims.MembersChanged, nextEvent(t, ch).Kind)
	_, _, err = a.CreateOrGet(bg, "s", toW)
	require.NoError(t, err)
	// Rescans of an unchanged directory say nothing.
	select {
	case ev := <-ch:
		t.Fatalf("unexpected event %+v", ev)
	case <-time.After(150 * time.Millisecond):
	}
	ents, err := os.ReadDir(filepath.Join(cfg.Dir, "claims"))
	require.NoError(t, err)
	require.Len(t, ents, 1)
	require.NoError(t, os.Remove(filepath.Join(cfg.Dir, "claims", ents[0].Name())))
	ev := nextEvent(t, ch)
	require.Equal(t, claims.Reset, ev.Kind)
	require.Contains(t, ev.Why, "differs")
}

// TestSlowConsumerGetsReset: a stream whose consumer falls more than
// EventBuffer behind gets a Reset in place of what it missed.
func TestSlowConsumerGetsReset(t *testing.T) {
	cfg := dirstore.Config{Dir: t.TempDir(), EventBuffer: 4}
	a := open(t, cfg, "a")
	ch := subscribe(t, a)
	_, err := a.Register(bg, "w", "1")
	require.NoError(t, err)
	var last int64
	for range 20 {
		c, _, err := a.CreateOrGet(bg, "s", toW)
		require.NoError(t, err)
		_, err = a.Close(bg, "s", c.Rev, "a")
		require.NoError(t, err)
		last = c.Rev
	}
	time.Sleep(100 * time.Millisecond) // let the reader queue them all
	var got []claims.Event
	for {
		ev := nextEvent(t, ch)
		got = append(got, ev)
		if ev.Kind == claims.Delete && ev.Rev == last {
			break
		}
	}
	resets := 0
	for _, ev := range got {
		if ev.Kind == claims.Reset {
			resets++
			require.Contains(t, ev.Why, "slow consumer")
		}
	}
	require.Positive(t, resets, "events: %+v", got)
	require.Less(t, len(got), 20, "what the stream dropped it replaced by a Reset")
}

// TestLongKeys: keys too long for a file name are hashed; the claim and
// its events carry the key itself.
func TestLongKeys(t *testing.T) {
	cfg := dirstore.Config{Dir: t.TempDir()}
	a := open(t, cfg, "a")
	ch := subscribe(t, a)
	_, err := a.Register(bg, "w", "1")
	require.NoError(t, err)
	require.Equal(t, claims.MembersChanged, nextEvent(t, ch).Kind)
	key := strings.Repeat("session/é/", 200)
	c, created, err := a.CreateOrGet(bg, key, toW)
	require.NoError(t, err)
	require.True(t, created)
	require.Equal(t, key, c.Key)
	got, ok, err := a.Get(bg, key)
	require.NoError(t, err)
	require.True(t, ok)
	require.Equal(t, c, got)
	require.NoError(t, a.Hold(bg, key, c.Rev, strings.Repeat("replica", 100)))
	res, err := a.Close(bg, key, c.Rev, "other")
	require.NoError(t, err)
	require.Equal(t, claims.CloseDeferred, res)
	require.Equal(t, claims.Event{Kind: claims.Delete, Key: key, Rev: c.Rev}, nextEvent(t, ch))
}

// TestUnavailableDirectory: file-system failures are *claims.UnavailableError.
func TestUnavailableDirectory(t *testing.T) {
	cfg := dirstore.Config{Dir: t.TempDir()}
	a := open(t, cfg, "a")
	require.NoError(t, os.RemoveAll(filepath.Join(cfg.Dir, "members")))
	_, err := a.Register(bg, "w", "1")
	var ue *claims.UnavailableError
	require.ErrorAs(t, err, &ue)
	require.ErrorIs(t, err, claims.ErrUnavailable)
	require.Equal(t, "register", ue.Op)
}

// TestOpenValidates: bad configuration is ErrInvalidArgument.
func TestOpenValidates(t *testing.T) {
	_, err := dirstore.Open(dirstore.Config{}, "a")
	require.ErrorIs(t, err, claims.ErrInvalidArgument)
	_, err = dirstore.Open(dirstore.Config{Dir: t.TempDir()}, "")
	require.ErrorIs(t, err, claims.ErrInvalidArgument)
	f := filepath.Join(t.TempDir(), "file")
	require.NoError(t, os.WriteFile(f, nil, 0o644))
	_, err = dirstore.Open(dirstore.Config{Dir: f}, "a")
	require.ErrorIs(t, err, claims.ErrUnavailable, "a Dir that is a file")
}

// TestAbandonedHandleCleanedUpBySweep: a handle abandoned as a killed
// process's leaves its files until another handle's sweep finds its
// session dead.
func TestAbandonedHandleCleanedUpBySweep(t *testing.T) {
	cfg := dirstore.Config{Dir: t.TempDir(), SweepEvery: -1}
	a, b := open(t, cfg, "a"), open(t, cfg, "b")
	_, err := a.Register(bg, "wa", "1")
	require.NoError(t, err)
	_, err = b.Register(bg, "w", "1")
	require.NoError(t, err)
	c, _, err := b.CreateOrGet(bg, "s", toW)
	require.NoError(t, err)
	require.NoError(t, a.Hold(bg, "s", c.Rev, "a"))
	a.Abandon()
	_, _, err = a.Get(bg, "s")
	require.ErrorIs(t, err, claims.ErrClosed)
	sessions := func() int {
		ents, err := os.ReadDir(filepath.Join(cfg.Dir, "sessions"))
		require.NoError(t, err)
		return len(ents)
	}
	require.Equal(t, 2, sessions(), "nothing cleaned up yet")
	require.NoError(t, b.Sweep(bg))
	require.Equal(t, 1, sessions())
	ms, _, err := b.Members(bg)
	require.NoError(t, err)
	require.Equal(t, []claims.Member{{Worker: "w", Identity: "1", Gen: ms[0].Gen}}, ms)
	res, err := b.Close(bg, "s", c.Rev, "b")
	require.NoError(t, err)
	require.Equal(t, claims.CloseDeleted, res, "a's hold went with its session")
}
