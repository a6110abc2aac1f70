package consumer

import (
	"context"
	"errors"
	"runtime"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/placementlab/placement/impl/affinity"
	"github.com/placementlab/placement/impl/placement"
)

// Worker is the target type a router gives the core: a worker and its
// data-parallel rank.
type Worker struct {
	ID   string
	Rank int
}

var errNoWorker = errors.New("consumer: no worker left to try")

// forwardFunc is the router's transport, as the README's request path
// takes it: it returns at the worker's first answer.
type forwardFunc func(ctx context.Context, w Worker, attempt uint64) (answer func(), out placement.Outcome)

// serve is the README's request, copied as a router would copy it.
func serve(ctx context.Context, c *placement.Coordinator[Worker], session string, workers []Worker, forward forwardFunc) error {
	a, err := c.Acquire(ctx, session)
	if err != nil {
		return err
	}
	defer a.Done()
	if a.Hit() {
		if answer, _ := forward(ctx, a.Lease.Target(), 0); answer != nil {
			answer()
		}
		return nil
	}
	tried := map[Worker]bool{}
	for {
		w, ok := leastLoaded(c, workers, tried)
		if !ok {
			return errNoWorker
		}
		tried[w] = true
		d, err := a.Reservation.BeginDispatch(w, c.Generation(w))
		if errors.Is(err, placement.ErrFenced) {
			continue
		} else if err != nil {
			return err
		}
		dctx, cancel := d.Context(ctx)
		answer, out := forward(dctx, w, d.Attempt())
		_, err = d.Complete(out)
		if answer != nil {
			answer()
		}
		cancel()
		if !errors.Is(err, placement.ErrNotAccepted) {
			return err
		}
	}
}

func leastLoaded(c *placement.Coordinator[Worker], workers []Worker, tried map[Worker]bool) (Worker, bool) {
	best, found := Worker{}, false
	for _, w := range workers {
		if !tried[w] && (!found || c.Bindings(w) < c.Bindings(best)) {
			best, found = w, true
		}
	}
	return best, found
}

// fakeWorkers answers each dispatch with the outcome its worker is set to,
// and records what was sent where.
type fakeWorkers struct {
	mu   sync.Mutex
	outs map[Worker]placement.Outcome
	sent []sent
}

type sent struct {
	W       Worker
	Attempt uint64
}

func (f *fakeWorkers) set(w Worker, o placement.Outcome) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.outs == nil {
		f.outs = map[Worker]placement.Outcome{}
	}
	f.outs[w] = o
}

func (f *fakeWorkers) forward(_ context.Context, w Worker, attempt uint64) (func(), placement.Outcome) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.sent = append(f.sent, sent{w, attempt})
	o, ok := f.outs[w]
	if !ok {
		o = placement.Accepted
	}
	if o == placement.Accepted {
		return func() {}, o
	}
	return nil, o
}

func (f *fakeWorkers) last() sent {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.sent[len(f.sent)-1]
}

func newCore(t *testing.T, cfg placement.Config[Worker]) *placement.Coordinator[Worker] {
	t.Helper()
	c, err := placement.New(cfg)
	require.NoError(t, err)
	t.Cleanup(func() { _ = c.Close() })
	return c
}

var (
	w0 = Worker{"w0", 0}
	w1 = Worker{"w1", 0}
)

// Core, request path: a first turn places the session under a fresh
// attempt id, a later turn is a hit with no attempt, and Done leaves no
// lease behind.
func TestContract_CoreRequestPath_PlaceThenHit(t *testing.T) {
	c := newCore(t, placement.Config[Worker]{Clock: placement.NewManualClock(0), FirstAttempt: 100})
	f := &fakeWorkers{}
	ctx := context.Background()

	require.NoError(t, serve(ctx, c, "s", []Worker{w0, w1}, f.forward))
	first := f.last()
	assert.Equal(t, uint64(100), first.Attempt, "a placing dispatch carries the attempt id")

	require.NoError(t, serve(ctx, c, "s", []Worker{w0, w1}, f.forward))
	assert.Equal(t, sent{first.W, 0}, f.last(), "a later turn goes to the binding and carries no attempt")

	info, err := c.Query("s")
	require.NoError(t, err)
	assert.Equal(t, placement.StateBound, info.State)
	assert.Zero(t, info.Leases, "Done ended every lease")
	s := c.Stats()
	assert.Equal(t, int64(1), s.Hits)
	assert.Equal(t, int64(1), s.Binds)
}

