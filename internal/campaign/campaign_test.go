package campaign

import (
	"context"
	"errors"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// fakes are checkers that take a few milliseconds: one passes with
// coverage, one fails on unit 1, one runs once, one is skipped.
func fakes(ran *atomic.Int64) []Checker {
	pass := func(ctx context.Context, e *Env, u Unit) Result {
		ran.Add(1)
		time.Sleep(5 * time.Millisecond)
		return Result{Status: Pass, Runs: 2, Checked: 100, Coverage: map[string]int{"hits": 3, "never": 0}, Detail: "fine"}
	}
	return []Checker{
		{Name: "once", Kind: "zoo", Once: true, Run: func(ctx context.Context, e *Env, u Unit) Result {
			ran.Add(1)
			return Result{Status: Pass, Runs: 1, Detail: "caught 1/1", Zoo: []ZooRow{{Variant: "V", Caught: true, By: "x", Time: "1.0s"}}}
		}},
		{Name: "passes", Kind: "porcupine", Plan: func(r *rand.Rand, u *Unit) { u.Size = 1 + r.IntN(9) }, Run: pass},
		{Name: "fails", Kind: "rapid", Run: func(ctx context.Context, e *Env, u Unit) Result {
			ran.Add(1)
			time.Sleep(5 * time.Millisecond)
			if u.N != 1 {
				return Result{Status: Pass, Runs: 1, Checked: 10}
			}
			return Result{Status: Fail, Runs: 1, Detail: "boom", Failures: []Failure{{ID: "fails-1", Checker: u.Checker, Unit: u, Seed: u.Seed,
				What: "boom", Repro: "go test -run X", HTML: "failures/x/history.html", Log: "logs/fails-1.log"}}}
		}},
		{Name: "skipped", Kind: "tlc", Run: func(ctx context.Context, e *Env, u Unit) Result {
			ran.Add(1)
			time.Sleep(5 * time.Millisecond)
			return Result{Status: Skip, Detail: "skipping: no jar"}
		}},
	}
}

func TestUnitForIsDeterministic(t *testing.T) {
	k := Checker{Name: "c", Plan: func(r *rand.Rand, u *Unit) { u.Size = r.IntN(1000); u.Race = r.IntN(2) == 0 }}
	for n := range 20 {
		assert.Equal(t, UnitFor(k, 42, n), UnitFor(k, 42, n))
	}
	assert.NotEqual(t, UnitFor(k, 42, 0).Seed, UnitFor(k, 43, 0).Seed, "another campaign seed draws other units")
	assert.NotEqual(t, UnitFor(k, 42, 0).Seed, UnitFor(k, 42, 1).Seed, "the units of one checker differ")
	other := k
	other.Name = "d"
	assert.NotEqual(t, UnitFor(k, 42, 0).Seed, UnitFor(other, 42, 0).Seed, "checkers draw apart")
}

// TestRunRotatesAndReports: within its budget the campaign runs every
// checker, the Once one once, keeps the failure, counts the skip, saves
// its state and writes the three report files; the verdict is fail.
func TestRunRotatesAndReports(t *testing.T) {
	var ran atomic.Int64
	env := &Env{Out: t.TempDir()}
	c, err := New(Config{Budget: 400 * time.Millisecond, Seed: 7, Parallel: 2}, env, fakes(&ran), false)
	require.NoError(t, err)
	require.NoError(t, c.Run(context.Background()))
	st := c.State()
	assert.True(t, st.Finished)
	byName := map[string]*Stats{}
	for _, s := range st.Stats {
		byName[s.Name] = s
		assert.Positive(t, s.Units, "%s never ran", s.Name)
	}
	assert.Equal(t, 1, byName["once"].Units)
	assert.Len(t, byName["once"].Zoo, 1)
	assert.Equal(t, Fail, byName["fails"].Status())
	assert.Equal(t, Skip, byName["skipped"].Status())
	assert.Equal(t, Pass, byName["passes"].Status())
	assert.True(t, st.Failed())
	assert.Equal(t, int64(ran.Load()), int64(st.Stats[0].Units+st.Stats[1].Units+st.Stats[2].Units+st.Stats[3].Units))
	saved, err := ReadState(filepath.Join(env.Out, "state.json"))
	require.NoError(t, err)
	assert.Equal(t, st.Next, saved.Next)

	require.NoError(t, WriteReport(env.Out, st))
	for _, f := range []string{"summary.json", "summary.md", "index.html"} {
		b, err := os.ReadFile(filepath.Join(env.Out, f))
		require.NoError(t, err)
		for _, want := range []string{"passes", "fails", "skipped", "once", "go test -run X"} {
			assert.Contains(t, string(b), want, f)
		}
	}
	html, _ := os.ReadFile(filepath.Join(env.Out, "index.html"))
	assert.Contains(t, string(html), `href="failures/x/history.html"`)
	md, _ := os.ReadFile(filepath.Join(env.Out, "summary.md"))
	assert.Contains(t, string(md), "passes never reached: never")
}

// TestStopAndResume: a campaign stopped halfway saves its state; resumed,
// it keeps its seed, budget and time spent, runs the units the stop cut
// short first, and finishes.
func TestStopAndResume(t *testing.T) {
	var started atomic.Int64
	slow := []Checker{{Name: "slow", Kind: "go-test", Run: func(ctx context.Context, e *Env, u Unit) Result {
		started.Add(1)
		select {
		case <-ctx.Done():
		case <-time.After(50 * time.Millisecond):
		}
		return Result{Status: Pass, Runs: 1}
	}}}
	env := &Env{Out: t.TempDir()}
	c, err := New(Config{Budget: time.Second, Seed: 99, Parallel: 2}, env, slow, false)
	require.NoError(t, err)
	ctx, cancel := context.WithTimeout(context.Background(), 180*time.Millisecond)
	defer cancel()
	err = c.Run(ctx)
	require.True(t, errors.Is(err, ErrStopped), "got %v", err)
	first := c.State()
	assert.False(t, first.Finished)
	assert.NotEmpty(t, first.Redo, "the units in flight at the stop are to be run again")
	spent, done := first.Elapsed, first.Stats[0].Units

	again, err := New(Config{Budget: time.Hour, Seed: 1}, env, slow, true)
	require.NoError(t, err)
	st := again.State()
	assert.Equal(t, uint64(99), st.Seed, "the state file's seed wins")
	assert.Equal(t, time.Second, st.Budget, "the state file's budget wins")
	redo := append([]Unit(nil), st.Redo...)
	require.NoError(t, again.Run(context.Background()))
	assert.True(t, st.Finished)
	assert.Greater(t, st.Stats[0].Units, done)
	assert.GreaterOrEqual(t, st.Elapsed, time.Second)
	assert.Less(t, st.Elapsed, spent+2*time.Second, "the resumed campaign counts the time spent before")
	for _, u := range redo {
		assert.Less(t, u.N, st.Next["slow"], "unit %d was run again", u.N)
	}
}

// TestUnitOverItsLimitCannotRun: a unit that does not end within its
// checker's limit counts as a checker that could not run (an error), so
// the campaign's verdict is fail.
func TestUnitOverItsLimitCannotRun(t *testing.T) {
	hangs := []Checker{{Name: "hangs", Kind: "go-test", Limit: 30 * time.Millisecond, Run: func(ctx context.Context, e *Env, u Unit) Result {
		<-ctx.Done()
		return Result{Status: Pass, Detail: "killed"}
	}}}
	env := &Env{Out: t.TempDir()}
	c, err := New(Config{Budget: 100 * time.Millisecond, Seed: 1, Parallel: 1}, env, hangs, false)
	require.NoError(t, err)
	require.NoError(t, c.Run(context.Background()))
	s := c.State().Stats[0]
	assert.Equal(t, Error, s.Status())
	assert.True(t, c.State().Failed())
	assert.True(t, strings.Contains(s.Errs[0], "did not end within"), s.Errs[0])
}

func TestProgressLine(t *testing.T) {
	var ran atomic.Int64
	c, err := New(Config{Budget: time.Minute, Seed: 3}, &Env{Out: t.TempDir()}, fakes(&ran), false)
	require.NoError(t, err)
	c.began = time.Now()
	c.running["passes#0"] = Unit{Checker: "passes", Seed: 5, Race: true, Procs: 4}
	line := c.ProgressLine()
	for _, want := range []string{"campaign 0m00s/1m00s", "passes#0 seed 5 race P4", "0 units", "0 failures"} {
		assert.Contains(t, line, want)
	}
}

func TestCatalogue(t *testing.T) {
	seen := map[string]bool{}
	kinds := map[string]bool{}
	for _, c := range Checkers() {
		assert.False(t, seen[c.Name], "two checkers named %s", c.Name)
		seen[c.Name] = true
		kinds[c.Kind] = true
		assert.NotEmpty(t, c.Doc, c.Name)
		assert.NotNil(t, c.Run, c.Name)
	}
	for _, k := range []string{"porcupine", "rapid", "fuzz", "explore", "tlc", "replay", "zoo", "go-test"} {
		assert.True(t, kinds[k], "no checker of kind %s", k)
	}
}

func TestZooRowParses(t *testing.T) {
	m := zooRow.FindStringSubmatch("ReplaysQuarantine           rapid state machine          1.3s  foo: bar")
	require.NotNil(t, m)
	assert.Equal(t, "ReplaysQuarantine", m[1])
	assert.Equal(t, "rapid state machine", strings.TrimSpace(m[2]))
	assert.Equal(t, "1.3s", m[3])
	m = zooRow.FindStringSubmatch("Hidden                      NOBODY                      12.0s  ")
	require.NotNil(t, m)
	assert.Equal(t, "NOBODY", strings.TrimSpace(m[2]))
}
