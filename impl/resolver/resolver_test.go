package resolver_test

// The resolver's contract (doc.go, rules R1 to R11), one test per rule,
// on a real affinity layer driven by a manual clock.

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/placementlab/placement/impl/affinity"
	"github.com/placementlab/placement/impl/placement"
	"github.com/placementlab/placement/impl/resolver"
)

// R1: Arrived settles the quarantine Accepted: the session binds to the
// attempt's target.
func TestR1_ArrivedResolvesAccepted(t *testing.T) {
	e := newEnv(t)
	q := e.ambiguous("s", wa)
	r := e.resolver(always(resolver.Arrived))
	res := r.Pass(context.Background())
	require.NoError(t, res.Err)
	require.Len(t, res.Outcomes, 1)
	o := res.Outcomes[0]
	assert.Equal(t, q.Attempt, o.Quarantine.Attempt)
	assert.Equal(t, resolver.Arrived, o.Verdict)
	assert.Equal(t, placement.ResolveAccepted, o.Resolution)
	require.NoError(t, o.ResolveErr)
	assert.Equal(t, 1, res.Resolved)
	got, ok := e.bound("s")
	require.True(t, ok, "bound after an Arrived answer")
	assert.Equal(t, wa, got)
	assert.Empty(t, e.l.Quarantined())
	s := r.Stats()
	assert.Equal(t, uint64(1), s.ResolvedAccepted)
	assert.Equal(t, uint64(1), s.Arrived)
	assert.Equal(t, uint64(1), e.l.Stats().ResolvedAccepted)
	// A later turn is a hit on the binding.
	tr, err := e.l.Start(context.Background(), e.req("s"))
	require.NoError(t, err)
	b, ok := tr.Bound()
	tr.Done()
	assert.True(t, ok)
	assert.Equal(t, wa, b)
}

// R2: NotArrived settles it NotAccepted: nothing bound, the session is
// placed anew by its next request.
func TestR2_NotArrivedResolvesNotAccepted(t *testing.T) {
	e := newEnv(t)
	e.ambiguous("s", wa)
	r := e.resolver(always(resolver.NotArrived))
	res := r.Pass(context.Background())
	require.NoError(t, res.Err)
	require.Len(t, res.Outcomes, 1)
	assert.Equal(t, placement.ResolveNotAccepted, res.Outcomes[0].Resolution)
	require.NoError(t, res.Outcomes[0].ResolveErr)
	_, ok := e.bound("s")
	assert.False(t, ok)
	assert.Empty(t, e.l.Quarantined())
	assert.True(t, e.placing("s"), "the next request places the session")
	assert.Equal(t, uint64(1), r.Stats().ResolvedNotAccepted)
	assert.Equal(t, uint64(1), e.l.Stats().ResolvedNotAccepted)
}

