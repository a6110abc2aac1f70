package campaign

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"path/filepath"
	"regexp"
	"strings"
	"time"

	"github.com/placementlab/placement/linearizability/histfile"
)

// Checkers is the campaign's catalogue: every checker of the repository,
// as the campaign rotates through them.
func Checkers() []Checker {
	cs := []Checker{
		zooChecker(),
		harnessChecker("core", "the placement core under concurrent clients, checked with Porcupine against the model", []int{200, 400, 1000, 2000}, 4, 2),
		harnessChecker("queue", "the policy queue under concurrent clients, checked with Porcupine", []int{80, 200, 500}, 4, 1),
		harnessChecker("affinity", "the affinity layer over the local core, checked with Porcupine", []int{100, 200, 400}, 3, 1.5),
		harnessChecker("affinity-replicas", "the affinity layer over a replica on memstore, write replies lost on half the seeds", []int{100, 200, 400}, 3, 1.5),
		harnessChecker("claims-mem", "the claims store (memstore) under faults, checked with Porcupine and the event streams", []int{200, 400, 800}, 4, 1),
		harnessChecker("claims-etcd1", "the claims store on an embedded one-member etcd under faults", []int{90, 200}, 1, 1),
		harnessChecker("claims-etcd3", "the claims store on an embedded three-member etcd under faults", []int{90, 200}, 1, 1),
		{
			Name: "etcd-faults", Kind: "go-test", Weight: 0.5, Limit: 8 * time.Minute,
			Doc: "etcdstore's fault tests against the embedded etcd (connection cuts, lost replies, quorum loss, lost sessions)",
			Plan: func(r *rand.Rand, u *Unit) {
				u.Race = r.IntN(2) == 0
				u.Load = r.IntN(3) == 0
			},
			Run: goTestRun("./impl/claims/etcdstore/...", "Fault|Cut|Lost|Loss|Unreachable|Judges", nil),
		},
		{
			Name: "stress", Kind: "go-test", Weight: 0.5, Limit: 8 * time.Minute,
			Doc: "the core's stress tests (hits against expiry, torn reads, epoch wrap, a close during a capacity sweep) under -race at GOMAXPROCS 8, 30 s each",
			Plan: func(r *rand.Rand, u *Unit) {
				u.Race, u.Procs = true, 8
				u.Load = r.IntN(2) == 0
			},
			Run: goTestRun("./impl/placement/ ./linearizability/", "Stress|EpochWrap|CloseDuringCapacitySweep", []string{"PLACEMENT_STRESS=30s"}),
		},
	}
	for _, t := range rapidTargets {
		cs = append(cs, rapidChecker(t))
	}
	cs = append(cs, fuzzChecker(), exploreChecker(), tlcChecker(), replayChecker())
	return cs
}

// harnessChecker runs a Porcupine harness (histfile.Harness) in the
// worker binary: count seeds of ops operations per client, with or
// without -race, at a GOMAXPROCS, with a CPU-bound neighbour part of the
// time.
func harnessChecker(name, doc string, sizes []int, count int, weight float64) Checker {
	return Checker{
		Name: name, Kind: "porcupine", Doc: doc, Weight: weight, Limit: 6 * time.Minute,
		Plan: func(r *rand.Rand, u *Unit) {
			u.Race = r.IntN(2) == 0
			u.Procs = []int{0, 1, 2, 4, 8}[r.IntN(5)]
			u.Load = r.IntN(3) == 0
			u.Size = sizes[r.IntN(len(sizes))]
			u.Count = count
		},
		Run: func(ctx context.Context, e *Env, u Unit) Result {
			bin := e.Bin
			if u.Race {
				bin = e.Race
			}
			var out bytes.Buffer
			c := command{name: bin, stdout: &out, args: []string{"harness", "-name", u.Checker,
				"-seed", fmt.Sprint(u.Seed), "-seeds", fmt.Sprint(u.Count), "-ops", fmt.Sprint(u.Size),
				"-report", filepath.Join(e.Out, "failures")}}
			if u.Procs > 0 {
				c.env = []string{fmt.Sprintf("GOMAXPROCS=%d", u.Procs)}
			}
			log, err := e.run(ctx, u, c)
			res := Result{Status: Pass, Log: e.Rel(log), Coverage: map[string]int{}}
			sc := bufio.NewScanner(&out)
			sc.Buffer(make([]byte, 1<<20), 1<<24)
			for sc.Scan() {
				var o histfile.Outcome
				if json.Unmarshal(sc.Bytes(), &o) != nil {
					continue
				}
				res.Runs++
				res.Checked += int64(o.Operations)
				for k, v := range o.Coverage {
					res.Coverage[k] += v
				}
				if o.Failed() {
					res.Status = Fail
					res.Failures = append(res.Failures, harnessFailure(e, u, o, res.Log))
				}
			}
			switch {
			case res.Status == Fail:
				res.Detail = fmt.Sprintf("%d seeds, %d operations: %s", res.Runs, res.Checked, res.Failures[0].What)
			case err != nil || res.Runs < u.Count:
				res.Status = Error
				res.Detail = fmt.Sprintf("the worker ended (%s) after %d of %d seeds: %s", exitDetail(err), res.Runs, u.Count, lastLine(log))
			default:
				res.Detail = fmt.Sprintf("%d seeds from %d, %d operations, all linearizable", res.Runs, u.Seed, res.Checked)
			}
			return res
		},
	}
}

