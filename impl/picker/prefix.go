package picker

import (
	"fmt"
	"github.com/placementlab/placement/internal/blocklru"
	"math"
	"sync"

	"github.com/placementlab/placement/impl/affinity"
	"github.com/placementlab/placement/impl/placement"
)

// PrefixOverlap's defaults (see PrefixConfig).
const (
	// DefaultPrefixCapacity is the blocks remembered per target: 16384
	// blocks of 16 tokens are 262,144 tokens, about one mid-size GPU's KV
	// cache; the index's memory is about 48 bytes a block.
	DefaultPrefixCapacity = 1 << 14
	// DefaultPrefixThreshold is the match ratio the best target must exceed
	// to win (SGLang's cache_threshold as its router documents it: 30%).
	DefaultPrefixThreshold = 0.3
	// DefaultBalanceAbs is the load difference (max - min) above which the
	// candidates may be imbalanced. SGLang's 64 suits engines running
	// hundreds of requests each; a small cluster whose workers run a few
	// dozen never reaches it, so the default here is 16.
	DefaultBalanceAbs = 16
	// DefaultBalanceRel is the ratio (max > rel x min) that must also hold
	// for the candidates to be imbalanced: SGLang's 1.5.
	DefaultBalanceRel = 1.5
	// MaxPrefixCapacity bounds PrefixConfig.Capacity (the index's node
	// indices are 32-bit).
	MaxPrefixCapacity = 1 << 30
)

// PrefixConfig configures a PrefixOverlap. A zero field takes its default.
type PrefixConfig struct {
	// Capacity is the prefix blocks remembered per target, in an LRU: 0
	// means DefaultPrefixCapacity; at most MaxPrefixCapacity.
	Capacity int
	// Threshold: the best-matching target wins only when its match ratio
	// is above it; in [0,1), 0 means DefaultPrefixThreshold (for "any
	// match at all", set a tiny positive value).
	Threshold float64
	// BalanceAbs and BalanceRel: the candidates are imbalanced when
	// max - min > BalanceAbs and max > BalanceRel x min, over Load. 0
	// means DefaultBalanceAbs and DefaultBalanceRel; BalanceRel must be
	// >= 1 and BalanceAbs >= 0.
	BalanceAbs int
	BalanceRel float64
	// Load is the load the balance rule and the fallback read (default
	// LoadInFlight, as SGLang).
	Load Load
	// Seed seeds the tie-break of keyless requests (see HighestScore).
	Seed uint64
}

// resolve fills cfg's defaults and validates it.
func (cfg PrefixConfig) resolve() (PrefixConfig, error) {
	if cfg.Capacity == 0 {
		cfg.Capacity = DefaultPrefixCapacity
	}
	if cfg.Threshold == 0 {
		cfg.Threshold = DefaultPrefixThreshold
	}
	if cfg.BalanceAbs == 0 {
		cfg.BalanceAbs = DefaultBalanceAbs
	}
	if cfg.BalanceRel == 0 {
		cfg.BalanceRel = DefaultBalanceRel
	}
	switch {
	case cfg.Capacity < 0 || cfg.Capacity > MaxPrefixCapacity:
		return cfg, &ConfigError{Field: "PrefixConfig.Capacity", Reason: fmt.Sprintf("%d is not in [1, %d]", cfg.Capacity, MaxPrefixCapacity)}
	case !(cfg.Threshold > 0 && cfg.Threshold < 1):
		return cfg, &ConfigError{Field: "PrefixConfig.Threshold", Reason: fmt.Sprintf("%v is not in (0, 1)", cfg.Threshold)}
	case cfg.BalanceAbs < 0:
		return cfg, &ConfigError{Field: "PrefixConfig.BalanceAbs", Reason: fmt.Sprintf("%d is negative", cfg.BalanceAbs)}
	case !(cfg.BalanceRel >= 1) || math.IsInf(cfg.BalanceRel, 0):
		return cfg, &ConfigError{Field: "PrefixConfig.BalanceRel", Reason: fmt.Sprintf("%v is not a finite number >= 1", cfg.BalanceRel)}
	case !cfg.Load.valid():
		return cfg, &ConfigError{Field: "PrefixConfig.Load", Reason: cfg.Load.String()}
	}
	return cfg, nil
}

// Branch says which of PrefixOverlap's rules made a pick.
type Branch uint8

