package main

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/placementlab/placement/impl/claims"
	"github.com/placementlab/placement/impl/claims/etcdstore"
	"github.com/placementlab/placement/impl/claims/etcdstore/embedded"
	"github.com/placementlab/placement/impl/claims/memstore"
	"github.com/placementlab/placement/impl/placement"
	"github.com/placementlab/placement/impl/replica"
)

// workers are the workers every rig registers.
var workers = []string{"w1", "w2", "w3", "w4"}

// opener opens a store handle of a replica (or of the workers) and returns
// what closes it.
type opener func(ctx context.Context, name string) (claims.Store, func(), error)

// etcdOpener opens etcdstore handles on cl under prefix, each with a client
// of its own (as a replica process has), in the default configuration.
func etcdOpener(cl *embedded.Cluster, prefix string) opener {
	return func(ctx context.Context, name string) (claims.Store, func(), error) {
		cli, err := cl.NewClient()
		if err != nil {
			return nil, nil, err
		}
		s, err := etcdstore.New(ctx, cli, name, claims.Options{Prefix: prefix})
		if err != nil {
			_ = cli.Close()
			return nil, nil, err
		}
		return s, func() { _ = s.Shutdown(); _ = cli.Close() }, nil
	}
}

// memOpener opens handles of one in-memory backend; the first handle's
// closer (the workers', closed last) closes the backend too.
func memOpener() opener {
	be := memstore.NewBackend(memstore.Config{})
	first := true
	return func(_ context.Context, name string) (claims.Store, func(), error) {
		s := be.Open(name)
		if first {
			first = false
			return s, func() { _ = s.Shutdown(); _ = be.Close() }, nil
		}
		return s, func() { _ = s.Shutdown() }, nil
	}
}

// rig is a claim store with the workers registered and replicas on
// handles of their own, every part in its default configuration.
type rig struct {
	reps    []*replica.Coordinator
	closers []func()
}

// newRig registers the workers through a handle of its own and starts n
// replicas named replica-0 .. replica-n-1.
func newRig(ctx context.Context, n int, open opener) (_ *rig, err error) {
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	r := &rig{}
	defer func() {
		if err != nil {
			r.Close()
		}
	}()
	ws, done, err := open(ctx, "workers")
	if err != nil {
		return nil, fmt.Errorf("open the workers' store: %w", err)
	}
	r.closers = append(r.closers, done)
	for _, w := range workers {
		if _, err := ws.Register(ctx, w, "boot-1"); err != nil {
			return nil, fmt.Errorf("register %s: %w", w, err)
		}
	}
	for i := range n {
		name := fmt.Sprintf("replica-%d", i)
		s, done, err := open(ctx, name)
		if err != nil {
			return nil, fmt.Errorf("open %s's store: %w", name, err)
		}
		r.closers = append(r.closers, done)
		c, err := replica.New(ctx, replica.Config{Store: s, Name: name})
		if err != nil {
			return nil, fmt.Errorf("start %s: %w", name, err)
		}
		r.reps = append(r.reps, c)
	}
	return r, nil
}

// Close closes the replicas, then the stores and their clients.
func (r *rig) Close() {
	for _, c := range r.reps {
		_ = c.Close()
	}
	for i := len(r.closers) - 1; i >= 0; i-- {
		r.closers[i]()
	}
	r.reps, r.closers = nil, nil
}

// errHit: a session's first turn was a cached hit.
var errHit = errors.New("a hit on a session's first turn")

// turnTimes is how long a first turn's parts took.
type turnTimes struct {
	// start is Start's latency: the claim read or written, the target
	// known (what the request waits before its dispatch).
	start time.Duration
	// whole adds Complete(Accepted) (the replica's Hold) and Done (the
	// terminal Close when final).
	whole time.Duration
}

// firstTurn runs a session's first turn on c, accepted, ended by
// Done(final), and times it.
func firstTurn(ctx context.Context, c *replica.Coordinator, key string, final bool) (turnTimes, error) {
	t0 := time.Now()
	t, err := c.Start(ctx, key, nil)
	if err != nil {
		return turnTimes{}, err
	}
	started := time.Since(t0)
	if t.Hit() {
		t.Done(final)
		return turnTimes{}, fmt.Errorf("session %q: %w", key, errHit)
	}
	err = t.Complete(placement.Accepted)
	t.Done(final)
	return turnTimes{start: started, whole: time.Since(t0)}, err
}