func harnessFailure(e *Env, u Unit, o histfile.Outcome, log string) Failure {
	race := ""
	if u.Race {
		race = "-race "
	}
	procs := ""
	if u.Procs > 0 {
		procs = fmt.Sprintf("GOMAXPROCS=%d ", u.Procs)
	}
	f := Failure{
		Checker: u.Checker, Unit: u, Seed: o.Seed, Result: o.Result, Log: log,
		What:  fmt.Sprintf("seed %d: %s history of %d operations is %s %s", o.Seed, u.Checker, o.Operations, o.Result, o.Note),
		Repro: fmt.Sprintf("%sgo run %s./cmd/campaign harness -name %s -seed %d -seeds 1 -ops %d", procs, race, u.Checker, o.Seed, u.Size),
	}
	if o.Result == histfile.ResultError {
		f.What = fmt.Sprintf("seed %d: the run failed: %s", o.Seed, o.Note)
	}
	if o.Report != "" {
		f.ID = filepath.Base(o.Report)
		f.History = e.Rel(filepath.Join(o.Report, "history.json"))
		f.HTML = e.Rel(filepath.Join(o.Report, "history.html"))
		if o.Trimmed > 0 {
			f.Trimmed = e.Rel(filepath.Join(o.Report, "history.min.json"))
		}
		kept := f.History
		if f.Trimmed != "" {
			kept = f.Trimmed
		}
		f.Promote = fmt.Sprintf("go run ./cmd/campaign promote -name %s %s", u.Checker, filepath.Join(e.Out, kept))
	} else {
		f.ID = fmt.Sprintf("%s-%d-seed%d", u.Checker, u.N, o.Seed)
	}
	return f
}

// goTestRun runs pattern's tests of pkgs (space-separated) as a unit,
// with env set (and -race, GOMAXPROCS as the unit says).
func goTestRun(pkgs, pattern string, env []string) func(ctx context.Context, e *Env, u Unit) Result {
	return func(ctx context.Context, e *Env, u Unit) Result {
		c := e.goTest(u, append([]string{"-timeout", "7m", "-run", pattern, "-v"}, strings.Fields(pkgs)...)...)
		c.env = append(c.env, env...)
		log, err := e.run(ctx, u, c)
		res := Result{Status: Pass, Log: e.Rel(log), Runs: countLines(log, "--- PASS"), Checked: int64(countLines(log, "--- PASS"))}
		if err != nil {
			res.Status = Fail
			what := firstMatch(log, regexp.MustCompile(`(?m)^\s*--- FAIL: .*$`))
			if what == "" {
				what = lastLine(log)
			}
			race := ""
			if u.Race {
				race = "-race "
			}
			res.Failures = []Failure{{ID: fmt.Sprintf("%s-%d", u.Checker, u.N), Checker: u.Checker, Unit: u, Seed: u.Seed,
				What: strings.TrimSpace(what), Result: "FAIL", Log: res.Log,
				Repro: fmt.Sprintf("%sgo test -count=1 %s-run '%s' %s", envPrefix(append(procsEnv(u), env...)), race, pattern, pkgs)}}
			res.Detail = strings.TrimSpace(what)
			return res
		}
		res.Detail = fmt.Sprintf("%d tests passed", res.Runs)
		return res
	}
}

// rapidTarget is a package's rapid properties.
type rapidTarget struct{ name, pkg, pattern, doc string }

