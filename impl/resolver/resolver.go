package resolver

import (
	"context"
	"errors"
	"fmt"
	"math"
	"sync"
	"time"

	"github.com/placementlab/placement/impl/affinity"
	"github.com/placementlab/placement/impl/placement"
)

// Verdict is what a Status learned about a quarantined attempt. The zero
// Verdict is Unknown, so a Status that returns early says nothing.
type Verdict uint8

const (
	// Unknown: nothing is known yet; the resolver asks again after a
	// backoff. An error from a Status counts as Unknown.
	Unknown Verdict = iota
	// Arrived: the attempt reached its target: the resolver settles the
	// quarantine with placement.ResolveAccepted.
	Arrived
	// NotArrived: the attempt did not reach its target and never will (the
	// answer is a promise: see Ledger): the resolver settles the quarantine
	// with placement.ResolveNotAccepted.
	NotArrived
)

// String names v as the Ledger's JSON answers do.
func (v Verdict) String() string {
	switch v {
	case Unknown:
		return "unknown"
	case Arrived:
		return "arrived"
	case NotArrived:
		return "not-arrived"
	}
	return fmt.Sprintf("Verdict(%d)", uint8(v))
}

// Status asks whether the quarantined attempt q reached its target
// (q.Target, attempt q.Attempt). The router supplies it (HTTPStatus asks a
// worker's Ledger). It must return when ctx ends: the resolver waits for
// every call it starts. An error counts as Unknown.
type Status func(ctx context.Context, q affinity.Quarantine) (Verdict, error)

// Source is what the resolver works on: an *affinity.Layer, or a stand-in
// (a test's, a replay's) with the same three methods.
type Source interface {
	// Quarantined lists the live quarantines.
	Quarantined() []affinity.Quarantine
	// Resolve settles one, fenced by its attempt and generation.
	Resolve(q affinity.Quarantine, res placement.Resolution) error
	// Now is the clock Quarantine.Since and Expires are read on.
	Now() time.Duration
}

var _ Source = (*affinity.Layer)(nil)

// Defaults of Config's zero fields.
const (
	DefaultInterval        = time.Second
	DefaultMinBackoff      = time.Second
	DefaultMaxBackoff      = time.Minute
	DefaultPerCallTimeout  = 2 * time.Second
	DefaultMaxCallsPerPass = 256
	DefaultConcurrency     = 4
)

// Config configures a Resolver. Source and Status are required; every
// other zero field means its default.
type Config struct {
	// Source is the layer whose quarantines are settled.
	Source Source
	// Status asks whether an attempt arrived.
	Status Status
	// Interval is how long Run waits between two passes (on the runtime
	// clock: Run is for a running router; a simulation host calls Pass).
	// Zero means DefaultInterval.
	Interval time.Duration
	// MinBackoff and MaxBackoff bound the pause before a quarantine whose
	// answer was Unknown is asked again: the n-th Unknown in a row waits
	// a jittered MinBackoff·2^(n-1), at most MaxBackoff (see the package
	// doc, rule R3). Zero means DefaultMinBackoff, DefaultMaxBackoff.
	MinBackoff, MaxBackoff time.Duration
	// Seed seeds the jitter: the same seed, the same quarantines and the
	// same answers give the same schedule.
	Seed uint64
	// MaxCallsPerPass bounds the Status calls of one pass. Zero means
	// DefaultMaxCallsPerPass; negative is invalid.
	MaxCallsPerPass int
	// CallsPerSecond, when positive, bounds Status calls over time with a
	// token bucket of Burst tokens refilled at CallsPerSecond on the
	// Source's clock. Zero means no such bound.
	CallsPerSecond float64
	// Burst is the token bucket's size; zero means
	// max(1, ceil(CallsPerSecond)).
	Burst int
	// PerCallTimeout bounds each Status call (the context it gets). Zero
	// means DefaultPerCallTimeout.
	PerCallTimeout time.Duration
	// ExpiryMargin: a quarantine whose Expires is at most ExpiryMargin
	// away is not asked (its answer could not come back in time to
	// matter). Zero means PerCallTimeout.
	ExpiryMargin time.Duration
	// Concurrency bounds the Status calls of a pass in flight at once.
	// 1 makes every call in the pass's goroutine, in list order. Zero
	// means DefaultConcurrency.
	Concurrency int
}