// Core, request path: a refusal (DefinitelyNotAccepted) is retried on
// another worker under a new attempt id; the session binds there.
func TestContract_CoreRequestPath_RefusalRetriesElsewhere(t *testing.T) {
	c := newCore(t, placement.Config[Worker]{Clock: placement.NewManualClock(0)})
	f := &fakeWorkers{}
	f.set(w0, placement.DefinitelyNotAccepted)
	require.NoError(t, serve(context.Background(), c, "s", []Worker{w0, w1}, f.forward))
	require.Len(t, f.sent, 2)
	assert.Equal(t, w0, f.sent[0].W)
	assert.Equal(t, w1, f.sent[1].W)
	assert.NotEqual(t, f.sent[0].Attempt, f.sent[1].Attempt, "attempt ids never repeat")
	info, err := c.Query("s")
	require.NoError(t, err)
	assert.Equal(t, w1, info.Target)
}

// Core, error values: an ambiguous dispatch quarantines the session
// (*AmbiguousError, ErrAmbiguous) and nothing is replayed until a fenced
// Resolve settles it; a stale resolve is *FencedError / ErrFenced.
func TestContract_CoreErrors_AmbiguousQuarantinesUntilResolved(t *testing.T) {
	c := newCore(t, placement.Config[Worker]{Clock: placement.NewManualClock(0)})
	f := &fakeWorkers{}
	f.set(w0, placement.Ambiguous)
	f.set(w1, placement.Ambiguous)
	ctx := context.Background()

	err := serve(ctx, c, "s", []Worker{w0, w1}, f.forward)
	var amb *placement.AmbiguousError[Worker]
	require.ErrorAs(t, err, &amb)
	assert.ErrorIs(t, err, placement.ErrAmbiguous)
	require.Len(t, f.sent, 1, "an ambiguous dispatch is never retried elsewhere")

	err = serve(ctx, c, "s", []Worker{w0, w1}, f.forward)
	assert.ErrorIs(t, err, placement.ErrAmbiguous, "quarantined: the next request is refused")
	assert.Len(t, f.sent, 1, "nothing replayed")

	qs := c.Quarantined()
	require.Len(t, qs, 1)
	q := qs[0]
	assert.Equal(t, amb.Attempt, q.Attempt)
	assert.Equal(t, amb.Target, q.Target)

	err = c.Resolve(q.Key, q.Attempt+1, q.Generation, placement.ResolveAccepted)
	assert.ErrorIs(t, err, placement.ErrFenced, "another attempt's resolve is fenced")
	var fe *placement.FencedError
	assert.ErrorAs(t, err, &fe)

	require.NoError(t, c.Resolve(q.Key, q.Attempt, q.Generation, placement.ResolveAccepted))
	assert.ErrorIs(t, c.Resolve(q.Key, q.Attempt, q.Generation, placement.ResolveAccepted), placement.ErrNotQuarantined)

	f.set(q.Target, placement.Accepted)
	require.NoError(t, serve(ctx, c, "s", []Worker{w0, w1}, f.forward))
	assert.Equal(t, sent{q.Target, 0}, f.last(), "resolved Accepted: bound to the attempt's target")
}

