package placement

import (
	"sync"
	"sync/atomic"
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
type entry[T comparable] struct {
	owner *Coordinator[T]
	key   string
	hash  uint64                     // the table's hash of key
	next  atomic.Pointer[entry[T]]   // the table's chain (immutable once unlinked)
	bound atomic.Pointer[binding[T]] // the binding while stBound, else nil

	mu      sync.Mutex
	st      entryState
	removed bool          // detached from the table; callers retry
	p       *pending[T]   // while reserved, dispatching or quarantined; nil otherwise
	changed chan struct{} // closed at the next change, when someone waits
}

// pending is what a key holds while it is initialized or quarantined. A
// bound entry drops it, so a live binding carries none of these bytes.
type pending[T comparable] struct {
	resv     *Reservation[T] // the initializer (stReserved, stDispatching)
	attempt  uint64          // the attempt in flight or quarantined
	target   T               // its target
	slot     *targetSlot     // its target's catalog slot
	tgen     uint64          // its target's generation
	deadline int64           // initialization deadline (stReserved, stDispatching)
}

func (e *entry[T]) c() *Coordinator[T] { return e.owner }

// notifyLocked wakes every waiter: the key changed.
func (e *entry[T]) notifyLocked() {
	if e.changed != nil && !(mutant("LosesWakeup") && e.st == stAbsent) {
		close(e.changed)
		e.changed = nil
	}
}

func (e *entry[T]) waitChanLocked() chan struct{} {
	if e.changed == nil {
		e.changed = make(chan struct{})
	}
	return e.changed
}

// The binding word packs the lease count, the closing and dead flags and a
// sequence number bumped by every hit: it counts the binding's hits, and a
// compare-and-swap that expires an idle binding fails if any lease came
// (and went) meanwhile.
const (
	leaseMask  = 1<<24 - 1
	closingBit = 1 << 24
	deadBit    = 1 << 25
	seqUnit    = 1 << 26
)

// MaxLeases is the most concurrent leases one binding holds.
const MaxLeases = leaseMask

// binding is one committed placement (a binding version). Target, generation
// and version never change; leases and the idle deadline are atomics.
type binding[T comparable] struct {
	e        *entry[T]
	target   T
	slot     *targetSlot
	gen      uint64
	version  uint64
	word     atomic.Uint64
	deadline atomic.Int64
}

func leases(w uint64) uint64 { return w & leaseMask }

// hitsOf is the number of hits a binding word records.
func hitsOf(w uint64) int64 { return int64(w / seqUnit) }

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
			b.e.c().stats.deadHits.Add(hitsOf(w))
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
	b.e.c().stats.deadHits.Add(hitsOf(w))
	return true
}
