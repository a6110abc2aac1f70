// Command mutants runs the bug zoo: every deliberately broken variant of
// impl/placement, impl/affinity, impl/policyqueue, impl/replica and impl/claims/etcdstore (with its embedded server)
// (compiled in only with -tags placement_mutants) against the checkers of
// its package, in order, and prints which checker caught it and how fast.
// It fails unless every variant is caught, and also checks that the
// checkers pass on the unbroken build. Each checker runs first as plain
// `go test` runs it, and is killed (and the run fails) if it has not ended
// within -bound: under any variant a checker fails (or passes) in bounded
// time, never hangs. With -bounds it audits exactly that for every
// package's whole plain test run under every variant. -j variants are
// checked at once (default 4: their checkers mostly wait, on timeouts and
// on etcd, so four at once fit two cores); rows print in order.
//
//	go run ./linearizability/cmd/mutants            # the bug zoo (make mutants)
//	go run ./linearizability/cmd/mutants -bounds    # the bound audit (make verify)
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"sync"
	"time"

	"golang.org/x/sync/errgroup"
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
	{"StatsSkipsDeadlines", "Stats counts what the table holds without applying passed deadlines: a timed-out dispatch, an over quarantine, an expired binding"},
	{"AmbiguousWithoutTarget", "the *AmbiguousError and the Quarantined event leave out the attempt's target"},
	{"DoneKeepsReservation", "Done leaves a reservation held (never dispatched, or back after DefinitelyNotAccepted): waiters block until the timeout"},
	{"ActsAfterClose", "after Close, dispatches, commits, resolves and invalidations still act"},
	{"AttemptsFromOne", "every coordinator counts attempt ids from 1, so they repeat across coordinators and restarts"},
	{"NoHandOff", "a freed key is not handed to the longest waiter: every waiter and newcomer races for it (the landed core's broadcast)"},
	{"QuarantineNeverExpires", "a quarantine outlives its QuarantineTTL: only a settlement or a bump ends it"},
	{"QuarantineIgnoresGeneration", "a quarantine whose target's generation moved on is kept (its late result could only bind stale)"},
	{"ObserverPanicEscapes", "a panic in the Observer escapes with the key's lock held: the key is wedged, and a sweep's Close never returns"},
	{"DispatchDeadlineUnnoted", "a dispatch's deadline does not reach the capacity path's sweep hint: a full table refuses though its entry is over"},
	{"QuarantinedReadsClockOnce", "Quarantined reads the clock once before its walk: a quarantine begun during the walk lists a negative age"},
	{"BindingsNotCounted", "commits are not counted in Bindings (per-target counts read zero)"},
	{"DispatchesLostReservation", "BeginDispatch accepts a reservation the key has handed to another request: two initializers"},
	{"SweepsOnceWhenFull", "a full table sweeps once, at the call's first clock reading, and refuses though something ended since"},
	{"ForgetsLateHandOff", "a waiter handed the key just after it looked forgets the reservation when the key's entry is replaced meanwhile"},
	{"BumpHiddenFromCapacity", "a full table's capacity check ignores a bump under way: with the new generation stored and the epoch not yet moved, it refuses without sweeping the quarantine the bump made stale"},
	{"RefusesDuringRemoval", "a full table refuses while a removal is under way: the binding already reads as gone (a lease's Close, Bindings, the Observer), its slot not yet freed"},
}