// Core, error values: every typed error matches its sentinel and carries
// its details (capacity, key length, config, clock).
func TestContract_CoreErrors_TypedAndSentinel(t *testing.T) {
	_, err := placement.New(placement.Config[Worker]{IdleTTL: -time.Second})
	assert.ErrorIs(t, err, placement.ErrInvalidConfig)
	var ce *placement.ConfigError
	assert.ErrorAs(t, err, &ce)

	clk := placement.NewManualClock(0)
	c := newCore(t, placement.Config[Worker]{Clock: clk, MaxEntries: 1, MaxKeyBytes: 4})
	ctx := context.Background()

	_, err = c.Acquire(ctx, "")
	assert.ErrorIs(t, err, placement.ErrKeyEmpty)
	_, err = c.Acquire(ctx, "12345")
	assert.ErrorIs(t, err, placement.ErrKeyTooLong)
	var kl *placement.KeyTooLongError
	assert.ErrorAs(t, err, &kl)

	a, err := c.Acquire(ctx, "a")
	require.NoError(t, err)
	defer a.Done()
	_, err = c.Acquire(ctx, "b")
	assert.ErrorIs(t, err, placement.ErrCapacity)
	var capErr *placement.CapacityError
	require.ErrorAs(t, err, &capErr)
	assert.Equal(t, 1, capErr.MaxEntries)

	err = clk.Advance(-time.Second)
	assert.ErrorIs(t, err, placement.ErrInvalidClock, "the manual clock never goes back")
	var clkErr *placement.ClockError
	assert.ErrorAs(t, err, &clkErr)
}

// Core, concurrency: while one request places a session the others wait
// (Stats.Waits) and then hit its binding; nothing is dispatched twice.
func TestContract_CoreConcurrency_WaitersHitOnePlacement(t *testing.T) {
	c := newCore(t, placement.Config[Worker]{})
	ctx := context.Background()
	a, err := c.Acquire(ctx, "s")
	require.NoError(t, err)
	require.False(t, a.Hit())

	const n = 8
	var wg sync.WaitGroup
	hits := make(chan Worker, n)
	for range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			b, err := c.Acquire(ctx, "s")
			if !assert.NoError(t, err) {
				return
			}
			defer b.Done()
			if assert.True(t, b.Hit()) {
				hits <- b.Lease.Target()
			}
		}()
	}
	require.Eventually(t, func() bool { return c.Stats().Waits == n }, 5*time.Second, time.Millisecond)
	_, err = a.Reservation.CommitAccepted(w1, c.Generation(w1))
	require.NoError(t, err)
	a.Done()
	wg.Wait()
	close(hits)
	for w := range hits {
		assert.Equal(t, w1, w)
	}
	assert.Equal(t, int64(n), c.Stats().Hits)
}

// Core, concurrency: a waiting Acquire ends when its context does
// (ErrCancelled), and Close wakes every waiter with ErrClosed.
func TestContract_CoreConcurrency_WaitsEndWithContextAndClose(t *testing.T) {
	c, err := placement.New(placement.Config[Worker]{})
	require.NoError(t, err)
	a, err := c.Acquire(context.Background(), "s")
	require.NoError(t, err)
	defer a.Done()

	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
	defer cancel()
	_, err = c.Acquire(ctx, "s")
	assert.ErrorIs(t, err, placement.ErrCancelled)

	done := make(chan error, 1)
	go func() {
		_, err := c.Acquire(context.Background(), "s")
		done <- err
	}()
	require.Eventually(t, func() bool { return c.Stats().Waits == 2 }, 5*time.Second, time.Millisecond)
	require.NoError(t, c.Close())
	select {
	case err := <-done:
		assert.ErrorIs(t, err, placement.ErrClosed)
	case <-time.After(5 * time.Second):
		t.Fatal("Close did not wake the waiter")
	}
	_, err = c.Acquire(context.Background(), "t")
	assert.ErrorIs(t, err, placement.ErrClosed)
}

