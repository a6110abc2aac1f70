package main

import (
	"os"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// maxPlacementLines is the bound on the reference router's
// placement handling.
const maxPlacementLines = 60

// TestPlacementLines counts the non-blank, non-comment lines between the
// markers in main.go, as it is on disk, and fails above 60.
func TestPlacementLines(t *testing.T) {
	src, err := os.ReadFile("main.go")
	require.NoError(t, err)
	n, err := placementLines(string(src))
	require.NoError(t, err)
	t.Logf("placement handling: %d lines", n)
	assert.LessOrEqual(t, n, maxPlacementLines, "cmd/router/main.go's placement handling is over the bound")
	assert.Positive(t, n)
	assert.Equal(t, string(src), mainSource, "the binary counts the same source")
}

// The counter skips blank lines and comments, and refuses missing,
// repeated or unclosed markers.
func TestPlacementLinesCounter(t *testing.T) {
	n, err := placementLines("a\n// placement: begin\n\n// c\n  x := 1 // trailing\n\ty()\n// placement: end\nz\n")
	require.NoError(t, err)
	assert.Equal(t, 2, n)
	for _, bad := range []string{
		"x\n",
		"// placement: begin\nx\n",
		"// placement: end\n",
		"// placement: begin\n// placement: end\n// placement: begin\n// placement: end\n",
	} {
		_, err := placementLines(bad)
		assert.Error(t, err, bad)
	}
}