// R3: Unknown, an error, a panic and a call past PerCallTimeout settle
// nothing, and put the quarantine off by an exponential, jittered backoff
// on the Source's clock.
func TestR3_UnknownBacksOff(t *testing.T) {
	cases := map[string]resolver.Status{
		"unknown": always(resolver.Unknown),
		"error": func(context.Context, affinity.Quarantine) (resolver.Verdict, error) {
			return resolver.Arrived, errors.New("connection refused") // the verdict is ignored
		},
		"panic": func(context.Context, affinity.Quarantine) (resolver.Verdict, error) { panic("boom") },
		"timeout": func(ctx context.Context, _ affinity.Quarantine) (resolver.Verdict, error) {
			<-ctx.Done()
			return resolver.Arrived, ctx.Err()
		},
		"invalid verdict": always(resolver.Verdict(9)),
	}
	for name, st := range cases {
		t.Run(name, func(t *testing.T) {
			e := newEnv(t)
			e.ambiguous("s", wa)
			r := e.resolver(st, func(c *resolver.Config) { c.PerCallTimeout = 5 * time.Millisecond })
			min, maxB := time.Second, time.Minute
			for n := 1; n <= 9; n++ {
				res := r.Pass(context.Background())
				require.NoError(t, res.Err)
				require.Len(t, res.Outcomes, 1, "pass %d asks", n)
				o := res.Outcomes[0]
				assert.Equal(t, resolver.Unknown, o.Verdict)
				assert.Zero(t, o.Resolution, "nothing settled")
				if name != "unknown" {
					assert.Error(t, o.StatusErr)
				}
				b := min << (n - 1)
				if b > maxB {
					b = maxB
				}
				next := res.NextDue - e.l.Now()
				assert.GreaterOrEqual(t, next, b/2, "backoff %d", n)
				assert.LessOrEqual(t, next, b, "backoff %d", n)
				// Not asked again before it is due.
				require.NoError(t, e.clk.Advance(res.NextDue-1))
				res2 := r.Pass(context.Background())
				assert.Empty(t, res2.Outcomes, "not due yet")
				assert.Equal(t, 1, res2.NotDue)
				require.NoError(t, e.clk.Advance(res.NextDue))
			}
			require.Len(t, e.l.Quarantined(), 1, "still quarantined")
			s := r.Stats()
			assert.Equal(t, uint64(9), s.Asked)
			if name == "unknown" {
				assert.Equal(t, uint64(9), s.Unknown)
			} else {
				assert.Equal(t, uint64(9), s.Errors)
			}
			if name == "panic" {
				var pe *resolver.StatusPanicError
				res := r.Pass(context.Background())
				require.Len(t, res.Outcomes, 1)
				assert.ErrorAs(t, res.Outcomes[0].StatusErr, &pe)
			}
			if name == "timeout" {
				res := r.Pass(context.Background())
				require.Len(t, res.Outcomes, 1)
				assert.ErrorIs(t, res.Outcomes[0].StatusErr, context.DeadlineExceeded)
			}
		})
	}
}

// schedule runs passes of a resolver with seed over n quarantines that
// answer Unknown, advancing to each NextDue, and returns the times the
// quarantines were asked at, by attempt.
func schedule(t *testing.T, seed uint64, n int, concurrency int) map[uint64][]time.Duration {
	e := newEnv(t)
	for i := 0; i < n; i++ {
		e.ambiguous(fmt.Sprintf("s%d", i), wa)
	}
	var mu sync.Mutex
	at := map[uint64][]time.Duration{}
	st := func(_ context.Context, q affinity.Quarantine) (resolver.Verdict, error) {
		mu.Lock()
		at[q.Attempt] = append(at[q.Attempt], e.l.Now())
		mu.Unlock()
		return resolver.Unknown, nil
	}
	r := e.resolver(st, func(c *resolver.Config) { c.Seed = seed; c.Concurrency = concurrency })
	for i := 0; i < 6*n; i++ {
		res := r.Pass(context.Background())
		require.NoError(t, res.Err)
		if res.NextDue < 0 || res.NextDue >= qttl-time.Minute {
			break
		}
		require.NoError(t, e.clk.Advance(res.NextDue))
	}
	return at
}

// R4: the jitter is a function of the seed and the attempt: the same seed
// gives the same schedule (whatever the concurrency), another seed another.
func TestR4_JitterIsDeterministic(t *testing.T) {
	a := schedule(t, 1, 8, 1)
	b := schedule(t, 1, 8, 4)
	c := schedule(t, 2, 8, 1)
	require.Len(t, a, 8)
	assert.Equal(t, a, b, "same seed, same schedule")
	assert.NotEqual(t, a, c, "another seed, another schedule")
	// The schedule spreads: the quarantines are not all asked at once.
	distinct := map[time.Duration]bool{}
	for _, ts := range a {
		require.Greater(t, len(ts), 2)
		distinct[ts[2]] = true
	}
	assert.Greater(t, len(distinct), 1, "jitter spreads the third asks")
}

