package histfile

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"runtime"
	"testing"

	"github.com/anishathalye/porcupine"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// recordingTB is a testing.TB that keeps what CheckRun and Explain log and
// the failures they report, instead of failing the test.
type recordingTB struct {
	testing.TB
	logs, errors, skips []string
}

func (r *recordingTB) Helper() {}

func (r *recordingTB) Logf(format string, args ...any) {
	r.logs = append(r.logs, fmt.Sprintf(format, args...))
}

func (r *recordingTB) Errorf(format string, args ...any) {
	r.errors = append(r.errors, fmt.Sprintf(format, args...))
}

func (r *recordingTB) Fatalf(format string, args ...any) { r.Errorf(format, args...) }

func (r *recordingTB) Skipf(format string, args ...any) {
	r.skips = append(r.skips, fmt.Sprintf(format, args...))
}

var registerChecker = Checker[plan, int, int]{
	What:  "register",
	Env:   "HISTFILETEST",
	Dir:   "linearizability/histfile",
	Seed:  func(p plan) uint64 { return p.Seed },
	Stuck: func(n int) string { return fmt.Sprintf("%d Waits waited 5s: lost wake-up", n) },
	Model: func(plan) porcupine.Model { return register },
}

// What the bug zoo (linearizability/cmd/mutants) reads from a failure.
var zooDivergence = regexp.MustCompile(`is Illegal[^;]*|lost wake-up`)

// CheckRun passes a linearizable run and fails any other naming the seed,
// the result and the note in the line the bug zoo reads, with the report
// written where HISTFILETEST_REPORT_DIR (else LINEARIZABILITY_REPORT_DIR)
// says; it saves every history under HISTFILETEST_SAVE; a stuck run fails
// whatever the check says.
func TestCheckRun(t *testing.T) {
	legal, stale := staleRead[:2], staleRead[:3]
	for _, c := range []struct {
		name        string
		ops         []porcupine.Operation
		stuck       int
		ownDir      bool // HISTFILETEST_REPORT_DIR set (else only LINEARIZABILITY_REPORT_DIR)
		want        porcupine.CheckResult
		wantMessage string // the failure's start ("" : none)
		wantNote    string
	}{
		{name: "linearizable", ops: legal, ownDir: true, want: porcupine.Ok},
		{name: "stale read", ops: stale, ownDir: true, want: porcupine.Illegal,
			wantMessage: "seed 7: register history of 3 operations is Illegal ; report: "},
		{name: "stale read, the shared report directory", ops: stale, want: porcupine.Illegal,
			wantMessage: "seed 7: register history of 3 operations is Illegal ; report: "},
		{name: "stuck", ops: legal, stuck: 1, ownDir: true, want: porcupine.Illegal,
			wantMessage: "seed 7: register history of 2 operations is Illegal 1 Waits waited 5s: lost wake-up; report: ",
			wantNote:    "1 Waits waited 5s: lost wake-up"},
	} {
		t.Run(c.name, func(t *testing.T) {
			own, shared, save := t.TempDir(), t.TempDir(), t.TempDir()
			t.Setenv("LINEARIZABILITY_REPORT_DIR", shared)
			t.Setenv("HISTFILETEST_REPORT_DIR", "")
			if c.ownDir {
				t.Setenv("HISTFILETEST_REPORT_DIR", own)
			}
			t.Setenv("HISTFILETEST_SAVE", save)
			tb := &recordingTB{TB: t}
			require.Equal(t, c.want, registerChecker.CheckRun(tb, plan{Seed: 7}, c.ops, c.stuck))
			require.Len(t, tb.logs, 1)
			assert.Regexp(t, fmt.Sprintf(`^seed 7: checked %d operations in \S+: `, len(c.ops)), tb.logs[0])
			saved, err := Read[plan, int, int](filepath.Join(save, fmt.Sprintf("seed7-%s.json", c.want)))
			require.NoError(t, err)
			assert.Equal(t, string(c.want), saved.Result)
			assert.Equal(t, c.ops, saved.Operations())
			reportDir := shared
			if c.ownDir {
				reportDir = own
			}
			reports, _ := filepath.Glob(filepath.Join(reportDir, "register-linearizability-seed7-*"))
			if c.wantMessage == "" {
				assert.Empty(t, tb.errors)
				assert.Empty(t, reports)
				return
			}
			require.Len(t, tb.errors, 1)
			msg := tb.errors[0]
			require.Len(t, reports, 1)
			assert.Equal(t, c.wantMessage+reports[0]+"; re-check: copy history.json to linearizability/histfile/testdata/histories and run TestRecheckSaved", msg)
			assert.NotEmpty(t, zooDivergence.FindString(msg))
			h, err := Read[plan, int, int](filepath.Join(reports[0], "history.json"))
			require.NoError(t, err)
			assert.Equal(t, string(c.want), h.Result)
			assert.Equal(t, c.wantNote, h.Note)
			assert.FileExists(t, filepath.Join(reports[0], "history.html"))
			entries, _ := os.ReadDir(own)
			if !c.ownDir {
				assert.Empty(t, entries, "an empty HISTFILETEST_REPORT_DIR is not a directory")
			}
		})
	}
}

