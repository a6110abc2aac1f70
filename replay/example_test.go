package replay_test

import (
	"context"
	"fmt"
	"strings"

	"github.com/placementlab/placement/replay"
)

// Example replays a small generated workload under placement's soft mode
// and round robin, side by side, on a cluster that loses a worker half
// way.
func Example() {
	p := replay.DefaultWorkload()
	p.Sessions, p.Seed = 20, 42
	w, err := replay.Generate(p)
	if err != nil {
		fmt.Println(err)
		return
	}
	cfg := replay.DefaultConfig()
	cfg.Workers, cfg.Ranks = 4, 1
	cfg.Policies = []replay.Policy{replay.PlacementSoft, replay.RoundRobin}
	cfg.Churn = []replay.Change{{At: w.Span() / 2, Worker: 3, Kind: replay.Restart}}
	rep, err := replay.Run(context.Background(), cfg, w)
	if err != nil {
		fmt.Println(err)
		return
	}
	soft, rr := rep.Results[0], rep.Results[1]
	fmt.Println("requests:", rep.Requests, "served:", soft.Served, rr.Served)
	fmt.Println("soft reuses more of the cache:", soft.HitRatio > rr.HitRatio)
	fmt.Printf("round robin reuses about 1/4 of later calls: %.2f\n", rr.TurnReuse)
	// Output:
	// requests: 1098 served: 1098 1098
	// soft reuses more of the cache: true
	// round robin reuses about 1/4 of later calls: 0.28
}

// ExampleReadTrace replays a two-line JSONL trace: the second call of a
// session finds the first call's prompt and output in the rank's cache
// (1,100 tokens: 17 full blocks of 64). The first call prefills in 10 ms +
// 1,000/10,000 s and decodes 100 x 20 ms (2.11 s); the second is sent 2 s
// later and prefills 512 tokens (0.0612 s) and decodes 1 s.
func ExampleReadTrace() {
	const trace = `{"id":0,"session":"s1","prompt":[{"stream":"s1","tokens":1000}],"output_tokens":100}
{"id":1,"session":"s1","after":[0],"think_ms":2000,"prompt":[{"stream":"s1","tokens":1600}],"output_tokens":50,"final":true}
`
	w, err := replay.ReadTrace(strings.NewReader(trace))
	if err != nil {
		fmt.Println(err)
		return
	}
	cfg := replay.DefaultConfig()
	cfg.Workers, cfg.Ranks, cfg.AmbiguousProb = 1, 1, 0
	cfg.Policies = []replay.Policy{replay.PlacementSoft}
	rep, err := replay.Run(context.Background(), cfg, w)
	if err != nil {
		fmt.Println(err)
		return
	}
	r := rep.Results[0]
	fmt.Printf("cached %d of %d prompt tokens; the last answer at %v\n", r.CachedTokens, r.PromptTokens, r.End)
	// Output:
	// cached 1088 of 2600 prompt tokens; the last answer at 5.1712s
}
