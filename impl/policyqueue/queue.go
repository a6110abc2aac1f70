package policyqueue

import (
	"context"
	"fmt"
	"sort"
	"sync"
	"time"

	"github.com/placementlab/placement/impl/affinity"
	"github.com/placementlab/placement/impl/placement"
)

// DefaultMaxQueued is Config.MaxQueued when it is zero.
const DefaultMaxQueued = 1024

// LaneKind says which kind of lane an item waits in.
type LaneKind uint8

const (
	// LaneShared: the shared lane, for items any of several workers may
	// take (the zero Item is one that any worker may take).
	LaneShared LaneKind = iota
	// LaneExact: the lane of one affinity.Target, for items that must go
	// there (a hard binding or a pin).
	LaneExact
	// NumLaneKinds is the number of lane kinds: the length of Stats.Lanes.
	NumLaneKinds
)

// String names the lane kind ("shared", "exact").
func (k LaneKind) String() string {
	switch k {
	case LaneShared:
		return "shared"
	case LaneExact:
		return "exact"
	}
	return fmt.Sprintf("LaneKind(%d)", uint8(k))
}

// Ticket identifies an enqueued item. Tickets are numbered 1, 2, 3, ... in
// the order the queue accepted the items (a refused Enqueue takes no
// number), so a ticket is also the item's age: a smaller ticket is older.
// The zero Ticket is never issued.
type Ticket uint64

// CancelResult says what a Cancel did.
type CancelResult uint8

const (
	// CancelNone: the ticket was unknown or had already ended (released,
	// cancelled, or ended by Close): nothing changed.
	CancelNone CancelResult = iota
	// CancelWaiting: the item was waiting; it is removed.
	CancelWaiting
	// CancelAdmitted: the item had been admitted; its slot is released
	// (exactly once: a later Slot.Release does nothing).
	CancelAdmitted
)

// String names the result.
func (r CancelResult) String() string {
	switch r {
	case CancelNone:
		return "none"
	case CancelWaiting:
		return "waiting"
	case CancelAdmitted:
		return "admitted"
	}
	return fmt.Sprintf("CancelResult(%d)", uint8(r))
}

// Item is a request waiting for a slot.
type Item struct {
	// Kind: LaneShared (zero) or LaneExact.
	Kind LaneKind
	// Target: an exact item's target. A ranked target's slot is that rank
	// of its worker; a worker-only target's slot is any rank of it
	// (affinity.WorkerOnly). Either takes one of the worker's slots.
	Target affinity.Target
	// Candidates: the targets a shared item may go to, in the caller's
	// order of preference. Empty means any worker the queue knows, as
	// affinity.WorkerOnly targets, in the order of their names.
	Candidates []affinity.Target
	// Allow, when set on a shared item, is asked whether the item may go
	// to a candidate target now: the caller's own eligibility (the
	// affinity layer's Eligible, an overload signal). The queue calls it
	// with its lock held, during admission passes only: it must be quick
	// and deterministic, and must not call the queue. Its answer may
	// change; the queue notices only at a pass over the target's worker,
	// so call Recheck or RecheckAll after such a change.
	Allow func(affinity.Target) bool
}

// Exact returns an exact item for t.
func Exact(t affinity.Target) Item { return Item{Kind: LaneExact, Target: t} }

// Shared returns a shared item that may go to any of cands (in that order
// of preference), or to any worker when cands is empty.
func Shared(cands ...affinity.Target) Item { return Item{Kind: LaneShared, Candidates: cands} }

// Config configures a Queue. The zero value is valid.
type Config struct {
	// MaxQueued bounds the items waiting in the whole queue; zero means
	// DefaultMaxQueued.
	MaxQueued int
	// MaxPerLane, when positive, bounds the items waiting in one lane
	// (each exact target's lane, and the shared lane).
	MaxPerLane int
	// Clock, a *placement.ManualClock, is where wait times are read (for
	// Slot.Waited and Stats); nil means the runtime's monotonic clock.
	// Nothing in the queue's decisions depends on time.
	Clock *placement.ManualClock
}

// state of an entry.
type estate uint8

const (
	eWaiting estate = iota
	eAdmitted
	eCancelled // removed while waiting, or its slot released by Cancel
	eReleased
	eClosed
)