// affinityVariants are the broken variants of impl/affinity, as its
// mutant("…") hooks name them; checkVariants compares them with the hooks.
var affinityVariants = []struct{ name, doc string }{
	{"FollowsDepartedWorker", "Start keeps a binding whose worker failed, left or restarted (no move)"},
	{"MovesWithoutFence", "a soft move invalidates whatever binding the session has now, not the version the request holds"},
	{"DispatchesToDeparted", "a placing dispatch does not re-read the membership after BeginDispatch (no rollback when its worker left or restarted in between)"},
	{"FinalInvalidates", "the final request's Done invalidates the binding instead of closing it (others' leases superseded)"},
	{"FlapFences", "the same identity back after Fail fences the worker's bindings like a restart"},
	{"HardPinFollows", "hard mode: a pin that disagrees with the binding is no error, and the binding follows the pin"},
	{"NarrowsToUnavailable", "Eligibility narrows to the affinity target although it is not dispatchable"},
	{"AdmitsFlood", "second-turn admission is off: a flood of one-off session ids fills the table"},
	{"KeepsGoneQuarantine", "a quarantine of an attempt on a worker that left or restarted still holds its session until the Leave's (or Join's) bump reaches the core"},
	{"PinIgnoresBinding", "a worker-only pin that agrees with a binding to one of the worker's ranks offers every rank (Eligible applies the pin alone): the pick of another rank is a mismatch (hard) or a move (soft)"},
	{"CountsRefusalCalls", "Stats.Moves[MoveRefused] counts every refused hit's invalidation, also one that removed nothing (a stale hold, a second refusal of one version)"},
	{"QuarantineGoesAnywhere", "soft mode: a quarantined session's turns go to the full set, not to the quarantined attempt's target while it is eligible"},
	{"TrustsOldHit", "Start judges the membership after its hit and returns the binding without checking it is still live (a descheduled Start returns a binding that ended)"},
	{"JoinLocalOnly", "over replicas, Join and Leave change this replica's membership only (no registration in the store): a restart seen by one replica does not fence the others' bindings"},
}

// queueVariants are the broken variants of impl/policyqueue, as its
// mutant("…") hooks name them; checkVariants compares them with the hooks.
var queueVariants = []struct{ name, doc string }{
	{"SharedLaneStarves", "a pass serves the heads of the exact lanes before any shared item, however old"},
	{"ReleaseTwice", "a slot's second Release frees it again (the worker gets an extra slot)"},
	{"CancelLeaksSlot", "a Cancel after admission ends the ticket but does not free its slot"},
	{"RecheckSkipsBlocked", "Recheck and RecheckAll re-examine nothing: a lane blocked by an Allow answer that changed stays blocked"},
	{"CloseStrandsWaiters", "Close ends the waiting items without waking their Waits"},
}

