// Command benchtable runs the benchmark suite and prints its tables, all
// from the same run: every contender in its default configuration (each
// benchmark's ns/op, allocs/op and B/op, and its ratio to the floor and to
// every baseline), the scaling benchmark as ratios to each contender's own
// single-proc figure, the targets with the measured ratio and whether each
// is met, and the other configurations. It writes the raw output (for
// benchstat) and the tables under benchmarks/results, and plots cost
// against table size (growth.png) and throughput against GOMAXPROCS
// (scaling.png) with gonum/plot.
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

	"github.com/placementlab/placement/benchmarks"
)

var (
	// baselines get a ratio column in the tables.
	baselines = []string{"floor", "mutex", "sharded", "syncmap"}
	// rivals are the baselines the coordinator is to be ahead of.
	rivals = []string{"mutex", "sharded", "syncmap"}
	// variants are contenders in a configuration other than their default,
	// each with the default-configuration contender it varies.
	variants = map[string]string{"coordinator-manual": "coordinator", "mutex-now": "mutex"}
	// contenderOrder is the order of the contenders in tables and legends.
	contenderOrder = []string{"coordinator", "coordinator-manual", "floor", "mutex", "mutex-now", "sharded", "syncmap"}
)

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
	count := flag.Int("count", 1, "runs of each benchmark (each figure is the median)")
	benchtime := flag.String("benchtime", "", "go test -benchtime (default: 1s full, 300ms short)")
	bench := flag.String("bench", ".", "go test -bench (a subset leaves the other targets not measured)")
	out := flag.String("out", "benchmarks/results", "where to write latest.txt, latest.md, growth.png and scaling.png")
	from := flag.String("from", "", "render the tables and plots from this raw go test output instead of running the suite (writes only latest.md and the plots)")
	flag.Parse()
	if *from != "" {
		raw, err := os.ReadFile(*from)
		if err != nil {
			fmt.Fprintln(os.Stderr, "benchtable:", err)
			os.Exit(1)
		}
		md := fmt.Sprintf("Rendered from `%s` by `go run ./benchmarks/cmd/benchtable -from %s`.\n\n%s", *from, *from, report(parse(string(raw)), runsIn(string(raw))))
		fmt.Print(md)
		write(*out, nil, md, parse(string(raw)))
		return
	}
	bt := *benchtime
	if bt == "" {
		bt = "300ms"
		if *full {
			bt = "1s"
		}
	}
	args := []string{"test", "-run", "^$", "-bench", *bench, "-benchmem", "-benchtime", bt,
		"-count", strconv.Itoa(*count), "-timeout", "90m", "./benchmarks/"}
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
	cmdline := "go run ./benchmarks/cmd/benchtable"
	if *full {
		cmdline += " -full"
	}
	if *count != 1 {
		cmdline += " -count " + strconv.Itoa(*count)
	}
	if *bench != "." {
		cmdline += " -bench '" + *bench + "'"
	}
	fmt.Fprintf(&md, "Command: `%s`%s.\n\n", cmdline, map[bool]string{true: " (`make bench FULL=1`)", false: ""}[*full && *count == 3 && *bench == "."])
	md.WriteString(report(rs, *count))
	fmt.Print(md.String())
	write(*out, buf.Bytes(), md.String(), rs)
}

// write saves the raw output (unless nil), the tables and the plots in dir.
func write(dir string, raw []byte, md string, rs map[string]*result) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		fmt.Fprintln(os.Stderr, "benchtable:", err)
		os.Exit(1)
	}
	if raw != nil {
		if err := os.WriteFile(filepath.Join(dir, "latest.txt"), raw, 0o644); err != nil {
			fmt.Fprintln(os.Stderr, "benchtable:", err)
		}
	}
	if err := os.WriteFile(filepath.Join(dir, "latest.md"), []byte(md), 0o644); err != nil {
		fmt.Fprintln(os.Stderr, "benchtable:", err)
	}
	if _, err := plotGrowth(rs, filepath.Join(dir, "growth.png")); err != nil {
		fmt.Fprintln(os.Stderr, "benchtable: growth plot:", err)
	}
	if _, err := plotScaling(rs, filepath.Join(dir, "scaling.png")); err != nil {
		fmt.Fprintln(os.Stderr, "benchtable: scaling plot:", err)
	}
}

// runsIn is the most runs of one benchmark in raw go test output.
func runsIn(raw string) int {
	n := map[string]int{}
	most := 1
	for _, l := range strings.Split(raw, "\n") {
		if m := benchLine.FindStringSubmatch(l); m != nil {
			n[m[1]]++
			most = max(most, n[m[1]])
		}
	}
	return most
}

