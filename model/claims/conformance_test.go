package claims

import (
	"maps"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/placementlab/placement/model"
	"github.com/placementlab/placement/model/tlcout"
)

const specDir = "../../spec/tla"

// readResult reads what spec/tla/tlc.sh recorded of TLC's run of cfg.
func readResult(t *testing.T, cfg string) tlcout.Result {
	t.Helper()
	r, err := tlcout.ReadResult(tlcout.ResultPath(cfg))
	require.NoError(t, err, "no TLC result for %s (run spec/tla/tlc.sh %s with TLA2TOOLS_JAR set)", cfg, filepath.Base(cfg))
	return r
}

// configs returns the claims spec's TLC configs (spec/tla/MCClaims*.cfg).
func configs(t *testing.T) []string {
	t.Helper()
	cfgs, err := filepath.Glob(filepath.Join(specDir, "MCClaims*.cfg"))
	require.NoError(t, err)
	require.NotEmpty(t, cfgs, "no MCClaims*.cfg in %s", specDir)
	return cfgs
}

func mustFail(name string) bool {
	return strings.HasPrefix(name, "MCClaimsBug") || strings.HasPrefix(name, "MCClaimsWitness")
}

func exploreParsed(t *testing.T, c *model.TLCConfig) (*Model, *Report) {
	t.Helper()
	m, opts, err := Load(c)
	require.NoError(t, err)
	rep, err := m.Explore(opts)
	require.NoError(t, err)
	return m, rep
}

func explore(t *testing.T, cfg string) (*Model, *Report) {
	t.Helper()
	c, err := model.ReadTLCConfig(cfg)
	require.NoError(t, err)
	return exploreParsed(t, c)
}

// TestConformance explores every committed claims config and compares the
// result with what TLC reported: the same distinct states, generated
// steps, depth and state set, and every action exercised, for the configs
// that pass; the same violated property with a shortest trace of the same
// length for the MCClaimsBug* and MCClaimsWitness* configs, which must fail.
func TestConformance(t *testing.T) {
	for _, cfg := range configs(t) {
		name := filepath.Base(cfg)
		t.Run(name, func(t *testing.T) {
			if raceEnabled && name == "MCClaimsTwoFaults.cfg" {
				t.Skip("138,668 states under the race detector; plain go test compares this config with TLC")
			}
			want := readResult(t, cfg)
			m, rep := explore(t, cfg)
			t.Logf("%s: %d distinct, %d generated, depth %d, %.1fs (TLC: %d s)",
				name, rep.Distinct, rep.Generated, rep.Depth, rep.Elapsed.Seconds(), want.Seconds)
			if mustFail(name) != (want.Violation != nil) {
				t.Fatalf("TLC data for %s says violation=%v; MCClaimsBug/Witness configs must fail, others pass", name, want.Violation != nil)
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
			if un := unreached(m, rep); want.Violation == nil && rep.Violation == nil && len(un) > 0 {
				t.Errorf("actions never exercised: %v", un)
			}
		})
	}
}

// needFaults are the actions a behaviour without faults cannot take: the
// faults themselves, and what only a lost store enables.
var needFaults = map[string]bool{"BumpGeneration": true, "Duplicate": true, "Drop": true, "Disconnect": true,
	"Crash": true, "Reconnect": true, "PlaceLocal": true, "Reconcile": true}

// unreached lists the actions no step of rep exercised, leaving out, for a
// config with no faults (MaxFaults = 0), those that need one, and Move for
// a config that asks no move (MaxMoves = 0).
func unreached(m *Model, rep *Report) []string {
	var out []string
	for _, a := range rep.UnreachedActions() {
		if (m.Cfg.MaxFaults > 0 || !needFaults[a]) && (m.Cfg.MaxMoves > 0 || a != "Move") {
			out = append(out, a)
		}
	}
	return out
}

// baseConfig is the passing config with the same constants as the Bug
// config c (MCClaims.cfg for most; MCClaimsThreeReplicas.cfg,
// MCClaimsMaxRev4.cfg or MCClaimsLiveness.cfg for a variant only those
// bounds or only liveness show): its full property list must also catch
// c's variant, and its TLC data must differ from the variant's.
func baseConfig(t *testing.T, c *model.TLCConfig) string {
	t.Helper()
	var match []string
	for _, cfg := range configs(t) {
		if mustFail(filepath.Base(cfg)) {
			continue
		}
		p, err := model.ReadTLCConfig(cfg)
		require.NoError(t, err)
		if maps.Equal(p.Constants, c.Constants) {
			match = append(match, cfg)
		}
	}
	require.Len(t, match, 1, "%s: one passing config must have its constants", c.Path)
	return match[0]
}

var tlaDef = regexp.MustCompile(`(?m)^([A-Za-z][A-Za-z0-9_]*)(?:\([^)]*\))? ==`)

func tlaDefinitions(t *testing.T, file string) map[string]bool {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(specDir, file))
	require.NoError(t, err)
	defs := map[string]bool{}
	for _, m := range tlaDef.FindAllStringSubmatch(string(b), -1) {
		defs[m[1]] = true
	}
	return defs
}

