// Command peerbench runs the peers benchmarks in interleaved rounds: every
// round runs every (workload, contender) pair once, in a freshly shuffled
// order (seeded; the seed is printed), in process with testing.Benchmark.
// For each workload it reports each contender's ratio to placement's time
// in the same round, then the median and spread of those ratios over the
// rounds, allocs and B/op; then the targets against the bare xsync map and
// what each contender does not give. It prints Markdown and writes
// peers.md, peers.txt (benchstat format) and peers.png under -out.
//
//	go run ./cmd/peerbench [-rounds 7] [-short] [-seed N] [-benchtime 200ms] [-out ../results]
//	go run ./cmd/peerbench -from ../results/peers.txt -seed N   # re-render peers.md and peers.png
package main

import (
	"flag"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/placementlab/placement/benchmarks/peers"
)

func main() {
	testing.Init()
	rounds := flag.Int("rounds", 7, "interleaved rounds")
	short := flag.Bool("short", false, "3 rounds of 50ms each, 20,000 sessions for the large table")
	seed := flag.Uint64("seed", 0, "shuffle seed (0: from the time)")
	benchtime := flag.Duration("benchtime", 200*time.Millisecond, "time per measurement")
	n := flag.Int("n", 100000, "the large table's size")
	out := flag.String("out", "../results", "directory for peers.md, peers.txt and peers.png")
	from := flag.String("from", "", "re-render peers.md and peers.png from this raw output (peers.txt) instead of measuring")
	flag.Parse()
	if *short {
		*rounds, *benchtime, *n = 3, 50*time.Millisecond, 20000
	}
	if *seed == 0 {
		*seed = uint64(time.Now().UnixNano())
	}
	if err := flag.Set("test.benchtime", benchtime.String()); err != nil {
		panic(err)
	}
	start := time.Now()
	if *from != "" {
		rerender(*from, *out, *benchtime, *seed, *n)
		return
	}
	ws := peers.Workloads(*n)
	cs := peers.Contenders()
	var names []string
	for _, c := range cs {
		names = append(names, c.Name)
	}
	rng := rand.New(rand.NewPCG(*seed, 0x9e3779b97f4a7c15))
	var raw strings.Builder
	fmt.Fprintf(&raw, "goos: %s\ngoarch: %s\npkg: github.com/placementlab/placement/benchmarks/peers\nseed: %d\nrounds: %d\n", runtime.GOOS, runtime.GOARCH, *seed, *rounds)
	fmt.Fprintf(os.Stderr, "peerbench: %d rounds, seed %d, benchtime %v, n %d\n", *rounds, *seed, *benchtime, *n)
	var samples []sample
	type pair struct{ w, c int }
	for r := 0; r < *rounds; r++ {
		var ps []pair
		for wi := range ws {
			for ci := range cs {
				ps = append(ps, pair{wi, ci})
			}
		}
		rng.Shuffle(len(ps), func(i, j int) { ps[i], ps[j] = ps[j], ps[i] })
		for _, p := range ps {
			w, c := ws[p.w], cs[p.c]
			name := fmt.Sprintf("BenchmarkPeers/%s/%s-%d", w.Name, c.Name, runtime.GOMAXPROCS(0))
			s := sample{round: r, workload: w.Name, contender: c.Name}
			if strings.HasPrefix(w.Name, "Memory/") {
				s.ns = c.Mem(*n)
				fmt.Fprintf(&raw, "%s\t1\t%.2f B/binding\n", name, s.ns)
			} else {
				res := testing.Benchmark(func(b *testing.B) { w.Run(b, c) })
				if res.N == 0 {
					fmt.Fprintf(os.Stderr, "peerbench: %s failed\n", name)
					os.Exit(1)
				}
				s.ns = float64(res.T.Nanoseconds()) / float64(res.N)
				s.allocs, s.bytes = res.AllocsPerOp(), res.AllocedBytesPerOp()
				fmt.Fprintf(&raw, "%s\t%d\t%.2f ns/op\t%d B/op\t%d allocs/op\n", name, res.N, s.ns, s.bytes, s.allocs)
			}
			samples = append(samples, s)
		}
		fmt.Fprintf(os.Stderr, "peerbench: round %d/%d done (%v)\n", r+1, *rounds, time.Since(start).Round(time.Second))
	}
	md := report(samples, ws, names, *rounds, *seed, *benchtime, *n, time.Since(start))
	fmt.Print(md)
	must(os.MkdirAll(*out, 0o755))
	must(os.WriteFile(filepath.Join(*out, "peers.md"), []byte(md), 0o644))
	must(os.WriteFile(filepath.Join(*out, "peers.txt"), []byte(raw.String()), 0o644))
	png := filepath.Join(*out, "peers.png")
	must(plotRatios(samples, ws, names, png))
	fmt.Printf("\nwrote %s, %s and the plot %s\n", filepath.Join(*out, "peers.md"), filepath.Join(*out, "peers.txt"), png)
}

