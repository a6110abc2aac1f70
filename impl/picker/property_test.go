package picker_test

import (
	"fmt"
	"math"
	"testing"

	"pgregory.net/rapid"

	"github.com/placementlab/placement/impl/affinity"
	"github.com/placementlab/placement/impl/picker"
	"github.com/placementlab/placement/impl/placement"
)

// genCands draws 1..6 candidates with distinct targets, in-flight loads in
// [-2, 120] (wide enough for the balance rule's every case) and bound
// loads in [-2, 40].
func genCands(t *rapid.T) []picker.Candidate {
	n := rapid.IntRange(1, 6).Draw(t, "n")
	cs := make([]picker.Candidate, n)
	for i := range cs {
		cs[i] = picker.Candidate{
			Target:     affinity.Ranked(fmt.Sprint("w", i/2), i%2),
			Overloaded: rapid.Bool().Draw(t, "over"),
			InFlight:   rapid.IntRange(-2, 120).Draw(t, "inflight"),
			Bound:      rapid.IntRange(-2, 40).Draw(t, "bound"),
		}
	}
	return cs
}

// genBlocks draws a prompt's chained block hashes over a small alphabet,
// so that prompts share prefixes.
func genBlocks(t *rapid.T, label string) []uint64 {
	xs := rapid.SliceOfN(rapid.IntRange(0, 2), 0, 6).Draw(t, label)
	out := make([]uint64, len(xs))
	h := uint64(17)
	for i, x := range xs {
		h = h*1000003 + uint64(x) + 1
		out[i] = h
	}
	return out
}

// genKey draws a session key or none.
func genKey(t *rapid.T) affinity.Key {
	if rapid.Bool().Draw(t, "keyless") {
		return affinity.Key{}
	}
	k, err := affinity.Namespace{}.Session(fmt.Sprint("s", rapid.IntRange(0, 50).Draw(t, "key")))
	if err != nil {
		t.Fatal(err)
	}
	return k
}

// trainedPrefix returns a PrefixOverlap that has accepted a few random
// prompts on random targets of cs.
func trainedPrefix(t *rapid.T, cs []picker.Candidate) *picker.PrefixOverlap {
	p, err := picker.NewPrefixOverlap(picker.PrefixConfig{Capacity: rapid.IntRange(1, 8).Draw(t, "capacity"), Seed: 1})
	if err != nil {
		t.Fatal(err)
	}
	for range rapid.IntRange(0, 8).Draw(t, "observations") {
		c := rapid.SampledFrom(cs).Draw(t, "to")
		o := rapid.SampledFrom([]placement.Outcome{placement.Accepted, placement.Accepted, placement.Ambiguous, placement.DefinitelyNotAccepted}).Draw(t, "outcome")
		p.Observe(&picker.Request{Blocks: genBlocks(t, "seen")}, c.Target, o)
	}
	return p
}

// TestPropScoresInRange: every built-in scorer writes a score in [0,1] for
// every candidate.
func TestPropScoresInRange(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		cs := genCands(t)
		r := &picker.Request{Key: genKey(t), Blocks: genBlocks(t, "blocks")}
		for _, s := range []picker.Scorer{picker.LeastInFlight{}, picker.LeastBound{}, trainedPrefix(t, cs)} {
			scores := make([]float64, len(cs))
			for i := range scores {
				scores[i] = math.NaN() // a scorer must write every one
			}
			s.Score(r, cs, scores)
			for i, x := range scores {
				if !(x >= 0 && x <= 1) {
					t.Fatalf("%T: score %d is %v", s, i, x)
				}
			}
		}
	})
}

// TestPropPickIsACandidate: a pipeline of random built-ins, weights and
// picker returns one of the candidates, or an error only for an invalid
// weight or when a filter leaves none (the built-in filters never do).
func TestPropPickIsACandidate(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		cs := genCands(t)
		r := &picker.Request{Key: genKey(t), Blocks: genBlocks(t, "blocks")}
		prefix := trainedPrefix(t, cs)
		hash, err := picker.NewConsistentHash(picker.HashConfig{Load: picker.Load(rapid.IntRange(0, 1).Draw(t, "load"))})
		if err != nil {
			t.Fatal(err)
		}
		p := &picker.Pipeline{Seed: 9}
		if rapid.Bool().Draw(t, "drop") {
			p.Filters = append(p.Filters, picker.DropOverloaded{})
		}
		if rapid.Bool().Draw(t, "max") {
			p.Filters = append(p.Filters, picker.MaxLoad{Limit: rapid.IntRange(0, 40).Draw(t, "limit")})
		}
		bad := false
		for _, s := range []picker.Scorer{picker.LeastInFlight{}, picker.LeastBound{}, prefix} {
			w := rapid.SampledFrom([]float64{0, 0.5, 1, 3, math.NaN(), -1}).Draw(t, "weight")
			bad = bad || math.IsNaN(w) || w < 0
			p.Scorers = append(p.Scorers, picker.Weighted{Scorer: s, Weight: w})
		}
		p.Picker = rapid.SampledFrom([]picker.Picker{nil, prefix, hash, picker.NewHighestScore(2)}).Draw(t, "picker")
		got, err := p.Pick(r, cs)
		if bad {
			if err == nil {
				t.Fatal("an invalid weight gave no error")
			}
			return
		}
		if err != nil {
			t.Fatal(err)
		}
		for _, c := range cs {
			if c == got {
				return
			}
		}
		t.Fatalf("picked %v, not a candidate", got)
	})
}

