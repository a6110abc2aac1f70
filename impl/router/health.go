package router

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/placementlab/placement/impl/affinity"
	"github.com/placementlab/placement/impl/placement"
	"golang.org/x/sync/errgroup"
)

// Health check headers a worker may answer with (they win over the JSON
// body's fields).
const (
	// HeaderIdentity carries the worker's instance identity (a boot id, a
	// pod uid): a new value means the worker restarted.
	HeaderIdentity = "X-Worker-Identity"
	// HeaderFirstRank and HeaderRanks carry the data-parallel ranks the
	// worker serves: FirstRank .. FirstRank+Ranks-1 (Ranks 0 or absent: no
	// ranks).
	HeaderFirstRank = "X-Worker-First-Rank"
	HeaderRanks     = "X-Worker-Ranks"
)

// Defaults of HealthConfig's zero fields.
const (
	DefaultHealthInterval = time.Second
	DefaultHealthTimeout  = 2 * time.Second
	DefaultFailAfter      = 1
	DefaultEjectAfter     = 3
	// maxHealthBody bounds how much of a health answer is read.
	maxHealthBody = 64 << 10
)

// ErrHealthCheck: a worker's health check failed (see *HealthError).
var ErrHealthCheck = errors.New("router: health check failed")

// HealthError says why one health check of a worker failed.
type HealthError struct {
	Worker, Reason string
	// Err is the transport's error, if any.
	Err error
}

// Error describes the error.
func (e *HealthError) Error() string {
	if e.Err != nil {
		return fmt.Sprintf("router: health check of %s failed: %s: %v", e.Worker, e.Reason, e.Err)
	}
	return fmt.Sprintf("router: health check of %s failed: %s", e.Worker, e.Reason)
}

// Is reports whether target is ErrHealthCheck.
func (e *HealthError) Is(target error) bool { return target == ErrHealthCheck }

// Unwrap returns the transport's error.
func (e *HealthError) Unwrap() error { return e.Err }

// Endpoint is a worker the health poller watches: its id in the layer and
// the URL of its health check.
type Endpoint struct {
	// ID is the worker's id in the affinity layer (affinity.Worker.ID).
	ID string
	// URL is the worker's health check, fetched with GET.
	URL string
	// Identity is used when the worker's answer carries none (an engine
	// whose health check says nothing but "up"): with it, restarts cannot
	// be told apart from flaps. Empty: an answer without an identity is a
	// failed check.
	Identity string
}

// HealthConfig configures a Health poller.
type HealthConfig struct {
	// Layer is the affinity layer whose membership the poller keeps.
	Layer *affinity.Layer
	// Endpoints are the workers to watch (SetEndpoints changes them).
	Endpoints []Endpoint
	// Client fetches the health checks; nil: a client of its own.
	Client *http.Client
	// Interval is Run's period (DefaultHealthInterval if zero); Timeout
	// bounds each check (DefaultHealthTimeout if zero).
	Interval, Timeout time.Duration
	// FailAfter is how many consecutive failed checks fail a worker
	// (DefaultFailAfter if zero).
	FailAfter int
	// OnChange, if set, is called for every change a pass makes, in the
	// endpoints' order, from the goroutine running the pass, and for an
	// ejection (ChangeEjected) from Observe's caller.
	OnChange func(Change)
	// EjectAfter is passive ejection: that many refusals or connects that
	// failed in a row (DefinitelyNotAccepted sends, told by Observe) fail
	// a worker at once, without waiting for its checks, until a check
	// passes again and joins it back. DefaultEjectAfter if zero; negative:
	// never.
	EjectAfter int
}

// ChangeKind says what a pass did to a worker's membership.
type ChangeKind uint8

const (
	// ChangeJoined: a worker the layer did not know joined.
	ChangeJoined ChangeKind = iota + 1
	// ChangeRecovered: the same identity answered again after failing (a
	// flap: nothing fenced), or its ranks changed.
	ChangeRecovered
	// ChangeRestarted: a new identity answered: the worker restarted and
	// every binding to it is fenced.
	ChangeRestarted
	// ChangeFailed: the worker failed FailAfter checks in a row.
	ChangeFailed
	// ChangeLeft: the worker's endpoint was removed (SetEndpoints).
	ChangeLeft
	// ChangeEjected: the worker refused EjectAfter sends in a row (or its
	// connects failed): Observe failed it.
	ChangeEjected
)

