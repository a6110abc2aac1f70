// Command router is the reference router on the placement kit: the code a
// router author copies. Its placement handling, between the
// "placement: begin" and "placement: end" markers below, is the kit's
// whole HTTP router in one constructor (router.NewHTTP: the affinity
// layer, the request driver behind an HTTP proxy, membership kept from the
// workers' health checks with passive ejection, the quarantine resolver
// asking the workers' attempt ledgers (impl/resolver), and the connect,
// response-header and read timeouts) and Prometheus metrics on /metrics
// (impl/affinityprom); lines_test.go keeps it at 60 lines or fewer.
//
//	go run ./cmd/router -demo                  # fake workers, a load generator, a live line, a summary
//	go run ./cmd/router -demo -replicas 3      # three router replicas on an embedded three-member etcd
//	go run ./cmd/router -workers a=http://10.0.0.5:8000,b=http://10.0.0.6:8000 -listen :8080
//	go run ./cmd/router -workers ... -store etcd=10.0.0.9:2379 -replica r1   # one replica of several
//
// -store picks where the router replicas share their sessions' bindings
// (claims, impl/claims): local (the default: one router process, no
// store), embedded (an etcd member inside this process), etcd=host:port,...
// (an etcd cluster) or dir=/path (a directory the router processes of one
// host share). -replica names this replica among those sharing the store.
// A worker is registered in the store by the first replica whose health
// check sees it, with the identity its health check reports; in
// production let the worker's own agent register it (its registration
// then lives as long as the worker: docs/claims.md, "Who registers"), and
// the replicas' registrations with its identity change nothing.
//
// With -demo it starts fake workers on loopback (two with data-parallel
// ranks, one that sometimes answers only after the dispatch deadline, one
// that sometimes refuses with 503, one that restarts with a new identity
// halfway through), each with the resolver's attempt ledger, and a load
// generator of multi-turn sessions; it prints a line a second (hit rate,
// quarantines open and settled, unpinned fallbacks) and a summary, and
// exits with status 1 if the summary shows something wrong: no hits, a hit
// rate under half the later turns, quarantines still open past their TTL,
// requests still counted in flight, or no restart seen.
//
// A worker's health check (GET <url>/health) answers 2xx with its
// identity and ranks: {"identity":"boot-7","first_rank":0,"ranks":2} (see
// router.Health); its attempt ledger answers GET <url>/attempts/{id}
// (resolver.Ledger.Handler).
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/signal"
	"strings"
	"time"

	"github.com/placementlab/placement/impl/affinity"
	"github.com/placementlab/placement/impl/affinityprom"
	"github.com/placementlab/placement/impl/claims"
	"github.com/placementlab/placement/impl/resolver"
	"github.com/placementlab/placement/impl/router"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// options are the command's flags.
type options struct {
	demo            bool
	duration        time.Duration
	listen          string
	workers         string
	model           string
	clients         int
	seed            uint64
	maxInFlight     int
	dispatchTimeout time.Duration
	quarantineTTL   time.Duration
	every           time.Duration // health checks and resolver passes
	live            time.Duration // the live line's period
	store           string        // -store
	replica         string        // -replica
	replicas        int           // -replicas (the demo's router replicas)
}

func defaults() options {
	return options{duration: 10 * time.Second, listen: "127.0.0.1:8080", model: "demo", clients: 16, seed: 1,
		maxInFlight: 8, dispatchTimeout: 200 * time.Millisecond, quarantineTTL: 3 * time.Second,
		every: 100 * time.Millisecond, live: time.Second, replica: "r1", replicas: 1}
}

func main() {
	o := defaults()
	flag.BoolVar(&o.demo, "demo", false, "run fake workers and a load generator against the router")
	flag.DurationVar(&o.duration, "duration", o.duration, "how long the demo's load runs")
	flag.StringVar(&o.listen, "listen", o.listen, "the router's address (without -demo)")
	flag.StringVar(&o.workers, "workers", "", "the workers, id=url,id=url (without -demo)")
	flag.StringVar(&o.model, "model", o.model, "the namespace's model")
	flag.IntVar(&o.clients, "clients", o.clients, "the demo's concurrent clients")
	flag.Uint64Var(&o.seed, "seed", o.seed, "the demo's seed")
	flag.IntVar(&o.maxInFlight, "max-in-flight", o.maxInFlight, "requests in flight at which a target is overloaded (0: never)")
	flag.DurationVar(&o.dispatchTimeout, "dispatch-timeout", o.dispatchTimeout, "how long a placing dispatch waits for the worker's first answer")
	flag.DurationVar(&o.quarantineTTL, "quarantine-ttl", o.quarantineTTL, "how long an ambiguous first turn's quarantine lasts at most")
	flag.DurationVar(&o.every, "every", o.every, "the period of health checks and resolver passes")
	flag.StringVar(&o.store, "store", "", "where replicas share bindings: local, embedded, etcd=host:port,... or dir=/path (default local; embedded etcd for -demo -replicas N > 1)")
	flag.StringVar(&o.replica, "replica", o.replica, "this router replica's name among those sharing the store")
	flag.IntVar(&o.replicas, "replicas", o.replicas, "the demo's router replicas (more than 1: on an embedded three-member etcd, behind a random load balancer)")
	flag.Parse()
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	var err error
	switch {
	case o.demo && o.replicas > 1:
		err = runReplicasDemo(ctx, o, os.Stdout)
	case o.demo:
		err = runDemo(ctx, o, os.Stdout)
	default:
		err = serve(ctx, o, os.Stderr)
	}
	if err != nil && !errors.Is(err, context.Canceled) {
		fmt.Fprintln(os.Stderr, "router:", err)
		os.Exit(1)
	}
}