// entry is an enqueued item.
type entry struct {
	ticket Ticket
	item   Item
	w      *worker // an exact item's worker
	ln     *lane   // an exact item's lane
	state  estate
	slot   *Slot
	enqAt  time.Duration
	ready  chan struct{} // closed when the state leaves eWaiting (made by Wait)
}

// lane is the FIFO of one exact target.
type lane struct {
	target affinity.Target
	items  []*entry
}

// worker is one worker's capacity, eligibility and exact lanes.
type worker struct {
	name     string
	capacity int
	inflight int
	eligible bool
	lanes    []*lane // non-empty lanes only
	mark     uint64  // the pass whose scope it is in
}

func (w *worker) free() bool { return w.eligible && w.inflight < w.capacity }

// Queue is a bounded admission queue: an exact lane per affinity.Target
// and a shared lane, per-worker capacity, oldest first. It is safe for
// concurrent use. See the package doc for its contract.
type Queue struct {
	cfg   Config
	born  time.Time
	mu    sync.Mutex
	next  Ticket
	names []string // sorted
	work  map[string]*worker
	lanes map[affinity.Target]*lane
	// shared holds the shared lane's waiting items in ticket order.
	shared  []*entry
	tickets map[Ticket]*entry // waiting and admitted (not yet released)
	waiting int
	epoch   uint64
	closed  bool
	stats   Stats
}

// New returns an empty queue: no workers (SetCapacity adds them).
func New(cfg Config) (*Queue, error) {
	if cfg.MaxQueued < 0 {
		return nil, &ConfigError{"MaxQueued", "negative"}
	}
	if cfg.MaxPerLane < 0 {
		return nil, &ConfigError{"MaxPerLane", "negative"}
	}
	if cfg.MaxQueued == 0 {
		cfg.MaxQueued = DefaultMaxQueued
	}
	return &Queue{cfg: cfg, born: time.Now(), work: map[string]*worker{}, lanes: map[affinity.Target]*lane{},
		tickets: map[Ticket]*entry{}}, nil
}

func (q *Queue) now() time.Duration {
	if q.cfg.Clock != nil {
		return q.cfg.Clock.Now()
	}
	return time.Since(q.born)
}

// workerLocked returns the named worker, adding it (capacity 0, eligible)
// when it is new.
func (q *Queue) workerLocked(name string) *worker {
	if w := q.work[name]; w != nil {
		return w
	}
	w := &worker{name: name, eligible: true}
	q.work[name] = w
	i := sort.SearchStrings(q.names, name)
	q.names = append(q.names, "")
	copy(q.names[i+1:], q.names[i:])
	q.names[i] = name
	return w
}

func validTarget(t affinity.Target) string {
	switch {
	case t.Worker == "":
		return "empty worker"
	case len(t.Worker) > affinity.MaxWorkerIDBytes:
		return "worker id longer than affinity.MaxWorkerIDBytes"
	case t.HasRank && t.Rank < 0:
		return "negative rank"
	case !t.HasRank && t.Rank != 0:
		return "a rank without HasRank"
	}
	return ""
}

func validate(it Item) error {
	switch it.Kind {
	case LaneExact:
		if r := validTarget(it.Target); r != "" {
			return &ItemError{"exact target: " + r}
		}
		if len(it.Candidates) > 0 || it.Allow != nil {
			return &ItemError{"an exact item has no Candidates or Allow"}
		}
	case LaneShared:
		if it.Target != (affinity.Target{}) {
			return &ItemError{"a shared item has no Target (use Candidates)"}
		}
		for _, c := range it.Candidates {
			if r := validTarget(c); r != "" {
				return &ItemError{"candidate: " + r}
			}
		}
	default:
		return &ItemError{fmt.Sprintf("unknown lane kind %d", it.Kind)}
	}
	return nil
}

