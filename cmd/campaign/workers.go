package main

import (
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"sort"
	"strings"
	"time"

	"github.com/placementlab/placement/internal/campaign"
	"github.com/placementlab/placement/linearizability"
	"github.com/placementlab/placement/linearizability/affinitylin"
	"github.com/placementlab/placement/linearizability/claimslin"
	"github.com/placementlab/placement/linearizability/histfile"
	"github.com/placementlab/placement/linearizability/queuelin"
	"github.com/placementlab/placement/model"
	"github.com/placementlab/placement/model/claims"
)

// Harnesses are the Porcupine harnesses the campaign drives, by name:
// each instantiates histfile's skeleton.
var Harnesses = map[string]histfile.Harness{
	"core":              linearizability.Harness,
	"queue":             queuelin.Harness,
	"affinity":          affinitylin.Harness,
	"affinity-replicas": affinitylin.ReplicasHarness,
	"claims-mem":        claimslin.Harness(claimslin.BackendMem),
	"claims-etcd1":      claimslin.Harness(claimslin.BackendEtcd1),
	"claims-etcd3":      claimslin.Harness(claimslin.BackendEtcd3),
}

func newFlags(name string) *flag.FlagSet {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	return fs
}

func harnessOf(name string) (histfile.Harness, error) {
	h, ok := Harnesses[name]
	if !ok {
		var names []string
		for n := range Harnesses {
			names = append(names, n)
		}
		sort.Strings(names)
		return nil, fmt.Errorf("no harness is named %q (%s)", name, strings.Join(names, ", "))
	}
	return h, nil
}

// harnessCmd runs seeds of one harness and prints each outcome as a JSON
// line; it stops at the first failure. Exit 1 on a failure.
func harnessCmd(args []string) int {
	fs := newFlags("harness")
	name := fs.String("name", "core", "the harness")
	seed := fs.Uint64("seed", 1, "the first seed")
	seeds := fs.Int("seeds", 1, "how many seeds")
	ops := fs.Int("ops", 200, "operations per client")
	report := fs.String("report", "", "where failure reports go (empty: the temporary directory)")
	if fs.Parse(args) != nil {
		return 2
	}
	h, err := harnessOf(*name)
	if err != nil {
		fmt.Fprintln(os.Stderr, "campaign harness:", err)
		return 2
	}
	if *report != "" {
		if err := os.MkdirAll(*report, 0o755); err != nil {
			fmt.Fprintln(os.Stderr, "campaign harness:", err)
			return 2
		}
	}
	enc := json.NewEncoder(os.Stdout)
	for s := *seed; s < *seed+uint64(*seeds); s++ {
		o := h.RunSeed(s, *ops, *report)
		fmt.Fprintf(os.Stderr, "%s seed %d: %d operations, %s in %v %s\n", *name, s, o.Operations, o.Result, o.Took.Round(time.Millisecond), o.Note)
		if o.Report != "" {
			fmt.Fprintf(os.Stderr, "report: %s\n", o.Report)
		}
		_ = enc.Encode(o)
		if o.Failed() {
			return 1
		}
	}
	return 0
}

func recheckCmd(args []string) int {
	fs := newFlags("recheck")
	name := fs.String("name", "core", "the harness that recorded the history")
	if fs.Parse(args) != nil || fs.NArg() != 1 {
		fmt.Fprintln(os.Stderr, "usage: campaign recheck -name NAME history.json")
		return 2
	}
	h, err := harnessOf(*name)
	if err != nil {
		fmt.Fprintln(os.Stderr, "campaign recheck:", err)
		return 2
	}
	res, err := h.Recheck(fs.Arg(0), time.Minute)
	if err != nil {
		fmt.Fprintln(os.Stderr, "campaign recheck:", err)
		return 2
	}
	fmt.Printf("%s: %s\n", fs.Arg(0), res)
	if res != "Ok" {
		return 1
	}
	return 0
}

func promoteCmd(args []string) int {
	fs := newFlags("promote")
	name := fs.String("name", "core", "the harness that recorded the history")
	falseAlarm := fs.Bool("false-alarm", false, "the history is the checker's own fault: keep it as one the checker must accept")
	if fs.Parse(args) != nil || fs.NArg() != 1 {
		fmt.Fprintln(os.Stderr, "usage: campaign promote -name NAME [-false-alarm] history.json")
		return 2
	}
	h, err := harnessOf(*name)
	if err != nil {
		fmt.Fprintln(os.Stderr, "campaign promote:", err)
		return 2
	}
	root, err := moduleRoot()
	if err != nil {
		fmt.Fprintln(os.Stderr, "campaign promote:", err)
		return 2
	}
	dst, err := h.Promote(fs.Arg(0), root, *falseAlarm)
	if err != nil {
		fmt.Fprintln(os.Stderr, "campaign promote:", err)
		return 1
	}
	fmt.Printf("campaign promote: wrote %s; TestRecheckSaved re-checks it (commit it)\n", dst)
	return 0
}

// setFlag collects repeated -set values.
type setFlag []string

func (s *setFlag) String() string     { return strings.Join(*s, "; ") }
func (s *setFlag) Set(v string) error { *s = append(*s, v); return nil }