// replicaVariants are the broken variants of impl/replica (the replicated
// coordinator), as its mutant("…") hooks name them; checkVariants compares
// them with the hooks.
var replicaVariants = []struct{ name, doc string }{
	{"UnfencedClose", "a terminal close uses the store's current revision, not the one the replica holds (it can delete a newer claim)"},
	{"NoEvictOnReset", "a Reset leaves the cached claims: a claim that ended while events were lost keeps routing"},
	{"CloseWhileHeld", "a final request closes the claim while other local leases on it remain"},
	{"SkipsHold", "the replica never tells the store it holds a claim: another replica's close deletes it under this one's leases"},
	{"NoRehold", "after a Reset (or a failed hold) the replica does not hold again the claims it has requests in flight on"},
	{"ExpiresInUse", "no Touch while leases are held: a claim in use expires"},
	{"LeasesPerRecord", "leases are counted per cached record, not per session: after a Reset the last lease of either copy closes the claim under the other's"},
	{"ResolveUnchecked", "Resolve(accepted) of an own quarantine the store has not recorded binds again under the old revision without the store confirming it current"},
	{"DropsDeferredDelete", "a Delete or Reset that came while a write of the key was in flight is not applied when the write returns"},
	{"DefersEveryRecord", "a Delete waits for a write of the key in flight whatever the cached record: a binding under the replaced revision keeps routing"},
	{"ForgetsLateQuarantine", "a quarantine write that lands after Resolve settled its attempt locally is left in the store: every replica refuses the session"},
	{"DropsLeasedSlot", "the keepalive drops a slot with no current record and no hold while a record of it has requests in flight: their claim expires under them"},
	{"IgnoresStoreTTL", "a replica left at IdleTTL zero uses the 30-minute default whatever the store's TTL (a longer one is accepted too): claims in use expire"},
	{"UnsettledQuarantine", "a quarantine write whose reply was lost is taken as not applied (the store is not read): the store keeps a quarantine settled locally, and every replica refuses the session"},
	{"UnsettledResolve", "a Resolve whose reply was lost is not settled by reading the store: it fails though it applied, and its retry is fenced by its own first try"},
	{"UnsettledClose", "a terminal close whose reply was lost is retried without reading the store: a close that deleted or deferred the claim is counted as stale"},
	{"SerialTouches", "the keepalive touches claims one at a time: on a slow store that still answers, claims in use expire"},
	{"DropsSecondQuarantine", "an own quarantine refused because another attempt under the same revision was quarantined first is never written: once that one is settled, other replicas dispatch while this attempt's outcome is unknown"},
	{"UnsettledHold", "a Hold whose reply was lost is taken as not made: when it landed, nothing gives it up, and a close deferred on it leaves the claim Closing"},
	{"UnsettledCreate", "a CreateOrGet whose reply was lost is taken as not applied: the session is placed unclaimed though its claim was written"},
	{"UnfencedMove", "a replica's move rewrites the claim from the store's current revision, not the one its hit is on: the second of two concurrent moves overwrites the first"},
	{"UnsettledMove", "a move whose reply was lost is taken as not applied: the turn fails though the claim moved"},
	{"KeepsExpiredQuarantine", "an own quarantine the local QuarantineTTL ended is left in the store: every other replica refuses the session until the claim's idle TTL"},
	{"ReopensSettled", "a quarantine write that found the store unreachable is retried after Resolve settled its attempt: the store is quarantined again (a settled quarantine re-opened)"},
	{"OldLineageKeepsClaim", "leases on a binding whose claim moved (a new lineage) still hold the session's claim: its final request closes nothing until they end"},
	{"AdoptsClosing", "a turn reads the claim this replica's close is deleting and adopts it: its binding vanishes under it"},
	{"ClosesEndedBinding", "the final request's lease on a binding a refused later turn ended closes the claim: the session's new binding under the same revision is deleted"},
	{"DropsRefusedSlot", "the keepalive drops the slot that remembers a refused claim: the next turn adopts the refused claim again"},
	{"ForgetsAdoptedRefusal", "an adopted claim whose dispatch was refused is not remembered as refused: the next turn dispatches to the refusing worker again"},
	{"RefusedLeasesKeepClaim", "leases on a binding a refused later turn ended still hold the claim past the session's final request"},
	{"WriteLossMeansDown", "a write whose reply was lost marks the store down: concurrent turns place their sessions unclaimed with the store up"},
	{"ClosesUnderAdopter", "the last lease of a closing binding deletes the claim that another request of the session is adopting"},
	{"PlacerLeaseLate", "the placing request's lease is counted only after the core's commit: a final request that hits in between closes the claim under the placer"},
	{"BoundForgetsRefusal", "a refused hit that ends the binding between the placer's commit and its record's binding is forgotten: the refused claim is adopted again"},
	{"LateEviction", "a closing binding's record stays current after its last lease is counted: a hit in between takes a lease on a claim about to be deleted"},
	{"RefusesStaleClaim", "a quarantined or closing claim read (or cached) before its worker left or restarted refuses the session: every later turn is refused with a quarantine that ended"},
}

// etcdVariants are the broken variants of impl/claims/etcdstore and its
// embedded server, as their mutant("…") hooks name them. They fault the
// store's own code against a real etcd, where each has one deterministic
// catcher, named in its package's table (catchers): the zoo runs that one
// test, not every etcd test under every variant, which would take minutes.
var etcdVariants = []struct{ name, doc string }{
	{"ResolveTwoReads", "Resolve reads the claim, then the registration in a second call: a stale verdict names a claim that was no longer current"},
	{"EOFNotUnavailable", "a dropped connection's bare io.EOF (and other transport errors without a gRPC status) is a plain error, not unavailable: the store is not marked down"},
	{"RefreshLossUnmarked", "a claim's lease refresh that finds the store unreachable after a write leaves the store marked up (no Reset)"},
	{"SessionNotResumed", "a session ended on the client side starts a new lease even when the old one lives: the registrations on it expire after the heal"},
	{"RegistrationsNotRewritten", "after the session's lease expired, the store's registrations are not written again on the new lease: live workers vanish"},
	{"MoveIgnoresRegistration", "Move's write is fenced by the claim's revision only: a target that restarts between the read and the write gets a claim under its old generation"},
	{"CloseTrustsOldRead", "Close rewrites a claim as Closing from what the store's Hold read at an earlier revision: a claim another replica moved closes under its old target"},
	{"LeaseReusedTooLate", "a deleted claim's lease is reused however long ago it was granted: a new claim on it may expire before IdleTTL"},
	{"LeaseReusedWhileHeld", "a Close that leaves the claim Closing gives its lease to the next new claim: two claims share one lease"},
	{"NoReadIdleTimeout", "embedded.NewClient's connections have no read-idle timeout: a dead connection is noticed only by gRPC's 10 s keepalive"},
}

