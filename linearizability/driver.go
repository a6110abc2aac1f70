package linearizability

import (
	"context"
	"fmt"
	"strings"
	"time"

	"pgregory.net/rapid"

	"github.com/placementlab/placement/impl/placement"
	"github.com/placementlab/placement/model"
)

// Record is one step a Driver took.
type Record struct {
	In   Input  `json:"in"`
	Want Output `json:"want"`
	Got  Output `json:"got"`
}

// Coverage counts the operations performed, the outputs seen and the uses
// of stale handles.
type Coverage struct {
	Ops   [NumOps]int
	Outs  [NumOuts]int
	Stale StaleCoverage
}

// Add merges o into c.
func (c *Coverage) Add(o Coverage) {
	for i := range c.Ops {
		c.Ops[i] += o.Ops[i]
	}
	for i := range c.Outs {
		c.Outs[i] += o.Outs[i]
	}
	c.Stale.add(o.Stale)
}

// Count notes that in returned out.
func (c *Coverage) Count(in Input, out Output) {
	c.Ops[in.Op]++
	c.Outs[out.Kind]++
	c.Stale.count(in, out)
}

// Missing lists the operations and outputs never seen, ignoring those
// listed in except.
func (c *Coverage) Missing(except ...string) []string {
	skip := map[string]bool{}
	for _, e := range except {
		skip[e] = true
	}
	var out []string
	for i, n := range c.Ops {
		if n == 0 && !skip[OpKind(i).String()] {
			out = append(out, OpKind(i).String())
		}
	}
	for i, n := range c.Outs {
		if n == 0 && !skip[OutKind(i).String()] {
			out = append(out, OutKind(i).String())
		}
	}
	return out
}

// Driver runs a System and the model side by side, sequentially: every
// operation's output and every key's observable state must match.
type Driver struct {
	Sys      *System
	St       *Stepper
	State    model.State
	Trace    []Record
	Coverage Coverage
	lastAmb  map[int][2]uint64 // key -> attempt, generation last seen in flight or quarantined
}

// NewDriver builds a system of shape sh and its model.
func NewDriver(sh Shape, mutate ...func(*placement.Config[int])) (*Driver, error) {
	sys, err := NewSystem(sh, mutate...)
	if err != nil {
		return nil, err
	}
	st, err := NewStepper(sh)
	if err != nil {
		sys.Close()
		return nil, err
	}
	return &Driver{Sys: sys, St: st, State: st.Init(), lastAmb: map[int][2]uint64{}}, nil
}

// Close closes the system.
func (d *Driver) Close() { d.Sys.Close() }

// StepLimit bounds one sequential operation. None blocks (the driver never
// waits on a key another request initializes), so one that has not
// returned after it is stuck on a lock, and the check fails instead of
// hanging.
const StepLimit = 5 * time.Second

// doWithin performs in on sys, giving up after limit (the operation's
// goroutine is left behind: the check has failed).
func doWithin(sys *System, in Input, limit time.Duration) (Output, bool) {
	done := make(chan Output, 1)
	go func() { done <- sys.Do(context.Background(), in) }()
	select {
	case out := <-done:
		return out, true
	case <-time.After(limit):
		return Output{}, false
	}
}

// Step performs in on both sides and reports the first divergence: the
// result a caller sees, compared before anything else touches the
// coordinator (the model's invariants are checked too). Step does not look
// at the keys: every reading (Query, Stats) applies the deadlines that
// have passed, so a driver that read every key after every step would hide
// what a caller meets when nothing has read them (see Observe).
func (d *Driver) Step(in Input) error {
	want, next, ok := d.St.Want(d.State, in)
	if !ok {
		return fmt.Errorf("the model has no step for %s in this state:\n%s", in, d.St.M.FormatState(&d.State))
	}
	got, ok := doWithin(d.Sys, in, StepLimit)
	if !ok {
		return fmt.Errorf("%s did not return within %v: it blocked\n%s", in, StepLimit, d.TraceString())
	}
	d.Trace = append(d.Trace, Record{In: in, Want: want, Got: got})
	d.Coverage.Count(in, got)
	if got != want {
		return fmt.Errorf("%s returned %s, the model says %s\n%s", in, got, want, d.TraceString())
	}
	d.State = next
	NoteAmbiguity(d.lastAmb, in, got)
	for name, inv := range model.Invariants {
		if name != "TypeOK" && !inv.Holds(d.St.M, &d.State) {
			return fmt.Errorf("model invariant %s fails after %s", name, in)
		}
	}
	return nil
}

