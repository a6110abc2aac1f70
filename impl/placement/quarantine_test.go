package placement

import (
	"errors"
	"fmt"
	"testing"
	"time"
)

// silentFor fails the test if the waiter answers within d.
func silentFor(t *testing.T, ch <-chan waited, d time.Duration, what string) {
	t.Helper()
	select {
	case w := <-ch:
		t.Fatalf("%s: answered early (reservation %v, err %v)", what, w.a.Reservation != nil, w.err)
	case <-time.After(d):
	}
}

func quarantine(t *testing.T, c *Coordinator[target], key string) *Dispatch[target] {
	t.Helper()
	d, err := reserve(t, c, key).BeginDispatch(w1, c.Generation(w1))
	must(t, err)
	_, err = d.Complete(Ambiguous)
	wantIs(t, err, ErrAmbiguous)
	return d
}

// TestContract_QuarantineExpiresAfterTTL: a quarantine holds for exactly
// QuarantineTTL (one nanosecond before, still Ambiguous; at it, absent with
// its own event), and then frees its slot and fences the late result.
func TestContract_QuarantineExpiresAfterTTL(t *testing.T) {
	rec := &recorder{}
	c, clk := manual(t, func(c *Config[target]) {
		c.QuarantineTTL, c.MaxEntries, c.Observer = 30*time.Second, 1, rec.observe
	})
	must(t, clk.Advance(time.Second))
	d := quarantine(t, c, "q")
	must(t, clk.Set(31*time.Second-1))
	var amb *AmbiguousError[target]
	if _, err := c.TryAcquire("q"); !errors.As(err, &amb) || amb.Attempt != d.Attempt() {
		t.Fatalf("1ns before QuarantineTTL: %v, want the AmbiguousError", err)
	}
	if got := c.Quarantined(); len(got) != 1 || got[0].Key != "q" || got[0].Since != time.Second ||
		got[0].Age != 30*time.Second-1 || got[0].Expires != 31*time.Second || got[0].Target != w1 {
		t.Fatalf("Quarantined() = %+v", got)
	}
	must(t, clk.Set(31*time.Second))
	if st := state(t, c, "q").State; st != StateAbsent {
		t.Fatalf("at QuarantineTTL the key reads %v, want Absent", st)
	}
	if k := rec.kinds(); k[len(k)-1] != EventQuarantineExpired {
		t.Fatalf("events %v, want QuarantineExpired last", k)
	}
	if s := c.Stats(); s.QuarantineExpirations != 1 || s.Live != 0 {
		t.Fatalf("stats %+v", s)
	}
	if _, err := d.Complete(Accepted); !errors.Is(err, ErrUsed) {
		t.Fatalf("the guard was used by Ambiguous: %v", err)
	}
	if err := c.Resolve("q", d.Attempt(), d.Generation(), ResolveAccepted); !errors.Is(err, ErrNotQuarantined) {
		t.Fatalf("Resolve after QuarantineTTL: %v, want ErrNotQuarantined", err)
	}
	reserve(t, c, "other") // the slot is free
}

// TestContract_TimedOutDispatchQuarantineCountsFromItsDeadline: a dispatch
// timeout applied late (the clock jumped, nothing swept) still ends
// QuarantineTTL after the dispatch's deadline; a late result before then
// settles it.
func TestContract_TimedOutDispatchQuarantineCountsFromItsDeadline(t *testing.T) {
	c, clk := manual(t, func(c *Config[target]) { c.DispatchTimeout, c.QuarantineTTL = 2*time.Second, 10*time.Second })
	d, err := reserve(t, c, "q").BeginDispatch(w1, 1)
	must(t, err)
	must(t, clk.Set(11*time.Second)) // dispatch due at 2 s; quarantine until 12 s
	if st := state(t, c, "q").State; st != StateQuarantined {
		t.Fatalf("at 11 s the key reads %v, want Quarantined", st)
	}
	must(t, clk.Set(12*time.Second))
	if st := state(t, c, "q").State; st != StateAbsent {
		t.Fatalf("at 12 s the key reads %v, want Absent", st)
	}
	if _, err := d.Complete(Accepted); !errors.Is(err, ErrFenced) {
		t.Fatalf("a late result after QuarantineTTL: %v, want fenced", err)
	}
}

