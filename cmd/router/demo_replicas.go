package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	stdlog "log"
	"math/rand/v2"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"sort"
	"strings"
	"sync"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/placementlab/placement/impl/affinity"
	"github.com/placementlab/placement/impl/claims"
	"github.com/placementlab/placement/impl/claims/etcdstore/embedded"
	"github.com/placementlab/placement/impl/resolver"
	"github.com/placementlab/placement/impl/router"
)

// splitWindow is the stated window: after a session's binding moves (a
// placing or moving dispatch, which carries an attempt id), a replica that
// has not yet seen the claim's Delete event may still send a turn to the
// old worker for at most this long. Two turns of one session running at
// once on two workers with no placement of the session within the window
// before the later one are a split the claims protocol must never make.
const splitWindow = time.Second

// served is one request a fake worker served.
type served struct {
	session, worker string
	start, end      time.Time
	placing         bool // it carried an attempt id: the router placed or moved the session
}

// servedLog collects what the fake workers served.
type servedLog struct {
	mu  sync.Mutex
	all []served
}

func (l *servedLog) add(s served) {
	l.mu.Lock()
	l.all = append(l.all, s)
	l.mu.Unlock()
}

// judge reads the log: later turns served by the worker that served the
// session's previous turn, of all later turns; and the sessions with a
// split past the window (two of its turns running at once on two workers,
// no placement of it within splitWindow before the later one began).
func (l *servedLog) judge() (sticky, later int, splits []string) {
	l.mu.Lock()
	bySession := map[string][]served{}
	for _, s := range l.all {
		bySession[s.session] = append(bySession[s.session], s)
	}
	l.mu.Unlock()
	for id, ss := range bySession {
		sort.Slice(ss, func(i, j int) bool { return ss[i].start.Before(ss[j].start) })
		for i := 1; i < len(ss); i++ {
			later++
			if ss[i].worker == ss[i-1].worker {
				sticky++
			}
		}
		split := false
		for i := 0; i < len(ss) && !split; i++ {
			for j := i + 1; j < len(ss) && ss[j].start.Before(ss[i].end); j++ {
				if ss[j].worker == ss[i].worker {
					continue
				}
				excused := false
				for _, p := range ss[:j+1] {
					if p.placing && !p.start.After(ss[j].start) && ss[j].start.Sub(p.start) <= splitWindow {
						excused = true
						break
					}
				}
				if !excused {
					split = true
					splits = append(splits, fmt.Sprintf("%s on %s and %s at %s", id, ss[i].worker, ss[j].worker, ss[j].start.Format("15:04:05.000")))
					break
				}
			}
		}
	}
	sort.Strings(splits)
	return sticky, later, splits
}

// routerReplica is one router replica of the demo: its etcd client, store
// handle and kit.
type routerReplica struct {
	name  string
	cli   *clientv3.Client
	store claims.Store
	kit   *kit
	url   *url.URL
	stop  context.CancelFunc
	done  chan error
	// calls are its store calls, read when it stops.
	calls uint64
}

// storeCalls is the replica's store round trips so far, both phases.
func (r *routerReplica) storeCalls() uint64 {
	var n uint64
	for p := affinity.Phase(0); p < affinity.NumPhases; p++ {
		if c := r.kit.Layer().Replica(p); c != nil {
			n += c.Stats().StoreCalls
		}
	}
	return n
}

// balancer sends each request to a random live replica.
type balancer struct {
	mu   sync.Mutex
	rng  *rand.Rand
	live []*routerReplica
	rp   *httputil.ReverseProxy
}

func newBalancer(seed uint64, reps []*routerReplica) *balancer {
	b := &balancer{rng: rand.New(rand.NewPCG(seed, 99)), live: append([]*routerReplica(nil), reps...)}
	b.rp = &httputil.ReverseProxy{
		Rewrite: func(pr *httputil.ProxyRequest) {
			pr.SetURL(b.pick().url)
			pr.Out.Host = pr.In.Host
		},
		FlushInterval: -1,
		// A request the client gave up on (the load's end) is no news.
		ErrorLog: stdlog.New(io.Discard, "", 0),
		ErrorHandler: func(w http.ResponseWriter, _ *http.Request, _ error) {
			w.WriteHeader(http.StatusBadGateway)
		},
	}
	return b
}

func (b *balancer) pick() *routerReplica {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.live[b.rng.IntN(len(b.live))]
}

