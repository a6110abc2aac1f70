// Command explore exhaustively explores the placement model configured by a
// TLC config file, checks the invariants and properties it names, and
// prints the distinct-state count (and, on a violation, the shortest trace).
//
//	go run ./model/cmd/explore -config spec/tla/MCPlacement.cfg
//
// It expands each BFS level on -workers goroutines (by default GOMAXPROCS,
// one per core); the counts, the state set and any violation's trace do not
// depend on how many. The summary line gives the rate in states per second.
//
// Exit status: 0 when every property holds (or, with -expect-violation,
// when one of the config's properties is violated as expected), 1 on a
// violation, 2 on a usage or config error.
package main

import (
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"runtime/pprof"
	"strings"

	"github.com/placementlab/placement/model"
)

func main() {
	os.Exit(run(os.Args[1:]))
}

func run(args []string) int {
	fs := flag.NewFlagSet("explore", flag.ContinueOnError)
	cfgPath := fs.String("config", "spec/tla/MCPlacement.cfg", "TLC config file to explore")
	expect := fs.Bool("expect-violation", false, "succeed only if a property the config names is violated (for MCBug*.cfg)")
	jsonOut := fs.String("json", "", "also write the report as JSON to this file")
	maxStates := fs.Int("max-states", 20_000_000, "give up beyond this many distinct states")
	quiet := fs.Bool("q", false, "print only the summary line")
	workers := fs.Int("workers", 0, "goroutines expanding each BFS level (0: GOMAXPROCS); the result does not depend on it")
	cpuProfile := fs.String("cpuprofile", "", "write a CPU profile of the exploration to this file")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	c, err := model.ReadTLCConfig(*cfgPath)
	if err != nil {
		fmt.Fprintln(os.Stderr, "explore:", err)
		return 2
	}
	m, err := c.Load()
	if err != nil {
		fmt.Fprintln(os.Stderr, "explore:", err)
		return 2
	}
	opts, err := model.OptionsFor(c)
	if err != nil {
		fmt.Fprintln(os.Stderr, "explore:", err)
		return 2
	}
	opts.MaxStates = *maxStates
	opts.Workers = *workers
	if opts.Workers <= 0 {
		opts.Workers = runtime.GOMAXPROCS(0)
	}
	if *cpuProfile != "" {
		f, err := os.Create(*cpuProfile)
		if err != nil {
			fmt.Fprintln(os.Stderr, "explore:", err)
			return 2
		}
		defer f.Close()
		if err := pprof.StartCPUProfile(f); err != nil {
			fmt.Fprintln(os.Stderr, "explore:", err)
			return 2
		}
	}
	rep, err := m.Explore(opts)
	if *cpuProfile != "" {
		pprof.StopCPUProfile()
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "explore:", err)
		return 2
	}
	name := filepath.Base(*cfgPath)
	if *jsonOut != "" {
		if err := writeJSON(*jsonOut, name, rep, opts.Workers); err != nil {
			fmt.Fprintln(os.Stderr, "explore:", err)
			return 2
		}
	}
	if !*quiet {
		fmt.Printf("config %s (variants: %s)\n", *cfgPath, orNone(rep.Variants))
		fmt.Printf("checked: invariants %s; properties %s\n",
			orNone(c.Invariants), orNone(c.Properties))
		fmt.Printf("%-20s %12s %12s\n", "action", "steps", "new states")
		for a, n := range model.ActionNames {
			fmt.Printf("%-20s %12d %12d\n", n, rep.Coverage[a], rep.NewStates[a])
		}
	}
	fmt.Printf("%s: %d states generated, %d distinct states found, depth %d, %.2fs (%.0f states/s, %d workers, GOMAXPROCS %d)\n",
		name, rep.Generated, rep.Distinct, rep.Depth, rep.Elapsed.Seconds(), rep.StatesPerSecond(), opts.Workers, runtime.GOMAXPROCS(0))
	if rep.StateSetHash != "" {
		fmt.Printf("state set sha256 %s\n", rep.StateSetHash)
	}
	if v := rep.Violation; v != nil {
		if !*quiet || !*expect {
			fmt.Printf("\n%s %s is violated. Shortest trace (%d states):\n%s",
				strings.ToUpper(v.Kind[:1])+v.Kind[1:], v.Property, len(v.Trace), m.FormatTrace(v))
		}
		if *expect {
			fmt.Printf("%s: violation of %s found, as expected (trace of %d states)\n", name, v.Property, len(v.Trace))
			return 0
		}
		return 1
	}
	if *expect {
		fmt.Printf("%s: expected a violation, but every property holds\n", name)
		return 1
	}
	if un := rep.UnreachedActions(); len(un) > 0 {
		fmt.Printf("%s: actions never enabled: %s\n", name, strings.Join(un, ", "))
		return 1
	}
	fmt.Printf("%s: no error found\n", name)
	return 0
}

func orNone(s []string) string {
	if len(s) == 0 {
		return "none"
	}
	return strings.Join(s, ", ")
}

func writeJSON(path, name string, rep *model.Report, workers int) error {
	out := map[string]any{
		"config":         name,
		"distinct":       rep.Distinct,
		"generated":      rep.Generated,
		"depth":          rep.Depth,
		"state_set_hash": rep.StateSetHash,
		"seconds":        rep.Elapsed.Seconds(),
		"states_per_sec": rep.StatesPerSecond(),
		"workers":        workers,
		"variants":       rep.Variants,
		"unreached":      rep.UnreachedActions(),
		"coverage":       coverage(rep),
		"violation":      nil,
	}
	if v := rep.Violation; v != nil {
		out["violation"] = map[string]any{"property": v.Property, "kind": v.Kind, "trace_length": len(v.Trace)}
	}
	b, err := json.MarshalIndent(out, "", "  ")
	if err != nil {
		return err
	}
	return os.WriteFile(path, append(b, '\n'), 0o644)
}

func coverage(rep *model.Report) map[string]int64 {
	out := map[string]int64{}
	for a, n := range model.ActionNames {
		out[n] = rep.Coverage[a]
	}
	return out
}
