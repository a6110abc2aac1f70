package picker

import (
	"math"
	"math/rand/v2"
	"sync"

	"github.com/placementlab/placement/impl/affinity"
)

// Load names the load signal a built-in reads from a Candidate.
type Load uint8

const (
	// LoadInFlight is Candidate.InFlight (the zero value: the default).
	LoadInFlight Load = iota
	// LoadBound is Candidate.Bound.
	LoadBound
)

// String names l.
func (l Load) String() string {
	switch l {
	case LoadInFlight:
		return "in-flight"
	case LoadBound:
		return "bound"
	}
	return "Load(invalid)"
}

// valid reports whether l is a known load.
func (l Load) valid() bool { return l <= LoadBound }

// of returns c's load l.
func (l Load) of(c Candidate) int {
	if l == LoadBound {
		return c.Bound
	}
	return c.InFlight
}

// LeastInFlight scores candidates by requests in flight, min-max
// normalised: the least loaded scores 1, the most loaded 0, the rest
// linearly between; when all are equal every one scores 1 (llm-d's queue
// scorer's normalisation). Equal loads get equal scores: the picker breaks
// the tie (see HighestScore). Min-max spans the whole range whatever the
// difference: loads 0 and 1 score 1 and 0 as 0 and 100 do, so at equal
// weights it outweighs any scorer whose scores differ by less than 1.
type LeastInFlight struct{}

// Score implements Scorer.
func (LeastInFlight) Score(_ *Request, cands []Candidate, scores []float64) {
	leastLoaded(LoadInFlight, cands, scores)
}

// LeastBound scores candidates by sessions bound to them, normalised as
// LeastInFlight's scores are.
type LeastBound struct{}

// Score implements Scorer.
func (LeastBound) Score(_ *Request, cands []Candidate, scores []float64) {
	leastLoaded(LoadBound, cands, scores)
}

// leastLoaded writes the min-max normalised inverse of each candidate's load.
func leastLoaded(l Load, cands []Candidate, scores []float64) {
	if len(cands) == 0 {
		return
	}
	lo, hi := l.of(cands[0]), l.of(cands[0])
	for _, c := range cands[1:] {
		lo, hi = min(lo, l.of(c)), max(hi, l.of(c))
	}
	for i, c := range cands {
		if i >= len(scores) {
			return
		}
		if hi == lo {
			scores[i] = 1
			continue
		}
		scores[i] = float64(hi-l.of(c)) / float64(hi-lo)
	}
}

// HighestScore is the default Picker: the candidate with the highest score
// (NaN counts as the lowest). Scores within a relative 1e-9 of the best are
// ties, broken so that ties do not all go to the first candidate:
//
//   - a request with a key: the tied candidate whose target hashes lowest
//     with the key (rendezvous hashing): the same key and candidates give
//     the same choice, and different keys spread over the tied targets;
//   - a keyless request: uniformly at random from a generator seeded at
//     construction and guarded by a mutex, so a given seed and call order
//     give the same choices.
//
// It is safe for concurrent use.
type HighestScore struct{ tb *tieBreaker }

// NewHighestScore returns the default picker with its keyless tie-break
// seeded by seed.
func NewHighestScore(seed uint64) *HighestScore { return &HighestScore{tb: newTieBreaker(seed)} }

// Pick implements Picker. It returns -1 when cands is empty (the pipeline
// never calls it so).
func (h *HighestScore) Pick(r *Request, cands []Candidate, scores []float64) int {
	n := min(len(cands), len(scores))
	if n == 0 {
		return -1
	}
	best, found := math.Inf(-1), false
	for _, s := range scores[:n] {
		if !math.IsNaN(s) && (!found || s > best) {
			best, found = s, true
		}
	}
	tied := make([]int, 0, n)
	for i, s := range scores[:n] {
		if !found || near(s, best) {
			tied = append(tied, i)
		}
	}
	return h.tb.choose(r, cands, tied)
}

// near reports whether s ties with best: within a relative 1e-9 (exactly
// equal when best is infinite; never when s is NaN).
func near(s, best float64) bool {
	if math.IsInf(best, 0) {
		return s == best
	}
	return s >= best-1e-9*math.Max(1, math.Abs(best))
}

// tieBreaker chooses among tied candidates: by rendezvous hash of the key
// and target for a keyed request, from a seeded generator otherwise.
type tieBreaker struct {
	mu  sync.Mutex
	rng *rand.Rand
}

// newTieBreaker returns a tie-breaker whose generator is seeded by seed.
func newTieBreaker(seed uint64) *tieBreaker {
	return &tieBreaker{rng: rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15))}
}

// choose returns the index into cands of the chosen one of tied (indices
// into cands); -1 when tied is empty.
func (t *tieBreaker) choose(r *Request, cands []Candidate, tied []int) int {
	switch len(tied) {
	case 0:
		return -1
	case 1:
		return tied[0]
	}
	if r != nil && !r.Key.IsZero() {
		kh := keyHash(r.Key)
		best, bh := tied[0], mix64(kh^targetHash(cands[tied[0]].Target))
		for _, i := range tied[1:] {
			if h := mix64(kh ^ targetHash(cands[i].Target)); h < bh {
				best, bh = i, h
			}
		}
		return best
	}
	t.mu.Lock()
	j := t.rng.IntN(len(tied))
	t.mu.Unlock()
	return tied[j]
}

// uint64 returns the generator's next value.
func (t *tieBreaker) uint64() uint64 {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.rng.Uint64()
}

// FNV-1a's constants.
const (
	fnvOffset uint64 = 14695981039346656037
	fnvPrime  uint64 = 1099511628211
)

// hashString folds s into h (FNV-1a).
func hashString(h uint64, s string) uint64 {
	for i := 0; i < len(s); i++ {
		h ^= uint64(s[i])
		h *= fnvPrime
	}
	return h
}

// hashUint folds v's 8 bytes into h (FNV-1a).
func hashUint(h, v uint64) uint64 {
	for i := 0; i < 8; i++ {
		h ^= v & 0xff
		h *= fnvPrime
		v >>= 8
	}
	return h
}

// mix64 is SplitMix64's finaliser: it spreads every input bit over the output.
func mix64(x uint64) uint64 {
	x ^= x >> 30
	x *= 0xbf58476d1ce4e5b9
	x ^= x >> 27
	x *= 0x94d049bb133111eb
	x ^= x >> 31
	return x
}

// targetHash hashes t's worker, rank and whether it has one.
func targetHash(t affinity.Target) uint64 {
	h := hashString(fnvOffset, t.Worker)
	r := uint64(0)
	if t.HasRank {
		r = 1<<63 | uint64(uint32(t.Rank))
	}
	return mix64(hashUint(h, r))
}

// keyHash hashes k through its String (its kind and the first 8 bytes of
// its digest); 0 for the zero key.
func keyHash(k affinity.Key) uint64 {
	if k.IsZero() {
		return 0
	}
	return mix64(hashString(fnvOffset, k.String()))
}
