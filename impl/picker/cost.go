package picker

import (
	"math"
	"time"

	"github.com/placementlab/placement/impl/affinity"
)

// CostWithin is a Filter over the router's cost estimates (Candidate.Cost):
// it keeps the candidates whose cost is at most the cheapest known cost
// plus Slack, in their order, and every candidate whose cost is unknown
// (Cost <= 0: the filter judges only what it knows). When no candidate's
// cost is known it keeps them all. A negative Slack counts as 0 (only the
// cheapest, and the unknown, stay).
//
// Used as a filter rather than a weighted scorer, a cost cannot be
// outvoted by load scorers: the scorers after it choose only among
// targets that are all nearly as cheap as the cheapest.
type CostWithin struct {
	Slack time.Duration
}

// Filter implements Filter.
func (f CostWithin) Filter(_ *Request, cands []Candidate) []Candidate {
	lo, ok := cheapest(cands)
	if !ok {
		return cands
	}
	limit := addSat(lo, max(f.Slack, 0))
	out := cands[:0:0]
	for _, c := range cands {
		if c.Cost <= 0 || c.Cost <= limit {
			out = append(out, c)
		}
	}
	return out
}

// MarkCostly flags Overloaded the candidates whose Target is t (by ==)
// when their Cost exceeds the cheapest known Cost among cands by more than
// slack (a negative slack counts as 0), and reports whether it flagged
// any. It never clears a flag, and never flags a candidate whose cost is
// unknown.
//
// It is the cost rule of a soft binding: a router marks a bound request's
// binding (Turn.Bound) costly before Turn.Eligible, so that the affinity
// layer offers every target when staying would cost more than slack over
// the cheapest, and the pick may move the binding.
func MarkCostly(cands []Candidate, t affinity.Target, slack time.Duration) bool {
	lo, ok := cheapest(cands)
	if !ok {
		return false
	}
	limit := addSat(lo, max(slack, 0))
	marked := false
	for i := range cands {
		if cands[i].Target == t && cands[i].Cost > 0 && cands[i].Cost > limit {
			cands[i].Overloaded = true
			marked = true
		}
	}
	return marked
}

// cheapest returns the least known (positive) Cost among cands; false
// when none is known.
func cheapest(cands []Candidate) (time.Duration, bool) {
	lo, ok := time.Duration(0), false
	for _, c := range cands {
		if c.Cost > 0 && (!ok || c.Cost < lo) {
			lo, ok = c.Cost, true
		}
	}
	return lo, ok
}

// addSat returns a + b for a, b >= 0, saturating at the largest Duration.
func addSat(a, b time.Duration) time.Duration {
	if b > math.MaxInt64-a {
		return math.MaxInt64
	}
	return a + b
}
