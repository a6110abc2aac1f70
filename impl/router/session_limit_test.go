package router_test

import (
	"context"
	"errors"
	"net/http"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/placementlab/placement/impl/affinity"
	"github.com/placementlab/placement/impl/httpoutcome"
	"github.com/placementlab/placement/impl/placement"
	"github.com/placementlab/placement/impl/router"
)

// The per-session limit (Config.MaxPerSession, SessionQueue: rule D15 of
// the package doc; issue 25, item 11): its tests wait for the driver's
// gauges to reach a state, never for time to pass.

// gated is a transport whose sends block until released, one request at a
// time: it records the order requests entered it and the most of one
// session's requests that were in it at once.
type gated struct {
	mu      sync.Mutex
	entered []string
	release map[string]chan struct{}
	in      map[string]chan struct{} // closed when the request entered
	now     atomic.Int64
	most    atomic.Int64
}

func newGated() *gated {
	return &gated{release: map[string]chan struct{}{}, in: map[string]chan struct{}{}}
}

// add prepares request name's channels.
func (g *gated) add(name string) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.release[name], g.in[name] = make(chan struct{}), make(chan struct{})
}

// send is request name's transport.
func (g *gated) send(name string) router.Send {
	return func(ctx context.Context, _ router.Dispatch) (placement.Outcome, router.Relay, error) {
		n := g.now.Add(1)
		for m := g.most.Load(); n > m && !g.most.CompareAndSwap(m, n); m = g.most.Load() {
		}
		g.mu.Lock()
		g.entered = append(g.entered, name)
		in, rel := g.in[name], g.release[name]
		g.mu.Unlock()
		close(in)
		defer g.now.Add(-1)
		select {
		case <-rel:
			return placement.Accepted, nil, nil
		case <-ctx.Done():
			return placement.Ambiguous, nil, ctx.Err()
		}
	}
}

func (g *gated) order() []string {
	g.mu.Lock()
	defer g.mu.Unlock()
	return append([]string(nil), g.entered...)
}

// waitFor waits, bounded, until cond holds.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	require.Eventually(t, cond, 10*time.Second, time.Millisecond, what)
}

// entered waits until request name is in its send.
func (g *gated) waitIn(t *testing.T, name string) {
	t.Helper()
	g.mu.Lock()
	in := g.in[name]
	g.mu.Unlock()
	select {
	case <-in:
	case <-time.After(10 * time.Second):
		t.Fatalf("%s never reached its send", name)
	}
}

// run starts request name of session s in a goroutine; its error comes on
// the returned channel.
func run(ctx context.Context, d *router.Driver, g *gated, req affinity.Request, name string) <-chan error {
	g.add(name)
	out := make(chan error, 1)
	go func() {
		_, err := d.Do(ctx, req, nil, g.send(name))
		out <- err
	}()
	return out
}

func result(t *testing.T, ch <-chan error) error {
	t.Helper()
	select {
	case err := <-ch:
		return err
	case <-time.After(10 * time.Second):
		t.Fatal("the request never returned")
		return nil
	}
}

// D15, order: with MaxPerSession 1, a session's later requests wait and
// run one at a time in the order they came; another session is not held.
func TestDoSessionLimitOrder(t *testing.T) {
	l := newLayer(t, affinity.Config{}, 0, "a", "b")
	d := newDriver(t, router.Config{Layer: l, MaxPerSession: 1, SessionQueue: 8})
	g := newGated()
	s := session(t, "s")
	done := map[string]<-chan error{}
	done["r0"] = run(context.Background(), d, g, s, "r0")
	g.waitIn(t, "r0")
	for i, name := range []string{"r1", "r2", "r3"} {
		done[name] = run(context.Background(), d, g, s, name)
		waitFor(t, name+" queued", func() bool { return d.Stats().SessionWaiting == int64(i+1) })
	}
	other := run(context.Background(), d, g, session(t, "other"), "other")
	g.waitIn(t, "other") // another session is not held by s's limit
	close(g.release["other"])
	require.NoError(t, result(t, other))
	for _, name := range []string{"r0", "r1", "r2", "r3"} {
		g.waitIn(t, name)
		close(g.release[name])
		require.NoError(t, result(t, done[name]))
	}
	assert.Equal(t, []string{"r0", "other", "r1", "r2", "r3"}, g.order())
	st := d.Stats()
	assert.Equal(t, uint64(3), st.SessionWaits)
	assert.Zero(t, st.SessionRefused)
	assert.Zero(t, st.SessionWaiting)
	assert.Zero(t, st.Sessions, "no session is remembered once its requests ended")
	assertNoneInFlight(t, d, l)
}