// nextActions returns the actions Claims.tla's Next names, in order.
func nextActions(t *testing.T, src string) []string {
	t.Helper()
	i := strings.Index(src, "\nNext ==")
	require.GreaterOrEqual(t, i, 0, "no Next definition in Claims.tla")
	j := strings.Index(src[i:], "\n\n")
	require.Greater(t, j, 0, "Next does not end")
	var out []string
	for _, m := range regexp.MustCompile(`:\s*([A-Z][A-Za-z]*)\(`).FindAllStringSubmatch(src[i:i+j], -1) {
		out = append(out, m[1])
	}
	return out
}

// TestNamesMatchSpec is the drift check: it fails when an action of
// Claims.tla's Next has no Go counterpart or the model has an action Next
// lacks (in order), when a property, witness or broken variant is defined
// on one side only, or a variant has no MCClaimsBug config.
func TestNamesMatchSpec(t *testing.T) {
	b, err := os.ReadFile(filepath.Join(specDir, "Claims.tla"))
	require.NoError(t, err)
	inNext := nextActions(t, string(b))
	require.Equal(t, ActionNames[:], inNext, "Next in Claims.tla and the model's actions differ")
	defs := tlaDefinitions(t, "Claims.tla")
	mc := tlaDefinitions(t, "MCClaims.tla")
	for _, n := range ActionNames {
		require.True(t, defs[n], "Claims.tla does not define action %s", n)
	}
	for _, n := range PropertyNames() {
		if strings.HasPrefix(n, "Never") {
			require.True(t, mc[n], "the model has witness %s, which MCClaims.tla does not define", n)
		} else {
			require.True(t, defs[n], "the model checks %s, which Claims.tla does not define", n)
		}
	}
	for n := range mc {
		switch {
		case strings.HasPrefix(n, "Never"):
			require.Contains(t, PropertyNames(), n, "MCClaims.tla defines witness %s, which the model lacks", n)
		case strings.HasPrefix(n, "Bug"):
			require.Contains(t, VariantNames(), n, "MCClaims.tla defines %s, which the model lacks", n)
		}
	}
	used := map[string]bool{}
	for _, cfg := range configs(t) {
		c, err := model.ReadTLCConfig(cfg)
		require.NoError(t, err)
		for _, v := range c.Overrides {
			used[v] = true
		}
	}
	for _, n := range VariantNames() {
		require.True(t, mc[n], "the model has variant %s, which MCClaims.tla lacks", n)
		require.True(t, defs[variants[n].replaces], "Claims.tla does not define %s, which %s overrides", variants[n].replaces, n)
		require.True(t, used[n], "variant %s has no MCClaimsBug config that must catch it", n)
	}
}

// TestNamesMatchSpecDetectsDrift: the drift check has teeth: a Next with an
// action renamed, or one missing, no longer matches the model's actions.
func TestNamesMatchSpecDetectsDrift(t *testing.T) {
	b, err := os.ReadFile(filepath.Join(specDir, "Claims.tla"))
	require.NoError(t, err)
	src := string(b)
	renamed := strings.Replace(src, ": Route(r, s)", ": Dispatch(r, s)", 1)
	require.NotEqual(t, src, renamed)
	require.NotEqual(t, ActionNames[:], nextActions(t, renamed))
	i := strings.Index(src, "    \\/ \\E r \\in Replicas : Crash(r)")
	require.Greater(t, i, 0)
	dropped := src[:i] + src[strings.Index(src[i:], "\n")+i+1:]
	require.NotEqual(t, ActionNames[:], nextActions(t, dropped))
}

