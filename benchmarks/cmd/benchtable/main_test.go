package main

import (
	"fmt"
	"image/png"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestParse_MedianOfRuns: with -count 3, each figure is the median of the
// three runs, so one slow run (this VM is sometimes bimodal) does not decide
// the row, whatever its position.
func TestParse_MedianOfRuns(t *testing.T) {
	out := `goos: linux
BenchmarkHot/parallel-distinct/coordinator-2   55678834   20.15 ns/op   0 B/op   0 allocs/op
BenchmarkHot/parallel-distinct/coordinator-2   60479474   20.02 ns/op   0 B/op   0 allocs/op
BenchmarkHot/parallel-distinct/coordinator-2   38567578   29.98 ns/op   0 B/op   0 allocs/op
BenchmarkMemory/n=1000/floor-2   100   0.00 ns/op   154.0 B/binding
BenchmarkMemory/n=1000/floor-2   100   0.00 ns/op   150.0 B/binding
PASS
`
	rs := parse(out)
	if r := rs["Hot/parallel-distinct/coordinator"]; r == nil || r.nsOp != 20.15 {
		t.Fatalf("median ns/op: %+v", r)
	}
	if r := rs["Memory/n=1000/floor"]; r == nil || r.metrics["B/binding"] != 152 {
		t.Fatalf("median of two runs: %+v", r)
	}
	if len(rs) != 2 {
		t.Fatalf("results %d, want 2", len(rs))
	}
}

// synthetic is go test output with every group the targets read: the
// coordinator at ratio c to the mutex map (and to the floor, whose figures
// equal the mutex map's), the other baselines a little slower.
func synthetic(c float64) string {
	var b strings.Builder
	line := func(name string, ns float64) {
		fmt.Fprintf(&b, "Benchmark%s-2 \t 1000000 \t %.2f ns/op \t 0 B/op \t 0 allocs/op\n", name, ns)
	}
	groups := []string{"Hot/single", "Hot/parallel-distinct", "Hot/parallel-shared", "Cold"}
	for _, path := range []string{"hot", "hot-parallel", "cold"} {
		for _, n := range []int{1000, 10000, 100000} {
			groups = append(groups, fmt.Sprintf("Growth/%s/n=%d", path, n))
		}
	}
	for _, g := range groups {
		line(g+"/coordinator", 100*c)
		line(g+"/coordinator-manual", 90*c)
		line(g+"/floor", 100)
		line(g+"/mutex", 100)
		line(g+"/mutex-now", 150)
		line(g+"/sharded", 110)
		line(g+"/syncmap", 120)
	}
	for _, p := range []int{1, 2} {
		for _, who := range []string{"coordinator", "floor", "mutex"} {
			line(fmt.Sprintf("Scaling/procs=%d/%s", p, who), 40/float64(p)*map[string]float64{"coordinator": 1, "floor": 0.9, "mutex": 1.5}[who])
		}
	}
	return b.String()
}

// TestTargets: each target row says met or missed by the ratio it reads.
func TestTargets(t *testing.T) {
	met := targets(parse(synthetic(0.9)))
	if strings.Contains(met, "missed") || strings.Contains(met, "not measured") {
		t.Fatalf("coordinator at 0.9× every baseline misses a target:\n%s", met)
	}
	if !strings.Contains(met, "n=1024 0.90× (mutex), n=1000 0.90× (mutex), n=10000 0.90× (mutex), n=100000 0.90× (mutex)") {
		t.Fatalf("sizes not listed in order with the worst baseline:\n%s", met)
	}
	missed := targets(parse(synthetic(1.1)))
	for _, want := range []string{
		"| hot path ≤ 1.2× the floor (one goroutine) | 1.10× | met |",
		"1024 to 100000 (one goroutine) | worst baseline at each size: n=1024 1.10× (mutex)",
		"| one shared key in parallel ≤ 1.2× the best baseline | 1.10× (110 ns against mutex, 100 ns) | met |",
		"| cold path ≤ 2× the mutex map (at every size) | n=1024 1.10×, n=1000 1.10×, n=10000 1.10×, n=100000 1.10× | met |",
	} {
		if !strings.Contains(missed, want) {
			t.Fatalf("missing %q in:\n%s", want, missed)
		}
	}
	if strings.Count(missed, "**missed**") != 2 {
		t.Fatalf("at 1.1× only the two ahead-at-every-size targets are missed:\n%s", missed)
	}
	if none := targets(parse("")); strings.Count(none, "not measured in this run") != 7 {
		t.Fatalf("an empty run measures nothing:\n%s", none)
	}
}

// TestReport_Scaling: throughput ratios are against each contender's own
// GOMAXPROCS 1 figure.
func TestReport_Scaling(t *testing.T) {
	out := `BenchmarkScaling/procs=1/coordinator-2   1000   40.00 ns/op
BenchmarkScaling/procs=2/coordinator-2   1000   25.00 ns/op
BenchmarkScaling/procs=1/mutex-2   1000   30.00 ns/op
BenchmarkScaling/procs=2/mutex-2   1000   60.00 ns/op
`
	got := scalingTable(parse(out))
	for _, want := range []string{"| coordinator | 40.0 ns (1.00×) | 25.0 ns (1.60×) |", "| mutex | 30.0 ns (1.00×) | 60.0 ns (0.50×) |"} {
		if !strings.Contains(got, want) {
			t.Fatalf("missing %q in:\n%s", want, got)
		}
	}
	if !strings.Contains(earlierTargets(parse(out)), "| parallel throughput with 2 procs ≥ 1.8× single (Scaling) | 1.60× | **missed** |") {
		t.Fatalf("scaling target:\n%s", earlierTargets(parse(out)))
	}
}

// TestPlots: both plots are drawn by gonum/plot into PNGs.
func TestPlots(t *testing.T) {
	rs := parse(synthetic(1))
	dir := t.TempDir()
	for name, draw := range map[string]func(map[string]*result, string) (bool, error){
		"growth.png": plotGrowth, "scaling.png": plotScaling,
	} {
		file := filepath.Join(dir, name)
		drawn, err := draw(rs, file)
		if err != nil || !drawn {
			t.Fatalf("%s: drawn %v, %v", name, drawn, err)
		}
		f, err := os.Open(file)
		if err != nil {
			t.Fatal(err)
		}
		img, err := png.Decode(f)
		f.Close()
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if b := img.Bounds(); b.Dx() < 500 || b.Dy() < 300 {
			t.Fatalf("%s: %v", name, b)
		}
		if drawn, err := draw(parse(""), filepath.Join(dir, "none-"+name)); drawn || err != nil {
			t.Fatalf("%s of nothing: drawn %v, %v", name, drawn, err)
		}
	}
}

// TestSortNames: sizes numerically, contenders in their order.
func TestSortNames(t *testing.T) {
	names := []string{"Growth/hot/n=100000/mutex", "Growth/hot/n=1000/syncmap", "Growth/hot/n=1000/coordinator-manual",
		"Growth/hot/n=10000/coordinator", "Growth/hot/n=1000/coordinator", "Cold/floor"}
	sortNames(names)
	want := []string{"Cold/floor", "Growth/hot/n=1000/coordinator", "Growth/hot/n=1000/coordinator-manual",
		"Growth/hot/n=1000/syncmap", "Growth/hot/n=10000/coordinator", "Growth/hot/n=100000/mutex"}
	if strings.Join(names, " ") != strings.Join(want, " ") {
		t.Fatalf("got %v\nwant %v", names, want)
	}
}
