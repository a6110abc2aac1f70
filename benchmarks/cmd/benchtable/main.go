// Command benchtable runs the benchmark suite and prints one table: each
// benchmark's ns/op, allocs/op and B/op, and its ratio to the floor and to
// every baseline, all from the same run. It checks the targets, writes the
// raw output (for benchstat) and the table under benchmarks/results, and
// plots hot-path cost against table size.
//
//	go run ./benchmarks/cmd/benchtable          # short mode
//	go run ./benchmarks/cmd/benchtable -full    # up to 1e6 bindings
package main

import (
	"bufio"
	"bytes"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"sort"
	"strconv"
	"strings"
	"time"
)

var baselines = []string{"floor", "mutex", "sharded", "syncmap"}

type result struct {
	name    string
	nsOp    float64
	bOp     float64
	allocs  float64
	metrics map[string]float64
}

var benchLine = regexp.MustCompile(`^(Benchmark\S+?)(?:-\d+)?\s+\d+\s+(.*)$`)

// parse reads go test's benchmark lines. With -count > 1 each figure is the
// median of the runs (this VM's timings are sometimes bimodal; one slow run
// must not decide a row); benchstat reads the raw file for the spread.
func parse(out string) map[string]*result {
	runs := map[string][]*result{}
	var names []string
	sc := bufio.NewScanner(strings.NewReader(out))
	for sc.Scan() {
		m := benchLine.FindStringSubmatch(sc.Text())
		if m == nil {
			continue
		}
		r := &result{name: strings.TrimPrefix(m[1], "Benchmark"), metrics: map[string]float64{}}
		f := strings.Fields(m[2])
		for i := 0; i+1 < len(f); i += 2 {
			v, err := strconv.ParseFloat(f[i], 64)
			if err != nil {
				continue
			}
			switch f[i+1] {
			case "ns/op":
				r.nsOp = v
			case "B/op":
				r.bOp = v
			case "allocs/op":
				r.allocs = v
			default:
				r.metrics[f[i+1]] = v
			}
		}
		if runs[r.name] == nil {
			names = append(names, r.name)
		}
		runs[r.name] = append(runs[r.name], r)
	}
	rs := map[string]*result{}
	for _, name := range names {
		rs[name] = medianOf(runs[name])
	}
	return rs
}

// medianOf returns a result whose every figure is the median over runs.
func medianOf(runs []*result) *result {
	med := func(get func(*result) float64) float64 {
		vs := make([]float64, 0, len(runs))
		for _, r := range runs {
			vs = append(vs, get(r))
		}
		sort.Float64s(vs)
		if n := len(vs); n%2 == 0 {
			return (vs[n/2-1] + vs[n/2]) / 2
		}
		return vs[len(vs)/2]
	}
	out := &result{name: runs[0].name, metrics: map[string]float64{}}
	out.nsOp = med(func(r *result) float64 { return r.nsOp })
	out.bOp = med(func(r *result) float64 { return r.bOp })
	out.allocs = med(func(r *result) float64 { return r.allocs })
	for k := range runs[0].metrics {
		out.metrics[k] = med(func(r *result) float64 { return r.metrics[k] })
	}
	return out
}