// report is latest.md after its header: the default configuration, the
// scaling table, the targets, the earlier targets and the other
// configurations.
func report(rs map[string]*result, count int) string {
	var b strings.Builder
	med := ""
	if count > 1 {
		med = fmt.Sprintf(" Each figure is the median of %d runs.", count)
	}
	fmt.Fprintf(&b, "### Default configuration\n\nEvery contender as a router gets it without asking: the coordinator with `Config.Clock` nil "+
		"(its default runtime clock); the baselines on the shared coarse clock (advanced every %s by a ticker, read with one atomic load). "+
		"Ratios are ns/op against the same benchmark's baseline.%s\n\n", benchmarks.CoarseTick, med)
	b.WriteString(table(rs, func(n string) bool {
		_, who := splitLast(n)
		_, variant := variants[who]
		return !variant && !strings.HasPrefix(n, "Scaling/") && !strings.HasPrefix(n, "Reaper/") && !strings.HasPrefix(n, "Affinity/")
	}, false))
	b.WriteString("\n### The affinity layer\n\nA later turn from its header to its lease and back: `core` reads the header's value as impl/placement's key " +
		"(Acquire hits, Done releases); `affinity` is impl/affinity's RequestFromHeader, Start, Eligible over 8 candidates, Dispatch, " +
		"Complete and Done; `affinity-key` the key's derivation alone; `driver` the router kit's one call per request (impl/router's " +
		"Driver.Do in its default configuration after RequestFromHeader, with a transport that accepts at once). ×core is the ratio to `core`.\n\n")
	b.WriteString(affinityTable(rs))
	b.WriteString("\n### Scaling\n\nThe hot path (hit and release on 1,024 live bindings) in parallel on distinct keys, one goroutine per proc: " +
		"ns/op (wall time per operation, all goroutines together) and, in parentheses, throughput as a ratio to the same contender at GOMAXPROCS 1.\n\n")
	b.WriteString(scalingTable(rs))
	b.WriteString("\n### Targets\n\nThe issue's targets, measured on the default configuration.\n\n")
	b.WriteString(targets(rs))
	b.WriteString("\n### Earlier targets\n\n")
	b.WriteString(earlierTargets(rs))
	b.WriteString("\n### Other configurations\n\n`coordinator-manual`: the coordinator on a `ManualClock` (one atomic load, never advanced; no reaper). " +
		"`mutex-now`: the mutex map calling `time.Since` on every check. `Reaper`: the coordinator on a manual clock, whose every advance sweeps the table. " +
		"×default is the ratio to the same contender's default configuration (`coordinator`, `mutex`).\n\n")
	b.WriteString(table(rs, func(n string) bool {
		_, who := splitLast(n)
		_, variant := variants[who]
		return (variant && !strings.HasPrefix(n, "Scaling/")) || strings.HasPrefix(n, "Reaper/")
	}, true))
	return b.String()
}