// Goroutines: the default clock's ticker and the reaper start with New and
// end with Close (the core's and the layer's, with one coordinator per
// phase); a manual clock starts none.
func TestContract_Goroutines_EndAtClose(t *testing.T) {
	before := settledGoroutines()
	c, err := placement.New(placement.Config[Worker]{})
	require.NoError(t, err)
	assert.Greater(t, runtime.NumGoroutine(), before, "the default clock runs background work")
	require.NoError(t, c.Close())
	assertGoroutinesBack(t, before, "every goroutine New started has ended when Close returns")

	l, err := affinity.New(affinity.Config{})
	require.NoError(t, err)
	require.NoError(t, l.Close())
	assertGoroutinesBack(t, before, "the layer's too")

	m, err := placement.New(placement.Config[Worker]{Clock: placement.NewManualClock(0)})
	require.NoError(t, err)
	assertGoroutinesBack(t, before, "a manual clock starts no goroutine")
	require.NoError(t, m.Close())
}

// settledGoroutines returns the goroutine count once the earlier tests'
// goroutines (loopback servers, connections) have finished returning: the
// count, unchanged for 20 ms (at most a second of waiting).
func settledGoroutines() int {
	n, since := runtime.NumGoroutine(), time.Now()
	for deadline := time.Now().Add(time.Second); time.Now().Before(deadline) && time.Since(since) < 20*time.Millisecond; {
		time.Sleep(time.Millisecond)
		if m := runtime.NumGoroutine(); m != n {
			n, since = m, time.Now()
		}
	}
	return n
}

// assertGoroutinesBack asserts the goroutine count is back to before. A
// background goroutine signals its end to Close just before it returns,
// so it may be counted for a moment after Close (longer under -race):
// polled for up to a second.
func assertGoroutinesBack(t *testing.T, before int, msg string) {
	t.Helper()
	for deadline := time.Now().Add(time.Second); runtime.NumGoroutine() > before && time.Now().Before(deadline); {
		time.Sleep(time.Millisecond)
	}
	assert.LessOrEqual(t, runtime.NumGoroutine(), before, msg)
}

// Resource bounds: a zero Config is a working configuration with the
// documented defaults, and every bound is visible in Config().
func TestContract_ResourceBounds_ZeroConfigDefaults(t *testing.T) {
	c := newCore(t, placement.Config[Worker]{Clock: placement.NewManualClock(0)})
	cfg := c.Config()
	assert.Equal(t, placement.DefaultIdleTTL, cfg.IdleTTL)
	assert.Equal(t, placement.DefaultReserveTimeout, cfg.ReserveTimeout)
	assert.Equal(t, placement.DefaultDispatchTimeout, cfg.DispatchTimeout)
	assert.Equal(t, placement.DefaultQuarantineTTL, cfg.QuarantineTTL)
	assert.Equal(t, placement.DefaultMaxEntries, cfg.MaxEntries)
	assert.Equal(t, placement.DefaultMaxKeyBytes, cfg.MaxKeyBytes)
	assert.Equal(t, 65536, placement.DefaultMaxEntries)
	assert.Equal(t, 256, placement.DefaultMaxKeyBytes)
}

// Core, worker restart: BumpGeneration fences every binding to the
// worker; the next request places the session anew.
func TestContract_CoreRequestPath_RestartFencesBindings(t *testing.T) {
	c := newCore(t, placement.Config[Worker]{Clock: placement.NewManualClock(0)})
	f := &fakeWorkers{}
	ctx := context.Background()
	require.NoError(t, serve(ctx, c, "s", []Worker{w0}, f.forward))
	g := c.Generation(w0)
	assert.Greater(t, c.BumpGeneration(w0), g)
	info, err := c.Query("s")
	require.NoError(t, err)
	assert.Equal(t, placement.StateAbsent, info.State, "the binding is fenced")
	require.NoError(t, serve(ctx, c, "s", []Worker{w0}, f.forward))
	assert.NotZero(t, f.last().Attempt, "placed anew under an attempt id")
}
