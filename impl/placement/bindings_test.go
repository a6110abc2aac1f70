package placement

import (
	"context"
	"testing"
	"time"
)

// wantBindings fails unless target has want bindings.
func wantBindings(t *testing.T, c *Coordinator[target], to target, want int, what string) {
	t.Helper()
	if got := c.Bindings(to); got != want {
		t.Fatalf("%s: Bindings(%v) = %d, want %d", what, to, got, want)
	}
}

// Bindings counts the sessions bound to a target at its current
// generation: up with every commit (in time, late, resolved), unchanged by
// hits, releases and reservations, down with every end (Invalidate,
// InvalidateKey, Close at the last lease, expiry once reclaimed), never for
// a binding stale at birth, and back to zero when the target is bumped.
func TestContract_BindingsPerTarget(t *testing.T) {
	c, clk := manual(t, func(c *Config[target]) { c.MaxEntries = 16; c.IdleTTL = 10 * time.Second })
	wantBindings(t, c, w1, 0, "a target never seen")
	l := bind(t, c, "a", w1)
	must(t, bind(t, c, "b", w1).Release())
	must(t, bind(t, c, "c", w2).Release())
	wantBindings(t, c, w1, 2, "two commits")
	wantBindings(t, c, w2, 1, "one commit")
	h := hit(t, c, "a")
	must(t, h.Release())
	must(t, l.Release())
	wantBindings(t, c, w1, 2, "hits and releases")

	// A late Accepted and a Resolve(Accepted) bind too.
	late, err := reserve(t, c, "late").BeginDispatch(w1, 1)
	must(t, err)
	must(t, clk.AdvanceBy(5*time.Second)) // DispatchTimeout: quarantined
	wantBindings(t, c, w1, 2, "a quarantine")
	ll, err := late.Complete(Accepted)
	must(t, err)
	must(t, ll.Release())
	q, err := reserve(t, c, "resolved").BeginDispatch(w1, 1)
	must(t, err)
	q.Drop()
	must(t, c.Resolve("resolved", q.Attempt(), 1, ResolveAccepted))
	wantBindings(t, c, w1, 4, "a late Accepted and a Resolve(ResolveAccepted)")

	// Ends: InvalidateKey, Invalidate, Close at the last lease.
	if removed, err := c.InvalidateKey("b"); !removed || err != nil {
		t.Fatalf("InvalidateKey: %v %v", removed, err)
	}
	must(t, hit(t, c, "late").Invalidate())
	first, second := hit(t, c, "resolved"), hit(t, c, "resolved")
	must(t, first.Close())
	wantBindings(t, c, w1, 2, "InvalidateKey, Invalidate, and a Close while a lease is held") // a, resolved
	must(t, second.Release())
	wantBindings(t, c, w1, 1, "the last lease of a closing binding") // a

	// Expiry: counted until reclaimed.
	must(t, bind(t, c, "e", w1).Release())
	must(t, clk.Set(clk.Now()+20*time.Second))
	wantBindings(t, c, w1, 2, "expired, not reclaimed yet") // a, e
	clk.Reclaim()
	wantBindings(t, c, w1, 0, "reclaimed")

	// A bump starts the new generation at zero; the old bindings' ends
	// leave it alone; a binding stale at birth is never counted.
	must(t, bind(t, c, "x", w2).Release())
	wantBindings(t, c, w2, 1, "before the bump") // x ("c" expired and was reclaimed)
	stale, err := reserve(t, c, "stale").BeginDispatch(w2, 1)
	must(t, err)
	c.BumpGeneration(w2)
	wantBindings(t, c, w2, 0, "after the bump")
	_, err = stale.Complete(Accepted)
	wantIs(t, err, ErrStaleAtBirth)
	clk.Reclaim() // drops the stale binding "x"
	wantBindings(t, c, w2, 0, "the old generation's bindings dropped")
	must(t, bind(t, c, "y", w2).Release())
	wantBindings(t, c, w2, 1, "a commit at the new generation")
	// a, b, c, late, resolved, e, x, y: eight bindings made; the stale one
	// was not one.
	if s := c.Stats(); s.Live != 1 || s.Binds != 8 {
		t.Fatalf("stats %+v, want the one live binding of eight made", s)
	}
}

// Bindings stays exact under concurrent commits and ends on many keys.
func TestBindings_Concurrent(t *testing.T) {
	c, _ := manual(t, func(c *Config[target]) { c.MaxEntries = 1024 })
	done := make(chan struct{})
	for g := 0; g < 4; g++ {
		go func(g int) {
			defer func() { done <- struct{}{} }()
			for i := 0; i < 200; i++ {
				key := string(rune('a'+g)) + string(rune('0'+i%10)) + string(rune('0'+i/10%10)) + string(rune('0'+i/100))
				a, err := c.Acquire(context.Background(), key)
				if err != nil {
					t.Error(err)
					return
				}
				if a.Reservation != nil {
					if _, err := a.Reservation.CommitAccepted(w1, c.Generation(w1)); err != nil {
						t.Error(err)
					}
				}
				if i%3 == 0 {
					_ = a.Lease.Release()
					if a.Reservation != nil {
						a.Done()
					}
					if _, err := c.InvalidateKey(key); err != nil {
						t.Error(err)
					}
					continue
				}
				a.Done()
			}
		}(g)
	}
	for g := 0; g < 4; g++ {
		<-done
	}
	want := 4 * (200 - 67) // every third key (i%3 == 0) was invalidated
	wantBindings(t, c, w1, want, "after the concurrent run")
	if s := c.Stats(); s.Live != int64(want) {
		t.Fatalf("Stats.Live %d, Bindings %d", s.Live, want)
	}
}
