package benchmarks

import (
	"errors"
	"testing"
	"time"
)

// TestContenders: every contender binds, hits, releases and removes the
// same way, and refuses to bind a key that is live.
func TestContenders(t *testing.T) {
	for _, c := range contenders() {
		t.Run(c.name, func(t *testing.T) {
			c.check(t)
		})
	}
}

func check[L any](t *testing.T, p Placer[L]) {
	t.Helper()
	defer p.Close()
	l, err := p.Bind("k", Worker{ID: 1})
	if err != nil {
		t.Fatalf("bind: %v", err)
	}
	p.Release(l)
	if _, err := p.Bind("k", Worker{ID: 2}); !errors.Is(err, errBound) {
		t.Fatalf("bind of a live key: %v, want errBound", err)
	}
	l, ok := p.Hit("k")
	if !ok {
		t.Fatal("miss on a live binding")
	}
	p.Release(l)
	p.Remove("k")
	if _, ok := p.Hit("k"); ok {
		t.Fatal("hit after Remove")
	}
}

// TestCoarseClock: the baselines' clock advances while a baseline uses it,
// and its ticker stops with the last one closed.
func TestCoarseClock(t *testing.T) {
	a, b := NewMutexMap(), NewShardedMap()
	start := a.clk.now()
	deadline := time.Now().Add(5 * time.Second)
	for a.clk.now() == start {
		if time.Now().After(deadline) {
			t.Fatal("the coarse clock did not advance in 5 s")
		}
		time.Sleep(CoarseTick)
	}
	a.Close()
	a.Close() // a second Close releases nothing more
	coarse.mu.Lock()
	users := coarse.users
	coarse.mu.Unlock()
	if users != 1 {
		t.Fatalf("users %d after one of two closed, want 1", users)
	}
	done := coarse.done
	b.Close()
	select {
	case <-done:
	default:
		t.Fatal("the ticker still runs after the last baseline closed")
	}
	if w := NewMutexMapWall(); w.clk.now() <= 0 {
		t.Fatal("time.Since on the wall clock is not positive")
	}
}