// routed is where a replica's turn on a session went.
type routed struct {
	target    claims.Target
	rev       int64
	unclaimed bool
	err       error
	took      time.Duration // the turn, Start to Done
}

// probe runs one turn of key on c (a cached hit, or a placing turn that is
// accepted) and reports where it was routed; the session stays open.
func probe(ctx context.Context, c *replica.Coordinator, key string) (r routed) {
	t0 := time.Now()
	defer func() { r.took = time.Since(t0) }()
	t, err := c.Start(ctx, key, nil)
	if err != nil {
		return routed{err: err}
	}
	defer t.Done(false)
	if !t.Hit() {
		if err := t.Complete(placement.Accepted); err != nil {
			return routed{err: err}
		}
	}
	return routed{target: t.Target(), rev: t.Rev(), unclaimed: t.Unclaimed()}
}

// slowCall is a store call's duration, operation and error.
type slowCall struct {
	op   string
	took time.Duration
	err  error
}

// timedStore is a claims.Store that keeps its slowest call since the last
// take (a diagnostic: it changes nothing else).
type timedStore struct {
	claims.Store
	mu      sync.Mutex
	slowest slowCall
}

func (s *timedStore) note(op string, t0 time.Time, err error) {
	d := time.Since(t0)
	s.mu.Lock()
	if d > s.slowest.took {
		s.slowest = slowCall{op, d, err}
	}
	s.mu.Unlock()
}

// take returns the slowest call since the last take, and forgets it.
func (s *timedStore) take() slowCall {
	s.mu.Lock()
	defer s.mu.Unlock()
	c := s.slowest
	s.slowest = slowCall{}
	return c
}

func (s *timedStore) CreateOrGet(ctx context.Context, key string, propose func() (claims.Target, error)) (claims.Claim, bool, error) {
	t0 := time.Now()
	c, created, err := s.Store.CreateOrGet(ctx, key, propose)
	s.note("CreateOrGet", t0, err)
	return c, created, err
}

func (s *timedStore) Get(ctx context.Context, key string) (claims.Claim, bool, error) {
	t0 := time.Now()
	c, ok, err := s.Store.Get(ctx, key)
	s.note("Get", t0, err)
	return c, ok, err
}

func (s *timedStore) Hold(ctx context.Context, key string, rev int64, replica string) error {
	t0 := time.Now()
	err := s.Store.Hold(ctx, key, rev, replica)
	s.note("Hold", t0, err)
	return err
}

func (s *timedStore) Unhold(ctx context.Context, key string, replica string) error {
	t0 := time.Now()
	err := s.Store.Unhold(ctx, key, replica)
	s.note("Unhold", t0, err)
	return err
}

func (s *timedStore) Close(ctx context.Context, key string, rev int64, replica string) (claims.CloseResult, error) {
	t0 := time.Now()
	r, err := s.Store.Close(ctx, key, rev, replica)
	s.note("Close", t0, err)
	return r, err
}

func (s *timedStore) Touch(ctx context.Context, key string, rev int64) error {
	t0 := time.Now()
	err := s.Store.Touch(ctx, key, rev)
	s.note("Touch", t0, err)
	return err
}

func (s *timedStore) Members(ctx context.Context) ([]claims.Member, int64, error) {
	t0 := time.Now()
	m, rev, err := s.Store.Members(ctx)
	s.note("Members", t0, err)
	return m, rev, err
}

// timed wraps every replica store open returns (not the workers') in a
// timedStore, collected in *into.
func timed(open opener, into *[]*timedStore) opener {
	var mu sync.Mutex
	return func(ctx context.Context, name string) (claims.Store, func(), error) {
		s, done, err := open(ctx, name)
		if err != nil || name == "workers" {
			return s, done, err
		}
		ts := &timedStore{Store: s}
		mu.Lock()
		*into = append(*into, ts)
		mu.Unlock()
		return ts, done, nil
	}
}
