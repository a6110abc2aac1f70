package affinity_test

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"time"

	"github.com/placementlab/placement/impl/affinity"
	"github.com/placementlab/placement/impl/claims/memstore"
	"github.com/placementlab/placement/impl/placement"
)

// forward stands for the router's upstream call: it sends the request to
// the target (with the attempt id as an idempotency key when there is one)
// and says what happened.
type forward func(ctx context.Context, t affinity.Target, attempt uint64) placement.Outcome

// serve is a router's request path on the layer: read the session, start
// the turn, narrow the candidates, let the scheduler choose (here: the
// first), dispatch, report the outcome, and on a refusal try another.
func serve(ctx context.Context, l *affinity.Layer, ns affinity.Namespace, h http.Header,
	all []affinity.Candidate, fwd forward) (affinity.Target, error) {
	req, err := l.RequestFromHeader(ns, h, affinity.PhaseDecode)
	if err != nil {
		return affinity.Target{}, err // 400: *SessionIDError
	}
	turn, err := l.Start(ctx, req)
	if err != nil {
		return affinity.Target{}, err // *PinError, *QuarantinedError (hard mode), ctx
	}
	defer turn.Done()
	for {
		cands, err := turn.Eligible(all, nil)
		if err != nil {
			return affinity.Target{}, err // *IneligibleError, ErrNoCandidates
		}
		a, err := turn.Dispatch(cands[0].Target) // the scheduler's choice
		if err != nil {
			return affinity.Target{}, err
		}
		actx, cancel := a.Context(ctx)
		err = a.Complete(fwd(actx, a.Target(), a.ID()))
		cancel()
		if !errors.Is(err, placement.ErrNotAccepted) {
			return a.Target(), err
		}
		all = without(all, a.Target().Worker) // refused: try another worker
	}
}

func without(cs []affinity.Candidate, worker string) []affinity.Candidate {
	var out []affinity.Candidate
	for _, c := range cs {
		if c.Target.Worker != worker {
			out = append(out, c)
		}
	}
	return out
}

// A session's turns stay on the worker of its first turn; a restart of that
// worker (a new identity) moves the session, a refusal moves it at once.
func Example() {
	l, err := affinity.New(affinity.Config{}) // soft mode, the core's defaults
	if err != nil {
		panic(err)
	}
	defer l.Close()
	for _, id := range []string{"a", "b"} {
		if _, err := l.Join(affinity.Worker{ID: id, Identity: "boot-1", Ranks: 2}); err != nil {
			panic(err)
		}
	}
	all := []affinity.Candidate{
		{Target: affinity.Ranked("a", 0)}, {Target: affinity.Ranked("a", 1)},
		{Target: affinity.Ranked("b", 0)}, {Target: affinity.Ranked("b", 1)},
	}
	ns := affinity.Namespace{Model: "llama-70b", Tenant: "acme"}
	h := http.Header{}
	h.Set("X-Session-ID", "conversation-42")
	ctx := context.Background()
	accept := func(context.Context, affinity.Target, uint64) placement.Outcome { return placement.Accepted }

	// The scheduler prefers b/1 for the first turn: the session binds there.
	t, _ := serve(ctx, l, ns, h, all[3:], accept)
	fmt.Println("turn 1:", t)
	t, _ = serve(ctx, l, ns, h, all, accept) // narrowed to the binding
	fmt.Println("turn 2:", t)

	if _, err := l.Join(affinity.Worker{ID: "b", Identity: "boot-2", Ranks: 2}); err != nil {
		panic(err)
	}
	t, _ = serve(ctx, l, ns, h, all, accept) // b restarted: placed anew
	fmt.Println("turn 3:", t)

	refuseA := func(_ context.Context, t affinity.Target, _ uint64) placement.Outcome {
		if t.Worker == "a" {
			return placement.DefinitelyNotAccepted
		}
		return placement.Accepted
	}
	t, _ = serve(ctx, l, ns, h, all, refuseA) // a refuses the later turn: it moves
	fmt.Println("turn 4:", t)
	s := l.Stats()
	fmt.Println("hits", s.Hits, "binds", s.Binds, "moves on refusal", s.Moves[affinity.MoveRefused]) // turn 2 hit; turn 4's hit was refused
	// Output:
	// turn 1: b/1
	// turn 2: b/1
	// turn 3: a/0
	// turn 4: b/0
	// hits 1 binds 3 moves on refusal 1
}

// A simulation host drives the layer on its own clock: an idle binding
// expires when the host advances past its TTL.
func Example_manualClock() {
	clk := placement.NewManualClock(0)
	l, err := affinity.New(affinity.Config{Clock: clk, IdleTTL: time.Minute})
	if err != nil {
		panic(err)
	}
	defer l.Close()
	if _, err := l.Join(affinity.Worker{ID: "w", Identity: "pod-1"}); err != nil {
		panic(err)
	}
	key, _ := affinity.Namespace{}.Session("s-1")
	turn, _ := l.Start(context.Background(), affinity.Request{Session: key})
	a, _ := turn.Dispatch(affinity.WorkerOnly("w"))
	_ = a.Complete(placement.Accepted)
	turn.Done()
	t, ok := l.Query(key, affinity.PhaseDecode)
	fmt.Println("bound:", t, ok)
	_ = clk.Advance(2 * time.Minute)
	_, ok = l.Query(key, affinity.PhaseDecode)
	fmt.Println("after two idle minutes:", ok, "expirations:", l.Stats().Expirations)
	// Output:
	// bound: w true
	// after two idle minutes: false expirations: 1
}

// Two router replicas on one claims store (here the in-memory one; in
// production etcdstore or dirstore): a session placed through one is
// bound on the other too, and the same request code serves on both.
func Example_replicas() {
	backend := memstore.NewBackend(memstore.Config{})
	defer backend.Close()
	var layers []*affinity.Layer
	for _, name := range []string{"router-0", "router-1"} {
		store := backend.Open(name) // each replica's own handle (its store session)
		defer store.Shutdown()
		l, err := affinity.New(affinity.Config{Replicas: &affinity.Replicas{Store: store, Name: name}})
		if err != nil {
			panic(err)
		}
		defer l.Close()
		for _, id := range []string{"a", "b"} { // registered in the store (the same identity: once)
			if _, err := l.Join(affinity.Worker{ID: id, Identity: "boot-1"}); err != nil {
				panic(err)
			}
		}
		layers = append(layers, l)
	}
	all := []affinity.Candidate{{Target: affinity.WorkerOnly("a")}, {Target: affinity.WorkerOnly("b")}}
	ns := affinity.Namespace{Model: "llama-70b", Tenant: "acme"}
	h := http.Header{}
	h.Set("X-Session-ID", "conversation-7")
	ctx := context.Background()
	accept := func(context.Context, affinity.Target, uint64) placement.Outcome { return placement.Accepted }

	t, _ := serve(ctx, layers[0], ns, h, all[1:], accept) // router-0 places the session on b
	fmt.Println("router-0:", t)
	t, _ = serve(ctx, layers[1], ns, h, all, accept) // router-1 reads the claim: narrowed to b
	fmt.Println("router-1:", t)
	t, _ = serve(ctx, layers[1], ns, h, all, accept) // and now holds it: a cached hit
	fmt.Println("router-1:", t, "hits", layers[1].Stats().Hits)
	// Output:
	// router-0: b
	// router-1: b
	// router-1: b hits 1
}
