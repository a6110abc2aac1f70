package placement

import (
	"errors"
	"sync"
	"testing"
	"time"
)

// wakeLimit bounds every wait of these tests for a wake-up: a waiter that
// is still waiting this long after what should have woken it lost its
// wake-up, and the test fails then (naming it) instead of hanging until
// the test binary's timeout.
const wakeLimit = 5 * time.Second

// recvWithin receives from ch, or fails the test as a lost wake-up if
// nothing arrives within d; what names the value awaited.
func recvWithin[T any](t *testing.T, ch <-chan T, d time.Duration, what string) T {
	t.Helper()
	timer := time.NewTimer(d)
	defer timer.Stop()
	select {
	case v := <-ch:
		return v
	case <-timer.C:
		t.Fatalf("lost wake-up: %s did not arrive within %v", what, d)
	}
	var zero T
	return zero
}

// Every end of an initialization wakes the requests waiting on its key,
// and each gets the key's new state: a reservation after a Cancel, a
// reservation timeout, or a rollback followed by a Cancel; a hit after an
// Accepted completion or CommitAccepted; an *AmbiguousError[target] after an
// Ambiguous completion, a Drop or a dispatch timeout. The waiters wait all
// at once, and the test gives them wakeLimit together, so a lost wake-up
// (the bug-zoo variant LosesWakeup loses those of a key that becomes
// absent) fails it within that time, naming every waiter left waiting.
func TestAcquire_EveryEndOfAnInitializationWakesItsWaiters(t *testing.T) {
	c, clk := manual(t, func(c *Config[target]) { c.MaxEntries = 16 })
	type scenario struct {
		key  string
		end  func()             // ends the initialization the waiter waits for (nil: the clock ends it)
		want func(waited) error // what the woken waiter must get
	}
	reservation := func(w waited) error {
		if w.err != nil || w.a.Reservation == nil {
			return errors.New("want a reservation")
		}
		return nil
	}
	hitOn := func(w waited) error {
		if w.err != nil || !w.a.Hit() || w.a.Lease.Target() != w1 {
			return errors.New("want a hit on w1")
		}
		return nil
	}
	ambiguous := func(w waited) error {
		if !errors.Is(w.err, ErrAmbiguous) {
			return errors.New("want an *AmbiguousError[target]")
		}
		return nil
	}
	dispatched := func(key string) *Dispatch[target] {
		d, err := reserve(t, c, key).BeginDispatch(w1, 1)
		must(t, err)
		return d
	}
	var scenarios []scenario
	add := func(key string, end func(), want func(waited) error) {
		scenarios = append(scenarios, scenario{key, end, want})
	}
	r := reserve(t, c, "cancelled")
	add("cancelled", func() { must(t, r.Cancel()) }, reservation)
	d := dispatched("accepted")
	add("accepted", func() { _, err := d.Complete(Accepted); must(t, err) }, hitOn)
	r2 := reserve(t, c, "committed")
	add("committed", func() { _, err := r2.CommitAccepted(w1, 1); must(t, err) }, hitOn)
	d2 := dispatched("ambiguous")
	add("ambiguous", func() { _, err := d2.Complete(Ambiguous); wantIs(t, err, ErrAmbiguous) }, ambiguous)
	d3 := dispatched("dropped")
	add("dropped", d3.Drop, ambiguous)
	d4 := dispatched("rolled back, then cancelled")
	add("rolled back, then cancelled", func() {
		_, err := d4.Complete(DefinitelyNotAccepted) // wakes the waiter, which waits again
		wantIs(t, err, ErrNotAccepted)
		must(t, d4.Reservation().Cancel())
	}, reservation)
	reserve(t, c, "reservation timed out")
	add("reservation timed out", nil, reservation)
	dispatched("dispatch timed out")
	add("dispatch timed out", nil, ambiguous)

	answers := make([]<-chan waited, len(scenarios))
	for i, s := range scenarios {
		answers[i] = waiter(c, s.key)
	}
	for _, s := range scenarios {
		if s.end != nil {
			s.end()
		}
	}
	must(t, clk.AdvanceBy(5*time.Second)) // the timeouts: the rest time out

	deadline := time.NewTimer(wakeLimit)
	defer deadline.Stop()
	expired := false
	for i, s := range scenarios {
		var w waited
		got := false
		if !expired {
			select {
			case w = <-answers[i]:
				got = true
			case <-deadline.C:
				expired = true
			}
		}
		if !got {
			select {
			case w = <-answers[i]:
				got = true
			default:
			}
		}
		switch {
		case !got:
			t.Errorf("lost wake-up: the waiter on %q was still waiting %v after its initialization ended", s.key, wakeLimit)
		case s.want(w) != nil:
			t.Errorf("%s: the waiter got %+v, %v: %v", s.key, w.a, w.err, s.want(w))
		}
	}
}

// A waiter handed the key between its check for a hand-off and its next
// look at the table answers with that reservation, even when the
// reservation then timed out and the key's entry left the table before the
// waiter looked (found by Porcupine under load: the waiter queued afresh on
// the key's next entry and returned a later hit, acquiring after the
// reservation it had been given, which no history allows).
func TestContract_HandOffBetweenCheckAndLookIsKept(t *testing.T) {
	c, clk := manual(t, func(c *Config[target]) { c.ReserveTimeout, c.IdleTTL = 2*time.Second, time.Second })
	a := reserve(t, c, "s")
	got := waiter(c, "s")
	var once sync.Once
	leaseCh := make(chan Lease[target], 1)
	c.testAfterHandOffCheck = func() {
		once.Do(func() {
			// The waiter was woken by the commit and found no hand-off;
			// before it looks at the table again: the binding expires, a
			// newcomer's access hands the key to it, the reservation times
			// out and the key's entry leaves the table for a new one.
			l := <-leaseCh
			must(t, l.Release())
			jump(clk, time.Second)
			if _, err := c.TryAcquire("s"); !errors.Is(err, ErrWouldWait) {
				t.Errorf("the newcomer: %v, want ErrWouldWait (the key handed to the waiter)", err)
			}
			jump(clk, 2*time.Second)
			a, err := c.TryAcquire("s")
			if err != nil || a.Reservation == nil {
				t.Errorf("after the handed reservation timed out: %v, want a reservation", err)
			}
		})
	}
	l, err := a.CommitAccepted(w1, 1) // wakes the waiter
	must(t, err)
	leaseCh <- l
	w := recvWithin(t, got, wakeLimit, "the waiter handed the key")
	if w.err != nil || w.a.Reservation == nil {
		t.Fatalf("the waiter: %v (hit %v), want the reservation it was handed", w.err, w.a.Hit())
	}
	if _, err := w.a.Reservation.BeginDispatch(w1, 1); !errors.Is(err, ErrReservationLost) {
		t.Fatalf("the handed reservation, which timed out: %v, want ErrReservationLost", err)
	}
}
