package main

import (
	"context"
	_ "embed"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/placementlab/placement/impl/affinity"
	"github.com/placementlab/placement/impl/resolver"
	"github.com/placementlab/placement/impl/router"
)

// behaviour is how a fake worker misbehaves.
type behaviour uint8

const (
	steady   behaviour = iota // answers every request
	hangs                     // sometimes answers only after the dispatch deadline
	refuses                   // sometimes refuses with 503 before running anything
	restarts                  // comes back with a new identity halfway through the run
)

// fakeWorker is an in-process inference worker on loopback: a health
// check naming its identity and ranks, the resolver's attempt ledger (its
// middleware on the completions endpoint, its handler under /attempts/),
// and a completions endpoint that streams a few chunks.
type fakeWorker struct {
	id    string
	ranks int
	kind  behaviour
	opts  options
	srv   *http.Server
	ln    net.Listener

	mu       sync.Mutex
	identity string
	boot     int
	ledger   *resolver.Ledger
	rng      *rand.Rand
	served   atomic.Uint64
	// register, when set, is the worker's agent registering an identity
	// in the claims store (the replicas demo); log records what it served.
	register func(identity string) error
	log      *servedLog
}

func startWorker(id string, ranks int, kind behaviour, seed uint64, o options) (*fakeWorker, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	w := &fakeWorker{id: id, ranks: ranks, kind: kind, opts: o, ln: ln, rng: rand.New(rand.NewPCG(seed, 7))}
	if err := w.restart(); err != nil {
		ln.Close()
		return nil, err
	}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /health", w.health)
	mux.Handle("GET /attempts/", http.HandlerFunc(func(rw http.ResponseWriter, r *http.Request) {
		w.currentLedger().Handler("").ServeHTTP(rw, r)
	}))
	mux.Handle("POST /v1/completions", http.HandlerFunc(func(rw http.ResponseWriter, r *http.Request) {
		w.currentLedger().Middleware(http.HandlerFunc(w.complete)).ServeHTTP(rw, r)
	}))
	w.srv = &http.Server{Handler: mux, ReadHeaderTimeout: 5 * time.Second}
	go func() { _ = w.srv.Serve(ln) }()
	return w, nil
}

func (w *fakeWorker) url() string { return "http://" + w.ln.Addr().String() }

// restart gives the worker a new identity and an empty ledger, as a
// process that restarted (and lost its caches) would have.
func (w *fakeWorker) restart() error {
	w.mu.Lock()
	boot, register := w.boot+1, w.register
	w.mu.Unlock()
	identity := fmt.Sprintf("%s-boot-%d", w.id, boot)
	if register != nil {
		// The worker's agent registers the new instance before its
		// health check reports it: the registration is the worker's own.
		if err := register(identity); err != nil {
			return err
		}
	}
	l, err := resolver.NewLedger(resolver.LedgerConfig{Identity: identity, Horizon: 10 * time.Minute})
	if err != nil {
		return err
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	w.boot, w.identity, w.ledger = boot, identity, l
	return nil
}

// current returns the worker's identity and boot count.
func (w *fakeWorker) current() (string, int) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.identity, w.boot
}

func (w *fakeWorker) currentLedger() *resolver.Ledger {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.ledger
}

func (w *fakeWorker) health(rw http.ResponseWriter, _ *http.Request) {
	w.mu.Lock()
	id := w.identity
	w.mu.Unlock()
	rw.Header().Set("Content-Type", "application/json")
	fmt.Fprintf(rw, `{"identity":%q,"first_rank":0,"ranks":%d}`, id, w.ranks)
}

// roll reports whether an event of probability p happens.
func (w *fakeWorker) roll(p float64) bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.rng.Float64() < p
}

func (w *fakeWorker) complete(rw http.ResponseWriter, r *http.Request) {
	start := time.Now()
	_, _ = io.Copy(io.Discard, r.Body)
	if v := r.Header.Get(router.DefaultRankHeader); v != "" {
		if n, err := strconv.Atoi(v); err != nil || n < 0 || n >= w.ranks {
			http.Error(rw, "no such rank", http.StatusBadRequest)
			return
		}
	}
	switch {
	case w.kind == refuses && w.roll(0.3):
		http.Error(rw, "busy", http.StatusServiceUnavailable)
		return
	case w.kind == hangs && w.roll(map[bool]float64{true: 0.5, false: 0.05}[r.Header.Get(resolver.DefaultHeader) != ""]):
		select { // past the dispatch deadline: the router stops waiting
		case <-time.After(3 * w.opts.dispatchTimeout):
		case <-r.Context().Done():
			return
		}
	}
	w.served.Add(1)
	defer w.servedBy(r, start)
	rw.Header().Set("Content-Type", "text/event-stream")
	rw.Header().Set("X-Served-By", w.id)
	f, _ := rw.(http.Flusher)
	for i := range 3 {
		fmt.Fprintf(rw, "data: {\"worker\":%q,\"chunk\":%d}\n\n", w.id, i)
		if f != nil {
			f.Flush()
		}
		select {
		case <-time.After(2 * time.Millisecond):
		case <-r.Context().Done():
			return
		}
	}
	fmt.Fprint(rw, "data: [DONE]\n\n")
}