var changeNames = [...]string{"", "joined", "recovered", "restarted", "failed", "left", "ejected"}

// String names k.
func (k ChangeKind) String() string {
	if int(k) < len(changeNames) && k > 0 {
		return changeNames[k]
	}
	return fmt.Sprintf("ChangeKind(%d)", k)
}

// Change is one membership change a pass made.
type Change struct {
	Worker   string
	Kind     ChangeKind
	Identity string
	// Err is the failed check (ChangeFailed), or the layer's error if the
	// change was refused (then the membership is unchanged).
	Err error
}

// Health keeps a layer's membership from its workers' health checks: each
// pass GETs every endpoint's health URL and calls Layer.Join, Fail or Leave
// as the answers say.
//
// A check passes when the answer's status is 2xx and it names an identity:
// the HeaderIdentity header, or else the "identity" field of a JSON body
// such as {"identity":"boot-7","first_rank":0,"ranks":2} (ranks likewise:
// the HeaderFirstRank and HeaderRanks headers win over "first_rank" and
// "ranks"), or else Endpoint.Identity. Any other answer, a transport error
// or a timeout fails it. Then, by the layer's rules:
//
//   - a passing check of a worker that is not a member joins it;
//   - a new identity is a restart: Join fences every binding to the worker;
//   - the same identity back after the worker failed is a flap: Join
//     recovers it and its bindings serve again; a changed rank range joins
//     it again too (bindings to ranks it dropped move);
//   - FailAfter failed checks in a row of a member that is up fail it;
//   - an endpoint removed by SetEndpoints leaves, at the next pass, if this
//     poller joined it.
//
// Passive ejection (Observe, HealthConfig.EjectAfter): a worker whose sends
// are refused, or whose connects fail, EjectAfter times in a row is failed
// at once, without waiting for FailAfter failed checks; a check that
// passes after that joins it back (a flap). Without it, a worker that just
// crashed is even favoured by the pipeline until its checks fail, since
// its sessions moved away.
//
// A pass fetches the checks concurrently and applies them in the
// endpoints' order, so what it does depends only on the answers.
type Health struct {
	cfg    HealthConfig
	client *http.Client

	mu     sync.Mutex // serializes passes, guards the fields below
	eps    []Endpoint
	fails  map[string]int
	joined map[string]bool // workers this poller joined

	// Passive ejection (Observe), apart from mu so a send never waits for
	// a pass.
	emu       sync.Mutex
	watched   map[string]bool   // the endpoints' ids
	refusals  map[string]int    // refusals in a row
	ejectSeq  uint64            // ejections so far
	ejectedAt map[string]uint64 // the worker's last ejection's ejectSeq
	ejections atomic.Uint64
}

// ErrInvalidHealth: NewHealth was given an invalid HealthConfig.
var ErrInvalidHealth = errors.New("router: invalid health config")

// NewHealth returns a poller for cfg: a layer is required, durations must
// not be negative, endpoint ids must be distinct and non-empty.
func NewHealth(cfg HealthConfig) (*Health, error) {
	switch {
	case cfg.Layer == nil:
		return nil, fmt.Errorf("%w: no Layer", ErrInvalidHealth)
	case cfg.Interval < 0 || cfg.Timeout < 0 || cfg.FailAfter < 0:
		return nil, fmt.Errorf("%w: negative Interval, Timeout or FailAfter", ErrInvalidHealth)
	}
	if cfg.Interval == 0 {
		cfg.Interval = DefaultHealthInterval
	}
	if cfg.Timeout == 0 {
		cfg.Timeout = DefaultHealthTimeout
	}
	if cfg.FailAfter == 0 {
		cfg.FailAfter = DefaultFailAfter
	}
	if cfg.EjectAfter == 0 {
		cfg.EjectAfter = DefaultEjectAfter
	}
	h := &Health{cfg: cfg, client: cfg.Client, fails: map[string]int{}, joined: map[string]bool{},
		refusals: map[string]int{}, ejectedAt: map[string]uint64{}}
	if h.client == nil {
		h.client = &http.Client{}
	}
	if err := h.SetEndpoints(cfg.Endpoints); err != nil {
		return nil, err
	}
	return h, nil
}

