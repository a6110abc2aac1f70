package placement

import (
	"strings"
	"sync"
	"sync/atomic"
	"unsafe"
)

// entryState is a key's state, named as in spec/tla/Placement.tla.
type entryState uint8

const (
	stAbsent entryState = iota
	stReserved
	stDispatching
	stBound
	stQuarantined
)

// entry is one key's slot in the table. Its cold-path fields are guarded by
// mu (a per-key lock); a Bound entry's binding is reached lock-free.
//
// The entry's first binding lives inside it (first), so a hit reads one
// object, not two. A binding is never reused: a key that binds again in
// place (after expiry or a generation change) allocates its next binding,
// because leases on the first may still be outstanding.
//
// Size: a bound entry is what the table holds per session, so it carries
// only what a bound session needs: 80 bytes (64-bit platforms), and with a
// key of up to 16 bytes in front of it, one 96-byte allocation. To get
// there (issue 28; it was 144):
//
//   - the key's bytes sit just before the entry in its allocation (see
//     keyed) and the entry keeps only their length (klen): their address
//     follows from the entry's and the length, so no string header (16
//     bytes) is stored. A key longer than maxInlineKey is copied apart,
//     and its string header is what comes before the entry (klen 0);
//   - everything an initialization, a quarantine or a waiter needs (the
//     reservation, the attempt, the deadlines, the wait queue) is in one
//     lazily allocated pending (p), which a bound entry without waiters
//     drops;
//   - a binding names its target, generation and target slot through one
//     pointer to the generation object its dispatch was fenced on, shared
//     by every binding to that target at that generation (see
//     generation), instead of carrying them (32 bytes for a 16-byte
//     target).
//
// Layout: a lookup that finds the key reads the key's bytes and the fields
// up to bound, the first 16+16 bytes of the allocation for a short key
// (next is read only when a lookup walks past the entry); a hit then
// writes the first binding's word and deadline, the allocation's last 16
// bytes. Allocations of these sizes (96, 112, 128, 144 bytes) start at
// multiples of 16 bytes, at least 32 for 96, and the gap between the two
// groups (48 bytes for a 16-byte key, more for longer ones) then always
// holds a cache-line boundary: lookups of a key on one core do not miss on
// the line another core's hits and releases keep writing
// (TestEntryLayout checks the offsets).
type entry[T comparable] struct {
	hash      uint32                     // the table's hash of key
	klen      uint8                      // the key's length if inline (before the entry), else 0
	st        entryState                 // guarded by mu, like the fields below it
	removed   bool                       // detached from the table; callers retry
	firstUsed bool                       // first has been bound
	bound     atomic.Pointer[binding[T]] // the binding while stBound, else nil
	next      atomic.Pointer[entry[T]]   // the table's chain (immutable once unlinked)

	mu sync.Mutex
	// p is the key's pending state: while reserved, dispatching or
	// quarantined, and while requests wait; nil otherwise.
	p *pending[T]

	first binding[T] // the first binding (see above); keep it last
}

// maxInlineKey is the longest key kept in the entry's own allocation.
const maxInlineKey = 64

// key returns the entry's private copy of its key.
func (e *entry[T]) key() string {
	n := uintptr(e.klen)
	if n == 0 { // a long key: the string before the entry (keyed[T, string].buf)
		return *(*string)(unsafe.Add(unsafe.Pointer(e), -int(unsafe.Sizeof(""))))
	}
	// The bytes are the buffer just before the entry (keyed.buf), whose
	// size the length gives (see newEntry).
	return unsafe.String((*byte)(unsafe.Add(unsafe.Pointer(e), -int(inlineBuf(n)))), int(n))
}

// inlineBuf is the size of the key buffer before an entry whose inline key
// has n bytes (1 <= n <= maxInlineKey): n rounded up to 16.
func inlineBuf(n uintptr) uintptr { return (n + 15) &^ 15 }

// pending is what a key holds while it is initialized or quarantined, or
// while requests wait on it. A bound entry drops it unless requests still
// wait, so a live binding carries none of these bytes. One pending serves
// the entry's successive reservations while it is kept (each resets it);
// a key that has none takes the one that comes in its reservation's
// allocation (Reservation.spare).
type pending[T comparable] struct {
	resv *Reservation[T] // the initializer (stReserved, stDispatching)
	// cur is the dispatch in flight or quarantined (stDispatching,
	// stQuarantined): its guard's attempt, generation and deadline never
	// change, so the pending state refers to them rather than copying them.
	cur      *Dispatch[T]
	deadline int64 // initialization deadline, or the quarantine's (QuarantineTTL)
	// resDeadline is the reservation's own deadline, set when the key is
	// reserved and kept across dispatches: a DefinitelyNotAccepted
	// rollback returns the reservation with it, never a fresh one.
	resDeadline int64
	waiters     *waitQueue[T] // the requests waiting on the key, longest first (nil: none yet)
}

