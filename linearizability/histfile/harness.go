package histfile

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/anishathalye/porcupine"
)

// Harness is one layer's Porcupine checker as a campaign drives it: run
// one seed's plan, check its history, and keep what failed. Layer
// implements it for every checker built on this package; a fifth layer's
// checker is a Layer value (a model in its Checker, a driver in Execute),
// not a copy of the loop, the report or the re-check.
type Harness interface {
	// Name names the checker ("queue", "affinity-replicas").
	Name() string
	// RunSeed executes seed's plan with ops operations per client, checks
	// the history it recorded and, unless it is Ok, writes the report
	// (history.json, history.html, and history.min.json: the shortest
	// prefix that stays illegal) in a new directory under reportDir.
	RunSeed(seed uint64, ops int, reportDir string) Outcome
	// Recheck checks a saved history again, deterministically.
	Recheck(path string, timeout time.Duration) (porcupine.CheckResult, error)
	// Promote copies a saved history into the package's regression data
	// (root is the module's root): a real failure stays Illegal; a false
	// alarm (the checker's own fault) is kept as a history the checker
	// must accept. It returns the file written.
	Promote(path, root string, falseAlarm bool) (string, error)
}

// Outcome is what one seed's run and check found.
type Outcome struct {
	Seed       uint64 `json:"seed"`
	Operations int    `json:"operations"`
	// Result is Ok, Illegal or Unknown (porcupine's), or Error when the
	// run could not be made or recorded (Note says why).
	Result string `json:"result"`
	Note   string `json:"note,omitempty"`
	// Report is the directory with history.json and history.html; Trimmed
	// the operations of history.min.json (0: none written).
	Report  string `json:"report,omitempty"`
	Trimmed int    `json:"trimmed,omitempty"`
	// Coverage counts what the run exercised, by name (Counts).
	Coverage map[string]int `json:"coverage,omitempty"`
	Took     time.Duration  `json:"took"`
}

// Failed reports whether the outcome is anything but Ok.
func (o Outcome) Failed() bool { return o.Result != string(porcupine.Ok) }

// ResultError is an Outcome's Result when the run itself failed.
const ResultError = "Error"

// Recorded is what a layer's driver returns for one plan: the history,
// the calls that waited their bound (a lost wake-up: the run fails), the
// run's coverage (a struct of counters, or a map[string]int) and the
// failures the driver found itself (events out of order, say).
type Recorded[P any] struct {
	Plan       P
	Ops        []porcupine.Operation
	Stuck      int
	Coverage   any
	Violations []string
}

// Layer is the skeleton of one layer's Porcupine checker: its Checker
// (naming, model, reports), how a seed becomes a plan (Draw) and how a
// plan becomes a recorded history (Execute). It is a Harness, and its
// CheckSeeds is the tests' TestLinearizable loop.
type Layer[P, I, O any] struct {
	Checker[P, I, O]
	// Label names the checker in a campaign; empty: Checker.What.
	Label string
	// Draw draws the plan of seed with ops operations per client.
	Draw func(seed uint64, ops int) P
	// Execute runs a plan and records it.
	Execute func(plan P) (Recorded[P], error)
}

// Name implements Harness.
func (l Layer[P, I, O]) Name() string {
	if l.Label != "" {
		return l.Label
	}
	return l.What
}

// RunSeed implements Harness.
func (l Layer[P, I, O]) RunSeed(seed uint64, ops int, reportDir string) Outcome {
	start := time.Now()
	rec, err := l.Execute(l.Draw(seed, ops))
	if err != nil {
		return Outcome{Seed: seed, Result: ResultError, Note: err.Error(), Took: time.Since(start)}
	}
	o, _ := l.judge(rec, reportDir, true)
	o.Took = time.Since(start)
	return o
}

// judge checks a recorded run: the history against the model (a run with
// stuck calls or violations fails whatever the check says; its check then
// has only a short while, for the report's annotations), and writes the
// report of a failure in a new directory under reportDir, with the
// trimmed history when trim is set. It returns the outcome and the saved
// history.
func (c Checker[P, I, O]) judge(rec Recorded[P], reportDir string, trim bool) (Outcome, History[P, I, O]) {
	seed := c.Seed(rec.Plan)
	o := Outcome{Seed: seed, Operations: len(rec.Ops), Coverage: Counts(rec.Coverage)}
	h := Record[P, I, O](rec.Plan, rec.Ops, "", "")
	timeout := CheckLimit
	if rec.Stuck > 0 || len(rec.Violations) > 0 {
		timeout = stuckCheckLimit
	}
	res, info, m := c.Check(&h, timeout)
	switch {
	case rec.Stuck > 0:
		res, h.Note = porcupine.Illegal, c.Stuck(rec.Stuck)
	case len(rec.Violations) > 0:
		res, h.Note = porcupine.Illegal, strings.Join(rec.Violations, "; ")
	}
	o.Result, o.Note = string(res), h.Note
	if dir := os.Getenv(c.Env + "_SAVE"); dir != "" {
		h.Result = string(res)
		_ = writeJSON(filepath.Join(dir, fmt.Sprintf("seed%d-%s.json", seed, res)), h)
	}
	if res == porcupine.Ok {
		return o, h
	}
	h.Result = string(res)
	out, err := WriteReport(reportDir, c.What, seed, h, info, m)
	if err != nil {
		o.Note += fmt.Sprintf(" (report not written: %v)", err)
		return o, h
	}
	o.Report = out
	if trim && res == porcupine.Illegal && h.Note == "" {
		if n, err := c.trim(h, filepath.Join(out, "history.min.json")); err == nil {
			o.Trimmed = n
		}
	}
	return o, h
}