// R5: MaxCallsPerPass bounds a pass; what it leaves is asked next pass,
// with no backoff.
func TestR5_BudgetPerPass(t *testing.T) {
	e := newEnv(t)
	for i := 0; i < 5; i++ {
		e.ambiguous(fmt.Sprintf("s%d", i), wa)
	}
	ans := newAnswers() // Unknown until set
	r := e.resolver(ans.status, func(c *resolver.Config) { c.MaxCallsPerPass = 2 })
	pass := func(asked, notDue, exhausted int) {
		t.Helper()
		res := r.Pass(context.Background())
		assert.Len(t, res.Outcomes, asked)
		assert.Equal(t, notDue, res.NotDue)
		assert.Equal(t, exhausted, res.BudgetExhausted)
	}
	// The clock does not move: those left by the budget are asked at once
	// in the next pass, those asked are in backoff.
	pass(2, 0, 3)
	pass(2, 2, 1)
	pass(1, 4, 0)
	pass(0, 5, 0)
	assert.Len(t, ans.calls(), 5, "each asked once")
	for _, q := range e.l.Quarantined() {
		ans.set(q.Attempt, resolver.Arrived)
	}
	require.NoError(t, e.clk.Advance(e.l.Now()+time.Second)) // past the first backoff
	pass(2, 0, 3)
	pass(2, 0, 1)
	pass(1, 0, 0)
	assert.Empty(t, e.l.Quarantined())
	assert.Equal(t, uint64(3+1+3+1), r.Stats().BudgetExhausted)
	assert.Equal(t, uint64(5), r.Stats().ResolvedAccepted)
}

// R5: CallsPerSecond bounds calls over the Source's time (a token bucket
// of Burst tokens).
func TestR5_BudgetPerSecond(t *testing.T) {
	e := newEnv(t)
	for i := 0; i < 6; i++ {
		e.ambiguous(fmt.Sprintf("s%d", i), wa)
	}
	r := e.resolver(always(resolver.Arrived), func(c *resolver.Config) {
		c.CallsPerSecond = 2
		c.Burst = 3
	})
	res := r.Pass(context.Background())
	assert.Len(t, res.Outcomes, 3, "the burst")
	assert.Equal(t, 3, res.BudgetExhausted)
	res = r.Pass(context.Background())
	assert.Empty(t, res.Outcomes, "no time passed: no token")
	assert.Equal(t, 3, res.BudgetExhausted)
	require.NoError(t, e.clk.Advance(e.l.Now()+500*time.Millisecond))
	res = r.Pass(context.Background())
	assert.Len(t, res.Outcomes, 1, "half a second: one token")
	require.NoError(t, e.clk.Advance(e.l.Now()+10*time.Second))
	res = r.Pass(context.Background())
	assert.Len(t, res.Outcomes, 2, "ten seconds: the rest (at most Burst)")
	assert.Empty(t, e.l.Quarantined())
	assert.Equal(t, uint64(3+3+2), r.Stats().BudgetExhausted)
}

// R6: a quarantine within ExpiryMargin of its Expires is not asked, and
// counted once in Expired; one that disappears at or after its Expires is
// counted there too.
func TestR6_TooCloseToExpiry(t *testing.T) {
	e := newEnv(t)
	q := e.ambiguous("s", wa)
	ans := newAnswers()
	r := e.resolver(ans.status, func(c *resolver.Config) { c.ExpiryMargin = 5 * time.Second })
	require.NoError(t, e.clk.Advance(q.Expires-5*time.Second))
	for i := 0; i < 3; i++ {
		res := r.Pass(context.Background())
		assert.Empty(t, res.Outcomes)
		assert.Equal(t, 1, res.TooClose)
	}
	assert.Empty(t, ans.calls())
	assert.Equal(t, uint64(1), r.Stats().Expired, "counted once")
	require.NoError(t, e.clk.Advance(q.Expires))
	r.Pass(context.Background())
	assert.Equal(t, uint64(1), r.Stats().Expired, "its expiry is not counted again")
	assert.Equal(t, uint64(1), e.l.Stats().QuarantinesExpired)

	// One asked (Unknown), then gone by its TTL between two passes.
	q2 := e.ambiguous("s2", wa)
	res := r.Pass(context.Background())
	require.Len(t, res.Outcomes, 1)
	require.NoError(t, e.clk.Advance(q2.Expires))
	res = r.Pass(context.Background())
	assert.Zero(t, res.Listed)
	assert.Equal(t, uint64(2), r.Stats().Expired)
	assert.Equal(t, 0, r.Stats().Tracked)
}

