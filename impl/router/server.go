package router

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"time"

	"github.com/placementlab/placement/impl/affinity"
	"github.com/placementlab/placement/impl/httpoutcome"
	"github.com/placementlab/placement/impl/placement"
	"github.com/placementlab/placement/impl/resolver"
)

// Defaults of HTTPConfig's zero fields (the others are named where they
// are used).
const (
	// DefaultHealthPath is the path of a worker's health check, under its
	// base URL.
	DefaultHealthPath = "/health"
	// DefaultReadHeaderTimeout bounds reading a client's request headers.
	DefaultReadHeaderTimeout = 10 * time.Second
	// DefaultIdleTimeout bounds a client's idle keep-alive connection.
	DefaultIdleTimeout = 2 * time.Minute
	// DefaultIdleConnTimeout closes an idle connection to a worker, below
	// the usual engines' keep-alive (uvicorn's 5 s), so a request is never
	// written on a connection the worker is closing.
	DefaultIdleConnTimeout = 4 * time.Second
	// DefaultShutdownTimeout bounds the wait for requests in flight when
	// Serve's context ends.
	DefaultShutdownTimeout = 5 * time.Second
)

// HTTPWorker is a worker of an HTTP router.
type HTTPWorker struct {
	// ID is the worker's id in the layer.
	ID string
	// URL is the worker's base URL: a request's path is appended to it;
	// its health check is URL+HealthPath (see Health); its attempt ledger
	// answers at URL+"/attempts/{id}" (resolver.Ledger.Handler).
	URL *url.URL
	// Identity is used when the health check's answer carries none (see
	// Endpoint.Identity).
	Identity string
}

// HTTPConfig configures NewHTTP. Every zero field has a default.
type HTTPConfig struct {
	// Layer configures the affinity layer NewHTTP makes. Its
	// DispatchTimeout (placement.DefaultDispatchTimeout if zero) also
	// gives the transport's defaults below.
	Layer affinity.Config
	// Workers are the workers routed to (their membership is kept from
	// their health checks).
	Workers []HTTPWorker
	// Namespace returns a request's trusted namespace (Proxy.Namespace).
	Namespace func(*http.Request) affinity.Namespace
	// Driver configures the driver (MaxInFlight, MaxAttempts, Pipeline,
	// Allow, Candidates); its Layer is NewHTTP's.
	Driver Config
	// Interval is the period of the health checks and the resolver's
	// passes (DefaultHealthInterval if zero).
	Interval time.Duration
	// HealthPath is the health check's path (DefaultHealthPath if empty).
	// FailAfter, EjectAfter and OnChange are HealthConfig's.
	HealthPath            string
	FailAfter, EjectAfter int
	OnChange              func(Change)
	// Resolver configures the quarantine resolver: its Source and Status
	// are NewHTTP's (the workers' attempt ledgers, asked with
	// resolver.HTTPStatus); a zero Interval is Interval.
	Resolver resolver.Config
	// ConnectTimeout bounds getting a connection to a worker, apart from
	// the dispatch's deadline (httpoutcome.Client.ConnectTimeout, and the
	// transport's dialer): a connect that never completed is a refusal,
	// tried elsewhere. Zero: httpoutcome.DefaultConnectTimeout, at most
	// half the layer's DispatchTimeout.
	ConnectTimeout time.Duration
	// ResponseHeaderTimeout bounds the wait for a worker's response
	// headers, a later turn's too (it has no dispatch deadline): a worker
	// that hangs is then Ambiguous (504), the binding kept. Zero: the
	// layer's DispatchTimeout.
	ResponseHeaderTimeout time.Duration
	// IdleConnTimeout closes idle connections to workers
	// (DefaultIdleConnTimeout if zero).
	IdleConnTimeout time.Duration
	// ReadHeaderTimeout and IdleTimeout are the server's
	// (DefaultReadHeaderTimeout, DefaultIdleTimeout if zero); the body is
	// bounded by BodyReadTimeout (Proxy.BodyReadTimeout), not by the
	// server's ReadTimeout, which would also cut long streamed answers.
	ReadHeaderTimeout, IdleTimeout, BodyReadTimeout time.Duration
	// ShutdownTimeout bounds the wait for requests in flight when Serve's
	// context ends (DefaultShutdownTimeout if zero).
	ShutdownTimeout time.Duration
	// MaxBodyBytes, RankHeader and Done are the Proxy's.
	MaxBodyBytes int64
	RankHeader   string
	Done         func(r *http.Request, res Result, err error)
}