// attempt is the attempt in flight or quarantined.
func (p *pending[T]) attempt() uint64 { return p.cur.attempt }

// g is its target and generation.
func (p *pending[T]) g() *generation[T] { return p.cur.g }

// dispatched is when the attempt was dispatched (its BeginDispatch): a
// quarantine reports it, so a resolver can bound the attempt's age.
func (p *pending[T]) dispatched() int64 { return p.cur.deadline - p.cur.r.c.dispatchTimeout }

// keyed is an entry allocated with room for its key's bytes (B is a byte
// array) just before it, so a lookup finds the key it compares beside the
// entry's other lookup fields, not in a separate allocation; or, for a key
// longer than maxInlineKey, with the string of a private copy (B is string).
type keyed[T comparable, B any] struct {
	buf B
	e   entry[T]
}

// newEntry returns an entry holding a private copy of key: in the entry's
// own allocation for keys up to maxInlineKey bytes, else in a copy of its
// own whose string is in the entry's allocation.
func newEntry[T comparable](key string) *entry[T] {
	switch n := len(key); {
	case n == 0 || n > maxInlineKey: // (empty keys are never linked)
		x := &keyed[T, string]{buf: strings.Clone(key)}
		return &x.e
	case n <= 16:
		return inlineKey[T, [16]byte](key)
	case n <= 32:
		return inlineKey[T, [32]byte](key)
	case n <= 48:
		return inlineKey[T, [48]byte](key)
	default:
		return inlineKey[T, [64]byte](key)
	}
}

func inlineKey[T comparable, B any](key string) *entry[T] {
	x := new(keyed[T, B])
	buf := unsafe.Slice((*byte)(unsafe.Pointer(&x.buf)), unsafe.Sizeof(x.buf))
	// The bytes are never written again, so the string key returns is
	// immutable as Go requires; it keeps the whole allocation alive.
	x.e.klen = uint8(copy(buf, key))
	return &x.e
}

// dropPendingLocked drops the entry's pending state when nothing needs it:
// no request waits.
func (e *entry[T]) dropPendingLocked() {
	if e.p != nil && !e.hasWaitersLocked() {
		e.p = nil
	}
}

// pendingLocked returns the entry's pending state, reset for a new
// reservation (the wait queue stays), using spare if the entry has none.
func (e *entry[T]) pendingLocked(spare *pending[T]) *pending[T] {
	if e.p == nil {
		e.p = spare
		return spare
	}
	*e.p = pending[T]{waiters: e.p.waiters}
	return e.p
}

// waiting is one Acquire waiting on its key, in the key's queue. A key that
// becomes free while requests wait is handed to the longest waiter at once
// (resv), so a newcomer never overtakes a waiter (spec: WaitersServedInOrder).
type waiting[T comparable] struct {
	ch   chan struct{}   // closed to wake the waiter; nil while it is awake
	resv *Reservation[T] // the reservation it was handed, if any
}

// waitQueue is a key's waiters in arrival order.
type waitQueue[T comparable] struct {
	list []*waiting[T]
}

// hasWaitersLocked reports whether anyone waits on e.
func (e *entry[T]) hasWaitersLocked() bool {
	return e.p != nil && e.p.waiters != nil && len(e.p.waiters.list) > 0
}

// headLocked returns the longest waiter, or nil.
func (e *entry[T]) headLocked() *waiting[T] {
	if !e.hasWaitersLocked() {
		return nil
	}
	return e.p.waiters.list[0]
}

// joinLocked queues w last. (Requests wait only on a key being
// initialized, which has its pending state.)
func (e *entry[T]) joinLocked(w *waiting[T]) {
	if e.p.waiters == nil {
		e.p.waiters = &waitQueue[T]{}
	}
	e.p.waiters.list = append(e.p.waiters.list, w)
}

// leaveLocked takes w out of the queue, if it is in it.
func (e *entry[T]) leaveLocked(w *waiting[T]) {
	if w == nil || e.p == nil || e.p.waiters == nil {
		return
	}
	l := e.p.waiters.list
	for i, x := range l {
		if x == w {
			copy(l[i:], l[i+1:])
			l[len(l)-1] = nil
			e.p.waiters.list = l[:len(l)-1]
			if e.st == stBound {
				e.dropPendingLocked() // the last waiter of a bound key left
			}
			return
		}
	}
}

// wake wakes w, if it sleeps.
func (w *waiting[T]) wake() {
	if w.ch != nil {
		close(w.ch)
		w.ch = nil
	}
}

