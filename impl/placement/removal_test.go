package placement

import (
	"errors"
	"sync"
	"testing"
	"time"
)

// A capacity check that can see a bump's new generation sees the bump: a
// full table whose other occupant is a quarantine the bump made stale
// sweeps it and admits the newcomer (found by Porcupine, seed 1053:
// BumpGeneration stored the new generation and only then moved the epoch
// the capacity path compares, so a check in between refused without the
// sweep that would have dropped the quarantine).
func TestContract_CapacityCheckDuringBumpSweepsStale(t *testing.T) {
	c, _ := manual(t, func(c *Config[target]) { c.MaxEntries, c.QuarantineTTL = 2, time.Minute })
	quarantine(t, c, "q") // on w1, generation 1
	reserve(t, c, "r")    // the table is full
	stored, resume := make(chan struct{}), make(chan struct{})
	var resumeOnce sync.Once
	release := func() { resumeOnce.Do(func() { close(resume) }) }
	defer release() // a failure below must not strand the bump
	c.testBumpStored = func() {
		close(stored)
		<-resume
	}
	bumped := make(chan uint64, 1)
	go func() { bumped <- c.BumpGeneration(w1) }()
	recvWithin(t, stored, wakeLimit, "the bump storing generation 2")
	if g := c.Generation(w1); g != 2 {
		t.Fatalf("generation %d during the bump, want 2 (stored)", g)
	}
	// The new generation is visible: "q" is stale, holds no slot, and the
	// table (capacity 2) has room.
	a, err := c.TryAcquire("n")
	release()
	if g := recvWithin(t, bumped, wakeLimit, "the bump's return"); g != 2 {
		t.Fatalf("BumpGeneration = %d, want 2", g)
	}
	if err != nil || a.Reservation == nil {
		t.Fatalf("acquire after the new generation was stored: %v, want a reservation (the stale quarantine takes no place)", err)
	}
	if i := state(t, c, "q"); i.State != StateAbsent {
		t.Fatalf("the stale quarantine: %v, want absent", i.State)
	}
}

// Once a removal of a live entry can be seen (its binding dead to a lease's
// Close, to Query and to Bindings, or its event reported), a full table
// must not refuse for want of the slot it is about to free: the capacity
// path waits for removals under way. (Observations that take the key's
// lock, as Query of an unbound entry does, would wait for the removal.) (found by Porcupine, seed 9:
// InvalidateKey killed the binding, a lease's Close returned superseded,
// and that client's next Acquire was refused for capacity, before the
// invalidation freed the slot, on a table with nothing else live). Every
// removal path of a live entry is checked, paused at the same point.
func TestContract_CapacityWaitsForRemovalUnderWay(t *testing.T) {
	type setup struct {
		remove  func() error // the removal, run on its own goroutine
		observe func()       // what the test sees of it while it is paused
	}
	cases := []struct {
		name  string
		setup func(t *testing.T, c *Coordinator[target], rec *recorder) setup
	}{
		{"InvalidateKey", func(t *testing.T, c *Coordinator[target], _ *recorder) setup {
			l := bind(t, c, "k", w1)
			return setup{
				remove: func() error {
					ok, err := c.InvalidateKey("k")
					if err == nil && !ok {
						err = errors.New("InvalidateKey removed nothing")
					}
					return err
				},
				observe: func() {
					must(t, l.Close()) // superseded: the binding is gone
					if n := c.Bindings(w1); n != 0 {
						t.Errorf("Bindings during the removal: %d, want 0", n)
					}
				},
			}
		}},
		{"CloseLastLease", func(t *testing.T, c *Coordinator[target], _ *recorder) setup {
			l := bind(t, c, "k", w1)
			return setup{
				remove: l.Close,
				observe: func() {
					if n := c.Bindings(w1); n != 0 {
						t.Errorf("Bindings during the removal: %d, want 0", n)
					}
				},
			}
		}},
		{"LeaseInvalidate", func(t *testing.T, c *Coordinator[target], _ *recorder) setup {
			l := bind(t, c, "k", w1)
			return setup{
				remove: l.Invalidate,
				observe: func() {
					if l.Current() {
						t.Errorf("the lease is Current during the removal")
					}
				},
			}
		}},
		{"ResolveNotAccepted", func(t *testing.T, c *Coordinator[target], rec *recorder) setup {
			d := quarantine(t, c, "k")
			return setup{
				remove: func() error { return c.Resolve("k", d.Attempt(), d.Generation(), ResolveNotAccepted) },
				observe: func() {
					ks := rec.kinds()
					if len(ks) == 0 || ks[len(ks)-1] != EventResolved {
						t.Errorf("events during the removal: %v, want the resolution last", ks)
					}
				},
			}
		}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			rec := &recorder{}
			c, _ := manual(t, func(c *Config[target]) { c.MaxEntries, c.QuarantineTTL, c.Observer = 1, time.Minute, rec.observe })
			s := tc.setup(t, c, rec) // the table is full
			paused, resume := make(chan struct{}), make(chan struct{})
			var pauseOnce, resumeOnce sync.Once
			release := func() { resumeOnce.Do(func() { close(resume) }) }
			defer release()
			c.testBeforeFree = func(key string) {
				if key == "k" {
					pauseOnce.Do(func() {
						close(paused)
						<-resume
					})
				}
			}
			c.testRemovalWait = release // the newcomer waits: let the removal finish
			removed := make(chan error, 1)
			go func() { removed <- s.remove() }()
			recvWithin(t, paused, wakeLimit, "the removal's pause before it frees the slot")
			s.observe()
			type answer struct {
				a   Acquisition[target]
				err error
			}
			got := make(chan answer, 1)
			go func() {
				a, err := c.TryAcquire("n")
				got <- answer{a, err}
			}()
			ans := recvWithin(t, got, wakeLimit, "the newcomer's answer")
			release()
			must(t, recvWithin(t, removed, wakeLimit, "the removal's return"))
			if ans.err != nil || ans.a.Reservation == nil {
				t.Fatalf("acquire after the removal could be seen: %v, want a reservation (nothing else is live)", ans.err)
			}
		})
	}
}
