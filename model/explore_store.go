package model

import (
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"hash/maphash"
	"slices"
	"strings"
	"sync"
)

// The explorer's memory holds no pointers the garbage collector must trace:
// state keys live back to back in one byte arena, indexed by id, and the
// set of seen states is an open-addressing table of ids. With Go strings
// and a map[string]int32 the collector scanned millions of keys on every
// cycle, which cost a quarter of the exploration's time.

// shardBits splits the seen set (and a level's new states) into
// 1<<shardBits independent tables, by the top bits of a key's hash, so that
// workers may fill them in parallel.
const shardBits = 8

const numShards = 1 << shardBits

// hashKey is the hash of a state key; its top shardBits bits choose the
// shard, its low 32 bits (the tag) the slot and a quick comparison.
func hashKey(seed maphash.Seed, key string) uint64 { return maphash.String(seed, key) }

func shardOf(h uint64) int { return int(h >> (64 - shardBits)) }

// store is every distinct state found so far, by id (ids are assigned in
// discovery order, as sequential BFS assigns them), with how it was first
// reached: from state parent[id] by the step[id]-th step Steps yields.
type store struct {
	seed   maphash.Seed
	arena  []byte   // keys, back to back
	off    []uint64 // key of id is arena[off[id]:off[id+1]]
	parent []int32
	step   []uint32
	shards [numShards]idTable
}

func newStore() *store {
	st := &store{seed: maphash.MakeSeed(), off: []uint64{0}}
	for i := range st.shards {
		st.shards[i].init(8)
	}
	return st
}

func (st *store) len() int { return len(st.parent) }

// key returns the key of state id, sharing the arena's bytes.
func (st *store) keyBytes(id int32) []byte { return st.arena[st.off[id]:st.off[id+1]] }

// lookup returns the id of the state whose key is key, with hash h.
func (st *store) lookup(h uint64, key string) (int32, bool) {
	t := &st.shards[shardOf(h)]
	tag := uint32(h)
	for i := tag & t.mask; ; i = (i + 1) & t.mask {
		s := t.slots[i]
		if s == 0 {
			return 0, false
		}
		if uint32(s>>32) == tag {
			id := int32(uint32(s) - 1)
			if string(st.keyBytes(id)) == key {
				return id, true
			}
		}
	}
}

// add appends a state to the arrays; the caller inserts it into its shard.
func (st *store) add(key string, parent int32, step uint32) int32 {
	id := int32(len(st.parent))
	st.arena = append(st.arena, key...)
	st.off = append(st.off, uint64(len(st.arena)))
	st.parent = append(st.parent, parent)
	st.step = append(st.step, step)
	return id
}

// idTable is one shard of the seen set: slot = tag<<32 | (id+1), 0 empty.
// A slot's position is its tag's low bits, so growing needs no key.
type idTable struct {
	slots []uint64
	mask  uint32
	n     int
}

func (t *idTable) init(size int) {
	t.slots = make([]uint64, size)
	t.mask = uint32(size - 1)
	t.n = 0
}

// insert adds id under tag; the caller knows the key is not present.
func (t *idTable) insert(tag uint32, id int32) {
	if (t.n+1)*4 > len(t.slots)*3 {
		old := t.slots
		t.init(2 * len(old))
		for _, s := range old {
			if s != 0 {
				t.place(s)
			}
		}
	}
	t.place(uint64(tag)<<32 | uint64(uint32(id)+1))
}

func (t *idTable) place(s uint64) {
	for i := uint32(s>>32) & t.mask; ; i = (i + 1) & t.mask {
		if t.slots[i] == 0 {
			t.slots[i] = s
			t.n++
			return
		}
	}
}

// setHash is StateSetHash of every stored key, computed on the arena: the
// keys sorted (in parallel chunks, then merged), each written with its
// length.
func (st *store) setHash(workers int) string {
	n := st.len()
	ids := make([]int32, n)
	for i := range ids {
		ids[i] = int32(i)
	}
	cmp := func(a, b int32) int { return strings.Compare(string(st.keyBytes(a)), string(st.keyBytes(b))) }
	parts := max(1, min(workers, n/4096))
	bounds := make([]int, parts+1)
	for i := range bounds {
		bounds[i] = i * n / parts
	}
	var wg sync.WaitGroup
	for p := 0; p < parts; p++ {
		wg.Add(1)
		go func(run []int32) {
			defer wg.Done()
			slices.SortFunc(run, cmp)
		}(ids[bounds[p]:bounds[p+1]])
	}
	wg.Wait()
	h := sha256.New()
	var lenBuf [binary.MaxVarintLen64]byte
	write := func(id int32) {
		k := st.keyBytes(id)
		h.Write(lenBuf[:binary.PutUvarint(lenBuf[:], uint64(len(k)))])
		h.Write(k)
	}
	// Merge the sorted runs (few: one per worker).
	heads := make([]int, parts)
	for p := range heads {
		heads[p] = bounds[p]
	}
	for {
		best := -1
		for p := range heads {
			if heads[p] < bounds[p+1] && (best < 0 || cmp(ids[heads[p]], ids[heads[best]]) < 0) {
				best = p
			}
		}
		if best < 0 {
			break
		}
		write(ids[heads[best]])
		heads[best]++
	}
	return hex.EncodeToString(h.Sum(nil))
}
