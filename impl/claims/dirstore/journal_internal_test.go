//go:build linux

package dirstore

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/placementlab/placement/impl/claims"
)

// pausedReader opens a writer handle and a reader positioned at the
// journal's end whose goroutines do not run: the test drives read().
func pausedReader(t *testing.T, segBytes int64) (*Store, *watcher) {
	t.Helper()
	cfg := Config{Dir: t.TempDir(), IdleTTL: time.Minute, SweepEvery: -1, SegmentBytes: segBytes}
	writer, err := Open(cfg, "writer")
	require.NoError(t, err)
	t.Cleanup(func() { _ = writer.Shutdown() })
	reader, err := Open(cfg, "reader")
	require.NoError(t, err)
	t.Cleanup(func() { _ = reader.Shutdown() })
	_, err = writer.Register(context.Background(), "w", "1")
	require.NoError(t, err)
	w, err := reader.startWatcher(context.Background())
	require.NoError(t, err)
	t.Cleanup(w.close)
	return writer, w
}

// churn writes n revisions (a claim and its close, n/2 times) and returns
// the Delete events they make.
func churn(t *testing.T, s *Store, n int) []claims.Event {
	t.Helper()
	ctx := context.Background()
	var evs []claims.Event
	for i := 0; i < n/2; i++ {
		c, _, err := s.CreateOrGet(ctx, "k", func() (claims.Target, error) { return claims.Target{Worker: "w"}, nil })
		require.NoError(t, err)
		_, err = s.Close(ctx, "k", c.Rev, "writer")
		require.NoError(t, err)
		evs = append(evs, claims.Event{Kind: claims.Delete, Key: "k", Rev: c.Rev})
	}
	return evs
}

// TestReaderFollowsSegments: a reader a few segments behind reads across
// them in order, with no Reset.
func TestReaderFollowsSegments(t *testing.T) {
	writer, w := pausedReader(t, 1) // every record ends its segment
	rev0 := w.expect
	churn(t, writer, keepSegments-2)
	segs, err := segments(writer.path("journal"))
	require.NoError(t, err)
	require.Greater(t, len(segs), 1, "the journal rolled over")
	require.Empty(t, w.read())
	require.Equal(t, rev0+keepSegments-2, w.expect, "every revision read")
	require.Empty(t, w.view, "the claim is closed")
}

// TestReaderBehindCompaction: a reader more segments behind than are kept
// finds a revision gap: a Reset, never a silent loss.
func TestReaderBehindCompaction(t *testing.T) {
	writer, w := pausedReader(t, 1)
	churn(t, writer, 4*keepSegments)
	why := w.read()
	require.Contains(t, why, "journal gap")
	// After a resync the reader continues at the end.
	require.NoError(t, w.resyncLocked())
	require.Empty(t, w.read())
	evs := churn(t, writer, 2)
	require.Empty(t, w.read())
	require.Equal(t, evs[0].Rev+2, w.expect)
}

// TestReaderCorruptAndPartialRecords: a corrupt record is a Reset; a
// partial one waits for its end, and a writer after a crashed one ends it
// (the reader then sees a corrupt record).
func TestReaderCorruptAndPartialRecords(t *testing.T) {
	writer, w := pausedReader(t, 1<<20)
	segs, err := segments(writer.path("journal"))
	require.NoError(t, err)
	last := filepath.Join(writer.path("journal"), segs[len(segs)-1])
	appendTo := func(s string) {
		f, err := os.OpenFile(last, os.O_WRONLY|os.O_APPEND, 0)
		require.NoError(t, err)
		_, err = f.WriteString(s)
		require.NoError(t, err)
		require.NoError(t, f.Close())
	}

	appendTo(`{"rev":`)
	require.Empty(t, w.read(), "a partial record waits")
	require.NotEmpty(t, w.partial)
	churn(t, writer, 2)
	require.Equal(t, "corrupt journal record", w.read())

	require.NoError(t, w.resyncLocked())
	appendTo("not json\n")
	require.Equal(t, "corrupt journal record", w.read())
}

// TestEncode: any string is a file name; long ones are hashed.
func TestEncode(t *testing.T) {
	for _, s := range []string{"a", "a/b", "..", "@x@", strings.Repeat("é", 200), "\x00"} {
		e := encode(s)
		require.NotContains(t, e, "/")
		require.NotContains(t, e, "@")
		require.LessOrEqual(t, len(e), 1+maxPlainName)
		require.NotEqual(t, ".", e[:1])
	}
	require.NotEqual(t, encode(strings.Repeat("a", 500)), encode(strings.Repeat("a", 501)))
}
