package claimslin

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"sync"
	"time"

	"github.com/anishathalye/porcupine"
	"github.com/placementlab/placement/impl/claims"
)

// Journal records, from one start, every call a set of recording stores
// (Journal.Wrap) made, as operations the model checks, and every event
// their streams delivered. A replica's coordinator calls its store from
// many goroutines at once: a Journal is safe for concurrent use.
type Journal struct {
	start time.Time

	mu     sync.Mutex
	ops    []porcupine.Operation
	events map[int][]Received
	open   map[int]Input // calls in flight, by a sequence number
	seq    int
}

// NewJournal returns an empty journal whose times count from now.
func NewJournal() *Journal {
	return &Journal{start: time.Now(), events: map[int][]Received{}, open: map[int]Input{}}
}

// Now returns the journal's time: nanoseconds since its start.
func (j *Journal) Now() int64 { return time.Since(j.start).Nanoseconds() }

// Start returns the instant the journal's times count from.
func (j *Journal) Start() time.Time { return j.start }

// do records the call f makes for in (by replica client); f may amend
// the input with what it learns while it runs (CreateOrGet's proposal).
func (j *Journal) do(client int, in Input, f func(in *Input) Output) Output {
	in.Client = client
	j.mu.Lock()
	j.seq++
	id := j.seq
	j.open[id] = in
	j.mu.Unlock()
	call := j.Now()
	out := f(&in)
	ret := j.Now()
	j.mu.Lock()
	delete(j.open, id)
	j.ops = append(j.ops, porcupine.Operation{ClientId: client, Input: in, Output: out, Call: call, Return: ret})
	j.mu.Unlock()
	return out
}

// Add records op as it is (a call recorded elsewhere on the same clock).
func (j *Journal) Add(op porcupine.Operation) {
	j.mu.Lock()
	j.ops = append(j.ops, op)
	j.mu.Unlock()
}

// InFlight describes the calls in flight.
func (j *Journal) InFlight() []string {
	j.mu.Lock()
	defer j.mu.Unlock()
	var out []string
	for _, in := range j.open {
		out = append(out, describeCall(in))
	}
	sort.Strings(out)
	return out
}

// History returns the operations recorded so far, by call time, with the
// calls whose outcome is unknown returning at the end.
func (j *Journal) History() []porcupine.Operation {
	j.mu.Lock()
	h := append([]porcupine.Operation(nil), j.ops...)
	j.mu.Unlock()
	sort.SliceStable(h, func(a, b int) bool { return h[a].Call < h[b].Call })
	end := int64(0)
	for _, op := range h {
		end = max(end, op.Return)
	}
	for i := range h {
		if out := h[i].Output.(Output); out.Unknown && out.Msg != lostOut.Msg {
			h[i].Return = end + 1
		}
	}
	return h
}

// Events returns what replica client's streams delivered, in order.
func (j *Journal) Events(client int) []Received {
	j.mu.Lock()
	defer j.mu.Unlock()
	return append([]Received(nil), j.events[client]...)
}

// Wrap returns s recording into j as replica client ("r<client>"): every
// call is recorded as the model's operation, and every event its streams
// deliver is recorded with the time its receiver took it (the streams are
// passed on unbuffered, so that is when the replica read it).
func (j *Journal) Wrap(client int, s claims.Store) claims.Store {
	return &recStore{j: j, client: client, s: s}
}

// recStore is a claims.Store recording into a Journal.
type recStore struct {
	j      *Journal
	client int
	s      claims.Store
}

var _ claims.Store = (*recStore)(nil)

func (r *recStore) do(in Input, f func() Output) Output {
	return r.j.do(r.client, in, func(*Input) Output { return f() })
}

// key returns key's index, or an error for a key the model does not know.
func (r *recStore) key(key string) (int, error) {
	k := index(key, "s%d")
	if k < 0 || k >= MaxKeys || keyName(k) != key {
		return 0, fmt.Errorf("claimslin: the recording store knows keys s0 to s%d, not %q", MaxKeys-1, key)
	}
	return k, nil
}