// TestContract_QuarantineDroppedWhenGenerationMovesOn: the binding a
// quarantined attempt could produce would be stale at birth, so a bump of
// its target ends the quarantine: the next request reserves.
func TestContract_QuarantineDroppedWhenGenerationMovesOn(t *testing.T) {
	rec := &recorder{}
	c, _ := manual(t, func(c *Config[target]) { c.Observer = rec.observe })
	d := quarantine(t, c, "q")
	quarantine(t, c, "other") // on w1 too
	c.BumpGeneration(w2)      // another target: nothing changes
	if _, err := c.TryAcquire("q"); !errors.Is(err, ErrAmbiguous) {
		t.Fatalf("after bumping another target: %v, want ErrAmbiguous", err)
	}
	c.BumpGeneration(w1)
	if len(c.Quarantined()) != 0 {
		t.Fatalf("quarantines of a bumped target are listed: %+v", c.Quarantined())
	}
	reserve(t, c, "q")
	if _, err := d.Complete(Accepted); !errors.Is(err, ErrUsed) {
		t.Fatalf("guard: %v", err)
	}
	if k := rec.kinds(); k[len(k)-1] != EventReserved || k[len(k)-2] != EventQuarantineDropped {
		t.Fatalf("events %v, want ... QuarantineDropped, Reserved", k)
	}
	if s := c.Stats(); s.QuarantinesDropped != 2 || s.Quarantines != s.Resolutions+s.QuarantineExpirations+s.QuarantinesDropped+s.Quarantined {
		t.Fatalf("stats %+v: every quarantine must end one way", s)
	}
}

// TestContract_TwoTimeouts: the reservation ends at ReserveTimeout (across
// a rollback), each dispatch at DispatchTimeout of its own start.
func TestContract_TwoTimeouts(t *testing.T) {
	c, clk := manual(t, func(c *Config[target]) { c.ReserveTimeout, c.DispatchTimeout = 3*time.Second, 10*time.Second })
	r := reserve(t, c, "k")
	must(t, clk.Set(2*time.Second))
	d, err := r.BeginDispatch(w1, 1)
	must(t, err)
	must(t, clk.Set(12*time.Second-1)) // the dispatch is due at 12 s
	if st := state(t, c, "k").State; st != StateDispatching {
		t.Fatalf("1ns before DispatchTimeout: %v", st)
	}
	_, err = d.Complete(DefinitelyNotAccepted)
	wantIs(t, err, ErrNotAccepted) // rolled back, but the reservation's own deadline (3 s) has passed
	if _, err := r.BeginDispatch(w1, 1); !errors.Is(err, ErrReservationLost) {
		t.Fatalf("past ReserveTimeout: %v, want ErrReservationLost", err)
	}

	r = reserve(t, c, "k2") // at 12 s - 1ns: due at 15 s - 1ns
	must(t, clk.Set(15*time.Second-2))
	if _, err := r.BeginDispatch(w1, 1); err != nil {
		t.Fatalf("1ns before ReserveTimeout: %v", err)
	}
	must(t, clk.Set(25*time.Second-2)) // the dispatch is due at 25 s - 2ns
	if st := state(t, c, "k2").State; st != StateQuarantined {
		t.Fatalf("at DispatchTimeout: %v, want Quarantined", st)
	}
}