// SetEndpoints replaces the endpoints watched; a worker whose endpoint is
// gone leaves at the next pass. Ids must be distinct and non-empty. It
// waits for a pass in progress.
func (h *Health) SetEndpoints(eps []Endpoint) error {
	seen := map[string]bool{}
	for _, e := range eps {
		if e.ID == "" || e.URL == "" {
			return fmt.Errorf("%w: an endpoint needs an ID and a URL (%q, %q)", ErrInvalidHealth, e.ID, e.URL)
		}
		if seen[e.ID] {
			return fmt.Errorf("%w: endpoint %q given twice", ErrInvalidHealth, e.ID)
		}
		seen[e.ID] = true
	}
	h.mu.Lock()
	h.eps = append([]Endpoint(nil), eps...)
	h.mu.Unlock()
	h.emu.Lock()
	h.watched = seen
	h.emu.Unlock()
	return nil
}

// report is one worker's answer to a check.
type report struct {
	worker affinity.Worker
	err    error
}

// Pass checks every endpoint once and applies the answers (see Health).
// It returns the changes it made, in the endpoints' order. Passes do not
// overlap: a Pass waits for one in progress.
func (h *Health) Pass(ctx context.Context) []Change {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.emu.Lock()
	seq := h.ejectSeq
	h.emu.Unlock()
	reports := make([]report, len(h.eps))
	var g errgroup.Group
	g.SetLimit(16)
	for i, ep := range h.eps {
		g.Go(func() error {
			reports[i] = h.check(ctx, ep)
			return nil
		})
	}
	_ = g.Wait()
	if ctx.Err() != nil {
		return nil // the checks were cut short, not failed
	}

	state := map[string]affinity.WorkerInfo{}
	for _, w := range h.cfg.Layer.Workers() {
		state[w.ID] = w
	}
	var changes []Change
	listed := map[string]bool{}
	for i, ep := range h.eps {
		listed[ep.ID] = true
		if reports[i].err == nil && h.ejectedSince(ep.ID, seq) {
			continue // ejected during the pass: only a later check brings it back
		}
		if c, ok := h.apply(ep.ID, reports[i], state); ok {
			changes = append(changes, c)
		}
	}
	// Workers whose endpoints were removed, in a fixed order.
	for _, w := range h.cfg.Layer.Workers() {
		if listed[w.ID] || !h.joined[w.ID] {
			continue
		}
		delete(h.joined, w.ID)
		delete(h.fails, w.ID)
		c := Change{Worker: w.ID, Kind: ChangeLeft, Identity: w.Identity}
		c.Err = h.cfg.Layer.Leave(w.ID)
		changes = append(changes, c)
	}
	if h.cfg.OnChange != nil {
		for _, c := range changes {
			h.cfg.OnChange(c)
		}
	}
	return changes
}

// apply turns one check's report into a membership change, if any.
func (h *Health) apply(id string, r report, state map[string]affinity.WorkerInfo) (Change, bool) {
	cur, member := state[id]
	if r.err != nil {
		h.fails[id]++
		if !member || cur.State != affinity.WorkerUp || h.fails[id] < h.cfg.FailAfter {
			return Change{}, false
		}
		c := Change{Worker: id, Kind: ChangeFailed, Identity: cur.Identity, Err: r.err}
		if err := h.cfg.Layer.Fail(id); err != nil {
			c.Err = err
		}
		return c, true
	}
	h.fails[id] = 0
	w := r.worker
	if member && cur.State == affinity.WorkerUp && cur.Worker == w && h.cfg.Layer.Registered(id) {
		return Change{}, false // nothing changed
	}
	_, err := h.cfg.Layer.Join(w)
	c := Change{Worker: id, Identity: w.Identity, Err: err, Kind: ChangeRecovered}
	switch {
	case !member:
		c.Kind = ChangeJoined
	case cur.Identity != w.Identity:
		c.Kind = ChangeRestarted
	}
	if err == nil {
		h.joined[id] = true
	}
	return c, true
}

// healthBody is the JSON a worker's health check may answer with.
type healthBody struct {
	Identity  string `json:"identity"`
	FirstRank *int   `json:"first_rank"`
	Ranks     *int   `json:"ranks"`
}

