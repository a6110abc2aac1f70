package histfile

import (
	"fmt"
	"testing"

	"github.com/anishathalye/porcupine"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// registerExplainer explains register histories; its state descriptions
// are one line, or two with twoLines.
func registerExplainer(twoLines bool) Explainer[int, int, int] {
	return Explainer[int, int, int]{
		Model: register,
		Init:  0,
		Step: func(s, in, out int) (int, bool) {
			if in >= 0 {
				return in, true
			}
			return s, out == s
		},
		Describe: func(in, out int) string {
			if in >= 0 {
				return fmt.Sprintf("write %d", in)
			}
			return fmt.Sprintf("read -> %d", out)
		},
		State: func(s int) string {
			if twoLines {
				return fmt.Sprintf("register\n%d", s)
			}
			return fmt.Sprint(s)
		},
		Next: func(s, in, out int) string {
			return fmt.Sprintf("the model reads %d", s)
		},
		Tail:  2,
		Steps: 1,
	}
}

// Explain prints the shortest illegal prefix's tail, the longest partial
// linearization's last steps, the state after it (a description of
// several lines from a line of its own) and the calls that could come
// next, and returns every pending call.
func TestExplain(t *testing.T) {
	ops := staleRead
	res, info := porcupine.CheckOperationsVerbose(register, ops, 0)
	require.Equal(t, porcupine.Illegal, res)
	for _, c := range []struct {
		twoLines bool
		state    string
	}{
		{false, "state after 2 of 4 operations: 1"},
		{true, "state after 2 of 4 operations:\nregister\n1"},
	} {
		tb := &recordingTB{TB: t}
		s, pending := registerExplainer(c.twoLines).Explain(tb, ops, info)
		assert.Empty(t, tb.errors)
		assert.Equal(t, 1, s)
		assert.Equal(t, []int{2, 3}, pending)
		assert.Equal(t, []string{
			"shortest illegal prefix: 3 operations; the last ones:",
			"  [20,30] read -> 1",
			"  [40,50] read -> 0",
			"lin 1: op 1 [20,30] read -> 1",
			c.state,
			"pending op 2 [40,50] read -> 0; the model reads 1",
		}, tb.logs)
	}
}

// Explain fails when the model refuses a step of the linearization it
// replays.
func TestExplainReplayFails(t *testing.T) {
	ops := []porcupine.Operation{{ClientId: 0, Input: 1, Output: 0, Call: 0, Return: 10}}
	_, info := porcupine.CheckOperationsVerbose(register, ops, 0)
	e := registerExplainer(false)
	e.Step = func(s, in, out int) (int, bool) { return s, false }
	tb := &recordingTB{TB: t}
	e.Explain(tb, ops, info)
	assert.Equal(t, []string{"replay failed at 0"}, tb.errors)
}

// Pending lists the calls not done by call time, and counts those called
// no later than the earliest return among them.
func TestPending(t *testing.T) {
	op := func(call, ret int64) porcupine.Operation { return porcupine.Operation{Call: call, Return: ret} }
	for _, c := range []struct {
		name    string
		ops     []porcupine.Operation
		done    map[int]bool
		pending []int
		next    int
	}{
		{"all done", []porcupine.Operation{op(0, 1)}, map[int]bool{0: true}, nil, 0},
		{"overlapping", []porcupine.Operation{op(5, 20), op(0, 10), op(10, 30), op(11, 12)}, nil, []int{1, 0, 2, 3}, 3},
		{"one at a time", []porcupine.Operation{op(0, 1), op(2, 3), op(4, 5)}, map[int]bool{0: true}, []int{1, 2}, 1},
	} {
		pending, next := Pending(c.ops, c.done)
		assert.Equal(t, c.pending, pending, c.name)
		assert.Equal(t, c.next, next, c.name)
	}
}

// LongestLinearization picks the longest partial linearization: all of a
// linearizable history.
func TestLongestLinearization(t *testing.T) {
	ops := []porcupine.Operation{
		{ClientId: 0, Input: 1, Output: 0, Call: 0, Return: 10},
		{ClientId: 1, Input: -1, Output: 1, Call: 20, Return: 30},
	}
	res, info := porcupine.CheckOperationsVerbose(register, ops, 0)
	require.Equal(t, porcupine.Ok, res)
	assert.Equal(t, []int{0, 1}, LongestLinearization(info))
}
