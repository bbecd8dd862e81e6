package ratelimit

import (
	"math/rand/v2"
	"unsafe"
)

// lru is a least-recently-used map of uint64 keys to int64 values with a
// fixed capacity whose memory is taken once, when it is made: a node per
// entry in one slice, linked most recent first by index, and an
// open-addressing index (linear probing, deletion by backward shift, so no
// tombstones) at most half full. A new key in a full map reuses the least
// recent key's node, so neither a crowd of new keys nor time makes it
// allocate or grow: 32 bytes a key, all of it from the start. The slots
// are drawn from the key and a random seed of each map, so keys chosen to
// collide (a crowd of crafted user ids) cannot pile onto one probe chain.
// Not safe for concurrent use (each shard of Local locks its own).
type lru struct {
	nodes      []lruNode // nodes[:n] hold entries
	index      []int32   // node index + 1; 0 is an empty slot
	mask       uint64    // len(index) - 1
	seed       uint64    // mixed into every key's slot
	head, tail int32     // most and least recent node; -1 when empty
	n          int32
}

type lruNode struct {
	key        uint64
	val        int64
	prev, next int32 // towards the head, towards the tail; -1 at the ends
}

// newLRU makes a map of capacity entries (at least 1).
func newLRU(capacity int) *lru {
	capacity = max(capacity, 1)
	slots := 2
	for slots < 2*capacity {
		slots <<= 1
	}
	c := &lru{nodes: make([]lruNode, capacity), index: make([]int32, slots), mask: uint64(slots - 1), seed: rand.Uint64(), head: -1, tail: -1}
	// Touch every page now: the bound is paid when the limiter is made,
	// in resident memory too, not page by page as a crowd fills it.
	const page = 4096
	for i := 0; i < len(c.nodes); i += page / int(unsafe.Sizeof(lruNode{})) {
		c.nodes[i].prev = -1
	}
	for i := 0; i < len(c.index); i += page / 4 {
		c.index[i] = 0
	}
	return c
}

// home is key's first slot: mix is a bijection, so a key's slot depends
// on the seed as a whole.
func (c *lru) home(key uint64) uint64 { return mix(key^c.seed) & c.mask }

// find returns key's slot and node, or the empty slot it would take and
// -1.
func (c *lru) find(key uint64) (slot uint64, node int32) {
	for slot = c.home(key); ; slot = (slot + 1) & c.mask {
		e := c.index[slot]
		if e == 0 {
			return slot, -1
		}
		if c.nodes[e-1].key == key {
			return slot, e - 1
		}
	}
}

// Get returns key's value and makes it the most recent.
func (c *lru) Get(key uint64) (int64, bool) {
	_, i := c.find(key)
	if i < 0 {
		return 0, false
	}
	c.toFront(i)
	return c.nodes[i].val, true
}

// Add sets key's value and makes it the most recent; a new key in a full
// map takes the place of the least recent one.
func (c *lru) Add(key uint64, val int64) {
	slot, i := c.find(key)
	if i >= 0 {
		c.nodes[i].val = val
		c.toFront(i)
		return
	}
	if int(c.n) < len(c.nodes) {
		i = c.n
		c.n++
	} else {
		i = c.tail
		old, _ := c.find(c.nodes[i].key)
		c.unlink(i)
		c.remove(old)
		slot, _ = c.find(key) // the shift may have moved key's empty slot
	}
	c.nodes[i] = lruNode{key: key, val: val, prev: -1, next: -1}
	c.index[slot] = i + 1
	c.pushFront(i)
}

// Len is the number of keys held.
func (c *lru) Len() int { return int(c.n) }

// remove empties slot and shifts back the entries after it that may take
// it, so that every entry stays reachable from its home.
func (c *lru) remove(slot uint64) {
	for {
		c.index[slot] = 0
		j := slot
		for {
			j = (j + 1) & c.mask
			e := c.index[j]
			if e == 0 {
				return
			}
			h := c.home(c.nodes[e-1].key)
			// The entry at j stays unless its home lies cyclically
			// outside (slot, j].
			var stays bool
			if slot < j {
				stays = slot < h && h <= j
			} else {
				stays = slot < h || h <= j
			}
			if !stays {
				c.index[slot] = e
				slot = j
				break
			}
		}
	}
}

func (c *lru) toFront(i int32) {
	if c.head == i {
		return
	}
	c.unlink(i)
	c.pushFront(i)
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
