package claims

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/placementlab/placement/model"
)

// ReadConfig reads a TLC config of MCClaims.tla (with the core's parser,
// model.ReadTLCConfig) and returns the model it describes, its overrides
// applied, and the checks it names.
func ReadConfig(path string) (*Model, Options, error) {
	c, err := model.ReadTLCConfig(path)
	if err != nil {
		return nil, Options{}, err
	}
	return Load(c)
}

// Load returns the model and the checks a parsed TLC config describes.
func Load(c *model.TLCConfig) (*Model, Options, error) {
	cfg, err := ModelConfig(c)
	if err != nil {
		return nil, Options{}, err
	}
	m, err := New(cfg)
	if err != nil {
		return nil, Options{}, fmt.Errorf("%s: %w", c.Path, err)
	}
	for def, v := range c.Overrides {
		if err := m.Override(def, v); err != nil {
			return nil, Options{}, fmt.Errorf("%s: %w", c.Path, err)
		}
	}
	opts, err := OptionsFor(c)
	return m, opts, err
}

// ModelConfig turns a TLC config's constants into a Config.
func ModelConfig(c *model.TLCConfig) (Config, error) {
	var cfg Config
	var err error
	fail := func(format string, args ...any) {
		if err == nil {
			err = fmt.Errorf("%w: %s: %s", ErrConfig, c.Path, fmt.Sprintf(format, args...))
		}
	}
	set := func(name string) []string {
		v, ok := c.Constants[name]
		v = strings.TrimSpace(v)
		if !ok || !strings.HasPrefix(v, "{") || !strings.HasSuffix(v, "}") {
			fail("constant %s is not a set of model values", name)
			return nil
		}
		var out []string
		for _, x := range strings.Split(v[1:len(v)-1], ",") {
			if x = strings.TrimSpace(x); x != "" {
				out = append(out, x)
			}
		}
		return out
	}
	num := func(name string) int {
		n, e := strconv.Atoi(strings.TrimSpace(c.Constants[name]))
		if e != nil {
			fail("constant %s = %q is not a number", name, c.Constants[name])
		}
		return n
	}
	cfg.Replicas, cfg.Sessions, cfg.Workers = set("Replicas"), set("Sessions"), set("Workers")
	cfg.MaxRev, cfg.MaxGen, cfg.MaxLeases, cfg.MaxChan = num("MaxRev"), num("MaxGen"), num("MaxLeases"), num("MaxChan")
	cfg.MaxFaults = num("MaxFaults")
	cfg.MaxMoves = num("MaxMoves")
	for _, mv := range []string{"NoReplica", "NoSession", "NoWorker"} {
		if c.Constants[mv] != mv {
			fail("constant %s must be the model value %s", mv, mv)
		}
	}
	if err != nil {
		return Config{}, err
	}
	return cfg, cfg.Validate()
}

// OptionsFor resolves a TLC config's INVARIANTS and PROPERTIES by name.
func OptionsFor(c *model.TLCConfig) (Options, error) {
	var o Options
	for _, n := range c.Invariants {
		inv, ok := Invariants[n]
		if !ok {
			inv, ok = WitnessInvariants[n]
		}
		if !ok {
			return o, fmt.Errorf("%w: %s: the model has no invariant %s", ErrConfig, c.Path, n)
		}
		o.Invariants = append(o.Invariants, inv)
	}
	for _, n := range c.Properties {
		if lp, ok := LivenessProperties[n]; ok {
			o.Liveness = append(o.Liveness, lp)
			continue
		}
		p, ok := ActionProperties[n]
		if !ok {
			p, ok = WitnessActions[n]
		}
		if !ok {
			return o, fmt.Errorf("%w: %s: the model has no property %s", ErrConfig, c.Path, n)
		}
		o.Actions = append(o.Actions, p)
	}
	return o, nil
}
