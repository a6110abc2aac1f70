package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"regexp"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/placementlab/placement/impl/claims"
)

// figures are what report.md must show: each pattern must match.
var figures = []struct{ what, pattern string }{
	{"the command", "Produced by `go run ./benchmarks/cmd/claimsfig[^`]*`"},
	{"the machine", `Machine: \w+/\w+, \d+ CPUs.*go\d`},
	{"first-turn latency, new session", `\| first-turn claim latency, new session[^|]*\| p50 [0-9.]+ ms, p99 [0-9.]+ ms \| memstore p50 [0-9.]+ ms \([0-9.]+×\) \|`},
	{"first-turn latency, adopted claim", `\| first-turn claim latency, claim written by another replica[^|]*\| p50 [0-9.]+ ms, p99 [0-9.]+ ms`},
	{"cached-turn cost", `\| cached turn[^|]*\| [0-9.]+ ns, 0 store calls in \d+ turns \| the core alone [0-9.]+ ns \([0-9.]+×\) \|`},
	{"claims per second", `\| claims per second, \d+ replicas × \d+ in flight \| \d+/s \| 1 replica \d+/s \([0-9.]+×\)[^|]* \|`},
	{"agreement after a restart", `\| every replica agrees with the store after a member restart \(\d+ restarts\) \| median [0-9.]+ ms, max [0-9.]+ ms \| after the stop: median [0-9.]+ ms, max [0-9.]+ ms \|`},
	{"the latency table", `(?m)^\| etcd, new session \| Start \| [0-9.]+ ms \| [0-9.]+ ms \| [0-9.]+ ms \| [0-9.]+ ms \|`},
	{"the latency plot", `!\[[^]]*\]\(first-turn\.svg\)`},
	{"the cached table", `(?m)^\| core alone \(impl/placement\) \| [0-9.]+ ns \|`},
	{"the claims/s table", `(?m)^\| etcd \| 1 \| \d+ \| \d+ \| \d+ \| \d+ \| 1\.00 \|`},
	{"the agreement table", `(?m)^\| 1 \| \d \((leader|follower)\) \| \d+ \| [0-9.]+ ms \| [0-9.]+ ms \| [0-9.]+ ms \| [0-9.]+ ms \|`},
	{"the cluster plot", `!\[[^]]*\]\(cluster\.svg\)`},
}

// checkReport returns an error naming every figure md lacks.
func checkReport(md string) error {
	var missing []string
	for _, f := range figures {
		if !regexp.MustCompile(f.pattern).MatchString(md) {
			missing = append(missing, f.what)
		}
	}
	if len(missing) > 0 {
		return fmt.Errorf("report.md lacks: %s", strings.Join(missing, "; "))
	}
	return nil
}

// tiny are flags for a run of a few seconds.
var tiny = []string{"-replicas", "2", "-first", "5", "-cached-ops", "2000", "-cached-rounds", "2", "-rate-for", "200ms",
	"-in-flight", "2", "-restarts", "2", "-sessions", "3", "-fresh", "2", "-downtime", "200ms", "-settle", "100ms"}

