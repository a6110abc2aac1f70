// Command replay runs the deterministic discrete-event replay of package
// replay: one agentic workload (generated, or read from a JSONL trace)
// under every routing policy, side by side, and writes the report
// (report.md) and its plot (replay.svg) to an output directory. The same
// flags and seed give byte-identical outputs.
//
//	go run ./cmd/replay                                  # the default run
//	go run ./cmd/replay -sessions 100 -mode open -out /tmp/r
//	go run ./cmd/replay -write-trace /tmp/w.jsonl        # also save the workload
//	go run ./cmd/replay -trace my.jsonl                  # replay your own trace
//	go run ./cmd/replay -replicas 1,3,5                  # router replicas: replicas.md, replicas.svg
//
// With -replicas, R router replicas behind a random load balancer are
// compared under the consistency policies (none, best-effort, gossip-lww,
// claims; see the replay package's "Router replicas"), for each R listed,
// and the report goes to replicas.md and replicas.svg.
//
// The trace format is one replay.Request per line (see the replay package
// documentation).
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"time"

	"github.com/placementlab/placement/replay"
)

func main() {
	if err := run(context.Background(), os.Args[1:], os.Stdout); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			os.Exit(2)
		}
		fmt.Fprintln(os.Stderr, "replay:", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, args []string, stdout io.Writer) error {
	ctx, stop := signal.NotifyContext(ctx, os.Interrupt)
	defer stop()
	cfg, wp := replay.DefaultConfig(), replay.DefaultWorkload()
	fs := flag.NewFlagSet("replay", flag.ContinueOnError)
	fs.IntVar(&cfg.Workers, "workers", cfg.Workers, "workers at the start")
	fs.IntVar(&cfg.Ranks, "ranks", cfg.Ranks, "data-parallel ranks per worker")
	fs.IntVar(&cfg.CacheBlocks, "cache-blocks", cfg.CacheBlocks, "prefix cache capacity per rank, in blocks")
	fs.IntVar(&cfg.BlockTokens, "block", cfg.BlockTokens, "tokens per cache block")
	fs.Float64Var(&cfg.PrefillRate, "prefill-rate", cfg.PrefillRate, "prefill tokens per second per rank")
	fs.Float64Var(&cfg.AmbiguousProb, "ambiguous", cfg.AmbiguousProb, "probability that a dispatch's outcome is lost")
	fs.Float64Var(&cfg.OverloadFactor, "overload-factor", cfg.OverloadFactor, "placement soft: a rank is overloaded above this many times the mean waiting requests (0: never)")
	fs.IntVar(&cfg.OverloadSlack, "overload-slack", cfg.OverloadSlack, "placement soft: plus this many waiting requests")
	fs.DurationVar(&cfg.IdleTTL, "idle-ttl", cfg.IdleTTL, "placement: a binding's idle TTL (0: the core's default)")
	fs.DurationVar(&cfg.CostSlack, "cost-slack", cfg.CostSlack, "placement: tolerance on the estimated time to first token (placing within it of the cheapest rank; soft moves a binding beyond it)")
	fs.IntVar(&wp.Sessions, "sessions", wp.Sessions, "sessions to generate")
	fs.Float64Var(&wp.SessionRate, "rate", wp.SessionRate, "session arrivals per second")
	seed := fs.Uint64("seed", 1, "seed of the workload and the simulation")
	mode := fs.String("mode", "closed", "closed (think time after each response) or open (timestamps)")
	churn := fs.Bool("churn", true, "apply the default membership changes (replay.DefaultChurn)")
	policies := fs.String("policies", "", "comma-separated policies (default: all)")
	out := fs.String("out", filepath.Join("benchmarks", "results", "replay"), "output directory")
	trace := fs.String("trace", "", "replay this JSONL trace instead of generating a workload")
	writeTrace := fs.String("write-trace", "", "also write the workload as a JSONL trace to this file")
	replicas := fs.String("replicas", "", "comma-separated router replica counts: compare the consistency policies instead of the routing policies")
	consistency := fs.String("consistency", "", "with -replicas: comma-separated consistency policies (default: all)")
	replicaMode := fs.String("replica-mode", "placement-hard", "with -replicas: the placement policy every replica runs (placement-hard or placement-soft)")
	syncDelay := fs.Duration("sync-delay", -1, "with -replicas: best-effort's and gossip's message delay (default 100ms)")
	storeLatency := fs.Duration("store-latency", -1, "with -replicas: claims' store round trip (default 5ms)")
	eventDelay := fs.Duration("event-delay", -1, "with -replicas: claims' watch event delay (default 50ms)")
	storeDown := fs.Duration("store-down", -1, "with -replicas: how long claims' store is unreachable, from half the workload's span (default 2m; 0: never)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("unexpected arguments: %v", fs.Args())
	}
	cfg.Seed, wp.Seed = *seed, *seed
	switch *mode {
	case "closed":
		cfg.Loop = replay.Closed
	case "open":
		cfg.Loop = replay.Open
	default:
		return fmt.Errorf("-mode must be closed or open, not %q", *mode)
	}
	if *policies != "" {
		cfg.Policies = nil
		for _, name := range strings.Split(*policies, ",") {
			p, err := replay.ParsePolicy(strings.TrimSpace(name))
			if err != nil {
				return err
			}
			cfg.Policies = append(cfg.Policies, p)
		}
	}
	var w *replay.Workload
	var err error
	if *trace != "" {
		f, err := os.Open(*trace)
		if err != nil {
			return err
		}
		w, err = replay.ReadTrace(f)
		f.Close()
		if err != nil {
			return err
		}
	} else if w, err = replay.Generate(wp); err != nil {
		return err
	}
	if *writeTrace != "" {
		if err := writeFile(*writeTrace, w.WriteTrace); err != nil {
			return err
		}
	}
	if *churn {
		cfg.Churn = replay.DefaultChurn(cfg.Workers, w.Span())
	}
	if *replicas != "" {
		rc := replay.DefaultReplicas(w.Span())
		rc.Counts = nil
		for _, f := range strings.Split(*replicas, ",") {
			var n int
			if _, err := fmt.Sscan(strings.TrimSpace(f), &n); err != nil {
				return fmt.Errorf("-replicas: %q is not a count", f)
			}
			rc.Counts = append(rc.Counts, n)
		}
		if *consistency != "" {
			rc.Policies = nil
			for _, name := range strings.Split(*consistency, ",") {
				c, err := replay.ParseConsistency(strings.TrimSpace(name))
				if err != nil {
					return err
				}
				rc.Policies = append(rc.Policies, c)
			}
		}
		if rc.Mode, err = replay.ParsePolicy(*replicaMode); err != nil {
			return err
		}
		for _, d := range []struct {
			flag time.Duration
			to   *time.Duration
		}{{*syncDelay, &rc.SyncDelay}, {*storeLatency, &rc.StoreLatency}, {*eventDelay, &rc.EventDelay}, {*storeDown, &rc.StoreDownFor}} {
			if d.flag >= 0 {
				*d.to = d.flag
			}
		}
		cfg.Replicas = rc
		return runReplicas(ctx, cfg, w, wp, *trace, args, *out, stdout)
	}
	start := time.Now()
	rep, err := replay.Run(ctx, cfg, w)
	if err != nil {
		return err
	}
	elapsed := time.Since(start)
	if *trace == "" {
		rep.Workload = &wp
	} else {
		rep.Trace = filepath.Base(*trace)
	}
	rep.Command = strings.TrimSpace("go run ./cmd/replay " + strings.Join(args, " "))
	if err := os.MkdirAll(*out, 0o755); err != nil {
		return err
	}
	const plotName = "replay.svg"
	if err := writeFile(filepath.Join(*out, plotName), rep.WritePlot); err != nil {
		return err
	}
	if err := writeFile(filepath.Join(*out, "report.md"), func(f io.Writer) error { return rep.WriteMarkdown(f, plotName) }); err != nil {
		return err
	}
	fmt.Fprint(stdout, rep.Table())
	for _, t := range rep.Targets {
		v := "met"
		if !t.Met {
			v = "MISSED"
		}
		fmt.Fprintf(stdout, "%-6s %s: %s\n", v, t.Name, t.Detail)
	}
	fmt.Fprintf(stdout, "wrote %s and %s (%d requests, %d policies, %.1f s)\n",
		filepath.Join(*out, "report.md"), filepath.Join(*out, plotName), rep.Requests, len(rep.Results), elapsed.Seconds())
	return nil
}