// ErrInvalidConfig: New was given an invalid Config (see *ConfigError).
var ErrInvalidConfig = errors.New("resolver: invalid config")

// ConfigError names the Config (or LedgerConfig) field that is invalid.
type ConfigError struct{ Field, Reason string }

// Error describes the error.
func (e *ConfigError) Error() string {
	return "resolver: invalid config: " + e.Field + ": " + e.Reason
}

// Is reports whether target is ErrInvalidConfig.
func (e *ConfigError) Is(target error) bool { return target == ErrInvalidConfig }

// StatusPanicError is the error a Status call that panicked counts as.
type StatusPanicError struct{ Value any }

// Error describes the error.
func (e *StatusPanicError) Error() string {
	return fmt.Sprintf("resolver: status panicked: %v", e.Value)
}

func (c Config) withDefaults() (Config, error) {
	if c.Source == nil {
		return c, &ConfigError{"Source", "is required"}
	}
	if c.Status == nil {
		return c, &ConfigError{"Status", "is required"}
	}
	for _, d := range []struct {
		name string
		v    time.Duration
	}{{"Interval", c.Interval}, {"MinBackoff", c.MinBackoff}, {"MaxBackoff", c.MaxBackoff},
		{"PerCallTimeout", c.PerCallTimeout}, {"ExpiryMargin", c.ExpiryMargin}} {
		if d.v < 0 {
			return c, &ConfigError{d.name, fmt.Sprintf("must not be negative, got %v", d.v)}
		}
	}
	if c.MaxCallsPerPass < 0 {
		return c, &ConfigError{"MaxCallsPerPass", fmt.Sprintf("must not be negative, got %d", c.MaxCallsPerPass)}
	}
	if c.CallsPerSecond < 0 || math.IsNaN(c.CallsPerSecond) || math.IsInf(c.CallsPerSecond, 0) {
		return c, &ConfigError{"CallsPerSecond", fmt.Sprintf("must be a finite number >= 0, got %v", c.CallsPerSecond)}
	}
	if c.Burst < 0 {
		return c, &ConfigError{"Burst", fmt.Sprintf("must not be negative, got %d", c.Burst)}
	}
	if c.Concurrency < 0 {
		return c, &ConfigError{"Concurrency", fmt.Sprintf("must not be negative, got %d", c.Concurrency)}
	}
	if c.Interval == 0 {
		c.Interval = DefaultInterval
	}
	if c.MinBackoff == 0 {
		c.MinBackoff = DefaultMinBackoff
	}
	if c.MaxBackoff == 0 {
		c.MaxBackoff = max(DefaultMaxBackoff, c.MinBackoff)
	}
	if c.MinBackoff > c.MaxBackoff {
		return c, &ConfigError{"MinBackoff", fmt.Sprintf("%v is above MaxBackoff %v", c.MinBackoff, c.MaxBackoff)}
	}
	if c.PerCallTimeout == 0 {
		c.PerCallTimeout = DefaultPerCallTimeout
	}
	if c.ExpiryMargin == 0 {
		c.ExpiryMargin = c.PerCallTimeout
	}
	if c.MaxCallsPerPass == 0 {
		c.MaxCallsPerPass = DefaultMaxCallsPerPass
	}
	if c.Concurrency == 0 {
		c.Concurrency = DefaultConcurrency
	}
	if c.CallsPerSecond > 0 && c.Burst == 0 {
		c.Burst = max(1, int(math.Ceil(c.CallsPerSecond)))
	}
	return c, nil
}

