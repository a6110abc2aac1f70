package placement

import (
	"hash/maphash"
	"math/bits"
	"sync"
	"sync/atomic"
)

// maxBuckets caps the bucket array (8 bytes each) for very large
// MaxEntries; chains then grow longer instead of memory upfront.
const maxBuckets = 1 << 22

// lockStripes is the number of writer locks; a bucket's lock is its index
// modulo the stripes, so all writers of one bucket share a lock.
const lockStripes = 4096

// table maps keys to entries for a bounded coordinator. Reads take no lock:
// a bucket head and each entry's next link are atomic pointers to an
// immutable chain. Writers of a bucket (insert, unlink) serialize on a
// striped lock. Unlinking never touches the removed entry's own next link,
// so a reader standing on it still walks a valid chain; removed entries are
// never linked again, so chains stay acyclic. The garbage collector
// reclaims what readers no longer reach.
type table[T comparable] struct {
	seed    maphash.Seed
	mask    uint32
	buckets []atomic.Pointer[entry[T]]
	locks   []paddedMutex
}

type paddedMutex struct {
	sync.Mutex
	_ [56]byte
}

func newTable[T comparable](maxEntries int) *table[T] {
	n := uint64(64)
	if maxEntries > 64 {
		n = 1 << bits.Len64(uint64(maxEntries-1))
	}
	n = min(n, maxBuckets)
	t := &table[T]{seed: maphash.MakeSeed(), mask: uint32(n - 1), buckets: make([]atomic.Pointer[entry[T]], n)}
	t.locks = make([]paddedMutex, min(n, lockStripes))
	return t
}

// hash is key's 32-bit hash: the bucket index (at most maxBuckets) and a
// cheap filter before comparing keys.
func (t *table[T]) hash(key string) uint32 { return uint32(maphash.String(t.seed, key)) }

func (t *table[T]) lock(h uint32) *sync.Mutex {
	return &t.locks[(h&t.mask)%uint32(len(t.locks))].Mutex
}

// load returns key's entry, if linked.
func (t *table[T]) load(key string) (*entry[T], bool) {
	e := t.loadHashed(t.hash(key), key)
	return e, e != nil
}

// loadHashed returns key's entry, if linked, given its hash h.
func (t *table[T]) loadHashed(h uint32, key string) *entry[T] {
	for e := t.buckets[h&t.mask].Load(); e != nil; e = e.next.Load() {
		if e.matches(h, key) {
			return e
		}
	}
	return nil
}

// matches reports whether e holds key, whose hash is h.
func (e *entry[T]) matches(h uint32, key string) bool {
	// An inline key's length is compared first, before its bytes are.
	return e.hash == h && (e.klen == 0 || int(e.klen) == len(key)) && keyEqual(e.key(), key)
}

// loadOrStore returns key's entry, linking fresh (built lazily) if absent.
func (t *table[T]) loadOrStore(key string, fresh func(h uint32) *entry[T]) *entry[T] {
	h := t.hash(key)
	if e := t.loadHashed(h, key); e != nil {
		return e
	}
	return t.storeHashed(h, key, fresh)
}

// storeHashed is loadOrStore for a caller that has just looked key up
// (hash h) and found no entry: it looks again only under the bucket's lock.
func (t *table[T]) storeHashed(h uint32, key string, fresh func(h uint32) *entry[T]) *entry[T] {
	b := &t.buckets[h&t.mask]
	mu := t.lock(h)
	mu.Lock()
	defer mu.Unlock()
	for e := b.Load(); e != nil; e = e.next.Load() {
		if e.matches(h, key) {
			return e
		}
	}
	e := fresh(h)
	e.next.Store(b.Load())
	b.Store(e)
	return e
}

// unlink removes e from its chain, if linked.
func (t *table[T]) unlink(e *entry[T]) {
	b := &t.buckets[e.hash&t.mask]
	mu := t.lock(e.hash)
	mu.Lock()
	defer mu.Unlock()
	if b.Load() == e {
		b.Store(e.next.Load())
		return
	}
	for p := b.Load(); p != nil; p = p.next.Load() {
		if p.next.Load() == e {
			p.next.Store(e.next.Load())
			return
		}
	}
}

// each calls f on every linked entry until f returns false.
func (t *table[T]) each(f func(*entry[T]) bool) {
	for i := range t.buckets {
		for e := t.buckets[i].Load(); e != nil; e = e.next.Load() {
			if !f(e) {
				return
			}
		}
	}
}
