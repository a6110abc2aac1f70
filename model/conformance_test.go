package model

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/placementlab/placement/model/tlcout"
)

const specDir = "../spec/tla"

// readResult reads what spec/tla/tlc.sh recorded of TLC's run of cfg.
func readResult(t *testing.T, cfg string) tlcout.Result {
	t.Helper()
	r, err := tlcout.ReadResult(tlcout.ResultPath(cfg))
	if err != nil {
		t.Fatalf("no TLC result for %s (run `make tlc` with TLA2TOOLS_JAR set): %v", cfg, err)
	}
	return r
}

func configs(t *testing.T) []string {
	t.Helper()
	all, err := filepath.Glob(filepath.Join(specDir, "MC*.cfg"))
	if err != nil || len(all) == 0 {
		t.Fatalf("no TLC configs in %s: %v", specDir, err)
	}
	var cfgs []string
	for _, c := range all {
		if !strings.HasPrefix(filepath.Base(c), "MCClaims") { // the claims spec's: model/claims checks them
			cfgs = append(cfgs, c)
		}
	}
	return cfgs
}

func explore(t *testing.T, cfg string) (*Model, *Report) {
	t.Helper()
	c, err := ReadTLCConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return exploreConfig(t, c)
}

// loadConfig returns the model and the checks a parsed TLC config describes.
func loadConfig(t *testing.T, c *TLCConfig) (*Model, Options) {
	t.Helper()
	m, err := c.Load()
	if err != nil {
		t.Fatal(err)
	}
	opts, err := OptionsFor(c)
	if err != nil {
		t.Fatal(err)
	}
	return m, opts
}

// readConfig is loadConfig of the TLC config file at path.
func readConfig(t *testing.T, path string) (*Model, Options) {
	t.Helper()
	c, err := ReadTLCConfig(path)
	if err != nil {
		t.Fatal(err)
	}
	return loadConfig(t, c)
}

// exploreConfig explores the model a parsed TLC config describes.
func exploreConfig(t *testing.T, c *TLCConfig) (*Model, *Report) {
	t.Helper()
	m, opts := loadConfig(t, c)
	rep, err := m.Explore(opts)
	if err != nil {
		t.Fatal(err)
	}
	return m, rep
}

// TestConformance explores every committed TLC config and compares the
// result with what TLC reported: the same distinct states, generated steps,
// depth and state set for configs that pass; the same violated property with
// a shortest trace of the same length for the MCBug* configs, which must fail.
func TestConformance(t *testing.T) {
	for _, cfg := range configs(t) {
		name := filepath.Base(cfg)
		t.Run(name, func(t *testing.T) {
			if raceEnabled && (name == "MCPlacement.cfg" || name == "MCWide.cfg") {
				t.Skip("2.7M states under the race detector; `make test` runs this config without -race")
			}
			if name == "MCWide.cfg" && os.Getenv("PLACEMENT_SKIP_WIDE") != "" {
				t.Skip("PLACEMENT_SKIP_WIDE: `make test` leaves the widest config to `make verify` (scripts/check.sh)")
			}
			want := readResult(t, cfg)
			m, rep := explore(t, cfg)
			t.Logf("%s: %d distinct, %d generated, depth %d, %.1fs, %.0f states/s",
				name, rep.Distinct, rep.Generated, rep.Depth, rep.Elapsed.Seconds(), rep.StatesPerSecond())
			mustFail := strings.HasPrefix(name, "MCBug") || strings.HasPrefix(name, "MCWitness")
			if mustFail != (want.Violation != nil) {
				t.Fatalf("TLC data for %s says violation=%v; MCBug configs must fail, others pass", name, want.Violation != nil)
			}
			var got *tlcout.Violation
			if v := rep.Violation; v != nil {
				got = &tlcout.Violation{Property: v.Property, Kind: v.Kind, TraceLength: len(v.Trace)}
			}
			diffs := want.Compare(rep.Distinct, rep.Generated, rep.Depth, rep.StateSetHash, got)
			for _, d := range diffs {
				t.Error(d)
			}
			if len(diffs) > 0 && rep.Violation != nil {
				t.Logf("the explorer's trace:\n%s", m.FormatTrace(rep.Violation))
			}
			if un := rep.UnreachedActions(); want.Violation == nil && rep.Violation == nil && len(un) > 0 {
				t.Errorf("actions never exercised: %v", un)
			}
		})
	}
}