// CreateOrGet implements claims.Store; the proposal is recorded as the
// target propose returned last (the one a write would use). An error of
// propose's is recorded as ErrProposal.
func (r *recStore) CreateOrGet(ctx context.Context, key string, propose func() (claims.Target, error)) (claims.Claim, bool, error) {
	k, err := r.key(key)
	if err != nil {
		return claims.Claim{}, false, err
	}
	var (
		got     claims.Claim
		created bool
		cerr    error
	)
	r.j.do(r.client, Input{Op: OpCreateOrGet, Key: k}, func(in *Input) Output {
		var mu sync.Mutex
		var perr error
		got, created, cerr = r.s.CreateOrGet(ctx, key, func() (claims.Target, error) {
			t, err := propose()
			mu.Lock()
			defer mu.Unlock()
			if err != nil {
				perr = err
			} else {
				in.Target = fromTarget(t)
			}
			return t, err
		})
		mu.Lock()
		defer mu.Unlock()
		if cerr != nil && perr != nil && errors.Is(cerr, perr) {
			return Output{Err: ErrProposal, Msg: cerr.Error()}
		}
		o := errOut(cerr)
		if cerr == nil {
			o.Has, o.Claim, o.Created = true, fromClaim(got), created
		}
		return o
	})
	return got, created, cerr
}

// Get implements claims.Store.
func (r *recStore) Get(ctx context.Context, key string) (claims.Claim, bool, error) {
	k, err := r.key(key)
	if err != nil {
		return claims.Claim{}, false, err
	}
	var (
		c    claims.Claim
		ok   bool
		gerr error
	)
	r.do(Input{Op: OpGet, Key: k}, func() Output {
		c, ok, gerr = r.s.Get(ctx, key)
		o := errOut(gerr)
		if gerr == nil && ok {
			o.Has, o.Claim = true, fromClaim(c)
		}
		return o
	})
	return c, ok, gerr
}

// Hold implements claims.Store.
func (r *recStore) Hold(ctx context.Context, key string, rev int64, replica string) error {
	k, err := r.key(key)
	if err != nil {
		return err
	}
	var herr error
	r.do(Input{Op: OpHold, Key: k, Rev: rev}, func() Output {
		herr = r.s.Hold(ctx, key, rev, replica)
		return errOut(herr)
	})
	return herr
}

// Unhold implements claims.Store.
func (r *recStore) Unhold(ctx context.Context, key string, replica string) error {
	k, err := r.key(key)
	if err != nil {
		return err
	}
	var uerr error
	r.do(Input{Op: OpUnhold, Key: k}, func() Output {
		uerr = r.s.Unhold(ctx, key, replica)
		return errOut(uerr)
	})
	return uerr
}

// Close implements claims.Store.
func (r *recStore) Close(ctx context.Context, key string, rev int64, replica string) (claims.CloseResult, error) {
	k, err := r.key(key)
	if err != nil {
		return 0, err
	}
	var (
		res  claims.CloseResult
		cerr error
	)
	r.do(Input{Op: OpClose, Key: k, Rev: rev}, func() Output {
		res, cerr = r.s.Close(ctx, key, rev, replica)
		o := errOut(cerr)
		o.Close = int(res)
		return o
	})
	return res, cerr
}

// Quarantine implements claims.Store.
func (r *recStore) Quarantine(ctx context.Context, key string, rev int64, attempt uint64, gen int64) (claims.Claim, error) {
	k, err := r.key(key)
	if err != nil {
		return claims.Claim{}, err
	}
	var (
		c    claims.Claim
		qerr error
	)
	r.do(Input{Op: OpQuarantine, Key: k, Rev: rev, Attempt: attempt, Gen: gen}, func() Output {
		c, qerr = r.s.Quarantine(ctx, key, rev, attempt, gen)
		o := errOut(qerr)
		if qerr == nil {
			o.Has, o.Claim = true, fromClaim(c)
		}
		return o
	})
	return c, qerr
}

// Resolve implements claims.Store.
func (r *recStore) Resolve(ctx context.Context, key string, attempt uint64, gen int64, accepted bool) (claims.Claim, bool, error) {
	k, err := r.key(key)
	if err != nil {
		return claims.Claim{}, false, err
	}
	var (
		c    claims.Claim
		ok   bool
		rerr error
	)
	r.do(Input{Op: OpResolve, Key: k, Attempt: attempt, Gen: gen, Accepted: accepted}, func() Output {
		c, ok, rerr = r.s.Resolve(ctx, key, attempt, gen, accepted)
		o := errOut(rerr)
		if rerr == nil && ok {
			o.Has, o.Claim = true, fromClaim(c)
		}
		return o
	})
	return c, ok, rerr
}

// Move implements claims.Store.
func (r *recStore) Move(ctx context.Context, key string, rev int64, target claims.Target) (claims.Claim, error) {
	k, err := r.key(key)
	if err != nil {
		return claims.Claim{}, err
	}
	var (
		c    claims.Claim
		merr error
	)
	r.do(Input{Op: OpMove, Key: k, Rev: rev, Target: fromTarget(target)}, func() Output {
		c, merr = r.s.Move(ctx, key, rev, target)
		o := errOut(merr)
		if merr == nil {
			o.Has, o.Claim = true, fromClaim(c)
		}
		return o
	})
	return c, merr
}

