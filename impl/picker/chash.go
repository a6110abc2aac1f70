package picker

import (
	"cmp"
	"fmt"
	"math"
	"slices"
	"sync"
	"sync/atomic"

	"github.com/placementlab/placement/impl/affinity"
)

// ConsistentHash's defaults (see HashConfig).
const (
	// DefaultHashFactor is the bound on a target's load as a multiple of
	// the mean: 1.25, as KubeAI and SGLang's prefix_hash use.
	DefaultHashFactor = 1.25
	// DefaultVirtualNodes is the points each target has on the ring.
	DefaultVirtualNodes = 128
	// MaxVirtualNodes bounds HashConfig.VirtualNodes.
	MaxVirtualNodes = 4096
)

// HashConfig configures a ConsistentHash. A zero field takes its default.
type HashConfig struct {
	// Factor is c in the bound ceil(c x (total + 1) / n) on a target's load
	// (see ConsistentHash): finite, >= 1; 0 means DefaultHashFactor.
	Factor float64
	// Load is the load bounded: LoadInFlight (the default) or LoadBound.
	Load Load
	// VirtualNodes is the points each target has on the ring: 0 means
	// DefaultVirtualNodes; at most MaxVirtualNodes.
	VirtualNodes int
	// Seed seeds the ring position of requests with neither a key nor
	// blocks.
	Seed uint64
}

// resolve fills cfg's defaults and validates it.
func (cfg HashConfig) resolve() (HashConfig, error) {
	if cfg.Factor == 0 {
		cfg.Factor = DefaultHashFactor
	}
	if cfg.VirtualNodes == 0 {
		cfg.VirtualNodes = DefaultVirtualNodes
	}
	switch {
	case !(cfg.Factor >= 1) || math.IsInf(cfg.Factor, 0):
		return cfg, &ConfigError{Field: "HashConfig.Factor", Reason: fmt.Sprintf("%v is not a finite number >= 1", cfg.Factor)}
	case cfg.VirtualNodes < 1 || cfg.VirtualNodes > MaxVirtualNodes:
		return cfg, &ConfigError{Field: "HashConfig.VirtualNodes", Reason: fmt.Sprintf("%d is not in [1, %d]", cfg.VirtualNodes, MaxVirtualNodes)}
	case !cfg.Load.valid():
		return cfg, &ConfigError{Field: "HashConfig.Load", Reason: cfg.Load.String()}
	}
	return cfg, nil
}

// ConsistentHash is a Picker: consistent hashing with bounded loads
// (Mirrokni, Thorup and Zadimoghaddam, 2018). Each target has VirtualNodes
// points on a 64-bit ring, placed by a hash of the target and the point's
// number. A request hashes to a position: its key's hash; for a keyless
// request, its first block's (so prompts sharing a first block meet); for a
// request with neither, a draw from a generator seeded by Seed. From that
// position it walks clockwise and takes the first candidate whose load
// (Load) is below the bound ceil(Factor x (total + 1) / n), where total is
// the candidates' summed load (negative loads count as 0) and n their
// number: once the chosen target's load counts the request, no target is
// over the bound. With Factor >= 1 some candidate is always under it.
//
// The ring holds every target ever picked over, so a candidate missing from
// this request's list is skipped, which gives the same answer as a ring of
// the candidates alone: a key stays where it was while its target remains a
// candidate under the bound. Forget drops a target's points. Ties in hash
// position go to the lesser target (by worker, then rank), never to map
// order.
//
// It is not a Scorer: a ring position is a choice, not a degree. The
// pipeline's scores are ignored, and so is the Overloaded flag (put
// DropOverloaded before it). It is safe for concurrent use.
type ConsistentHash struct {
	cfg  HashConfig
	tb   *tieBreaker
	mu   sync.Mutex            // serialises ring changes
	ring atomic.Pointer[hring] // read without the lock
}

// hring is an immutable ring: sorted points and the targets on it.
type hring struct {
	points  []hpoint
	targets map[affinity.Target]struct{}
}

// hpoint is one of a target's points.
type hpoint struct {
	h uint64
	t affinity.Target
}

// NewConsistentHash returns a ConsistentHash for cfg, or a *ConfigError.
func NewConsistentHash(cfg HashConfig) (*ConsistentHash, error) {
	cfg, err := cfg.resolve()
	if err != nil {
		return nil, err
	}
	c := &ConsistentHash{cfg: cfg, tb: newTieBreaker(cfg.Seed)}
	c.ring.Store(&hring{targets: map[affinity.Target]struct{}{}})
	return c, nil
}