// TestRun runs the command with tiny counts (5 to 10 s on a loaded
// 2-core machine): report.md has every figure, both plots are SVG, and no
// goroutine outlives the run (etcd's peer keep-alive connections end by
// their 5 s read timeout, so the check waits up to 15 s).
func TestRun(t *testing.T) {
	// run's signal.NotifyContext starts os/signal's loop, which lives as
	// long as the process: start it before counting.
	_, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	stop()
	before := runtime.NumGoroutine()
	dir := t.TempDir()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	var out bytes.Buffer
	start := time.Now()
	require.NoError(t, run(ctx, append(tiny, "-out", dir), &out))
	t.Logf("run took %v:\n%s", time.Since(start), out.String())
	md, err := os.ReadFile(filepath.Join(dir, "report.md"))
	require.NoError(t, err)
	require.NoError(t, checkReport(string(md)), "%s", md)
	for _, name := range []string{"first-turn.svg", "cluster.svg"} {
		svg, err := os.ReadFile(filepath.Join(dir, name))
		require.NoError(t, err)
		require.Contains(t, string(svg), "<svg", name)
	}
	require.Contains(t, out.String(), "cached turn: ")

	deadline := time.Now().Add(15 * time.Second)
	for runtime.NumGoroutine() > before {
		if time.Now().After(deadline) {
			buf := make([]byte, 1<<20)
			t.Fatalf("goroutine leak: %d before, %d after\n%s", before, runtime.NumGoroutine(), buf[:runtime.Stack(buf, true)])
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// fakeResults are results with every figure, for the checker's tests.
func fakeResults() *results {
	ms := func(v ...float64) []time.Duration {
		out := make([]time.Duration, len(v))
		for i, x := range v {
			out[i] = time.Duration(x * float64(time.Millisecond))
		}
		return out
	}
	o, err := parse(nil)
	if err != nil {
		panic(err)
	}
	return &results{
		opts: o, started: time.Date(2026, 12, 2, 14, 0, 0, 0, time.UTC), took: time.Minute, load: "1.00 1.00 1.00",
		first: []*latencies{
			{name: "etcd, new session", start: ms(1, 2, 3), whole: ms(2, 3, 4), storeCalls: 3},
			{name: "etcd, claim exists (another replica's)", start: ms(0.4, 0.5), whole: ms(0.6, 0.7), storeCalls: 3},
			{name: "memstore, new session", start: ms(0.03, 0.04), whole: ms(0.04, 0.05), storeCalls: 3},
		},
		cached: &cachedResult{ops: 1000, core: []float64{30, 31}, repl: []float64{150, 160}},
		rates: []*rateResult{
			{store: "etcd", replicas: 1, inFlight: 4, claims: 700, elapsed: time.Second, whole: ms(4, 5)},
			{store: "etcd", replicas: 2, inFlight: 4, claims: 750, elapsed: time.Second, whole: ms(8, 9)},
			{store: "etcd", replicas: 3, inFlight: 4, claims: 800, elapsed: time.Second, whole: ms(12, 14), cpu: 1600 * time.Millisecond},
			{store: "memstore", replicas: 3, inFlight: 4, claims: 90000, elapsed: time.Second, whole: ms(0.01)},
		},
		agree: []*agreeResult{
			{member: 0, leader: true, afterStop: 300 * time.Millisecond, stopTook: time.Second, restartTook: 200 * time.Millisecond, afterRestart: 2 * time.Millisecond, passes: 10},
			{member: 2, afterStop: 250 * time.Millisecond, stopTook: time.Second, restartTook: 150 * time.Millisecond, afterRestart: time.Millisecond, passes: 9},
		},
	}
}

// TestCheckReport: the checker passes a complete report and catches each
// figure taken out of it (its broken variants).
func TestCheckReport(t *testing.T) {
	md := report(fakeResults())
	require.NoError(t, checkReport(md), "%s", md)
	for _, f := range figures {
		loc := regexp.MustCompile(f.pattern).FindStringIndex(md)
		require.NotNil(t, loc, f.what)
		broken := md[:loc[0]] + md[loc[1]:]
		err := checkReport(broken)
		require.Error(t, err, "a report without %s", f.what)
		require.Contains(t, err.Error(), f.what)
	}
	// A cached turn that made a store call is not the figure.
	r := fakeResults()
	r.cached.storeCalls = 2
	require.ErrorContains(t, checkReport(report(r)), "cached-turn cost")
}

// TestPlots draws both plots from fake results.
func TestPlots(t *testing.T) {
	r := fakeResults()
	for _, draw := range []func(*results, *bytes.Buffer) error{
		func(r *results, b *bytes.Buffer) error { return plotFirstTurn(r, b) },
		func(r *results, b *bytes.Buffer) error { return plotCluster(r, b) },
	} {
		var b bytes.Buffer
		require.NoError(t, draw(r, &b))
		require.Contains(t, b.String(), "<svg")
	}
}

func TestRunErrors(t *testing.T) {
	dir := t.TempDir()
	for _, args := range [][]string{
		{"-replicas", "1"},
		{"-first", "0"},
		{"-restarts", "0"},
		{"-fresh", "-1"},
		{"-rate-for", "0s"},
		{"-settle", "-1s"},
		{"extra"},
		{"-no-such-flag"},
	} {
		var out bytes.Buffer
		require.Error(t, run(context.Background(), append(args, "-out", dir), &out), "%v", args)
	}
}

// TestJudge: the agreement check counts every turn that failed, was
// placed unclaimed, or went elsewhere than the store's claim (another
// target, another revision, no claim), and consistent refuses the same.
func TestJudge(t *testing.T) {
	keys := []string{"a", "b"}
	truth := map[string]claims.Claim{
		"a": {Key: "a", Rev: 5, Target: claims.Target{Worker: "w1"}},
		"b": {Key: "b", Rev: 7, Target: claims.Target{Worker: "w2"}},
	}
	good := func() passRecord {
		return passRecord{views: [][]routed{
			{{target: truth["a"].Target, rev: 5}, {target: truth["b"].Target, rev: 7}},
			{{target: truth["a"].Target, rev: 5}, {target: truth["b"].Target, rev: 7}},
		}}
	}
	e, u, m := judge(good(), keys, truth)
	require.Zero(t, e+u+m)
	require.True(t, consistent(good()))

	for name, c := range map[string]struct {
		mutate  func(p *passRecord)
		e, u, m int
	}{
		"failed turn":    {func(p *passRecord) { p.views[1][0].err = errors.New("down") }, 1, 0, 0},
		"unclaimed":      {func(p *passRecord) { p.views[0][1].unclaimed = true }, 0, 1, 0},
		"other target":   {func(p *passRecord) { p.views[1][1].target = claims.Target{Worker: "w3"} }, 0, 0, 1},
		"other revision": {func(p *passRecord) { p.views[0][0].rev = 4 }, 0, 0, 1},
	} {
		p := good()
		c.mutate(&p)
		e, u, m := judge(p, keys, truth)
		require.Equal(t, []int{c.e, c.u, c.m}, []int{e, u, m}, name)
		require.False(t, consistent(p), name)
	}
	// No claim in the store: every replica's turn on it went elsewhere.
	_, _, m = judge(good(), keys, map[string]claims.Claim{"a": truth["a"]})
	require.Equal(t, 2, m)
}

func TestQuantile(t *testing.T) {
	ds := []time.Duration{5, 1, 4, 2, 3, 10, 9, 8, 7, 6}
	require.Equal(t, time.Duration(5), quantile(ds, 0.5))
	require.Equal(t, time.Duration(9), quantile(ds, 0.9))
	require.Equal(t, time.Duration(10), quantile(ds, 0.99))
	require.Equal(t, time.Duration(1), quantile(ds, 0))
	require.Zero(t, quantile(nil, 0.5))
	require.Equal(t, 2.5, median([]float64{4, 1, 3, 2}))
}

// TestRateOnly runs only etcd's own rate and claims/s, with profiles: the
// tables go to stdout, each etcd claims/s phase has its profiles, and no
// report is written.
func TestRateOnly(t *testing.T) {
	dir, prof := t.TempDir(), t.TempDir()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	var out bytes.Buffer
	require.NoError(t, run(ctx, append(tiny, "-out", dir, "-rate-only", "-profile", prof), &out))
	require.Regexp(t, `(?m)^\| etcd \| 1 \| \d+ \| \d+ \| \d+ \| \d+ \| 1\.00 \|`, out.String())
	require.Regexp(t, `(?m)^\| 2 \| \d+ \| \d+ \| [0-9.]+ ms \|`, out.String())
	for _, n := range []string{"1", "2"} {
		for _, kind := range []string{"cpu", "mutex", "mutex-base", "block", "block-base"} {
			fi, err := os.Stat(filepath.Join(prof, "claims-"+n+"-"+kind+".pprof"))
			require.NoError(t, err)
			require.NotZero(t, fi.Size(), kind)
		}
	}
	_, err := os.Stat(filepath.Join(dir, "report.md"))
	require.ErrorIs(t, err, os.ErrNotExist)
}
