package main

import (
	"math"
	"strings"
	"testing"
)

func TestQuantileAndMedian(t *testing.T) {
	xs := []float64{5, 1, 4, 2, 3}
	for _, c := range []struct{ q, want float64 }{{0, 1}, {1, 5}, {0.5, 3}, {0.25, 2}, {0.75, 4}} {
		if got := quantile(xs, c.q); got != c.want {
			t.Errorf("quantile(%v, %v) = %v, want %v", xs, c.q, got, c.want)
		}
	}
	if got := median([]float64{1, 2, 3, 10}); got != 2.5 {
		t.Errorf("median of an even count = %v, want 2.5", got)
	}
	if !math.IsNaN(median(nil)) {
		t.Error("median of nothing is not NaN")
	}
	if xs[0] != 5 {
		t.Error("quantile sorted its argument in place")
	}
}

func TestRatiosToPairsTheSameRound(t *testing.T) {
	s := []sample{
		{round: 1, workload: "w", contender: "base", ns: 100},
		{round: 0, workload: "w", contender: "base", ns: 10},
		{round: 0, workload: "w", contender: "x", ns: 20},
		{round: 1, workload: "w", contender: "x", ns: 50},
		{round: 2, workload: "w", contender: "x", ns: 7}, // no base in round 2: left out
	}
	r := ratiosTo(s, "base")["w"]["x"]
	if len(r) != 2 || r[0] != 2 || r[1] != 0.5 {
		t.Fatalf("ratios = %v, want [2 0.5] (round order, same-round base)", r)
	}
	if len(ratiosTo(s, "base")["w"]["base"]) != 2 {
		t.Fatal("base's own ratios missing")
	}
}

func TestSummarizeAndTable(t *testing.T) {
	var s []sample
	for r, pair := range [][2]float64{{10, 20}, {10, 30}, {20, 20}} {
		s = append(s, sample{round: r, workload: "w", contender: "base", ns: pair[0]},
			sample{round: r, workload: "w", contender: "x", ns: pair[1], allocs: 2, bytes: 64})
	}
	ss := summarize(s, "w", "base", []string{"base", "x", "absent"})
	if len(ss) != 2 {
		t.Fatalf("%d summaries, want 2 (absent skipped)", len(ss))
	}
	x := ss[1]
	if x.medRatio != 2 || x.minRatio != 1 || x.maxRat != 3 || x.medianNs != 20 || x.allocs != 2 || x.bytes != 64 || x.rounds != 3 {
		t.Fatalf("summary %+v", x)
	}
	got := table("w", "ns/op", ss)
	want := "| w | x | 20.0 ns/op | 2.00 | 1.00–3.00 | 1.50–2.50 | 2 | 64 |\n"
	if !strings.HasSuffix(got, want) {
		t.Fatalf("table:\n%s\nwant last row:\n%s", got, want)
	}
}

func TestTargetRow(t *testing.T) {
	met := target{name: "t", limit: 1.1, ratios: []float64{1.0, 1.05, 2}}
	if r := met.row(); !strings.Contains(r, "| met |") || !strings.Contains(r, "1.05×") {
		t.Errorf("row %q: want met at median 1.05", r)
	}
	missed := target{name: "t", limit: 1.1, ratios: []float64{1.2, 1.3, 0.5}}
	if r := missed.row(); !strings.Contains(r, "not met") {
		t.Errorf("row %q: want not met", r)
	}
	if r := (target{name: "t", limit: 1}).row(); !strings.Contains(r, "not met") {
		t.Errorf("row %q: no rounds must not count as met", r)
	}
}

func TestBestRatiosAndInverse(t *testing.T) {
	s := []sample{
		{round: 0, workload: "w", contender: "base", ns: 30},
		{round: 0, workload: "w", contender: "a", ns: 10},
		{round: 0, workload: "w", contender: "b", ns: 20},
		{round: 1, workload: "w", contender: "base", ns: 10},
		{round: 1, workload: "w", contender: "a", ns: 40},
		{round: 1, workload: "w", contender: "b", ns: 20},
		{round: 1, workload: "v", contender: "a", ns: 1},
	}
	got := bestRatios(s, "w", "base")
	if len(got) != 2 || got[0] != 3 || got[1] != 0.5 {
		t.Fatalf("bestRatios = %v, want [3 0.5]", got)
	}
	if inv := inverse([]float64{2, 0.5}); inv[0] != 0.5 || inv[1] != 2 {
		t.Fatalf("inverse = %v", inv)
	}
}

func TestParseRaw(t *testing.T) {
	raw := "goos: linux\nBenchmarkPeers/Hot/n=1024/placement-2\t100\t40.00 ns/op\t0 B/op\t0 allocs/op\n" +
		"BenchmarkPeers/Memory/n=100000/otter-2\t1\t119.00 B/binding\n" +
		"BenchmarkPeers/Hot/n=1024/placement-2\t100\t50.00 ns/op\t8 B/op\t1 allocs/op\n"
	s := parseRaw(raw)
	if len(s) != 3 {
		t.Fatalf("%d samples, want 3", len(s))
	}
	if s[0].workload != "Hot/n=1024" || s[0].contender != "placement" || s[0].ns != 40 || s[0].round != 0 {
		t.Errorf("first: %+v", s[0])
	}
	if s[1].workload != "Memory/n=100000" || s[1].contender != "otter" || s[1].ns != 119 {
		t.Errorf("memory: %+v", s[1])
	}
	if s[2].round != 1 || s[2].bytes != 8 || s[2].allocs != 1 {
		t.Errorf("second round: %+v", s[2])
	}
}