// check fetches one endpoint's health check.
func (h *Health) check(ctx context.Context, ep Endpoint) report {
	fail := func(reason string, err error) report {
		return report{err: &HealthError{Worker: ep.ID, Reason: reason, Err: err}}
	}
	ctx, cancel := context.WithTimeout(ctx, h.cfg.Timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, ep.URL, nil)
	if err != nil {
		return fail("bad URL", err)
	}
	resp, err := h.client.Do(req)
	if err != nil {
		return fail("no answer", err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, maxHealthBody))
	if err != nil {
		return fail("answer cut", err)
	}
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		return fail(fmt.Sprintf("status %d", resp.StatusCode), nil)
	}
	var hb healthBody
	if len(body) > 0 && json.Valid(body) {
		_ = json.Unmarshal(body, &hb) // fields of the wrong type are ignored
	}
	w := affinity.Worker{ID: ep.ID, Identity: hb.Identity}
	if v := resp.Header.Get(HeaderIdentity); v != "" {
		w.Identity = v
	}
	if w.Identity == "" {
		w.Identity = ep.Identity
	}
	if w.Identity == "" {
		return fail("the answer names no identity", nil)
	}
	if hb.FirstRank != nil {
		w.FirstRank = *hb.FirstRank
	}
	if hb.Ranks != nil {
		w.Ranks = *hb.Ranks
	}
	for _, f := range []struct {
		name string
		dst  *int
	}{{HeaderFirstRank, &w.FirstRank}, {HeaderRanks, &w.Ranks}} {
		if v := resp.Header.Get(f.name); v != "" {
			n, err := strconv.Atoi(v)
			if err != nil {
				return fail("bad "+f.name, err)
			}
			*f.dst = n
		}
	}
	return report{worker: w}
}

// Run passes every Interval until ctx ends, the first pass at once; it
// returns ctx's error. Run usually runs in its own goroutine, so call Pass
// once before serving: until a pass has joined the workers, the layer has
// no members and every request fails with affinity.ErrNoCandidates (503).
func (h *Health) Run(ctx context.Context) error {
	t := time.NewTicker(h.cfg.Interval)
	defer t.Stop()
	for {
		h.Pass(ctx)
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-t.C:
		}
	}
}

// HealthStats counts what a Health poller did beyond the changes it
// reports.
type HealthStats struct {
	// Ejections: workers failed by passive ejection (ChangeEjected).
	Ejections uint64
}

// Stats returns the poller's counters (cumulative).
func (h *Health) Stats() HealthStats { return HealthStats{Ejections: h.ejections.Load()} }

// Observe tells the poller what a send to worker came to, for passive
// ejection (HealthConfig.EjectAfter): a DefinitelyNotAccepted outcome (a
// refusal, or a connect that failed or timed out) counts toward ejecting
// it, any other outcome resets the count. At EjectAfter in a row, a
// worker this poller watches that is up is failed at once (Layer.Fail),
// and OnChange is called with ChangeEjected from Observe's caller; a
// check that passes after it joins the worker back (ChangeRecovered). A
// Proxy with its Health set calls Observe for every send. It does not wait
// for a pass in progress.
func (h *Health) Observe(worker string, o placement.Outcome) {
	if h.cfg.EjectAfter < 0 {
		return
	}
	h.emu.Lock()
	if o != placement.DefinitelyNotAccepted || !h.watched[worker] {
		delete(h.refusals, worker)
		h.emu.Unlock()
		return
	}
	h.refusals[worker]++
	if h.refusals[worker] < h.cfg.EjectAfter {
		h.emu.Unlock()
		return
	}
	delete(h.refusals, worker)
	h.emu.Unlock()
	var cur affinity.WorkerInfo
	for _, w := range h.cfg.Layer.Workers() {
		if w.ID == worker {
			cur = w
		}
	}
	if cur.State != affinity.WorkerUp {
		return // not a member, or failed already
	}
	h.emu.Lock()
	h.ejectSeq++
	h.ejectedAt[worker] = h.ejectSeq
	h.emu.Unlock()
	c := Change{Worker: worker, Kind: ChangeEjected, Identity: cur.Identity}
	if err := h.cfg.Layer.Fail(worker); err != nil {
		c.Err = err
	} else {
		h.ejections.Add(1)
	}
	if h.cfg.OnChange != nil {
		h.cfg.OnChange(c)
	}
}

// ejectedSince reports whether worker was ejected after the ejection
// sequence number seq (during a pass that began at seq).
func (h *Health) ejectedSince(worker string, seq uint64) bool {
	h.emu.Lock()
	defer h.emu.Unlock()
	return h.ejectedAt[worker] > seq
}
