package affinity_test

import (
	"context"
	"errors"
	"runtime"
	"sync"
	"testing"
	"time"

	"github.com/placementlab/placement/impl/affinity"
	"github.com/placementlab/placement/impl/placement"
)

// TestNoGoroutineLeak: a layer on the runtime clock (its reapers and the
// shared ticker running), with waiting requests, a cancelled wait and a
// wait that Close ends, leaves no goroutine behind once closed.
func TestNoGoroutineLeak(t *testing.T) {
	before := runtime.NumGoroutine()
	l, err := affinity.New(affinity.Config{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := l.Join(affinity.Worker{ID: "w", Identity: "1", Ranks: 2}); err != nil {
		t.Fatal(err)
	}
	key, _ := affinity.Namespace{}.Session("s")
	placing, err := l.Start(context.Background(), affinity.Request{Session: key})
	if err != nil || !placing.Placing() {
		t.Fatalf("Start: %v", err)
	}
	var wg sync.WaitGroup
	errs := make(chan error, 3)
	ctx, cancel := context.WithCancel(context.Background())
	for i := 0; i < 3; i++ {
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			c := context.Background()
			if i == 0 {
				c = ctx
			}
			tr, err := l.Start(c, affinity.Request{Session: key})
			if err == nil {
				tr.Done()
			}
			errs <- err
		}(i)
	}
	time.Sleep(20 * time.Millisecond)
	cancel()
	time.Sleep(20 * time.Millisecond)
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	wg.Wait()
	close(errs)
	var cancelled, closed int
	for err := range errs {
		switch {
		case errors.Is(err, placement.ErrCancelled):
			cancelled++
		case errors.Is(err, placement.ErrClosed):
			closed++
		}
	}
	placing.Done()
	if cancelled != 1 || closed != 2 {
		t.Fatalf("waiters: %d cancelled, %d ended by Close; want 1 and 2", cancelled, closed)
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