var rapidTargets = []rapidTarget{
	{"rapid-core", "./linearizability/", "^TestImplMatchesModel$", "the core against the model, step for step (rapid state machine)"},
	{"rapid-claims-store", "./linearizability/claimsconf/", "^TestStoreMatchesModel$", "memstore beside the claims model, step for step"},
	{"rapid-picker", "./impl/picker/", "^TestProp", "the picker's properties"},
	{"rapid-eligibility", "./impl/affinity/", "^TestEligibility(OrderIndependent|BindingComesBack)$", "the layer's eligibility properties"},
	{"rapid-blocklru", "./internal/blocklru/", "^TestModelOneBlockAtATime$", "the prefix cache's LRU against its model"},
}

// rapidChecker runs t's properties at a high check count from the unit's
// seed (rapid shrinks a failure, and prints it).
func rapidChecker(t rapidTarget) Checker {
	return Checker{
		Name: t.name, Kind: "rapid", Doc: t.doc, Weight: 0.5, Limit: 8 * time.Minute,
		Plan: func(r *rand.Rand, u *Unit) {
			u.Race = r.IntN(3) == 0
			u.Size = []int{300, 1000, 2000}[r.IntN(3)]
			if u.Race {
				u.Size = 300
			}
		},
		Run: func(ctx context.Context, e *Env, u Unit) Result {
			c := e.goTest(u, "-run", t.pattern, "-v", t.pkg, fmt.Sprintf("-rapid.checks=%d", u.Size), fmt.Sprintf("-rapid.seed=%d", u.Seed))
			log, err := e.run(ctx, u, c)
			props := countLines(log, "--- PASS")
			res := Result{Status: Pass, Log: e.Rel(log), Runs: props, Checked: int64(props * u.Size)}
			if err == nil {
				res.Detail = fmt.Sprintf("%d properties, %d checks each, seed %d", props, u.Size, u.Seed)
				return res
			}
			what := firstMatch(log, regexp.MustCompile(`(?m)^.*\[rapid\].*$`))
			if what == "" {
				what = firstMatch(log, regexp.MustCompile(`(?m)^\s*--- FAIL: .*$`))
			}
			if what == "" {
				res.Status, res.Detail = Error, fmt.Sprintf("go test ended (%s): %s", exitDetail(err), lastLine(log))
				return res
			}
			race := ""
			if u.Race {
				race = "-race "
			}
			res.Status = Fail
			res.Detail = strings.TrimSpace(what)
			res.Failures = []Failure{{ID: fmt.Sprintf("%s-%d", u.Checker, u.N), Checker: u.Checker, Unit: u, Seed: u.Seed,
				What: res.Detail, Result: "FAIL", Log: res.Log,
				Repro: fmt.Sprintf("go test -count=1 %s-run '%s' %s -rapid.checks=%d -rapid.seed=%d", race, t.pattern, t.pkg, u.Size, u.Seed),
				// rapid keeps the shrunk failure in the package's
				// testdata/rapid; -rapid.failfile replays it.
				Promote: fmt.Sprintf("git add %stestdata/rapid", strings.TrimPrefix(t.pkg, "./"))}}
			return res
		},
	}
}

// FuzzTargets are the go test -fuzz targets of ./fuzz/.
var FuzzTargets = []string{"FuzzAffinityInputs", "FuzzImplMatchesModel", "FuzzKeys", "FuzzConfig", "FuzzClock"}

