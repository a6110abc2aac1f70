package queuelin

import (
	"os"
	"sort"
	"testing"
	"time"

	"github.com/placementlab/placement/linearizability/histfile"
)

// TestExplain prints, for the history in QUEUELIN_EXPLAIN (a saved
// history.json), the shortest prefix (by return time) that is not
// linearizable, the longest partial linearization Porcupine found, the
// model's state after it, and the calls pending there: where the history
// stops being explainable. It is skipped without the variable.
func TestExplain(t *testing.T) {
	path := os.Getenv("QUEUELIN_EXPLAIN")
	if path == "" {
		t.Skip("QUEUELIN_EXPLAIN names no history")
	}
	h, err := ReadHistory(path)
	if err != nil {
		t.Fatal(err)
	}
	res, info, _ := Check(h, time.Minute)
	t.Logf("result %s", res)
	ops := h.Operations()
	prefix := histfile.ShortestIllegalPrefix(NewModel(h.Plan.Limits), ops)
	t.Logf("shortest illegal prefix: %d operations; the last ones:", len(prefix))
	for _, op := range prefix[max(0, len(prefix)-30):] {
		t.Logf("  [%d,%d] %s", op.Call, op.Return, Describe(op.Input.(Input), op.Output.(Output)))
	}
	var best []int
	for _, part := range info.PartialLinearizations() {
		for _, lin := range part {
			if len(lin) > len(best) {
				best = lin
			}
		}
	}
	s := Init()
	done := map[int]bool{}
	for i, id := range best {
		in, out := ops[id].Input.(Input), ops[id].Output.(Output)
		ok, next := Step(h.Plan.Limits, s, in, out)
		if !ok {
			t.Fatalf("replay failed at %d", i)
		}
		s, done[id] = next, true
	}
	t.Logf("state after %d of %d operations: %s", len(best), len(ops), DescribeState(s))
	var pending []int
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
	for _, id := range pending {
		if ops[id].Call > minRet {
			break
		}
		ok, _ := Step(h.Plan.Limits, s, ops[id].Input.(Input), ops[id].Output.(Output))
		t.Logf("pending op %d [%d,%d] %s; the model accepts it next: %v", id, ops[id].Call, ops[id].Return,
			Describe(ops[id].Input.(Input), ops[id].Output.(Output)), ok)
	}
}