const (
	// Imbalanced: the candidates were imbalanced; the least loaded won.
	Imbalanced Branch = iota + 1
	// Matched: the best match ratio was above the threshold; it won.
	Matched
	// LeastLoaded: balanced but no match above the threshold; the least
	// loaded won.
	LeastLoaded
)

// String names b.
func (b Branch) String() string {
	switch b {
	case Imbalanced:
		return "imbalanced"
	case Matched:
		return "matched"
	case LeastLoaded:
		return "least-loaded"
	}
	return "Branch(none)"
}

// PrefixOverlap is a cache-aware scorer and picker in the manner of SGLang's
// cache_aware policy. It keeps an approximate index of the prefix blocks
// sent to each target, learned through Observe: an LRU of block hashes per
// target, Capacity blocks at most. A target's match ratio for a request is
// the number of leading blocks of Request.Blocks it holds (up to the first
// it does not) over len(Request.Blocks); 0 when Blocks is empty. Blocks
// should be chained hashes (each covering the whole prefix up to its block,
// as vLLM's block hashes are), so that holding block i means holding the
// prefix through i.
//
// It is both, because SGLang's rule is not a weighted sum:
//
//   - as a Picker (Pipeline.Picker) it applies that rule: when the
//     candidates are imbalanced (max - min > BalanceAbs and max >
//     BalanceRel x min, over Load), the least loaded wins; otherwise the
//     best match wins if its ratio is above Threshold; otherwise the least
//     loaded wins. Ties (among the best matches: the less loaded first)
//     go to the higher pipeline score, then to HighestScore's tie-break.
//     The pipeline's scorers thus refine, never override, the rule.
//   - as a Scorer it writes each candidate's match ratio, for an llm-d
//     style weighted sum with load scorers (no balance rule, no threshold).
//
// Observe learns only from Accepted outcomes: a DefinitelyNotAccepted
// request left nothing, and an Ambiguous one may not have. The blocks of an
// accepted request are touched last to first, so that a prefix's leading
// blocks are the most recent and a target's LRU evicts the tails of long
// prompts first. Forget and ForgetWorker drop a target's blocks when its
// worker restarts or leaves; a router that never calls them keeps up to
// Capacity blocks for every target it ever saw.
//
// As a picker it reads no Overloaded flag: put DropOverloaded before it.
// A shared system prompt is a prefix too: when most prompts are short
// beyond it, its blocks alone can pass Threshold on the target that served
// it first, and with few requests in flight the balance rule never fires,
// so one target takes every new session. Use the ratio as one Scorer among
// load scorers, or put FollowPrefix (which needs a lead of MinBlocks over
// the shortest match) before them.
//
// It is safe for concurrent use; picks are deterministic for a given
// sequence of calls and Seed.
type PrefixOverlap struct {
	cfg PrefixConfig
	tb  *tieBreaker

	mu  sync.RWMutex
	idx map[affinity.Target]*blocklru.LRU
}

// NewPrefixOverlap returns a PrefixOverlap for cfg, or a *ConfigError.
func NewPrefixOverlap(cfg PrefixConfig) (*PrefixOverlap, error) {
	cfg, err := cfg.resolve()
	if err != nil {
		return nil, err
	}
	return &PrefixOverlap{cfg: cfg, tb: newTieBreaker(cfg.Seed), idx: make(map[affinity.Target]*blocklru.LRU)}, nil
}

// Config returns p's configuration with its defaults filled in.
func (p *PrefixOverlap) Config() PrefixConfig { return p.cfg }

// Score implements Scorer: each candidate's match ratio.
func (p *PrefixOverlap) Score(r *Request, cands []Candidate, scores []float64) {
	p.mu.RLock()
	defer p.mu.RUnlock()
	for i := range min(len(cands), len(scores)) {
		scores[i] = p.ratio(r, cands[i].Target)
	}
}

// Match writes into n, for each candidate, how many leading blocks of
// r.Blocks its target holds (up to the first it does not): the match
// ratio's numerator, as a count of blocks. It writes min(len(cands),
// len(n)) counts; a nil r or one without blocks matches 0.
func (p *PrefixOverlap) Match(r *Request, cands []Candidate, n []int) {
	p.mu.RLock()
	defer p.mu.RUnlock()
	for i := range min(len(cands), len(n)) {
		n[i] = p.matched(r, cands[i].Target)
	}
}

