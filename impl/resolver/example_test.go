package resolver_test

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"strconv"
	"time"

	"github.com/placementlab/placement/impl/affinity"
	"github.com/placementlab/placement/impl/placement"
	"github.com/placementlab/placement/impl/resolver"
)

// quarantine runs a placing request of session id to worker w whose
// outcome is unknown (a timeout): the session is quarantined.
func quarantine(l *affinity.Layer, id, w string) uint64 {
	key, _ := affinity.Namespace{}.Session(id)
	turn, _ := l.Start(context.Background(), affinity.Request{Session: key})
	defer turn.Done()
	a, _ := turn.Dispatch(affinity.WorkerOnly(w))
	_ = a.Complete(placement.Ambiguous)
	return a.ID()
}

// A simulation host drives the resolver pass by pass on the layer's
// manual clock: an attempt that arrived binds its session, one that did
// not frees it, one nobody knows about is asked again after a backoff.
func Example() {
	clk := placement.NewManualClock(0)
	l, _ := affinity.New(affinity.Config{Clock: clk, FirstAttempt: 100})
	defer l.Close()
	_, _ = l.Join(affinity.Worker{ID: "w", Identity: "boot-1"})
	verdicts := map[uint64]resolver.Verdict{
		quarantine(l, "arrived", "w"):     resolver.Arrived,
		quarantine(l, "not-arrived", "w"): resolver.NotArrived,
		quarantine(l, "unknown", "w"):     resolver.Unknown,
	}
	r, _ := resolver.New(resolver.Config{
		Source: l,
		Status: func(_ context.Context, q affinity.Quarantine) (resolver.Verdict, error) {
			return verdicts[q.Attempt], nil
		},
		Concurrency: 1, Seed: 1,
	})
	res := r.Pass(context.Background())
	for _, o := range res.Outcomes {
		if o.Resolution == 0 {
			fmt.Println(o.Quarantine.Attempt, o.Verdict, "settles nothing")
			continue
		}
		fmt.Println(o.Quarantine.Attempt, o.Verdict, o.Resolution)
	}
	fmt.Println("still quarantined:", len(l.Quarantined()), "asked again after", res.NextDue-l.Now())
	_ = clk.Advance(res.NextDue)
	res = r.Pass(context.Background())
	fmt.Println("second pass asked", len(res.Outcomes))
	s := r.Stats()
	fmt.Println("accepted", s.ResolvedAccepted, "not accepted", s.ResolvedNotAccepted, "unknown", s.Unknown)
	// Output:
	// 100 arrived Accepted
	// 101 not-arrived NotAccepted
	// 102 unknown settles nothing
	// still quarantined: 1 asked again after 563.293746ms
	// second pass asked 1
	// accepted 1 not accepted 1 unknown 2
}

// The worker side: the ledger records arrivals; answering "not-arrived"
// fences the attempt, so its late arrival is refused.
func ExampleLedger() {
	clk := placement.NewManualClock(time.Hour) // the worker's clock
	ledger, _ := resolver.NewLedger(resolver.LedgerConfig{Identity: "boot-1", Now: clk.Now})
	_ = clk.AdvanceBy(time.Hour) // the worker has been up an hour

	fmt.Println(ledger.Arrive("1001"))
	fmt.Println(ledger.Ask("1001", 30*time.Second).State)
	fmt.Println(ledger.Ask("1002", 30*time.Second).State) // a promise
	fmt.Println(ledger.Arrive("1002"))                    // the late arrival
	a := ledger.Ask("1003", 20*time.Minute)               // older than its Horizon
	fmt.Println(a.State, a.Reason)
	restarted, _ := resolver.NewLedger(resolver.LedgerConfig{Identity: "boot-2", Now: clk.Now})
	a = restarted.Ask("1004", 30*time.Second) // sent before it started
	fmt.Println(a.State, a.Reason, a.Identity)
	// Output:
	// <nil>
	// arrived
	// not-arrived
	// resolver: attempt arrived after it was answered not arrived
	// unknown too-old
	// unknown horizon boot-2
}

// An engine such as vLLM or SGLang has no "did it arrive?" endpoint: a
// sidecar proxy in front of it, with the ledger's middleware and handler,
// answers for it, and HTTPStatus asks the sidecar.
func Example_sidecar() {
	engine := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		_, _ = io.WriteString(w, `{"object":"chat.completion"}`)
	}))
	defer engine.Close()
	u, _ := url.Parse(engine.URL)
	wclk := placement.NewManualClock(0)
	ledger, _ := resolver.NewLedger(resolver.LedgerConfig{Identity: "pod-1", Now: wclk.Now})
	_ = wclk.AdvanceBy(time.Hour)
	mux := http.NewServeMux()
	mux.Handle("/placement/", ledger.Handler("/placement"))
	mux.Handle("/", ledger.Middleware(httputil.NewSingleHostReverseProxy(u)))
	sidecar := httptest.NewServer(mux)
	defer sidecar.Close()

	// The router: one attempt reaches the engine through the sidecar and
	// its answer is lost; one never gets there.
	clk := placement.NewManualClock(0)
	l, _ := affinity.New(affinity.Config{Clock: clk, FirstAttempt: 500})
	defer l.Close()
	_, _ = l.Join(affinity.Worker{ID: "pod-1", Identity: "pod-1"})
	sent := quarantine(l, "s1", "pod-1")
	quarantine(l, "s2", "pod-1")
	req, _ := http.NewRequest(http.MethodPost, sidecar.URL+"/v1/chat/completions", nil)
	req.Header.Set(resolver.DefaultHeader, strconv.FormatUint(sent, 10))
	resp, _ := http.DefaultClient.Do(req)
	resp.Body.Close()

	// HTTPConfig needs no clock: the Resolver passes its Source's (l.Now).
	st := resolver.HTTPStatus(nil, func(affinity.Target) string { return sidecar.URL },
		resolver.HTTPConfig{Prefix: "/placement"})
	r, _ := resolver.New(resolver.Config{Source: l, Status: st, Concurrency: 1})
	byAttempt := map[uint64]resolver.Outcome{}
	for _, o := range r.Pass(context.Background()).Outcomes {
		byAttempt[o.Quarantine.Attempt] = o
	}
	for _, id := range []uint64{500, 501} {
		o := byAttempt[id]
		fmt.Println(id, o.Verdict, o.Resolution, o.ResolveErr)
	}
	// Output:
	// 500 arrived Accepted <nil>
	// 501 not-arrived NotAccepted <nil>
}
