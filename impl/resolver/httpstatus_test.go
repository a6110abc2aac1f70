package resolver_test

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/placementlab/placement/impl/affinity"
	"github.com/placementlab/placement/impl/placement"
	"github.com/placementlab/placement/impl/resolver"
)

// workerServer is a worker behind its ledger: the engine behind the
// middleware at /, the ledger's handler at /placement.
func workerServer(t *testing.T, identity string) (*httptest.Server, *resolver.Ledger, *atomic.Int64) {
	t.Helper()
	clk := placement.NewManualClock(0)
	l, err := resolver.NewLedger(resolver.LedgerConfig{Identity: identity, Now: clk.Now})
	require.NoError(t, err)
	require.NoError(t, clk.AdvanceBy(time.Hour)) // up for an hour
	ran := new(atomic.Int64)
	mux := http.NewServeMux()
	mux.Handle("/placement/", l.Handler("/placement"))
	mux.Handle("/", l.Middleware(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		ran.Add(1)
		_, _ = io.WriteString(w, `{"choices":[]}`)
	})))
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	return srv, l, ran
}

// send is the router's upstream call of attempt id to the worker.
func send(t *testing.T, srv *httptest.Server, id uint64) int {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, srv.URL+"/v1/chat/completions", strings.NewReader("{}"))
	require.NoError(t, err)
	req.Header.Set(resolver.DefaultHeader, strconv.FormatUint(id, 10))
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	_, _ = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	return resp.StatusCode
}

// The whole path: a router's ambiguous placing dispatches, a worker's
// ledger, and the resolver asking it over HTTP.
func TestHTTPStatus_EndToEnd(t *testing.T) {
	e := newEnv(t)
	srv, _, ran := workerServer(t, "boot-1")
	base := func(affinity.Target) string { return srv.URL }
	st := resolver.HTTPStatus(srv.Client(), base, resolver.HTTPConfig{Now: e.l.Now, Prefix: "/placement"})
	r := e.resolver(st)

	// s1: sent and run, but its answer was lost: Arrived, bound.
	tr, err := e.l.Start(context.Background(), e.req("s1"))
	require.NoError(t, err)
	a1, err := tr.Dispatch(wa)
	require.NoError(t, err)
	require.Equal(t, 200, send(t, srv, a1.ID()))
	require.ErrorIs(t, a1.Complete(placement.Ambiguous), placement.ErrAmbiguous)
	tr.Done()

	// s2: never reached the worker (its connection broke first).
	tr, err = e.l.Start(context.Background(), e.req("s2"))
	require.NoError(t, err)
	a2, err := tr.Dispatch(wa)
	require.NoError(t, err)
	require.ErrorIs(t, a2.Complete(placement.Ambiguous), placement.ErrAmbiguous)
	tr.Done()

	require.NoError(t, e.clk.Advance(e.l.Now()+5*time.Second))
	res := r.Pass(context.Background())
	require.NoError(t, res.Err)
	require.Len(t, res.Outcomes, 2)
	assert.Equal(t, 2, res.Resolved)
	got, ok := e.bound("s1")
	assert.True(t, ok)
	assert.Equal(t, wa, got)
	_, ok = e.bound("s2")
	assert.False(t, ok)
	assert.Empty(t, e.l.Quarantined())

	// s2's attempt arrives late: refused, never run.
	assert.Equal(t, http.StatusTooEarly, send(t, srv, a2.ID()))
	assert.Equal(t, int64(1), ran.Load())
}

// HTTPConfig's zero value asks with the resolver's clock (its Source's
// Now): "not arrived" works without the layer's Now given again (issue 25,
// item 11: forgetting HTTPConfig.Now used to turn it off silently).
func TestHTTPStatus_ZeroConfigUsesTheResolversClock(t *testing.T) {
	e := newEnv(t)
	srv, _, ran := workerServer(t, "boot-1")
	st := resolver.HTTPStatus(srv.Client(), func(affinity.Target) string { return srv.URL }, resolver.HTTPConfig{Prefix: "/placement"})
	q := e.ambiguous("s", wa) // never sent
	require.NoError(t, e.clk.Advance(e.l.Now()+5*time.Second))
	res := e.resolver(st).Pass(context.Background())
	require.NoError(t, res.Err)
	require.Len(t, res.Outcomes, 1)
	assert.Equal(t, resolver.NotArrived, res.Outcomes[0].Verdict, "status error: %v", res.Outcomes[0].StatusErr)
	assert.Equal(t, 1, res.Resolved)
	assert.True(t, e.placing("s"), "settled not arrived: the session is placed anew")
	assert.Equal(t, http.StatusTooEarly, send(t, srv, q.Attempt), "fenced")
	assert.Zero(t, ran.Load())
}

