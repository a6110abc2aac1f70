package picker_test

import (
	"fmt"
	"time"

	"github.com/placementlab/placement/impl/affinity"
	"github.com/placementlab/placement/impl/picker"
	"github.com/placementlab/placement/impl/placement"
)

// A router's pipeline: drop overloaded targets, weigh in-flight requests
// and bound sessions, take the best; then report the outcome.
func ExamplePipeline() {
	p := &picker.Pipeline{
		Filters: []picker.Filter{picker.DropOverloaded{}},
		Scorers: []picker.Weighted{
			{Scorer: picker.LeastInFlight{}, Weight: 2},
			{Scorer: picker.LeastBound{}, Weight: 1},
		},
	}
	// From Turn.Eligible, with the router's load counters.
	eligible := []affinity.Candidate{
		{Target: affinity.WorkerOnly("a")},
		{Target: affinity.WorkerOnly("b"), Overloaded: true},
		{Target: affinity.WorkerOnly("c")},
	}
	load := map[string][2]int{"a": {4, 1}, "b": {0, 0}, "c": {1, 3}}
	cands := picker.FromAffinityLoads(eligible, func(t affinity.Target) (int, int) {
		return load[t.Worker][0], load[t.Worker][1]
	})
	key, _ := affinity.Namespace{Model: "m"}.Session("chat-42")
	r := &picker.Request{Key: key}
	c, err := p.Pick(r, cands)
	fmt.Println(c.Target, err)
	p.Observe(r, c.Target, placement.DefinitelyNotAccepted)

	// The retry drops the target already tried.
	c, err = p.Pick(r, picker.Exclude(cands, c.Target))
	fmt.Println(c.Target, err)
	p.Observe(r, c.Target, placement.Accepted)

	_, err = p.Pick(r, nil)
	fmt.Println(err)
	// Output:
	// c <nil>
	// a <nil>
	// picker: no candidates
}

// SGLang's cache-aware rule: the target holding the prompt's prefix wins
// while the load is balanced; the least loaded wins once it is not.
func ExamplePrefixOverlap() {
	prefix, err := picker.NewPrefixOverlap(picker.PrefixConfig{}) // defaults: 16 / 1.5 / 0.3
	if err != nil {
		panic(err)
	}
	p := &picker.Pipeline{Picker: prefix}
	system := []uint64{0xa1, 0xa2, 0xa3} // a shared system prompt's block hashes
	first := &picker.Request{Blocks: system}
	p.Observe(first, affinity.WorkerOnly("b"), placement.Accepted)

	turn := &picker.Request{Blocks: append(system, 0xb1)} // 3 of 4 blocks held by b
	for _, load := range []int{5, 30} {
		cands := []picker.Candidate{
			{Target: affinity.WorkerOnly("a"), InFlight: 2},
			{Target: affinity.WorkerOnly("b"), InFlight: load},
		}
		i, branch := prefix.Decide(turn, cands, nil)
		fmt.Println(cands[i].Target, branch)
	}
	// Output:
	// b matched
	// a imbalanced
}

// Consistent hashing with bounded loads: a session stays on its target
// until that target reaches ceil(1.25 x (total + 1) / n).
func ExampleConsistentHash() {
	h, err := picker.NewConsistentHash(picker.HashConfig{Load: picker.LoadBound})
	if err != nil {
		panic(err)
	}
	p := &picker.Pipeline{Picker: h}
	key, _ := affinity.Namespace{}.Session("agent-7")
	r := &picker.Request{Key: key}
	cands := []picker.Candidate{
		{Target: affinity.WorkerOnly("a")},
		{Target: affinity.WorkerOnly("b")},
		{Target: affinity.WorkerOnly("c")},
	}
	first, _ := p.Pick(r, cands)
	again, _ := p.Pick(r, cands)
	fmt.Println("sticky:", first.Target == again.Target)

	for i := range cands {
		if cands[i].Target == first.Target {
			cands[i].Bound = 2 // at the bound ceil(1.25 x 3 / 3) = 2
		}
	}
	moved, _ := p.Pick(r, cands)
	fmt.Println("bound:", h.Bound(cands), "moved:", moved.Target != first.Target)
	// Output:
	// sticky: true
	// bound: 2 moved: true
}

// The common case: least in flight plus least bound.
func ExampleDefault() {
	p := picker.Default()
	c, err := p.Pick(&picker.Request{}, []picker.Candidate{
		{Target: affinity.Ranked("w", 0), InFlight: 3, Bound: 2},
		{Target: affinity.Ranked("w", 1), InFlight: 1, Bound: 2},
	})
	fmt.Println(c.Target, err)
	// Output: w/1 <nil>
}

// Placement's own scheduler, as the replay's placement rows run it: the
// router sets each candidate's Cost (its estimate of the time to first
// token there), keeps the targets within 2 s of the cheapest, follows a
// long indexed prefix to a target that is not busy, then weighs loads.
func ExampleFollowPrefix() {
	index, err := picker.NewPrefixOverlap(picker.PrefixConfig{})
	if err != nil {
		panic(err)
	}
	follow, err := picker.NewFollowPrefix(index, picker.FollowConfig{MinBlocks: 64}) // 4,096 tokens of 64-token blocks
	if err != nil {
		panic(err)
	}
	p := &picker.Pipeline{
		Filters: []picker.Filter{picker.DropOverloaded{}, picker.CostWithin{Slack: 2 * time.Second}, follow},
		Scorers: []picker.Weighted{{Scorer: picker.LeastInFlight{}, Weight: 1}, {Scorer: picker.LeastBound{}, Weight: 1}},
	}
	conversation := make([]uint64, 100) // a session's 100 prompt blocks
	for i := range conversation {
		conversation[i] = uint64(i + 1)
	}
	p.Observe(&picker.Request{Blocks: conversation}, affinity.WorkerOnly("b"), placement.Accepted)

	cands := []picker.Candidate{
		{Target: affinity.WorkerOnly("a"), InFlight: 1, Cost: 700 * time.Millisecond},
		{Target: affinity.WorkerOnly("b"), InFlight: 3, Cost: 1500 * time.Millisecond}, // holds the prefix
		{Target: affinity.WorkerOnly("c"), InFlight: 0, Cost: 4 * time.Second},         // beyond the slack
	}
	c, err := p.Pick(&picker.Request{Blocks: append(conversation, 101)}, cands)
	fmt.Println(c.Target, err)

	// Soft mode: a session bound to c would cost 3.3 s more than on a, so
	// c is flagged and the affinity layer offers every target.
	fmt.Println(picker.MarkCostly(cands, affinity.WorkerOnly("c"), 2*time.Second), cands[2].Overloaded)
	// Output:
	// b <nil>
	// true true
}
