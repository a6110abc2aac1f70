package router_test

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"

	"github.com/placementlab/placement/impl/affinity"
	"github.com/placementlab/placement/impl/placement"
	"github.com/placementlab/placement/impl/router"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// fakeHealth is a worker's health check whose answer a test sets.
type fakeHealth struct {
	mu       sync.Mutex
	status   int
	identity string
	body     string // "" : {"identity":..., "ranks":2}
	header   bool   // identity in the header instead of the body
}

func (f *fakeHealth) set(status int, identity string) {
	f.mu.Lock()
	f.status, f.identity = status, identity
	f.mu.Unlock()
}

func (f *fakeHealth) ServeHTTP(w http.ResponseWriter, _ *http.Request) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.header {
		w.Header().Set(router.HeaderIdentity, f.identity)
		w.Header().Set(router.HeaderRanks, "3")
	}
	w.WriteHeader(f.status)
	switch {
	case f.body != "":
		fmt.Fprint(w, f.body)
	case !f.header:
		fmt.Fprintf(w, `{"identity":%q,"first_rank":1,"ranks":2}`, f.identity)
	}
}

func kinds(cs []router.Change) []string {
	var out []string
	for _, c := range cs {
		out = append(out, c.Worker+":"+c.Kind.String())
	}
	return out
}

// A pass joins healthy workers with the identity and ranks they report;
// a failed check fails a member (after FailAfter in a row); the same
// identity back is a flap (bindings serve again); a new identity is a
// restart (bindings fenced); a removed endpoint leaves.
func TestHealthRestartVersusFlap(t *testing.T) {
	l := newLayer(t, affinity.Config{}, 0)
	a := &fakeHealth{status: 200, identity: "boot-1"}
	b := &fakeHealth{status: 200, identity: "pod-9", header: true}
	sa, sb := httptest.NewServer(a), httptest.NewServer(b)
	defer sa.Close()
	defer sb.Close()
	var seen []router.Change
	h, err := router.NewHealth(router.HealthConfig{Layer: l, FailAfter: 2,
		Endpoints: []router.Endpoint{{ID: "a", URL: sa.URL}, {ID: "b", URL: sb.URL}},
		OnChange:  func(c router.Change) { seen = append(seen, c) }})
	require.NoError(t, err)
	ctx := context.Background()

	cs := h.Pass(ctx)
	assert.Equal(t, []string{"a:joined", "b:joined"}, kinds(cs))
	assert.Equal(t, cs, seen, "OnChange saw every change in order")
	ws := l.Workers()
	require.Len(t, ws, 2)
	assert.Equal(t, affinity.Worker{ID: "a", Identity: "boot-1", FirstRank: 1, Ranks: 2}, ws[0].Worker)
	assert.Equal(t, affinity.Worker{ID: "b", Identity: "pod-9", Ranks: 3}, ws[1].Worker)
	assert.Empty(t, h.Pass(ctx), "nothing changed")

	// Bind a session to a/1.
	key, _ := affinity.Namespace{}.Session("s")
	bind(t, l, key, affinity.Ranked("a", 1))

	// One failed check is not enough with FailAfter 2; the second fails a.
	a.set(503, "boot-1")
	assert.Empty(t, h.Pass(ctx))
	cs = h.Pass(ctx)
	require.Equal(t, []string{"a:failed"}, kinds(cs))
	assert.ErrorIs(t, cs[0].Err, router.ErrHealthCheck)
	assert.Equal(t, affinity.WorkerFailed, l.Workers()[0].State)
	assert.Empty(t, h.Pass(ctx), "a failed worker is failed once")

	// The same identity back: a flap. The binding serves again.
	a.set(200, "boot-1")
	assert.Equal(t, []string{"a:recovered"}, kinds(h.Pass(ctx)))
	got, ok := l.Query(key, affinity.PhaseDecode)
	require.True(t, ok, "a flap fences nothing")
	assert.Equal(t, affinity.Ranked("a", 1), got)

	// A new identity: a restart. The binding is fenced.
	a.set(200, "boot-2")
	assert.Equal(t, []string{"a:restarted"}, kinds(h.Pass(ctx)))
	_, ok = l.Query(key, affinity.PhaseDecode)
	assert.False(t, ok, "a restart fences the binding")

	// A restart while failed is a restart too.
	a.set(500, "boot-2")
	h.Pass(ctx)
	assert.Equal(t, []string{"a:failed"}, kinds(h.Pass(ctx)))
	a.set(200, "boot-3")
	assert.Equal(t, []string{"a:restarted"}, kinds(h.Pass(ctx)))

	// b's endpoint removed: it leaves.
	require.NoError(t, h.SetEndpoints([]router.Endpoint{{ID: "a", URL: sa.URL}}))
	assert.Equal(t, []string{"b:left"}, kinds(h.Pass(ctx)))
	require.Len(t, l.Workers(), 1)
	assert.Empty(t, h.Pass(ctx))
}

