package replay_test

import (
	"context"
	"fmt"

	"github.com/placementlab/placement/replay"
)

// ExampleReport_Violations is a nightly campaign's run for one seed: the
// default workload and configuration with that seed and the default
// churn, the placement policies (the ones checked) and the router
// replicas, every invariant violation listed and the checks counted. (The
// workload is smaller here, to keep the example fast.)
func ExampleReport_Violations() {
	seed := uint64(7)
	p := replay.DefaultWorkload()
	p.Seed = seed
	p.Sessions, p.SessionRate = 12, 0.2 // the campaign keeps the defaults
	w, err := replay.Generate(p)
	if err != nil {
		fmt.Println(err)
		return
	}
	cfg := replay.DefaultConfig()
	cfg.Seed = seed
	cfg.Workers = 5 // the campaign keeps the default 8
	cfg.Churn = replay.DefaultChurn(cfg.Workers, w.Span())
	cfg.Policies = []replay.Policy{replay.PlacementHard, replay.PlacementSoft, replay.PlacementOff}
	rep, err := replay.Run(context.Background(), cfg, w)
	if err != nil {
		fmt.Println(err)
		return
	}
	checked := true
	for _, r := range rep.Results {
		checked = checked && r.InvariantChecks > 0
	}
	cfg.Replicas = replay.DefaultReplicas(w.Span())
	cfg.Replicas.Counts = []int{3} // the campaign keeps 1, 3 and 5
	rr, err := replay.RunReplicas(context.Background(), cfg, w)
	if err != nil {
		fmt.Println(err)
		return
	}
	for _, r := range rr.Results {
		checked = checked && r.InvariantChecks > 0
	}
	violations := append(rep.Violations(), rr.Violations()...)
	for _, v := range violations {
		fmt.Println(v) // e.g. "placement-hard: lease leaked: ..."
	}
	fmt.Println("checked:", checked, "violations:", len(violations))
	// Output:
	// checked: true violations: 0
}