// Observe reads every key (Query) and compares what it reads, and its idle
// deadline, with the model. A Query applies the key's passed deadlines,
// which the model's state already reflects (or, for an expired binding,
// reads as absent either way).
func (d *Driver) Observe() error {
	for k := range d.State.Table {
		o, err := d.Sys.Observe(k)
		if err != nil {
			return err
		}
		if w := d.St.Observe(&d.State, k); o != w {
			return fmt.Errorf("key k%d reads %+v, the model says %+v\n%s", k, o, w, d.TraceString())
		}
		if err := d.checkIdleDeadline(k); err != nil {
			return fmt.Errorf("%v\n%s", err, d.TraceString())
		}
	}
	return nil
}

// checkIdleDeadline compares key k's Info.IdleDeadline with the model's
// idle deadline: set for a live binding with no leases, zero otherwise.
func (d *Driver) checkIdleDeadline(k int) error {
	i, err := d.Sys.C.Query(d.Sys.KeyName(k))
	if err != nil {
		return err
	}
	var want time.Duration
	if e := &d.State.Table[k]; d.St.M.LiveBound(&d.State, e) && e.Leases == 0 {
		want = time.Duration(e.Deadline) * Unit
	}
	if i.IdleDeadline != want {
		return fmt.Errorf("key k%d has IdleDeadline %v, the model says %v", k, i.IdleDeadline, want)
	}
	return nil
}

// NoteAmbiguity records the attempt and generation an output names, for
// later Resolve arguments.
func NoteAmbiguity(lastAmb map[int][2]uint64, in Input, got Output) {
	if got.Kind == OutAmbiguous || got.Kind == OutDispatched {
		lastAmb[in.Key] = [2]uint64{got.Attempt, got.Gen}
	}
}

// TraceString renders the steps so far.
func (d *Driver) TraceString() string {
	var b strings.Builder
	for i, r := range d.Trace {
		mark := ""
		if r.Got != r.Want {
			mark = "   <-- model: " + r.Want.String()
		}
		fmt.Fprintf(&b, "%4d  %-40s -> %s%s\n", i, r.In, r.Got, mark)
	}
	return b.String()
}

// Choose picks a valid next operation for a random client; pick(n)
// returns a choice in [0, n).
func (d *Driver) Choose(pick func(n int) int) Input {
	return Choose(d.Sys, pick(d.Sys.Shape.Clients), d.lastAmb, pick, Mix{Env: true, Stats: true})
}

// Mix says which operations Choose may pick. Env allows the operations
// that touch every key (Bump, Advance, Reap), so a history without them can
// be partitioned by key. Hot weights the mix toward the expiry races of one
// busy session: hits and releases, Query, and a clock that moves by whole
// TTLs without sweeping. Stats allows Stats, whose walk of the table is not
// one atomic step: sequential checks only.
type Mix struct {
	Env, Hot, Stats bool
}

// Choose picks a valid next operation for client r of sys, given what r
// holds. lastAmb holds the attempt and generation r last saw in flight or
// quarantined per key (for Resolve arguments, sometimes perturbed to test
// the fence). mix says which operations may be chosen.
func Choose(sys *System, r int, lastAmb map[int][2]uint64, pick func(n int) int, mix Mix) Input {
	sh := sys.Shape
	in := Input{Client: r, Key: sys.HeldKey(r)}
	if mix.Hot {
		if hot, ok := chooseHot(sys, in, pick); ok {
			return hot
		}
	}
	// Now and then, whatever it holds, the client uses a handle it kept
	// after it stopped holding it (see chooseStale).
	if st, ok := chooseStale(sys, in, pick); ok {
		return st
	}
	switch sys.Holds(r) {
	case HoldsReservation:
		in.Target = pick(sh.Targets)
		in.Gen = sys.C.Generation(in.Target)
		switch pick(6) {
		case 0:
			in.Op = OpCancel
		case 1:
			in.Op = OpCommitAccepted
		case 2:
			in.Op, in.Gen = OpBeginDispatch, in.Gen-1 // a stale generation
		default:
			in.Op = OpBeginDispatch
		}
	case HoldsDispatch:
		switch c := pick(16); {
		case c < 4 && mix.Env:
			// The dispatcher stalls past its timeout (its key is
			// quarantined) ...
			in.Op, in.By, in.Lazy = OpAdvance, sh.normalized().DispatchTimeout, pick(2) == 0
		case c == 4 || c < 12 && sys.Stalled(r):
			// ... and its attempt is resolved meanwhile, so its late
			// result is fenced.
			a := lastAmb[in.Key]
			in.Op, in.Attempt, in.Gen, in.Outcome = OpResolve, a[0], a[1], pick(2)
		case c < 7:
			in.Op = OpDrop
		default:
			in.Op, in.Outcome = OpComplete, pick(3)
		}
	case HoldsLease:
		in.Op = []OpKind{OpRelease, OpRelease, OpAbandon, OpInvalidate, OpClose}[pick(5)]
	default:
		n := 18
		if mix.Stats {
			n = 20
		}
		c := pick(n)
		if !mix.Env && (c == 2 || c == 3 || c == 4 || c == 16) {
			c = 5
		}
		switch c {
		case 0:
			in.Op, in.Key = OpResolve, pick(sh.Keys)
			a := lastAmb[in.Key]
			in.Attempt, in.Gen, in.Outcome = a[0], a[1], pick(2)
			switch pick(4) {
			case 0:
				in.Attempt++ // a stale or wrong attempt
			case 1:
				in.Gen++ // a wrong generation
			}
		case 1:
			in.Op, in.Key = OpInvalidateKey, pick(sh.Keys)
		case 2:
			in.Op, in.Target = OpBump, pick(sh.Targets)
		case 3, 4:
			in.Op, in.By, in.Lazy = OpAdvance, int64(pick(4)), pick(2) == 0
		case 14, 15:
			in.Op, in.Key = OpQuery, pick(sh.Keys)
		case 16:
			in.Op = OpReap
		case 17:
			in.Op, in.Key = OpInvalidateKey, pick(sh.Keys)
		case 18, 19:
			in.Op = OpStats
		default:
			in.Op, in.Key = OpTryAcquire, pick(sh.Keys)
		}
	}
	return in
}