// bind makes key's binding in the decode phase to target.
func bind(t *testing.T, l *affinity.Layer, key affinity.Key, target affinity.Target) {
	t.Helper()
	turn, err := l.Start(context.Background(), affinity.Request{Session: key})
	require.NoError(t, err)
	defer turn.Done()
	a, err := turn.Dispatch(target)
	require.NoError(t, err)
	require.NoError(t, a.Complete(placement.Accepted))
}

// An answer without an identity fails the check unless the endpoint gives
// one; a bad rank header, a bad URL and an unreachable worker fail it.
func TestHealthIdentityRules(t *testing.T) {
	l := newLayer(t, affinity.Config{}, 0)
	none := &fakeHealth{status: 200, body: "ok"}
	badRank := &fakeHealth{status: 200, body: "{}"}
	s1, s2 := httptest.NewServer(none), httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set(router.HeaderIdentity, "x")
		w.Header().Set(router.HeaderRanks, "two")
		badRank.ServeHTTP(w, r)
	}))
	defer s1.Close()
	defer s2.Close()
	dead := httptest.NewServer(http.NotFoundHandler())
	dead.Close()
	h, err := router.NewHealth(router.HealthConfig{Layer: l, Endpoints: []router.Endpoint{
		{ID: "none", URL: s1.URL}, {ID: "fallback", URL: s1.URL, Identity: "static"},
		{ID: "badrank", URL: s2.URL}, {ID: "dead", URL: dead.URL}, {ID: "badurl", URL: "::"}}})
	require.NoError(t, err)
	assert.Equal(t, []string{"fallback:joined"}, kinds(h.Pass(context.Background())))
	assert.Equal(t, "static", l.Workers()[0].Identity)
}

// A pass whose context ends changes nothing: cut checks are not failures.
func TestHealthCancelledPassChangesNothing(t *testing.T) {
	l := newLayer(t, affinity.Config{}, 0)
	a := &fakeHealth{status: 200, identity: "1"}
	s := httptest.NewServer(a)
	defer s.Close()
	h, err := router.NewHealth(router.HealthConfig{Layer: l, Endpoints: []router.Endpoint{{ID: "a", URL: s.URL}}})
	require.NoError(t, err)
	require.Len(t, h.Pass(context.Background()), 1)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	assert.Empty(t, h.Pass(ctx))
	assert.Equal(t, affinity.WorkerUp, l.Workers()[0].State)
	assert.ErrorIs(t, h.Run(ctx), context.Canceled)
}

// Bad configurations are errors.
func TestHealthBadConfig(t *testing.T) {
	l := newLayer(t, affinity.Config{}, 0)
	for _, cfg := range []router.HealthConfig{
		{},
		{Layer: l, Interval: -1},
		{Layer: l, Endpoints: []router.Endpoint{{ID: "a"}}},
		{Layer: l, Endpoints: []router.Endpoint{{ID: "a", URL: "u"}, {ID: "a", URL: "v"}}},
	} {
		_, err := router.NewHealth(cfg)
		assert.ErrorIs(t, err, router.ErrInvalidHealth)
	}
	assert.Equal(t, "failed", router.ChangeFailed.String())
	assert.Equal(t, "ChangeKind(9)", router.ChangeKind(9).String())
}