func must(err error) {
	if err != nil {
		fmt.Fprintln(os.Stderr, "peerbench:", err)
		os.Exit(1)
	}
}

// gaps is what each contender does not give that the core does.
var gaps = [][]string{
	{"placement", "yes", "yes", "yes", "yes", "yes"},
	{"xsync-bare", "yes (Compute), but only for the map write: no reservation across a dispatch", "no", "no", "no bound at all", "yes (own atomics)"},
	{"xsync-cache", "yes (Compute), map write only", "no", "no", "no bound at all", "yes (under the bucket lock)"},
	{"otter", "yes (Compute), map write only", "no", "no", "no: size and expiry evict leased entries", "from the last hit, not the last release"},
	{"otter-coarse", "as otter", "no", "no", "as otter", "as otter"},
	{"lru-expirable", "no (Peek then Add under the contender's mutex)", "no", "no", "no: evicts the oldest, leased or not", "only by re-adding (a write) at the last release"},
	{"ristretto", "no (Get then Set under the contender's mutex; Set is buffered and may be dropped)", "no", "no", "no: admission and eviction ignore leases", "only by re-setting (async, may be dropped)"},
}

func report(samples []sample, ws []peers.Workload, names []string, rounds int, seed uint64, bt time.Duration, n int, took time.Duration) string {
	var b strings.Builder
	when := fmt.Sprintf("took %v", took.Round(time.Second))
	if took == 0 {
		when = "re-rendered from the raw output"
	}
	fmt.Fprintf(&b, "## The peers: interleaved rounds\n\nRun %s on %s/%s, %d CPUs, %s: %d rounds, seed %d, benchtime %v, large table %d, %s.\n\n",
		time.Now().UTC().Format("2006-01-02 15:04 UTC"), runtime.GOOS, runtime.GOARCH, runtime.NumCPU(), runtime.Version(), rounds, seed, bt, n, when)
	b.WriteString("Each ratio is the contender's figure divided by placement's in the same round; median and spread over the rounds. Memory rows are B/binding (heap after GC, key bytes excluded).\n\n")
	b.WriteString(tableHeader)
	for _, w := range ws {
		unit := "ns/op"
		if strings.HasPrefix(w.Name, "Memory/") {
			unit = "B/binding"
		}
		b.WriteString(table(w.Name, unit, summarize(samples, w.Name, peers.Baseline, names)))
	}
	// Targets against the bare xsync map: placement ÷ xsync-bare per round.
	rs := ratiosTo(samples, peers.Baseline)
	ref := func(w string) []float64 { return inverse(rs[w][peers.Reference]) }
	var mem []float64
	for _, s := range samples {
		if s.workload == ws[5].Name && s.contender == peers.Baseline {
			mem = append(mem, s.ns)
		}
	}
	ts := []target{
		{name: "hot path ≤ 1.1× the bare xsync map at 1,024 (" + ws[0].Name + ")", limit: 1.1, ratios: ref(ws[0].Name)},
		{name: fmt.Sprintf("hot path ≤ 1.5× the bare xsync map at %d (%s)", n, ws[1].Name), limit: 1.5, ratios: ref(ws[1].Name)},
		{name: "new session ≤ 2× the bare xsync map (" + ws[4].Name + ")", limit: 2, ratios: ref(ws[4].Name)},
		{name: "memory ≤ 100 B/binding (" + ws[5].Name + ")", limit: 100, ratios: mem, absolute: true},
		{name: "one shared key in parallel ≤ 1.2× the best contender", limit: 1.2, ratios: bestRatios(samples, ws[3].Name, peers.Baseline)},
	}
	b.WriteString("\n### The targets (placement against the bare xsync map)\n\n| target | median | min–max | status |\n|---|---:|---:|---|\n")
	for _, t := range ts {
		b.WriteString(t.row())
	}
	b.WriteString("\n### What each contender does not give\n\n| contender | single initializer across a dispatch | quarantine of an ambiguous dispatch | fencing by target generation | a bound that never evicts a leased session | idle deadline from the last release |\n|---|---|---|---|---|---|\n")
	for _, g := range gaps {
		b.WriteString("| " + strings.Join(g, " | ") + " |\n")
	}
	return b.String()
}

// rerender writes peers.md and peers.png again from a raw output.
func rerender(from, out string, bt time.Duration, seed uint64, n int) {
	raw, err := os.ReadFile(from)
	must(err)
	samples := parseRaw(string(raw))
	rounds := 0
	for _, s := range samples {
		rounds = max(rounds, s.round+1)
	}
	var names []string
	for _, c := range peers.Contenders() {
		names = append(names, c.Name)
	}
	ws := peers.Workloads(n)
	md := report(samples, ws, names, rounds, seed, bt, n, 0)
	fmt.Print(md)
	must(os.WriteFile(filepath.Join(out, "peers.md"), []byte(md), 0o644))
	must(plotRatios(samples, ws, names, filepath.Join(out, "peers.png")))
}
