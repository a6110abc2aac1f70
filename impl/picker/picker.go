package picker

import (
	"errors"
	"fmt"
	"math"
	"reflect"
	"sync"
	"time"

	"github.com/placementlab/placement/impl/affinity"
	"github.com/placementlab/placement/impl/placement"
)

// Candidate is a target a pick may choose, with the load signals scorers read.
type Candidate struct {
	Target     affinity.Target
	Overloaded bool // over the scheduler's load threshold (affinity.Candidate's flag)
	InFlight   int  // requests in flight to the target now
	Bound      int  // sessions bound to the target now (affinity.Layer.Bound)

	// Cost is the router's estimate of what this request would cost on
	// the target, as a time (for instance its time to first token there:
	// the target's queued prefill plus the request's own uncached
	// prefill). Zero or negative means unknown: CostWithin keeps such a
	// candidate and MarkCostly never marks it, and neither counts it as
	// the cheapest. A router whose estimate can be zero reports at least
	// 1 ns. Only CostWithin and MarkCostly read it.
	Cost time.Duration
}

// Request is what filters and scorers see of a request.
type Request struct {
	Key    affinity.Key // the session's (or sibling group's) key; zero: none
	Blocks []uint64     // hashes of the prompt's prefix blocks, in order (nil: unknown)
}

// Filter narrows the candidates. It returns a subset of cands (it may
// reorder them and may reuse cands' backing array, which the pipeline owns);
// an empty result ends the pick with ErrNoCandidates.
type Filter interface {
	Filter(r *Request, cands []Candidate) []Candidate
}

// Scorer writes one score in [0,1] per candidate into scores (len(scores) ==
// len(cands), zeroed before the call): 1 is the best. The pipeline clamps
// what it writes (NaN and negatives to 0, above 1 to 1).
type Scorer interface {
	Score(r *Request, cands []Candidate, scores []float64)
}

// Weighted is a scorer with its weight in the pipeline's total: a finite
// weight >= 0 (0 skips the scorer).
type Weighted struct {
	Scorer Scorer
	Weight float64
}

// Picker chooses one candidate given the pipeline's total scores (one per
// candidate, each the weighted sum of the scorers' clamped scores). It
// returns an index into cands; an index out of range ends the pick with
// ErrBadPick.
type Picker interface {
	Pick(r *Request, cands []Candidate, scores []float64) int
}

// Observer is told what was sent where, so stateful scorers (prefix overlap)
// learn what each target caches.
type Observer interface {
	Observe(r *Request, t affinity.Target, o placement.Outcome)
}

// ErrNoCandidates: nothing to pick from (no candidates given, or a filter
// left none).
var ErrNoCandidates = errors.New("picker: no candidates")

// ErrBadPick: a Picker returned an index outside its candidates.
var ErrBadPick = errors.New("picker: picker returned an index out of range")

// ErrInvalidConfig is what every *ConfigError matches with errors.Is.
var ErrInvalidConfig = errors.New("picker: invalid configuration")

// ConfigError is a configuration value the package rejects: which field,
// and why. errors.Is(err, ErrInvalidConfig) holds for every ConfigError.
type ConfigError struct {
	Field  string // e.g. "Scorers[1].Weight" or "PrefixConfig.Threshold"
	Reason string
}

// Error formats e.
func (e *ConfigError) Error() string {
	return "picker: invalid " + e.Field + ": " + e.Reason
}

// Is reports whether target is ErrInvalidConfig.
func (e *ConfigError) Is(target error) bool { return target == ErrInvalidConfig }

// Pipeline runs a router's filters, then its weighted scorers, then its
// picker over a request's candidates. Build it once and share it: Pick and
// Observe are safe for concurrent use when its parts are (the built-ins
// are). Do not copy a Pipeline after its first Pick.
type Pipeline struct {
	Filters []Filter
	Scorers []Weighted
	Picker  Picker // nil: the highest total score, ties broken deterministically (see HighestScore)

	// Seed seeds the default picker's tie-breaking of keyless requests (see
	// HighestScore); read at the first Pick.
	Seed uint64

	once sync.Once
	def  *HighestScore
}

// Default returns the pipeline for the common case: no filter, LeastInFlight
// and LeastBound weighted 1 each, and the default picker (the highest total,
// ties broken by HighestScore's rule). Set Seed before the first Pick for
// another keyless tie-break sequence.
func Default() *Pipeline {
	return &Pipeline{Scorers: []Weighted{{Scorer: LeastInFlight{}, Weight: 1}, {Scorer: LeastBound{}, Weight: 1}}}
}

// Validate checks the pipeline's configuration: no nil filter, scorer or
// weight that is not a finite number >= 0. It returns a *ConfigError.
func (p *Pipeline) Validate() error {
	for i, f := range p.Filters {
		if isNil(f) {
			return &ConfigError{Field: fmt.Sprintf("Filters[%d]", i), Reason: "nil"}
		}
	}
	for i, w := range p.Scorers {
		if isNil(w.Scorer) {
			return &ConfigError{Field: fmt.Sprintf("Scorers[%d].Scorer", i), Reason: "nil"}
		}
		if math.IsNaN(w.Weight) || math.IsInf(w.Weight, 0) || w.Weight < 0 {
			return &ConfigError{Field: fmt.Sprintf("Scorers[%d].Weight", i), Reason: fmt.Sprintf("%v is not a finite number >= 0", w.Weight)}
		}
	}
	return nil
}