// TestPropBoundedLoads: over a sequence of picks by ConsistentHash, each
// adding one to the chosen target's load, with some loads going down
// between picks, the chosen target's load never goes over the bound
// ceil(Factor x (total + 1) / n) of its pick; with loads only going up, no
// target is ever over the bound of the current total.
func TestPropBoundedLoads(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		factor := rapid.SampledFrom([]float64{1, 1.1, 1.25, 2}).Draw(t, "factor")
		load := picker.Load(rapid.IntRange(0, 1).Draw(t, "load"))
		h, err := picker.NewConsistentHash(picker.HashConfig{Factor: factor, Load: load, VirtualNodes: rapid.IntRange(1, 64).Draw(t, "vnodes")})
		if err != nil {
			t.Fatal(err)
		}
		n := rapid.IntRange(1, 6).Draw(t, "n")
		cs := make([]picker.Candidate, n)
		for i := range cs {
			cs[i].Target = affinity.WorkerOnly(fmt.Sprint("w", i))
		}
		get := func(c *picker.Candidate) *int {
			if load == picker.LoadBound {
				return &c.Bound
			}
			return &c.InFlight
		}
		onlyUp := rapid.Bool().Draw(t, "onlyUp")
		for step := range rapid.IntRange(1, 60).Draw(t, "steps") {
			if !onlyUp && rapid.IntRange(0, 3).Draw(t, "finish") == 0 {
				c := &cs[rapid.IntRange(0, n-1).Draw(t, "which")]
				if *get(c) > 0 {
					*get(c)--
				}
			}
			bound := h.Bound(cs)
			i := h.Pick(&picker.Request{Key: genKey(t), Blocks: genBlocks(t, "blocks")}, cs, nil)
			if i < 0 || i >= n {
				t.Fatalf("step %d: index %d", step, i)
			}
			*get(&cs[i])++
			if *get(&cs[i]) > bound {
				t.Fatalf("step %d: %v at %d over the bound %d", step, cs[i].Target, *get(&cs[i]), bound)
			}
			if onlyUp {
				total := 0
				for j := range cs {
					total += *get(&cs[j])
				}
				cur := int(math.Ceil(factor * float64(total) / float64(n)))
				for j := range cs {
					if *get(&cs[j]) > cur {
						t.Fatalf("step %d: %v at %d over %d", step, cs[j].Target, *get(&cs[j]), cur)
					}
				}
			}
		}
	})
}

// TestPropPrefixRule: PrefixOverlap picks a target holding the longest
// prefix when the candidates are balanced and that prefix is above the
// threshold, and a least-loaded target otherwise.
func TestPropPrefixRule(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		cs := genCands(t)
		// Loads around a base, so that a difference above BalanceAbs
		// without a ratio above BalanceRel comes up.
		base := rapid.SampledFrom([]int{0, 50}).Draw(t, "base")
		for i := range cs {
			cs[i].InFlight = base + rapid.IntRange(0, 40).Draw(t, "spread")
		}
		p := trainedPrefix(t, cs)
		r := &picker.Request{Key: genKey(t), Blocks: genBlocks(t, "blocks")}
		ratios := make([]float64, len(cs))
		p.Score(r, cs, ratios)
		i, br := p.Decide(r, cs, nil)
		lo, hi, best := cs[0].InFlight, cs[0].InFlight, 0.0
		for j, c := range cs {
			lo, hi, best = min(lo, c.InFlight), max(hi, c.InFlight), max(best, ratios[j])
		}
		cfg := p.Config()
		imbalanced := hi-lo > cfg.BalanceAbs && float64(hi) > cfg.BalanceRel*float64(lo)
		switch {
		case imbalanced:
			if br != picker.Imbalanced || cs[i].InFlight != lo {
				t.Fatalf("imbalanced: %v picked load %d, least %d", br, cs[i].InFlight, lo)
			}
		case best > cfg.Threshold:
			if br != picker.Matched || ratios[i] != best {
				t.Fatalf("balanced: %v picked ratio %v, best %v", br, ratios[i], best)
			}
		default:
			if br != picker.LeastLoaded || cs[i].InFlight != lo {
				t.Fatalf("no match: %v picked load %d, least %d", br, cs[i].InFlight, lo)
			}
		}
	})
}
