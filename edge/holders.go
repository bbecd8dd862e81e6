package edge

import (
	"hash/maphash"
	"math/bits"
	"sync/atomic"
	"time"
)

// holders remembers, for edge.holders_ttl, the buyers the engine has told
// hold a ticket for a SKU (QUEUING or DUPLICATE), so that their next
// attempts pass the SKU's shared admission gate without spending it: a few
// accounts hammering a SKU they hold cannot take the gate capacity fresh
// buyers need. On the direct path the engine still answers each attempt
// (DUPLICATE, or a ticket again once the old one was released); what bounds
// a holder's attempts is the per-user limit and the SKU's in-flight bound.
// In queue mode the edge answers a holder 409 DUPLICATE from the table
// (queue.go: a place in line could only end DUPLICATE), naming the ticket
// the engine last told it of.
//
// It is a fixed table of edge.holders_max slots (rounded up to a power of
// two), allocated once: 8 bytes of pointer a slot, plus one entry for each
// buyer held. The table is 2-way set-associative: a (activity, sku, user)
// key hashes to a set of two adjacent slots (one cache line). A lookup is
// two atomic loads and comparisons: no lock, no allocation. A hold
// allocates one entry and stores it in the set: over the buyer's own
// entry, else an empty or expired slot, else over the entry that expires
// first. That overwrite is the eviction: a buyer evicted is only a buyer
// whose next attempt spends the gate again, as with the table off. Two
// ways rather than one because a direct-mapped table loses buyers to
// birthday collisions long before it is full (1,100 buyers in 2^20 slots
// collide with a chance of 44%; two ways make it about one in a thousand);
// even so a table full of live buyers keeps only ~3 in 4 of them, so size
// it at about twice the buyers expected to hold a ticket within the TTL.
// Two holds racing for one set may overwrite each other's entry, or store
// one buyer in both ways; held then reads the later of the two. Either is
// a stale or lost entry, never another buyer's, since an entry carries its
// whole key. Lapsed entries are cleared by sweep (every holdersSweepEvery),
// so the memory they hold goes back after a sale.
//
// Expiry is judged by the time the caller passes: the request's arrival
// as the order path reads it (serverClock.at, unix nanoseconds), so the
// table reads no clock. Safe for concurrent use.
type holders struct {
	slots []atomic.Pointer[holderEntry] // nil: off (holders_ttl 0)
	sets  uint64                        // len(slots)/2 - 1: a key's set mask
	ttl   int64                         // nanoseconds
	seed  maphash.Seed
}

// holderEntry is one buyer held; it carries its whole key, so a hash
// collision is a miss, never another buyer's ticket. Immutable once
// stored.
type holderEntry struct {
	activity, sku, user int64
	expires             int64 // unix nanoseconds, in the caller's time
	requestNo           string
}

// holderWays is the table's associativity.
const holderWays = 2

// open sizes the table for maxEntries buyers; a ttl of 0 leaves it off.
func (h *holders) open(ttl time.Duration, maxEntries int) {
	h.ttl, h.seed = int64(ttl), maphash.MakeSeed()
	if ttl <= 0 {
		return
	}
	n := max(maxEntries, holderWays)
	n = 1 << bits.Len(uint(n-1)) // the next power of two
	h.slots = make([]atomic.Pointer[holderEntry], n)
	h.sets = uint64(n/holderWays - 1)
}

func (h *holders) key(activity, sku, user int64) uint64 {
	var b [24]byte
	for i, v := range [3]int64{activity, sku, user} {
		for j := range 8 {
			b[i*8+j] = byte(v >> (8 * j))
		}
	}
	return maphash.Bytes(h.seed, b[:])
}

// set is the key's two slots.
func (h *holders) set(activity, sku, user int64) []atomic.Pointer[holderEntry] {
	i := (h.key(activity, sku, user) & h.sets) * holderWays
	return h.slots[i : i+holderWays : i+holderWays]
}

func (e *holderEntry) is(activity, sku, user int64) bool {
	return e != nil && e.user == user && e.sku == sku && e.activity == activity
}

// held is the requestNo of the ticket user holds for sku in activity, as
// the engine last said within the TTL of now (unix nanoseconds).
func (h *holders) held(activity, sku, user, now int64) (string, bool) {
	if h.slots == nil {
		return "", false
	}
	set := h.set(activity, sku, user)
	a, b := set[0].Load(), set[1].Load()
	okA := a.is(activity, sku, user) && now < a.expires
	okB := b.is(activity, sku, user) && now < b.expires
	switch {
	case okA && (!okB || a.expires >= b.expires):
		return a.requestNo, true
	case okB:
		return b.requestNo, true
	}
	return "", false
}

// hold records that user holds requestNo for sku in activity, from now
// (unix nanoseconds) for the TTL.
func (h *holders) hold(activity, sku, user int64, requestNo string, now int64) {
	if h.slots == nil || requestNo == "" {
		return
	}
	set := h.set(activity, sku, user)
	a, b := set[0].Load(), set[1].Load()
	w := 0
	switch {
	case a.is(activity, sku, user):
	case b.is(activity, sku, user):
		w = 1
	case a == nil || a.expires <= now:
	case b == nil || b.expires <= now || b.expires < a.expires:
		w = 1
	}
	set[w].Store(&holderEntry{activity: activity, sku: sku, user: user, expires: now + h.ttl, requestNo: requestNo})
}

// holdersSweepEvery is how often the edge clears lapsed holders.
const holdersSweepEvery = 30 * time.Second

// sweep clears the entries lapsed at now (a slot re-filled meanwhile is
// left alone), reading every slot: ~12 ms per million slots, off the
// request path.
func (h *holders) sweep(now int64) {
	for i := range h.slots {
		if e := h.slots[i].Load(); e != nil && e.expires <= now {
			h.slots[i].CompareAndSwap(e, nil)
		}
	}
}

// entries counts the buyers held at now, reading every slot: for the
// size gauges (a scrape), not for the request path.
func (h *holders) entries(now int64) int {
	n := 0
	for i := range h.slots {
		if e := h.slots[i].Load(); e != nil && now < e.expires {
			n++
		}
	}
	return n
}