func main() {
	full := flag.Bool("full", false, "the full suite (1e6 bindings, the full model config)")
	count := flag.Int("count", 1, "runs of each benchmark")
	benchtime := flag.String("benchtime", "", "go test -benchtime (default: 1s full, 300ms short)")
	out := flag.String("out", "benchmarks/results", "where to write latest.txt, latest.md and growth.png")
	flag.Parse()
	bt := *benchtime
	if bt == "" {
		bt = "300ms"
		if *full {
			bt = "1s"
		}
	}
	args := []string{"test", "-run", "^$", "-bench", ".", "-benchmem", "-benchtime", bt,
		"-count", strconv.Itoa(*count), "-timeout", "60m", "./benchmarks/"}
	if *full {
		args = append(args, "-full")
	}
	fmt.Fprintf(os.Stderr, "benchtable: go %s\n", strings.Join(args, " "))
	cmd := exec.Command("go", args...)
	var buf bytes.Buffer
	cmd.Stdout, cmd.Stderr = &buf, os.Stderr
	start := time.Now()
	if err := cmd.Run(); err != nil {
		os.Stdout.Write(buf.Bytes())
		fmt.Fprintln(os.Stderr, "benchtable:", err)
		os.Exit(1)
	}
	rs := parse(buf.String())
	var md strings.Builder
	host, _ := os.Hostname()
	fmt.Fprintf(&md, "Run %s on %s/%s, %d CPUs (%s), %s, mode %s, benchtime %s, count %d, took %s.\n\n",
		time.Now().UTC().Format("2006-01-02 15:04 UTC"), runtime.GOOS, runtime.GOARCH, runtime.NumCPU(), host,
		runtime.Version(), map[bool]string{true: "full", false: "short"}[*full], bt, *count, time.Since(start).Round(time.Second))
	fmt.Fprintf(&md, "Command: `go run ./benchmarks/cmd/benchtable%s` (`make bench%s`).\n\n",
		map[bool]string{true: " -full", false: ""}[*full], map[bool]string{true: " FULL=1", false: ""}[*full])
	md.WriteString(table(rs))
	md.WriteString("\n")
	md.WriteString(targets(rs))
	fmt.Print(md.String())
	if err := os.MkdirAll(*out, 0o755); err == nil {
		_ = os.WriteFile(filepath.Join(*out, "latest.txt"), buf.Bytes(), 0o644)
		_ = os.WriteFile(filepath.Join(*out, "latest.md"), []byte(md.String()), 0o644)
		if err := plot(rs, filepath.Join(*out, "growth.png")); err != nil {
			fmt.Fprintln(os.Stderr, "benchtable: plot:", err)
		}
	}
}

// table lists every benchmark; rows of a group that has baselines get the
// ratio of their ns/op to each baseline's in the same group.
func table(rs map[string]*result) string {
	names := make([]string, 0, len(rs))
	for n := range rs {
		names = append(names, n)
	}
	sort.Strings(names)
	var b strings.Builder
	b.WriteString("| benchmark | ns/op | allocs/op | B/op | ×floor | ×mutex | ×sharded | ×syncmap | other |\n")
	b.WriteString("|---|---:|---:|---:|---:|---:|---:|---:|---|\n")
	for _, n := range names {
		r := rs[n]
		group, who := splitLast(n)
		fmt.Fprintf(&b, "| %s | %s | %.0f | %.0f |", n, num(r.nsOp), r.allocs, r.bOp)
		for _, base := range baselines {
			o, ok := rs[group+"/"+base]
			if !ok || who == base || o.nsOp == 0 || r.nsOp == 0 {
				b.WriteString(" |")
				continue
			}
			fmt.Fprintf(&b, " %.2f |", r.nsOp/o.nsOp)
		}
		var extra []string
		for k, v := range r.metrics {
			extra = append(extra, fmt.Sprintf("%s %s", num(v), k))
		}
		sort.Strings(extra)
		fmt.Fprintf(&b, " %s |\n", strings.Join(extra, ", "))
	}
	return b.String()
}

func splitLast(n string) (string, string) {
	i := strings.LastIndex(n, "/")
	if i < 0 {
		return "", n
	}
	return n[:i], n[i+1:]
}

func num(v float64) string {
	switch {
	case v >= 100:
		return strconv.FormatFloat(v, 'f', 0, 64)
	case v >= 10:
		return strconv.FormatFloat(v, 'f', 1, 64)
	}
	return strconv.FormatFloat(v, 'f', 2, 64)
}