// Enqueue adds an item and runs an admission pass over the workers it
// names (an exact item's worker; a shared item's candidates' workers, or
// every worker when it has none). It returns the item's ticket and the
// slots the pass admitted, in admission order: the item's own slot is
// among them when it was admitted at once. When the item would wait and
// the queue or its lane is full it is refused with a *FullError
// (ErrQueueFull), takes no ticket, and the slots the pass admitted are
// still returned. After Close it returns ErrClosed.
func (q *Queue) Enqueue(it Item) (Ticket, []*Slot, error) {
	if err := validate(it); err != nil {
		return 0, nil, err
	}
	if it.Kind == LaneShared {
		it.Candidates = append([]affinity.Target(nil), it.Candidates...)
	}
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.closed {
		return 0, nil, ErrClosed
	}
	e := &entry{ticket: q.next + 1, item: it, enqAt: q.now()}
	var scope []*worker
	q.epoch++
	if it.Kind == LaneExact {
		e.w = q.workerLocked(it.Target.Worker)
		scope = q.scopeAdd(scope, e.w)
		e.ln = q.lanes[it.Target]
		if e.ln == nil {
			e.ln = &lane{target: it.Target}
			q.lanes[it.Target] = e.ln
		}
		if len(e.ln.items) == 0 {
			e.w.lanes = append(e.w.lanes, e.ln)
		}
		e.ln.items = append(e.ln.items, e)
	} else {
		if len(it.Candidates) == 0 {
			for _, n := range q.names {
				scope = q.scopeAdd(scope, q.work[n])
			}
		}
		for _, c := range it.Candidates {
			if w := q.work[c.Worker]; w != nil {
				scope = q.scopeAdd(scope, w)
			}
		}
		q.shared = append(q.shared, e)
	}
	q.waiting++
	q.stats.Lanes[it.Kind].Waiting++
	admitted := q.passLocked(scope, nil)
	if e.state == eWaiting {
		var full *FullError
		switch {
		case q.waiting-1 >= q.cfg.MaxQueued:
			full = &FullError{Lane: it.Kind, Target: it.Target, Waiting: q.waiting - 1, Limit: q.cfg.MaxQueued}
		case q.cfg.MaxPerLane > 0 && q.laneLenLocked(e)-1 >= q.cfg.MaxPerLane:
			full = &FullError{Lane: it.Kind, Target: it.Target, PerLane: true, Waiting: q.laneLenLocked(e) - 1, Limit: q.cfg.MaxPerLane}
		}
		if full != nil {
			q.removeLocked(e)
			q.stats.Lanes[it.Kind].Full++
			return 0, admitted, full
		}
	}
	q.next++
	q.stats.Lanes[it.Kind].Enqueued++
	if e.state == eWaiting || e.state == eAdmitted {
		q.tickets[e.ticket] = e
	}
	return e.ticket, admitted, nil
}

func (q *Queue) scopeAdd(scope []*worker, w *worker) []*worker {
	if w.mark == q.epoch {
		return scope
	}
	w.mark = q.epoch
	return append(scope, w)
}

func (q *Queue) laneLenLocked(e *entry) int {
	if e.ln != nil {
		return len(e.ln.items)
	}
	return len(q.shared)
}

// removeLocked takes a waiting entry out of its lane.
func (q *Queue) removeLocked(e *entry) {
	if e.ln != nil {
		items := e.ln.items
		i := sort.Search(len(items), func(i int) bool { return items[i].ticket >= e.ticket })
		e.ln.items = append(items[:i], items[i+1:]...)
		if len(e.ln.items) == 0 {
			ls := e.w.lanes
			for j, l := range ls {
				if l == e.ln {
					e.w.lanes = append(ls[:j], ls[j+1:]...)
					break
				}
			}
			delete(q.lanes, e.ln.target)
		}
	} else {
		s := q.shared
		i := sort.Search(len(s), func(i int) bool { return s[i].ticket >= e.ticket })
		q.shared = append(s[:i], s[i+1:]...)
	}
	q.waiting--
	q.stats.Lanes[e.item.Kind].Waiting--
}

// passLocked admits, while it can, the oldest waiting item that can use a
// free worker of scope (whose mark is q.epoch), and appends the slots to
// out in admission order.
func (q *Queue) passLocked(scope []*worker, out []*Slot) []*Slot {
	if q.closed {
		return out
	}
	for {
		var best *entry
		var bestW *worker
		var bestT affinity.Target
		free := false
		for _, w := range scope {
			if !w.free() {
				continue
			}
			free = true
			for _, ln := range w.lanes {
				if h := ln.items[0]; best == nil || h.ticket < best.ticket {
					best, bestW, bestT = h, w, h.item.Target
				}
			}
		}
		if !free {
			return out // nothing in scope can admit: no need to walk the shared lane
		}
		if best == nil || !mutant("SharedLaneStarves") {
			for _, e := range q.shared {
				if best != nil && e.ticket > best.ticket {
					break
				}
				if t, w := q.chooseLocked(e); w != nil {
					best, bestW, bestT = e, w, t
					break
				}
			}
		}
		if best == nil {
			return out
		}
		out = append(out, q.admitLocked(best, bestW, bestT))
	}
}