// Stats are the resolver's counters (cumulative, never going down) and
// one gauge, Tracked.
type Stats struct {
	// Passes: passes run (Pass calls, and Run's).
	Passes uint64
	// Asked: Status calls made; each ends as exactly one of Arrived,
	// NotArrived, Unknown or Errors.
	Asked, Arrived, NotArrived, Unknown, Errors uint64
	// ResolvedAccepted and ResolvedNotAccepted: quarantines this resolver
	// settled (Resolve returned nil).
	ResolvedAccepted, ResolvedNotAccepted uint64
	// StaleAtBirth: Resolve(Accepted) settled the quarantine but bound
	// nothing: the target's worker restarted meanwhile.
	StaleAtBirth uint64
	// Fenced: Resolve found the quarantine already over (settled by a late
	// result, another resolver, a restart, or its QuarantineTTL, between
	// the listing and the Resolve): nothing changed.
	Fenced uint64
	// ResolveErrors: Resolve failed otherwise (the Source closed, or a
	// stand-in Source's own error).
	ResolveErrors uint64
	// BudgetExhausted: quarantines that were due but not asked in a pass
	// because its budget (MaxCallsPerPass, CallsPerSecond) was spent; they
	// are asked in a later pass, without backoff.
	BudgetExhausted uint64
	// Expired: quarantines the resolver saw end, as far as it can tell, by
	// QuarantineTTL before it settled them: skipped once for being within
	// ExpiryMargin of Expires, or gone from the listing at or after their
	// Expires. Each quarantine counts at most once.
	Expired uint64
	// Tracked: quarantines the resolver holds backoff state for now (at
	// most those the last pass listed).
	Tracked int
}

// Outcome is what one pass did with one quarantine it asked about.
type Outcome struct {
	Quarantine affinity.Quarantine
	// Verdict is the Status's answer (Unknown when StatusErr is set).
	Verdict   Verdict
	StatusErr error
	// Resolution is what the resolver settled it with (zero: not
	// settled, the verdict was Unknown); ResolveErr is Resolve's error.
	Resolution placement.Resolution
	ResolveErr error
}

// PassResult is what one pass did.
type PassResult struct {
	// Now is the Source's clock when the pass listed the quarantines.
	Now time.Duration
	// Listed: quarantines listed; NotDue: those in backoff; TooClose:
	// those within ExpiryMargin of Expires; BudgetExhausted: those due but
	// left for a later pass.
	Listed, NotDue, TooClose, BudgetExhausted int
	// Outcomes has one entry per Status call, in listing order.
	Outcomes []Outcome
	// Resolved counts Outcomes that settled a quarantine; Fenced those
	// whose Resolve found it already over.
	Resolved, Fenced int
	// NextDue is the earliest time (on the Source's clock) a tracked
	// quarantine is due again, or -1 when none is tracked: when a
	// simulation host may next call Pass.
	NextDue time.Duration
	// Err is set when the pass stopped early: ctx's error, or
	// placement.ErrClosed from the Source.
	Err error
}

// qid names one quarantined attempt.
type qid struct {
	key                 affinity.Key
	phase               affinity.Phase
	attempt, generation uint64
}

// track is the resolver's state for one quarantine.
type track struct {
	next     time.Duration // due at
	unknowns int           // Unknown answers in a row
	expires  time.Duration
	expiring bool // counted in Expired
}

// Resolver settles quarantines by asking a Status. It is safe for
// concurrent use; passes are serialized.
type Resolver struct {
	cfg Config

	mu      sync.Mutex // serializes passes; guards the fields below
	tracked map[qid]*track
	tokens  float64
	last    time.Duration
	primed  bool

	smu   sync.Mutex // guards stats
	stats Stats
}

// New returns a resolver for cfg.
func New(cfg Config) (*Resolver, error) {
	c, err := cfg.withDefaults()
	if err != nil {
		return nil, err
	}
	return &Resolver{cfg: c, tracked: make(map[qid]*track), tokens: float64(c.Burst)}, nil
}

// Stats returns the counters.
func (r *Resolver) Stats() Stats {
	r.smu.Lock()
	defer r.smu.Unlock()
	return r.stats
}

func (r *Resolver) count(f func(s *Stats)) {
	r.smu.Lock()
	f(&r.stats)
	r.smu.Unlock()
}

// Run runs a pass every Interval until ctx ends (it returns ctx's error)
// or a Resolve reports the Source closed (placement.ErrClosed). Every
// Status call it started has returned when Run returns.
func (r *Resolver) Run(ctx context.Context) error {
	timer := time.NewTimer(0)
	defer timer.Stop()
	<-timer.C
	for {
		res := r.Pass(ctx)
		if errors.Is(res.Err, placement.ErrClosed) {
			return res.Err
		}
		if err := ctx.Err(); err != nil {
			return err
		}
		timer.Reset(r.cfg.Interval)
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-timer.C:
		}
	}
}

