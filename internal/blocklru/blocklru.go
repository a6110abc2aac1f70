// Package blocklru is a set of block hashes of bounded capacity with
// least-recently-used eviction: a worker's prefix cache as the replay
// simulates it, and the picker's index of what it sent where. Nodes live in
// one slice, linked by index, so it allocates little. It is not safe for
// concurrent use.
package blocklru

// LRU is a prefix cache of bounded capacity over block hashes, evicting
// the least recently used block. Nodes live in one slice, linked by index,
// so a simulation of many requests allocates little.
type LRU struct {
	cap   int
	index map[uint64]int32
	nodes []node
	head  int32 // most recently used; -1 when empty
	tail  int32 // least recently used
}

// node is one block in the list; -1 links mean none.
type node struct {
	hash       uint64
	prev, next int32
}

// New returns an empty cache holding at most capacity blocks
// (capacity >= 1).
func New(capacity int) *LRU {
	return &LRU{cap: capacity, index: make(map[uint64]int32, min(capacity, 1<<10)), head: -1, tail: -1}
}

// Len returns the number of cached blocks.
func (c *LRU) Len() int { return len(c.index) }

// Contains reports whether h is cached, without touching its recency.
func (c *LRU) Contains(h uint64) bool {
	_, ok := c.index[h]
	return ok
}

// Match returns how many leading blocks of hashes are cached: the prefix
// a request reuses. It does not touch recency.
func (c *LRU) Match(hashes []uint64) int {
	for i, h := range hashes {
		if _, ok := c.index[h]; !ok {
			return i
		}
	}
	return len(hashes)
}

// Insert makes hashes the most recently used blocks, touching them last
// to first so that a prompt's leading blocks end the most recent (as vLLM
// frees a request's blocks tail first): under pressure a long prompt loses
// its tail before its prefix. It adds the blocks not cached and evicts the
// least recently used beyond capacity.
func (c *LRU) Insert(hashes []uint64) {
	for k := len(hashes) - 1; k >= 0; k-- {
		h := hashes[k]
		if i, ok := c.index[h]; ok {
			c.moveFront(i)
			continue
		}
		var i int32
		if len(c.index) >= c.cap {
			i = c.tail
			c.unlink(i)
			delete(c.index, c.nodes[i].hash)
		} else {
			c.nodes = append(c.nodes, node{})
			i = int32(len(c.nodes) - 1)
		}
		c.nodes[i].hash = h
		c.index[h] = i
		c.pushFront(i)
	}
}

// InsertAfter puts hashes just behind anchor in recency, in order (the
// first right after anchor): a request's output blocks, which vLLM frees
// before the prompt's, so a prompt's prefix outlives its output. It does
// nothing when anchor is not cached (the prefix is broken there: blocks
// after it could never be hit) and stops when the only block left to
// evict is the one it is inserting behind.
func (c *LRU) InsertAfter(anchor uint64, hashes []uint64) {
	a, ok := c.index[anchor]
	if !ok {
		return
	}
	for _, h := range hashes {
		if i, ok := c.index[h]; ok {
			if i != a {
				c.unlink(i)
				c.linkAfter(a, i)
				a = i
			}
			continue
		}
		var i int32
		if len(c.index) >= c.cap {
			i = c.tail
			if i == a {
				return
			}
			c.unlink(i)
			delete(c.index, c.nodes[i].hash)
		} else {
			c.nodes = append(c.nodes, node{})
			i = int32(len(c.nodes) - 1)
		}
		c.nodes[i].hash = h
		c.index[h] = i
		c.linkAfter(a, i)
		a = i
	}
}

func (c *LRU) linkAfter(a, i int32) {
	n := &c.nodes[i]
	n.prev, n.next = a, c.nodes[a].next
	if n.next >= 0 {
		c.nodes[n.next].prev = i
	} else {
		c.tail = i
	}
	c.nodes[a].next = i
}

// Clear empties the cache (a worker's restart).
func (c *LRU) Clear() {
	clear(c.index)
	c.nodes = c.nodes[:0]
	c.head, c.tail = -1, -1
}

func (c *LRU) unlink(i int32) {
	n := &c.nodes[i]
	if n.prev >= 0 {
		c.nodes[n.prev].next = n.next
	} else {
		c.head = n.next
	}
	if n.next >= 0 {
		c.nodes[n.next].prev = n.prev
	} else {
		c.tail = n.prev
	}
	n.prev, n.next = -1, -1
}

func (c *LRU) pushFront(i int32) {
	n := &c.nodes[i]
	n.prev, n.next = -1, c.head
	if c.head >= 0 {
		c.nodes[c.head].prev = i
	}
	c.head = i
	if c.tail < 0 {
		c.tail = i
	}
}

func (c *LRU) moveFront(i int32) {
	if c.head == i {
		return
	}
	c.unlink(i)
	c.pushFront(i)
}

// Order returns the cached hashes from most to least recently used.
func (c *LRU) Order() []uint64 {
	var out []uint64
	for i := c.head; i >= 0; i = c.nodes[i].next {
		out = append(out, c.nodes[i].hash)
	}
	return out
}