// A young ledger answers (issue 25, item 9): an attempt dispatched 1 s
// after the ledger started, whose dispatch then timed out, is settled not
// arrived as soon as its deadline has passed, not when its QuarantineTTL
// ends, and its late arrival is refused. The age alone cannot show it (the
// ledger's Slack is more than the second between its start and the
// dispatch), so the ledger fences the attempt and says how long it has
// covered, and HTTPStatus compares that with the attempt's dispatch time,
// over the question's round trip.
func TestHTTPStatus_YoungLedgerAnswers(t *testing.T) {
	e := newEnv(t)
	require.NoError(t, e.clk.Advance(time.Hour)) // the router has run for an hour
	ledger, err := resolver.NewLedger(resolver.LedgerConfig{Identity: "boot-1", Now: e.clk.Now})
	require.NoError(t, err)
	ran := new(atomic.Int64)
	mux := http.NewServeMux()
	mux.Handle("/placement/", ledger.Handler("/placement"))
	mux.Handle("/", ledger.Middleware(http.HandlerFunc(func(http.ResponseWriter, *http.Request) { ran.Add(1) })))
	srv := httptest.NewServer(mux)
	defer srv.Close()
	st := resolver.HTTPStatus(srv.Client(), func(affinity.Target) string { return srv.URL }, resolver.HTTPConfig{Prefix: "/placement"})
	r := e.resolver(st)

	require.NoError(t, e.clk.AdvanceBy(time.Second)) // the ledger is 1 s old
	tr, err := e.l.Start(context.Background(), e.req("s"))
	require.NoError(t, err)
	defer tr.Done()
	a, err := tr.Dispatch(wa) // never reaches the worker
	require.NoError(t, err)
	require.NoError(t, e.clk.AdvanceBy(placement.DefaultDispatchTimeout)) // its deadline: quarantined
	qs := e.l.Quarantined()
	require.Len(t, qs, 1)
	require.Equal(t, time.Hour+time.Second, qs[0].DispatchedAt)

	res := r.Pass(context.Background())
	require.NoError(t, res.Err)
	require.Len(t, res.Outcomes, 1)
	assert.Equal(t, resolver.NotArrived, res.Outcomes[0].Verdict, "settled at the deadline, not after QuarantineTTL (status error: %v)", res.Outcomes[0].StatusErr)
	assert.Equal(t, 1, res.Resolved)
	assert.Empty(t, e.l.Quarantined())
	assert.True(t, e.placing("s"))
	assert.Equal(t, http.StatusTooEarly, send(t, srv, a.ID()), "its late arrival is refused")
	assert.Zero(t, ran.Load())
}

// The window is checked: an attempt dispatched before the ledger started
// (it may have reached the worker before the ledger could record it), or
// within the clocks' margins after, stays Unknown though the ledger fenced
// it; one dispatched after them is NotArrived.
func TestHTTPStatus_FenceWindowIsChecked(t *testing.T) {
	for _, c := range []struct {
		name  string
		after time.Duration // from the ledger's start to the dispatch
		want  resolver.Verdict
	}{
		{"dispatched before the ledger started", -time.Second, resolver.Unknown},
		{"within the clock margin", resolver.DefaultClockMargin / 2, resolver.Unknown},
		{"after the margins (the clock's, and drift over the minute)", time.Second, resolver.NotArrived},
	} {
		t.Run(c.name, func(t *testing.T) {
			e := newEnv(t)
			require.NoError(t, e.clk.Advance(time.Hour))
			var ledger *resolver.Ledger
			newLedger := func() {
				var err error
				ledger, err = resolver.NewLedger(resolver.LedgerConfig{Identity: "boot-1", Now: e.clk.Now})
				require.NoError(t, err)
			}
			if c.after >= 0 {
				newLedger()
				require.NoError(t, e.clk.AdvanceBy(c.after))
			}
			tr, err := e.l.Start(context.Background(), e.req("s"))
			require.NoError(t, err)
			defer tr.Done()
			a, err := tr.Dispatch(wa)
			require.NoError(t, err)
			if c.after < 0 {
				require.NoError(t, e.clk.AdvanceBy(-c.after))
				newLedger()
			}
			require.NoError(t, e.clk.AdvanceBy(placement.DefaultDispatchTimeout))
			srv := httptest.NewServer(ledger.Handler(""))
			defer srv.Close()
			st := resolver.HTTPStatus(srv.Client(), func(affinity.Target) string { return srv.URL }, resolver.HTTPConfig{Now: e.l.Now})
			v, err := st(context.Background(), e.quarantine(e.req("s").Session, a.ID()))
			require.NoError(t, err)
			assert.Equal(t, c.want, v)
			assert.ErrorIs(t, ledger.Arrive(strconv.FormatUint(a.ID(), 10)), resolver.ErrAttemptFenced, "fenced either way")
		})
	}
}