// trim writes the shortest prefix of h (by return time) that the model
// still refuses, and returns its length.
func (c Checker[P, I, O]) trim(h History[P, I, O], path string) (int, error) {
	prefix := ShortestIllegalPrefix(c.Model(h.Plan), h.Operations())
	t := Record[P, I, O](h.Plan, prefix, porcupine.Illegal, fmt.Sprintf("trimmed from %d operations", len(h.Ops)))
	if res, _, _ := c.Check(&t, CheckLimit); res != porcupine.Illegal {
		return 0, fmt.Errorf("the trimmed history checks %s", res)
	}
	return len(prefix), writeJSON(path, t)
}

// Recheck implements Harness.
func (l Layer[P, I, O]) Recheck(path string, timeout time.Duration) (porcupine.CheckResult, error) {
	h, err := Read[P, I, O](path)
	if err != nil {
		return porcupine.Unknown, err
	}
	res, _, _ := l.Check(h, timeout)
	return res, nil
}

// Promote implements Harness: the history goes to Dir/testdata/histories
// (TestRecheckSaved re-checks it against the result it is saved with), as
// Illegal, or as Ok for a false alarm.
func (l Layer[P, I, O]) Promote(path, root string, falseAlarm bool) (string, error) {
	h, err := Read[P, I, O](path)
	if err != nil {
		return "", err
	}
	return promote(path, filepath.Join(root, l.Dir, "testdata", "histories"), l.Name(), l.Seed(h.Plan), falseAlarm,
		func(result string) error {
			h.Result = result
			if res, _, _ := l.Check(h, time.Minute); string(res) != result && !falseAlarm {
				return fmt.Errorf("%s re-checks %s, not %s", path, res, result)
			}
			return nil
		}, func(dst string) error { return writeJSON(dst, h) })
}

// ErrNotIllegal says a history promoted as a real failure does not
// re-check Illegal.
var ErrNotIllegal = errors.New("histfile: the history does not re-check Illegal")

// promote is Promote's common part: the file's name in dir, the result it
// is saved with (Illegal, or Ok for a false alarm), its re-check (set)
// and its writing (write).
func promote(path, dir, name string, seed uint64, falseAlarm bool, set func(result string) error, write func(dst string) error) (string, error) {
	result, kind := string(porcupine.Illegal), "bug"
	if falseAlarm {
		result, kind = string(porcupine.Ok), "false-alarm"
	}
	if err := set(result); err != nil {
		return "", fmt.Errorf("%w: %v", ErrNotIllegal, err)
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", err
	}
	dst := filepath.Join(dir, fmt.Sprintf("campaign-%s-%s-seed%d.json", kind, name, seed))
	return dst, write(dst)
}

// PromoteFile is Promote for a checker whose saved histories are of
// another type: set re-checks the history as result (Illegal, or Ok for a
// false alarm) and write writes it. The file goes to dir.
func PromoteFile(path, dir, name string, seed uint64, falseAlarm bool, set func(result string) error, write func(dst string) error) (string, error) {
	return promote(path, dir, name, seed, falseAlarm, set, write)
}

func writeJSON(path string, v any) error {
	b, err := json.MarshalIndent(v, "", " ")
	if err != nil {
		return err
	}
	return os.WriteFile(path, append(b, '\n'), 0o644)
}

// CheckSeeds is a TestLinearizable's loop over the layer (Checker's
// CheckSeeds with Draw and Execute): ops operations per client, def seeds
// by default, more seeds while more says the runs are too thin, and
// cover called with each run's coverage.
func (l Layer[P, I, O]) CheckSeeds(t testing.TB, def, ops int, more func() bool, cover func(rec Recorded[P]), failed func(seed uint64)) {
	t.Helper()
	l.Checker.CheckSeeds(t, def, more, func(seed uint64) (P, []porcupine.Operation, int) {
		rec, err := l.Execute(l.Draw(seed, ops))
		if err != nil {
			t.Fatalf("seed %d: %v", seed, err)
		}
		for _, v := range rec.Violations {
			t.Errorf("seed %d: %s", seed, v)
		}
		if cover != nil {
			cover(rec)
		}
		return rec.Plan, rec.Ops, rec.Stuck
	}, failed)
}

// Counts flattens a coverage value into named counters: a map[string]int
// as it is, a struct's int fields by name (nested structs and arrays as
// Outer.Inner and Name[i]), anything else as nothing.
func Counts(cov any) map[string]int {
	if m, ok := cov.(map[string]int); ok {
		return m
	}
	out := map[string]int{}
	if cov == nil {
		return out
	}
	flatten(out, "", reflect.ValueOf(cov))
	return out
}

func flatten(out map[string]int, name string, v reflect.Value) {
	switch v.Kind() {
	case reflect.Pointer, reflect.Interface:
		if !v.IsNil() {
			flatten(out, name, v.Elem())
		}
	case reflect.Struct:
		for i := 0; i < v.NumField(); i++ {
			f := v.Type().Field(i)
			if !f.IsExported() {
				continue
			}
			n := f.Name
			if name != "" {
				n = name + "." + n
			}
			flatten(out, n, v.Field(i))
		}
	case reflect.Array, reflect.Slice:
		for i := 0; i < v.Len(); i++ {
			flatten(out, fmt.Sprintf("%s[%d]", name, i), v.Index(i))
		}
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		out[name] = int(v.Int())
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		out[name] = int(v.Uint())
	}
}

// Zero returns the counters of cov that are zero, sorted: what the runs
// never reached.
func Zero(cov map[string]int) []string {
	var out []string
	for k, v := range cov {
		if v == 0 {
			out = append(out, k)
		}
	}
	sort.Strings(out)
	return out
}