// remove takes r out of the balancer (before it stops).
func (b *balancer) remove(r *routerReplica) {
	b.mu.Lock()
	defer b.mu.Unlock()
	for i, x := range b.live {
		if x == r {
			b.live = append(b.live[:i], b.live[i+1:]...)
			return
		}
	}
}

func (b *balancer) ServeHTTP(w http.ResponseWriter, r *http.Request) { b.rp.ServeHTTP(w, r) }

// runReplicasDemo runs o.replicas router replicas on an embedded
// three-member etcd behind a random load balancer, with the demo's fake
// workers (each registered in the store by its own agent, one of them
// restarting with a new identity). Halfway through it stops one etcd
// member and one router replica. It writes live lines and a summary, and
// returns an error when the summary shows something wrong.
func runReplicasDemo(ctx context.Context, o options, out io.Writer) (err error) {
	spec, err := parseStore(o.store)
	if err != nil {
		return err
	}
	if spec.kind != "local" && spec.kind != "embedded" {
		return fmt.Errorf("-demo -replicas runs on its own embedded etcd (-store %s not supported there)", o.store)
	}
	// -store local: each replica alone, with no store (what consistency
	// buys, by its absence); otherwise the claims on the embedded etcd.
	shared := o.store != "local"
	var c *embedded.Cluster
	if shared {
		if c, err = embedded.Start(ctx, embedded.Config{Members: 3}); err != nil {
			return err
		}
		defer func() { err = errors.Join(err, c.Close()) }()
	}
	var closers []func() error
	defer func() {
		for i := len(closers) - 1; i >= 0; i-- {
			err = errors.Join(err, closers[i]())
		}
	}()
	open := func(name string) (*clientv3.Client, claims.Store, error) {
		cli, err := c.NewClient()
		if err != nil {
			return nil, nil, err
		}
		st, err := openEtcd(ctx, cli, name)
		if err != nil {
			_ = cli.Close()
			return nil, nil, err
		}
		return cli, st, nil
	}

	// The workers, each registered by its own agent (a store handle whose
	// life is the worker's), before its health check reports the identity.
	log := &servedLog{}
	var ws []*fakeWorker
	defer func() {
		for _, w := range ws {
			w.close()
		}
	}()
	var eps []router.HTTPWorker
	for i, d := range demoWorkers {
		register := func(string) error { return nil }
		if shared {
			cli, agent, err := open("agent-" + d.id)
			if err != nil {
				return err
			}
			closers = append(closers, func() error { return errors.Join(agent.Shutdown(), cli.Close()) })
			id := d.id
			register = func(identity string) error {
				rctx, cancel := context.WithTimeout(ctx, 5*time.Second)
				defer cancel()
				_, err := agent.Register(rctx, id, identity)
				return err
			}
		}
		w, err := startWorkerWith(d.id, d.ranks, d.kind, o.seed+uint64(i), o, register, log)
		if err != nil {
			return err
		}
		ws = append(ws, w)
		u, _ := url.Parse(w.url())
		eps = append(eps, router.HTTPWorker{ID: d.id, URL: u})
	}

	// The router replicas.
	var reps []*routerReplica
	for i := range o.replicas {
		name := fmt.Sprintf("r%d", i+1)
		var cli *clientv3.Client
		var st claims.Store
		if shared {
			if cli, st, err = open(name); err != nil {
				return err
			}
		}
		ro := o
		ro.replica = name
		k, err := newKit(eps, st, ro)
		if err != nil {
			if shared {
				_ = st.Shutdown()
				_ = cli.Close()
			}
			return err
		}
		k.Health().Pass(ctx)
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return err
		}
		rctx, stop := context.WithCancel(ctx)
		r := &routerReplica{name: name, cli: cli, store: st, kit: k, url: &url.URL{Scheme: "http", Host: ln.Addr().String()},
			stop: stop, done: make(chan error, 1)}
		go func() { r.done <- serveUntil(rctx, k, ln) }()
		reps = append(reps, r)
	}
	stopped := map[*routerReplica]bool{}
	stopReplica := func(r *routerReplica) error {
		if stopped[r] {
			return nil
		}
		stopped[r] = true
		r.calls = r.storeCalls()
		r.stop()
		serr := <-r.done
		if errors.Is(serr, context.Canceled) || errors.Is(serr, context.DeadlineExceeded) {
			// The replica was stopped on purpose: a request still in
			// flight past the server's shutdown grace (a hanging worker's)
			// is cut, as a replica's crash would cut it.
			serr = nil
		}
		err := errors.Join(serr, r.kit.Close())
		if r.store != nil {
			err = errors.Join(err, r.store.Shutdown(), r.cli.Close())
		}
		return err
	}
	defer func() {
		for _, r := range reps {
			err = errors.Join(err, stopReplica(r))
		}
	}()

	lb := newBalancer(o.seed, reps)
	lln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return err
	}
	lbSrv := &http.Server{Handler: lb, ReadHeaderTimeout: 5 * time.Second}
	go func() { _ = lbSrv.Serve(lln) }()
	defer func() { _ = lbSrv.Close() }()
	where := "on a 3-member embedded etcd"
	if !shared {
		where = "each alone (no store)"
	}
	fmt.Fprintf(out, "load balancer on http://%s over %d router replicas %s; %d workers; load for %s\n",
		lln.Addr(), len(reps), where, len(ws), o.duration)

	st := &loadStats{}
	tr := &http.Transport{MaxIdleConnsPerHost: o.clients}
	defer tr.CloseIdleConnections()
	client := &http.Client{Transport: tr, Timeout: 30 * time.Second}
	lctx, stopLoad := context.WithTimeout(ctx, o.duration)
	defer stopLoad()
	loadDone := make(chan struct{})
	go func() {
		generate(lctx, client, "http://"+lln.Addr().String(), o.clients, o.seed, replicasShape, st)
		close(loadDone)
	}()

	start := time.Now()
	tick := time.NewTicker(o.live)
	defer tick.Stop()
	restarted, faulted := false, false
	for running := true; running; {
		select {
		case <-loadDone:
			running = false
		case <-tick.C:
			fmt.Fprintln(out, replicasLine(time.Since(start), reps, stopped, st))
		}
		if !restarted && time.Since(start) >= o.duration*2/5 {
			restarted = true
			if err := ws[len(ws)-1].restart(); err != nil {
				return err
			}
		}
		if !faulted && time.Since(start) >= o.duration*3/5 && len(reps) > 1 {
			faulted = true
			what := ""
			if shared {
				if err := c.StopMember(c.Size() - 1); err != nil {
					return err
				}
				what = fmt.Sprintf("etcd member %d and ", c.Size()-1)
			}
			victim := reps[len(reps)-1]
			lb.remove(victim)
			if err := stopReplica(victim); err != nil {
				return err
			}
			fmt.Fprintf(out, "at %.1fs: %srouter replica %s stopped\n", time.Since(start).Seconds(), what, victim.name)
		}
	}
	// Drain, as the single router's demo does, on every live replica.
	drainFrom := time.Now()
	drainEnd := drainFrom.Add(o.quarantineTTL + o.dispatchTimeout + 4*o.every + 2*time.Second)
	openQ := func() int { return len(openQuarantines(reps, stopped)) }
	for (time.Since(drainFrom) < o.dispatchTimeout+o.every || openQ() > 0 || inFlight(reps, stopped) > 0) &&
		time.Now().Before(drainEnd) && ctx.Err() == nil {
		time.Sleep(o.every)
	}
	return replicasSummary(out, time.Since(start), reps, stopped, st, ws, log)
}

