// Package histfile is the skeleton every Porcupine checker of the
// repository instantiates, and what they share about recorded histories.
// A layer's checker is a Layer (its Checker: naming, model, reports; a
// Draw from seed to plan; an Execute from plan to recorded history); a
// Layer is a Harness, the interface the nightly campaign (cmd/campaign)
// drives: run a seed, re-check a saved history, promote a failure to
// regression data. The queue, affinity and claims checkers are Layers;
// the core's (package linearizability) implements Harness over its own
// saved form. The rest of the package is what they share about
// recorded histories: recording them (Clients, one Recorder per client
// goroutine, stamping each call's times and naming the calls in flight
// when a run does not finish), their saved form (JSON that re-checks
// deterministically), checking a run and reporting its failure
// (Checker.CheckRun: the JSON plus Porcupine's annotated HTML in a new
// directory, and the failure line the bug zoo reads), the explainer
// (Explainer: the shortest illegal prefix, the longest partial
// linearization, the state after it and the pending calls), and the
// tests' settings from the environment (EnvInt, Checker.Seeds) and
// coverage minimums (Thin).
package histfile

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"time"

	"github.com/anishathalye/porcupine"
)

// Op is one recorded call in a saved history.
type Op[I, O any] struct {
	Client int   `json:"client"`
	Input  I     `json:"input"`
	Output O     `json:"output"`
	Call   int64 `json:"call"`
	Return int64 `json:"return"`
}

// History is a history written to disk: enough to re-check it
// deterministically (the plan P, and every call with its times).
type History[P, I, O any] struct {
	Plan    P          `json:"plan"`
	Variant string     `json:"variant,omitempty"` // PLACEMENT_MUTANT when it was recorded
	Result  string     `json:"result"`            // what the check returned: Ok, Illegal or Unknown
	Note    string     `json:"note,omitempty"`
	Ops     []Op[I, O] `json:"ops"`
}

// Record returns the saved form of a run of plan that recorded ops (whose
// inputs are I and outputs O), with the check's result and a note.
func Record[P, I, O any](plan P, ops []porcupine.Operation, result porcupine.CheckResult, note string) History[P, I, O] {
	h := History[P, I, O]{Plan: plan, Variant: os.Getenv("PLACEMENT_MUTANT"), Result: string(result), Note: note}
	for _, op := range ops {
		h.Ops = append(h.Ops, Op[I, O]{Client: op.ClientId, Input: op.Input.(I), Output: op.Output.(O), Call: op.Call, Return: op.Return})
	}
	return h
}

// Operations returns the saved history as Porcupine operations.
func (h *History[P, I, O]) Operations() []porcupine.Operation {
	ops := make([]porcupine.Operation, len(h.Ops))
	for i, op := range h.Ops {
		ops[i] = porcupine.Operation{ClientId: op.Client, Input: op.Input, Output: op.Output, Call: op.Call, Return: op.Return}
	}
	return ops
}

// Read reads a saved history.
func Read[P, I, O any](path string) (*History[P, I, O], error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var h History[P, I, O]
	if err := json.Unmarshal(b, &h); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return &h, nil
}

// WriteReport writes a failing history into a new directory under dir
// (the system's temporary directory when empty), named for what was
// checked and the plan's seed: history.json (re-check it with Read, or
// copy it to the checker's testdata/histories) and history.html,
// Porcupine's visualization with the run annotated.
func WriteReport[P, I, O any](dir, what string, seed uint64, h History[P, I, O], info porcupine.LinearizationInfo, m porcupine.Model) (string, error) {
	if dir == "" {
		dir = os.TempDir()
	}
	out := filepath.Join(dir, fmt.Sprintf("%s-linearizability-seed%d-%s", what, seed, time.Now().Format("20060102-150405.000000")))
	if err := os.MkdirAll(out, 0o755); err != nil {
		return "", err
	}
	b, err := json.MarshalIndent(h, "", " ")
	if err != nil {
		return "", err
	}
	if err := os.WriteFile(filepath.Join(out, "history.json"), append(b, '\n'), 0o644); err != nil {
		return "", err
	}
	info.AddAnnotations([]porcupine.Annotation{{ClientId: 0, Tag: "run", Start: 0, End: 0,
		Description:     fmt.Sprintf("seed %d: %s", seed, h.Result),
		Details:         fmt.Sprintf("plan %+v, variant %q. %s", h.Plan, h.Variant, h.Note),
		BackgroundColor: "#ffd0d0"}})
	if err := porcupine.VisualizePath(m, info, filepath.Join(out, "history.html")); err != nil {
		return "", err
	}
	return out, nil
}

// ShortestIllegalPrefix returns the operations of the shortest prefix of
// ops, by return time, that m does not linearize (all of ops when every
// prefix is linearizable), sorted by call time: where a history stops
// being explainable.
//
// A prefix never splits operations that return at the same time: the
// harnesses record a call's halves as operations of their own over the
// call's interval (a Dispatch and the invalidation of its move, a Start
// and the leases it gave up, a Join and its registration), and a prefix
// holding one half without the other is a history no run recorded (the
// model rightly refuses it, and the trimmed history would blame the
// implementation for the trimmer's cut; it also breaks the search's
// assumption that a longer prefix of an illegal one stays illegal).
func ShortestIllegalPrefix(m porcupine.Model, ops []porcupine.Operation) []porcupine.Operation {
	sorted := append([]porcupine.Operation(nil), ops...)
	sort.SliceStable(sorted, func(i, j int) bool { return sorted[i].Return < sorted[j].Return })
	// cuts[i] is the length of the i-th prefix that ends between two
	// return times.
	var cuts []int
	for i := 1; i <= len(sorted); i++ {
		if i == len(sorted) || sorted[i].Return != sorted[i-1].Return {
			cuts = append(cuts, i)
		}
	}
	if len(cuts) == 0 {
		return nil
	}
	lo, hi := 0, len(cuts)-1
	for lo < hi {
		mid := (lo + hi) / 2
		if porcupine.CheckOperations(m, sorted[:cuts[mid]]) {
			lo = mid + 1
		} else {
			hi = mid
		}
	}
	prefix := append([]porcupine.Operation(nil), sorted[:cuts[lo]]...)
	sort.SliceStable(prefix, func(i, j int) bool { return prefix[i].Call < prefix[j].Call })
	return prefix
}

// EnvInt returns the value of the first of names that is set to a positive
// integer, or def.
func EnvInt(def int, names ...string) int {
	for _, n := range names {
		if v, err := strconv.Atoi(os.Getenv(n)); err == nil && v > 0 {
			return v
		}
	}
	return def
}
