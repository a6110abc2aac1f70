package histfile

import (
	"path/filepath"
	"testing"

	"github.com/anishathalye/porcupine"
	"github.com/stretchr/testify/require"
)

// A register: Input is a write (>= 0) or a read (-1); Output what a read saw.
var register = porcupine.Model{
	Init: func() any { return 0 },
	Step: func(state, input, output any) (bool, any) {
		if in := input.(int); in >= 0 {
			return true, in
		}
		return output.(int) == state.(int), state
	},
}

type plan struct{ Seed uint64 }

// staleRead is a register history that is not linearizable: its third
// call reads a value overwritten before it began.
var staleRead = []porcupine.Operation{
	{ClientId: 0, Input: 1, Output: 0, Call: 0, Return: 10},
	{ClientId: 1, Input: -1, Output: 1, Call: 20, Return: 30},
	{ClientId: 1, Input: -1, Output: 0, Call: 40, Return: 50}, // stale
	{ClientId: 0, Input: 2, Output: 0, Call: 60, Return: 70},
}

// A history written by WriteReport reads back with Read into the same
// operations, re-checks to the same result, and has its visualization; the
// shortest illegal prefix ends at the stale read.
func TestReportRoundTrip(t *testing.T) {
	ops := staleRead
	res, info := porcupine.CheckOperationsVerbose(register, ops, 0)
	require.Equal(t, porcupine.Illegal, res)
	h := Record[plan, int, int](plan{Seed: 7}, ops, res, "a stale read")
	dir, err := WriteReport(t.TempDir(), "register", 7, h, info, register)
	require.NoError(t, err)
	require.FileExists(t, filepath.Join(dir, "history.html"))
	back, err := Read[plan, int, int](filepath.Join(dir, "history.json"))
	require.NoError(t, err)
	require.Equal(t, h, *back)
	require.Equal(t, ops, back.Operations())
	require.False(t, porcupine.CheckOperations(register, back.Operations()))
	require.Len(t, ShortestIllegalPrefix(register, ops), 3)
	require.Equal(t, 5, EnvInt(5, "HISTFILE_TEST_UNSET"))
}

// The shortest illegal prefix never splits operations that return at the
// same time (a call's two halves, as the affinity harness records a
// Dispatch and then its move over one interval): here a read of 2 returns
// with the write of 2 it follows (recorded first), a legal pair; a cut
// between them is an illegal prefix of a legal history. The stale read
// after them is the real failure. (The campaign of 2026-12-05's trimmed
// affinity history of seed 859763584 ended at such a cut.)
func TestShortestIllegalPrefixKeepsHalvesTogether(t *testing.T) {
	ops := []porcupine.Operation{
		{ClientId: 0, Input: 1, Output: 0, Call: 0, Return: 10},
		{ClientId: 0, Input: -1, Output: 2, Call: 20, Return: 30},
		{ClientId: 1, Input: 2, Output: 0, Call: 20, Return: 30},
		{ClientId: 0, Input: -1, Output: 1, Call: 40, Return: 50}, // stale
	}
	require.False(t, porcupine.CheckOperations(register, ops[:2]))
	require.True(t, porcupine.CheckOperations(register, ops[:3]))
	prefix := ShortestIllegalPrefix(register, ops)
	require.Len(t, prefix, 4)
	require.False(t, porcupine.CheckOperations(register, prefix))
}
