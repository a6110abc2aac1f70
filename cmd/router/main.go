// Command router is the reference router on the placement kit: the code a
// router author copies. Its placement handling, between the
// "placement: begin" and "placement: end" markers below, is the affinity
// layer, the request driver behind an HTTP proxy (impl/router), membership
// kept from the workers' health checks, the quarantine resolver asking the
// workers' attempt ledgers (impl/resolver) and Prometheus metrics on
// /metrics (impl/affinityprom); lines_test.go keeps it at 60 lines or
// fewer.
//
//	go run ./cmd/router -demo                  # fake workers, a load generator, a live line, a summary
//	go run ./cmd/router -workers a=http://10.0.0.5:8000,b=http://10.0.0.6:8000 -listen :8080
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
	"github.com/placementlab/placement/impl/httpoutcome"
	"github.com/placementlab/placement/impl/resolver"
	"github.com/placementlab/placement/impl/router"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"golang.org/x/sync/errgroup"
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
}

func defaults() options {
	return options{duration: 10 * time.Second, listen: "127.0.0.1:8080", model: "demo", clients: 16, seed: 1,
		maxInFlight: 8, dispatchTimeout: 200 * time.Millisecond, quarantineTTL: 3 * time.Second,
		every: 100 * time.Millisecond, live: time.Second}
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
	flag.Parse()
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	var err error
	if o.demo {
		err = runDemo(ctx, o, os.Stdout)
	} else {
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
	k, err := newKit(eps, o)
	if err != nil {
		return err
	}
	defer k.close()
	ln, err := net.Listen("tcp", o.listen)
	if err != nil {
		return err
	}
	fmt.Fprintf(log, "router: listening on %s, %d workers\n", ln.Addr(), len(eps))
	return serveUntil(ctx, k, ln)
}

// serveUntil serves k's handler on ln and runs k until ctx ends.
func serveUntil(ctx context.Context, k *kit, ln net.Listener) error {
	srv := &http.Server{Handler: k.handler, ReadHeaderTimeout: 10 * time.Second}
	g, gctx := errgroup.WithContext(ctx)
	g.Go(func() error { return k.run(gctx) })
	g.Go(func() error {
		<-gctx.Done()
		sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		return srv.Shutdown(sctx)
	})
	if err := srv.Serve(ln); !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	return g.Wait()
}

// parseWorkers reads "id=url,id=url" (a bare url is its own id).
func parseWorkers(s string) ([]worker, error) {
	var out []worker
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
		out = append(out, worker{id: id, base: u})
	}
	if len(out) == 0 {
		return nil, errors.New("-workers: no workers (or run with -demo)")
	}
	return out, nil
}

// worker is a worker's id and base URL.
type worker struct {
	id   string
	base *url.URL
}

// placement: begin

// kit is the router's placement handling.
type kit struct {
	layer    *affinity.Layer
	driver   *router.Driver
	health   *router.Health
	resolver *resolver.Resolver
	handler  http.Handler    // the proxy, and /metrics
	tr       *http.Transport // to the workers
}

func newKit(workers []worker, o options) (*kit, error) {
	layer, err := affinity.New(affinity.Config{DispatchTimeout: o.dispatchTimeout, QuarantineTTL: o.quarantineTTL})
	if err != nil {
		return nil, err
	}
	k := &kit{layer: layer, tr: &http.Transport{IdleConnTimeout: 4 * time.Second, MaxIdleConnsPerHost: 64}}
	bases, strs, eps := map[string]*url.URL{}, map[string]string{}, []router.Endpoint{}
	for _, w := range workers {
		bases[w.id], strs[w.id] = w.base, w.base.String()
		eps = append(eps, router.Endpoint{ID: w.id, URL: w.base.JoinPath("health").String()})
	}
	upstream := func(t affinity.Target) *url.URL { return bases[t.Worker] }
	if k.driver, err = router.New(router.Config{Layer: layer, MaxInFlight: o.maxInFlight}); err != nil {
		return nil, errors.Join(err, k.close())
	}
	client := &http.Client{Transport: k.tr}
	if k.health, err = router.NewHealth(router.HealthConfig{Layer: layer, Endpoints: eps, Client: client, Interval: o.every}); err != nil {
		return nil, errors.Join(err, k.close())
	}
	status := resolver.HTTPStatus(client, func(t affinity.Target) string { return strs[t.Worker] },
		resolver.HTTPConfig{Now: layer.Now, DispatchTimeout: o.dispatchTimeout})
	if k.resolver, err = resolver.New(resolver.Config{Source: layer, Status: status, Interval: o.every, MinBackoff: o.every}); err != nil {
		return nil, errors.Join(err, k.close())
	}
	reg := prometheus.NewRegistry()
	reg.MustRegister(affinityprom.NewCollector(layer, affinityprom.Options{}))
	mux := http.NewServeMux()
	mux.Handle("GET /metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{}))
	mux.Handle("/", &router.Proxy{Driver: k.driver, Upstream: upstream, Client: &httpoutcome.Client{Transport: k.tr},
		Namespace: func(*http.Request) affinity.Namespace { return affinity.Namespace{Model: o.model} }})
	k.handler = mux
	k.health.Pass(context.Background()) // the members, before the first request
	return k, nil
}

// run keeps the membership from the health checks and settles quarantines
// until ctx ends.
func (k *kit) run(ctx context.Context) error {
	g, ctx := errgroup.WithContext(ctx)
	g.Go(func() error { return k.health.Run(ctx) })
	g.Go(func() error { return k.resolver.Run(ctx) })
	if err := g.Wait(); !errors.Is(err, context.Canceled) {
		return err
	}
	return nil
}

func (k *kit) close() error {
	k.tr.CloseIdleConnections()
	return k.layer.Close()
}

// placement: end