// D15, refusal: past SessionQueue waiting requests (none by default) a
// request is refused at once with a *SessionBusyError, which matches
// ErrSessionBusy and placement.ErrWouldWait, so impl/httpoutcome answers
// 503 with Retry-After (its "busy" row).
func TestDoSessionLimitRefuses(t *testing.T) {
	for _, queue := range []int{0, 1} {
		l := newLayer(t, affinity.Config{}, 0, "a")
		d := newDriver(t, router.Config{Layer: l, MaxPerSession: 1, SessionQueue: queue})
		g := newGated()
		s := session(t, "s")
		first := run(context.Background(), d, g, s, "first")
		g.waitIn(t, "first")
		var waiting <-chan error
		if queue == 1 {
			waiting = run(context.Background(), d, g, s, "waiting")
			waitFor(t, "queued", func() bool { return d.Stats().SessionWaiting == 1 })
		}
		sent := 0
		_, err := d.Do(context.Background(), s, nil, func(context.Context, router.Dispatch) (placement.Outcome, router.Relay, error) {
			sent++
			return placement.Accepted, nil, nil
		})
		var be *router.SessionBusyError
		require.ErrorAs(t, err, &be)
		assert.ErrorIs(t, err, router.ErrSessionBusy)
		assert.ErrorIs(t, err, placement.ErrWouldWait)
		assert.Equal(t, 1, be.InFlight)
		assert.Equal(t, queue, be.Waiting)
		assert.Zero(t, sent, "nothing sent")
		code, after := httpoutcome.Status(err)
		assert.Equal(t, http.StatusServiceUnavailable, code)
		assert.Equal(t, httpoutcome.DefaultRetryAfter, after)
		close(g.release["first"])
		require.NoError(t, result(t, first))
		if waiting != nil {
			g.waitIn(t, "waiting")
			close(g.release["waiting"])
			require.NoError(t, result(t, waiting))
		}
		st := d.Stats()
		assert.Equal(t, uint64(1), st.SessionRefused)
		assert.Zero(t, st.Failed, "a refusal by the limit is not a failure")
		assert.Zero(t, st.Sessions)
		assertNoneInFlight(t, d, l)
	}
}

// D15, cancellation: a waiting request whose context ends leaves the
// queue (placement.ErrCancelled, with the context's cause), is never sent,
// and the slot goes to the next in line; no session state is left.
func TestDoSessionLimitCancelFreesTheSlot(t *testing.T) {
	l := newLayer(t, affinity.Config{}, 0, "a")
	d := newDriver(t, router.Config{Layer: l, MaxPerSession: 1, SessionQueue: 4})
	g := newGated()
	s := session(t, "s")
	first := run(context.Background(), d, g, s, "first")
	g.waitIn(t, "first")
	ctx, cancel := context.WithCancelCause(context.Background())
	gone := errors.New("client gone")
	quitter := run(ctx, d, g, s, "quitter")
	waitFor(t, "quitter queued", func() bool { return d.Stats().SessionWaiting == 1 })
	next := run(context.Background(), d, g, s, "next")
	waitFor(t, "next queued", func() bool { return d.Stats().SessionWaiting == 2 })
	cancel(gone)
	err := result(t, quitter)
	assert.ErrorIs(t, err, placement.ErrCancelled)
	assert.ErrorIs(t, err, gone)
	assert.Equal(t, int64(1), d.Stats().SessionWaiting)
	close(g.release["first"])
	require.NoError(t, result(t, first))
	g.waitIn(t, "next")
	close(g.release["next"])
	require.NoError(t, result(t, next))
	assert.Equal(t, []string{"first", "next"}, g.order(), "the quitter was never sent")
	assert.Equal(t, int64(1), g.most.Load(), "one request of the session at a time")
	st := d.Stats()
	assert.Zero(t, st.SessionWaiting)
	assert.Zero(t, st.Sessions)
	assertNoneInFlight(t, d, l)
}

// D15, under load: many requests of a few sessions, some cancelled while
// they wait: never more than MaxPerSession of a session in flight, every
// request either runs or returns an error, and no session state is left.
func TestDoSessionLimitNoLeak(t *testing.T) {
	l := newLayer(t, affinity.Config{}, 0, "a", "b", "c")
	const limit = 2
	d := newDriver(t, router.Config{Layer: l, MaxPerSession: limit, SessionQueue: 1000})
	var mu sync.Mutex
	in := map[string]int{}
	most := 0
	var wg sync.WaitGroup
	for i := 0; i < 200; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			id := []string{"x", "y", "z"}[i%3]
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			if i%7 == 0 {
				cancel() // some give up at once, queued or not
			}
			_, _ = d.Do(ctx, session(t, id), nil, func(context.Context, router.Dispatch) (placement.Outcome, router.Relay, error) {
				mu.Lock()
				in[id]++
				most = max(most, in[id])
				mu.Unlock()
				time.Sleep(50 * time.Microsecond)
				mu.Lock()
				in[id]--
				mu.Unlock()
				return placement.Accepted, nil, nil
			})
		}()
	}
	wg.Wait()
	assert.LessOrEqual(t, most, limit)
	st := d.Stats()
	assert.Zero(t, st.SessionWaiting)
	assert.Zero(t, st.Sessions)
	assert.Equal(t, uint64(200), st.Requests)
	assertNoneInFlight(t, d, l)
}

// D14 for the limit: negative values, or a queue without a limit, are
// invalid.
func TestNewSessionLimitBadInput(t *testing.T) {
	l := newLayer(t, affinity.Config{}, 0, "a")
	for _, cfg := range []router.Config{
		{Layer: l, MaxPerSession: -1},
		{Layer: l, MaxPerSession: 1, SessionQueue: -1},
		{Layer: l, SessionQueue: 4},
	} {
		_, err := router.New(cfg)
		assert.ErrorIs(t, err, router.ErrInvalidConfig)
	}
}
