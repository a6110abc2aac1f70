package affinity

import "testing"

// TestKeepRuns checks keep: one run of cands is returned as a capped
// sub-slice (an append copies, cands unchanged), scattered ones as a copy
// in order, none as nil.
func TestKeepRuns(t *testing.T) {
	cands := []Candidate{{Target: Ranked("a", 0)}, {Target: Ranked("a", 1)}, {Target: Ranked("b", 0)}, {Target: Ranked("c", 0)}}
	worker := func(w string) func(Candidate) bool { return func(c Candidate) bool { return c.Target.Worker == w } }
	run := keep(cands, worker("a"))
	if len(run) != 2 || cap(run) != 2 || &run[0] != &cands[0] {
		t.Fatalf("one run: got len %d cap %d, want the capped sub-slice", len(run), cap(run))
	}
	_ = append(run, Candidate{Target: Ranked("z", 9)})
	if cands[2].Target.Worker != "b" {
		t.Fatal("an append to the result changed cands")
	}
	sc := keep(cands, func(c Candidate) bool { return c.Target.Worker != "b" })
	if len(sc) != 3 || &sc[0] == &cands[0] || sc[0].Target.Worker != "a" || sc[2].Target.Worker != "c" {
		t.Fatalf("scattered: got %v, want a copy of a/0, a/1, c/0", sc)
	}
	if got := keep(cands, worker("x")); got != nil {
		t.Fatalf("none: got %v, want nil", got)
	}
	if all := keep(cands, func(Candidate) bool { return true }); len(all) != 4 || &all[0] != &cands[0] {
		t.Fatal("all: want cands itself")
	}
}
