// Command mutants runs the bug zoo: every deliberately broken variant of
// impl/placement (compiled in only with -tags placement_mutants) against
// the checkers, in order, and prints which checker caught it and how fast.
// It fails unless every variant is caught, and also checks that the
// checkers pass on the unbroken build.
//
//	go run ./linearizability/cmd/mutants
package main

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"time"
)

// The variants, as the mutant("…") hooks in impl/placement name them;
// checkVariants fails the run when the two lists differ.
var variants = []struct{ name, doc string }{
	{"ReplaysQuarantine", "a quarantined key is reserved again (its attempt replayed)"},
	{"AcceptsStaleAttempt", "a fenced Accepted completion is applied"},
	{"IgnoresGenerationFence", "hits ignore the target's generation"},
	{"DoubleDecrementsLease", "a lease's second end decrements again"},
	{"ExpiresLeased", "the idle deadline expires leased bindings"},
	{"ClosesWhileLeased", "the final request removes a binding others still hold"},
	{"LosesWakeup", "waiters are not woken when a reservation is cancelled"},
	{"CapacityOffByOne", "a full table admits one more entry"},
	{"ResolveIgnoresGeneration", "Resolve is fenced by attempt only"},
	{"ExpiryWithoutKill", "Query reports an expired binding gone without winning its word (a hit that read the clock first still takes a lease)"},
	{"TornQueryRead", "Query reads the binding word, then the clock, and judges expiry from the two"},
	{"StaleAtBirthSilent", "a commit whose binding is stale at birth returns no error (the caller believes the session bound)"},
	{"LiveCountsUnswept", "Stats.Live counts expired, stale and timed-out entries until a sweep reclaims them"},
	{"AmbiguousWithoutTarget", "the *AmbiguousError and the Quarantined event leave out the attempt's target"},
	{"DoneKeepsReservation", "Done leaves a reservation held (never dispatched, or back after DefinitelyNotAccepted): waiters block until the timeout"},
	{"ActsAfterClose", "after Close, dispatches, commits, resolves and invalidations still act"},
	{"AttemptsFromOne", "every coordinator counts attempt ids from 1, so they repeat across coordinators and restarts"},
	{"NoHandOff", "a freed key is not handed to the longest waiter: every waiter and newcomer races for it (the landed core's broadcast)"},
	{"QuarantineNeverExpires", "a quarantine outlives its QuarantineTTL: only a settlement or a bump ends it"},
	{"QuarantineIgnoresGeneration", "a quarantine whose target's generation moved on is kept (its late result could only bind stale)"},
}

// The checkers, in the order they are tried: test is an anchored -test.run
// pattern. The contract tests (impl/placement's TestContract_*) check the
// rules no model step can see: what a request's Done gives back, attempt
// ids across coordinators, what calls do after Close.
var checkers = []struct{ name, pkg, test string }{
	{"rapid state machine", "linearizability", "TestImplMatchesModel"},
	{"porcupine", "linearizability", "TestLinearizable"},
	{"fuzz corpus", "fuzz", "FuzzImplMatchesModel"},
	{"contract tests", "impl/placement", "TestContract_.*"},
}

// usesRapid reports whether pkg's test binary defines rapid's flags.
func usesRapid(pkg string) bool { return pkg == "linearizability" || pkg == "fuzz" }

func main() {
	os.Exit(run())
}

func run() int {
	if err := checkVariants(); err != nil {
		fmt.Fprintln(os.Stderr, "mutants:", err)
		return 2
	}
	dir, err := os.MkdirTemp("", "placement-mutants")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 2
	}
	defer os.RemoveAll(dir)
	bins := map[string]string{}
	for _, c := range checkers {
		pkg := c.pkg
		if bins[pkg] != "" {
			continue
		}
		bins[pkg] = filepath.Join(dir, strings.ReplaceAll(pkg, "/", "-")+".test")
		build := exec.Command("go", "test", "-c", "-tags", "placement_mutants", "-o", bins[pkg], "./"+pkg+"/")
		build.Stdout, build.Stderr = os.Stdout, os.Stderr
		if err := build.Run(); err != nil {
			fmt.Fprintln(os.Stderr, "mutants: building the mutant test binaries:", err)
			return 2
		}
	}
	reports := filepath.Join(dir, "reports")
	failed := 0
	// The checkers must pass on the unbroken build (same binary, no variant).
	for _, c := range checkers {
		if ok, _, detail := runChecker(bins[c.pkg], c.pkg, reports, "", c.test, 1); !ok {
			fmt.Printf("mutants: %s fails without any variant: %s\n", c.name, detail)
			failed++
		}
	}
	fmt.Printf("\n%-26s %-22s %8s  %s\n", "VARIANT", "CAUGHT BY", "TIME", "FIRST DIVERGENCE")
	caught := 0
	for _, v := range variants {
		by, took, detail := "NOBODY", time.Duration(0), ""
		// The checkers are randomized: a variant none of them catches gets
		// up to two more rounds with fresh seeds before it counts as a hole.
		for round := 1; round <= 3 && by == "NOBODY"; round++ {
			for _, c := range checkers {
				ok, d, det := runChecker(bins[c.pkg], c.pkg, reports, v.name, c.test, round)
				took += d
				if !ok {
					by, detail = c.name, det
					if round > 1 {
						by = fmt.Sprintf("%s (round %d)", c.name, round)
					}
					break
				}
			}
		}
		if by != "NOBODY" {
			caught++
		}
		fmt.Printf("%-26s %-22s %7.1fs  %s\n", v.name, by, took.Seconds(), detail)
	}
	fmt.Printf("caught %d/%d\n", caught, len(variants))
	if caught != len(variants) || failed > 0 {
		return 1
	}
	return 0
}

