// Command claimsfig measures the cross-replica claims layer (impl/replica
// over impl/claims/etcdstore) on the embedded etcd
// (impl/claims/etcdstore/embedded) and writes the figures of the claims
// issue: the first-turn claim latency, the cost of a cached turn, claims
// per second with several replicas, and the time until every replica
// agrees with the store after a member restart. It writes report.md (the
// tables, the exact command, the machine) and two plots (first-turn.svg,
// cluster.svg) to an output directory.
//
//	go run ./benchmarks/cmd/claimsfig                      # the default run, about a minute
//	go run ./benchmarks/cmd/claimsfig -first 200 -restarts 2 -out /tmp/c
//
// Every part runs in the configuration a user gets without asking (the
// replica's, etcdstore's and the embedded server's defaults; each replica
// a client of its own). The latency figures run on a one-member cluster;
// the agreement figure on a three-member one. Figures are measured, not
// asserted: on a shared machine read them as the ratios beside them (each
// baseline runs in the same process, interleaved where it can be).
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

	"github.com/placementlab/placement/impl/claims/etcdstore/embedded"
)

func main() {
	if err := run(context.Background(), os.Args[1:], os.Stdout); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			os.Exit(2)
		}
		fmt.Fprintln(os.Stderr, "claimsfig:", err)
		os.Exit(1)
	}
}

// options are the command's flags.
type options struct {
	replicas     int
	first        int
	cachedOps    int
	cachedRounds int
	rateFor      time.Duration
	inFlight     int
	restarts     int
	sessions     int
	fresh        int
	downtime     time.Duration
	settle       time.Duration
	timeout      time.Duration
	out          string
	rateOnly     bool
	profile      string
}

func parse(args []string) (*options, error) {
	o := &options{}
	fs := flag.NewFlagSet("claimsfig", flag.ContinueOnError)
	fs.IntVar(&o.replicas, "replicas", 3, "replicas (goroutines, each with its own etcd client): the claims/s figure runs 1 to this many, the agreement figure this many")
	fs.IntVar(&o.first, "first", 1000, "first turns timed per series")
	fs.IntVar(&o.cachedOps, "cached-ops", 500000, "cached turns per round")
	fs.IntVar(&o.cachedRounds, "cached-rounds", 5, "rounds of cached turns (replica and core alternating)")
	fs.DurationVar(&o.rateFor, "rate-for", 4*time.Second, "how long each claims/s point runs")
	fs.IntVar(&o.inFlight, "in-flight", 4, "claims/s: turns in flight per replica")
	fs.IntVar(&o.restarts, "restarts", 6, "member restarts timed (the leader, then a follower, alternating)")
	fs.IntVar(&o.sessions, "sessions", 32, "sessions every replica must agree on")
	fs.IntVar(&o.fresh, "fresh", 8, "new sessions whose first turns begin on every replica as each member stops (added to the set)")
	fs.DurationVar(&o.downtime, "downtime", 2*time.Second, "how long a stopped member stays down (the replicas serve meanwhile)")
	fs.DurationVar(&o.settle, "settle", time.Second, "after a restart, how long the replicas are watched before agreement is taken")
	fs.DurationVar(&o.timeout, "timeout", 30*time.Second, "give up when the replicas do not agree within this")
	fs.StringVar(&o.out, "out", filepath.Join("benchmarks", "results", "claims"), "output directory")
	fs.BoolVar(&o.rateOnly, "rate-only", false, "measure only etcd's own transaction rate and claims/s (one member), print their tables, write no report")
	fs.StringVar(&o.profile, "profile", "", "write CPU, mutex and block profiles of each claims/s phase on etcd to this directory (claims-<replicas>-cpu.pprof, ...)")
	if err := fs.Parse(args); err != nil {
		return nil, err
	}
	switch {
	case fs.NArg() > 0:
		return nil, fmt.Errorf("unexpected arguments: %v", fs.Args())
	case o.replicas < 2:
		return nil, fmt.Errorf("-replicas must be at least 2, not %d", o.replicas)
	case o.first < 1 || o.cachedOps < 1 || o.cachedRounds < 1 || o.inFlight < 1 || o.restarts < 1 || o.sessions < 1:
		return nil, errors.New("-first, -cached-ops, -cached-rounds, -in-flight, -restarts and -sessions must be at least 1")
	case o.fresh < 0:
		return nil, errors.New("-fresh must not be negative")
	case o.rateFor <= 0 || o.downtime <= 0 || o.settle < 0 || o.timeout <= 0:
		return nil, errors.New("-rate-for, -downtime and -timeout must be positive, -settle not negative")
	}
	return o, nil
}

// results is everything one run measured.
type results struct {
	opts    *options
	args    []string
	started time.Time
	took    time.Duration
	load    string

	first  []*latencies
	cached *cachedResult
	rates  []*rateResult
	raws   []*rawResult // etcd's own transaction rate, each beside the claims row of the same in flight, then saturated
	agree  []*agreeResult
}