// chooseHot picks most of a hot mix's operations (see Mix); ok is false
// when the ordinary mix should pick.
func chooseHot(sys *System, in Input, pick func(n int) int) (Input, bool) {
	switch sys.Holds(in.Client) {
	case HoldsReservation:
		in.Op, in.Target = OpCommitAccepted, pick(sys.Shape.Targets)
		in.Gen = sys.C.Generation(in.Target)
		return in, pick(4) != 0
	case HoldsLease:
		in.Op = OpRelease
		return in, pick(8) != 0
	case HoldsNothing:
		switch c := pick(20); {
		case c < 5:
			in.Op, in.Key = OpTryAcquire, pick(sys.Shape.Keys)
		case c < 13:
			in.Op, in.Key = OpQuery, pick(sys.Shape.Keys)
		case c < 17:
			in.Op, in.By, in.Lazy = OpAdvance, sys.Shape.TTL, true
		case c < 18:
			in.Op = OpReap
		case c < 19:
			in.Op, in.Key = OpInvalidateKey, pick(sys.Shape.Keys)
		default:
			return in, false
		}
		return in, true
	}
	return in, false
}

// DrawShape draws a small system shape.
func DrawShape(t *rapid.T) Shape {
	return Shape{
		Clients:         rapid.IntRange(1, 4).Draw(t, "clients"),
		Keys:            rapid.IntRange(1, 3).Draw(t, "keys"),
		Targets:         rapid.IntRange(1, 3).Draw(t, "targets"),
		Capacity:        rapid.IntRange(1, 3).Draw(t, "capacity"),
		TTL:             rapid.Int64Range(1, 3).Draw(t, "ttl"),
		ReserveTimeout:  rapid.Int64Range(1, 3).Draw(t, "reserve"),
		DispatchTimeout: rapid.Int64Range(1, 3).Draw(t, "dispatch"),
		QuarantineTTL:   rapid.Int64Range(1, 4).Draw(t, "quarantine"),
	}
}

// SideBySide is the differential property: the coordinator and the model,
// driven sequentially through the same random operations, agree on every
// result and every key's observable state. It returns what it exercised.
// The rapid state-machine test and the fuzz target (rapid.MakeFuzz) share it.
func SideBySide(t *rapid.T) Coverage {
	d, err := NewDriver(DrawShape(t))
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	t.Repeat(map[string]func(*rapid.T){
		"step": func(t *rapid.T) {
			in := d.Choose(func(n int) int { return rapid.IntRange(0, n-1).Draw(t, "choice") })
			if err := d.Step(in); err != nil {
				t.Fatal(err)
			}
			// Now and then read every key. Not after every step: a read
			// applies the passed deadlines, and the next operation must
			// also meet them unapplied, as callers do.
			if rapid.IntRange(0, 3).Draw(t, "observe") == 0 {
				if err := d.Observe(); err != nil {
					t.Fatalf("after %s %v", in, err)
				}
			}
		},
	})
	return d.Coverage
}
