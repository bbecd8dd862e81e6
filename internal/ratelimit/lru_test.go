package ratelimit

import (
	"math/rand/v2"
	"slices"
	"testing"
	"time"
)

// TestLRUMatchesAModel runs random gets and adds, over few keys (so they
// collide, wrap around the index and evict one another), against a plain
// model of an LRU: every answer, the size and the order of recency agree.
func TestLRUMatchesAModel(t *testing.T) {
	for _, capacity := range []int{1, 2, 7, 64} {
		c := newLRU(capacity)
		var order []uint64 // most recent first
		vals := map[uint64]int64{}
		r := rand.New(rand.NewPCG(1, uint64(capacity)))
		touch := func(k uint64) {
			if i := slices.Index(order, k); i >= 0 {
				order = slices.Delete(order, i, i+1)
			}
			order = slices.Insert(order, 0, k)
		}
		for step := range 20000 {
			k := r.Uint64N(uint64(3*capacity + 2))
			if r.IntN(2) == 0 {
				v, ok := c.Get(k)
				want, wantOK := vals[k]
				if ok != wantOK || v != want {
					t.Fatalf("cap %d step %d: Get(%d) = %d, %v; want %d, %v", capacity, step, k, v, ok, want, wantOK)
				}
				if ok {
					touch(k)
				}
				continue
			}
			v := int64(step)
			if _, ok := vals[k]; !ok && len(order) == capacity {
				oldest := order[len(order)-1]
				order = order[:len(order)-1]
				delete(vals, oldest)
			}
			c.Add(k, v)
			vals[k] = v
			touch(k)
			if c.Len() != len(order) {
				t.Fatalf("cap %d step %d: Len %d, want %d", capacity, step, c.Len(), len(order))
			}
		}
		var got []uint64
		for i := c.head; i >= 0; i = c.nodes[i].next {
			got = append(got, c.nodes[i].key)
		}
		if !slices.Equal(got, order) {
			t.Fatalf("cap %d: recency %v, want %v", capacity, got, order)
		}
	}
}

// TestLocalNewKeysDoNotAllocate: a crowd of new keys into a full
// limiter (every one evicting the least recent) allocates nothing, so the
// limiter's memory is what it took when it was made, however many buyers
// come.
func TestLocalNewKeysDoNotAllocate(t *testing.T) {
	c := &clock{t: time.Unix(1000, 0)}
	l := NewLocal(1, 1, 1<<12, c.now)
	next := uint64(0)
	for range 1 << 13 { // fill it and then some
		l.Allow(next)
		next++
	}
	allocs := testing.AllocsPerRun(10000, func() {
		l.Allow(next)
		next++
	})
	if allocs != 0 {
		t.Fatalf("a new key in a full limiter allocates %.2f times", allocs)
	}
	if n := l.Len(); n != l.Cap() {
		t.Fatalf("holds %d keys, want its bound %d", n, l.Cap())
	}
}

// TestLRUCraftedCollisionsDoNotCarryOver: keys found to share one slot in
// a map (what an attacker would craft to make every lookup walk one long
// probe chain) are spread over the slots of another map, whose seed they
// were not crafted against.
func TestLRUCraftedCollisionsDoNotCarryOver(t *testing.T) {
	a, b := newLRU(4096), newLRU(4096)
	target := a.home(0)
	var crafted []uint64
	for k := uint64(1); len(crafted) < 100; k++ {
		if a.home(k) == target {
			crafted = append(crafted, k)
		}
	}
	slots := map[uint64]int{}
	worst := 0
	for _, k := range crafted {
		slots[b.home(k)]++
		worst = max(worst, slots[b.home(k)])
	}
	if worst > 4 {
		t.Fatalf("%d of 100 keys crafted to collide in one map share a slot in another", worst)
	}
	for _, k := range crafted {
		b.Add(k, 1)
	}
	for _, k := range crafted {
		if _, ok := b.Get(k); !ok {
			t.Fatalf("key %d lost", k)
		}
	}
}
