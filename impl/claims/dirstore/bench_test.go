//go:build linux

package dirstore_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/placementlab/placement/impl/claims/dirstore"
)

// BenchmarkGetHit: CreateOrGet of an existing claim (a replica's first
// turn of a session another replica claimed).
func BenchmarkGetHit(b *testing.B) {
	s, err := dirstore.Open(dirstore.Config{Dir: b.TempDir()}, "a")
	require.NoError(b, err)
	defer s.Shutdown()
	_, err = s.Register(bg, "w", "1")
	require.NoError(b, err)
	_, _, err = s.CreateOrGet(bg, "s", toW)
	require.NoError(b, err)
	b.ResetTimer()
	for b.Loop() {
		if _, created, err := s.CreateOrGet(bg, "s", toW); err != nil || created {
			b.Fatal(err, created)
		}
	}
}

// BenchmarkCreateClose: a session's claim written and closed (two
// revisions, two journal records).
func BenchmarkCreateClose(b *testing.B) {
	s, err := dirstore.Open(dirstore.Config{Dir: b.TempDir()}, "a")
	require.NoError(b, err)
	defer s.Shutdown()
	_, err = s.Register(bg, "w", "1")
	require.NoError(b, err)
	for b.Loop() {
		c, _, err := s.CreateOrGet(bg, "s", toW)
		if err != nil {
			b.Fatal(err)
		}
		if _, err := s.Close(bg, "s", c.Rev, "a"); err != nil {
			b.Fatal(err)
		}
	}
}