// fuzzChecker runs one fuzz target a unit, in turn, for a count of
// inputs (counts, not durations: see the Makefile's fuzz target).
func fuzzChecker() Checker {
	return Checker{
		Name: "fuzz", Kind: "fuzz", Doc: "every go test -fuzz target of ./fuzz/, in turn, for a count of inputs", Weight: 1.5, Limit: 8 * time.Minute,
		Plan: func(r *rand.Rand, u *Unit) {
			u.Size = []int{100_000, 300_000, 600_000}[r.IntN(3)]
			u.Arg = FuzzTargets[u.N%len(FuzzTargets)]
		},
		Run: func(ctx context.Context, e *Env, u Unit) Result {
			target := u.Arg
			c := command{name: e.Go, args: []string{"test", "-run", "^$", "-fuzz", "^" + target + "$", "-fuzztime", fmt.Sprintf("%dx", u.Size), "-parallel", "2", "./fuzz/"}}
			log, err := e.run(ctx, u, c)
			res := Result{Status: Pass, Log: e.Rel(log), Runs: 1, Checked: int64(u.Size)}
			if err == nil {
				res.Detail = fmt.Sprintf("%s: %d inputs, no crasher", target, u.Size)
				return res
			}
			input := firstSub(log, regexp.MustCompile(`Failing input written to (\S+)`))
			rerun := firstSub(log, regexp.MustCompile(`go test -run=(\S+)`))
			if input == "" {
				res.Status, res.Detail = Error, fmt.Sprintf("%s: go test ended (%s): %s", target, exitDetail(err), lastLine(log))
				return res
			}
			res.Status = Fail
			res.Detail = fmt.Sprintf("%s: crasher %s", target, input)
			res.Failures = []Failure{{ID: fmt.Sprintf("fuzz-%d", u.N), Checker: u.Checker, Unit: u, Seed: u.Seed,
				What:   firstMatch(log, regexp.MustCompile(`(?m)^\s+fuzz_test\.go:\d+:.*$|^\s+\S+_test\.go:\d+:.*$`)) + " (" + target + ")",
				Result: "crasher", Log: res.Log,
				Repro: fmt.Sprintf("go test -run '%s' ./fuzz/", rerun),
				// go test already wrote the crasher to the package's
				// testdata/fuzz, which plain go test runs: commit it.
				Promote: fmt.Sprintf("git add fuzz/%s", input)}}
			return res
		},
	}
}

// Exploration is one exploration at larger constants: a committed config
// with constants raised.
type Exploration struct {
	Config string
	Set    []string // NAME=VALUE lines replacing the config's
}

// String names the exploration.
func (x Exploration) String() string {
	return strings.TrimSuffix(filepath.Base(x.Config), ".cfg") + " " + strings.Join(x.Set, " ")
}

// Explorations are the model explorer's and TLC's larger configs, in turn.
var Explorations = []Exploration{
	{"spec/tla/MCPlacement.cfg", []string{"MaxClock = 4"}},
	{"spec/tla/MCPlacement.cfg", []string{"Requests = {r1, r2, r3, r4}"}},
	{"spec/tla/MCPlacement.cfg", []string{"MaxAttempt = 4", "MaxGen = 3"}},
	{"spec/tla/MCClaims.cfg", []string{"MaxFaults = 2"}},
	{"spec/tla/MCClaims.cfg", []string{"MaxRev = 4"}},
	{"spec/tla/MCClaims.cfg", []string{"MaxMoves = 1"}},
	{"spec/tla/MCClaims.cfg", []string{"MaxLeases = 2"}},
}

// ExploreMaxStates bounds one exploration: a larger config that reaches
// it is reported as explored up to the bound.
const ExploreMaxStates = 3_000_000

func exploreArgs(x Exploration) []string {
	a := []string{"-config", x.Config}
	for _, s := range x.Set {
		a = append(a, "-set", s)
	}
	return a
}

// ExploreReport is the worker's explore line.
type ExploreReport struct {
	Config    string   `json:"config"`
	Distinct  int      `json:"distinct"`
	Generated int64    `json:"generated"`
	Depth     int      `json:"depth"`
	Bounded   bool     `json:"bounded,omitempty"`
	Violation string   `json:"violation,omitempty"`
	Unreached []string `json:"unreached,omitempty"`
	Coverage  map[string]int
}

// exploreChecker explores a larger config (Explorations, in turn) with
// the Go model's explorer, every invariant and property the config names.
func exploreChecker() Checker {
	return Checker{
		Name: "explore", Kind: "explore", Doc: "the Go models' exhaustive explorer (core and claims) at larger constants than the committed configs",
		Weight: 1, Limit: 10 * time.Minute,
		Plan: func(r *rand.Rand, u *Unit) { u.Arg = Explorations[u.N%len(Explorations)].String() },
		Run: func(ctx context.Context, e *Env, u Unit) Result {
			x := Explorations[u.N%len(Explorations)]
			var out bytes.Buffer
			args := append([]string{"explore", "-max-states", fmt.Sprint(ExploreMaxStates)}, exploreArgs(x)...)
			log, err := e.run(ctx, u, command{name: e.Bin, args: args, stdout: &out})
			res := Result{Status: Pass, Log: e.Rel(log)}
			var rep ExploreReport
			if jerr := json.Unmarshal(bytes.TrimSpace(out.Bytes()), &rep); jerr != nil {
				res.Status, res.Detail = Error, fmt.Sprintf("%s: %s: %s", x, exitDetail(err), lastLine(log))
				return res
			}
			res.Runs, res.Checked, res.Coverage = 1, int64(rep.Distinct), rep.Coverage
			res.Detail = fmt.Sprintf("%s: %d distinct states, depth %d", x, rep.Distinct, rep.Depth)
			if rep.Bounded {
				res.Detail += fmt.Sprintf(" (stopped at the bound of %d states)", ExploreMaxStates)
			}
			if rep.Violation != "" {
				res.Status = Fail
				res.Detail = fmt.Sprintf("%s: %s", x, rep.Violation)
				res.Failures = []Failure{{ID: fmt.Sprintf("explore-%d", u.N), Checker: u.Checker, Unit: u, Seed: u.Seed,
					What: res.Detail, Result: "violation", Log: res.Log,
					Repro: "go run ./cmd/campaign explore " + quoteArgs(exploreArgs(x))}}
			}
			return res
		},
	}
}