// chooseLocked returns where a shared entry may go in the current pass:
// its first candidate (or, without candidates, the first worker by name)
// whose worker is in the pass's scope, free, and allowed by the item.
func (q *Queue) chooseLocked(e *entry) (affinity.Target, *worker) {
	ok := func(t affinity.Target, w *worker) bool {
		return w != nil && w.mark == q.epoch && w.free() && (e.item.Allow == nil || e.item.Allow(t))
	}
	if len(e.item.Candidates) == 0 {
		for _, n := range q.names {
			w, t := q.work[n], affinity.WorkerOnly(n)
			if ok(t, w) {
				return t, w
			}
		}
		return affinity.Target{}, nil
	}
	for _, c := range e.item.Candidates {
		if w := q.work[c.Worker]; ok(c, w) {
			return c, w
		}
	}
	return affinity.Target{}, nil
}

func (q *Queue) admitLocked(e *entry, w *worker, t affinity.Target) *Slot {
	q.removeLocked(e)
	w.inflight++
	e.state = eAdmitted
	now := q.now()
	e.slot = &Slot{q: q, e: e, w: w, target: t, waited: max(0, now-e.enqAt)}
	ls := &q.stats.Lanes[e.item.Kind]
	ls.Admitted++
	ls.WaitTotal += e.slot.waited
	ls.WaitMax = max(ls.WaitMax, e.slot.waited)
	q.stats.InFlight++
	if e.ready != nil {
		close(e.ready)
	}
	return e.slot
}

// Wait blocks until the ticket's item is admitted and returns its slot (at
// once when it already was, whatever ctx). It returns ErrCancelled when
// the ticket is cancelled first, ErrClosed when the queue closes first,
// and ErrUnknownTicket when the queue does not hold the ticket (ErrClosed
// once the queue is closed). When ctx ends first, Wait cancels the ticket
// as Cancel does (an item admitted at that moment has its slot released)
// and returns an error matching both ErrCancelled and ctx's cause. Slots a cancellation admits to other
// items wake their own waiters; a simulation host that needs them calls
// Cancel itself.
func (q *Queue) Wait(ctx context.Context, t Ticket) (*Slot, error) {
	q.mu.Lock()
	e := q.tickets[t]
	if e == nil {
		closed := q.closed
		q.mu.Unlock()
		if closed {
			return nil, ErrClosed
		}
		return nil, fmt.Errorf("%w: %d", ErrUnknownTicket, t)
	}
	var ready chan struct{}
	if e.state == eWaiting {
		if e.ready == nil {
			e.ready = make(chan struct{})
		}
		ready = e.ready
	}
	q.mu.Unlock()
	if ready != nil {
		select {
		case <-ready:
		case <-ctx.Done():
			q.mu.Lock()
			defer q.mu.Unlock()
			if e.state == eWaiting || e.state == eAdmitted {
				q.cancelLocked(e)
				return nil, fmt.Errorf("%w: %w", ErrCancelled, context.Cause(ctx))
			}
			return nil, e.endErr()
		}
	}
	q.mu.Lock()
	defer q.mu.Unlock()
	if e.state == eAdmitted {
		return e.slot, nil
	}
	return nil, e.endErr()
}

func (e *entry) endErr() error {
	switch e.state {
	case eClosed:
		return ErrClosed
	case eReleased:
		return fmt.Errorf("%w: %d (released)", ErrUnknownTicket, e.ticket)
	}
	return ErrCancelled
}

// Acquire enqueues it and waits for its slot (Enqueue, then Wait): the
// blocking form a router uses. The caller releases the slot.
func (q *Queue) Acquire(ctx context.Context, it Item) (*Slot, error) {
	t, admitted, err := q.Enqueue(it)
	if err != nil {
		return nil, err
	}
	for _, s := range admitted {
		if s.e.ticket == t {
			return s, nil
		}
	}
	return q.Wait(ctx, t)
}