func (w *fakeWorker) close() {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	if err := w.srv.Shutdown(ctx); err != nil {
		_ = w.srv.Close()
	}
}

// loadStats is what the load generator saw.
type loadStats struct {
	requests, ok, laterTurns, laterOK, refused, unknown, other atomic.Uint64
}

// loadShape is the shape of the load generator's sessions: minTurns to
// minTurns+spanTurns-1 turns, minGap to minGap+spanGap-1 ms apart; with
// probability par a turn other than the first and the last sends two
// requests of the session at once (an agent's parallel tool calls).
type loadShape struct {
	minTurns, spanTurns, minGap, spanGap int
	par                                  float64
}

// singleShape is the single router's demo's: sessions of 3 to 8 turns, 2
// to 9 ms apart, one request at a time.
var singleShape = loadShape{minTurns: 3, spanTurns: 6, minGap: 2, spanGap: 8}

// generate runs sessions of the given shape against the router at base
// until ctx ends: each of n clients runs sessions one after another, the
// last turn marked final.
func generate(ctx context.Context, client *http.Client, base string, n int, seed uint64, shape loadShape, st *loadStats) {
	var wg sync.WaitGroup
	for c := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			rng := rand.New(rand.NewPCG(seed, uint64(c)))
			for s := 0; ctx.Err() == nil; s++ {
				id := fmt.Sprintf("client-%d-session-%d", c, s)
				turns := shape.minTurns + rng.IntN(shape.spanTurns)
				for t := 1; t <= turns && ctx.Err() == nil; t++ {
					if shape.par > 0 && t > 1 && t < turns && rng.Float64() < shape.par {
						var fan sync.WaitGroup
						for range 2 {
							fan.Add(1)
							go func() { defer fan.Done(); one(ctx, client, base, id, t, false, st) }()
						}
						fan.Wait()
					} else {
						one(ctx, client, base, id, t, t == turns, st)
					}
					select {
					case <-ctx.Done():
					case <-time.After(time.Duration(shape.minGap+rng.IntN(shape.spanGap)) * time.Millisecond):
					}
				}
			}
		}()
	}
	wg.Wait()
}

// one sends one turn of a session and counts what came back.
func one(ctx context.Context, client *http.Client, base, id string, turn int, final bool, st *loadStats) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, base+"/v1/completions",
		strings.NewReader(fmt.Sprintf(`{"prompt":"turn %d"}`, turn)))
	if err != nil {
		return
	}
	req.Header.Set("X-Session-ID", id)
	if final {
		req.Header.Set("X-Session-Final", "true")
	}
	resp, err := client.Do(req)
	if err != nil {
		if !errors.Is(err, context.Canceled) && ctx.Err() == nil {
			st.requests.Add(1)
			st.other.Add(1)
		}
		return
	}
	_, rerr := io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	if ctx.Err() != nil && rerr != nil {
		return // cut by the end of the run
	}
	st.requests.Add(1)
	if turn > 1 {
		st.laterTurns.Add(1)
	}
	switch {
	case resp.StatusCode == http.StatusOK && rerr == nil:
		st.ok.Add(1)
		if turn > 1 {
			st.laterOK.Add(1)
		}
	case resp.StatusCode == http.StatusServiceUnavailable:
		st.refused.Add(1)
	case resp.StatusCode == http.StatusGatewayTimeout:
		st.unknown.Add(1)
	default:
		st.other.Add(1)
	}
}

//go:embed main.go
var mainSource string

// placementLines counts the lines of placement handling in src: the
// lines between "// placement: begin" and "// placement: end" that are
// neither blank nor comments.
func placementLines(src string) (int, error) {
	in, n, found := false, 0, false
	for _, line := range strings.Split(src, "\n") {
		t := strings.TrimSpace(line)
		switch {
		case t == "// placement: begin":
			if in || found {
				return 0, errors.New("placement: begin marker given twice")
			}
			in, found = true, true
		case t == "// placement: end":
			if !in {
				return 0, errors.New("placement: end marker without a begin")
			}
			in = false
		case in && t != "" && !strings.HasPrefix(t, "//"):
			n++
		}
	}
	if !found || in {
		return 0, errors.New("placement: markers missing or unclosed")
	}
	return n, nil
}

