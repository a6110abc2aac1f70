package placement

import (
	"fmt"
	"testing"
	"time"
)

// wantIdentity fails unless s keeps the quarantine identity: every
// quarantine ends one way or is still open.
func wantIdentity(t *testing.T, s Stats, what string) {
	t.Helper()
	if s.Quarantines != s.Resolutions+s.QuarantineExpirations+s.QuarantinesDropped+s.Quarantined {
		t.Fatalf("%s: Quarantines %d != Resolutions %d + QuarantineExpirations %d + QuarantinesDropped %d + Quarantined %d",
			what, s.Quarantines, s.Resolutions, s.QuarantineExpirations, s.QuarantinesDropped, s.Quarantined)
	}
}

// Stats tells what every caller sees, with no call in progress and nothing
// swept: a dispatch past its deadline is quarantined, and counted both open
// and among the quarantines; a quarantine past its QuarantineTTL, or whose
// target was bumped, is over, neither live nor quarantined, and counted
// among the ends. The identity holds after each step.
func TestContract_StatsCountWhatCallersSee(t *testing.T) {
	c, clk := manual(t, func(c *Config[target]) {
		c.DispatchTimeout, c.QuarantineTTL, c.MaxEntries = time.Second, 3*time.Second, 8
	})
	dispatch := func(key string, to target) *Dispatch[target] {
		t.Helper()
		d, err := reserve(t, c, key).BeginDispatch(to, c.Generation(to))
		must(t, err)
		return d
	}
	dispatch("timeout", w1)
	dispatch("expires", w1)
	bumped := dispatch("bumped", w2)
	_, err := bumped.Complete(Ambiguous)
	wantIs(t, err, ErrAmbiguous)
	must(t, clk.Set(time.Second)) // both dispatches of w1 time out; nothing is swept
	s := c.Stats()
	wantIdentity(t, s, "dispatches past their deadline")
	if s.Quarantined != 3 || s.Quarantines != 3 || s.Live != 3 {
		t.Fatalf("dispatches past their deadline: %+v, want 3 quarantined and live", s)
	}
	c.BumpGeneration(w2) // ends the quarantine of "bumped"
	must(t, clk.Set(4*time.Second))
	s = c.Stats() // the other two are over too (QuarantineTTL after the dispatch deadline)
	wantIdentity(t, s, "quarantines that are over")
	if s.Quarantined != 0 || s.Live != 0 || s.QuarantineExpirations != 2 || s.QuarantinesDropped != 1 {
		t.Fatalf("quarantines that are over: %+v, want none live, 2 expired and 1 dropped", s)
	}
	for _, key := range []string{"timeout", "expires", "bumped"} {
		if i := state(t, c, key); i.State != StateAbsent {
			t.Fatalf("%s reads %v after Stats counted it over", key, i.State)
		}
	}
	if s := c.Stats(); s.Quarantines != 3 {
		t.Fatalf("a second Stats changed the counts: %+v", s)
	}
}

// A full table reclaims what is over before it refuses anyone: here the only
// other entry is a dispatch that timed out and whose quarantine ended, long
// before the reservation's own deadline, with no sweep since.
func TestContract_FullTableSweepsOverDispatchBeforeRefusing(t *testing.T) {
	c, clk := manual(t, func(c *Config[target]) {
		c.MaxEntries, c.ReserveTimeout, c.DispatchTimeout, c.QuarantineTTL = 1, 10*time.Second, time.Second, time.Second
	})
	d, err := reserve(t, c, "a").BeginDispatch(w1, 1)
	must(t, err)
	must(t, clk.Set(2*time.Second)) // the dispatch timed out at 1 s; its quarantine ended at 2 s
	a, err := c.TryAcquire("b")
	if err != nil || a.Reservation == nil {
		t.Fatalf("TryAcquire on a table whose only entry is over: %v, want a reservation", err)
	}
	a.Done()
	_, err = d.Complete(Accepted) // the late result of the ended quarantine
	wantIs(t, err, ErrFenced)
}

// Stats says how each dispatch ended: refused in time (RolledBack),
// committed stale at birth (StaleAtBirth), and how each quarantine was
// settled (Resolutions, of them ResolvedAccepted).
func TestContract_StatsSayHowDispatchesEnded(t *testing.T) {
	c, clk := manual(t, func(c *Config[target]) { c.MaxEntries = 8 })
	r := reserve(t, c, "refused")
	d, err := r.BeginDispatch(w1, 1)
	must(t, err)
	_, err = d.Complete(DefinitelyNotAccepted)
	wantIs(t, err, ErrNotAccepted)
	must(t, r.Cancel())
	d, err = reserve(t, c, "stale").BeginDispatch(w2, 1)
	must(t, err)
	c.BumpGeneration(w2)
	_, err = d.Complete(Accepted)
	wantIs(t, err, ErrStaleAtBirth)
	for i, res := range []Resolution{ResolveAccepted, ResolveNotAccepted} {
		key := fmt.Sprint("q", i)
		d, err := reserve(t, c, key).BeginDispatch(w1, 1)
		must(t, err)
		d.Drop()
		must(t, c.Resolve(key, d.Attempt(), 1, res))
	}
	late, err := reserve(t, c, "late").BeginDispatch(w1, 1)
	must(t, err)
	must(t, clk.AdvanceBy(5*time.Second)) // timed out: quarantined
	l, err := late.Complete(Accepted)     // settled Accepted by its late result
	must(t, err)
	must(t, l.Release())
	s := c.Stats()
	if s.RolledBack != 1 || s.StaleAtBirth != 1 || s.Resolutions != 3 || s.ResolvedAccepted != 2 || s.Binds != 2 {
		t.Fatalf("stats %+v, want 1 rolled back, 1 stale at birth, 3 resolutions of which 2 accepted, 2 binds", s)
	}
	wantIdentity(t, s, "after every kind of end")
}

// A full table judges its refusal at the clock it refuses at: when the
// clock moves on while the capacity path sweeps (here: past a quarantine's
// QuarantineTTL, after the sweep read the clock), what is over by then is
// reclaimed before anyone is refused (found by Porcupine, seed 300081: a
// TryAcquire refused for capacity though a quarantine holding a slot had
// ended during its call).
func TestContract_FullTableSweepsAgainAfterTheClockMoves(t *testing.T) {
	c, clk := manual(t, func(c *Config[target]) {
		c.MaxEntries, c.QuarantineTTL, c.ReserveTimeout = 2, 3*time.Second, 10*time.Second
	})
	d, err := reserve(t, c, "a").BeginDispatch(w1, 1)
	must(t, err)
	_, err = d.Complete(Ambiguous) // a's quarantine ends at 3 s
	wantIs(t, err, ErrAmbiguous)
	b := reserve(t, c, "b")
	c.BumpGeneration(w2) // a generation moved: a sweep may help
	moved := false
	c.testAfterUnlink = func(key string) {
		if key == "c" && !moved { // the capacity path's first sweep is about to run
			moved = true
			must(t, clk.Set(4*time.Second))
		}
	}
	a, err := c.TryAcquire("c")
	c.testAfterUnlink = nil
	if !moved || err != nil || a.Reservation == nil {
		t.Fatalf("TryAcquire on a table whose quarantine ended during the call: %v (clock moved: %v), want a reservation", err, moved)
	}
	a.Done()
	must(t, b.Cancel())
}
