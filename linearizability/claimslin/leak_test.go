package claimslin

import (
	"runtime"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// settle waits up to 10 s for the goroutine count to come back to
// before, and fails t with every goroutine's stack if it does not.
func settle(t *testing.T, before int) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for runtime.NumGoroutine() > before {
		if time.Now().After(deadline) {
			buf := make([]byte, 1<<20)
			t.Fatalf("goroutine leak: %d before, %d after\n%s", before, runtime.NumGoroutine(), buf[:runtime.Stack(buf, true)])
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// TestNoGoroutineLeak: a whole run (replicas, their event streams, the
// fault injector, the backend) leaves no goroutine behind.
func TestNoGoroutineLeak(t *testing.T) {
	before := runtime.NumGoroutine()
	run, err := Execute(DrawPlan(3, 100, BackendMem))
	require.NoError(t, err)
	require.NotEmpty(t, run.History)
	settle(t, before)
}

// TestRoutingNoGoroutineLeak: a whole routing run (replica Coordinators,
// their recording event streams, the injector, the backend) leaves no
// goroutine behind.
func TestRoutingNoGoroutineLeak(t *testing.T) {
	before := runtime.NumGoroutine()
	run, err := ExecuteRoutes(DrawRoutingPlan(2, 60, BackendMem))
	require.NoError(t, err)
	require.NotEmpty(t, run.Routes)
	settle(t, before)
}