// R7: Resolve is fenced: settled meanwhile by a late result, or by the
// TTL, the resolver's Resolve changes nothing and is counted as Fenced;
// and the late result of an attempt the resolver settled first is fenced.
func TestR7_Fencing(t *testing.T) {
	t.Run("late Complete after a resolve is fenced", func(t *testing.T) {
		e := newEnv(t)
		tr, err := e.l.Start(context.Background(), e.req("s"))
		require.NoError(t, err)
		a, err := tr.Dispatch(wa)
		require.NoError(t, err)
		require.NoError(t, e.clk.Advance(e.l.Now()+placement.DefaultDispatchTimeout)) // timed out: quarantined
		r := e.resolver(always(resolver.NotArrived))
		res := r.Pass(context.Background())
		require.Equal(t, 1, res.Resolved)
		err = a.Complete(placement.Accepted) // the late answer
		var f *placement.FencedError
		require.ErrorAs(t, err, &f)
		require.ErrorIs(t, err, placement.ErrFenced)
		tr.Done()
		_, ok := e.bound("s")
		assert.False(t, ok, "the late Accepted bound nothing")
	})
	t.Run("settled by someone else during the call", func(t *testing.T) {
		e := newEnv(t)
		e.ambiguous("s", wa)
		st := func(_ context.Context, q affinity.Quarantine) (resolver.Verdict, error) {
			require.NoError(t, e.l.Resolve(q, placement.ResolveAccepted)) // another resolver
			return resolver.NotArrived, nil
		}
		r := e.resolver(st)
		res := r.Pass(context.Background())
		require.Len(t, res.Outcomes, 1)
		assert.ErrorIs(t, res.Outcomes[0].ResolveErr, placement.ErrNotQuarantined)
		assert.Equal(t, 1, res.Fenced)
		assert.Equal(t, uint64(1), r.Stats().Fenced)
		got, ok := e.bound("s")
		assert.True(t, ok, "the other settlement stands")
		assert.Equal(t, wa, got)
	})
	t.Run("a resolve after expiry does nothing", func(t *testing.T) {
		e := newEnv(t)
		q := e.ambiguous("s", wa)
		st := func(context.Context, affinity.Quarantine) (resolver.Verdict, error) {
			require.NoError(t, e.clk.Advance(q.Expires)) // the TTL ends it while the call runs
			return resolver.Arrived, nil
		}
		r := e.resolver(st)
		res := r.Pass(context.Background())
		require.Len(t, res.Outcomes, 1)
		assert.ErrorIs(t, res.Outcomes[0].ResolveErr, placement.ErrNotQuarantined)
		assert.Equal(t, uint64(1), r.Stats().Fenced)
		_, ok := e.bound("s")
		assert.False(t, ok, "nothing bound after the expiry")
		assert.Equal(t, uint64(1), e.l.Stats().QuarantinesExpired)
		assert.Zero(t, e.l.Stats().ResolvedAccepted)
	})
	t.Run("a worker restarted during the call", func(t *testing.T) {
		e := newEnv(t)
		e.ambiguous("s", wa)
		st := func(context.Context, affinity.Quarantine) (resolver.Verdict, error) {
			_, err := e.l.Join(affinity.Worker{ID: "a", Identity: "boot-2"})
			require.NoError(t, err)
			return resolver.Arrived, nil
		}
		r := e.resolver(st)
		res := r.Pass(context.Background())
		require.Len(t, res.Outcomes, 1)
		assert.Error(t, res.Outcomes[0].ResolveErr)
		_, ok := e.bound("s")
		assert.False(t, ok, "nothing bound to the restarted worker")
	})
	t.Run("stale at birth is counted", func(t *testing.T) {
		src := &stubSource{resolveErr: &placement.GenerationMovedError[string]{Generation: 1, CurrentGeneration: 2}}
		r, err := resolver.New(resolver.Config{Source: src, Status: always(resolver.Arrived), Concurrency: 1})
		require.NoError(t, err)
		res := r.Pass(context.Background())
		assert.Equal(t, 1, res.Resolved)
		assert.Equal(t, uint64(1), r.Stats().StaleAtBirth)
	})
}