func run(ctx context.Context, args []string, stdout io.Writer) error {
	ctx, stop := signal.NotifyContext(ctx, os.Interrupt)
	defer stop()
	o, err := parse(args)
	if err != nil {
		return err
	}
	res := &results{opts: o, args: args, started: time.Now(), load: loadAverage()}
	step := func(what string) func() {
		t0 := time.Now()
		fmt.Fprintf(stdout, "claimsfig: %s ... ", what)
		return func() { fmt.Fprintf(stdout, "%v\n", time.Since(t0).Round(time.Millisecond)) }
	}

	done := step("one-member etcd")
	one, err := start(ctx, 1)
	if err != nil {
		return err
	}
	defer one.Close()
	done()
	if !o.rateOnly {
		done = step(fmt.Sprintf("first turns (%d per series)", o.first))
		if res.first, err = measureFirstTurns(ctx, one, o.first); err != nil {
			return err
		}
		done()
		done = step(fmt.Sprintf("cached turns (%d rounds of %d)", o.cachedRounds, o.cachedOps))
		if res.cached, err = measureCached(ctx, one, o.cachedOps, o.cachedRounds); err != nil {
			return err
		}
		done()
	}
	for n := 1; n <= o.replicas; n++ {
		done = step(fmt.Sprintf("etcd's own transactions, %d clients", n))
		raw, err := measureRaw(ctx, one, fmt.Sprintf("raw-%d/", n), n, o.inFlight, o.rateFor)
		if err != nil {
			return err
		}
		res.raws = append(res.raws, raw)
		done()
		done = step(fmt.Sprintf("claims/s, %d replicas on etcd", n))
		prof, err := startProfile(o.profile, fmt.Sprintf("claims-%d", n))
		if err != nil {
			return err
		}
		r, err := measureRate(ctx, etcdOpener(one, fmt.Sprintf("rate-%d/", n)), "etcd", n, o.inFlight, o.rateFor)
		if perr := prof.stop(); err == nil {
			err = perr
		}
		if err != nil {
			return err
		}
		res.rates = append(res.rates, r)
		done()
	}
	done = step("etcd's own transactions, saturated")
	raw, err := measureRaw(ctx, one, "raw-max/", o.replicas, 4*o.inFlight, o.rateFor)
	if err != nil {
		return err
	}
	res.raws = append(res.raws, raw)
	done()
	done = step(fmt.Sprintf("claims/s, %d replicas on memstore", o.replicas))
	r, err := measureRate(ctx, memOpener(), "memstore", o.replicas, o.inFlight, o.rateFor)
	if err != nil {
		return err
	}
	res.rates = append(res.rates, r)
	done()
	if err := one.Close(); err != nil {
		return err
	}
	if o.rateOnly {
		res.took = time.Since(res.started)
		fmt.Fprintf(stdout, "\nload average at the start %s; took %v\n\n%s", res.load, res.took.Round(time.Second), rateTables(res))
		return nil
	}

	done = step("three-member etcd")
	three, err := start(ctx, 3)
	if err != nil {
		return err
	}
	defer three.Close()
	done()
	done = step(fmt.Sprintf("agreement (%d restarts, %d sessions, %d replicas)", o.restarts, o.sessions, o.replicas))
	acfg := agreeConfig{replicas: o.replicas, sessions: o.sessions, fresh: o.fresh, restarts: o.restarts,
		downtime: o.downtime, settle: o.settle, timeout: o.timeout}
	if res.agree, err = measureAgreement(ctx, three, acfg); err != nil {
		return err
	}
	done()
	if err := three.Close(); err != nil {
		return err
	}
	res.took = time.Since(res.started)

	if err := os.MkdirAll(o.out, 0o755); err != nil {
		return err
	}
	md := report(res)
	if err := os.WriteFile(filepath.Join(o.out, "report.md"), []byte(md), 0o644); err != nil {
		return err
	}
	for _, p := range []struct {
		name string
		draw func(*results, io.Writer) error
	}{{"first-turn.svg", plotFirstTurn}, {"cluster.svg", plotCluster}} {
		if err := writeFile(filepath.Join(o.out, p.name), func(w io.Writer) error { return p.draw(res, w) }); err != nil {
			return err
		}
	}
	fmt.Fprint(stdout, summary(res))
	fmt.Fprintf(stdout, "wrote %s, first-turn.svg and cluster.svg in %s (took %v)\n", "report.md", o.out, res.took.Round(time.Second))
	return nil
}

// start runs an embedded cluster of members members with its defaults.
func start(ctx context.Context, members int) (*embedded.Cluster, error) {
	ctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	return embedded.Start(ctx, embedded.Config{Members: members})
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

// loadAverage returns /proc/loadavg's first three figures, or "".
func loadAverage() string {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return ""
	}
	f := strings.Fields(string(b))
	if len(f) < 3 {
		return ""
	}
	return strings.Join(f[:3], " ")
}

// cpuModel returns /proc/cpuinfo's first model name, or "".
func cpuModel() string {
	b, err := os.ReadFile("/proc/cpuinfo")
	if err != nil {
		return ""
	}
	for _, line := range strings.Split(string(b), "\n") {
		if k, v, ok := strings.Cut(line, ":"); ok && strings.TrimSpace(k) == "model name" {
			return strings.TrimSpace(v)
		}
	}
	return ""
}
