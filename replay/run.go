package replay

import (
	"context"
	"slices"
	"time"

	"golang.org/x/sync/errgroup"
)

// Result is one policy's outcome on the workload.
type Result struct {
	Policy Policy
	// Served counts the requests answered (each once; retries of lost or
	// refused dispatches are not counted again).
	Served int
	// PromptTokens and CachedTokens: prompt tokens of the answered
	// dispatches, and how many of them the rank's prefix cache held.
	// HitRatio is CachedTokens / PromptTokens (token-weighted).
	PromptTokens, CachedTokens int64
	HitRatio                   float64
	// PrefillTokens: the uncached tokens every rank prefilled, answered
	// or not.
	PrefillTokens int64
	// LaterCalls counts calls whose conversation had an earlier answered
	// call; Reused those whose rank still held all of that call's prompt
	// blocks (the conversation's previous context). TurnReuse is
	// Reused / LaterCalls.
	LaterCalls, Reused int
	TurnReuse          float64
	// TTFTp50 and TTFTp99: the time-to-first-token proxy of the answered
	// requests (from the client's send, waits for refusals and restarts
	// included, to the end of the prefill: queueing plus prefill; the
	// client's timeout on an ambiguous dispatch is not counted).
	TTFTp50, TTFTp99 time.Duration
	// Imbalance is the busiest worker's load over the mean: in each
	// 5-minute window, the largest ratio of a worker's dispatches to its
	// fair share of the window's dispatches (each dispatch counts
	// 1/(workers up) to every worker up), averaged over the windows
	// weighted by their dispatches. WorkerRequests are the workers'
	// dispatch counts over the whole run.
	Imbalance      float64
	WorkerRequests []int
	// Moves: for placement, the layer's moved bindings (Stats.Moves); for
	// consistent hashing and sticky least-loaded, sessions sent to
	// another rank than their last; 0 for the others.
	Moves int
	// Unpinned: placement's requests routed unpinned other than by mode
	// off (Stats.Unpinned); Quarantines: placement's quarantines opened;
	// Resolved: those the simulated resolver settled; Hits: the layer's
	// hits.
	Unpinned, Quarantines, Resolved, Hits int
	// Ambiguous: dispatches whose outcome was lost; Refused: dispatches
	// refused before reaching a worker (sent again); Lost: answers lost to
	// a worker's restart (sent again).
	Ambiguous, Refused, Lost int
	// End is the simulated time when the last request was answered.
	End time.Duration
	// Targets is the number of ranks (caches) at the start.
	Targets int
	// Violations are the invariant violations the simulation found (the
	// package doc's "Invariants"; placement policies only), the first
	// MaxViolations of them in the order found, each a sentence that
	// begins with its invariant's name (InvLeaseLeaked, InvDepartedWorker,
	// InvTwoWorkers) and names the request, its session, the simulated
	// time and the workers. ViolationCount counts them all.
	Violations     []string
	ViolationCount int
	// InvariantChecks counts the checks made: at each placement dispatch
	// (the worker, and for an accepted one the key's binding) and, when
	// the run ends, the turns and each layer's entries. Zero for a policy
	// without the affinity layer.
	InvariantChecks int
}

// Run simulates w under each of cfg's policies, concurrently (errgroup),
// each from empty caches with the same requests, the same seed and its own
// clock, affinity layer and workers. The results come in cfg.Policies'
// order, so the same cfg and w give the same Report.
func Run(ctx context.Context, cfg Config, w *Workload) (*Report, error) {
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	if err := w.validate(); err != nil {
		return nil, err
	}
	results := make([]*Result, len(cfg.Policies))
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(max(1, min(len(cfg.Policies), 4)))
	for k, p := range cfg.Policies {
		g.Go(func() error {
			s, err := newSim(&cfg, p, w)
			if err != nil {
				return err
			}
			r, err := s.run(gctx)
			if err != nil {
				return err
			}
			results[k] = r
			return nil
		})
	}
	if err := g.Wait(); err != nil {
		return nil, err
	}
	rep := &Report{Config: cfg, Requests: len(w.Requests)}
	for _, r := range results {
		rep.Results = append(rep.Results, *r)
	}
	rep.Targets = evaluate(rep.Results)
	return rep, nil
}

// validate checks a workload as ReadTrace checks a trace's lines, without
// changing it: a request with a Prompt must give its InputTokens.
func (w *Workload) validate() error {
	if w == nil || len(w.Requests) == 0 {
		return &ParamError{Field: "Workload", Reason: "no requests"}
	}
	seen := make(map[int]bool, len(w.Requests))
	for i := range w.Requests {
		r := w.Requests[i] // a copy: checkRequest fills InputTokens
		if len(r.Prompt) > 0 && r.InputTokens == 0 {
			return &TraceError{Line: i + 1, Reason: "input_tokens not set"}
		}
		if reason := checkRequest(&r, seen); reason != "" {
			return &TraceError{Line: i + 1, Reason: reason}
		}
		seen[r.ID] = true
	}
	return nil
}

// percentile returns the nearest-rank q-quantile of ds (sorting ds).
func percentile(ds []time.Duration, q float64) time.Duration {
	if len(ds) == 0 {
		return 0
	}
	slices.Sort(ds)
	k := int(q*float64(len(ds))+0.999999) - 1
	return ds[min(max(k, 0), len(ds)-1)]
}