// demoWorkers are the fake workers: two with data-parallel ranks, one
// that hangs, one that refuses, one that restarts.
var demoWorkers = []struct {
	id    string
	ranks int
	kind  behaviour
}{{"dp-a", 2, steady}, {"dp-b", 2, steady}, {"slow", 0, hangs}, {"busy", 0, refuses}, {"phoenix", 2, restarts}}

// runDemo runs the demo for o.duration and writes its live lines and
// summary to out. It returns an error when the summary shows something
// wrong.
func runDemo(ctx context.Context, o options, out io.Writer) (err error) {
	var ws []*fakeWorker
	defer func() {
		for _, w := range ws {
			w.close()
		}
	}()
	var eps []router.HTTPWorker
	for i, d := range demoWorkers {
		w, err := startWorker(d.id, d.ranks, d.kind, o.seed+uint64(i), o)
		if err != nil {
			return err
		}
		ws = append(ws, w)
		u, _ := url.Parse(w.url())
		eps = append(eps, router.HTTPWorker{ID: d.id, URL: u})
	}
	k, err := newKit(eps, nil, o)
	if err != nil {
		return err
	}
	defer func() { err = errors.Join(err, k.Close()) }()
	k.Health().Pass(ctx) // the workers join before the load starts
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return err
	}
	fmt.Fprintf(out, "router on http://%s (metrics on /metrics); %d workers; load for %s\n", ln.Addr(), len(ws), o.duration)

	rctx, stopRouter := context.WithCancel(ctx)
	routerDone := make(chan error, 1)
	go func() { routerDone <- serveUntil(rctx, k, ln) }()
	defer func() {
		stopRouter()
		err = errors.Join(err, <-routerDone)
	}()

	st := &loadStats{}
	tr := &http.Transport{MaxIdleConnsPerHost: o.clients}
	defer tr.CloseIdleConnections()
	client := &http.Client{Transport: tr, Timeout: 30 * time.Second}
	lctx, stopLoad := context.WithTimeout(ctx, o.duration)
	defer stopLoad()
	loadDone := make(chan struct{})
	go func() {
		generate(lctx, client, "http://"+ln.Addr().String(), o.clients, o.seed, singleShape, st)
		close(loadDone)
	}()

	start := time.Now()
	tick := time.NewTicker(o.live)
	defer tick.Stop()
	restarted := false
	for running := true; running; {
		select {
		case <-loadDone:
			running = false
		case <-tick.C:
			fmt.Fprintln(out, liveLine(time.Since(start), k, st))
		}
		if !restarted && time.Since(start) >= o.duration/2 {
			restarted = true
			if err := ws[len(ws)-1].restart(); err != nil {
				return err
			}
		}
	}
	// Drain: the load has stopped; the requests it cut end, and
	// quarantines settle by the resolver, the restart or their TTL.
	// A dispatch the load left without an answer opens its quarantine
	// only when its DispatchTimeout passes: the drain judges nothing
	// before then (an empty quarantine list a moment earlier says
	// nothing of those).
	drainFrom := time.Now()
	drainEnd := drainFrom.Add(o.quarantineTTL + o.dispatchTimeout + 4*o.every)
	for (time.Since(drainFrom) < o.dispatchTimeout+o.every || len(k.Layer().Quarantined()) > 0 || k.Driver().Stats().InFlight > 0) &&
		time.Now().Before(drainEnd) && ctx.Err() == nil {
		time.Sleep(o.every)
	}
	return summary(out, time.Since(start), k, st, ws)
}

// liveLine is the line printed each second.
func liveLine(at time.Duration, k *kit, st *loadStats) string {
	s, d := k.Layer().Stats(), k.Driver().Stats()
	return fmt.Sprintf("[%5.1fs] requests %d ok %d | hit rate %s | quarantines open %d settled %d | unpinned %d | retries %d | 503 %d 504 %d",
		at.Seconds(), st.requests.Load(), st.ok.Load(), pct(s.Hits, st.laterOK.Load()),
		s.Quarantined, settled(s), unpinned(s), d.Retries, st.refused.Load(), st.unknown.Load())
}

func settled(s affinity.Stats) uint64 {
	return s.ResolvedAccepted + s.ResolvedNotAccepted + s.QuarantinesExpired + s.QuarantinesDropped
}

func unpinned(s affinity.Stats) uint64 {
	var n uint64
	for c := affinity.CauseNone + 1; c < affinity.NumCauses; c++ {
		n += s.Unpinned[c]
	}
	return n
}

