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
// Layout: a lookup reads the key's bytes (allocated just before the entry,
// see keyed) and the fields up to bound; a hit then writes the first
// binding's word and deadline, which sit at the end, more than a cache line
// past the last field a lookup reads. So lookups of a key on one core do not
// miss on lines another core's hits and releases keep writing.
type entry[T comparable] struct {
	hash      uint32                     // the table's hash of key
	st        entryState                 // guarded by mu, like the fields below it
	removed   bool                       // detached from the table; callers retry
	firstUsed bool                       // first has been bound
	key       string                     // a private copy of the key
	next      atomic.Pointer[entry[T]]   // the table's chain (immutable once unlinked)
	bound     atomic.Pointer[binding[T]] // the binding while stBound, else nil

	mu      sync.Mutex
	p       *pending[T]   // while reserved, dispatching or quarantined; nil otherwise
	waiters *waitQueue[T] // the requests waiting on the key, longest first (nil: none yet)

	first binding[T] // the first binding (see above); keep it last
}

// pending is what a key holds while it is initialized or quarantined. A
// bound entry drops it, so a live binding carries none of these bytes.
type pending[T comparable] struct {
	resv     *Reservation[T] // the initializer (stReserved, stDispatching)
	attempt  uint64          // the attempt in flight or quarantined
	target   T               // its target
	slot     *targetSlot[T]  // its target's catalog slot
	tgen     uint64          // its target's generation
	deadline int64           // initialization deadline, or the quarantine's (QuarantineTTL)
	// dispatched is when the attempt was dispatched (its BeginDispatch):
	// a quarantine reports it, so a resolver can bound the attempt's age.
	dispatched int64
	// resDeadline is the reservation's own deadline, set when the key is
	// reserved and kept across dispatches: a DefinitelyNotAccepted
	// rollback returns the reservation with it, never a fresh one.
	resDeadline int64
}

// keyed is an entry allocated with room for its key's bytes (B is a byte
// array) just before it, so a lookup finds the key it compares beside the
// entry's other lookup fields, not in a separate allocation.
type keyed[T comparable, B any] struct {
	buf B
	e   entry[T]
}

// newEntry returns an entry holding a private copy of key: in the entry's
// own allocation for keys up to 64 bytes, else in a copy of its own.
func newEntry[T comparable](key string) *entry[T] {
	switch n := len(key); {
	case n <= 16:
		return inlineKey[T, [16]byte](key)
	case n <= 32:
		return inlineKey[T, [32]byte](key)
	case n <= 48:
		return inlineKey[T, [48]byte](key)
	case n <= 64:
		return inlineKey[T, [64]byte](key)
	}
	return &entry[T]{key: strings.Clone(key)}
}

func inlineKey[T comparable, B any](key string) *entry[T] {
	x := new(keyed[T, B])
	buf := unsafe.Slice((*byte)(unsafe.Pointer(&x.buf)), unsafe.Sizeof(x.buf))
	n := copy(buf, key)
	// The bytes are never written again, so the string is immutable as Go
	// requires; it keeps the whole allocation (entry and key) alive.
	x.e.key = unsafe.String(&buf[0], n)
	return &x.e
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
func (e *entry[T]) hasWaitersLocked() bool { return e.waiters != nil && len(e.waiters.list) > 0 }

// headLocked returns the longest waiter, or nil.
func (e *entry[T]) headLocked() *waiting[T] {
	if !e.hasWaitersLocked() {
		return nil
	}
	return e.waiters.list[0]
}

// joinLocked queues w last.
func (e *entry[T]) joinLocked(w *waiting[T]) {
	if e.waiters == nil {
		e.waiters = &waitQueue[T]{}
	}
	e.waiters.list = append(e.waiters.list, w)
}

// leaveLocked takes w out of the queue, if it is in it.
func (e *entry[T]) leaveLocked(w *waiting[T]) {
	if w == nil || e.waiters == nil {
		return
	}
	l := e.waiters.list
	for i, x := range l {
		if x == w {
			copy(l[i:], l[i+1:])
			l[len(l)-1] = nil
			e.waiters.list = l[:len(l)-1]
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
	if e.waiters == nil {
		return
	}
	for _, w := range e.waiters.list {
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

// binding is one committed placement (a binding version). Target, generation
// and version never change; leases and the idle deadline are atomics.
type binding[T comparable] struct {
	e        *entry[T]
	version  uint64
	target   T
	slot     *targetSlot[T]
	gen      uint64
	word     atomic.Uint64 // written by every hit and release: keep these last
	deadline atomic.Int64
}

// c is the binding's coordinator.
func (b *binding[T]) c() *Coordinator[T] { return b.slot.c }

func leases(w uint64) uint64 { return w & leaseMask }

// hitsOf is the number of cell hits a binding word records (hits that found
// the cell busy are counted apart, in counters.sharedHits).
func hitsOf(w uint64) int64 { return int64(w >> epochShift) }

// ownsCell reports whether the lease with cell ticket t still owns the cell.
func ownsCell(w, t uint64) bool { return w&cellBit != 0 && w>>epochShift == t }

// stale reports whether the target's generation moved on.
func (b *binding[T]) stale() bool { return b.slot.gen.Load() != b.gen }

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
	b.c().stats.deadHits.Add(hitsOf(w))
	if p := b.slot.bound.Load(); p.gen == b.gen {
		p.n.Add(-1)
	}
}