var divergence = regexp.MustCompile(`returned [^\n]*? the model says (?:\S*\([^)\n]*\)|[^\n\s]*)|reads \{[^}]*\}[^\n]*?model says \{[^}]*\}|is Illegal[^;]*|lost wake-up|Stats reads [^\n]*|has IdleDeadline [^\n]*|contract_test\.go:\d+: [^\n]*`)

// runChecker runs one checker with the variant set; ok is true when it passes.
// Each round draws fresh seeds: rapid's are random; Porcupine's plans start
// at a different seed per round (128 plans, 32 of them hot sessions, whose
// races need the scheduler's luck).
func runChecker(bin, dir, reports, variant, test string, round int) (ok bool, took time.Duration, detail string) {
	args := []string{"-test.run", "^" + test + "$", "-test.count=1"}
	if usesRapid(dir) {
		args = append(args, "-rapid.nofailfile", "-rapid.checks=3000")
	}
	cmd := exec.Command(bin, args...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "PLACEMENT_MUTANT="+variant, "LINEARIZABILITY_REPORT_DIR="+reports,
		"LINEARIZABILITY_WAIT_LIMIT=500ms", "LINEARIZABILITY_FAILFAST=1", "LINEARIZABILITY_SEEDS=128",
		fmt.Sprintf("LINEARIZABILITY_SEED=%d", 1+1000*(round-1)))
	start := time.Now()
	out, err := cmd.CombinedOutput()
	took = time.Since(start)
	if err == nil {
		return true, took, ""
	}
	detail = divergence.FindString(string(out))
	if detail == "" && thin.Match(out) {
		// The run failed only its own thinness checks (too few overlapping
		// operations on a loaded machine, say): that judges the run, not
		// the variant, so it is no catch.
		return true, took, ""
	}
	if detail == "" {
		lines := strings.Split(strings.TrimSpace(string(out)), "\n")
		detail = lines[len(lines)-1]
	}
	if len(detail) > 90 {
		detail = detail[:90] + "…"
	}
	return false, took, detail
}

// thin matches a checker's complaint that its own run was too thin.
var thin = regexp.MustCompile(`too thin`)

var hook = regexp.MustCompile(`mutant\("(\w+)"\)`)

// checkVariants compares the variants table with the mutant("…") hooks in
// impl/placement, so a hook without a row (never run) or a row without a
// hook (a variant that no longer exists) fails the run.
func checkVariants() error {
	files, err := filepath.Glob("impl/placement/*.go")
	if err != nil || len(files) == 0 {
		return fmt.Errorf("no impl/placement sources found (run from the repository root): %v", err)
	}
	hooks := map[string]bool{}
	for _, f := range files {
		if strings.HasSuffix(f, "_test.go") {
			continue
		}
		b, err := os.ReadFile(f)
		if err != nil {
			return err
		}
		for _, m := range hook.FindAllStringSubmatch(string(b), -1) {
			hooks[m[1]] = true
		}
	}
	rows := map[string]bool{}
	for _, v := range variants {
		rows[v.name] = true
		if !hooks[v.name] {
			return fmt.Errorf("variant %s has no mutant(%q) hook in impl/placement", v.name, v.name)
		}
	}
	for h := range hooks {
		if !rows[h] {
			return fmt.Errorf("impl/placement has a mutant(%q) hook that the bug zoo never runs", h)
		}
	}
	return nil
}
