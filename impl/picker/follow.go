package picker

import (
	"fmt"
	"math"
)

// FollowPrefix's defaults (see FollowConfig).
const (
	// DefaultFollowBlocks is the lead, in blocks, the longest match must
	// have over the shortest: 256 blocks of 16 tokens are 4,096 tokens,
	// more than a shared system prompt alone.
	DefaultFollowBlocks = 256
	// DefaultFollowLoadFactor and DefaultFollowLoadSlack: a holder of the
	// longest match is followed only when its load is at most 1.25 x the
	// candidates' mean + 2.
	DefaultFollowLoadFactor = 1.25
	DefaultFollowLoadSlack  = 2
)

// FollowConfig configures a FollowPrefix. A zero field takes its default.
type FollowConfig struct {
	// MinBlocks: the longest match is followed only when it is at least
	// this many blocks longer than the shortest; >= 0, 0 means
	// DefaultFollowBlocks. A router counting in tokens sets the ceiling
	// of its token threshold over its block size.
	MinBlocks int
	// LoadFactor and LoadSlack: a holder of the longest match stays only
	// when its load (Load) is at most LoadFactor x the candidates' mean
	// load + LoadSlack. Both finite, LoadFactor > 0 and LoadSlack >= 0; 0
	// means DefaultFollowLoadFactor and DefaultFollowLoadSlack (for no
	// slack, set a tiny positive value).
	LoadFactor float64
	LoadSlack  float64
	// Load is the load read (default LoadInFlight).
	Load Load
}

// resolve fills cfg's defaults and validates it.
func (cfg FollowConfig) resolve() (FollowConfig, error) {
	if cfg.MinBlocks == 0 {
		cfg.MinBlocks = DefaultFollowBlocks
	}
	if cfg.LoadFactor == 0 {
		cfg.LoadFactor = DefaultFollowLoadFactor
	}
	if cfg.LoadSlack == 0 {
		cfg.LoadSlack = DefaultFollowLoadSlack
	}
	switch {
	case cfg.MinBlocks < 0:
		return cfg, &ConfigError{Field: "FollowConfig.MinBlocks", Reason: fmt.Sprintf("%d is negative", cfg.MinBlocks)}
	case !(cfg.LoadFactor > 0) || math.IsInf(cfg.LoadFactor, 0):
		return cfg, &ConfigError{Field: "FollowConfig.LoadFactor", Reason: fmt.Sprintf("%v is not a finite number > 0", cfg.LoadFactor)}
	case !(cfg.LoadSlack >= 0) || math.IsInf(cfg.LoadSlack, 0):
		return cfg, &ConfigError{Field: "FollowConfig.LoadSlack", Reason: fmt.Sprintf("%v is not a finite number >= 0", cfg.LoadSlack)}
	case !cfg.Load.valid():
		return cfg, &ConfigError{Field: "FollowConfig.Load", Reason: cfg.Load.String()}
	}
	return cfg, nil
}

// FollowPrefix is a Filter that follows a long prefix: over the
// candidates it is given, it reads each one's match from a PrefixOverlap's
// index (PrefixOverlap.Match: the leading blocks of Request.Blocks its
// target holds). When the longest match is at least MinBlocks longer than
// the shortest, it keeps the candidates holding the longest match whose
// load is at most LoadFactor x the candidates' mean load + LoadSlack, in
// their order. Otherwise (fewer than two candidates, a lead too short, or
// every holder of the longest match too busy) it keeps every candidate.
//
// It is a filter, not PrefixOverlap's picker: it sends a session to where
// its context is only when that is worth a prefill (the lead) and the
// target is not busy, and leaves the choice among what it keeps to the
// scorers after it. Put it after CostWithin to follow a prefix only among
// targets that are nearly as cheap as the cheapest.
//
// It learns nothing itself: Pipeline.Observe tells its PrefixOverlap
// (once, whether or not the PrefixOverlap is also in the pipeline), and a
// router that does not call Pipeline.Observe calls the PrefixOverlap's
// Observe. It is safe for concurrent use.
type FollowPrefix struct {
	idx *PrefixOverlap
	cfg FollowConfig
}

// NewFollowPrefix returns a FollowPrefix reading idx's index, or a
// *ConfigError (idx nil, or cfg out of range).
func NewFollowPrefix(idx *PrefixOverlap, cfg FollowConfig) (*FollowPrefix, error) {
	if idx == nil {
		return nil, &ConfigError{Field: "FollowPrefix index", Reason: "nil"}
	}
	cfg, err := cfg.resolve()
	if err != nil {
		return nil, err
	}
	return &FollowPrefix{idx: idx, cfg: cfg}, nil
}

// Config returns f's configuration with its defaults filled in.
func (f *FollowPrefix) Config() FollowConfig { return f.cfg }

// Filter implements Filter.
func (f *FollowPrefix) Filter(r *Request, cands []Candidate) []Candidate {
	if len(cands) < 2 {
		return cands
	}
	match := make([]int, len(cands))
	f.idx.Match(r, cands, match)
	lo, hi, sum := match[0], match[0], 0
	for i, c := range cands {
		lo, hi = min(lo, match[i]), max(hi, match[i])
		sum += f.cfg.Load.of(c)
	}
	if hi-lo < f.cfg.MinBlocks {
		return cands
	}
	limit := f.cfg.LoadFactor*float64(sum)/float64(len(cands)) + f.cfg.LoadSlack
	out := cands[:0:0]
	for i, c := range cands {
		if match[i] == hi && float64(f.cfg.Load.of(c)) <= limit {
			out = append(out, c)
		}
	}
	if len(out) == 0 {
		return cands
	}
	return out
}

// observesFor makes Pipeline.Observe tell f's index.
func (f *FollowPrefix) observesFor() Observer { return f.idx }

// Compile-time checks.
var (
	_ Filter = CostWithin{}
	_ Filter = (*FollowPrefix)(nil)
)
