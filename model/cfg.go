package model

import (
	"fmt"
	"os"
	"regexp"
	"strconv"
	"strings"
)

// TLCConfig is a parsed TLC model-checking configuration (.cfg) file.
type TLCConfig struct {
	Path          string
	Constants     map[string]string // name -> value as written
	Overrides     map[string]string // definition -> replacement (`Name <- Variant`)
	Specification string
	Invariants    []string
	Properties    []string
	View          string   // the VIEW: must be View, the state without the ghost step
	Header        []string // the leading comment lines, without `\*`
}

var (
	blockComment = regexp.MustCompile(`(?s)\(\*.*?\*\)`)
	cfgKeywords  = map[string]string{
		"CONSTANT": "CONSTANTS", "CONSTANTS": "CONSTANTS",
		"INVARIANT": "INVARIANTS", "INVARIANTS": "INVARIANTS",
		"PROPERTY": "PROPERTIES", "PROPERTIES": "PROPERTIES",
		"SPECIFICATION": "SPECIFICATION", "INIT": "INIT", "NEXT": "NEXT",
		"CHECK_DEADLOCK": "CHECK_DEADLOCK", "SYMMETRY": "SYMMETRY", "VIEW": "VIEW",
		"CONSTRAINT": "CONSTRAINT", "CONSTRAINTS": "CONSTRAINT",
		"ACTION_CONSTRAINT": "ACTION_CONSTRAINT", "ACTION_CONSTRAINTS": "ACTION_CONSTRAINT",
	}
)

// ParseTLCConfig parses the text of a TLC config file.
func ParseTLCConfig(path, text string) (*TLCConfig, error) {
	c := &TLCConfig{Path: path, Constants: map[string]string{}, Overrides: map[string]string{}}
	lines := strings.Split(text, "\n")
	for _, l := range lines {
		t := strings.TrimSpace(l)
		if !strings.HasPrefix(t, `\*`) {
			break
		}
		c.Header = append(c.Header, strings.TrimSpace(strings.TrimPrefix(t, `\*`)))
	}
	text = blockComment.ReplaceAllString(text, " ")
	section := ""
	for i, l := range strings.Split(text, "\n") {
		if j := strings.Index(l, `\*`); j >= 0 {
			l = l[:j]
		}
		fields := strings.Fields(l)
		if len(fields) == 0 {
			continue
		}
		if kw, ok := cfgKeywords[fields[0]]; ok {
			section = kw
			fields = fields[1:]
			if len(fields) == 0 {
				continue
			}
		}
		rest := strings.Join(fields, " ")
		switch section {
		case "CONSTANTS":
			if a, b, ok := strings.Cut(rest, "<-"); ok {
				c.Overrides[strings.TrimSpace(a)] = strings.TrimSpace(b)
			} else if a, b, ok := strings.Cut(rest, "="); ok {
				c.Constants[strings.TrimSpace(a)] = strings.TrimSpace(b)
			} else {
				return nil, fmt.Errorf("%s:%d: cannot read constant %q", path, i+1, rest)
			}
		case "SPECIFICATION":
			c.Specification = rest
		case "INVARIANTS":
			c.Invariants = append(c.Invariants, fields...)
		case "PROPERTIES":
			c.Properties = append(c.Properties, fields...)
		case "VIEW":
			c.View = rest
		case "":
			return nil, fmt.Errorf("%s:%d: text outside any section: %q", path, i+1, rest)
		default:
			return nil, fmt.Errorf("%s:%d: section %s is not supported by the Go explorer", path, i+1, section)
		}
	}
	if c.Specification != "Spec" {
		return nil, fmt.Errorf("%s: SPECIFICATION must be Spec, got %q", path, c.Specification)
	}
	if c.View != "View" {
		// The model's states are the spec's view: its variables without the
		// ghost step label. TLC must count the same states.
		return nil, fmt.Errorf("%s: VIEW must be View (the state without the ghost step), got %q", path, c.View)
	}
	return c, nil
}

// ReadTLCConfig reads and parses a TLC config file.
func ReadTLCConfig(path string) (*TLCConfig, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	return ParseTLCConfig(path, string(b))
}

// ModelConfig turns the config's constants into a model Config.
func (c *TLCConfig) ModelConfig() (Config, error) {
	var cfg Config
	var err error
	set := func(name string) []string {
		v, ok := c.Constants[name]
		if !ok {
			err = fmt.Errorf("%s: constant %s is not set", c.Path, name)
			return nil
		}
		v = strings.TrimSpace(v)
		if !strings.HasPrefix(v, "{") || !strings.HasSuffix(v, "}") {
			err = fmt.Errorf("%s: constant %s = %s is not a set of model values", c.Path, name, v)
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
	num := func(name string) int64 {
		v, ok := c.Constants[name]
		if !ok {
			err = fmt.Errorf("%s: constant %s is not set", c.Path, name)
			return 0
		}
		n, e := strconv.ParseInt(strings.TrimSpace(v), 10, 64)
		if e != nil {
			err = fmt.Errorf("%s: constant %s = %s is not a number", c.Path, name, v)
		}
		return n
	}
	cfg.Keys, cfg.Targets, cfg.Requests = set("Keys"), set("Targets"), set("Requests")
	cfg.MaxGen, cfg.Capacity = int(num("MaxGen")), int(num("Capacity"))
	cfg.TTL, cfg.MaxClock = num("TTL"), num("MaxClock")
	cfg.ReserveTimeout, cfg.DispatchTimeLimit = num("ReserveTimeout"), num("DispatchTimeLimit")
	cfg.QuarantineTTL = num("QuarantineTTL")
	cfg.MaxAttempt = int(num("MaxAttempt"))
	for _, mv := range []string{"NoKey", "NoTarget", "NoReq"} {
		if v := c.Constants[mv]; v != mv && err == nil {
			err = fmt.Errorf("%s: constant %s must be the model value %s", c.Path, mv, mv)
		}
	}
	if err != nil {
		return Config{}, err
	}
	if cfg.MaxGen < 1 || cfg.MaxAttempt < 1 {
		return Config{}, fmt.Errorf("%s: MaxGen and MaxAttempt must be at least 1 for exploration", c.Path)
	}
	return cfg, cfg.Validate()
}

// Load builds the model a TLC config describes, with its overrides applied.
func (c *TLCConfig) Load() (*Model, error) {
	cfg, err := c.ModelConfig()
	if err != nil {
		return nil, err
	}
	m, err := New(cfg)
	if err != nil {
		return nil, err
	}
	for def, variant := range c.Overrides {
		if err := m.Override(def, variant); err != nil {
			return nil, fmt.Errorf("%s: %w", c.Path, err)
		}
	}
	return m, nil
}