// L7 through HTTPStatus: an answer from another instance is an error
// (Unknown): nothing is settled.
func TestHTTPStatus_IdentityMismatch(t *testing.T) {
	e := newEnv(t)
	q := e.ambiguous("s", wa)
	srv, _, _ := workerServer(t, "boot-2")
	st := resolver.HTTPStatus(nil, func(affinity.Target) string { return srv.URL }, resolver.HTTPConfig{Now: e.l.Now, Prefix: "/placement"})
	v, err := st(context.Background(), q)
	assert.Equal(t, resolver.Unknown, v)
	var ie *resolver.IdentityError
	require.ErrorAs(t, err, &ie)
	assert.ErrorIs(t, err, resolver.ErrIdentityMismatch)
	assert.Equal(t, "boot-1", ie.Want)
	assert.Equal(t, "boot-2", ie.Got)
}

// HTTPStatus sends the attempt's greatest possible age: Now minus its
// dispatch time (DispatchedAt, or Since - DispatchTimeout if that is
// later: a Source whose quarantines carry no DispatchedAt), in
// milliseconds rounded up, and asks for the fence; its clock is
// HTTPConfig.Now, else the one in the call's context (a Resolver's);
// without either, no age and no fence.
func TestHTTPStatus_Age(t *testing.T) {
	e := newEnv(t)
	require.NoError(t, e.clk.Advance(time.Minute))
	q := e.ambiguous("s", wa)
	var got []string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		got = append(got, r.URL.Path+"?"+r.URL.RawQuery)
		_, _ = io.WriteString(w, `{"id":"`+strconv.FormatUint(q.Attempt, 10)+`","state":"unknown","identity":"boot-1"}`)
	}))
	defer srv.Close()
	base := func(affinity.Target) string { return srv.URL }
	require.NoError(t, e.clk.Advance(e.l.Now()+30*time.Second+time.Microsecond))
	require.Equal(t, time.Minute, q.DispatchedAt)
	_, err := resolver.HTTPStatus(nil, base, resolver.HTTPConfig{Now: e.l.Now, DispatchTimeout: time.Minute})(context.Background(), q)
	require.NoError(t, err)
	_, err = resolver.HTTPStatus(nil, base, resolver.HTTPConfig{})(resolver.ContextWithNow(context.Background(), e.l.Now), q)
	require.NoError(t, err)
	old := q
	old.DispatchedAt = 0 // a stand-in Source's quarantine: Since - DispatchTimeout bounds it
	_, err = resolver.HTTPStatus(nil, base, resolver.HTTPConfig{Now: e.l.Now, DispatchTimeout: time.Minute})(context.Background(), old)
	require.NoError(t, err)
	_, err = resolver.HTTPStatus(nil, base, resolver.HTTPConfig{})(context.Background(), q)
	require.NoError(t, err)
	id := strconv.FormatUint(q.Attempt, 10)
	assert.Equal(t, []string{"/attempts/" + id + "?age_ms=30001&fence=1", "/attempts/" + id + "?age_ms=30001&fence=1",
		"/attempts/" + id + "?age_ms=90001&fence=1", "/attempts/" + id + "?"}, got)
}

// Answers that cannot be read are *AnswerError (Unknown).
func TestHTTPStatus_BadAnswers(t *testing.T) {
	e := newEnv(t)
	q := e.ambiguous("s", wa)
	id := strconv.FormatUint(q.Attempt, 10)
	for name, c := range map[string]struct {
		code int
		body string
	}{
		"500":         {500, `{}`},
		"not json":    {200, `<html>`},
		"bad state":   {200, `{"id":"` + id + `","state":"maybe","identity":"boot-1"}`},
		"another id":  {200, `{"id":"1","state":"arrived","identity":"boot-1"}`},
		"no identity": {200, `{"id":"` + id + `","state":"arrived"}`},
	} {
		t.Run(name, func(t *testing.T) {
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
				w.WriteHeader(c.code)
				_, _ = io.WriteString(w, c.body)
			}))
			defer srv.Close()
			v, err := resolver.HTTPStatus(nil, func(affinity.Target) string { return srv.URL }, resolver.HTTPConfig{})(context.Background(), q)
			assert.Equal(t, resolver.Unknown, v)
			assert.Error(t, err)
			if name != "no identity" {
				assert.ErrorIs(t, err, resolver.ErrBadAnswer)
			}
		})
	}
	v, err := resolver.HTTPStatus(nil, nil, resolver.HTTPConfig{})(context.Background(), q)
	assert.Equal(t, resolver.Unknown, v)
	assert.Error(t, err, "no baseURL")
	// A custom attempt id format reaches the path.
	var path string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		path = r.URL.Path
		_, _ = io.WriteString(w, `{"id":"router-a.d.`+id+`","state":"arrived","identity":"boot-1"}`)
	}))
	defer srv.Close()
	v, err = resolver.HTTPStatus(nil, func(affinity.Target) string { return srv.URL }, resolver.HTTPConfig{
		AttemptID: func(q affinity.Quarantine) string { return "router-a.d." + strconv.FormatUint(q.Attempt, 10) },
	})(context.Background(), q)
	require.NoError(t, err)
	assert.Equal(t, resolver.Arrived, v)
	assert.Equal(t, "/attempts/router-a.d."+id, path)
}
