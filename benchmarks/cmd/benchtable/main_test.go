package main

import "testing"

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
