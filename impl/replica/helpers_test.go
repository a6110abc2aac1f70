package replica

import (
	"context"
	"fmt"
	"os"
	"runtime"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/placementlab/placement/impl/claims"
	"github.com/placementlab/placement/impl/claims/memstore"
	"github.com/placementlab/placement/impl/placement"
)

// countingStore is a claims.Store that counts the calls of each method.
type countingStore struct {
	claims.Store
	mu    sync.Mutex
	calls map[string]int
	total atomic.Int64
	// createDelay, if set, is slept inside CreateOrGet (before the store
	// call) so that concurrent first turns overlap.
	createDelay time.Duration
	// afterCreate, if set, runs once after a CreateOrGet's store call and
	// before its answer returns (the answer read before what it does).
	afterCreate atomic.Pointer[func()]
}

func newCounting(s claims.Store) *countingStore {
	return &countingStore{Store: s, calls: map[string]int{}}
}

func (s *countingStore) count(m string) {
	s.total.Add(1)
	s.mu.Lock()
	s.calls[m]++
	s.mu.Unlock()
}

// n returns how often method m was called.
func (s *countingStore) n(m string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.calls[m]
}

func (s *countingStore) CreateOrGet(ctx context.Context, key string, propose func() (claims.Target, error)) (claims.Claim, bool, error) {
	s.count("CreateOrGet")
	if s.createDelay > 0 {
		time.Sleep(s.createDelay)
	}
	cl, created, err := s.Store.CreateOrGet(ctx, key, propose)
	if f := s.afterCreate.Swap(nil); f != nil {
		(*f)()
	}
	return cl, created, err
}

func (s *countingStore) Get(ctx context.Context, key string) (claims.Claim, bool, error) {
	s.count("Get")
	return s.Store.Get(ctx, key)
}

func (s *countingStore) Hold(ctx context.Context, key string, rev int64, replica string) error {
	s.count("Hold")
	return s.Store.Hold(ctx, key, rev, replica)
}

func (s *countingStore) Unhold(ctx context.Context, key string, replica string) error {
	s.count("Unhold")
	return s.Store.Unhold(ctx, key, replica)
}

func (s *countingStore) Close(ctx context.Context, key string, rev int64, replica string) (claims.CloseResult, error) {
	s.count("Close")
	return s.Store.Close(ctx, key, rev, replica)
}

func (s *countingStore) Quarantine(ctx context.Context, key string, rev int64, attempt uint64, gen int64) (claims.Claim, error) {
	s.count("Quarantine")
	return s.Store.Quarantine(ctx, key, rev, attempt, gen)
}

func (s *countingStore) Resolve(ctx context.Context, key string, attempt uint64, gen int64, accepted bool) (claims.Claim, bool, error) {
	s.count("Resolve")
	return s.Store.Resolve(ctx, key, attempt, gen, accepted)
}

func (s *countingStore) Touch(ctx context.Context, key string, rev int64) error {
	s.count("Touch")
	return s.Store.Touch(ctx, key, rev)
}

func (s *countingStore) Members(ctx context.Context) ([]claims.Member, int64, error) {
	s.count("Members")
	return s.Store.Members(ctx)
}

func (s *countingStore) ReplicaID(ctx context.Context, replica string) (uint64, error) {
	s.count("ReplicaID")
	return s.Store.ReplicaID(ctx, replica)
}

func (s *countingStore) Events(ctx context.Context) (<-chan claims.Event, error) {
	s.count("Events")
	return s.Store.Events(ctx)
}

// env is a memstore backend with registered workers and replicas on it.
type env struct {
	t       *testing.T
	b       *memstore.Backend
	workers claims.Store // the handle the workers registered through
	clock   *placement.ManualClock
	ttl     time.Duration
}