// writeHistory saves ops of the plan with seed 7 under dir as name, with
// result as its result.
func writeHistory(t *testing.T, dir, name string, ops []porcupine.Operation, result porcupine.CheckResult) string {
	b, err := json.Marshal(Record[plan, int, int](plan{Seed: 7}, ops, result, ""))
	require.NoError(t, err)
	path := filepath.Join(dir, name)
	require.NoError(t, os.WriteFile(path, b, 0o644))
	return path
}

// CheckSeeds runs and checks one plan a seed from the first (n of them,
// and on up to 4n while more says so), logging each plan, and stops at the
// first seed that fails its check, after calling failed with it.
func TestCheckSeeds(t *testing.T) {
	t.Setenv("HISTFILETEST_REPORT_DIR", t.TempDir())
	t.Setenv("HISTFILETEST_SAVE", "")
	t.Setenv("HISTFILETEST_SEED", "3")
	t.Setenv("HISTFILETEST_SEEDS", "2")
	for _, c := range []struct {
		name       string
		thinUntil  uint64 // more says too thin until this seed has run
		staleAt    uint64 // the seed whose run reads a stale value (0: none)
		wantSeeds  []uint64
		wantFailed uint64
	}{
		{name: "n seeds", wantSeeds: []uint64{3, 4}},
		{name: "on while thin", thinUntil: 6, wantSeeds: []uint64{3, 4, 5, 6}},
		{name: "up to 4n", thinUntil: 100, wantSeeds: []uint64{3, 4, 5, 6, 7, 8, 9, 10}},
		{name: "stops at a failure", thinUntil: 100, staleAt: 5, wantSeeds: []uint64{3, 4, 5}, wantFailed: 5},
	} {
		t.Run(c.name, func(t *testing.T) {
			var seeds []uint64
			var failed uint64
			tb := &failNowTB{recordingTB: recordingTB{TB: t}}
			done := make(chan struct{})
			go func() { // FailNow ends the goroutine, as it ends a test's
				defer close(done)
				registerChecker.CheckSeeds(tb, 12, func() bool { return seeds[len(seeds)-1] < c.thinUntil },
					func(seed uint64) (plan, []porcupine.Operation, int) {
						seeds = append(seeds, seed)
						if seed == c.staleAt {
							return plan{Seed: seed}, staleRead, 0
						}
						return plan{Seed: seed}, staleRead[:2], 0
					}, func(seed uint64) { failed = seed })
			}()
			<-done
			assert.Equal(t, c.wantSeeds, seeds)
			assert.Equal(t, c.wantFailed, failed)
			assert.Equal(t, c.wantFailed != 0, tb.failedNow)
			assert.Len(t, tb.errors, min(1, int(c.wantFailed)))
			assert.Contains(t, tb.logs, "seed 3: plan {Seed:3}: 2 operations")
		})
	}
}

// failNowTB is a recordingTB whose FailNow ends the goroutine, as
// testing.T's does.
type failNowTB struct {
	recordingTB
	failedNow bool
}

func (f *failNowTB) FailNow() { f.failedNow = true; runtime.Goexit() }