// Pass runs one pass: it lists the quarantines, forgets the state of those
// no longer listed, asks the Status about each that is due (within the
// budget, not too close to its expiry), and settles each definite answer
// through the Source's fenced Resolve, in listing order. Given the same
// Source state, clock, answers and Seed, it does the same thing.
func (r *Resolver) Pass(ctx context.Context) PassResult {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.count(func(s *Stats) { s.Passes++ })
	res := PassResult{NextDue: -1}
	if err := ctx.Err(); err != nil {
		res.Err = err
		return res
	}
	now := r.cfg.Source.Now()
	res.Now = now
	qs := r.cfg.Source.Quarantined()
	res.Listed = len(qs)
	r.forget(qs, now)
	r.refill(now)

	var due []affinity.Quarantine
	var exhausted, expired uint64
	for _, q := range qs {
		id := qid{q.Key, q.Phase, q.Attempt, q.Generation}
		t := r.tracked[id]
		if t == nil {
			t = &track{next: now, expires: q.Expires}
			r.tracked[id] = t
		}
		switch {
		case q.Expires-now <= r.cfg.ExpiryMargin:
			res.TooClose++
			if !t.expiring {
				t.expiring = true
				expired++
			}
		case t.next > now:
			res.NotDue++
		case len(due) >= r.cfg.MaxCallsPerPass || (r.cfg.CallsPerSecond > 0 && r.tokens < 1):
			res.BudgetExhausted++
			exhausted++
		default:
			if r.cfg.CallsPerSecond > 0 {
				r.tokens--
			}
			due = append(due, q)
		}
	}
	r.count(func(s *Stats) { s.BudgetExhausted += exhausted; s.Expired += expired })

	res.Outcomes = r.ask(ctx, due)
	after := r.cfg.Source.Now()
	for i := range res.Outcomes {
		o := &res.Outcomes[i]
		q := o.Quarantine
		id := qid{q.Key, q.Phase, q.Attempt, q.Generation}
		if o.StatusErr == nil && o.Verdict != Unknown && res.Err == nil {
			o.Resolution = placement.ResolveAccepted
			if o.Verdict == NotArrived {
				o.Resolution = placement.ResolveNotAccepted
			}
			o.ResolveErr = r.cfg.Source.Resolve(q, o.Resolution)
			r.settled(o, &res)
			if errors.Is(o.ResolveErr, placement.ErrClosed) {
				res.Err = o.ResolveErr
			}
			delete(r.tracked, id)
			continue
		}
		if o.StatusErr == nil && o.Verdict != Unknown {
			// The pass stopped (the Source closed) before this definite
			// answer could be used: it is asked again next time.
			o.Resolution = 0
			continue
		}
		if t := r.tracked[id]; t != nil {
			t.unknowns++
			t.next = after + r.backoff(id, t.unknowns)
		}
	}
	if res.Err == nil {
		res.Err = ctx.Err()
	}
	for _, t := range r.tracked {
		if !t.expiring && (res.NextDue < 0 || t.next < res.NextDue) {
			res.NextDue = max(t.next, now)
		}
	}
	n := len(r.tracked)
	r.count(func(s *Stats) { s.Tracked = n })
	return res
}

// settled counts a Resolve's result.
func (r *Resolver) settled(o *Outcome, res *PassResult) {
	err := o.ResolveErr
	switch {
	case err == nil:
		res.Resolved++
		r.count(func(s *Stats) {
			if o.Resolution == placement.ResolveAccepted {
				s.ResolvedAccepted++
			} else {
				s.ResolvedNotAccepted++
			}
		})
	case errors.Is(err, placement.ErrStaleAtBirth):
		res.Resolved++
		r.count(func(s *Stats) { s.StaleAtBirth++ })
	case errors.Is(err, placement.ErrNotQuarantined), errors.Is(err, placement.ErrFenced):
		res.Fenced++
		r.count(func(s *Stats) { s.Fenced++ })
	default:
		r.count(func(s *Stats) { s.ResolveErrors++ })
	}
}

