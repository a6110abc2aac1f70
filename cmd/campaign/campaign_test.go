package main

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/anishathalye/porcupine"
	"github.com/chromedp/chromedp"
	"github.com/placementlab/placement/internal/campaign"
	"github.com/placementlab/placement/linearizability/histfile"
	"github.com/placementlab/placement/linearizability/queuelin"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestHarnessesMatchTheCatalogue: every Porcupine checker of the campaign
// has a harness here, and every harness a checker.
func TestHarnessesMatchTheCatalogue(t *testing.T) {
	var inCatalogue []string
	for _, c := range campaign.Checkers() {
		if c.Kind == "porcupine" {
			inCatalogue = append(inCatalogue, c.Name)
		}
	}
	var harnesses []string
	for n, h := range Harnesses {
		assert.Equal(t, n, h.Name())
		harnesses = append(harnesses, n)
	}
	sort.Strings(inCatalogue)
	sort.Strings(harnesses)
	assert.Equal(t, inCatalogue, harnesses)
}

// brokenQueue is the queue's harness with a model that refuses every
// Cancel: a checker that must report the first history with a cancel as
// Illegal (the skeleton's failure path, end to end).
func brokenQueue() histfile.Layer[queuelin.Plan, queuelin.Input, queuelin.Output] {
	h := queuelin.Harness
	h.Model = func(p queuelin.Plan) porcupine.Model {
		m := queuelin.NewModel(p.Limits)
		step := m.Step
		m.Step = func(s, in, out any) (bool, any) {
			if in.(queuelin.Input).Op == queuelin.OpCancel {
				return false, s
			}
			return step(s, in, out)
		}
		return m
	}
	return h
}

// TestFailureReportedTrimmedAndPromoted: a run the model refuses gives an
// Illegal outcome with its report (history.json, Porcupine's HTML, the
// trimmed history, shorter and still Illegal); promoted, it lands in the
// package's testdata as Illegal, or as Ok when it is a false alarm.
func TestFailureReportedTrimmedAndPromoted(t *testing.T) {
	h := brokenQueue()
	dir := t.TempDir()
	o := h.RunSeed(1, 40, dir)
	require.Equal(t, string(porcupine.Illegal), o.Result, o.Note)
	require.NotEmpty(t, o.Report)
	for _, f := range []string{"history.json", "history.html", "history.min.json"} {
		assert.FileExists(t, filepath.Join(o.Report, f))
	}
	assert.Positive(t, o.Trimmed)
	assert.Less(t, o.Trimmed, o.Operations, "the trimmed history is shorter")
	res, err := h.Recheck(filepath.Join(o.Report, "history.min.json"), time.Minute)
	require.NoError(t, err)
	assert.Equal(t, porcupine.Illegal, res)
	res, err = queuelin.Harness.Recheck(filepath.Join(o.Report, "history.json"), time.Minute)
	require.NoError(t, err)
	assert.Equal(t, porcupine.Ok, res, "the right model accepts it: a false alarm of the broken one")

	root := t.TempDir()
	dst, err := h.Promote(filepath.Join(o.Report, "history.min.json"), root, false)
	require.NoError(t, err)
	assert.True(t, strings.HasPrefix(dst, filepath.Join(root, "linearizability", "queuelin", "testdata", "histories")), dst)
	saved, err := queuelin.ReadHistory(dst)
	require.NoError(t, err)
	assert.Equal(t, string(porcupine.Illegal), saved.Result)
	_, err = queuelin.Harness.Promote(filepath.Join(o.Report, "history.min.json"), root, false)
	assert.ErrorIs(t, err, histfile.ErrNotIllegal, "the right model accepts it: not a bug to keep")
	dst, err = queuelin.Harness.Promote(filepath.Join(o.Report, "history.json"), root, true)
	require.NoError(t, err)
	saved, err = queuelin.ReadHistory(dst)
	require.NoError(t, err)
	assert.Equal(t, string(porcupine.Ok), saved.Result, "a false alarm is kept as a history the checker must accept")
}