// etcdPackages hold the etcd variants.
var etcdPackages = []string{"impl/claims/etcdstore", "impl/claims/etcdstore/embedded"}

// catcherRow is a row of a package's own variants table (mutant_test.go:
// {"Variant", "TestCatcher"}).
var catcherRow = regexp.MustCompile(`\{"(\w+)", "(Test\w+)"\}`)

// catchers reads pkg's own table of variants and the test that must catch
// each (its mutant_test.go, which its TestVariantsCaught runs).
func catchers(pkg string) (map[string]string, error) {
	b, err := os.ReadFile(filepath.Join(pkg, "mutant_test.go"))
	if err != nil {
		return nil, err
	}
	out := map[string]string{}
	for _, m := range catcherRow.FindAllStringSubmatch(string(b), -1) {
		out[m[1]] = m[2]
	}
	return out, nil
}

// catcherOf is the package and catching test of each variant whose
// package names one (impl/replica's and the etcd packages'), filled by
// checkVariants.
var catcherOf = map[string]struct{ pkg, test string }{}

// etcdCheckers are the etcd catchers as the unbroken build runs them, one
// run per package.
func etcdCheckers() []struct{ name, pkg, test string } {
	var out []struct{ name, pkg, test string }
	for _, pkg := range etcdPackages {
		var tests []string
		for _, v := range etcdVariants {
			if c := catcherOf[v.name]; c.pkg == pkg {
				tests = append(tests, c.test)
			}
		}
		out = append(out, struct{ name, pkg, test string }{pkg + " catchers", pkg, strings.Join(tests, "|")})
	}
	return out
}