// notifyLocked wakes every waiter: the key changed (it was bound, or
// quarantined, or its dispatch began or rolled back). They stay queued,
// in order, until their Acquire returns.
func (e *entry[T]) notifyLocked() {
	if e.p == nil || e.p.waiters == nil {
		return
	}
	for _, w := range e.p.waiters.list {
		w.wake()
	}
}

// The binding word packs the lease count, the closing and dead flags, and
// the binding's lease cell: a lease taken while the cell is free owns it
// (the cell bit), and is named by the cell epoch, which every such take
// bumps. Most sessions hold one lease at a time, so a hit and its release
// are one compare-and-swap each: the release checks that its lease still
// owns the cell (else the lease was already ended: ErrUsed) and frees the
// cell in the same step as the count. A lease taken while the cell is busy
// (concurrent requests on one session) is made single-use by a pooled slot
// instead.
//
// The epoch also counts the binding's cell hits, and it makes a
// compare-and-swap that expires an idle binding fail if any lease came (and
// went) meanwhile: at zero leases the cell is free, so the next lease bumps
// the epoch.
//
// The epoch has 41 bits and never takes the value 0, which names no cell
// (a slot lease): after 2^41-1 it wraps to 1, and the take that wraps it
// moves the 2^41-1 hits it counted to the coordinator's dead-hit total, so
// Stats never goes backwards. What the wrap leaves: a cell lease value ended
// once and ended again after exactly a multiple of 2^41-1 further cell
// takes on the same binding (25 days of a million hits a second on one
// session) would not be caught as a second end; nor would an expiry that
// read the idle word and then stalled across that many takes and releases
// before its compare-and-swap.
const (
	leaseBits  = 20
	leaseMask  = 1<<leaseBits - 1
	closingBit = 1 << leaseBits
	deadBit    = 1 << (leaseBits + 1)
	cellBit    = 1 << (leaseBits + 2)
	epochShift = leaseBits + 3
	epochUnit  = 1 << epochShift
	epochMax   = 1<<(64-epochShift) - 1 // the largest epoch; the next is 1
)

// MaxLeases is the most concurrent leases one binding holds.
const MaxLeases = leaseMask

// binding is one committed placement (a binding version). Its version and
// generation never change; leases and the idle deadline are atomics. The
// target, its generation and its slot are the generation object's (g),
// which every binding to that target at that generation shares.
type binding[T comparable] struct {
	e        *entry[T]
	version  uint64
	g        *generation[T]
	word     atomic.Uint64 // written by every hit and release: keep these last
	deadline atomic.Int64
}

// c is the binding's coordinator.
func (b *binding[T]) c() *Coordinator[T] { return b.g.c }

func leases(w uint64) uint64 { return w & leaseMask }

// hitsOf is the number of cell hits a binding word records (hits that found
// the cell busy are counted apart, in counters.sharedHits).
func hitsOf(w uint64) int64 { return int64(w >> epochShift) }

// ownsCell reports whether the lease with cell ticket t still owns the cell.
func ownsCell(w, t uint64) bool { return w&cellBit != 0 && w>>epochShift == t }

// stale reports whether the target's generation moved on.
func (b *binding[T]) stale() bool { return b.g.stale() }

// expiredAt reports an idle binding past its deadline (given its word).
func (b *binding[T]) expiredAt(w uint64, now int64) bool {
	return (leases(w) == 0 || mutant("ExpiresLeased")) && b.deadline.Load() <= now
}

// kill marks the binding dead, whatever its leases: every outstanding lease
// is superseded. It reports false if it was already dead.
func (b *binding[T]) kill() bool {
	for {
		w := b.word.Load()
		if w&deadBit != 0 {
			return false
		}
		if b.word.CompareAndSwap(w, w|deadBit) {
			b.died(w)
			return true
		}
	}
}

// killIfExpired marks an idle binding past its deadline dead. It fails if a
// lease is held or any lease changed since it looked.
func (b *binding[T]) killIfExpired(now int64) bool {
	w := b.word.Load()
	if w&deadBit != 0 || !b.expiredAt(w, now) {
		return false
	}
	if !b.word.CompareAndSwap(w, w|deadBit) {
		return false
	}
	b.died(w)
	return true
}

// died accounts for b's end, whose word was w just before its dead bit was
// set (by the caller, which alone sets it): its cell hits join the dead
// total, and it leaves its target's count if it is in it (see
// targetSlot.counted).
func (b *binding[T]) died(w uint64) {
	if h := hitsOf(w); h != 0 { // (a binding never hit through its cell has none)
		b.c().stats.deadHits.Add(h)
	}
	if p := b.g.slot.bound.Load(); p.gen == b.g.gen {
		p.n.Add(-1)
	}
}
