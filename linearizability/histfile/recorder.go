package histfile

import (
	"sync"
	"sync/atomic"
	"time"

	"github.com/anishathalye/porcupine"
)

// Recorder records one client's calls as Porcupine operations: each call's
// input (stamped with the client's number), its output, and its call and
// return times in nanoseconds since the run's start. One goroutine at a
// time uses a Recorder; the call it has in flight may be read from any
// (Clients.Wait names it when a run does not finish).
type Recorder[I, O any] struct {
	id    int
	start time.Time
	stamp func(in *I, client int)
	ops   []porcupine.Operation
	in    atomic.Pointer[I]
}

// ID returns the client's number, the ClientId of the operations Do
// records.
func (r *Recorder[I, O]) ID() int { return r.id }

// Do records the call f makes for input in: it stamps in with the client's
// number, marks it in flight while f runs, and records the operation with
// f's output and the times just before and just after f. It returns f's
// output.
func (r *Recorder[I, O]) Do(in I, f func() O) O {
	if r.stamp != nil {
		r.stamp(&in, r.id)
	}
	r.in.Store(&in)
	call := time.Since(r.start).Nanoseconds()
	out := f()
	ret := time.Since(r.start).Nanoseconds()
	r.in.Store(nil)
	r.ops = append(r.ops, porcupine.Operation{ClientId: r.id, Input: in, Output: out, Call: call, Return: ret})
	return out
}

// Last returns the operation the client recorded last (nil when none), for
// the caller to amend with what it learned after the call returned. The
// pointer is good until the next Do or Add.
func (r *Recorder[I, O]) Last() *porcupine.Operation {
	if len(r.ops) == 0 {
		return nil
	}
	return &r.ops[len(r.ops)-1]
}

// Add records op as it is: an operation the caller derives from a
// recorded call (over the same interval, say, under a ClientId of its
// own).
func (r *Recorder[I, O]) Add(op porcupine.Operation) { r.ops = append(r.ops, op) }

// Clients is a run's recording clients, numbered from 0, whose times count
// from one start.
type Clients[I, O any] struct {
	start time.Time
	recs  []*Recorder[I, O]
	wg    sync.WaitGroup
	done  chan struct{}
}

// NewClients returns n clients whose times count from now. stamp (nil:
// none) writes a client's number into each input it records.
func NewClients[I, O any](n int, stamp func(in *I, client int)) *Clients[I, O] {
	c := &Clients[I, O]{start: time.Now(), recs: make([]*Recorder[I, O], n), done: make(chan struct{})}
	for i := range c.recs {
		c.recs[i] = &Recorder[I, O]{id: i, start: c.start, stamp: stamp}
	}
	return c
}

// Start returns the instant the clients' times count from.
func (c *Clients[I, O]) Start() time.Time { return c.start }

// Client returns client i's recorder. Calls recorded on it before Go (a
// setup) come first in its history.
func (c *Clients[I, O]) Client(i int) *Recorder[I, O] { return c.recs[i] }

// Go runs body for every client, each on a goroutine of its own. Call it
// once, then Wait.
func (c *Clients[I, O]) Go(body func(r *Recorder[I, O])) {
	for _, r := range c.recs {
		c.wg.Add(1)
		go func() {
			defer c.wg.Done()
			body(r)
		}()
	}
	go func() { c.wg.Wait(); close(c.done) }()
}

// Wait waits up to limit for every body Go started to return, and reports
// whether they all did. If limit passes first, it calls abort (which must
// make the bodies end) and returns the calls in flight, each input as
// describe describes it, in client order, without waiting for the bodies
// (call Wait again to wait for them).
func (c *Clients[I, O]) Wait(limit time.Duration, abort func(), describe func(in I) string) (inFlight []string, finished bool) {
	timer := time.NewTimer(limit)
	defer timer.Stop()
	select {
	case <-c.done:
		return nil, true
	case <-timer.C:
	}
	abort()
	for _, r := range c.recs {
		if in := r.in.Load(); in != nil {
			inFlight = append(inFlight, describe(*in))
		}
	}
	return inFlight, false
}

// History returns every client's operations, client by client, each
// client's in the order it recorded them. Call it after Wait reported the
// bodies finished.
func (c *Clients[I, O]) History() []porcupine.Operation {
	var h []porcupine.Operation
	for _, r := range c.recs {
		h = append(h, r.ops...)
	}
	return h
}
