package model

import (
	"bytes"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"fmt"
	"hash/maphash"
	"slices"
	"sync"
)

// The explorer's memory holds no pointers the garbage collector must trace:
// state keys live back to back in one byte arena, and the set of seen
// states is an open-addressing table of arena offsets. With Go strings and
// a map[string]int32 the collector scanned millions of keys on every cycle,
// which cost a quarter of the exploration's time.

// shardBits splits the seen set (and a level's new states) into
// 1<<shardBits independent tables, by the top bits of a key's hash, so that
// workers may fill them in parallel.
const shardBits = 8

const numShards = 1 << shardBits

// A slot of a table is tag<<offsetBits | (offset+1), 0 when empty. The tag
// is the key hash's low tagBits bits; its low bits also place the slot, so
// a table grows without reading keys. offsetBits bounds the arena (64 GiB).
const (
	offsetBits = 36
	tagBits    = 64 - offsetBits
	offsetMask = 1<<offsetBits - 1
)

// An arena entry is a header, the state's id (4 bytes) and the key's length
// (2 bytes), then the key. The arena is a list of blocks, so that it grows
// without copying; an entry's offset is its block's index << blockBits |
// its position in the block.
const (
	entryHeader = 6
	blockBits   = 22
	blockSize   = 1 << blockBits
)

func shardOf(h uint64) int { return int(h >> (64 - shardBits)) }

func tagOf(h uint64) uint32 { return uint32(h) & (1<<tagBits - 1) }

// store is every distinct state found so far, by id (ids are assigned in
// discovery order, as sequential BFS assigns them), with how it was first
// reached: from state parent[id] by the step[id]-th step Steps yields.
type store struct {
	seed   maphash.Seed
	arena  [][]byte // entries, back to back in blocks of blockSize bytes
	off    []uint64 // entry of state id
	parent []int32
	step   []uint32
	shards [numShards]table
}

func newStore() *store {
	st := &store{seed: maphash.MakeSeed()}
	for i := range st.shards {
		st.shards[i].init(16)
	}
	return st
}

func (st *store) len() int { return len(st.parent) }

func (st *store) hash(key []byte) uint64 { return maphash.Bytes(st.seed, key) }

// entryKey returns the key of the arena entry at off.
func (st *store) entryKey(off uint64) []byte {
	b := st.arena[off>>blockBits][off&(blockSize-1):]
	n := binary.LittleEndian.Uint16(b[4:])
	return b[entryHeader : entryHeader+int(n)]
}

// keyBytes returns the key of state id, sharing the arena's bytes.
func (st *store) keyBytes(id int32) []byte { return st.entryKey(st.off[id]) }

// lookup returns the arena offset of the entry whose key is key, with hash
// h; the entry's id is st.idAt(offset).
func (st *store) lookup(h uint64, key []byte) (uint64, bool) {
	t := &st.shards[shardOf(h)]
	tag := tagOf(h)
	for i := tag & t.mask; ; i = (i + 1) & t.mask {
		s := t.slots[i]
		if s == 0 {
			return 0, false
		}
		if uint32(s>>offsetBits) == tag {
			off := s&offsetMask - 1
			if string(st.entryKey(off)) == string(key) {
				return off, true
			}
		}
	}
}

// idAt returns the id of the arena entry at off.
func (st *store) idAt(off uint64) int32 {
	return int32(binary.LittleEndian.Uint32(st.arena[off>>blockBits][off&(blockSize-1):]))
}

// add appends a state to the arena and the arrays and returns its id and
// entry's offset; the caller inserts the offset into the key's shard.
func (st *store) add(key []byte, parent int32, step uint32) (int32, uint64) {
	id := int32(len(st.parent))
	size := entryHeader + len(key)
	last := len(st.arena) - 1
	if last < 0 || len(st.arena[last])+size > blockSize {
		if len(key) > 1<<16-1 || uint64(last+2)<<blockBits >= offsetMask {
			panic(fmt.Sprintf("model: explorer store full (%d blocks, key of %d bytes)", last+1, len(key)))
		}
		st.arena = append(st.arena, make([]byte, 0, blockSize))
		last++
	}
	b := st.arena[last]
	off := uint64(last)<<blockBits | uint64(len(b))
	b = binary.LittleEndian.AppendUint32(b, uint32(id))
	b = binary.LittleEndian.AppendUint16(b, uint16(len(key)))
	st.arena[last] = append(b, key...)
	st.off = append(st.off, off)
	st.parent = append(st.parent, parent)
	st.step = append(st.step, step)
	return id, off
}