// TestVariantsCaught: every MCClaimsBug config fails in the explorer with
// the property it names (TestConformance compares that with TLC), and also
// with the full list of invariants and properties of the passing config of
// its constants instead (MCClaims.cfg's for most): no config is tuned to
// its variant.
func TestVariantsCaught(t *testing.T) {
	n := 0
	for _, cfg := range configs(t) {
		name := filepath.Base(cfg)
		if !strings.HasPrefix(name, "MCClaimsBug") {
			continue
		}
		n++
		c, err := model.ReadTLCConfig(cfg)
		require.NoError(t, err)
		require.Len(t, c.Overrides, 1, "%s must apply one variant", name)
		_, rep := exploreParsed(t, c)
		require.NotNil(t, rep.Violation, "%s: %v not caught", name, rep.Variants)
		main, err := model.ReadTLCConfig(baseConfig(t, c))
		require.NoError(t, err)
		c.Invariants, c.Properties = main.Invariants, main.Properties
		_, rep = exploreParsed(t, c)
		require.NotNil(t, rep.Violation, "%s: no guarantee of %s catches %v", name, filepath.Base(main.Path), rep.Variants)
		t.Logf("%s: %s %s violated (trace of %d states)", name, rep.Violation.Kind, rep.Violation.Property, len(rep.Violation.Trace))
	}
	require.Equal(t, len(variants), n, "one MCClaimsBug config per variant")
}

// TestConformanceDetectsDrift: a model that differs from the spec in any one
// definition (each broken variant applied to the passing config of its Bug
// config's constants, MCClaims.cfg for most, whose TLC data was recorded
// without it) no longer passes the comparison TestConformance makes: a
// property fails or the state set differs.
func TestConformanceDetectsDrift(t *testing.T) {
	bugCfg := map[string]*model.TLCConfig{}
	for _, cfg := range configs(t) {
		c, err := model.ReadTLCConfig(cfg)
		require.NoError(t, err)
		for _, v := range c.Overrides {
			bugCfg[v] = c
		}
	}
	for _, name := range VariantNames() {
		require.Contains(t, bugCfg, name)
		cfg := baseConfig(t, bugCfg[name])
		want := readResult(t, cfg)
		c, err := model.ReadTLCConfig(cfg)
		require.NoError(t, err)
		c.Overrides[variants[name].replaces] = name
		_, rep := exploreParsed(t, c)
		if rep.Violation == nil && rep.StateSetHash == want.StateSetHash {
			t.Errorf("%s: same state set as TLC and no property violated; drift would go unnoticed", name)
			continue
		}
		if rep.Violation != nil {
			t.Logf("%s: caught, %s %s violated", name, rep.Violation.Kind, rep.Violation.Property)
		} else {
			t.Logf("%s: caught, state set differs from TLC's", name)
		}
	}
}

// TestResultsHaveConfigs: every recorded claims result belongs to a config
// that still exists.
func TestResultsHaveConfigs(t *testing.T) {
	results, err := filepath.Glob(filepath.Join(specDir, "results", "MCClaims*.json"))
	require.NoError(t, err)
	for _, r := range results {
		name := strings.TrimSuffix(filepath.Base(r), ".json")
		_, err := os.Stat(filepath.Join(specDir, name+".cfg"))
		require.NoError(t, err, "results/%s.json has no config", name)
	}
}

// TestStateCodecs: for every state of a small config, DecodeKey inverts Key
// and ParseState inverts FormatState (the dump reader's parser).
func TestStateCodecs(t *testing.T) {
	m, opts, err := ReadConfig(filepath.Join(specDir, "MCClaims.cfg"))
	require.NoError(t, err)
	var keys []string
	seen := map[string]bool{}
	frontier := []State{m.Init()}
	for len(frontier) > 0 && len(keys) < 3000 {
		s := frontier[0]
		frontier = frontier[1:]
		k := s.Key()
		if seen[k] {
			continue
		}
		seen[k] = true
		keys = append(keys, k)
		d, err := m.DecodeKey(k)
		require.NoError(t, err)
		require.Equal(t, k, d.Key())
		p, err := m.ParseState(m.FormatState(&s))
		require.NoError(t, err)
		require.Equal(t, k, p.Key(), "FormatState/ParseState:\n%s", m.FormatState(&s))
		m.Steps(&s, func(_ Label, n *State) { frontier = append(frontier, *n) })
	}
	sort.Strings(keys)
	require.Greater(t, len(keys), 1000)
	_, err = m.DecodeKey(keys[0] + "x")
	require.ErrorIs(t, err, ErrDecode)
	_, err = m.ParseState(`/\ rev = "x"`)
	require.ErrorIs(t, err, ErrDecode)
	_ = opts
}
