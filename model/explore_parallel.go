package model

import (
	"slices"
	"sync"
	"sync/atomic"
)

// A level expanded in parallel goes in three phases.
//
//  1. Expand: workers take chunks of the level's states and generate their
//     steps. The seen set is read-only meanwhile; a successor not in it is
//     a candidate, kept once in the level's set (sharded, one lock per
//     shard) with the least (parent, step index) that reached it: the
//     discovery sequential BFS makes first. The worker that adds a
//     candidate checks the invariants on it; a failed action property or
//     invariant ends the phase, and the level is then expanded again by
//     seqLevel, which reports what sequential BFS reports.
//  2. Number: the candidates, sorted by that discovery, get the next ids
//     (sequential BFS numbers new states in discovery order).
//  3. Commit: each shard of the level's set is added to the same shard of
//     the seen set, in parallel.

// pendingFlag marks an edge to a state of the level's set, not yet numbered.
const pendingFlag = 1 << 63

// levelSet is the states a level's expansion found that the seen set lacks.
type levelSet struct {
	shards [numShards]levelShard
}

// levelShard is one shard of a levelSet: an open-addressing table of
// indexes into pend (slot = tag<<32 | (index+1)), whose keys are in arena.
type levelShard struct {
	mu    sync.Mutex
	slots []uint64
	mask  uint32
	pend  []pending
	arena []byte
	_     [64]byte // keep shards' locks on separate cache lines
}

// pending is a state of the level's set.
type pending struct {
	order uint64 // parent<<32 | step index of its first discovery
	off   uint32 // key is arena[off:off+n]
	n     uint32
	tag   uint32
	id    int32  // once numbered
	goff  uint64 // once numbered: its entry in the store's arena
	act   Action
}

func (ls *levelShard) reset() {
	if ls.slots == nil {
		ls.slots = make([]uint64, 64)
		ls.mask = 63
	} else {
		clear(ls.slots)
	}
	ls.pend = ls.pend[:0]
	ls.arena = ls.arena[:0]
}

func (ls *levelShard) key(p *pending) []byte { return ls.arena[p.off : p.off+p.n] }

// upsert adds key (hash h) first discovered at order by a step of act, or
// lowers an existing entry's order to it; it returns the entry's index and
// whether it was added.
func (ls *levelShard) upsert(h uint64, key []byte, order uint64, act Action) (uint32, bool) {
	if (len(ls.pend)+1)*4 > len(ls.slots)*3 {
		ls.slots = make([]uint64, 2*len(ls.slots))
		ls.mask = uint32(len(ls.slots) - 1)
		for i := range ls.pend {
			ls.place(ls.pend[i].tag, uint32(i))
		}
	}
	tag := tagOf(h)
	for i := tag & ls.mask; ; i = (i + 1) & ls.mask {
		s := ls.slots[i]
		if s == 0 {
			idx := uint32(len(ls.pend))
			ls.pend = append(ls.pend, pending{order: order, off: uint32(len(ls.arena)), n: uint32(len(key)), tag: tag, act: act})
			ls.arena = append(ls.arena, key...)
			ls.slots[i] = uint64(tag)<<32 | uint64(idx+1)
			return idx, true
		}
		if uint32(s>>32) == tag {
			idx := uint32(s) - 1
			p := &ls.pend[idx]
			if string(ls.key(p)) == string(key) {
				if order < p.order {
					p.order, p.act = order, act
				}
				return idx, false
			}
		}
	}
}

func (ls *levelShard) place(tag, idx uint32) {
	for i := tag & ls.mask; ; i = (i + 1) & ls.mask {
		if ls.slots[i] == 0 {
			ls.slots[i] = uint64(tag)<<32 | uint64(idx+1)
			return
		}
	}
}

// edgeRef is an edge found during expansion: to a state id, or (with
// pendingFlag) to shard<<32 | index of the level's set.
type edgeRef struct {
	to   uint64
	act  Action
	r, k int16
}

// levelWorker is one worker's share of a level's expansion. Workers sit
// side by side in a slice and update their counters on every step: the
// padding keeps them off each other's cache lines.
type levelWorker struct {
	_         [64]byte
	generated int64
	coverage  [numActions]int64
	err       error
	refs      []edgeRef
	dec       keyDecoder
	buf, prev []byte // keys of the current and the previous step's successors
	_         [64]byte
}