// checkersOf returns the checkers a variant of zoo runs, in order: the
// group's, except that a package's "contract tests" checker runs only the
// variant's own catcher where its package names one (a whole contract
// suite run per variant costs seconds each; which test catches the variant
// is fixed), and an etcd variant runs its catcher alone.
func checkersOf(variant string, group []struct{ name, pkg, test string }) []struct{ name, pkg, test string } {
	c, ok := catcherOf[variant]
	if !ok {
		return group
	}
	if group == nil {
		return []struct{ name, pkg, test string }{{"etcd catcher (" + c.pkg + ")", c.pkg, c.test}}
	}
	out := append([]struct{ name, pkg, test string }{}, group...)
	for i := range out {
		if out[i].pkg == c.pkg {
			out[i].test = c.test
		}
	}
	return out
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

// affinityCheckers are tried on the affinity variants: the Porcupine check
// of the layer's shared state, then impl/affinity's contract, anchor-bug,
// eligibility and flood tests (for the rules outside its model).
var affinityCheckers = []struct{ name, pkg, test string }{
	{"affinity porcupine", "linearizability/affinitylin", "TestLinearizable"},
	{"affinity contract tests", "impl/affinity", "TestContract_.*|TestAnchorBug_.*|TestEligibility.*|TestFlood.*|TestReplicas_.*"},
}

// queueCheckers are tried on the policy queue's variants: the Porcupine
// check of the queue's shared state, then impl/policyqueue's contract
// tests (for the rule outside the model's reach: Recheck after an Allow
// answer changes).
var queueCheckers = []struct{ name, pkg, test string }{
	{"queue porcupine", "linearizability/queuelin", "TestLinearizable"},
	{"queue contract tests", "impl/policyqueue", "TestContract_.*"},
}

// replicaCheckers are tried on impl/replica's variants: the cross-replica
// check (replica Coordinators over a shared memstore under faults: the
// store history checked with Porcupine, each replica's routes against the
// events it processed), then impl/replica's contract tests.
var replicaCheckers = []struct{ name, pkg, test string }{
	{"claims routing check", "linearizability/claimslin", "TestRoutingMem"},
	{"replica contract tests", "impl/replica", "TestContract_.*|TestGap_.*"},
}

// usesRapid reports whether pkg's test binary defines rapid's flags.
func usesRapid(pkg string) bool {
	return pkg == "linearizability" || pkg == "fuzz" || pkg == "impl/affinity"
}

// bound is how long one checker's run (or, with -bounds, one package's
// plain test run) may take under any variant before it counts as hung.
var bound = flag.Duration("bound", 120*time.Second, "longest a checker may run under a variant before it counts as hung")

// bounds selects the audit of the plain test runs (see runBounds).
var jobs = flag.Int("j", 4, "variants checked at once (their checkers mostly wait: on two cores beside a busy loop, -j 4 checks the 71 variants in 2 min 39 s, -j 2 took 3 min 16 s on an idle machine)")

var only = flag.String("only", "", "check only the variant of this name (the campaign's command to reproduce a variant not caught)")

// selected returns the variants of vs that -only selects (all without it).
func selected(vs []struct{ name, doc string }) []struct{ name, doc string } {
	if *only == "" {
		return vs
	}
	var out []struct{ name, doc string }
	for _, v := range vs {
		if v.name == *only {
			out = append(out, v)
		}
	}
	return out
}

var bounds = flag.Bool("bounds", false, "run every package's plain `go test` under every variant and check that each ends within -bound")

func main() {
	flag.Parse()
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
	all := append(append(append(append([]struct{ name, pkg, test string }{}, checkers...), affinityCheckers...), queueCheckers...), replicaCheckers...)
	if !*bounds {
		// The bound audit leaves the etcd packages out: no other package's
		// variant reaches their code, and their catchers bound their own waits.
		all = append(all, etcdCheckers()...)
	}
	// The test binaries, -j at a time (the go command's own build is
	// mostly serial: two builds at once use the two cores).
	var builds errgroup.Group
	builds.SetLimit(max(1, *jobs))
	for _, c := range all {
		pkg := c.pkg
		if bins[pkg] != "" {
			continue
		}
		bins[pkg] = filepath.Join(dir, strings.ReplaceAll(pkg, "/", "-")+".test")
		bin := bins[pkg]
		builds.Go(func() error {
			start := time.Now()
			out, err := exec.Command("go", "test", "-c", "-tags", "placement_mutants", "-o", bin, "./"+pkg+"/").CombinedOutput()
			os.Stdout.Write(out)
			if err != nil {
				return fmt.Errorf("building the %s test binary: %w", pkg, err)
			}
			fmt.Printf("mutants: built the %s test binary with the variants in %.1fs\n", pkg, time.Since(start).Seconds())
			return nil
		})
	}
	if err := builds.Wait(); err != nil {
		fmt.Fprintln(os.Stderr, "mutants: building the mutant test binaries:", err)
		return 2
	}
	reports := filepath.Join(dir, "reports")
	if *bounds {
		return runBounds(bins, reports)
	}
	failed := 0
	// The checkers must pass on the unbroken build (same binary, no variant).
	var base errgroup.Group
	base.SetLimit(max(1, *jobs))
	var baseMu sync.Mutex
	start := time.Now()
	for _, c := range all {
		base.Go(func() error {
			if ok, _, detail := runChecker(bins[c.pkg], c.pkg, reports, "", c.test, 1); !ok {
				baseMu.Lock()
				fmt.Printf("mutants: %s fails without any variant: %s\n", c.name, detail)
				failed++
				baseMu.Unlock()
			}
			return nil
		})
	}
	_ = base.Wait()
	fmt.Printf("mutants: the checkers ran on the unbroken build in %.1fs\n", time.Since(start).Seconds())
	caught, hung := 0, 0
	var mu sync.Mutex // caught, hung
	for _, zoo := range []struct {
		what     string
		variants []struct{ name, doc string }
		checkers []struct{ name, pkg, test string }
	}{{"impl/placement", selected(variants), checkers}, {"impl/affinity", selected(affinityVariants), affinityCheckers},
		{"impl/policyqueue", selected(queueVariants), queueCheckers}, {"impl/replica", selected(replicaVariants), replicaCheckers},
		{"impl/claims/etcdstore", selected(etcdVariants), nil}} {
		if len(zoo.variants) == 0 {
			continue
		}
		fmt.Printf("\n%-27s %-26s %8s  %s\n", "VARIANT ("+zoo.what+")", "CAUGHT BY", "TIME", "FIRST DIVERGENCE")
		// Up to -j variants at once; their rows print in order, each as
		// soon as it and those before it are done.
		rows := make([]chan string, len(zoo.variants))
		for i := range rows {
			rows[i] = make(chan string, 1)
		}
		var g errgroup.Group
		g.SetLimit(max(1, *jobs))
		go func() {
			for i, v := range zoo.variants {
				g.Go(func() error {
					row, ok, hangs := checkVariant(v.name, checkersOf(v.name, zoo.checkers), bins, reports)
					mu.Lock()
					if ok {
						caught++
					}
					hung += hangs
					mu.Unlock()
					rows[i] <- row
					return nil
				})
			}
		}()
		for _, row := range rows {
			fmt.Println(<-row)
		}
		_ = g.Wait()
	}
	total := len(selected(variants)) + len(selected(affinityVariants)) + len(selected(queueVariants)) + len(selected(replicaVariants)) + len(selected(etcdVariants))
	if total == 0 {
		fmt.Fprintf(os.Stderr, "mutants: no variant is named %q\n", *only)
		return 2
	}
	fmt.Printf("caught %d/%d\n", caught, total)
	if hung > 0 {
		fmt.Printf("mutants: %d checker runs did not end within %v\n", hung, *bound)
	}
	if caught != total || failed > 0 || hung > 0 {
		return 1
	}
	return 0
}

// checkVariant runs the checkers against variant, in order, until one
// fails (catches it): round 1 runs each checker as plain `go test` runs
// it. The checkers are randomized: a variant none of them catches gets up
// to two more rounds with fresh seeds and more of them before it counts as
// a hole. It returns the variant's row, whether it was caught, and how
// many checker runs hung.
func checkVariant(variant string, checkers []struct{ name, pkg, test string }, bins map[string]string, reports string) (row string, caught bool, hung int) {
	by, took, detail := "NOBODY", time.Duration(0), ""
	for round := 1; round <= 3 && by == "NOBODY"; round++ {
		for _, c := range checkers {
			ok, d, det := runChecker(bins[c.pkg], c.pkg, reports, variant, c.test, round)
			took += d
			if det == hangDetail {
				hung++
			}
			if !ok {
				by, detail = c.name, det
				if round > 1 {
					by = fmt.Sprintf("%s (round %d)", c.name, round)
				}
				break
			}
		}
	}
	return fmt.Sprintf("%-27s %-26s %7.1fs  %s", variant, by, took.Seconds(), detail), by != "NOBODY", hung
}

// hangDetail is runChecker's detail for a run killed at the bound.
var hangDetail = "HUNG: killed at the bound"

var divergence = regexp.MustCompile(`returned [^\n]*? the model says (?:\S*\([^)\n]*\)|[^\n\s]*)|reads \{[^}]*\}[^\n]*?model says \{[^}]*\}|is Illegal[^;]*|lost wake-up|did not return within[^\n]*|Stats breaks[^\n]*|has IdleDeadline [^\n]*|observer: \w+|guarantee \d broken: [^\n]*`)

// testLine is a failing test's message, the detail when no divergence of
// the model's kinds is named.
var testLine = regexp.MustCompile(`[a-z_]+_test\.go:\d+: [^\n]*`)

// runChecker runs one checker with the variant set; ok is true when it
// passes. Round 1 runs it as plain `go test` does (its own defaults);
// later rounds draw fresh seeds and more of them: rapid's are random, and
// Porcupine's plans start at a different seed per round (128 plans, 32 of
// them hot sessions, whose races need the scheduler's luck). A run that
// has not ended after the bound is killed and fails (hangDetail).
func runChecker(bin, dir, reports, variant, test string, round int) (ok bool, took time.Duration, detail string) {
	args := []string{"-test.run", "^(?:" + test + ")$", "-test.count=1"}
	env := []string{"PLACEMENT_MUTANT=" + variant, "LINEARIZABILITY_REPORT_DIR=" + reports}
	if usesRapid(dir) {
		// The zoo needs the catch, not rapid's shortest example of it.
		args = append(args, "-rapid.nofailfile", "-rapid.shrinktime=2s")
		if round > 1 {
			args = append(args, "-rapid.checks=3000")
		}
	}
	if round > 1 {
		env = append(env, "LINEARIZABILITY_SEEDS=128", fmt.Sprintf("LINEARIZABILITY_SEED=%d", 1+1000*(round-1)),
			"AFFINITYLIN_SEEDS=40", "QUEUELIN_SEEDS=40", "CLAIMSLIN_ROUTING_SEEDS=12")
	}
	out, took, err, hung := runBinary(bin, dir, args, env)
	switch {
	case hung:
		return false, took, hangDetail
	case err == nil:
		return true, took, ""
	}
	detail = divergence.FindString(string(out))
	if detail == "" && !thin.Match(out) {
		detail = testLine.FindString(string(out))
		if strings.HasSuffix(detail, ": ") {
			detail += testifyDetail(string(out))
		}
	}
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

// testifyMessage and testifyError are the lines of testify's report of a
// failed assertion, whose first line (the one testLine finds) is empty.
var (
	testifyMessage = regexp.MustCompile(`\bMessages:\s+([^\n]*)`)
	testifyError   = regexp.MustCompile(`\bError:\s+([^\n]*)`)
)

// testifyDetail returns the message (or, without one, the error line) of
// the first testify assertion that failed in out.
func testifyDetail(out string) string {
	if locs := testLine.FindAllStringIndex(out, 2); len(locs) == 2 {
		out = out[locs[0][1]:locs[1][0]]
	}
	if m := testifyMessage.FindStringSubmatch(out); m != nil {
		return strings.TrimSpace(m[1])
	}
	if m := testifyError.FindStringSubmatch(out); m != nil {
		return strings.TrimSpace(m[1])
	}
	return ""
}

// runBinary runs a test binary in dir with args and env added, killing it
// (and reporting hung) once it has run for the bound.
func runBinary(bin, dir string, args, env []string) (out []byte, took time.Duration, err error, hung bool) {
	ctx, cancel := context.WithTimeout(context.Background(), *bound)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, args...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), env...)
	cmd.WaitDelay = 5 * time.Second
	start := time.Now()
	out, err = cmd.CombinedOutput()
	return out, time.Since(start), err, ctx.Err() != nil
}

