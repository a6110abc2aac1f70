package affinity

import (
	"encoding/binary"
	"sync/atomic"
)

// doorkeeper remembers the sessions whose first turn was routed unpinned
// under table pressure, and where it went, so that their second turn binds
// (near the first's cache). It is a fixed array of slots indexed by the
// key's digest: a slot holds the latest session that hashed to it, so a
// flood of one-off ids overwrites slots but never takes a table entry.
type doorkeeper struct {
	slots []atomic.Pointer[doorEntry]
	mask  uint64
}

type doorEntry struct {
	fp     uint64 // the key's first digest bytes
	target Target
	has    bool // target was recorded (the first turn dispatched)
}

// newDoorkeeper sizes the array to the power of two at or above n.
func newDoorkeeper(n int) *doorkeeper {
	size := 1
	for size < n {
		size <<= 1
	}
	return &doorkeeper{slots: make([]atomic.Pointer[doorEntry], size), mask: uint64(size - 1)}
}

func fingerprint(k Key) uint64 { return binary.LittleEndian.Uint64([]byte(k.k[1:9])) }

// check reports whether k's first turn was seen (and where it went); if
// not, it remembers k, so its next turn is admitted.
func (d *doorkeeper) check(k Key) (target Target, ok, seen bool) {
	fp := fingerprint(k)
	s := &d.slots[fp&d.mask]
	if e := s.Load(); e != nil && e.fp == fp {
		return e.target, e.has, true
	}
	s.Store(&doorEntry{fp: fp})
	return Target{}, false, false
}

// remember records where k's first turn went.
func (d *doorkeeper) remember(k Key, t Target) {
	fp := fingerprint(k)
	d.slots[fp&d.mask].Store(&doorEntry{fp: fp, target: t, has: true})
}
