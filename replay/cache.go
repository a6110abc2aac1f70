package replay

// lru is a prefix cache of bounded capacity over block hashes, evicting
// the least recently used block. Nodes live in one slice, linked by index,
// so a simulation of many requests allocates little.
type lru struct {
	cap   int
	index map[uint64]int32
	nodes []lruNode
	head  int32 // most recently used; -1 when empty
	tail  int32 // least recently used
}

type lruNode struct {
	hash       uint64
	prev, next int32
}

// newLRU returns an empty cache holding at most capacity blocks
// (capacity >= 1).
func newLRU(capacity int) *lru {
	return &lru{cap: capacity, index: make(map[uint64]int32, min(capacity, 1<<16)), head: -1, tail: -1}
}

// Len returns the number of cached blocks.
func (c *lru) Len() int { return len(c.index) }

// Contains reports whether h is cached, without touching its recency.
func (c *lru) Contains(h uint64) bool {
	_, ok := c.index[h]
	return ok
}

// Match returns how many leading blocks of hashes are cached: the prefix
// a request reuses. It does not touch recency.
func (c *lru) Match(hashes []uint64) int {
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
func (c *lru) Insert(hashes []uint64) {
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
			c.nodes = append(c.nodes, lruNode{})
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
func (c *lru) InsertAfter(anchor uint64, hashes []uint64) {
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
			c.nodes = append(c.nodes, lruNode{})
			i = int32(len(c.nodes) - 1)
		}
		c.nodes[i].hash = h
		c.index[h] = i
		c.linkAfter(a, i)
		a = i
	}
}

func (c *lru) linkAfter(a, i int32) {
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
func (c *lru) Clear() {
	clear(c.index)
	c.nodes = c.nodes[:0]
	c.head, c.tail = -1, -1
}

func (c *lru) unlink(i int32) {
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

func (c *lru) pushFront(i int32) {
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

func (c *lru) moveFront(i int32) {
	if c.head == i {
		return
	}
	c.unlink(i)
	c.pushFront(i)
}

// order returns the cached hashes from most to least recently used (for
// tests).
func (c *lru) order() []uint64 {
	var out []uint64
	for i := c.head; i >= 0; i = c.nodes[i].next {
		out = append(out, c.nodes[i].hash)
	}
	return out
}