// tlcChecker runs TLC's simulation mode on a larger config when a TLC jar
// is present (TLA2TOOLS_JAR), and says it is skipping when not.
func tlcChecker() Checker {
	return Checker{
		Name: "tlc-simulate", Kind: "tlc", Doc: "TLC in simulation mode at larger constants (needs TLA2TOOLS_JAR)", Weight: 0.5, Limit: 10 * time.Minute,
		Plan: func(r *rand.Rand, u *Unit) {
			u.Size = 20_000
			u.Arg = Explorations[u.N%len(Explorations)].String()
		},
		Run: func(ctx context.Context, e *Env, u Unit) Result {
			x := Explorations[u.N%len(Explorations)]
			if e.Jar == "" {
				return Result{Status: Skip, Detail: "skipping: TLA2TOOLS_JAR names no TLC jar (set it to a tla2tools.jar to simulate the larger configs)"}
			}
			module := "MCPlacement.tla"
			if strings.Contains(x.Config, "MCClaims") {
				module = "MCClaims.tla"
			}
			cfg := filepath.Join(e.Out, "logs", fmt.Sprintf("tlc-%d.cfg", u.N))
			log, err := e.run(ctx, u, command{name: e.Bin, args: append([]string{"cfg", "-o", cfg}, exploreArgs(x)...)})
			if err != nil {
				return Result{Status: Error, Log: e.Rel(log), Detail: "writing the config: " + lastLine(log)}
			}
			args := []string{"-XX:+UseParallelGC", "-cp", e.Jar, "tlc2.TLC", "-simulate", fmt.Sprintf("num=%d", u.Size),
				"-depth", "60", "-seed", fmt.Sprint(u.Seed), "-workers", "1", "-noGenerateSpecTE", "-deadlock",
				"-metadir", filepath.Join(e.Out, "logs", fmt.Sprintf("tlc-meta-%d", u.N)), "-config", cfg, filepath.Join("spec", "tla", module)}
			log, err = e.run(ctx, u, command{name: "java", args: args})
			res := Result{Status: Pass, Log: e.Rel(log), Runs: 1, Checked: int64(u.Size)}
			if err == nil {
				res.Detail = fmt.Sprintf("%s: %d behaviours simulated, no violation", x, u.Size)
				return res
			}
			what := firstMatch(log, regexp.MustCompile(`(?m)^Error: .*$|^.*is violated.*$`))
			if what == "" {
				res.Status, res.Detail = Error, fmt.Sprintf("TLC ended (%s): %s", exitDetail(err), lastLine(log))
				return res
			}
			res.Status, res.Detail = Fail, fmt.Sprintf("%s: %s", x, what)
			res.Failures = []Failure{{ID: fmt.Sprintf("tlc-%d", u.N), Checker: u.Checker, Unit: u, Seed: u.Seed, What: res.Detail,
				Result: "violation", Log: res.Log, Repro: "java " + quoteArgs(args)}}
			return res
		},
	}
}

// ReplayReport is the worker's replay line.
type ReplayReport struct {
	Seed       uint64   `json:"seed"`
	Requests   int      `json:"requests"`
	Checks     int      `json:"checks"`
	Violations []string `json:"violations,omitempty"`
	Replicas   bool     `json:"replicas,omitempty"`
}