// openQuarantines are the quarantines the live replicas list (one per
// session and attempt).
func openQuarantines(reps []*routerReplica, stopped map[*routerReplica]bool) map[string]bool {
	out := map[string]bool{}
	for _, r := range reps {
		if stopped[r] {
			continue
		}
		for _, q := range r.kit.Layer().Quarantined() {
			out[fmt.Sprintf("%s/%d", q.Key, q.Attempt)] = true
		}
	}
	return out
}

func inFlight(reps []*routerReplica, stopped map[*routerReplica]bool) int64 {
	var n int64
	for _, r := range reps {
		if !stopped[r] {
			n += int64(r.kit.Driver().Stats().InFlight)
		}
	}
	return n
}

// replicasLine is the live line of the replicas demo.
func replicasLine(at time.Duration, reps []*routerReplica, stopped map[*routerReplica]bool, st *loadStats) string {
	var hits, calls uint64
	live := 0
	for _, r := range reps {
		if stopped[r] {
			calls += r.calls
			continue
		}
		live++
		hits += r.kit.Layer().Stats().Hits
		calls += r.storeCalls()
	}
	return fmt.Sprintf("[%5.1fs] requests %d ok %d | replicas %d | cached hits %d | store ops %d | quarantines open %d | 503 %d 504 %d",
		at.Seconds(), st.requests.Load(), st.ok.Load(), live, hits, calls, len(openQuarantines(reps, stopped)),
		st.refused.Load(), st.unknown.Load())
}