// serve runs the router against the -workers until ctx ends.
func serve(ctx context.Context, o options, log io.Writer) error {
	eps, err := parseWorkers(o.workers)
	if err != nil {
		return err
	}
	spec, err := parseStore(o.store)
	if err != nil {
		return err
	}
	st, err := openStore(ctx, spec, o.replica)
	if err != nil {
		return err
	}
	defer func() { _ = st.close() }()
	k, err := newKit(eps, st.store, o)
	if err != nil {
		return err
	}
	defer k.Close()
	ln, err := net.Listen("tcp", o.listen)
	if err != nil {
		return err
	}
	fmt.Fprintf(log, "router: listening on %s, %d workers, store %s (replica %s)\n", ln.Addr(), len(eps), spec.kind, o.replica)
	return serveUntil(ctx, k, ln)
}

// parseWorkers reads "id=url,id=url" (a bare url is its own id).
func parseWorkers(s string) ([]router.HTTPWorker, error) {
	var out []router.HTTPWorker
	for _, f := range strings.Split(s, ",") {
		if f = strings.TrimSpace(f); f == "" {
			continue
		}
		id, raw, ok := strings.Cut(f, "=")
		if !ok {
			id, raw = f, f
		}
		u, err := url.Parse(raw)
		if err != nil || u.Scheme == "" || u.Host == "" {
			return nil, fmt.Errorf("-workers: %q is not id=http://host:port", f)
		}
		out = append(out, router.HTTPWorker{ID: id, URL: u})
	}
	if len(out) == 0 {
		return nil, errors.New("-workers: no workers (or run with -demo)")
	}
	return out, nil
}

// kit is the router: the kit's HTTP router and the handler served (the
// proxy, and /metrics).
type kit struct {
	*router.HTTP
	handler http.Handler
}

// placement: begin

// newKit is the router's placement handling: the kit's whole HTTP router
// (router.NewHTTP: the layer, the driver, the proxy, the health checks
// with passive ejection, the quarantine resolver, and the timeouts), and
// its metrics on /metrics. With a store (nil: the local core alone) the
// layer runs over it as replica o.replica.
func newKit(workers []router.HTTPWorker, store claims.Store, o options) (*kit, error) {
	var replicas *affinity.Replicas
	if store != nil {
		replicas = &affinity.Replicas{Store: store, Name: o.replica}
	}
	r, err := router.NewHTTP(router.HTTPConfig{
		Layer:     affinity.Config{DispatchTimeout: o.dispatchTimeout, QuarantineTTL: o.quarantineTTL, Replicas: replicas},
		Workers:   workers,
		Namespace: func(*http.Request) affinity.Namespace { return affinity.Namespace{Model: o.model} },
		Driver:    router.Config{MaxInFlight: o.maxInFlight},
		Interval:  o.every,
		Resolver:  resolver.Config{MinBackoff: o.every},
	})
	if err != nil {
		return nil, err
	}
	reg := prometheus.NewRegistry()
	reg.MustRegister(affinityprom.NewCollector(r.Layer(), affinityprom.Options{}),
		prometheus.NewCounterFunc(prometheus.CounterOpts{Name: "placement_router_stream_cuts_total",
			Help: "Responses aborted because the worker's stream was cut after the headers."},
			func() float64 { return float64(r.Proxy().Stats().Cut) }),
		prometheus.NewCounterFunc(prometheus.CounterOpts{Name: "placement_router_ejections_total",
			Help: "Workers failed by passive ejection (refusals or failed connects in a row)."},
			func() float64 { return float64(r.Health().Stats().Ejections) }))
	mux := http.NewServeMux()
	mux.Handle("GET /metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{}))
	mux.Handle("/", r.Proxy())
	return &kit{HTTP: r, handler: mux}, nil
}

// serveUntil serves k on ln until ctx ends: a health pass, then the
// server, the health checks and the resolver (router.HTTP.Serve). The
// caller closes k after it returns.
func serveUntil(ctx context.Context, k *kit, ln net.Listener) error {
	return k.Serve(ctx, ln, k.handler)
}

// placement: end
