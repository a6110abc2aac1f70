package affinity

import (
	"encoding/binary"
	"sync/atomic"
)

// doorkeeper remembers the sessions whose first turn was routed unpinned
// under table pressure, and where it went, so that their second turn binds
// (near the first's cache). It is a fixed array of buckets of doorWays
// slots indexed by the key's digest; a bucket replaces its oldest slot, so
// a flood of one-off ids overwrites slots but never grows the array and
// never takes a table entry. A session's mark survives about doorWays *
// buckets later first turns: with the default sizing (4 slots per table
// entry) and a table of 65,536, over 260,000 of them, four hours of the
// anchor router's flood of 18 new ids a second.
type doorkeeper struct {
	buckets []doorBucket
	mask    uint64
}

const (
	doorWays      = 4
	doorPerEntry  = 4 // slots per table entry
	doorMinBucket = 16
)

type doorBucket struct {
	slots [doorWays]atomic.Pointer[doorEntry]
	next  atomic.Uint32 // the slot to replace next
}

type doorEntry struct {
	fp     uint64 // the key's fingerprint
	target Target
	has    bool // target was recorded (the first turn dispatched)
}

// newDoorkeeper sizes the array for a table of n entries.
func newDoorkeeper(n int) *doorkeeper {
	size := doorMinBucket
	for size*doorWays < n*doorPerEntry {
		size <<= 1
	}
	return &doorkeeper{buckets: make([]doorBucket, size), mask: uint64(size - 1)}
}

// fingerprint is the first bytes of k's digest: a raw key's hashed form's
// (computed here, only under table pressure, where the doorkeeper is
// read), so a client cannot choose ids whose fingerprints collide, and a
// session's fingerprint is the one it had before keys had a raw form (a
// simulation replays as it did).
func fingerprint(k Key) uint64 {
	h, _ := k.hashed()
	if len(h.k) < 9 {
		return 0
	}
	return binary.LittleEndian.Uint64([]byte(h.k[1:9]))
}

func (d *doorkeeper) bucket(fp uint64) *doorBucket { return &d.buckets[(fp>>8)&d.mask] }

// check reports whether k's first turn was seen (and where it went); if
// not, it remembers k, so its next turn is admitted.
func (d *doorkeeper) check(k Key) (target Target, ok, seen bool) {
	fp := fingerprint(k)
	b := d.bucket(fp)
	for i := range b.slots {
		if e := b.slots[i].Load(); e != nil && e.fp == fp {
			return e.target, e.has, true
		}
	}
	b.slots[b.next.Add(1)%doorWays].Store(&doorEntry{fp: fp})
	return Target{}, false, false
}

// remember records where k's first turn went, in k's slot if it still has
// one, else in place of the bucket's oldest.
func (d *doorkeeper) remember(k Key, t Target) {
	fp := fingerprint(k)
	b := d.bucket(fp)
	e := &doorEntry{fp: fp, target: t, has: true}
	for i := range b.slots {
		if old := b.slots[i].Load(); old != nil && old.fp == fp {
			b.slots[i].Store(e)
			return
		}
	}
	b.slots[b.next.Add(1)%doorWays].Store(e)
}
