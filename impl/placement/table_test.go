package placement

import (
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"unsafe"
)

// TestTable_ChainsUnderConcurrentUnlink: 500 keys in 64 buckets (chains of
// about 8); every other key is unlinked (heads, middles, tails) while
// readers walk the chains: a key that stays linked is always found,
// loadOrStore never links a key twice, and afterwards exactly the unlinked
// keys are gone. (TestTable_ReaderOnUnlinkedEntryStillReachesTheRest checks
// the reader-on-a-removed-entry case deterministically.)
func TestTable_ChainsUnderConcurrentUnlink(t *testing.T) {
	tb := newTable[target](1)
	if len(tb.buckets) != 64 {
		t.Fatalf("%d buckets, want 64", len(tb.buckets))
	}
	const n = 500
	keys := make([]string, n)
	ents := make([]*entry[target], n)
	for i := range keys {
		keys[i] = fmt.Sprintf("key-%d", i)
		k := keys[i]
		ents[i] = tb.loadOrStore(k, func(h uint32) *entry[target] { e := newEntry[target](k); e.hash = h; return e })
		if again := tb.loadOrStore(k, func(uint32) *entry[target] { panic("linked twice") }); again != ents[i] {
			t.Fatal("loadOrStore returned another entry for a linked key")
		}
	}
	var stop atomic.Bool
	var wg sync.WaitGroup
	for r := 0; r < 3; r++ {
		wg.Add(1)
		go func(r int) {
			defer wg.Done()
			for i := r; !stop.Load(); i = (i + 7) % n {
				e, ok := tb.load(keys[i])
				if i%2 == 1 && (!ok || e != ents[i]) { // odd keys stay linked
					t.Errorf("linked key %s not found while neighbours were unlinked", keys[i])
					return
				}
				if ok && e != ents[i] {
					t.Errorf("key %s found as another entry", keys[i])
					return
				}
			}
		}(r)
	}
	for i := 0; i < n; i += 2 { // every other key, so heads, middles and tails go
		tb.unlink(ents[i])
	}
	stop.Store(true)
	wg.Wait()
	count := 0
	tb.each(func(*entry[target]) bool { count++; return true })
	if count != n/2 {
		t.Fatalf("%d entries linked, want %d", count, n/2)
	}
	for i := range keys {
		if _, ok := tb.load(keys[i]); ok == (i%2 == 0) {
			t.Fatalf("key %s: found=%v after unlinking even keys", keys[i], ok)
		}
	}
}

// TestTable_ReaderOnUnlinkedEntryStillReachesTheRest: a reader standing on
// an entry while it is unlinked (from the head or the middle of a chain)
// still reaches every entry after it, deterministically.
func TestTable_ReaderOnUnlinkedEntryStillReachesTheRest(t *testing.T) {
	tb := newTable[target](1)
	chain := map[uint32][]*entry[target]{}
	for i := 0; len(chain) == 0 || maxLen(chain) < 4; i++ {
		k := fmt.Sprintf("k%d", i)
		e := tb.loadOrStore(k, func(h uint32) *entry[target] { e := newEntry[target](k); e.hash = h; return e })
		chain[e.hash&tb.mask] = append(chain[e.hash&tb.mask], e)
	}
	for b, es := range chain {
		if len(es) < 4 {
			continue
		}
		// Chains are newest first: es[3] is the head, es[0] the tail.
		head := tb.buckets[b].Load()
		mid := head.next.Load()
		after := []*entry[target]{}
		for e := mid.next.Load(); e != nil; e = e.next.Load() {
			after = append(after, e)
		}
		for _, standing := range []*entry[target]{mid, head} { // a reader stands here
			tb.unlink(standing)
			got := []*entry[target]{}
			for e := standing.next.Load(); e != nil; e = e.next.Load() {
				if e != mid { // the head's successor may be the already unlinked mid
					got = append(got, e)
				}
			}
			if len(got) != len(after) {
				t.Fatalf("a reader on an unlinked entry reaches %d of the %d entries after it", len(got), len(after))
			}
		}
		return
	}
}

func maxLen(m map[uint32][]*entry[target]) int {
	n := 0
	for _, v := range m {
		n = max(n, len(v))
	}
	return n
}

// BenchmarkTableLookup compares the table's lookup with Go's built-in map on
// the same 1,024 short keys (in cache), looked up with fresh copies in a
// fixed pseudo-random order: the lookup's share of the hot path's cost.
func BenchmarkTableLookup(b *testing.B) {
	const n = 1024
	tb := newTable[target](n + 16) // as the hot-path benchmarks size it
	m := make(map[string]*entry[target], n)
	keys := make([]string, n)
	for i := range keys {
		k := fmt.Sprintf("session-%d", i)
		e := tb.loadOrStore(k, func(h uint32) *entry[target] {
			e := newEntry[target](k)
			e.hash = h
			return e
		})
		m[strings.Clone(k)] = e
		keys[i] = strings.Clone(k)
	}
	order := make([]int, 1<<12)
	for i := range order {
		order[i] = (i * 7919) % n
	}
	var sink *entry[target]
	b.Run("table", func(b *testing.B) {
		for i := 0; i < b.N; i++ {
			sink, _ = tb.load(keys[order[i&(len(order)-1)]])
		}
	})
	b.Run("gomap", func(b *testing.B) {
		for i := 0; i < b.N; i++ {
			sink = m[keys[order[i&(len(order)-1)]]]
		}
	})
	_ = sink
}