// table is one shard of the seen set.
type table struct {
	slots []uint64
	mask  uint32
	n     int
}

func (t *table) init(size int) {
	t.slots = make([]uint64, size)
	t.mask = uint32(size - 1)
	t.n = 0
}

// insert adds the entry at off under tag; the caller knows its key is not
// present.
func (t *table) insert(tag uint32, off uint64) {
	if (t.n+1)*4 > len(t.slots)*3 {
		old := t.slots
		t.init(2 * len(old))
		for _, s := range old {
			if s != 0 {
				t.place(s)
			}
		}
	}
	t.place(uint64(tag)<<offsetBits | (off + 1))
}

func (t *table) place(s uint64) {
	for i := uint32(s>>offsetBits) & t.mask; ; i = (i + 1) & t.mask {
		if t.slots[i] == 0 {
			t.slots[i] = s
			t.n++
			return
		}
	}
}

// setHash is StateSetHash of every stored key, computed on the arena: the
// keys sorted (in parallel runs, then merged), each written with its
// length. Keys are sorted by their first 16 bytes, held with the id so that
// most comparisons read no arena, then by the rest.
func (st *store) setHash(workers int) string {
	n := st.len()
	type sortKey struct {
		p0, p1 uint64 // the key's first 16 bytes, big-endian, zero-padded
		id     int32
	}
	keys := make([]sortKey, n)
	cmp := func(a, b sortKey) int {
		switch {
		case a.p0 != b.p0:
			if a.p0 < b.p0 {
				return -1
			}
			return 1
		case a.p1 != b.p1:
			if a.p1 < b.p1 {
				return -1
			}
			return 1
		}
		return bytes.Compare(st.keyBytes(a.id), st.keyBytes(b.id))
	}
	parts := max(1, min(workers, n/4096))
	bounds := make([]int, parts+1)
	for i := range bounds {
		bounds[i] = i * n / parts
	}
	var wg sync.WaitGroup
	for p := 0; p < parts; p++ {
		wg.Add(1)
		go func(lo, hi int) {
			defer wg.Done()
			for id := lo; id < hi; id++ {
				var pre [16]byte
				copy(pre[:], st.keyBytes(int32(id)))
				keys[id] = sortKey{binary.BigEndian.Uint64(pre[:8]), binary.BigEndian.Uint64(pre[8:]), int32(id)}
			}
			slices.SortFunc(keys[lo:hi], cmp)
		}(bounds[p], bounds[p+1])
	}
	wg.Wait()
	h := sha256.New()
	var lenBuf [binary.MaxVarintLen64]byte
	// Merge the sorted runs (few: one per worker).
	heads := make([]int, parts)
	for p := range heads {
		heads[p] = bounds[p]
	}
	for {
		best := -1
		for p := range heads {
			if heads[p] < bounds[p+1] && (best < 0 || cmp(keys[heads[p]], keys[heads[best]]) < 0) {
				best = p
			}
		}
		if best < 0 {
			break
		}
		k := st.keyBytes(keys[heads[best]].id)
		h.Write(lenBuf[:binary.PutUvarint(lenBuf[:], uint64(len(k)))])
		h.Write(k)
		heads[best]++
	}
	return hex.EncodeToString(h.Sum(nil))
}