// runBounds is the audit of the bound: every package's whole plain test
// run (no flags or settings but rapid's -rapid.nofailfile: what
// `go test ./pkg` runs), with no variant
// and under every variant, must end within the bound, caught or not. It
// prints each run's time and verdict (PASS, or FAIL when the run caught
// the variant) and fails if any run hung, or if a run without a variant
// failed.
func runBounds(bins map[string]string, reports string) int {
	var pkgs []string
	for pkg := range bins {
		pkgs = append(pkgs, pkg)
	}
	sort.Strings(pkgs)
	fmt.Printf("\n%-27s", "VARIANT")
	for _, pkg := range pkgs {
		fmt.Printf(" %22s", pkg)
	}
	fmt.Println()
	bad := 0
	var longest time.Duration
	all := append(append(append(append([]struct{ name, doc string }{{"", ""}}, variants...), affinityVariants...), queueVariants...), replicaVariants...)
	for _, v := range all {
		name := v.name
		if name == "" {
			name = "(none)"
		}
		fmt.Printf("%-27s", name)
		for _, pkg := range pkgs {
			args := []string{"-test.count=1"}
			if usesRapid(pkg) {
				args = append(args, "-rapid.nofailfile") // a variant's failure must not be replayed later
			}
			out, took, err, hung := runBinary(bins[pkg], pkg, args,
				[]string{"PLACEMENT_MUTANT=" + v.name, "LINEARIZABILITY_REPORT_DIR=" + reports})
			longest = max(longest, took)
			verdict := "PASS"
			switch {
			case hung:
				verdict, bad = "HUNG", bad+1
			case err != nil && thin.Match(out) && divergence.Find(out) == nil:
				verdict = "thin"
			case err != nil:
				verdict = "FAIL"
				if v.name == "" {
					bad++
				}
			}
			fmt.Printf(" %15s %5.1fs", verdict, took.Seconds())
		}
		fmt.Println()
	}
	fmt.Printf("longest plain run: %.1fs (bound %v)\n", longest.Seconds(), *bound)
	if bad > 0 {
		fmt.Printf("mutants: %d runs hung, or failed without a variant\n", bad)
		return 1
	}
	return 0
}

