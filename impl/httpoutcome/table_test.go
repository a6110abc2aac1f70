package httpoutcome_test

import (
	"fmt"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/placementlab/placement/impl/httpoutcome"
	"github.com/placementlab/placement/impl/placement"
)

// TestDefaultTable: every row of the package doc's status table, on its
// codes and its edges.
func TestDefaultTable(t *testing.T) {
	A, D, Q := placement.Accepted, placement.DefinitelyNotAccepted, placement.Ambiguous
	rows := map[string]struct {
		codes []int
		want  placement.Outcome
	}{
		"1xx-2xx":                 {[]int{100, 101, 200, 201, 204, 206, 299}, A},
		"3xx":                     {[]int{300, 301, 302, 304, 307, 308, 399}, A},
		"4xx":                     {[]int{400, 401, 403, 404, 405, 409, 413, 422, 499}, A},
		"408":                     {[]int{408}, D},
		"421":                     {[]int{421}, D},
		"425":                     {[]int{425}, D},
		"429":                     {[]int{429}, D},
		"500":                     {[]int{500}, A},
		"501-505":                 {[]int{501, 505}, A},
		"502":                     {[]int{502}, Q},
		"503":                     {[]int{503}, D},
		"504":                     {[]int{504}, Q},
		"other-5xx":               {[]int{506, 507, 508, 511, 520, 599}, Q},
		"outside-100-599":         {[]int{-1, 0, 99, 600, 999, 1000}, Q},
		"every-other-code-is-set": {nil, 0},
	}
	var tab httpoutcome.Table
	for name, r := range rows {
		for _, code := range r.codes {
			assert.Equal(t, r.want, tab.Outcome(code), "%s: %d", name, code)
		}
	}
	for code := -10; code < 1100; code++ {
		assert.Contains(t, []placement.Outcome{A, D, Q}, tab.Outcome(code), "%d has an outcome", code)
	}
}

// TestTableWith: With overrides one row and returns a copy (the original is
// unchanged); invalid codes and outcomes are errors matching
// placement.ErrInvalidArgument, leaving the table as it was.
func TestTableWith(t *testing.T) {
	var base httpoutcome.Table
	t1, err := base.With(503, placement.Ambiguous)
	require.NoError(t, err)
	assert.Equal(t, placement.Ambiguous, t1.Outcome(503))
	assert.Equal(t, placement.DefinitelyNotAccepted, base.Outcome(503), "base unchanged")
	t2, err := t1.With(404, placement.DefinitelyNotAccepted)
	require.NoError(t, err)
	assert.Equal(t, placement.DefinitelyNotAccepted, t2.Outcome(404))
	assert.Equal(t, placement.Ambiguous, t2.Outcome(503))
	assert.Equal(t, placement.Accepted, t1.Outcome(404))
	t3, err := t2.With(503, placement.DefinitelyNotAccepted)
	require.NoError(t, err)
	assert.Equal(t, placement.DefinitelyNotAccepted, t3.Outcome(503))

	for _, bad := range []struct {
		code int
		o    placement.Outcome
	}{{99, placement.Accepted}, {600, placement.Accepted}, {-1, placement.Accepted}, {200, 0}, {200, 4}, {200, 255}} {
		got, err := t2.With(bad.code, bad.o)
		assert.ErrorIs(t, err, placement.ErrInvalidArgument, fmt.Sprint(bad))
		assert.Equal(t, t2, got, "unchanged after an error")
	}
}