// TestContract_WaitersServedInOrder: a freed key is handed to the longest
// waiter at once: not to a later waiter, and not to a newcomer.
func TestContract_WaitersServedInOrder(t *testing.T) {
	c, clk := manual(t)
	r := reserve(t, c, "s")
	first := waiter(c, "s")
	second := waiter(c, "s")
	must(t, r.Cancel())
	w := recvWithin(t, first, 5*time.Second, "the first waiter")
	if w.err != nil || w.a.Reservation == nil {
		t.Fatalf("the first waiter got %v, want the reservation", w.err)
	}
	if _, err := c.TryAcquire("s"); !errors.Is(err, ErrWouldWait) {
		t.Fatalf("a newcomer after the hand-off: %v, want ErrWouldWait", err)
	}
	silentFor(t, second, 20*time.Millisecond, "the second waiter")
	// The handed reservation times out: the second waiter is next.
	must(t, clk.Advance(5*time.Second))
	w2 := recvWithin(t, second, 5*time.Second, "the second waiter")
	if w2.err != nil || w2.a.Reservation == nil {
		t.Fatalf("the second waiter got %v, want the reservation", w2.err)
	}
	if _, err := w.a.Reservation.BeginDispatch(w1, 1); !errors.Is(err, ErrReservationLost) {
		t.Fatalf("the timed-out reservation: %v", err)
	}
	must(t, w2.a.Reservation.Cancel())
	reserve(t, c, "s") // nobody waits: a newcomer reserves
}

// TestContract_HandedReservationAnswersEvenIfLost: a waiter handed the key
// answers with that reservation even if it timed out before the waiter
// ran (it never acquires twice in one call).
func TestContract_HandedReservationAnswersEvenIfLost(t *testing.T) {
	c, clk := manual(t)
	r := reserve(t, c, "s")
	got := waiter(c, "s")
	c.testHoldWaiters.Store(true) // the waiter's goroutine does not run yet
	must(t, r.Cancel())
	must(t, clk.Advance(5*time.Second)) // the handed reservation times out
	reserve(t, c, "s")                  // a newcomer takes the free key
	c.testHoldWaiters.Store(false)
	w := recvWithin(t, got, 5*time.Second, "the waiter")
	if w.err != nil || w.a.Reservation == nil {
		t.Fatalf("waiter: %v", w.err)
	}
	if err := w.a.Reservation.Cancel(); !errors.Is(err, ErrReservationLost) {
		t.Fatalf("the handed, timed-out reservation: %v, want ErrReservationLost", err)
	}
}

// TestContract_LateCommitRacingABumpIsFenced: found by Porcupine. A late
// Accepted (or a Resolve) judged the quarantine live at one reading of the
// target's generation and committed at a later one, so a Bump between the
// two made it "committed, stale at birth", which the spec never allows for
// a quarantine (a bump ends it). The commit now happens at the reading that
// judges it: a Bump before it ends the quarantine and fences the result.
func TestContract_LateCommitRacingABumpIsFenced(t *testing.T) {
	rec := &recorder{}
	c, clk := manual(t, func(c *Config[target]) { c.Observer = rec.observe })
	d, err := reserve(t, c, "s").BeginDispatch(w1, 1)
	must(t, err)
	must(t, clk.AdvanceBy(5*time.Second)) // DispatchTimeout: quarantined
	c.testBeforeBind = func() { c.BumpGeneration(w1) }
	if _, err := d.Complete(Accepted); !errors.Is(err, ErrFenced) {
		t.Fatalf("a late Accepted racing a bump: %v, want ErrFenced", err)
	}
	c.testBeforeBind = nil
	if k := rec.kinds(); k[len(k)-1] != EventQuarantineDropped {
		t.Fatalf("events %v, want QuarantineDropped last", k)
	}
	if st := state(t, c, "s").State; st != StateAbsent {
		t.Fatalf("the key reads %v, want Absent", st)
	}

	q := quarantine(t, c, "r")
	c.testBeforeBind = func() { c.BumpGeneration(w1) }
	if err := c.Resolve("r", q.Attempt(), q.Generation(), ResolveAccepted); !errors.Is(err, ErrNotQuarantined) {
		t.Fatalf("a Resolve racing a bump: %v, want ErrNotQuarantined", err)
	}
	c.testBeforeBind = nil
	if st := state(t, c, "r").State; st != StateAbsent {
		t.Fatalf("the key reads %v, want Absent", st)
	}
}