// replicasSummary writes the summary line and returns an error listing
// what is wrong, if anything.
func replicasSummary(out io.Writer, took time.Duration, reps []*routerReplica, stopped map[*routerReplica]bool,
	st *loadStats, ws []*fakeWorker, log *servedLog) error {
	sticky, later, splits := log.judge()
	var calls uint64
	var moves uint64
	for _, r := range reps {
		if stopped[r] {
			calls += r.calls
			continue
		}
		calls += r.storeCalls()
		for p := affinity.Phase(0); p < affinity.NumPhases; p++ {
			if c := r.kit.Layer().Replica(p); c != nil {
				moves += c.Stats().Moves
			}
		}
	}
	open := openQuarantines(reps, stopped)
	turns := st.ok.Load()
	perTurn := 0.0
	if turns > 0 {
		perTurn = float64(calls) / float64(turns)
	}
	p := func(format string, a ...any) { fmt.Fprintf(out, format+"\n", a...) }
	p("summary after %.1fs: turns served %d | later turns on the session's bound worker %s (%d/%d) | sessions on two workers at once past %s: %d | store ops per turn %.2f | quarantines open %d",
		took.Seconds(), turns, pct(uint64(sticky), uint64(later)), sticky, later, splitWindow, len(splits), perTurn, len(open))
	p("  requests      %d: ok %d, refused (503) %d, outcome unknown (504) %d, other %d",
		st.requests.Load(), st.ok.Load(), st.refused.Load(), st.unknown.Load(), st.other.Load())
	var servedBy []string
	for _, w := range ws {
		servedBy = append(servedBy, fmt.Sprintf("%s %d", w.id, w.served.Load()))
	}
	p("  workers       served: %s; claims moved %d", strings.Join(servedBy, ", "), moves)
	for _, r := range reps {
		state := "live"
		if stopped[r] {
			state = "stopped"
		}
		s := r.kit.Layer().Stats()
		p("  replica %-5s %s: hits %d, binds %d, quarantines opened %d", r.name, state, s.Hits, s.Binds, s.QuarantinesOpened)
	}
	var wrong []string
	if len(splits) > 0 {
		wrong = append(wrong, fmt.Sprintf("%d sessions on two workers at once past the window (%s)", len(splits), strings.Join(splits[:min(3, len(splits))], "; ")))
	}
	if len(open) > 0 {
		wrong = append(wrong, fmt.Sprintf("%d quarantines still open after the drain", len(open)))
	}
	if turns == 0 || 2*sticky < later {
		wrong = append(wrong, "under half the later turns on the session's bound worker")
	}
	last := ws[len(ws)-1]
	if identity, boot := last.current(); boot < 2 {
		wrong = append(wrong, "the worker never restarted")
	} else {
		for _, r := range reps {
			if !stopped[r] && !hasIdentity(r.kit.Layer().Workers(), last.id, identity) {
				wrong = append(wrong, fmt.Sprintf("replica %s did not see %s's restart", r.name, last.id))
			}
		}
	}
	if len(wrong) > 0 {
		p("  result        WRONG: %s", strings.Join(wrong, "; "))
		return fmt.Errorf("demo: %s", strings.Join(wrong, "; "))
	}
	p("  result        ok")
	return nil
}

// replicasShape is the replicas demo's load: longer sessions than the
// single router's (8 to 24 turns, 10 to 40 ms apart), so that a session
// outlives the stated window and a split between replicas that each bound
// it on their own shows past it; three turns in ten send two requests at
// once.
var replicasShape = loadShape{minTurns: 8, spanTurns: 17, minGap: 10, spanGap: 31, par: 0.3}

// startWorkerWith starts a fake worker whose agent registers each of its
// identities (before its health check reports it) and whose served
// requests go to log.
func startWorkerWith(id string, ranks int, kind behaviour, seed uint64, o options, register func(string) error, log *servedLog) (*fakeWorker, error) {
	w, err := startWorker(id, ranks, kind, seed, o)
	if err != nil {
		return nil, err
	}
	identity, _ := w.current()
	if err := register(identity); err != nil {
		w.close()
		return nil, err
	}
	w.mu.Lock()
	w.register, w.log = register, log
	w.mu.Unlock()
	return w, nil
}

// servedBy records one request w served.
func (w *fakeWorker) servedBy(r *http.Request, start time.Time) {
	w.mu.Lock()
	log := w.log
	w.mu.Unlock()
	if log == nil {
		return
	}
	log.add(served{session: r.Header.Get("X-Session-ID"), worker: w.id, start: start, end: time.Now(),
		placing: r.Header.Get(resolver.DefaultHeader) != ""})
}
