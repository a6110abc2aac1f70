package linearizability

import (
	"sync"
	"testing"

	"pgregory.net/rapid"
)

func drawShape(t *rapid.T) Shape {
	return Shape{
		Clients:     rapid.IntRange(1, 4).Draw(t, "clients"),
		Keys:        rapid.IntRange(1, 3).Draw(t, "keys"),
		Targets:     rapid.IntRange(1, 3).Draw(t, "targets"),
		Capacity:    rapid.IntRange(1, 3).Draw(t, "capacity"),
		TTL:         rapid.Int64Range(1, 3).Draw(t, "ttl"),
		InitTimeout: rapid.Int64Range(1, 3).Draw(t, "init"),
	}
}

// sideBySide is the property: the coordinator and the model, driven
// through the same random operations, agree on every result and on every
// key's observable state after every step.
func sideBySide(cov *Coverage, mu *sync.Mutex) func(*rapid.T) {
	return func(t *rapid.T) {
		d, err := NewDriver(drawShape(t))
		if err != nil {
			t.Fatal(err)
		}
		defer d.Close()
		t.Repeat(map[string]func(*rapid.T){
			"step": func(t *rapid.T) {
				in := d.Choose(func(n int) int { return rapid.IntRange(0, n-1).Draw(t, "choice") })
				if err := d.Step(in); err != nil {
					t.Fatal(err)
				}
			},
		})
		if cov != nil {
			mu.Lock()
			cov.Add(d.Coverage)
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
	// Porcupine checks cover them); "used" needs a client that reuses a
	// handle and "error" must never happen. Everything else must occur.
	if miss := cov.Missing("Acquire", "cancelled", "error", "used"); len(miss) > 0 {
		t.Fatalf("too thin: never exercised %v (coverage %+v)", miss, cov)
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