// HTTP is a whole HTTP router: the affinity layer, the driver, the Proxy
// over a transport with the timeouts of HTTPConfig, the health poller
// (with passive ejection) and the quarantine resolver. Serve it (or Run
// it beside a server of your own), then Close it.
type HTTP struct {
	cfg      HTTPConfig
	layer    *affinity.Layer
	driver   *Driver
	health   *Health
	resolver *resolver.Resolver
	proxy    *Proxy
	tr       *http.Transport
	close    sync.Once
	closeErr error
}

// NewHTTP returns the router cfg describes. Bad input (a worker without an
// id or a URL with a scheme and a host, an id given twice, a negative
// duration, an invalid layer or driver config) is an error matching
// ErrInvalidConfig (or the layer's own error), never a panic. The workers
// are not checked yet: Serve does a health pass before it serves.
func NewHTTP(cfg HTTPConfig) (*HTTP, error) {
	if err := cfg.defaults(); err != nil {
		return nil, err
	}
	eps := make([]Endpoint, len(cfg.Workers))
	bases := make(map[string]*url.URL, len(cfg.Workers))
	for i, w := range cfg.Workers {
		eps[i] = Endpoint{ID: w.ID, URL: w.URL.JoinPath(cfg.HealthPath).String(), Identity: w.Identity}
		bases[w.ID] = w.URL
	}
	layer, err := affinity.New(cfg.Layer)
	if err != nil {
		return nil, err
	}
	h := &HTTP{cfg: cfg, layer: layer, tr: &http.Transport{
		DialContext:           (&net.Dialer{Timeout: cfg.ConnectTimeout, KeepAlive: 30 * time.Second}).DialContext,
		ResponseHeaderTimeout: cfg.ResponseHeaderTimeout,
		IdleConnTimeout:       cfg.IdleConnTimeout,
		TLSHandshakeTimeout:   10 * time.Second,
		MaxIdleConnsPerHost:   64,
	}}
	dcfg := cfg.Driver
	dcfg.Layer = layer
	if h.driver, err = New(dcfg); err != nil {
		return nil, errors.Join(err, h.Close())
	}
	client := &http.Client{Transport: h.tr}
	if h.health, err = NewHealth(HealthConfig{Layer: layer, Endpoints: eps, Client: client, Interval: cfg.Interval,
		FailAfter: cfg.FailAfter, EjectAfter: cfg.EjectAfter, OnChange: cfg.OnChange}); err != nil {
		return nil, errors.Join(err, h.Close())
	}
	rcfg := cfg.Resolver
	rcfg.Source = layer
	// The zero HTTPConfig reads the resolver's clock (the layer's) and each
	// quarantine's DispatchedAt.
	rcfg.Status = resolver.HTTPStatus(client, func(t affinity.Target) string { return bases[t.Worker].String() },
		resolver.HTTPConfig{})
	if h.resolver, err = resolver.New(rcfg); err != nil {
		return nil, errors.Join(fmt.Errorf("%w: %w", ErrInvalidConfig, err), h.Close())
	}
	h.proxy = &Proxy{Driver: h.driver, Namespace: cfg.Namespace, Health: h.health,
		Upstream:        func(t affinity.Target) *url.URL { return bases[t.Worker] },
		Client:          &httpoutcome.Client{Transport: h.tr, ConnectTimeout: cfg.ConnectTimeout},
		RankHeader:      cfg.RankHeader,
		MaxBodyBytes:    cfg.MaxBodyBytes,
		BodyReadTimeout: cfg.BodyReadTimeout,
		Done:            cfg.Done}
	return h, nil
}