func TestLargerConfig(t *testing.T) {
	text, err := larger("../../spec/tla/MCClaims.cfg", []string{"MaxRev = 4", "Sessions = {s1, s2}"})
	require.NoError(t, err)
	assert.Contains(t, text, "\n    MaxRev = 4\n")
	assert.Contains(t, text, "\n    Sessions = {s1, s2}\n")
	_, err = larger("../../spec/tla/MCClaims.cfg", []string{"NoSuch = 1"})
	assert.Error(t, err)
	_, err = larger("../../spec/tla/MCClaims.cfg", []string{"MaxRev"})
	assert.Error(t, err)
}

// reportWithOneFailure writes, into dir, the report of a campaign in
// which every checker of the catalogue ran a unit, the queue's with a
// real failure (brokenQueue's), TLC skipped.
func reportWithOneFailure(t *testing.T, dir string) *campaign.State {
	t.Helper()
	env := &campaign.Env{Out: dir}
	o := brokenQueue().RunSeed(1, 40, filepath.Join(dir, "failures"))
	require.True(t, o.Failed())
	logs := filepath.Join(dir, "logs")
	require.NoError(t, os.MkdirAll(logs, 0o755))
	st := &campaign.State{Seed: 20261205, Budget: 30 * time.Minute, Elapsed: 30*time.Minute + 41*time.Second,
		Started: time.Date(2026, 12, 5, 14, 0, 0, 0, time.UTC), Finished: true, Parallel: 2, Machine: "2 cores (example)"}
	for i, c := range campaign.Checkers() {
		s := &campaign.Stats{Name: c.Name, Kind: c.Kind, Doc: c.Doc, Units: 3, Runs: 12, Checked: int64(1000 * (i + 1)),
			Took: time.Duration(i+1) * time.Minute, Last: "an example unit", Coverage: map[string]int{"example counter": 7, "never": 0}}
		switch c.Kind {
		case "tlc":
			s.Skipped, s.Last, s.Coverage = 3, "skipping: TLA2TOOLS_JAR names no TLC jar", nil
		case "zoo":
			s.Units, s.Zoo, s.Last = 1, []campaign.ZooRow{{Variant: "ReplaysQuarantine", Caught: true, By: "rapid state machine", Time: "1.2s"}}, "caught 1/1"
		}
		if c.Name == "queue" {
			log := filepath.Join(logs, "queue-2.log")
			require.NoError(t, os.WriteFile(log, []byte("queue seed 1: Illegal\n"), 0o644))
			u := campaign.Unit{Checker: "queue", N: 2, Seed: 1, Size: 40, Count: 1}
			s.Failures = []campaign.Failure{{ID: filepath.Base(o.Report), Checker: "queue", Unit: u, Seed: o.Seed, Result: o.Result,
				What:    "seed 1: queue history of " + itoa(o.Operations) + " operations is Illegal (a model that refuses every Cancel)",
				History: env.Rel(filepath.Join(o.Report, "history.json")), HTML: env.Rel(filepath.Join(o.Report, "history.html")),
				Trimmed: env.Rel(filepath.Join(o.Report, "history.min.json")), Log: env.Rel(log),
				Repro:   "go run ./cmd/campaign harness -name queue -seed 1 -seeds 1 -ops 40",
				Promote: "go run ./cmd/campaign promote -name queue " + filepath.Join(o.Report, "history.min.json")}}
		}
		st.Stats = append(st.Stats, s)
	}
	require.NoError(t, campaign.WriteReport(dir, st))
	return st
}

func itoa(n int) string { return strings.TrimSpace(strings.Repeat(" ", 0) + fmtInt(n)) }

func fmtInt(n int) string {
	if n == 0 {
		return "0"
	}
	var b []byte
	for ; n > 0; n /= 10 {
		b = append([]byte{byte('0' + n%10)}, b...)
	}
	return string(b)
}