// Cancel ends a ticket: a waiting item is removed (CancelWaiting); an
// admitted item's slot is released as Slot.Release does, exactly once
// (CancelAdmitted), and the slots that release admitted are returned; an
// unknown or ended ticket changes nothing (CancelNone). A Wait on the
// ticket returns ErrCancelled.
func (q *Queue) Cancel(t Ticket) (CancelResult, []*Slot) {
	q.mu.Lock()
	defer q.mu.Unlock()
	e := q.tickets[t]
	if e == nil {
		return CancelNone, nil
	}
	return q.cancelLocked(e)
}

func (q *Queue) cancelLocked(e *entry) (CancelResult, []*Slot) {
	delete(q.tickets, e.ticket)
	if e.state == eWaiting {
		q.removeLocked(e)
		e.state = eCancelled
		q.stats.Lanes[e.item.Kind].Cancelled++
		if e.ready != nil {
			close(e.ready)
		}
		return CancelWaiting, nil
	}
	q.stats.CancelledAdmitted++
	e.state = eCancelled
	if mutant("CancelLeaksSlot") {
		e.slot.released = true
		return CancelAdmitted, nil
	}
	return CancelAdmitted, q.releaseLocked(e.slot)
}

// releaseLocked frees a slot and runs a pass over its worker.
func (q *Queue) releaseLocked(s *Slot) []*Slot {
	if s.released && !mutant("ReleaseTwice") {
		return nil
	}
	s.released = true
	s.w.inflight--
	q.stats.InFlight--
	q.stats.Released++
	q.epoch++
	return q.passLocked(q.scopeAdd(nil, s.w), nil)
}

// SetCapacity sets how many slots worker may have in flight (adding the
// worker, eligible, when it is new) and runs a pass over it, returning
// the slots admitted. Lowering it below the slots in flight revokes
// nothing: admissions resume once enough are released.
func (q *Queue) SetCapacity(worker string, n int) ([]*Slot, error) {
	if worker == "" || n < 0 {
		return nil, fmt.Errorf("%w: SetCapacity(%q, %d): empty worker or negative capacity", ErrInvalidArgument, worker, n)
	}
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.closed {
		return nil, ErrClosed
	}
	w := q.workerLocked(worker)
	w.capacity = n
	q.epoch++
	return q.passLocked(q.scopeAdd(nil, w), nil), nil
}

// SetEligible marks worker eligible or not (adding it, with capacity 0,
// when it is new) and runs a pass over it, returning the slots admitted.
// An ineligible worker is admitted to by nobody: its exact lanes wait,
// shared items go elsewhere. Its slots in flight stay until released.
func (q *Queue) SetEligible(worker string, ok bool) ([]*Slot, error) {
	if worker == "" {
		return nil, fmt.Errorf("%w: SetEligible: empty worker", ErrInvalidArgument)
	}
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.closed {
		return nil, ErrClosed
	}
	w := q.workerLocked(worker)
	w.eligible = ok
	q.epoch++
	return q.passLocked(q.scopeAdd(nil, w), nil), nil
}

// Recheck runs a pass over worker (nothing when the queue does not know
// it) and returns the slots admitted: call it when something the queue
// cannot see changed for that worker, such as what an item's Allow
// answers.
func (q *Queue) Recheck(worker string) []*Slot {
	q.mu.Lock()
	defer q.mu.Unlock()
	w := q.work[worker]
	if w == nil || mutant("RecheckSkipsBlocked") {
		return nil
	}
	q.epoch++
	return q.passLocked(q.scopeAdd(nil, w), nil)
}

// RecheckAll runs a pass over every worker and returns the slots admitted
// (PolicyQueue::recheck_all_workers): call it after changes the queue
// cannot see, such as a new membership snapshot that changes what items'
// Allow answer.
func (q *Queue) RecheckAll() []*Slot {
	q.mu.Lock()
	defer q.mu.Unlock()
	if mutant("RecheckSkipsBlocked") {
		return nil
	}
	q.epoch++
	var scope []*worker
	for _, n := range q.names {
		scope = q.scopeAdd(scope, q.work[n])
	}
	return q.passLocked(scope, nil)
}

