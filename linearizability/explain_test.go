package linearizability

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/anishathalye/porcupine"
	"github.com/placementlab/placement/linearizability/histfile"
	"github.com/placementlab/placement/model"
)

// TestExplain prints, for the history in LINEARIZABILITY_EXPLAIN (a saved
// history.json), where it stops being explainable: the last steps of the
// longest partial linearization Porcupine found, replayed over the set of
// model states each step may lead to (the model is nondeterministic in
// the clock readings of windowed calls), the states after it, and the
// calls that could come next with how many states the model allows each.
// LINEARIZABILITY_EXPLAIN_TRY ("N id id ...") replays instead the first
// N steps of that linearization and then the listed operations (indices
// into the history) in that order, stopping at the first one the model
// refuses: a way to ask whether an order the linearization did not try
// explains the history. It is skipped without the variable. A relative
// path is taken from the module's root (where the README's commands run),
// or else from this package's directory (where go test runs the test).
func TestExplain(t *testing.T) {
	path := os.Getenv("LINEARIZABILITY_EXPLAIN")
	if path == "" {
		t.Skip("LINEARIZABILITY_EXPLAIN names no history")
	}
	path, err := explainPath(path)
	if err != nil {
		t.Fatal(err)
	}
	h, err := ReadHistory(path)
	if err != nil {
		t.Fatal(err)
	}
	st, err := NewStepper(h.Shape)
	if err != nil {
		t.Fatal(err)
	}
	ops := h.Operations()
	res, info := porcupine.CheckOperationsVerbose(PorcupineModel(st, h.Partitioned), ops, time.Minute)
	t.Logf("%s: %s (saved as %s)", path, res, h.Result)
	best := histfile.LongestLinearization(info)
	states := []model.State{st.Init()}
	describe := func(id int) string {
		op := ops[id]
		return strconv.Itoa(id) + " c" + strconv.Itoa(op.ClientId) + " [" + strconv.FormatInt(op.Call, 10) + "," +
			strconv.FormatInt(op.Return, 10) + "] " + op.Input.(Input).String() + " -> " + op.Output.(Output).String()
	}
	step := func(id int) bool {
		var next []model.State
		seen := map[string]bool{}
		for _, s := range states {
			for _, n := range st.Steps(s, ops[id].Input.(Input), ops[id].Output.(Output)) {
				if k := n.Key(); !seen[k] {
					seen[k] = true
					next = append(next, n)
				}
			}
		}
		if len(next) == 0 {
			return false
		}
		states = next
		return true
	}
	logStates := func() {
		for i, s := range states {
			t.Logf("state %d of %d:\n%s", i+1, len(states), describeState(st, &s))
		}
	}
	if try := strings.Fields(os.Getenv("LINEARIZABILITY_EXPLAIN_TRY")); len(try) > 0 {
		n, _ := strconv.Atoi(try[0])
		for _, id := range best[:min(n, len(best))] {
			if !step(id) {
				t.Fatalf("the model refuses the linearization's step %s", describe(id))
			}
		}
		for _, f := range try[1:] {
			id, err := strconv.Atoi(f)
			if err != nil || id < 0 || id >= len(ops) {
				t.Fatalf("LINEARIZABILITY_EXPLAIN_TRY: %q is no operation index", f)
			}
			if !step(id) {
				t.Logf("refused: op %s; the states before it:", describe(id))
				logStates()
				return
			}
			t.Logf("op %s: %d states", describe(id), len(states))
		}
		t.Logf("every listed operation was allowed")
		return
	}
	done := map[int]bool{}
	for i, id := range best {
		if !step(id) {
			t.Fatalf("the model refuses the linearization's step %d: %s", i, describe(id))
		}
		done[id] = true
		if i >= len(best)-30 {
			t.Logf("lin %d: op %s (%d states)", i, describe(id), len(states))
		}
	}
	logStates()
	pending, next := histfile.Pending(ops, done)
	for j, id := range pending[:min(len(pending), next+3)] {
		n := 0
		for _, s := range states {
			n += len(st.Steps(s, ops[id].Input.(Input), ops[id].Output.(Output)))
		}
		t.Logf("pending (could come next: %v): op %s: %d next states", j < next, describe(id), n)
	}
}

// explainPath resolves LINEARIZABILITY_EXPLAIN's path p: as it is if
// absolute; else from the module's root (the nearest directory above the
// package's with a go.mod) if a file is there, else from the package's
// directory, the test's working directory.
func explainPath(p string) (string, error) {
	if filepath.IsAbs(p) {
		return p, nil
	}
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for d := dir; ; d = filepath.Dir(d) {
		if _, err := os.Stat(filepath.Join(d, "go.mod")); err == nil {
			if _, err := os.Stat(filepath.Join(d, p)); err == nil {
				return filepath.Join(d, p), nil
			}
			break
		}
		if filepath.Dir(d) == d {
			break
		}
	}
	if _, err := os.Stat(p); err != nil {
		return "", fmt.Errorf("LINEARIZABILITY_EXPLAIN: %s is in neither the module's root nor %s", p, dir)
	}
	return p, nil
}
