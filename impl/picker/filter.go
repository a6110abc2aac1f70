package picker

import "github.com/placementlab/placement/impl/affinity"

// DropOverloaded is a Filter that drops the candidates flagged Overloaded,
// unless every candidate is: then it keeps them all, so that the scorers
// weigh their loads (as the affinity layer keeps overloaded targets in the
// full set) rather than the pick failing for want of a target.
type DropOverloaded struct{}

// Filter implements Filter.
func (DropOverloaded) Filter(_ *Request, cands []Candidate) []Candidate {
	out := cands[:0:0]
	for _, c := range cands {
		if !c.Overloaded {
			out = append(out, c)
		}
	}
	if len(out) == 0 {
		return cands
	}
	return out
}

// MaxLoad is a Filter that drops the candidates whose load (Load: in flight
// or bound) is at or above Limit, unless every candidate's is: then it keeps
// them all, as DropOverloaded does. A Limit <= 0 drops nothing.
type MaxLoad struct {
	Load  Load
	Limit int
}

// Filter implements Filter.
func (m MaxLoad) Filter(_ *Request, cands []Candidate) []Candidate {
	if m.Limit <= 0 {
		return cands
	}
	out := cands[:0:0]
	for _, c := range cands {
		if m.Load.of(c) < m.Limit {
			out = append(out, c)
		}
	}
	if len(out) == 0 {
		return cands
	}
	return out
}

// FilterFunc adapts a function to a Filter.
type FilterFunc func(r *Request, cands []Candidate) []Candidate

// Filter calls f.
func (f FilterFunc) Filter(r *Request, cands []Candidate) []Candidate { return f(r, cands) }

// ScorerFunc adapts a function to a Scorer.
type ScorerFunc func(r *Request, cands []Candidate, scores []float64)

// Score calls f.
func (f ScorerFunc) Score(r *Request, cands []Candidate, scores []float64) { f(r, cands, scores) }

// PickerFunc adapts a function to a Picker.
type PickerFunc func(r *Request, cands []Candidate, scores []float64) int

// Pick calls f.
func (f PickerFunc) Pick(r *Request, cands []Candidate, scores []float64) int {
	return f(r, cands, scores)
}

// Exclude returns the candidates none of tried accepts (affinity.Target's
// Accepts: a worker-only tried target excludes every rank of its worker, a
// ranked one that rank only), in their order, in a new slice: how a router
// drops the targets a request already tried before a retry's pick.
func Exclude(cands []Candidate, tried ...affinity.Target) []Candidate {
	out := make([]Candidate, 0, len(cands))
next:
	for _, c := range cands {
		for _, t := range tried {
			if t.Accepts(c.Target) {
				continue next
			}
		}
		out = append(out, c)
	}
	return out
}