// thin matches a checker's complaint that its own run was too thin.
var thin = regexp.MustCompile(`too thin`)

var hook = regexp.MustCompile(`mutant\("(\w+)"\)`)

// checkVariants compares the variants tables with the mutant("…") hooks
// in impl/placement, impl/affinity, impl/policyqueue and impl/replica, so a
// hook without a row (never run) or a row without a hook (a variant that
// no longer exists) fails the run.
func checkVariants() error {
	if err := checkHooks("impl/placement", variants); err != nil {
		return err
	}
	if err := checkHooks("impl/affinity", affinityVariants); err != nil {
		return err
	}
	if err := checkHooks("impl/policyqueue", queueVariants); err != nil {
		return err
	}
	if err := checkHooks("impl/replica", replicaVariants); err != nil {
		return err
	}
	if err := readCatchers("impl/replica", replicaVariants); err != nil {
		return err
	}
	for _, pkg := range etcdPackages {
		if err := readCatchers(pkg, etcdVariants); err != nil {
			return err
		}
	}
	var tables = map[string][]struct{ name, doc string }{}
	for _, v := range etcdVariants {
		c, ok := catcherOf[v.name]
		if !ok {
			return fmt.Errorf("variant %s has no catcher in the etcd packages' mutant_test.go tables", v.name)
		}
		tables[c.pkg] = append(tables[c.pkg], v)
	}
	for _, pkg := range etcdPackages {
		if err := checkHooks(pkg, tables[pkg]); err != nil {
			return err
		}
	}
	return nil
}

