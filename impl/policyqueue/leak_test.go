package policyqueue_test

import (
	"context"
	"runtime"
	"sync"
	"testing"
	"time"

	pq "github.com/placementlab/placement/impl/policyqueue"
	"github.com/stretchr/testify/require"
)

// TestNoGoroutineLeak: waiters that are admitted, cancelled by their
// context and ended by Close all return, and no goroutine stays behind.
func TestNoGoroutineLeak(t *testing.T) {
	before := runtime.NumGoroutine()
	q, err := pq.New(pq.Config{})
	require.NoError(t, err)
	_, err = q.SetCapacity("a", 1)
	require.NoError(t, err)
	held, err := q.Acquire(context.Background(), pq.Shared())
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	results := make(chan error, 6)
	for i := 0; i < 6; i++ {
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			c := context.Background()
			if i%2 == 0 {
				c = ctx
			}
			s, err := q.Acquire(c, pq.Shared())
			if err == nil {
				s.Release()
			}
			results <- err
		}(i)
	}
	deadline := time.Now().Add(waitBound)
	for q.Len() < 6 {
		require.False(t, time.Now().After(deadline), "waiters never queued")
		time.Sleep(time.Millisecond)
	}
	cancel()
	held.Release()
	require.NoError(t, q.Close())
	finished := make(chan struct{})
	go func() { wg.Wait(); close(finished) }()
	select {
	case <-finished:
	case <-time.After(waitBound):
		t.Fatal("waiters still blocked after Close")
	}
	for runtime.NumGoroutine() > before {
		if time.Now().After(deadline.Add(3 * time.Second)) {
			buf := make([]byte, 1<<16)
			t.Fatalf("goroutine leak: %d before, %d after\n%s", before, runtime.NumGoroutine(), buf[:runtime.Stack(buf, true)])
		}
		time.Sleep(5 * time.Millisecond)
	}
}