// Quarantined never lists a negative Age: a quarantine that begins while
// the listing walks the table (here: between two of its entries, on a
// clock moved on meanwhile) began at a reading no later than the one the
// listing takes for it.
func TestContract_QuarantinedAgesNeverNegative(t *testing.T) {
	c, clk := manual(t, func(c *Config[target]) { c.MaxEntries = 64 })
	var inFlight []*Dispatch[target]
	for i := 0; i < 32; i++ {
		d, err := reserve(t, c, fmt.Sprint("k", i)).BeginDispatch(w1, 1)
		must(t, err)
		inFlight = append(inFlight, d)
	}
	walked := 0
	c.testWalkEntry = func() {
		// Each entry the walk reaches: the clock moves on, and the
		// dispatches still in flight become ambiguous now.
		walked++
		must(t, clk.SetBy(time.Second))
		for _, d := range inFlight {
			_, err := d.Complete(Ambiguous)
			wantIs(t, err, ErrAmbiguous)
		}
		inFlight = nil
	}
	qs := c.Quarantined()
	c.testWalkEntry = nil
	if walked == 0 || len(qs) != 32 {
		t.Fatalf("walked %d entries, listed %d quarantines, want 32", walked, len(qs))
	}
	for _, q := range qs {
		if q.Age < 0 || q.Expires != q.Since+DefaultQuarantineTTL {
			t.Fatalf("%s: since %v, age %v, expires %v", q.Key, q.Since, q.Age, q.Expires)
		}
	}
}

// TestContract_QuarantineCarriesDispatchTime: a quarantine says when its
// attempt was dispatched (DispatchedAt, on the coordinator's clock), in the
// listing and in the *AmbiguousError of the Complete that opened it and of
// a later Acquire, whether it became ambiguous early or by its deadline: a
// resolver bounds the attempt's age by it (issue 25, item 9).
func TestContract_QuarantineCarriesDispatchTime(t *testing.T) {
	c, clk := manual(t, func(c *Config[target]) { c.DispatchTimeout, c.QuarantineTTL = 10*time.Second, time.Minute })
	must(t, clk.Advance(time.Second))
	early := quarantine(t, c, "early") // ambiguous at 1s, dispatched at 1s
	must(t, clk.AdvanceBy(2*time.Second))
	d, err := reserve(t, c, "late").BeginDispatch(w1, c.Generation(w1)) // dispatched at 3s
	must(t, err)
	must(t, clk.AdvanceBy(20*time.Second)) // its deadline (13s) passes: quarantined from 13s
	var amb *AmbiguousError[target]
	if _, err := c.TryAcquire("late"); !errors.As(err, &amb) || amb.Attempt != d.Attempt() || amb.DispatchedAt != 3*time.Second {
		t.Fatalf("Acquire of the timed-out dispatch's session: %+v, want DispatchedAt 3s", err)
	}
	if _, err := c.TryAcquire("early"); !errors.As(err, &amb) || amb.Attempt != early.Attempt() || amb.DispatchedAt != time.Second {
		t.Fatalf("Acquire of the early ambiguous session: %+v, want DispatchedAt 1s", err)
	}
	got := c.Quarantined()
	if len(got) != 2 || got[0].Key != "early" || got[0].DispatchedAt != time.Second || got[0].Since != time.Second ||
		got[1].Key != "late" || got[1].DispatchedAt != 3*time.Second || got[1].Since != 13*time.Second {
		t.Fatalf("Quarantined() = %+v", got)
	}
	d2, err := reserve(t, c, "third").BeginDispatch(w1, c.Generation(w1)) // dispatched at 23s
	must(t, err)
	must(t, clk.AdvanceBy(time.Second))
	if _, err := d2.Complete(Ambiguous); !errors.As(err, &amb) || amb.DispatchedAt != 23*time.Second {
		t.Fatalf("Complete(Ambiguous): %+v, want DispatchedAt 23s", err)
	}
}