// Touch implements claims.Store.
func (r *recStore) Touch(ctx context.Context, key string, rev int64) error {
	k, err := r.key(key)
	if err != nil {
		return err
	}
	var terr error
	r.do(Input{Op: OpTouch, Key: k, Rev: rev}, func() Output {
		terr = r.s.Touch(ctx, key, rev)
		return errOut(terr)
	})
	return terr
}

// Register implements claims.Store.
func (r *recStore) Register(ctx context.Context, worker, identity string) (claims.Member, error) {
	w := workerIndex(worker)
	if w < 0 || w >= MaxWorkers || workerName(w) != worker || len(identity) != 1 {
		return claims.Member{}, fmt.Errorf("claimslin: the recording store knows workers w0 to w%d with identities a, b: not %q %q", MaxWorkers-1, worker, identity)
	}
	var (
		m    claims.Member
		rerr error
	)
	r.do(Input{Op: OpRegister, Worker: w, Ident: int(identity[0] - 'a')}, func() Output {
		m, rerr = r.s.Register(ctx, worker, identity)
		o := errOut(rerr)
		o.Gen = m.Gen
		return o
	})
	return m, rerr
}

// Deregister implements claims.Store.
func (r *recStore) Deregister(ctx context.Context, worker string) error {
	w := workerIndex(worker)
	if w < 0 || w >= MaxWorkers {
		return fmt.Errorf("claimslin: the recording store knows workers w0 to w%d, not %q", MaxWorkers-1, worker)
	}
	var derr error
	r.do(Input{Op: OpDeregister, Worker: w}, func() Output {
		derr = r.s.Deregister(ctx, worker)
		return errOut(derr)
	})
	return derr
}

// Members implements claims.Store.
func (r *recStore) Members(ctx context.Context) ([]claims.Member, int64, error) {
	var (
		ms   []claims.Member
		rev  int64
		merr error
	)
	r.do(Input{Op: OpMembers}, func() Output {
		ms, rev, merr = r.s.Members(ctx)
		return membersOut(ms, rev, merr)
	})
	return ms, rev, merr
}

// membersOut is the output of a Members call.
func membersOut(ms []claims.Member, rev int64, err error) Output {
	o := errOut(err)
	o.Rev = rev
	for _, m := range ms {
		w := workerIndex(m.Worker)
		if w < 0 || w >= MaxWorkers || o.Members[w].Gen != 0 || len(m.Identity) != 1 {
			return Output{Err: ErrOther, Msg: fmt.Sprintf("Members returned %+v", ms)}
		}
		o.Members[w] = Member{Gen: m.Gen, Ident: int(m.Identity[0] - 'a')}
	}
	return o
}

// ReplicaID implements claims.Store (not recorded: the model does not
// check it).
func (r *recStore) ReplicaID(ctx context.Context, replica string) (uint64, error) {
	return r.s.ReplicaID(ctx, replica)
}

// Events implements claims.Store: the events are passed on unbuffered,
// and each is recorded when the receiver took it.
func (r *recStore) Events(ctx context.Context) (<-chan claims.Event, error) {
	in, err := r.s.Events(ctx)
	if err != nil {
		return nil, err
	}
	out := make(chan claims.Event)
	go func() {
		defer close(out)
		for ev := range in {
			select {
			case out <- ev:
				r.j.mu.Lock()
				r.j.events[r.client] = append(r.j.events[r.client], Received{At: r.j.Now(), Event: ev})
				r.j.mu.Unlock()
			case <-ctx.Done():
				// Drain what the inner stream still sends until it closes.
				for range in {
				}
				return
			}
		}
	}()
	return out, nil
}

// IdleTTL implements claims.Store: the inner store's (no call, not
// recorded).
func (r *recStore) IdleTTL() time.Duration { return r.s.IdleTTL() }

// Shutdown implements claims.Store: the session ends (recorded as
// EndSession).
func (r *recStore) Shutdown() error {
	var serr error
	in := Input{Op: OpEndSession, Replica: r.client}
	call := r.j.Now()
	r.do(in, func() Output {
		serr = r.s.Shutdown()
		return sessionOut(serr)
	})
	in.Client, in.Op = r.client, OpDropRegistrations
	r.j.Add(porcupine.Operation{ClientId: r.client, Input: in, Output: sessionOut(serr), Call: call, Return: r.j.Now()})
	return serr
}