// table lists the benchmarks keep selects; rows of a group that has
// baselines get the ratio of their ns/op to each baseline's in the same
// group, and with sibling, to their default configuration's.
func table(rs map[string]*result, keep func(string) bool, sibling bool) string {
	names := make([]string, 0, len(rs))
	for n := range rs {
		if keep(n) {
			names = append(names, n)
		}
	}
	sortNames(names)
	var b strings.Builder
	b.WriteString("| benchmark | ns/op | allocs/op | B/op |")
	if sibling {
		b.WriteString(" ×default |")
	}
	b.WriteString(" ×floor | ×mutex | ×sharded | ×syncmap | other |\n|---|---:|---:|---:|")
	if sibling {
		b.WriteString("---:|")
	}
	b.WriteString("---:|---:|---:|---:|---|\n")
	ratio := func(r *result, other string) string {
		o, ok := rs[other]
		if !ok || o.nsOp == 0 || r.nsOp == 0 {
			return " |"
		}
		return fmt.Sprintf(" %.2f |", r.nsOp/o.nsOp)
	}
	for _, n := range names {
		r := rs[n]
		group, who := splitLast(n)
		fmt.Fprintf(&b, "| %s | %s | %.0f | %.0f |", n, num(r.nsOp), r.allocs, r.bOp)
		if sibling {
			if def, ok := variants[who]; ok {
				b.WriteString(ratio(r, group+"/"+def))
			} else {
				b.WriteString(" |")
			}
		}
		for _, base := range baselines {
			if who == base {
				b.WriteString(" |")
				continue
			}
			b.WriteString(ratio(r, group+"/"+base))
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

// sortNames sorts benchmark names by group, sizes numerically (n=1000
// before n=10000 before n=100000), then contenders in contenderOrder.
func sortNames(names []string) {
	rank := map[string]int{}
	for i, c := range contenderOrder {
		rank[c] = i + 1
	}
	sizeOf := func(seg string) (float64, bool) {
		if _, v, ok := strings.Cut(seg, "="); ok {
			if f, err := strconv.ParseFloat(v, 64); err == nil {
				return f, true
			}
		}
		return 0, false
	}
	sort.Slice(names, func(i, j int) bool {
		a, b := strings.Split(names[i], "/"), strings.Split(names[j], "/")
		for k := 0; k < len(a) && k < len(b); k++ {
			if a[k] == b[k] {
				continue
			}
			if fa, ok := sizeOf(a[k]); ok {
				if fb, ok := sizeOf(b[k]); ok && fa != fb {
					return fa < fb
				}
			}
			if ra, rb := rank[a[k]], rank[b[k]]; ra != 0 && rb != 0 {
				return ra < rb
			}
			return a[k] < b[k]
		}
		return len(a) < len(b)
	})
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

// scaling returns, for each contender, its Scaling ns/op by GOMAXPROCS,
// and the procs measured in increasing order.
func scaling(rs map[string]*result) (map[string]map[int]float64, []int) {
	by := map[string]map[int]float64{}
	seen := map[int]bool{}
	for n, r := range rs {
		rest, ok := strings.CutPrefix(n, "Scaling/procs=")
		if !ok {
			continue
		}
		ps, who, ok := strings.Cut(rest, "/")
		p, err := strconv.Atoi(ps)
		if !ok || err != nil || r.nsOp <= 0 {
			continue
		}
		if by[who] == nil {
			by[who] = map[int]float64{}
		}
		by[who][p] = r.nsOp
		seen[p] = true
	}
	var procs []int
	for p := range seen {
		procs = append(procs, p)
	}
	sort.Ints(procs)
	return by, procs
}

// scalingTable: one row per contender, one column per GOMAXPROCS.
func scalingTable(rs map[string]*result) string {
	by, procs := scaling(rs)
	if len(procs) == 0 {
		return "Not measured in this run.\n"
	}
	var b strings.Builder
	b.WriteString("| contender |")
	for _, p := range procs {
		fmt.Fprintf(&b, " GOMAXPROCS %d |", p)
	}
	b.WriteString("\n|---|")
	for range procs {
		b.WriteString("---:|")
	}
	b.WriteString("\n")
	for _, who := range contenderNames(by) {
		fmt.Fprintf(&b, "| %s |", who)
		one := by[who][1]
		for _, p := range procs {
			ns, ok := by[who][p]
			switch {
			case !ok:
				b.WriteString(" |")
			case one > 0:
				fmt.Fprintf(&b, " %s ns (%.2f×) |", num(ns), one/ns)
			default:
				fmt.Fprintf(&b, " %s ns |", num(ns))
			}
		}
		b.WriteString("\n")
	}
	return b.String()
}

// targetTable accumulates rows of a target table.
type targetTable struct{ b strings.Builder }

func newTargetTable() *targetTable {
	t := &targetTable{}
	t.b.WriteString("| target | measured | status |\n|---|---|---|\n")
	return t
}

// row adds a target; measured "" means it was not measured in this run.
func (t *targetTable) row(name, measured string, ok bool) {
	st := "met"
	switch {
	case measured == "":
		measured, st = "not measured in this run", "—"
	case !ok:
		st = "**missed**"
	}
	fmt.Fprintf(&t.b, "| %s | %s | %s |\n", name, measured, st)
}

// ratioOf is a's ns/op over b's, with false when either is missing.
func ratioOf(rs map[string]*result, a, b string) (float64, bool) {
	ra, oka := rs[a]
	rb, okb := rs[b]
	if !oka || !okb || ra.nsOp <= 0 || rb.nsOp <= 0 {
		return 0, false
	}
	return ra.nsOp / rb.nsOp, true
}

// sizeGroups lists the hot-path groups of one mode at every table size
// measured: the Hot group (1,024 bindings) and the growth sizes, labelled.
func sizeGroups(rs map[string]*result, hot, growth string) (groups, labels []string) {
	if _, ok := rs[hot+"/coordinator"]; ok && hot != "" {
		groups, labels = append(groups, hot), append(labels, "n=1024")
	}
	var sizes []int
	for n := range rs {
		rest, ok := strings.CutPrefix(n, growth+"/n=")
		if !ok || !strings.HasSuffix(rest, "/coordinator") {
			continue
		}
		if v, err := strconv.Atoi(strings.TrimSuffix(rest, "/coordinator")); err == nil {
			sizes = append(sizes, v)
		}
	}
	sort.Ints(sizes)
	for _, v := range sizes {
		groups = append(groups, fmt.Sprintf("%s/n=%d", growth, v))
		labels = append(labels, fmt.Sprintf("n=%d", v))
	}
	return groups, labels
}

// targets states where each target of the issue "Performance in the default
// configuration: ahead of every baseline at every size" stands.
func targets(rs map[string]*result) string {
	t := newTargetTable()
	floorRow := func(name, group string) {
		r, ok := ratioOf(rs, group+"/coordinator", group+"/floor")
		t.row(name, cond(ok, fmt.Sprintf("%.2f×", r)), r <= 1.2)
	}
	floorRow("hot path ≤ 1.2× the floor (one goroutine)", "Hot/single")
	floorRow("hot path ≤ 1.2× the floor (parallel, distinct keys)", "Hot/parallel-distinct")
	allocs, measured := 0.0, false
	for n, r := range rs {
		if (strings.HasPrefix(n, "Hot/") || strings.HasPrefix(n, "Growth/hot")) && strings.HasSuffix(n, "/coordinator") {
			allocs, measured = max(allocs, r.allocs), true
		}
	}
	t.row("hot path 0 allocs/op (every hot benchmark)", cond(measured, fmt.Sprintf("%.0f", allocs)), allocs == 0)
	for _, m := range []struct{ name, hot, growth string }{
		{"one goroutine", "Hot/single", "Growth/hot"},
		{"parallel, distinct keys", "Hot/parallel-distinct", "Growth/hot-parallel"},
	} {
		groups, labels := sizeGroups(rs, m.hot, m.growth)
		var parts []string
		ok := true
		for i, g := range groups {
			worst, against := 0.0, ""
			for _, base := range rivals {
				if r, found := ratioOf(rs, g+"/coordinator", g+"/"+base); found && r > worst {
					worst, against = r, base
				}
			}
			if against == "" {
				continue
			}
			ok = ok && worst <= 1.0
			parts = append(parts, fmt.Sprintf("%s %.2f× (%s)", labels[i], worst, against))
		}
		name := fmt.Sprintf("hot path ≤ 1.0× the mutex, sharded and sync.Map baselines at every size (%s)", m.name)
		if len(labels) > 0 {
			name = fmt.Sprintf("hot path ≤ 1.0× the mutex, sharded and sync.Map baselines at every size, %s to %s (%s)",
				strings.TrimPrefix(labels[0], "n="), strings.TrimPrefix(labels[len(labels)-1], "n="), m.name)
		}
		t.row(name, cond(len(parts) > 0, "worst baseline at each size: "+strings.Join(parts, ", ")), ok)
	}
	best, bestName := 0.0, ""
	for _, base := range rivals {
		if r, ok := rs["Hot/parallel-shared/"+base]; ok && r.nsOp > 0 && (bestName == "" || r.nsOp < best) {
			best, bestName = r.nsOp, base
		}
	}
	if c, ok := rs["Hot/parallel-shared/coordinator"]; ok && bestName != "" {
		r := c.nsOp / best
		t.row("one shared key in parallel ≤ 1.2× the best baseline", fmt.Sprintf("%.2f× (%s ns against %s, %s ns)", r, num(c.nsOp), bestName, num(best)), r <= 1.2)
	} else {
		t.row("one shared key in parallel ≤ 1.2× the best baseline", "", false)
	}
	var parts []string
	ok := true
	coldGroups := []string{"Cold"}
	coldLabels := []string{"n=1024"}
	g, l := sizeGroups(rs, "", "Growth/cold")
	coldGroups, coldLabels = append(coldGroups, g...), append(coldLabels, l...)
	for i, g := range coldGroups {
		if r, found := ratioOf(rs, g+"/coordinator", g+"/mutex"); found {
			ok = ok && r <= 2
			parts = append(parts, fmt.Sprintf("%s %.2f×", coldLabels[i], r))
		}
	}
	t.row("cold path ≤ 2× the mutex map (at every size)", cond(len(parts) > 0, strings.Join(parts, ", ")), ok)
	return t.b.String()
}

// earlierTargets: the targets of the first benchmarks issue, on the default
// configuration (the reaper's on a manual clock).
func earlierTargets(rs map[string]*result) string {
	t := newTargetTable()
	by, _ := scaling(rs)
	if c := by["coordinator"]; c[1] > 0 && c[2] > 0 {
		t.row("parallel throughput with 2 procs ≥ 1.8× single (Scaling)", fmt.Sprintf("%.2f×", c[1]/c[2]), c[1]/c[2] >= 1.8)
	} else {
		t.row("parallel throughput with 2 procs ≥ 1.8× single (Scaling)", "", false)
	}
	if cold, ok := rs["Cold/coordinator"]; ok {
		t.row("cold path under 1 µs, a handful of allocations", fmt.Sprintf("%s ns, %.0f allocs", num(cold.nsOp), cold.allocs), cold.nsOp < 1000 && cold.allocs <= 10)
	} else {
		t.row("cold path under 1 µs, a handful of allocations", "", false)
	}
	var mem []string
	for n := range rs {
		if strings.HasPrefix(n, "Memory/") && strings.HasSuffix(n, "/coordinator") {
			mem = append(mem, n)
		}
	}
	sort.Strings(mem)
	for _, n := range mem {
		v := rs[n].metrics["B/binding"]
		t.row("≤ 200 bytes per binding ("+strings.TrimSuffix(strings.TrimPrefix(n, "Memory/"), "/coordinator")+")", fmt.Sprintf("%.0f B", v), v <= 200)
	}
	for _, path := range []string{"hot", "hot-parallel", "cold"} {
		lo, hi := 0.0, 0.0
		for n, r := range rs {
			if strings.HasPrefix(n, "Growth/"+path+"/") && strings.HasSuffix(n, "/coordinator") && r.nsOp > 0 {
				if lo == 0 || r.nsOp < lo {
					lo = r.nsOp
				}
				hi = max(hi, r.nsOp)
			}
		}
		if lo > 0 {
			t.row("flat "+path+" cost across table sizes (max/min ≤ 2)", fmt.Sprintf("%.2f× (%s .. %s ns)", hi/lo, num(lo), num(hi)), hi/lo <= 2)
		}
	}
	var reaper []string
	for n := range rs {
		if strings.HasPrefix(n, "Reaper/") && strings.HasSuffix(n, "/sweeping") {
			reaper = append(reaper, n)
		}
	}
	sort.Strings(reaper)
	for _, n := range reaper {
		r := rs[n]
		idle, ok := rs[strings.TrimSuffix(n, "sweeping")+"idle"]
		if !ok {
			continue
		}
		p99, p99i := r.metrics["p99-ns"], idle.metrics["p99-ns"]
		t.row("reaper sweeping at most doubles hot-path p99 ("+strings.Split(n, "/")[1]+", manual clock)",
			fmt.Sprintf("p99 %s ns vs %s ns idle (%.2f×), p50 %s vs %s", num(p99), num(p99i), p99/p99i,
				num(r.metrics["p50-ns"]), num(idle.metrics["p50-ns"])), p99 <= 2*p99i)
	}
	if e, ok := rs["Explorer"]; ok && e.metrics["states/s"] > 0 {
		t.row("model explorer rate (TLC with 1 worker on MCPlacement.cfg: 4,885 states/s; 2 workers: 11,336)",
			fmt.Sprintf("%s states/s", num(e.metrics["states/s"])), true)
	}
	return t.b.String()
}

// cond is s when ok, else "" (not measured).
func cond(ok bool, s string) string {
	if ok {
		return s
	}
	return ""
}

// affinityTable lists the Affinity benchmarks with their ratio to the
// core's hit in the same run.
func affinityTable(rs map[string]*result) string {
	var names []string
	for n := range rs {
		if strings.HasPrefix(n, "Affinity/") {
			names = append(names, n)
		}
	}
	sort.Strings(names)
	var b strings.Builder
	b.WriteString("| benchmark | ns/op | allocs/op | B/op | ×core |\n|---|---:|---:|---:|---:|\n")
	for _, n := range names {
		r := rs[n]
		ratio := ""
		if c, ok := rs["Affinity/hit/core"]; ok && c.nsOp > 0 {
			ratio = fmt.Sprintf("%.2f", r.nsOp/c.nsOp)
		}
		fmt.Fprintf(&b, "| %s | %s | %.0f | %.0f | %s |\n", n, num(r.nsOp), r.allocs, r.bOp, ratio)
	}
	return b.String()
}