// replayChecker runs the replay on a workload drawn from the unit's seed
// (every policy, or the replicas' consistencies) and checks its
// invariants: no lease leaked, no session routed to a departed worker, no
// turn on two workers at once.
func replayChecker() Checker {
	return Checker{
		Name: "replay", Kind: "replay", Doc: "the replay on random workloads with churn, its invariants checked (no lease leaked, no session routed to a departed worker, no turn on two workers at once)",
		Weight: 1, Limit: 6 * time.Minute,
		Plan: func(r *rand.Rand, u *Unit) {
			u.Count = 1
			if r.IntN(2) == 0 {
				u.Arg = "replicas"
			}
		},
		Run: func(ctx context.Context, e *Env, u Unit) Result {
			var out bytes.Buffer
			args := []string{"replay", "-seed", fmt.Sprint(u.Seed)}
			if u.Arg == "replicas" {
				args = append(args, "-replicas")
			}
			log, err := e.run(ctx, u, command{name: e.Bin, args: args, stdout: &out})
			res := Result{Status: Pass, Log: e.Rel(log)}
			var rep ReplayReport
			if jerr := json.Unmarshal(bytes.TrimSpace(out.Bytes()), &rep); jerr != nil {
				res.Status, res.Detail = Error, fmt.Sprintf("replay: %s: %s", exitDetail(err), lastLine(log))
				return res
			}
			res.Runs, res.Checked = 1, int64(rep.Checks)
			res.Coverage = map[string]int{"requests": rep.Requests, "invariant checks": rep.Checks}
			res.Detail = fmt.Sprintf("seed %d: %d requests, %d invariant checks", u.Seed, rep.Requests, rep.Checks)
			if rep.Checks == 0 {
				res.Status, res.Detail = Error, res.Detail+": no invariant was checked"
			}
			if len(rep.Violations) > 0 {
				res.Status = Fail
				res.Detail = fmt.Sprintf("seed %d: %s", u.Seed, rep.Violations[0])
				res.Failures = []Failure{{ID: fmt.Sprintf("replay-%d", u.N), Checker: u.Checker, Unit: u, Seed: u.Seed,
					What: strings.Join(rep.Violations, "; "), Result: "violation", Log: res.Log,
					Repro: "go run ./cmd/campaign " + quoteArgs(args)}}
			}
			return res
		},
	}
}

var zooRow = regexp.MustCompile(`^(\S+)\s+(.+?)\s+(\d+\.\d+s)  (.*)$`)

// zooChecker runs the bug zoo once: every broken variant must be caught,
// each with its time to catch.
func zooChecker() Checker {
	return Checker{
		Name: "bug-zoo", Kind: "zoo", Once: true, Limit: 25 * time.Minute,
		Doc: "every deliberately broken variant of the core, the layer, the queue, the replica and etcdstore, caught by its checkers",
		Run: func(ctx context.Context, e *Env, u Unit) Result {
			c := command{name: e.Go, args: []string{"run", "./linearizability/cmd/mutants", "-j", "3"}}
			log, err := e.run(ctx, u, c)
			res := Result{Status: Pass, Log: e.Rel(log)}
			for _, line := range strings.Split(readFile(log), "\n") {
				m := zooRow.FindStringSubmatch(line)
				if m == nil || strings.HasPrefix(m[1], "VARIANT") {
					continue
				}
				row := ZooRow{Variant: m[1], By: strings.TrimSpace(m[2]), Time: m[3], First: m[4], Caught: strings.TrimSpace(m[2]) != "NOBODY"}
				res.Zoo = append(res.Zoo, row)
				res.Runs++
				if !row.Caught {
					res.Failures = append(res.Failures, Failure{ID: "zoo-" + row.Variant, Checker: u.Checker, Unit: u,
						What: fmt.Sprintf("the broken variant %s was not caught: %s", row.Variant, row.First), Result: "not caught", Log: res.Log,
						Repro: fmt.Sprintf("go run ./linearizability/cmd/mutants -only %s", row.Variant)})
				}
			}
			res.Checked = int64(res.Runs)
			caught := firstMatch(log, regexp.MustCompile(`(?m)^caught \d+/\d+$`))
			switch {
			case len(res.Failures) > 0:
				res.Status, res.Detail = Fail, caught
			case err != nil || caught == "" || res.Runs == 0:
				res.Status, res.Detail = Error, fmt.Sprintf("the bug zoo ended (%s): %s", exitDetail(err), lastLine(log))
			default:
				res.Detail = caught
			}
			return res
		},
	}
}