func writeFile(name string, write func(io.Writer) error) error {
	f, err := os.Create(name)
	if err != nil {
		return err
	}
	if err := write(f); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

// runReplicas runs and writes the replicated comparison (-replicas).
func runReplicas(ctx context.Context, cfg replay.Config, w *replay.Workload, wp replay.WorkloadParams, trace string, args []string, out string, stdout io.Writer) error {
	start := time.Now()
	rep, err := replay.RunReplicas(ctx, cfg, w)
	if err != nil {
		return err
	}
	elapsed := time.Since(start)
	if trace == "" {
		rep.Workload = &wp
	} else {
		rep.Trace = filepath.Base(trace)
	}
	rep.Command = strings.TrimSpace("go run ./cmd/replay " + strings.Join(args, " "))
	if err := os.MkdirAll(out, 0o755); err != nil {
		return err
	}
	const plotName = "replicas.svg"
	if err := writeFile(filepath.Join(out, plotName), rep.WritePlot); err != nil {
		return err
	}
	if err := writeFile(filepath.Join(out, "replicas.md"), func(f io.Writer) error { return rep.WriteMarkdown(f, plotName) }); err != nil {
		return err
	}
	fmt.Fprint(stdout, rep.Table())
	fmt.Fprintf(stdout, "wrote %s and %s (%d requests, %d runs, %.1f s)\n",
		filepath.Join(out, "replicas.md"), filepath.Join(out, plotName), rep.Requests, len(rep.Results), elapsed.Seconds())
	return nil
}