// larger returns the config's text with each "NAME = VALUE" of sets
// replacing the constant's line.
func larger(path string, sets []string) (string, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return "", err
	}
	lines := strings.Split(string(b), "\n")
	for _, s := range sets {
		name, _, ok := strings.Cut(s, "=")
		if !ok {
			return "", fmt.Errorf("-set %q: want NAME = VALUE", s)
		}
		name = strings.TrimSpace(name)
		found := false
		for i, l := range lines {
			if n, _, ok := strings.Cut(l, "="); ok && strings.TrimSpace(n) == name {
				lines[i], found = "    "+strings.TrimSpace(s), true
			}
		}
		if !found {
			return "", fmt.Errorf("%s has no constant %s", path, name)
		}
	}
	return strings.Join(lines, "\n"), nil
}

// exploreCmd explores a config with constants raised (-set) and prints a
// campaign.ExploreReport line; with write it only writes the config (-o).
func exploreCmd(args []string, write bool) int {
	fs := newFlags("explore")
	cfgPath := fs.String("config", "spec/tla/MCPlacement.cfg", "the committed config")
	var sets setFlag
	fs.Var(&sets, "set", "a constant's new line, NAME = VALUE (repeatable)")
	maxStates := fs.Int("max-states", campaign.ExploreMaxStates, "stop beyond this many distinct states (reported as bounded)")
	out := fs.String("o", "", "cfg: where to write the config")
	if fs.Parse(args) != nil {
		return 2
	}
	text, err := larger(*cfgPath, sets)
	if err != nil {
		fmt.Fprintln(os.Stderr, "campaign explore:", err)
		return 2
	}
	if write {
		if err := os.WriteFile(*out, []byte(text), 0o644); err != nil {
			fmt.Fprintln(os.Stderr, "campaign cfg:", err)
			return 2
		}
		return 0
	}
	tc, err := model.ParseTLCConfig(*cfgPath, text)
	if err != nil {
		fmt.Fprintln(os.Stderr, "campaign explore:", err)
		return 2
	}
	rep := campaign.ExploreReport{Config: *cfgPath + " " + strings.Join(sets, " "), Coverage: map[string]int{}}
	var err2 error
	if strings.Contains(*cfgPath, "MCClaims") {
		err2 = exploreClaims(tc, *maxStates, &rep)
	} else {
		err2 = explorePlacement(tc, *maxStates, &rep)
	}
	switch {
	case bounded(err2):
		return printExplore(boundedReport(rep, *maxStates))
	case err2 != nil:
		fmt.Fprintln(os.Stderr, "campaign explore:", err2)
		return 2
	}
	return printExplore(rep)
}

// exploreClaims explores a claims config into rep.
func exploreClaims(tc *model.TLCConfig, maxStates int, rep *campaign.ExploreReport) error {
	m, opts, err := claims.Load(tc)
	if err != nil {
		return err
	}
	opts.MaxStates = maxStates
	r, err := m.Explore(opts)
	if err != nil {
		return err
	}
	rep.Distinct, rep.Generated, rep.Depth, rep.Unreached = r.Distinct, r.Generated, r.Depth, r.UnreachedActions()
	for a, n := range r.Coverage {
		rep.Coverage[claims.ActionNames[a]] = int(n)
	}
	if v := r.Violation; v != nil {
		rep.Violation = violation(v.Kind, v.Property, len(v.Trace), m.FormatTrace(v))
	}
	return nil
}

// explorePlacement explores a core config into rep.
func explorePlacement(tc *model.TLCConfig, maxStates int, rep *campaign.ExploreReport) error {
	m, err := tc.Load()
	if err != nil {
		return err
	}
	opts, err := model.OptionsFor(tc)
	if err != nil {
		return err
	}
	opts.MaxStates = maxStates
	r, err := m.Explore(opts)
	if err != nil {
		return err
	}
	rep.Distinct, rep.Generated, rep.Depth, rep.Unreached = r.Distinct, r.Generated, r.Depth, r.UnreachedActions()
	for a, n := range r.Coverage {
		rep.Coverage[model.ActionNames[a]] = int(n)
	}
	if v := r.Violation; v != nil {
		rep.Violation = violation(v.Kind, v.Property, len(v.Trace), m.FormatTrace(v))
	}
	return nil
}

func violation(kind, property string, states int, trace string) string {
	return fmt.Sprintf("%s %s is violated (trace of %d states): %s", kind, property, states, trace)
}

// bounded reports whether an exploration stopped at its state bound: it
// checks every property on each state as it finds it, so up to the bound
// none was violated (it counts no more than that).
func bounded(err error) bool {
	return err != nil && strings.Contains(err.Error(), "more than") && strings.Contains(err.Error(), "distinct states")
}

func boundedReport(rep campaign.ExploreReport, max int) campaign.ExploreReport {
	rep.Bounded, rep.Distinct, rep.Coverage = true, max, nil
	return rep
}

func printExplore(rep campaign.ExploreReport) int {
	fmt.Fprintf(os.Stderr, "%s: %d distinct states, depth %d, bounded %v\n", rep.Config, rep.Distinct, rep.Depth, rep.Bounded)
	if rep.Violation != "" {
		fmt.Fprintln(os.Stderr, rep.Violation)
	}
	b, _ := json.Marshal(rep)
	fmt.Println(string(b))
	if rep.Violation != "" {
		return 1
	}
	return 0
}
