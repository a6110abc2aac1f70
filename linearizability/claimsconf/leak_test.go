package claimsconf

import (
	"runtime"
	"testing"
	"time"

	"github.com/placementlab/placement/impl/claims"
	mc "github.com/placementlab/placement/model/claims"
)

// TestNoGoroutineLeak: a run (a backend on a manual clock, handles, a
// crash) and a broken variant's failing check leave no goroutine behind.
func TestNoGoroutineLeak(t *testing.T) {
	before := runtime.NumGoroutine()
	steps := []struct{ opt options }{{options{}}, {options{wrap: func(s claims.Store) claims.Store { return unfencedClose{s} }}}}
	for _, s := range steps {
		_, _ = run(t, s.opt, claimL(0, 0, 0), claimL(1, 0, 0), rs(mc.ActRoute, 0, 0), rs(mc.ActRoute, 1, 0), rs(mc.ActClose, 0, 0), onR(mc.ActCrash, 1))
	}
	deadline := time.Now().Add(5 * time.Second)
	for runtime.NumGoroutine() > before {
		if time.Now().After(deadline) {
			buf := make([]byte, 1<<16)
			t.Fatalf("goroutine leak: %d before, %d after\n%s", before, runtime.NumGoroutine(), buf[:runtime.Stack(buf, true)])
		}
		time.Sleep(10 * time.Millisecond)
	}
}