// TestConformanceDetectsDrift shows the comparison has teeth: a model that
// differs from the spec in any one definition (each broken variant applied
// to MCLiveness.cfg, whose TLC data was recorded without it) no longer
// passes the comparison TestConformance makes, through a different state
// set or a violated property.
func TestConformanceDetectsDrift(t *testing.T) {
	cfg := filepath.Join(specDir, "MCLiveness.cfg")
	want := readResult(t, cfg)
	for _, name := range VariantNames() {
		c, err := ReadTLCConfig(cfg)
		if err != nil {
			t.Fatal(err)
		}
		c.Overrides[variants[name].replaces] = name
		_, rep := exploreConfig(t, c)
		if rep.Violation == nil && rep.StateSetHash == want.StateSetHash {
			// Some variants need more keys than MCLiveness has (a per-shard
			// capacity count is exact with two): their own MCBug config,
			// whose TLC data says it fails, must then catch them.
			if own := bugConfigFor(t, name); own != nil {
				if _, rep := exploreConfig(t, own); rep.Violation != nil {
					t.Logf("%s: invisible in MCLiveness.cfg; caught in %s, %s violated", name, own.Path, rep.Violation.Property)
					continue
				}
			}
			t.Errorf("%s: same state set as TLC and no property violated; drift would go unnoticed", name)
		} else if rep.Violation != nil {
			t.Logf("%s: caught, %s %s violated", name, rep.Violation.Kind, rep.Violation.Property)
		} else {
			t.Logf("%s: caught, state set differs from TLC's", name)
		}
	}
}

var tlaDef = regexp.MustCompile(`(?m)^([A-Za-z][A-Za-z0-9_]*)(?:\([^)]*\))? ==`)

func tlaDefinitions(t *testing.T, file string) map[string]bool {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(specDir, file))
	if err != nil {
		t.Fatal(err)
	}
	defs := map[string]bool{}
	for _, m := range tlaDef.FindAllStringSubmatch(string(b), -1) {
		defs[m[1]] = true
	}
	return defs
}

// TestNamesMatchSpec fails when the spec and the model drift apart in what
// they name: the actions of Next (in order), the properties and the variants.
func TestNamesMatchSpec(t *testing.T) {
	b, err := os.ReadFile(filepath.Join(specDir, "Placement.tla"))
	if err != nil {
		t.Fatal(err)
	}
	src := string(b)
	i := strings.Index(src, "\nNext ==")
	j := strings.Index(src[i:], "\n\n")
	if i < 0 || j < 0 {
		t.Fatal("no Next definition in Placement.tla")
	}
	var inNext []string
	for _, m := range regexp.MustCompile(`:\s*([A-Z][A-Za-z]*)\(`).FindAllStringSubmatch(src[i:i+j], -1) {
		inNext = append(inNext, m[1])
	}
	if strings.Join(inNext, " ") != strings.Join(ActionNames[:], " ") {
		t.Errorf("Next in Placement.tla has actions\n  %v\nthe model has\n  %v", inNext, ActionNames)
	}
	defs := tlaDefinitions(t, "Placement.tla")
	mc := tlaDefinitions(t, "MCPlacement.tla")
	for _, n := range PropertyNames() {
		if strings.HasPrefix(n, "Never") {
			if !mc[n] {
				t.Errorf("the model has witness %s, which MCPlacement.tla does not define", n)
			}
		} else if !defs[n] {
			t.Errorf("the model checks %s, which Placement.tla does not define", n)
		}
	}
	for n := range mc {
		if strings.HasPrefix(n, "Never") && !contains(PropertyNames(), n) {
			t.Errorf("MCPlacement.tla defines witness %s, which the model lacks", n)
		}
	}
	for _, n := range VariantNames() {
		if d := variants[n].replaces; !defs[d] {
			t.Errorf("Placement.tla does not define %s, which variant %s overrides", d, n)
		}
	}
	var bugs []string
	for n := range mc {
		if strings.HasPrefix(n, "Bug") {
			bugs = append(bugs, n)
		}
	}
	for _, n := range bugs {
		if _, ok := variants[n]; !ok {
			t.Errorf("MCPlacement.tla defines %s, which the model lacks", n)
		}
	}
	for _, n := range VariantNames() {
		if !mc[n] {
			t.Errorf("the model has variant %s, which MCPlacement.tla lacks", n)
		}
	}
	// Every variant is exercised by a committed MCBug config.
	used := map[string]bool{}
	for _, cfg := range configs(t) {
		c, err := ReadTLCConfig(cfg)
		if err != nil {
			t.Fatal(err)
		}
		for _, v := range c.Overrides {
			used[v] = true
		}
	}
	for _, n := range VariantNames() {
		if !used[n] {
			t.Errorf("variant %s has no MCBug config that must catch it", n)
		}
	}
}

