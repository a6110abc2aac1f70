package affinity

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/placementlab/placement/impl/claims/memstore"
	"github.com/placementlab/placement/impl/placement"
)

// TestContract_MembershipChangeBeforeDispatch: a Leave, a restart or a
// failed health check that lands between a placing dispatch's read of the
// membership and its BeginDispatch is seen by the read after it: nothing
// is dispatched (the attempt is rolled back), the dispatch returns
// ErrPinnedWorkerGone, and the session is still the request's to place.
func TestContract_MembershipChangeBeforeDispatch(t *testing.T) {
	for _, change := range []string{"leave", "restart", "fail", "leave/replicas", "restart/replicas", "fail/replicas"} {
		t.Run(change, func(t *testing.T) {
			cfg := Config{Clock: placement.NewManualClock(0)}
			if strings.HasSuffix(change, "/replicas") {
				// The same over a replica on an in-memory claims store.
				change = strings.TrimSuffix(change, "/replicas")
				b := memstore.NewBackend(memstore.Config{Clock: cfg.Clock})
				defer b.Close()
				h := b.Open("r1")
				defer func() { _ = h.Shutdown() }()
				cfg.Replicas = &Replicas{Store: h, Name: "r1", StoreTimeout: 2 * time.Second}
			}
			l, err := New(cfg)
			if err != nil {
				t.Fatal(err)
			}
			defer l.Close()
			for _, id := range []string{"a", "b"} {
				if _, err := l.Join(Worker{ID: id, Identity: "1"}); err != nil {
					t.Fatal(err)
				}
			}
			key, _ := Namespace{}.Session("s")
			turn, err := l.Start(waitCtx(t), Request{Session: key})
			if err != nil || !turn.Placing() {
				t.Fatalf("Start: %v", err)
			}
			defer turn.Done()
			testBeforeDispatch = func() {
				testBeforeDispatch = nil
				switch change {
				case "leave":
					err = l.Leave("a")
				case "restart":
					_, err = l.Join(Worker{ID: "a", Identity: "2"})
				case "fail":
					err = l.Fail("a")
				}
				if err != nil {
					t.Error(err)
				}
			}
			defer func() { testBeforeDispatch = nil }()
			a, err := turn.Dispatch(WorkerOnly("a"))
			if !errors.Is(err, ErrPinnedWorkerGone) {
				t.Fatalf("Dispatch to a worker that changed meanwhile: %v, attempt %v", err, a)
			}
			if !turn.Placing() {
				t.Fatal("the request no longer places the session")
			}
			a, err = turn.Dispatch(WorkerOnly("b"))
			if err != nil || a.Complete(placement.Accepted) != nil {
				t.Fatalf("Dispatch to b: %v", err)
			}
			if got, ok := l.Query(key, PhaseDecode); !ok || got != WorkerOnly("b") {
				t.Fatalf("bound to %v, %v", got, ok)
			}
		})
	}
}

// TestContract_QuarantineEndsWithTheRestart: a restart (or Leave) ends the
// quarantines of attempts on the worker in the same step that fences its
// bindings: a request that reads the membership after the Join published
// it finds the session free to place, even before the Join has bumped the
// core (hard mode: no *QuarantinedError).
func TestContract_QuarantineEndsWithTheRestart(t *testing.T) {
	for _, change := range []string{"restart", "leave"} {
		t.Run(change, func(t *testing.T) {
			l, err := New(Config{Clock: placement.NewManualClock(0), Mode: ModeHard})
			if err != nil {
				t.Fatal(err)
			}
			defer l.Close()
			for _, id := range []string{"a", "b"} {
				if _, err := l.Join(Worker{ID: id, Identity: "1"}); err != nil {
					t.Fatal(err)
				}
			}
			key, _ := Namespace{}.Session("s")
			turn, err := l.Start(waitCtx(t), Request{Session: key})
			if err != nil {
				t.Fatal(err)
			}
			a, err := turn.Dispatch(WorkerOnly("a"))
			if err != nil || !errors.Is(a.Complete(placement.Ambiguous), ErrOutcomeUnknown) {
				t.Fatalf("an ambiguous dispatch: %v", err)
			}
			turn.Done()
			var during error
			testBeforeFence = func() {
				testBeforeFence = nil
				tr, err := l.Start(waitCtx(t), Request{Session: key})
				during = err
				if err == nil {
					if !tr.Placing() {
						during = errors.New("not placing")
					}
					tr.Done()
				}
			}
			defer func() { testBeforeFence = nil }()
			if change == "restart" {
				_, err = l.Join(Worker{ID: "a", Identity: "2"})
			} else {
				err = l.Leave("a")
			}
			if err != nil {
				t.Fatal(err)
			}
			if during != nil {
				t.Fatalf("a request between the %s's publish and its bump: %v", change, during)
			}
			if s := l.Stats(); s.Quarantined != 0 || s.QuarantinesDropped != 1 {
				t.Fatalf("after the %s: %d quarantined, %d dropped", change, s.Quarantined, s.QuarantinesDropped)
			}
		})
	}
}

// TestContract_StartJudgesALiveBinding: a Start that hits a binding and is
// delayed before it judges the binding's worker (as a descheduled goroutine
// is) does not return Bound on a binding that ended meanwhile: what Start
// returns held at one instant. Found by linearizability/affinitylin
// (testdata/histories/bug-start-bound-to-a-binding-that-ended.json): the
// binding's worker failed, another request moved the binding, the worker
// recovered, and only then did the delayed Start judge it (up) and return
// it as its binding.
func TestContract_StartJudgesALiveBinding(t *testing.T) {
	l, err := New(Config{Clock: placement.NewManualClock(0)})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	for _, id := range []string{"a", "b"} {
		if _, err := l.Join(Worker{ID: id, Identity: "1"}); err != nil {
			t.Fatal(err)
		}
	}
	key, _ := Namespace{}.Session("s")
	bind := func(w string) {
		tr, err := l.Start(waitCtx(t), Request{Session: key})
		if err != nil {
			t.Fatal(err)
		}
		defer tr.Done()
		a, err := tr.Dispatch(WorkerOnly(w))
		if err != nil || a.Complete(placement.Accepted) != nil {
			t.Fatalf("binding to %s: %v", w, err)
		}
	}
	bind("a")
	testAfterHit = func() {
		testAfterHit = nil
		// Meanwhile: a fails, the session moves to b, a recovers.
		if err := l.Fail("a"); err != nil {
			t.Error(err)
		}
		bind("b")
		if _, err := l.Join(Worker{ID: "a", Identity: "1"}); err != nil {
			t.Error(err)
		}
	}
	defer func() { testAfterHit = nil }()
	tr, err := l.Start(waitCtx(t), Request{Session: key})
	if err != nil {
		t.Fatal(err)
	}
	defer tr.Done()
	if got, ok := tr.Bound(); !ok || got != WorkerOnly("b") {
		t.Fatalf("Start returned the binding %v (bound %v); the session's binding is b", got, ok)
	}
}
