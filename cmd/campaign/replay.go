package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"

	"github.com/placementlab/placement/internal/campaign"
	"github.com/placementlab/placement/replay"
)

// replayCmd runs the replay on the default workload drawn from -seed,
// with the default churn: the placement policies, or with -replicas the
// router replicas' consistencies (1, 3 and 5 replicas). It prints a
// campaign.ReplayReport line with every invariant violation and the
// checks made; exit 1 on a violation.
func replayCmd(args []string) int {
	fs := newFlags("replay")
	seed := fs.Uint64("seed", 1, "the workload's and the simulation's seed")
	replicas := fs.Bool("replicas", false, "run the router replicas' consistencies instead of the single router's policies")
	sessions := fs.Int("sessions", 0, "sessions in the workload (0: the default workload's)")
	if fs.Parse(args) != nil {
		return 2
	}
	p := replay.DefaultWorkload()
	p.Seed = *seed
	if *sessions > 0 {
		p.Sessions = *sessions
	}
	w, err := replay.Generate(p)
	if err != nil {
		fmt.Fprintln(os.Stderr, "campaign replay:", err)
		return 2
	}
	cfg := replay.DefaultConfig()
	cfg.Seed = *seed
	cfg.Churn = replay.DefaultChurn(cfg.Workers, w.Span())
	rep := campaign.ReplayReport{Seed: *seed, Requests: len(w.Requests), Replicas: *replicas}
	if *replicas {
		cfg.Replicas = replay.DefaultReplicas(w.Span())
		rr, err := replay.RunReplicas(context.Background(), cfg, w)
		if err != nil {
			fmt.Fprintln(os.Stderr, "campaign replay:", err)
			return 2
		}
		for _, r := range rr.Results {
			rep.Checks += r.InvariantChecks
		}
		rep.Violations = rr.Violations()
	} else {
		cfg.Policies = []replay.Policy{replay.PlacementHard, replay.PlacementSoft, replay.PlacementOff}
		r, err := replay.Run(context.Background(), cfg, w)
		if err != nil {
			fmt.Fprintln(os.Stderr, "campaign replay:", err)
			return 2
		}
		for _, res := range r.Results {
			rep.Checks += res.InvariantChecks
		}
		rep.Violations = r.Violations()
	}
	fmt.Fprintf(os.Stderr, "replay seed %d (replicas %v): %d requests, %d invariant checks, %d violations\n",
		*seed, *replicas, rep.Requests, rep.Checks, len(rep.Violations))
	for _, v := range rep.Violations {
		fmt.Fprintln(os.Stderr, "  ", v)
	}
	b, _ := json.Marshal(rep)
	fmt.Println(string(b))
	if len(rep.Violations) > 0 {
		return 1
	}
	return 0
}