// Close ends every waiting item with ErrClosed (their Waits return it)
// and refuses every later Enqueue, SetCapacity and SetEligible. Slots in
// flight stay valid and are released as usual; nothing is admitted after
// Close. A second Close does nothing. It returns nil.
func (q *Queue) Close() error {
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.closed {
		return nil
	}
	q.closed = true
	var ended []*entry
	for _, ln := range q.lanes {
		ended = append(ended, ln.items...)
	}
	ended = append(ended, q.shared...)
	sort.Slice(ended, func(i, j int) bool { return ended[i].ticket < ended[j].ticket })
	for _, e := range ended {
		q.removeLocked(e)
		delete(q.tickets, e.ticket)
		e.state = eClosed
		q.stats.Lanes[e.item.Kind].Closed++
		if e.ready != nil && !mutant("CloseStrandsWaiters") {
			close(e.ready)
		}
	}
	return nil
}

// Len returns how many items wait.
func (q *Queue) Len() int {
	q.mu.Lock()
	defer q.mu.Unlock()
	return q.waiting
}

// WorkerState is one worker as the queue sees it.
type WorkerState struct {
	Worker   string
	Capacity int
	InFlight int
	Eligible bool
	// Waiting counts the items in the worker's exact lanes.
	Waiting int
}

// Workers returns every worker the queue knows, by name.
func (q *Queue) Workers() []WorkerState {
	q.mu.Lock()
	defer q.mu.Unlock()
	out := make([]WorkerState, 0, len(q.names))
	for _, n := range q.names {
		w := q.work[n]
		s := WorkerState{Worker: n, Capacity: w.capacity, InFlight: w.inflight, Eligible: w.eligible}
		for _, ln := range w.lanes {
			s.Waiting += len(ln.items)
		}
		out = append(out, s)
	}
	return out
}

// LaneStats counts one kind of lane's items.
type LaneStats struct {
	// Enqueued: items accepted (each took a ticket).
	Enqueued uint64
	// Admitted: items given a slot; WaitTotal and WaitMax are their waits
	// (from Enqueue to admission, on Config.Clock).
	Admitted           uint64
	WaitTotal, WaitMax time.Duration
	// Cancelled: items removed while waiting (Cancel, a Wait's context).
	Cancelled uint64
	// Full: Enqueues refused with ErrQueueFull.
	Full uint64
	// Closed: items waiting when the queue closed.
	Closed uint64
	// Waiting: items waiting now.
	Waiting int
}

// Stats is what an operator watches.
type Stats struct {
	// Lanes, by LaneKind.
	Lanes [NumLaneKinds]LaneStats
	// InFlight: slots admitted and not yet released.
	InFlight int
	// Released: slots released (by Slot.Release or a Cancel).
	Released uint64
	// CancelledAdmitted: Cancels (or Waits whose context ended) that found
	// the item admitted and released its slot.
	CancelledAdmitted uint64
}

// Stats returns the queue's counters.
func (q *Queue) Stats() Stats {
	q.mu.Lock()
	defer q.mu.Unlock()
	return q.stats
}

// Slot is an admitted item's place on a worker, held until Release.
type Slot struct {
	q        *Queue
	e        *entry
	w        *worker
	target   affinity.Target
	waited   time.Duration
	released bool // under q.mu
}

// Ticket returns the admitted item's ticket.
func (s *Slot) Ticket() Ticket { return s.e.ticket }

// Target returns where the item goes: an exact item's target, or the
// candidate a shared item was given (affinity.WorkerOnly of the worker
// when it had no candidates).
func (s *Slot) Target() affinity.Target { return s.target }

// Lane returns the kind of lane the item waited in.
func (s *Slot) Lane() LaneKind { return s.e.item.Kind }

// Waited returns how long the item waited, from Enqueue to its admission,
// on the queue's clock.
func (s *Slot) Waited() time.Duration { return s.waited }

// Release frees the slot and runs a pass over its worker, returning the
// slots admitted. It is idempotent: a second Release (or one after the
// ticket's Cancel) does nothing and returns nil.
func (s *Slot) Release() []*Slot {
	q := s.q
	q.mu.Lock()
	defer q.mu.Unlock()
	if !s.released || mutant("ReleaseTwice") {
		delete(q.tickets, s.e.ticket)
		if s.e.state == eAdmitted {
			s.e.state = eReleased
		}
	}
	return q.releaseLocked(s)
}
