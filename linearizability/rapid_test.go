package linearizability

import (
	"sync"
	"testing"

	"pgregory.net/rapid"
)

func sideBySide(cov *Coverage, mu *sync.Mutex) func(*rapid.T) {
	return func(t *rapid.T) {
		c := SideBySide(t)
		if cov != nil {
			mu.Lock()
			cov.Add(c)
			mu.Unlock()
		}
	}
}

// TestImplMatchesModel is the rapid state-machine test: the implementation
// and the model side by side through every action, sequentially.
func TestImplMatchesModel(t *testing.T) {
	var cov Coverage
	var mu sync.Mutex
	rapid.Check(t, sideBySide(&cov, &mu))
	// A blocking Acquire and its cancellation need concurrency (the
	// Porcupine checks cover them) and "error" must never happen.
	// Everything else must occur.
	if miss := cov.Missing("Acquire", "cancelled", "error"); len(miss) > 0 {
		t.Fatalf("too thin: never exercised %v (coverage %+v)", miss, cov)
	}
	t.Logf("%d uses of stale handles, each refused with no change:\n%s", cov.Stale.Total(), &cov.Stale)
	if miss := cov.Stale.Missing(); len(miss) > 0 {
		t.Fatalf("too thin: stale handles never used %v", miss)
	}
	total := 0
	for _, n := range cov.Ops {
		total += n
	}
	if total < 10000 {
		t.Fatalf("too thin: only %d operations", total)
	}
	t.Logf("%d operations; coverage: %+v", total, cov)
}