// newEnv starts a backend (on clock when not nil) with workers w1..wn
// registered.
func newEnv(t *testing.T, n int, clock *placement.ManualClock, ttl time.Duration) *env {
	t.Helper()
	if ttl == 0 {
		ttl = time.Minute
	}
	b := memstore.NewBackend(memstore.Config{IdleTTL: ttl, Clock: clock})
	t.Cleanup(func() { _ = b.Close() })
	e := &env{t: t, b: b, workers: b.Open("workers"), clock: clock, ttl: ttl}
	for i := 1; i <= n; i++ {
		_, err := e.workers.Register(context.Background(), fmt.Sprintf("w%d", i), "boot-1")
		require.NoError(t, err)
	}
	return e
}

// replica opens a store handle of name (wrapped in a countingStore) and a
// Coordinator on it, closed at the end of the test.
func (e *env) replica(name string, mod ...func(*Config)) (*Coordinator, *countingStore) {
	e.t.Helper()
	cs := newCounting(e.b.Open(name))
	cfg := Config{Store: cs, Name: name, IdleTTL: e.ttl, Clock: e.clock, StoreTimeout: 2 * time.Second,
		StoreRetry: 50 * time.Millisecond}
	for _, m := range mod {
		m(&cfg)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	c, err := New(ctx, cfg)
	require.NoError(e.t, err)
	e.t.Cleanup(func() { _ = c.Close(); _ = cs.Shutdown() })
	return c, cs
}

// to proposes worker w.
func to(w string) Propose {
	return func([]claims.Member, []claims.Target) (claims.Target, error) {
		return claims.Target{Worker: w}, nil
	}
}

// tctx is a test's context for one call.
func tctx(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// serve runs one whole turn of key on c: Start, Complete(out) on a
// placing turn (or a hit), Done(final). It returns the turn (ended).
func serve(t *testing.T, c *Coordinator, key string, propose Propose, out placement.Outcome, final bool) served {
	t.Helper()
	tu, err := c.Start(tctx(t), key, propose)
	require.NoError(t, err)
	require.NoError(t, tu.Complete(out))
	sv := snapshot(tu)
	tu.Done(final)
	return sv
}

// served is what a turn said just before its Done (a Turn is inert
// after it: its state serves later requests).
type served struct {
	hit, unclaimed bool
	target         claims.Target
	rev, gen       int64
	attempt        uint64
}

func snapshot(tu Turn) served {
	return served{hit: tu.Hit(), unclaimed: tu.Unclaimed(), target: tu.Target(), rev: tu.Rev(), gen: tu.Gen(), attempt: tu.Attempt()}
}

func (s served) Hit() bool             { return s.hit }
func (s served) Unclaimed() bool       { return s.unclaimed }
func (s served) Target() claims.Target { return s.target }
func (s served) Rev() int64            { return s.rev }
func (s served) Gen() int64            { return s.gen }
func (s served) Attempt() uint64       { return s.attempt }

// open runs Start and Complete(Accepted) of key on c and leaves the turn
// holding its lease.
func open(t *testing.T, c *Coordinator, key string, propose Propose) Turn {
	t.Helper()
	tu, err := c.Start(tctx(t), key, propose)
	require.NoError(t, err)
	require.NoError(t, tu.Complete(placement.Accepted))
	return tu
}

// claimOf returns key's claim in the backend.
func (e *env) claimOf(key string) (claims.Claim, bool) { return e.b.Claim(key) }

// settleGoroutines waits until the goroutine count is at most want.
func settleGoroutines(t *testing.T, want int) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for runtime.NumGoroutine() > want {
		if time.Now().After(deadline) {
			buf := make([]byte, 1<<20)
			n := runtime.Stack(buf, true)
			t.Fatalf("goroutines: %d, want at most %d\n%s", runtime.NumGoroutine(), want, buf[:n])
		}
		time.Sleep(5 * time.Millisecond)
	}
}

const waitFor, tick = 5 * time.Second, 2 * time.Millisecond

// getenvUint returns the environment variable name as a number (0 if
// unset or not a number).
func getenvUint(name string) uint64 {
	v, err := strconv.ParseUint(os.Getenv(name), 10, 64)
	if err != nil {
		return 0
	}
	return v
}