// defaults checks cfg and fills its zero fields.
func (cfg *HTTPConfig) defaults() error {
	bad := func(format string, args ...any) error {
		return fmt.Errorf("%w: "+format, append([]any{ErrInvalidConfig}, args...)...)
	}
	seen := map[string]bool{}
	for _, w := range cfg.Workers {
		switch {
		case w.ID == "" || w.URL == nil || w.URL.Scheme == "" || w.URL.Host == "":
			return bad("a worker needs an ID and a URL with a scheme and a host (%q)", w.ID)
		case seen[w.ID]:
			return bad("worker %q given twice", w.ID)
		}
		seen[w.ID] = true
	}
	for _, d := range []time.Duration{cfg.Layer.DispatchTimeout, cfg.Interval, cfg.ConnectTimeout, cfg.ResponseHeaderTimeout,
		cfg.IdleConnTimeout, cfg.ReadHeaderTimeout, cfg.IdleTimeout, cfg.BodyReadTimeout, cfg.ShutdownTimeout} {
		if d < 0 {
			return bad("a negative duration")
		}
	}
	dispatch := cfg.Layer.DispatchTimeout
	if dispatch == 0 {
		dispatch = placement.DefaultDispatchTimeout
	}
	orDefault := func(d *time.Duration, def time.Duration) {
		if *d == 0 {
			*d = def
		}
	}
	orDefault(&cfg.Interval, DefaultHealthInterval)
	orDefault(&cfg.ConnectTimeout, min(httpoutcome.DefaultConnectTimeout, dispatch/2))
	orDefault(&cfg.ResponseHeaderTimeout, dispatch)
	orDefault(&cfg.IdleConnTimeout, DefaultIdleConnTimeout)
	orDefault(&cfg.ReadHeaderTimeout, DefaultReadHeaderTimeout)
	orDefault(&cfg.IdleTimeout, DefaultIdleTimeout)
	orDefault(&cfg.BodyReadTimeout, DefaultBodyReadTimeout)
	orDefault(&cfg.ShutdownTimeout, DefaultShutdownTimeout)
	orDefault(&cfg.Resolver.Interval, cfg.Interval)
	if cfg.HealthPath == "" {
		cfg.HealthPath = DefaultHealthPath
	}
	if !strings.HasPrefix(cfg.HealthPath, "/") {
		cfg.HealthPath = "/" + cfg.HealthPath
	}
	return nil
}

// Layer returns the router's affinity layer.
func (h *HTTP) Layer() *affinity.Layer { return h.layer }

// Driver returns the router's driver (its Stats).
func (h *HTTP) Driver() *Driver { return h.driver }

// Health returns the router's health poller.
func (h *HTTP) Health() *Health { return h.health }

// Resolver returns the router's quarantine resolver.
func (h *HTTP) Resolver() *resolver.Resolver { return h.resolver }

// Proxy returns the router's handler: serve it under a mux of your own
// (beside /metrics) with Serve's handler argument, or with Server.
func (h *HTTP) Proxy() *Proxy { return h.proxy }

// Server returns an http.Server for handler with HTTPConfig's server
// timeouts: ReadHeaderTimeout and IdleTimeout (a request body is bounded
// by the Proxy's BodyReadTimeout; no WriteTimeout, which would cut long
// streamed answers).
func (h *HTTP) Server(handler http.Handler) *http.Server {
	return &http.Server{Handler: handler, ReadHeaderTimeout: h.cfg.ReadHeaderTimeout, IdleTimeout: h.cfg.IdleTimeout}
}

// Run keeps the membership from the health checks and settles quarantines
// until ctx ends; it returns ctx's error once both have stopped. Serve runs
// it; call it yourself only when you serve the Proxy with a server of
// your own (after a Health().Pass, so the workers are members before the
// first request).
func (h *HTTP) Run(ctx context.Context) error {
	var wg sync.WaitGroup
	wg.Go(func() { _ = h.health.Run(ctx) })
	wg.Go(func() { _ = h.resolver.Run(ctx) })
	wg.Wait()
	return ctx.Err()
}

// Serve checks the workers' health once (they join before the first
// request), then serves handler (nil: the Proxy) on ln with Server's
// timeouts and runs Run beside it, until ctx ends; then it shuts the
// server down (waiting up to ShutdownTimeout for requests in flight),
// stops Run and returns nil, or the server's error if it failed. Close
// the router after Serve returns.
func (h *HTTP) Serve(ctx context.Context, ln net.Listener, handler http.Handler) error {
	if handler == nil {
		handler = h.proxy
	}
	srv := h.Server(handler)
	h.health.Pass(ctx)
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var wg sync.WaitGroup
	wg.Go(func() { _ = h.Run(ctx) })
	shut := make(chan error, 1)
	go func() {
		<-ctx.Done()
		sctx, stop := context.WithTimeout(context.Background(), h.cfg.ShutdownTimeout)
		defer stop()
		shut <- srv.Shutdown(sctx)
	}()
	err := srv.Serve(ln)
	cancel()
	serr := <-shut
	wg.Wait()
	if errors.Is(err, http.ErrServerClosed) {
		err = nil
	}
	return errors.Join(err, serr)
}

// Close closes the connections to the workers and the layer, once (later
// calls return the first's result). Call it after Serve (or Run) has
// returned.
func (h *HTTP) Close() error {
	h.close.Do(func() {
		h.tr.CloseIdleConnections()
		h.closeErr = h.layer.Close()
	})
	return h.closeErr
}