// stubSource lists one quarantine and returns resolveErr from Resolve.
type stubSource struct {
	resolveErr error
	resolved   int
}

func (s *stubSource) Quarantined() []affinity.Quarantine {
	k, _ := affinity.Namespace{}.Session("x")
	return []affinity.Quarantine{{Key: k, Attempt: 1, Generation: 1, Expires: time.Hour}}
}

func (s *stubSource) Resolve(affinity.Quarantine, placement.Resolution) error {
	s.resolved++
	return s.resolveErr
}

func (s *stubSource) Now() time.Duration { return 0 }

// R8: state is kept only for listed quarantines.
func TestR8_ForgetsGoneQuarantines(t *testing.T) {
	e := newEnv(t)
	ans := newAnswers()
	r := e.resolver(ans.status)
	for round := 0; round < 3; round++ {
		var qs []affinity.Quarantine
		for i := 0; i < 20; i++ {
			qs = append(qs, e.ambiguous(fmt.Sprintf("r%d-s%d", round, i), wa))
		}
		r.Pass(context.Background()) // all Unknown: tracked
		assert.Equal(t, 20, r.Stats().Tracked)
		for _, q := range qs[:10] {
			ans.set(q.Attempt, resolver.NotArrived)
		}
		require.NoError(t, e.clk.Advance(e.l.Now()+time.Minute))
		r.Pass(context.Background()) // 10 settled
		assert.Equal(t, 10, r.Stats().Tracked)
		for _, q := range qs[10:] {
			require.NoError(t, e.l.Resolve(q, placement.ResolveNotAccepted)) // settled elsewhere
		}
		r.Pass(context.Background())
		assert.Equal(t, 0, r.Stats().Tracked, "round %d: nothing left", round)
	}
}

// R9: outcomes come in listing order, whatever order the calls return
// in; with Concurrency 1 the calls are made in that order.
func TestR9_ListingOrder(t *testing.T) {
	e := newEnv(t)
	for i := 0; i < 8; i++ {
		e.ambiguous(fmt.Sprintf("s%d", i), wa)
	}
	var order []uint64
	for _, q := range e.l.Quarantined() {
		order = append(order, q.Attempt)
	}
	ans := newAnswers()
	e.resolver(ans.status).Pass(context.Background())
	assert.Equal(t, order, ans.calls(), "Concurrency 1: calls in listing order")

	// Concurrency 4: the calls of a group wait for each other and return
	// in reverse order of their start.
	var started atomic.Int32
	gate := make(chan struct{})
	st := func(ctx context.Context, q affinity.Quarantine) (resolver.Verdict, error) {
		if started.Add(1) == 4 {
			close(gate)
		}
		select {
		case <-gate:
		case <-ctx.Done():
			return resolver.Unknown, ctx.Err()
		}
		return resolver.Unknown, nil
	}
	require.NoError(t, e.clk.Advance(e.l.Now()+time.Hour/10))
	r := e.resolver(st, func(c *resolver.Config) { c.Concurrency = 4; c.PerCallTimeout = 10 * time.Second })
	res := r.Pass(context.Background())
	require.Len(t, res.Outcomes, 8)
	for i, o := range res.Outcomes {
		assert.Equal(t, order[i], o.Quarantine.Attempt)
		assert.NoError(t, o.StatusErr)
	}
}

