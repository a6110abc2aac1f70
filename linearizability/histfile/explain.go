package histfile

import (
	"sort"
	"strings"
	"testing"

	"github.com/anishathalye/porcupine"
)

// Explainer says how to explain one layer's histories (Explain): the
// model, replayed one step at a time on states S with inputs I and outputs
// O, and how to print it.
type Explainer[S, I, O any] struct {
	// Model is the Porcupine model, for the shortest illegal prefix.
	Model porcupine.Model
	// Init is the model's initial state.
	Init S
	// Step returns the state after the call in s, and false when the model
	// refuses it there (a nondeterministic model: its first next state).
	Step func(s S, in I, out O) (S, bool)
	// Describe describes a call as the reports print it.
	Describe func(in I, out O) string
	// State describes a state; a description of several lines is printed
	// from a line of its own.
	State func(s S) string
	// Next says what the model allows of the call as the next step in s
	// (the end of a pending call's line).
	Next func(s S, in I, out O) string
	// Tail is how many of the shortest illegal prefix's last operations to
	// print, Steps how many of the linearization's last steps (0: none).
	Tail, Steps int
}

// Explain logs on t where the history ops stops being explainable, info
// being what its check found: the shortest illegal prefix (its last Tail
// operations), the longest partial linearization the check found (its last
// Steps steps), the model's state after it, and the pending calls that
// could come next (Pending), each with what the model allows it. It
// returns the state and all the pending calls (indices into ops, by call
// time). It fails t if the model refuses a step of the linearization.
func (e Explainer[S, I, O]) Explain(t testing.TB, ops []porcupine.Operation, info porcupine.LinearizationInfo) (S, []int) {
	t.Helper()
	prefix := ShortestIllegalPrefix(e.Model, ops)
	t.Logf("shortest illegal prefix: %d operations; the last ones:", len(prefix))
	for _, op := range prefix[max(0, len(prefix)-e.Tail):] {
		t.Logf("  [%d,%d] %s", op.Call, op.Return, e.describe(op))
	}
	best := LongestLinearization(info)
	s := e.Init
	done := map[int]bool{}
	for i, id := range best {
		next, ok := e.Step(s, ops[id].Input.(I), ops[id].Output.(O))
		if !ok {
			t.Fatalf("replay failed at %d", i)
			return s, nil
		}
		s, done[id] = next, true
		if i >= len(best)-e.Steps {
			t.Logf("lin %d: op %d [%d,%d] %s", i, id, ops[id].Call, ops[id].Return, e.describe(ops[id]))
		}
	}
	desc, sep := e.State(s), " "
	if strings.Contains(desc, "\n") {
		sep = "\n"
	}
	t.Logf("state after %d of %d operations:%s%s", len(best), len(ops), sep, desc)
	pending, next := Pending(ops, done)
	for _, id := range pending[:next] {
		op := ops[id]
		t.Logf("pending op %d [%d,%d] %s; %s", id, op.Call, op.Return, e.describe(op), e.Next(s, op.Input.(I), op.Output.(O)))
	}
	return s, pending
}

func (e Explainer[S, I, O]) describe(op porcupine.Operation) string {
	return e.Describe(op.Input.(I), op.Output.(O))
}

// LongestLinearization returns the longest of the partial linearizations
// a check found (operation indices in linearization order; the first of
// the longest), over all partitions.
func LongestLinearization(info porcupine.LinearizationInfo) []int {
	var best []int
	for _, part := range info.PartialLinearizations() {
		for _, lin := range part {
			if len(lin) > len(best) {
				best = lin
			}
		}
	}
	return best
}

// Pending returns the operations of ops not done, as indices into ops by
// call time, and how many of them, from the first, could be linearized
// next: those called no later than the earliest return among them.
func Pending(ops []porcupine.Operation, done map[int]bool) (pending []int, next int) {
	for id := range ops {
		if !done[id] {
			pending = append(pending, id)
		}
	}
	sort.Slice(pending, func(i, j int) bool { return ops[pending[i]].Call < ops[pending[j]].Call })
	minRet := int64(1 << 62)
	for _, id := range pending {
		minRet = min(minRet, ops[id].Return)
	}
	for next < len(pending) && ops[pending[next]].Call <= minRet {
		next++
	}
	return pending, next
}