func contains(xs []string, x string) bool {
	for _, y := range xs {
		if y == x {
			return true
		}
	}
	return false
}

// TestVariantsCaughtByEveryProperty: each MCBug config names the property
// that catches its variant most directly, but none is tuned to it: with the
// main config's full list of invariants and properties instead (and the
// variant's own constants), every variant is still reported.
func TestVariantsCaughtByEveryProperty(t *testing.T) {
	main, err := ReadTLCConfig(filepath.Join(specDir, "MCPlacement.cfg"))
	if err != nil {
		t.Fatal(err)
	}
	for _, cfg := range configs(t) {
		name := filepath.Base(cfg)
		if !strings.HasPrefix(name, "MCBug") {
			continue
		}
		c, err := ReadTLCConfig(cfg)
		if err != nil {
			t.Fatal(err)
		}
		liveOnly := len(c.Invariants) == 0
		for _, p := range c.Properties {
			if _, ok := LivenessProperties[p]; !ok {
				liveOnly = false
			}
		}
		if liveOnly {
			continue // a liveness variant (its config names only liveness): only a liveness property can catch it
		}
		c.Invariants, c.Properties = main.Invariants, main.Properties
		_, rep := exploreConfig(t, c)
		if rep.Violation == nil {
			t.Errorf("%s: no invariant or property of MCPlacement.cfg catches %v", name, rep.Variants)
			continue
		}
		t.Logf("%s: %s %s violated (trace of %d states)", name, rep.Violation.Kind, rep.Violation.Property, len(rep.Violation.Trace))
	}
}

// bugConfigFor returns the committed MCBug config that applies variant.
func bugConfigFor(t *testing.T, variant string) *TLCConfig {
	t.Helper()
	for _, cfg := range configs(t) {
		c, err := ReadTLCConfig(cfg)
		if err != nil {
			t.Fatal(err)
		}
		for _, v := range c.Overrides {
			if v == variant && strings.HasPrefix(filepath.Base(cfg), "MCBug") {
				return c
			}
		}
	}
	return nil
}

// TestResultsHaveConfigs: every recorded TLC result belongs to a config
// that still exists, so a renamed or deleted config leaves no stale data.
func TestResultsHaveConfigs(t *testing.T) {
	results, err := filepath.Glob(filepath.Join(specDir, "results", "*.json"))
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range results {
		name := strings.TrimSuffix(filepath.Base(r), ".json")
		if _, err := os.Stat(filepath.Join(specDir, name+".cfg")); err != nil {
			t.Errorf("results/%s.json has no config %s.cfg", name, name)
		}
	}
}