// R10: Run passes until its context ends, and returns its error; it
// returns placement.ErrClosed when the Source is closed.
func TestR10_RunStopsOnContext(t *testing.T) {
	e := newEnv(t)
	e.ambiguous("s", wa)
	asked := make(chan struct{}, 100)
	st := func(ctx context.Context, _ affinity.Quarantine) (resolver.Verdict, error) {
		select {
		case asked <- struct{}{}:
		default:
		}
		return resolver.Unknown, nil
	}
	r := e.resolver(st, func(c *resolver.Config) { c.Interval = time.Millisecond; c.Concurrency = 2 })
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- r.Run(ctx) }()
	<-asked // the first pass asked
	cancel()
	select {
	case err := <-done:
		assert.ErrorIs(t, err, context.Canceled)
	case <-time.After(10 * time.Second):
		t.Fatal("Run did not return after its context ended")
	}
	assert.GreaterOrEqual(t, r.Stats().Passes, uint64(1))

	// Closed source.
	e2 := newEnv(t)
	e2.ambiguous("s", wa)
	r2 := e2.resolver(always(resolver.Arrived), func(c *resolver.Config) { c.Interval = time.Millisecond })
	require.NoError(t, e2.l.Close())
	err := r2.Run(context.Background())
	assert.ErrorIs(t, err, placement.ErrClosed)
	assert.Equal(t, uint64(1), r2.Stats().ResolveErrors)

	// A pass with an ended context asks nothing.
	res := r.Pass(ctx)
	assert.ErrorIs(t, res.Err, context.Canceled)
	assert.Empty(t, res.Outcomes)
}

// R11: every call is counted as exactly one of its four ends.
func TestR11_CountsAddUp(t *testing.T) {
	e := newEnv(t)
	verdicts := []resolver.Verdict{resolver.Arrived, resolver.NotArrived, resolver.Unknown, resolver.Unknown}
	i := 0
	st := func(context.Context, affinity.Quarantine) (resolver.Verdict, error) {
		defer func() { i++ }()
		if i%5 == 4 {
			return resolver.Unknown, errors.New("unreachable")
		}
		return verdicts[i%len(verdicts)], nil
	}
	r := e.resolver(st)
	for n := 0; n < 30; n++ {
		e.ambiguous(fmt.Sprintf("s%d", n), wb)
		r.Pass(context.Background())
		require.NoError(t, e.clk.Advance(e.l.Now()+2*time.Minute))
	}
	s := r.Stats()
	assert.Equal(t, s.Asked, s.Arrived+s.NotArrived+s.Unknown+s.Errors)
	assert.Positive(t, s.Arrived)
	assert.Positive(t, s.NotArrived)
	assert.Positive(t, s.Unknown)
	assert.Positive(t, s.Errors)
	ls := e.l.Stats()
	assert.Equal(t, ls.ResolvedAccepted, s.ResolvedAccepted)
	assert.Equal(t, ls.ResolvedNotAccepted, s.ResolvedNotAccepted)
}

// Bad configs are typed errors, never a panic.
func TestConfigErrors(t *testing.T) {
	e := newEnv(t)
	ok := resolver.Config{Source: e.l, Status: always(resolver.Unknown)}
	bad := map[string]func(c *resolver.Config){
		"Source":          func(c *resolver.Config) { c.Source = nil },
		"Status":          func(c *resolver.Config) { c.Status = nil },
		"Interval":        func(c *resolver.Config) { c.Interval = -1 },
		"MinBackoff":      func(c *resolver.Config) { c.MinBackoff, c.MaxBackoff = time.Minute, time.Second },
		"MaxCallsPerPass": func(c *resolver.Config) { c.MaxCallsPerPass = -1 },
		"CallsPerSecond":  func(c *resolver.Config) { c.CallsPerSecond = -2 },
		"Burst":           func(c *resolver.Config) { c.Burst = -1 },
		"Concurrency":     func(c *resolver.Config) { c.Concurrency = -1 },
	}
	for field, f := range bad {
		c := ok
		f(&c)
		_, err := resolver.New(c)
		require.ErrorIs(t, err, resolver.ErrInvalidConfig, field)
		var ce *resolver.ConfigError
		require.ErrorAs(t, err, &ce)
		assert.Equal(t, field, ce.Field)
	}
	_, err := resolver.New(ok)
	require.NoError(t, err)
	assert.Equal(t, "unknown", resolver.Unknown.String())
	assert.Equal(t, "arrived", resolver.Arrived.String())
	assert.Equal(t, "not-arrived", resolver.NotArrived.String())
	assert.Equal(t, "Verdict(9)", resolver.Verdict(9).String())
}