// parallelLevel expands states lo..hi-1 (at depth depth) with x.workers
// workers; see the phases above.
func (x *explorer) parallelLevel(lo, hi int32, depth int) (bool, error) {
	m, st, opts := x.m, x.st, &x.opts
	if x.lvl == nil {
		x.lvl = &levelSet{}
	}
	lvl := x.lvl
	for i := range lvl.shards {
		lvl.shards[i].reset()
	}
	var edgesOf [][]edgeRef
	if x.keepGraph {
		edgesOf = make([][]edgeRef, hi-lo)
	}
	chunk := int32(max(1, min(512, int(hi-lo)/(x.workers*16))))
	var next atomic.Int32
	next.Store(lo)
	var failed atomic.Bool // a property failed, or an error
	workers := make([]levelWorker, x.workers)
	expand := func(w *levelWorker, cur int32) bool {
		key := st.keyBytes(cur)
		s, err := w.dec.decode(key)
		if err != nil {
			w.err = err
			return false
		}
		ok := true
		j := uint32(0)
		w.refs = w.refs[:0]
		havePrev := false
		var prevTo uint64
		m.Steps(s, func(l Label, t *State) {
			if !ok {
				return
			}
			order := uint64(cur)<<32 | uint64(j)
			j++
			w.generated++
			w.coverage[l.Act]++
			for _, p := range opts.Actions {
				if !p.Holds(m, s, l, t) {
					ok = false
					return
				}
			}
			w.buf = appendKey(w.buf[:0], t)
			// As in seqLevel: stuttering steps, and repeats of the previous
			// step's successor (whose entry, if new, has an earlier order).
			var to uint64
			switch {
			case string(w.buf) == string(key):
				return
			case havePrev && string(w.buf) == string(w.prev):
				to = prevTo
			default:
				h := st.hash(w.buf)
				if off, seen := st.lookup(h, w.buf); seen {
					to = uint64(st.idAt(off))
					break
				}
				sh := shardOf(h)
				ls := &lvl.shards[sh]
				ls.mu.Lock()
				idx, added := ls.upsert(h, w.buf, order, l.Act)
				ls.mu.Unlock()
				if added {
					for _, inv := range opts.Invariants {
						if !inv.Holds(m, t) {
							ok = false
							return
						}
					}
				}
				to = pendingFlag | uint64(sh)<<32 | uint64(idx)
			}
			w.buf, w.prev, prevTo, havePrev = w.prev, w.buf, to, true
			if x.keepGraph {
				w.refs = append(w.refs, edgeRef{to: to, act: l.Act, r: int16(l.R), k: int16(l.K)})
			}
		})
		if ok && x.keepGraph {
			edgesOf[cur-lo] = slices.Clone(w.refs)
		}
		return ok
	}
	var wg sync.WaitGroup
	for i := range workers {
		wg.Add(1)
		go func(w *levelWorker) {
			defer wg.Done()
			for !failed.Load() {
				c := next.Add(chunk) - chunk
				if c >= hi {
					return
				}
				for cur := c; cur < min(c+chunk, hi); cur++ {
					if failed.Load() || !expand(w, cur) {
						failed.Store(true)
						return
					}
				}
			}
		}(&workers[i])
	}
	wg.Wait()
	for i := range workers {
		if err := workers[i].err; err != nil {
			return false, err
		}
	}
	if failed.Load() {
		return x.seqLevel(lo, hi, depth)
	}

	rep := x.rep
	for i := range workers {
		rep.Generated += workers[i].generated
		for a, n := range workers[i].coverage {
			rep.Coverage[a] += n
		}
	}
	type ref struct {
		order uint64
		shard uint32
		idx   uint32
	}
	var found []ref
	for sh := range lvl.shards {
		for i, p := range lvl.shards[sh].pend {
			found = append(found, ref{p.order, uint32(sh), uint32(i)})
		}
	}
	if opts.MaxStates > 0 && st.len()+len(found) > opts.MaxStates {
		return false, errTooMany(opts.MaxStates)
	}
	slices.SortFunc(found, func(a, b ref) int {
		switch {
		case a.order < b.order:
			return -1
		case a.order > b.order:
			return 1
		}
		return 0
	})
	for _, f := range found {
		ls := &lvl.shards[f.shard]
		p := &ls.pend[f.idx]
		p.id, p.goff = st.add(ls.key(p), int32(p.order>>32), uint32(p.order))
		rep.NewStates[p.act]++
	}
	if len(found) > 0 {
		rep.Depth = max(rep.Depth, depth+1)
	}
	x.parallelShards(func(sh int) {
		t := &st.shards[sh]
		for _, p := range lvl.shards[sh].pend {
			t.insert(p.tag, p.goff)
		}
	})
	if x.keepGraph {
		for range found {
			x.edges = append(x.edges, nil)
		}
		for i, refs := range edgesOf {
			if len(refs) == 0 {
				continue
			}
			es := make([]edge, len(refs))
			for j, r := range refs {
				to := int32(r.to)
				if r.to&pendingFlag != 0 {
					to = lvl.shards[(r.to&^pendingFlag)>>32].pend[uint32(r.to)].id
				}
				es[j] = edge{to: to, act: r.act, r: r.r, k: r.k}
			}
			x.edges[lo+int32(i)] = es
		}
	}
	return false, nil
}

// parallelShards calls f for every shard, on x.workers goroutines.
func (x *explorer) parallelShards(f func(shard int)) {
	var next atomic.Int32
	x.parallel(x.workers, func(int) {
		for sh := int(next.Add(1) - 1); sh < numShards; sh = int(next.Add(1) - 1) {
			f(sh)
		}
	})
}