// browser returns a headless Chromium or Chrome on this machine, or "".
func browser() string {
	for _, name := range []string{"chromium", "chromium-browser", "google-chrome", "headless-shell"} {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	return ""
}

// TestReportInBrowser opens a report with one failure in headless
// Chromium (chromedp) and checks that every checker's row is there, that
// the failure names its reproducing command, and that each of its links
// (visualization, history, trimmed history, log) points at a file that
// exists. With CAMPAIGN_SCREENSHOT set it writes a screenshot there (the
// README's picture). .ci/run installs Debian's chromium; without any
// browser the test says it is skipping.
func TestReportInBrowser(t *testing.T) {
	exe := browser()
	if exe == "" {
		t.Skip("skipping: no Chromium on this machine (apt-get install chromium; .ci/run installs it)")
	}
	dir := t.TempDir()
	st := reportWithOneFailure(t, dir)
	opts := append(chromedp.DefaultExecAllocatorOptions[:], chromedp.ExecPath(exe), chromedp.NoSandbox,
		chromedp.Flag("headless", true), chromedp.WindowSize(1400, 1800))
	actx, cancelAlloc := chromedp.NewExecAllocator(context.Background(), opts...)
	defer cancelAlloc()
	ctx, cancel := chromedp.NewContext(actx)
	defer cancel()
	ctx, cancelTimeout := context.WithTimeout(ctx, 60*time.Second)
	defer cancelTimeout()

	require.NoError(t, chromedp.Do(ctx, chromedp.Navigate("file://"+filepath.Join(dir, "index.html")),
		chromedp.WaitVisible(chromedp.CSS("#checkers"))))
	rows, err := chromedp.Run(ctx, chromedp.Nodes(chromedp.CSSAll("#checkers tr[data-checker]")))
	require.NoError(t, err)
	verdict, err := chromedp.Run(ctx, chromedp.Text(chromedp.CSS("#verdict")))
	require.NoError(t, err)
	failureText, err := chromedp.Run(ctx, chromedp.Text(chromedp.CSS(".failure")))
	require.NoError(t, err)
	hrefs, err := chromedp.Run(ctx, chromedp.Evaluate[[]string](`Array.from(document.querySelectorAll('.failure a')).map(a => a.getAttribute('href'))`))
	require.NoError(t, err)
	got := map[string]bool{}
	for _, n := range rows {
		got[n.AttributeValue("data-checker")] = true
	}
	for _, s := range st.Stats {
		assert.True(t, got[s.Name], "no row for checker %s", s.Name)
	}
	assert.Len(t, rows, len(st.Stats))
	assert.Equal(t, "fail", verdict)
	assert.Contains(t, failureText, "go run ./cmd/campaign harness -name queue -seed 1")
	f := st.Stats[failureIndex(st)].Failures[0]
	assert.ElementsMatch(t, []string{f.HTML, f.History, f.Trimmed, f.Log}, hrefs)
	for _, h := range hrefs {
		assert.FileExists(t, filepath.Join(dir, h), "the link %s", h)
	}
	// The visualization the link opens is Porcupine's page, with the run's
	// annotation.
	require.NoError(t, chromedp.Do(ctx, chromedp.Navigate("file://"+filepath.Join(dir, f.HTML)), chromedp.WaitReady(chromedp.CSS("body"))))
	body, err := chromedp.Run(ctx, chromedp.Evaluate[string](`document.documentElement.outerHTML`))
	require.NoError(t, err)
	assert.Contains(t, body, "seed 1: Illegal")
	if path := os.Getenv("CAMPAIGN_SCREENSHOT"); path != "" {
		require.NoError(t, chromedp.Do(ctx, chromedp.Navigate("file://"+filepath.Join(dir, "index.html")),
			chromedp.WaitVisible(chromedp.CSS("#checkers"))))
		png, err := chromedp.Run(ctx, chromedp.FullScreenshot(100))
		require.NoError(t, err)
		require.NoError(t, os.WriteFile(path, png, 0o644))
		t.Logf("screenshot: %s", path)
	}
}

func failureIndex(st *campaign.State) int {
	for i, s := range st.Stats {
		if len(s.Failures) > 0 {
			return i
		}
	}
	return -1
}