// TestKeyEqual: keyEqual agrees with == for every length up to 70 bytes, on
// equal keys, on keys that differ in any one byte, and on a key against its
// prefixes.
func TestKeyEqual(t *testing.T) {
	for n := 0; n <= 70; n++ {
		a := make([]byte, n)
		for i := range a {
			a[i] = byte('a' + (i*7+n)%26)
		}
		if !keyEqual(string(a), string(append([]byte(nil), a...))) {
			t.Fatalf("len %d: equal keys differ", n)
		}
		for p := 0; p < n; p++ {
			b := append([]byte(nil), a...)
			b[p] ^= 0x20
			if keyEqual(string(a), string(b)) {
				t.Fatalf("len %d: keys differing at byte %d compare equal", n, p)
			}
		}
		for m := 0; m < n; m++ {
			if keyEqual(string(a), string(a[:m])) || keyEqual(string(a[:m]), string(a)) {
				t.Fatalf("len %d: equal to its %d-byte prefix", n, m)
			}
		}
	}
}

// hit is tryHit for tests: the lease, and whether it was taken.
func (c *Coordinator[T]) hit(key string) (Lease[T], bool) {
	l, _, _ := c.tryHit(key)
	return l, l.b != nil
}

// TestEntryLayout checks the layout entry.go describes, for a 16-byte
// target (a worker id and rank): a bound session with a key of up to 16
// bytes is one 96-byte allocation (and a new session's Reservation one of
// 128); the key's bytes (or a long key's
// string) end where the entry begins; and what a lookup that finds the key
// reads (the key, hash, klen and bound) never shares a cache line with the
// binding's word and deadline, which hits and releases write, for every
// inline key size (allocations of 96 bytes start at multiples of 32
// bytes, of 112 and 144 at multiples of 16, of 128 at multiples of 64).
func TestEntryLayout(t *testing.T) {
	type w16 struct {
		ID   uint64
		Rank int32
	}
	var e entry[w16]
	if s := unsafe.Sizeof(e); s != 80 {
		t.Errorf("entry is %d bytes, want 80", s)
	}
	if s := unsafe.Sizeof(keyed[w16, [16]byte]{}); s != 96 {
		t.Errorf("an entry with a 16-byte key is %d bytes, want 96", s)
	}
	// A new session's other allocation: its Reservation, with its first
	// dispatch's guard and the key's pending state.
	if s := unsafe.Sizeof(Reservation[w16]{}); s != 128 {
		t.Errorf("a Reservation is %d bytes, want 128", s)
	}
	word := unsafe.Offsetof(e.first) + unsafe.Offsetof(e.first.word)
	if end := unsafe.Offsetof(e.first) + unsafe.Sizeof(e.first); unsafe.Offsetof(e.first.deadline) != unsafe.Offsetof(e.first.word)+8 || end != unsafe.Sizeof(e) {
		t.Errorf("the binding's word and deadline are not the entry's last 16 bytes")
	}
	lookupEnd := unsafe.Offsetof(e.bound) + unsafe.Sizeof(e.bound) // key, hash, klen, bound
	check := func(buf, size, align uintptr) {
		if buf+unsafe.Sizeof(e) != size {
			t.Errorf("a %d-byte key buffer: allocation %d bytes, want %d", buf, buf+unsafe.Sizeof(e), size)
		}
		for start := uintptr(0); start < 64; start += align {
			lastRead := (start + buf + lookupEnd - 1) / 64
			firstWritten := (start + buf + word) / 64
			if lastRead >= firstWritten {
				t.Errorf("a %d-byte key buffer at offset %d of a line: lookups read line %d, hits write line %d", buf, start, lastRead, firstWritten)
			}
		}
	}
	check(unsafe.Sizeof(keyed[w16, [16]byte]{}.buf), 96, 32)
	check(unsafe.Sizeof(keyed[w16, [32]byte]{}.buf), 112, 16)
	check(unsafe.Sizeof(keyed[w16, [48]byte]{}.buf), 128, 64)
	check(unsafe.Sizeof(keyed[w16, [64]byte]{}.buf), 144, 16)
	for _, n := range []int{1, 9, 16, 17, 32, 33, 48, 49, 64, 65, 300} {
		k := strings.Repeat("k", n)
		if got := newEntry[w16](k).key(); got != k {
			t.Errorf("a %d-byte key reads back as %q", n, got)
		}
	}
}
