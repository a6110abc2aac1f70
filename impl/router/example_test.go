package router_test

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync/atomic"

	"github.com/placementlab/placement/impl/affinity"
	"github.com/placementlab/placement/impl/picker"
	"github.com/placementlab/placement/impl/placement"
	"github.com/placementlab/placement/impl/router"
)

// A router calls Do once per request with its transport: here a fake one
// where worker "a" is busy (it refuses) and "b" takes everything. The
// driver retries the refusal on b, binds the session there, and the next
// turn is a hit.
func ExampleDriver_Do() {
	layer, err := affinity.New(affinity.Config{Clock: placement.NewManualClock(0)})
	if err != nil {
		panic(err)
	}
	defer layer.Close()
	for _, id := range []string{"a", "b"} {
		if _, err := layer.Join(affinity.Worker{ID: id, Identity: "boot-1"}); err != nil {
			panic(err)
		}
	}
	d, err := router.New(router.Config{Layer: layer, Candidates: func(affinity.Phase) []picker.Candidate {
		// a first: the scheduler would send new sessions there.
		return []picker.Candidate{{Target: affinity.WorkerOnly("a")}, {Target: affinity.WorkerOnly("b")}}
	}, Pipeline: &picker.Pipeline{Picker: firstPicker{}}})
	if err != nil {
		panic(err)
	}
	send := func(ctx context.Context, x router.Dispatch) (placement.Outcome, router.Relay, error) {
		if x.Target.Worker == "a" {
			return placement.DefinitelyNotAccepted, nil, fmt.Errorf("a: 503")
		}
		return placement.Accepted, func() error { return nil }, nil // the relay would stream the body
	}
	key, _ := affinity.Namespace{Model: "m"}.Session("conversation-1")
	for turn := 1; turn <= 2; turn++ {
		res, err := d.Do(context.Background(), affinity.Request{Session: key}, nil, send)
		fmt.Printf("turn %d: %s hit=%v placed=%v attempts=%d refused=%v err=%v\n",
			turn, res.Target, res.Hit, res.Placed, res.Attempts, res.Refused, err)
	}
	// Output:
	// turn 1: b hit=false placed=true attempts=2 refused=[a] err=<nil>
	// turn 2: b hit=true placed=false attempts=1 refused=[] err=<nil>
}

// A router is a Proxy over the driver: the session header picks the
// binding, the worker's answer streams back. Here one worker on loopback,
// two turns of one session.
func ExampleProxy() {
	worker := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprintf(w, "hello from the worker (placing dispatch: %v)\n", r.Header.Get("X-Placement-Attempt") != "")
	}))
	defer worker.Close()
	layer, err := affinity.New(affinity.Config{})
	if err != nil {
		panic(err)
	}
	defer layer.Close()
	if _, err := layer.Join(affinity.Worker{ID: "w1", Identity: "boot-1"}); err != nil {
		panic(err)
	}
	d, err := router.New(router.Config{Layer: layer})
	if err != nil {
		panic(err)
	}
	base, _ := url.Parse(worker.URL)
	proxy := &router.Proxy{Driver: d,
		Namespace: func(*http.Request) affinity.Namespace { return affinity.Namespace{Model: "llama"} },
		Upstream:  func(affinity.Target) *url.URL { return base }}
	srv := httptest.NewServer(proxy)
	defer srv.Close()
	for range 2 {
		req, _ := http.NewRequest(http.MethodPost, srv.URL+"/v1/chat/completions", strings.NewReader(`{}`))
		req.Header.Set("X-Session-ID", "conversation-7")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			panic(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		fmt.Print(resp.Status, ": ", string(body))
	}
	fmt.Println("hits:", layer.Stats().Hits)
	// Output:
	// 200 OK: hello from the worker (placing dispatch: true)
	// 200 OK: hello from the worker (placing dispatch: false)
	// hits: 1
}

// The health poller keeps the membership: a worker that answers joins with
// the identity and ranks it reports; a new identity is a restart.
func ExampleHealth_Pass() {
	var identity atomic.Value // what the worker reports
	identity.Store("boot-1")
	worker := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		fmt.Fprintf(w, `{"identity":%q,"ranks":2}`, identity.Load())
	}))
	defer worker.Close()
	layer, err := affinity.New(affinity.Config{})
	if err != nil {
		panic(err)
	}
	defer layer.Close()
	h, err := router.NewHealth(router.HealthConfig{Layer: layer,
		Endpoints: []router.Endpoint{{ID: "w1", URL: worker.URL + "/health"}}})
	if err != nil {
		panic(err)
	}
	ctx := context.Background()
	for _, c := range h.Pass(ctx) {
		fmt.Println(c.Worker, c.Kind, c.Identity)
	}
	identity.Store("boot-2") // the worker restarted
	for _, c := range h.Pass(ctx) {
		fmt.Println(c.Worker, c.Kind, c.Identity)
	}
	fmt.Println(layer.Workers()[0].Ranks, "ranks")
	// Output:
	// w1 joined boot-1
	// w1 restarted boot-2
	// 2 ranks
}