// appendKey appends s's canonical encoding (State.Key) to b without
// allocating: the explorer encodes every successor, and a fresh buffer and
// string per state were a tenth of its time. It is the one encoder of
// states; keyDecoder is its inverse.
func appendKey(b []byte, s *State) []byte {
	b = binary.AppendVarint(b, s.Now)
	b = binary.AppendVarint(b, int64(s.NextAttempt))
	b = binary.AppendUvarint(b, uint64(len(s.Gen)))
	for _, g := range s.Gen {
		b = binary.AppendVarint(b, int64(g))
	}
	b = binary.AppendUvarint(b, uint64(len(s.Table)))
	for i := range s.Table {
		e := &s.Table[i]
		c := byte(0)
		if e.Closing {
			c = 1
		}
		b = append(b, byte(e.St), c)
		b = binary.AppendVarint(b, int64(e.Holder))
		b = binary.AppendVarint(b, int64(e.Attempt))
		b = binary.AppendVarint(b, int64(e.Target))
		b = binary.AppendVarint(b, int64(e.TGen))
		b = binary.AppendVarint(b, e.Deadline)
		b = binary.AppendVarint(b, e.RDeadline)
		b = binary.AppendVarint(b, int64(e.Leases))
	}
	for _, t := range s.Since {
		b = binary.AppendVarint(b, t)
	}
	b = binary.AppendUvarint(b, uint64(len(s.Req)))
	for _, q := range s.Req {
		b = append(b, byte(q.Pc))
		b = binary.AppendVarint(b, int64(q.Key))
		b = binary.AppendVarint(b, int64(q.Attempt))
	}
	for _, qs := range [2][][]int{s.Waitq, s.Arrivals} {
		for k := range s.Table {
			var q []int
			if k < len(qs) {
				q = qs[k]
			}
			b = binary.AppendUvarint(b, uint64(len(q)))
			for _, r := range q {
				b = binary.AppendVarint(b, int64(r))
			}
		}
	}
	return b
}

// keyDecoder decodes keys appendKey wrote into one State, reusing its
// memory: the explorer decodes every state it expands, and fresh slices per
// state were most of that. What it returns is valid until the next decode
// (DecodeKey clones it), and holds nil for an empty queue.
type keyDecoder struct {
	s      State
	b      []byte
	err    error
	queues []int // backing store of s.Waitq's and s.Arrivals's queues
}

func (d *keyDecoder) vi() int64 {
	v, n := binary.Varint(d.b)
	if n <= 0 {
		d.err = fmt.Errorf("model: corrupt state key")
		return 0
	}
	d.b = d.b[n:]
	return v
}

func (d *keyDecoder) uv() int {
	v, n := binary.Uvarint(d.b)
	if n <= 0 || v > 1<<20 {
		d.err = fmt.Errorf("model: corrupt state key")
		return 0
	}
	d.b = d.b[n:]
	return int(v)
}

func (d *keyDecoder) by() byte {
	if len(d.b) == 0 {
		d.err = fmt.Errorf("model: corrupt state key")
		return 0
	}
	c := d.b[0]
	d.b = d.b[1:]
	return c
}

func resize[T any](s []T, n int) []T {
	if cap(s) < n {
		return make([]T, n)
	}
	return s[:n]
}

// queuesInto decodes n queues into qs's memory and d.queues.
func (d *keyDecoder) queuesInto(qs [][]int, n int) [][]int {
	qs = resize(qs, n)
	for k := range qs {
		qs[k] = nil
		if m := d.uv(); m > 0 {
			at := len(d.queues)
			for range m {
				d.queues = append(d.queues, int(d.vi()))
			}
			// A queue keeps the memory it was decoded into, should a
			// later one move d.queues.
			qs[k] = d.queues[at : at+m : at+m]
		}
	}
	return qs
}

// decode returns the state whose key is key.
func (d *keyDecoder) decode(key []byte) (*State, error) {
	d.b, d.err = key, nil
	s := &d.s
	s.Now = d.vi()
	s.NextAttempt = int(d.vi())
	s.Gen = resize(s.Gen, d.uv())
	for i := range s.Gen {
		s.Gen[i] = int(d.vi())
	}
	s.Table = resize(s.Table, d.uv())
	for i := range s.Table {
		e := &s.Table[i]
		e.St = EntryState(d.by())
		e.Closing = d.by() == 1
		e.Holder, e.Attempt, e.Target, e.TGen = int(d.vi()), int(d.vi()), int(d.vi()), int(d.vi())
		e.Deadline = d.vi()
		e.RDeadline = d.vi()
		e.Leases = int(d.vi())
	}
	s.Since = resize(s.Since, len(s.Table))
	for i := range s.Since {
		s.Since[i] = d.vi()
	}
	s.Req = resize(s.Req, d.uv())
	for i := range s.Req {
		q := &s.Req[i]
		q.Pc = Pc(d.by())
		q.Key, q.Attempt = int(d.vi()), int(d.vi())
	}
	d.queues = d.queues[:0]
	s.Waitq = d.queuesInto(s.Waitq, len(s.Table))
	s.Arrivals = d.queuesInto(s.Arrivals, len(s.Table))
	if d.err == nil && len(d.b) != 0 {
		d.err = fmt.Errorf("model: trailing bytes in state key")
	}
	return s, d.err
}