func pct(a, b uint64) string {
	if b == 0 {
		return "-"
	}
	return fmt.Sprintf("%.1f%%", 100*float64(a)/float64(b))
}

// summary writes the run's summary and returns an error listing what is
// wrong, if anything.
func summary(out io.Writer, took time.Duration, k *kit, st *loadStats, ws []*fakeWorker) error {
	s, d := k.Layer().Stats(), k.Driver().Stats()
	lines, lerr := placementLines(mainSource)
	p := func(format string, a ...any) { fmt.Fprintf(out, format+"\n", a...) }
	p("summary after %.1fs:", took.Seconds())
	p("  requests      %d: ok %d, refused (503) %d, outcome unknown (504) %d, other %d",
		st.requests.Load(), st.ok.Load(), st.refused.Load(), st.unknown.Load(), st.other.Load())
	p("  hit rate      %s of later turns served (%d hits / %d)", pct(s.Hits, st.laterOK.Load()), s.Hits, st.laterOK.Load())
	var moves []string
	for c := affinity.MoveCause(0); c < affinity.NumMoveCauses; c++ {
		moves = append(moves, fmt.Sprintf("%s %d", c, s.Moves[c]))
	}
	p("  bindings      %d made, %d live; moves: %s", s.Binds, s.Live-s.Quarantined, strings.Join(moves, ", "))
	p("  quarantines   opened %d, settled %d (resolver: accepted %d, not accepted %d; ttl %d; restart %d), open %d",
		s.QuarantinesOpened, settled(s), s.ResolvedAccepted, s.ResolvedNotAccepted, s.QuarantinesExpired, s.QuarantinesDropped, s.Quarantined)
	var causes []string
	for c := affinity.CauseNone + 1; c < affinity.NumCauses; c++ {
		if s.Unpinned[c] > 0 {
			causes = append(causes, fmt.Sprintf("%s %d", c, s.Unpinned[c]))
		}
	}
	p("  unpinned      %d (%s)", unpinned(s), strings.Join(causes, ", "))
	p("  driver        requests %d, served %d, retries %d, all refused %d, unknown %d, failed %d, relay failed %d, in flight %d",
		d.Requests, d.Served, d.Retries, d.Refused, d.Unknown, d.Failed, d.RelayFailed, d.InFlight)
	var served []string
	for _, w := range ws {
		served = append(served, fmt.Sprintf("%s %d", w.id, w.served.Load()))
	}
	p("  workers       served: %s", strings.Join(served, ", "))
	var members []string
	for _, w := range k.Layer().Workers() {
		members = append(members, fmt.Sprintf("%s(%s, %s, %d bound)", w.ID, w.Identity, w.State, w.Bound))
	}
	p("  membership    %s", strings.Join(members, " "))
	p("  placement handling: %d lines (cmd/router/main.go between the markers; at most 60)", lines)

	var wrong []string
	now := k.Layer().Now()
	for _, q := range k.Layer().Quarantined() {
		if q.Expires <= now {
			wrong = append(wrong, fmt.Sprintf("quarantine of %s open past its TTL", q.Target))
		}
	}
	if len(k.Layer().Quarantined()) > 0 {
		wrong = append(wrong, fmt.Sprintf("%d quarantines still open after the drain", len(k.Layer().Quarantined())))
	}
	if s.QuarantinesOpened > 0 && s.ResolvedAccepted+s.ResolvedNotAccepted == 0 {
		wrong = append(wrong, "no quarantine settled by the resolver")
	}
	if s.Hits == 0 {
		wrong = append(wrong, "no hits")
	} else if 2*s.Hits < st.laterOK.Load() {
		wrong = append(wrong, "hit rate under 50% of later turns")
	}
	if d.InFlight != 0 {
		wrong = append(wrong, fmt.Sprintf("%d requests still counted in flight", d.InFlight))
	}
	if len(ws) > 0 {
		last := ws[len(ws)-1]
		if identity, boot := last.current(); boot < 2 || !hasIdentity(k.Layer().Workers(), last.id, identity) {
			wrong = append(wrong, "no restart seen by the health checks")
		}
	}
	if lerr != nil || lines > 60 {
		wrong = append(wrong, fmt.Sprintf("placement handling: %d lines (%v)", lines, lerr))
	}
	if len(wrong) > 0 {
		p("  result        WRONG: %s", strings.Join(wrong, "; "))
		return fmt.Errorf("demo: %s", strings.Join(wrong, "; "))
	}
	p("  result        ok")
	return nil
}

func hasIdentity(ws []affinity.WorkerInfo, id, identity string) bool {
	for _, w := range ws {
		if w.ID == id {
			return w.Identity == identity
		}
	}
	return false
}