// Pick implements Picker with SGLang's rule (see PrefixOverlap).
func (p *PrefixOverlap) Pick(r *Request, cands []Candidate, scores []float64) int {
	i, _ := p.Decide(r, cands, scores)
	return i
}

// Decide is Pick that also says which rule chose. scores may be nil (or
// shorter than cands): the missing scores count as 0. It returns -1 and 0
// when cands is empty.
func (p *PrefixOverlap) Decide(r *Request, cands []Candidate, scores []float64) (int, Branch) {
	if len(cands) == 0 {
		return -1, 0
	}
	l := p.cfg.Load
	lo, hi := l.of(cands[0]), l.of(cands[0])
	for _, c := range cands[1:] {
		lo, hi = min(lo, l.of(c)), max(hi, l.of(c))
	}
	all := make([]int, len(cands))
	for i := range all {
		all[i] = i
	}
	if hi-lo > p.cfg.BalanceAbs && float64(hi) > p.cfg.BalanceRel*float64(lo) {
		return p.refine(r, cands, scores, all), Imbalanced
	}
	ratios := make([]float64, len(cands))
	p.Score(r, cands, ratios)
	best := 0.0
	for _, x := range ratios {
		best = max(best, x)
	}
	if best > p.cfg.Threshold {
		top := all[:0]
		for i, x := range ratios {
			if x == best {
				top = append(top, i)
			}
		}
		return p.refine(r, cands, scores, top), Matched
	}
	return p.refine(r, cands, scores, all), LeastLoaded
}

// refine chooses among idx (non-empty indices into cands): the least
// loaded, then the highest score, then the tie-break.
func (p *PrefixOverlap) refine(r *Request, cands []Candidate, scores []float64, idx []int) int {
	l := p.cfg.Load
	least := idx[:0:0]
	for _, i := range idx {
		switch {
		case len(least) == 0 || l.of(cands[i]) < l.of(cands[least[0]]):
			least = append(least[:0], i)
		case l.of(cands[i]) == l.of(cands[least[0]]):
			least = append(least, i)
		}
	}
	score := func(i int) float64 {
		if i < len(scores) && !math.IsNaN(scores[i]) {
			return scores[i]
		}
		return 0
	}
	best := math.Inf(-1)
	for _, i := range least {
		best = max(best, score(i))
	}
	tied := least[:0]
	for _, i := range least {
		if near(score(i), best) {
			tied = append(tied, i)
		}
	}
	return p.tb.choose(r, cands, tied)
}

// Observe implements Observer: an Accepted request's blocks join t's index.
func (p *PrefixOverlap) Observe(r *Request, t affinity.Target, o placement.Outcome) {
	if o != placement.Accepted || r == nil || len(r.Blocks) == 0 {
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	b := p.idx[t]
	if b == nil {
		b = blocklru.New(p.cfg.Capacity)
		p.idx[t] = b
	}
	b.Insert(r.Blocks) // last to first: the leading blocks end the most recent
}

// Forget drops what p learned of t (a worker-only t: of that target only;
// see ForgetWorker for every rank).
func (p *PrefixOverlap) Forget(t affinity.Target) {
	p.mu.Lock()
	defer p.mu.Unlock()
	delete(p.idx, t)
}

// ForgetWorker drops what p learned of every target of worker w (its ranks
// and its worker-only target): for a worker that restarted or left.
func (p *PrefixOverlap) ForgetWorker(w string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	for t := range p.idx {
		if t.Worker == w {
			delete(p.idx, t)
		}
	}
}

// Held returns how many blocks p remembers for t.
func (p *PrefixOverlap) Held(t affinity.Target) int {
	p.mu.RLock()
	defer p.mu.RUnlock()
	if b := p.idx[t]; b != nil {
		return b.Len()
	}
	return 0
}

// ratio returns t's match ratio for r; p.mu held.
func (p *PrefixOverlap) ratio(r *Request, t affinity.Target) float64 {
	if r == nil || len(r.Blocks) == 0 {
		return 0
	}
	return float64(p.matched(r, t)) / float64(len(r.Blocks))
}

// matched returns how many leading blocks of r t holds; p.mu held.
func (p *PrefixOverlap) matched(r *Request, t affinity.Target) int {
	if r == nil {
		return 0
	}
	b := p.idx[t]
	if b == nil {
		return 0
	}
	return b.Match(r.Blocks)
}