// Config returns c's configuration with its defaults filled in.
func (c *ConsistentHash) Config() HashConfig { return c.cfg }

// Bound returns the load bound for cands: ceil(Factor x (total + 1) / n);
// 0 when cands is empty.
func (c *ConsistentHash) Bound(cands []Candidate) int {
	if len(cands) == 0 {
		return 0
	}
	total := 0
	for _, x := range cands {
		total += max(0, c.cfg.Load.of(x))
	}
	return int(math.Ceil(c.cfg.Factor * float64(total+1) / float64(len(cands))))
}

// Pick implements Picker (see ConsistentHash). It returns -1 when cands is
// empty.
func (c *ConsistentHash) Pick(r *Request, cands []Candidate, _ []float64) int {
	if len(cands) == 0 {
		return -1
	}
	rg := c.with(cands)
	bound := c.Bound(cands)
	at := make(map[affinity.Target]int, len(cands))
	for i := len(cands) - 1; i >= 0; i-- {
		at[cands[i].Target] = i // the first of duplicates wins
	}
	var pos uint64
	switch {
	case r != nil && !r.Key.IsZero():
		pos = keyHash(r.Key)
	case r != nil && len(r.Blocks) > 0:
		pos = mix64(r.Blocks[0] ^ 0x6a09e667f3bcc909)
	default:
		pos = c.tb.uint64()
	}
	n := len(rg.points)
	start, _ := slices.BinarySearchFunc(rg.points, pos, func(p hpoint, h uint64) int { return cmp.Compare(p.h, h) })
	for k := range n {
		p := rg.points[(start+k)%n]
		if i, ok := at[p.t]; ok && c.cfg.Load.of(cands[i]) < bound {
			return i
		}
	}
	// Unreachable with Factor >= 1 (some candidate is under the bound);
	// kept so that a bad load never panics: the least loaded.
	best := 0
	for i := range cands {
		if c.cfg.Load.of(cands[i]) < c.cfg.Load.of(cands[best]) {
			best = i
		}
	}
	return best
}

// Forget removes t's points from the ring (they return if t is a candidate
// again).
func (c *ConsistentHash) Forget(t affinity.Target) {
	c.mu.Lock()
	defer c.mu.Unlock()
	old := c.ring.Load()
	if _, ok := old.targets[t]; !ok {
		return
	}
	nr := &hring{targets: make(map[affinity.Target]struct{}, len(old.targets)-1)}
	for x := range old.targets {
		if x != t {
			nr.targets[x] = struct{}{}
		}
	}
	nr.points = make([]hpoint, 0, len(old.points))
	for _, p := range old.points {
		if p.t != t {
			nr.points = append(nr.points, p)
		}
	}
	c.ring.Store(nr)
}

// Targets returns how many targets the ring holds.
func (c *ConsistentHash) Targets() int { return len(c.ring.Load().targets) }

// with returns the ring with every candidate's target on it, adding the
// missing ones (copy on write).
func (c *ConsistentHash) with(cands []Candidate) *hring {
	rg := c.ring.Load()
	if rg.hasAll(cands) {
		return rg
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	rg = c.ring.Load()
	if rg.hasAll(cands) {
		return rg
	}
	nr := &hring{targets: make(map[affinity.Target]struct{}, len(rg.targets)+len(cands))}
	for t := range rg.targets {
		nr.targets[t] = struct{}{}
	}
	nr.points = slices.Clone(rg.points)
	for _, x := range cands {
		if _, ok := nr.targets[x.Target]; ok {
			continue
		}
		nr.targets[x.Target] = struct{}{}
		th := targetHash(x.Target)
		for v := range c.cfg.VirtualNodes {
			nr.points = append(nr.points, hpoint{h: mix64(hashUint(th, uint64(v))), t: x.Target})
		}
	}
	slices.SortFunc(nr.points, func(a, b hpoint) int {
		return cmp.Or(cmp.Compare(a.h, b.h), cmp.Compare(a.t.Worker, b.t.Worker),
			cmp.Compare(b2i(a.t.HasRank), b2i(b.t.HasRank)), cmp.Compare(a.t.Rank, b.t.Rank))
	})
	c.ring.Store(nr)
	return nr
}

// hasAll reports whether every candidate's target is on rg.
func (rg *hring) hasAll(cands []Candidate) bool {
	for _, x := range cands {
		if _, ok := rg.targets[x.Target]; !ok {
			return false
		}
	}
	return true
}

// b2i is 1 for true.
func b2i(b bool) int {
	if b {
		return 1
	}
	return 0
}
