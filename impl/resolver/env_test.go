package resolver_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/placementlab/placement/impl/affinity"
	"github.com/placementlab/placement/impl/placement"
	"github.com/placementlab/placement/impl/resolver"
)

// env is a real affinity layer on a manual clock at 0, with workers a, b
// and c (identity boot-1) joined.
type env struct {
	t   *testing.T
	l   *affinity.Layer
	clk *placement.ManualClock
	ns  affinity.Namespace
}

const qttl = 10 * time.Minute

var (
	wa = affinity.WorkerOnly("a")
	wb = affinity.WorkerOnly("b")
)

func newEnv(t *testing.T, tweak ...func(*affinity.Config)) *env {
	t.Helper()
	clk := placement.NewManualClock(0)
	cfg := affinity.Config{Clock: clk, FirstAttempt: 1000, QuarantineTTL: qttl}
	for _, f := range tweak {
		f(&cfg)
	}
	l, err := affinity.New(cfg)
	require.NoError(t, err)
	t.Cleanup(func() { _ = l.Close() })
	for _, id := range []string{"a", "b", "c"} {
		_, err := l.Join(affinity.Worker{ID: id, Identity: "boot-1"})
		require.NoError(t, err)
	}
	return &env{t: t, l: l, clk: clk, ns: affinity.Namespace{Model: "m", Tenant: "t"}}
}

func (e *env) req(id string) affinity.Request {
	e.t.Helper()
	k, err := e.ns.Session(id)
	require.NoError(e.t, err)
	return affinity.Request{Session: k}
}

// ambiguous runs a placing request of session id dispatched to target
// whose outcome is unknown, and returns its quarantine as listed.
func (e *env) ambiguous(id string, target affinity.Target) affinity.Quarantine {
	e.t.Helper()
	r := e.req(id)
	tr, err := e.l.Start(context.Background(), r)
	require.NoError(e.t, err)
	defer tr.Done()
	require.True(e.t, tr.Placing())
	a, err := tr.Dispatch(target)
	require.NoError(e.t, err)
	require.ErrorIs(e.t, a.Complete(placement.Ambiguous), placement.ErrAmbiguous)
	return e.quarantine(r.Session, a.ID())
}

// quarantine returns the listed quarantine of key's attempt.
func (e *env) quarantine(key affinity.Key, attempt uint64) affinity.Quarantine {
	e.t.Helper()
	for _, q := range e.l.Quarantined() {
		if q.Key == key && q.Attempt == attempt {
			return q
		}
	}
	e.t.Fatalf("no quarantine of attempt %d", attempt)
	return affinity.Quarantine{}
}

func (e *env) bound(id string) (affinity.Target, bool) {
	return e.l.Query(e.req(id).Session, affinity.PhaseDecode)
}

// placing reports whether a new request of session id places it (the
// session is neither bound nor quarantined).
func (e *env) placing(id string) bool {
	e.t.Helper()
	tr, err := e.l.Start(context.Background(), e.req(id))
	require.NoError(e.t, err)
	defer tr.Done()
	return tr.Placing()
}

func (e *env) resolver(st resolver.Status, tweak ...func(*resolver.Config)) *resolver.Resolver {
	e.t.Helper()
	cfg := resolver.Config{Source: e.l, Status: st, Concurrency: 1, MinBackoff: time.Second, MaxBackoff: time.Minute, Seed: 7}
	for _, f := range tweak {
		f(&cfg)
	}
	r, err := resolver.New(cfg)
	require.NoError(e.t, err)
	return r
}

// answers is a Status that answers by attempt id (Unknown by default)
// and records the attempts asked, in order.
type answers struct {
	mu    sync.Mutex
	by    map[uint64]resolver.Verdict
	err   map[uint64]error
	asked []uint64
}

func newAnswers() *answers {
	return &answers{by: map[uint64]resolver.Verdict{}, err: map[uint64]error{}}
}

func (a *answers) set(attempt uint64, v resolver.Verdict) {
	a.mu.Lock()
	a.by[attempt] = v
	a.mu.Unlock()
}

func (a *answers) status(_ context.Context, q affinity.Quarantine) (resolver.Verdict, error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.asked = append(a.asked, q.Attempt)
	return a.by[q.Attempt], a.err[q.Attempt]
}

func (a *answers) calls() []uint64 {
	a.mu.Lock()
	defer a.mu.Unlock()
	return append([]uint64(nil), a.asked...)
}

// always is a Status that always answers v.
func always(v resolver.Verdict) resolver.Status {
	return func(context.Context, affinity.Quarantine) (resolver.Verdict, error) { return v, nil }
}