// Pick runs the pipeline over cands and returns the chosen candidate. cands
// is not modified; a nil r is an empty Request. It returns ErrNoCandidates (wrapped, naming the filter)
// when cands is empty or a filter leaves none, a *ConfigError when Validate
// fails (or p is nil), and ErrBadPick when the picker returns an index out of range.
func (p *Pipeline) Pick(r *Request, cands []Candidate) (Candidate, error) {
	if p == nil {
		return Candidate{}, &ConfigError{Field: "Pipeline", Reason: "nil"}
	}
	if err := p.Validate(); err != nil {
		return Candidate{}, err
	}
	if r == nil {
		r = &Request{}
	}
	if len(cands) == 0 {
		return Candidate{}, ErrNoCandidates
	}
	cs := append([]Candidate(nil), cands...)
	for i, f := range p.Filters {
		cs = f.Filter(r, cs)
		if len(cs) == 0 {
			return Candidate{}, fmt.Errorf("%w: filter %d (%T) left none", ErrNoCandidates, i, f)
		}
	}
	total := make([]float64, len(cs))
	var scratch []float64
	for _, w := range p.Scorers {
		if w.Weight == 0 {
			continue
		}
		if scratch == nil {
			scratch = make([]float64, len(cs))
		} else {
			clear(scratch)
		}
		w.Scorer.Score(r, cs, scratch)
		for i, s := range scratch {
			total[i] += w.Weight * clamp01(s)
		}
	}
	pk := p.Picker
	if pk == nil {
		p.once.Do(func() { p.def = NewHighestScore(p.Seed) })
		pk = p.def
	}
	i := pk.Pick(r, cs, total)
	if i < 0 || i >= len(cs) {
		return Candidate{}, fmt.Errorf("%w: %T returned %d of %d", ErrBadPick, pk, i, len(cs))
	}
	return cs[i], nil
}

// Observe tells every distinct filter, scorer and picker of p that
// implements Observer that r was sent to t with outcome o: each pointer
// once, even when one value serves as both a scorer and the picker. A part
// that reads another's state (FollowPrefix reads its PrefixOverlap) counts
// as that other part: the PrefixOverlap is told once whether it is in the
// pipeline too or only behind a FollowPrefix.
func (p *Pipeline) Observe(r *Request, t affinity.Target, o placement.Outcome) {
	if p == nil {
		return
	}
	if r == nil {
		r = &Request{}
	}
	var seen []Observer
	tell := func(v any) {
		if f, ok := v.(observesFor); ok && !isNil(f) {
			v = f.observesFor()
		}
		ob, ok := v.(Observer)
		if !ok || isNil(ob) {
			return
		}
		for _, s := range seen {
			if same(s, ob) {
				return
			}
		}
		seen = append(seen, ob)
		ob.Observe(r, t, o)
	}
	for _, f := range p.Filters {
		tell(f)
	}
	for _, w := range p.Scorers {
		tell(w.Scorer)
	}
	tell(p.Picker)
}

// observesFor is implemented by a part whose learning is another
// part's: Pipeline.Observe tells that one instead (once).
type observesFor interface {
	observesFor() Observer
}

// FromAffinity converts the affinity layer's candidates (from
// Turn.Eligible) to the pipeline's, with zero loads: fill InFlight and
// Bound from the router's counters and affinity.Layer.Bound.
func FromAffinity(cs []affinity.Candidate) []Candidate {
	out := make([]Candidate, len(cs))
	for i, c := range cs {
		out[i] = Candidate{Target: c.Target, Overloaded: c.Overloaded}
	}
	return out
}

// FromAffinityLoads converts the affinity layer's candidates as FromAffinity
// does, reading each one's loads from load (nil: zero loads).
func FromAffinityLoads(cs []affinity.Candidate, load func(affinity.Target) (inFlight, bound int)) []Candidate {
	out := FromAffinity(cs)
	if load != nil {
		for i := range out {
			out[i].InFlight, out[i].Bound = load(out[i].Target)
		}
	}
	return out
}

// clamp01 maps s into [0,1]: NaN and negatives to 0, above 1 to 1.
func clamp01(s float64) float64 {
	switch {
	case s > 1:
		return 1
	case s >= 0:
		return s
	default: // negative or NaN
		return 0
	}
}

// isNil reports whether v is nil or a nil pointer (or other nil-able kind)
// in an interface.
func isNil(v any) bool {
	if v == nil {
		return true
	}
	rv := reflect.ValueOf(v)
	switch rv.Kind() {
	case reflect.Pointer, reflect.Map, reflect.Slice, reflect.Func, reflect.Chan, reflect.Interface:
		return rv.IsNil()
	}
	return false
}

// same reports whether a and b are the same pointer (non-pointer observers
// are never the same: comparing them could panic).
func same(a, b Observer) bool {
	va, vb := reflect.ValueOf(a), reflect.ValueOf(b)
	return va.Kind() == reflect.Pointer && vb.Kind() == reflect.Pointer &&
		va.Type() == vb.Type() && va.Pointer() == vb.Pointer()
}