// targets states where each target of the benchmark issue stands.
func targets(rs map[string]*result) string {
	var b strings.Builder
	b.WriteString("| target | measured | status |\n|---|---|---|\n")
	row := func(name, measured string, ok bool) {
		st := "met"
		if !ok {
			st = "**missed**"
		}
		fmt.Fprintf(&b, "| %s | %s | %s |\n", name, measured, st)
	}
	get := func(n string) *result {
		if r, ok := rs[n]; ok {
			return r
		}
		return &result{metrics: map[string]float64{}}
	}
	hs, fl := get("Hot/single/coordinator"), get("Hot/single/floor")
	row("hot path within 1.5× of the floor (single)", fmt.Sprintf("%.2f×", hs.nsOp/fl.nsOp), hs.nsOp <= 1.5*fl.nsOp)
	hp, fp := get("Hot/parallel-distinct/coordinator"), get("Hot/parallel-distinct/floor")
	row("hot path within 1.5× of the floor (parallel, distinct keys)", fmt.Sprintf("%.2f×", hp.nsOp/fp.nsOp), hp.nsOp <= 1.5*fp.nsOp)
	row("hot path 0 allocs/op", fmt.Sprintf("%.0f", hs.allocs), hs.allocs == 0 && hp.allocs == 0)
	for _, mode := range []string{"single", "parallel-distinct", "parallel-shared"} {
		c := get("Hot/" + mode + "/coordinator")
		var worse []string
		for _, base := range baselines[1:] {
			if o := get("Hot/" + mode + "/" + base); o.nsOp > 0 && c.nsOp >= o.nsOp {
				worse = append(worse, fmt.Sprintf("%s %.2f×", base, c.nsOp/o.nsOp))
			}
		}
		row("hot path ahead of every baseline ("+mode+")", orAll(worse), len(worse) == 0)
	}
	row("parallel throughput with 2 procs ≥ 1.8× single", fmt.Sprintf("%.2f×", hs.nsOp/hp.nsOp), hs.nsOp/hp.nsOp >= 1.8)
	cold := get("Cold/coordinator")
	row("cold path under 1 µs, a handful of allocations", fmt.Sprintf("%s ns, %.0f allocs", num(cold.nsOp), cold.allocs), cold.nsOp < 1000 && cold.allocs <= 10)
	for n := range rs {
		if strings.HasPrefix(n, "Memory/") && strings.HasSuffix(n, "/coordinator") {
			v := rs[n].metrics["B/binding"]
			row("≤ 200 bytes per binding ("+strings.TrimSuffix(strings.TrimPrefix(n, "Memory/"), "/coordinator")+")", fmt.Sprintf("%.0f B", v), v <= 200)
		}
	}
	for _, path := range []string{"hot", "cold"} {
		lo, hi := 0.0, 0.0
		for n, r := range rs {
			if strings.HasPrefix(n, "Growth/"+path+"/") && strings.HasSuffix(n, "/coordinator") {
				if lo == 0 || r.nsOp < lo {
					lo = r.nsOp
				}
				hi = max(hi, r.nsOp)
			}
		}
		if lo > 0 {
			row("flat "+path+" cost across table sizes (max/min ≤ 2)", fmt.Sprintf("%.2f× (%s .. %s ns)", hi/lo, num(lo), num(hi)), hi/lo <= 2)
		}
	}
	for n, r := range rs {
		if strings.HasPrefix(n, "Reaper/") && strings.HasSuffix(n, "/sweeping") {
			idle := get(strings.TrimSuffix(n, "sweeping") + "idle")
			p99, p99i := r.metrics["p99-ns"], idle.metrics["p99-ns"]
			row("reaper sweeping at most doubles hot-path p99 ("+strings.Split(n, "/")[1]+")",
				fmt.Sprintf("p99 %s ns vs %s ns idle (%.2f×), p50 %s vs %s", num(p99), num(p99i), p99/p99i,
					num(r.metrics["p50-ns"]), num(idle.metrics["p50-ns"])), p99 <= 2*p99i)
		}
	}
	if e := get("Explorer"); e.metrics["states/s"] > 0 {
		row("model explorer rate (TLC with 1 worker on MCPlacement.cfg: 4,885 states/s; 2 workers: 11,336)",
			fmt.Sprintf("%s states/s", num(e.metrics["states/s"])), true)
	}
	return b.String()
}

func orAll(s []string) string {
	if len(s) == 0 {
		return "faster than all"
	}
	return "slower than " + strings.Join(s, ", ")
}