// RecheckSaved passes the histories that re-check to the result they were
// saved with, and fails naming any other, an unreadable file, or a pattern
// that matches nothing.
func TestRecheckSaved(t *testing.T) {
	dir := t.TempDir()
	writeHistory(t, dir, "a-ok.json", staleRead[:2], porcupine.Ok)
	writeHistory(t, dir, "b-illegal.json", staleRead, porcupine.Illegal)
	tb := &recordingTB{TB: t}
	registerChecker.RecheckSaved(tb, filepath.Join(dir, "*.json"))
	assert.Empty(t, tb.errors)

	wrong := writeHistory(t, dir, "c-wrong.json", staleRead, porcupine.Ok)
	tb = &recordingTB{TB: t}
	registerChecker.RecheckSaved(tb, filepath.Join(dir, "*.json"))
	assert.Equal(t, []string{wrong + ": re-checked Illegal, saved as Ok"}, tb.errors)

	require.NoError(t, os.WriteFile(filepath.Join(dir, "d-bad.json"), []byte("{"), 0o644))
	tb = &recordingTB{TB: t}
	registerChecker.RecheckSaved(tb, filepath.Join(dir, "d-*.json"))
	require.Len(t, tb.errors, 1)
	assert.Contains(t, tb.errors[0], "d-bad.json: ")

	tb = &recordingTB{TB: t}
	registerChecker.RecheckSaved(tb, filepath.Join(dir, "none-*.json"))
	assert.Equal(t, []string{"no saved histories in " + filepath.Join(dir, "none-*.json")}, tb.errors)
}

// ReadExplain skips without HISTFILETEST_EXPLAIN, reads and checks the
// history it names, and fails when that does not read.
func TestReadExplain(t *testing.T) {
	t.Setenv("HISTFILETEST_EXPLAIN", "")
	tb := &recordingTB{TB: t}
	h, _ := registerChecker.ReadExplain(tb)
	assert.Nil(t, h)
	assert.Equal(t, []string{"HISTFILETEST_EXPLAIN names no history"}, tb.skips)

	path := writeHistory(t, t.TempDir(), "history.json", staleRead, porcupine.Illegal)
	t.Setenv("HISTFILETEST_EXPLAIN", path)
	tb = &recordingTB{TB: t}
	h, info := registerChecker.ReadExplain(tb)
	require.NotNil(t, h)
	assert.Equal(t, staleRead, h.Operations())
	assert.Equal(t, []string{"result Illegal"}, tb.logs)
	assert.Equal(t, []int{0, 1}, LongestLinearization(info))
	assert.Empty(t, tb.errors)
	assert.Empty(t, tb.skips)

	t.Setenv("HISTFILETEST_EXPLAIN", filepath.Join(t.TempDir(), "missing.json"))
	tb = &recordingTB{TB: t}
	h, _ = registerChecker.ReadExplain(tb)
	assert.Nil(t, h)
	assert.Len(t, tb.errors, 1)
}

// Seeds reads the checker's own variables first, then the bug zoo's
// LINEARIZABILITY_ ones, then the defaults.
func TestSeeds(t *testing.T) {
	for _, c := range []struct {
		seed, seeds, zooSeed, zooSeeds string
		first                          uint64
		n                              int
	}{
		{first: 1, n: 12},
		{zooSeed: "1001", zooSeeds: "128", first: 1001, n: 128},
		{seeds: "40", zooSeed: "1001", zooSeeds: "128", first: 1001, n: 40},
		{seed: "5", seeds: "3", zooSeed: "1001", zooSeeds: "128", first: 5, n: 3},
		{seed: "x", seeds: "0", first: 1, n: 12},
	} {
		t.Setenv("HISTFILETEST_SEED", c.seed)
		t.Setenv("HISTFILETEST_SEEDS", c.seeds)
		t.Setenv("LINEARIZABILITY_SEED", c.zooSeed)
		t.Setenv("LINEARIZABILITY_SEEDS", c.zooSeeds)
		first, n := registerChecker.Seeds(12)
		assert.Equal(t, c.first, first, "%+v", c)
		assert.Equal(t, c.n, n, "%+v", c)
	}
}

// Thin names, in order, exactly the minimums not reached.
func TestThin(t *testing.T) {
	got := Thin([]Minimum{
		{Name: "enqueues", Got: 499, N: 500},
		{Name: "closes", Got: 2, N: 2},
		{Name: "cancels", Got: 0, N: 1},
		{Name: "waits", Got: 9, N: 3},
	})
	assert.Equal(t, []string{"enqueues: 499, want at least 500", "cancels: 0, want at least 1"}, got)
	assert.Empty(t, Thin(nil))
}
