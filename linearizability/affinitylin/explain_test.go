package affinitylin

import (
	"os"
	"sort"
	"testing"
	"time"

	"github.com/placementlab/placement/linearizability/histfile"
)

// TestExplain prints, for the history in AFFINITYLIN_EXPLAIN (a saved
// history.json), the longest prefix Porcupine could linearize, the model's
// state after it, and the calls pending there: where the history stops
// being explainable. It is skipped without the variable.
func TestExplain(t *testing.T) {
	path := os.Getenv("AFFINITYLIN_EXPLAIN")
	if path == "" {
		t.Skip("AFFINITYLIN_EXPLAIN names no history")
	}
	h, err := ReadHistory(path)
	if err != nil {
		t.Fatal(err)
	}
	res, info, _ := Check(h, time.Minute)
	t.Logf("result %s", res)
	ops := h.Operations()
	// The shortest prefix that is not linearizable: the calls that
	// returned by time T, for the least such T.
	prefix := histfile.ShortestIllegalPrefix(NewModel(h.Plan.Hard), ops)
	t.Logf("shortest illegal prefix: %d operations; the last ones:", len(prefix))
	for _, op := range prefix[max(0, len(prefix)-40):] {
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
	s := Init(h.Plan.Hard)
	done := map[int]bool{}
	var last int64
	for i, id := range best {
		in, out := ops[id].Input.(Input), ops[id].Output.(Output)
		next := Step(s, in, out)
		if len(next) == 0 {
			t.Fatalf("replay failed at %d", i)
		}
		s = next[0]
		done[id] = true
		if i >= len(best)-15 {
			t.Logf("lin %d: op %d [%d,%d] %s", i, id, ops[id].Call, ops[id].Return, Describe(in, out))
		}
		last = max(last, ops[id].Call)
	}
	t.Logf("state after %d of %d operations:\n%s", len(best), len(ops), s)
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
		in, out := ops[id].Input.(Input), ops[id].Output.(Output)
		var alts []string
		for _, r := range results(s, in) {
			alts = append(alts, Describe(in, r.out))
		}
		t.Logf("pending op %d [%d,%d] %s; the model allows %v", id, ops[id].Call, ops[id].Return, Describe(in, out), alts)
	}
	// The calls of each client just before the pending ones.
	for _, id := range pending[:min(len(pending), 8)] {
		c := ops[id].ClientId
		for j := id - 1; j >= 0 && j >= id-4; j-- {
			if ops[j].ClientId == c {
				t.Logf("  c%d before: op %d [%d,%d] %s", c, j, ops[j].Call, ops[j].Return, Describe(ops[j].Input.(Input), ops[j].Output.(Output)))
			}
		}
	}
}