// readCatchers records in catcherOf the catchers pkg's own table names for
// table's variants; a variant of pkg with no catcher there is an error
// (for the etcd packages, which share one table, checkVariants checks).
func readCatchers(pkg string, table []struct{ name, doc string }) error {
	byName, err := catchers(pkg)
	if err != nil {
		return err
	}
	for _, v := range table {
		if t, ok := byName[v.name]; ok {
			catcherOf[v.name] = struct{ pkg, test string }{pkg, t}
		} else if pkg == "impl/replica" {
			return fmt.Errorf("variant %s has no catcher in %s/mutant_test.go", v.name, pkg)
		}
	}
	return nil
}

func checkHooks(dir string, table []struct{ name, doc string }) error {
	files, err := filepath.Glob(dir + "/*.go")
	if err != nil || len(files) == 0 {
		return fmt.Errorf("no %s sources found (run from the repository root): %v", dir, err)
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
	for _, v := range table {
		rows[v.name] = true
		if !hooks[v.name] {
			return fmt.Errorf("variant %s has no mutant(%q) hook in %s", v.name, v.name, dir)
		}
	}
	for h := range hooks {
		if !rows[h] {
			return fmt.Errorf("%s has a mutant(%q) hook that the bug zoo never runs", dir, h)
		}
	}
	return nil
}