// forget drops the state of quarantines qs no longer lists (bounded
// memory), counting those gone at or after their expiry.
func (r *Resolver) forget(qs []affinity.Quarantine, now time.Duration) {
	listed := make(map[qid]struct{}, len(qs))
	for _, q := range qs {
		listed[qid{q.Key, q.Phase, q.Attempt, q.Generation}] = struct{}{}
	}
	var expired uint64
	for id, t := range r.tracked {
		if _, ok := listed[id]; ok {
			continue
		}
		if !t.expiring && now >= t.expires {
			expired++
		}
		delete(r.tracked, id)
	}
	if expired > 0 {
		r.count(func(s *Stats) { s.Expired += expired })
	}
}

// refill adds the tokens earned since the last pass.
func (r *Resolver) refill(now time.Duration) {
	if r.cfg.CallsPerSecond <= 0 {
		return
	}
	if r.primed && now > r.last {
		r.tokens = min(float64(r.cfg.Burst), r.tokens+(now-r.last).Seconds()*r.cfg.CallsPerSecond)
	}
	r.primed = true
	r.last = max(r.last, now)
}

// ask calls the Status for each quarantine of due, at most Concurrency at
// once, and returns the answers in due's order.
func (r *Resolver) ask(ctx context.Context, due []affinity.Quarantine) []Outcome {
	out := make([]Outcome, len(due))
	if len(due) == 0 {
		return out
	}
	call := func(i int) {
		out[i].Quarantine = due[i]
		out[i].Verdict, out[i].StatusErr = r.call(ctx, due[i])
	}
	if r.cfg.Concurrency == 1 {
		for i := range due {
			call(i)
		}
	} else {
		sem := make(chan struct{}, r.cfg.Concurrency)
		var wg sync.WaitGroup
		for i := range due {
			sem <- struct{}{}
			wg.Add(1)
			go func() {
				defer wg.Done()
				defer func() { <-sem }()
				call(i)
			}()
		}
		wg.Wait()
	}
	var arrived, notArrived, unknown, errs uint64
	for i := range out {
		switch {
		case out[i].StatusErr != nil:
			out[i].Verdict = Unknown
			errs++
		case out[i].Verdict == Arrived:
			arrived++
		case out[i].Verdict == NotArrived:
			notArrived++
		default:
			out[i].Verdict = Unknown
			unknown++
		}
	}
	r.count(func(s *Stats) {
		s.Asked += uint64(len(out))
		s.Arrived += arrived
		s.NotArrived += notArrived
		s.Unknown += unknown
		s.Errors += errs
	})
	return out
}

// call makes one Status call under PerCallTimeout; a panic is an error.
func (r *Resolver) call(ctx context.Context, q affinity.Quarantine) (v Verdict, err error) {
	cctx, cancel := context.WithTimeout(ctx, r.cfg.PerCallTimeout)
	defer cancel()
	defer func() {
		if p := recover(); p != nil {
			v, err = Unknown, &StatusPanicError{Value: p}
		}
	}()
	v, err = r.cfg.Status(ContextWithNow(cctx, r.cfg.Source.Now), q)
	if err == nil && v > NotArrived {
		err = fmt.Errorf("resolver: status returned an invalid verdict %d", uint8(v))
	}
	return v, err
}

// backoff returns the pause after the n-th Unknown in a row (n >= 1):
// b = min(MaxBackoff, MinBackoff·2^(n-1)), jittered to [b/2, b] by a
// hash of the seed, the attempt and n.
func (r *Resolver) backoff(id qid, n int) time.Duration {
	b := r.cfg.MaxBackoff
	if n-1 < 62 {
		if d := r.cfg.MinBackoff << (n - 1); d > 0 && d>>(n-1) == r.cfg.MinBackoff && d < b {
			b = d
		}
	}
	h := splitmix(r.cfg.Seed ^ splitmix(id.attempt) ^ splitmix(id.generation<<8|uint64(id.phase)) ^ uint64(n)*0x9e3779b97f4a7c15)
	half := b / 2
	if b-half <= 0 {
		return b
	}
	return half + time.Duration(h%uint64(b-half+1))
}

// splitmix is SplitMix64's finalizer: a fixed, well-mixed hash of x.
func splitmix(x uint64) uint64 {
	x += 0x9e3779b97f4a7c15
	x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9
	x = (x ^ (x >> 27)) * 0x94d049bb133111eb
	return x ^ (x >> 31)
}
