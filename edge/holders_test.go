package edge

import (
	"strconv"
	"sync"
	"testing"
	"time"

	"seckill/engine"
	"seckill/stock"
)

// ledgerEngine is a fake engine with a ledger: one ticket per user, the
// stock counted down, DUPLICATE (naming the ticket) for a holder.
type ledgerEngine struct {
	mu      sync.Mutex
	held    map[int64]string
	remain  int64
	nextRn  int64
	perUser map[int64]int // calls per user
}

func (l *ledgerEngine) occupy(r *engine.Request) (engine.Ticket, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.perUser[r.UserID]++
	if rn, ok := l.held[r.UserID]; ok {
		return engine.Ticket{RequestNo: rn, Remaining: l.remain}, stock.ErrDuplicate
	}
	l.nextRn++
	l.remain--
	rn := strconv.FormatInt(l.nextRn, 10)
	l.held[r.UserID] = rn
	return engine.Ticket{RequestNo: rn, Remaining: l.remain}, nil
}

// Twenty accounts that hold tickets hammering their SKU cannot keep fresh
// buyers at 429 while units remain: the edge remembers them as holders,
// and their retries pass the admission gate without spending it (the
// engine still answers each: DUPLICATE). (Before: each retry spent the
// gate's capacity, so the fresh buyers behind them were refused.)
func TestHoldersHammeringTheirSKUDoNotSpendTheGate(t *testing.T) {
	for _, tc := range []struct {
		name  string
		ttl   time.Duration
		fresh int // fresh buyers of 10 who must get a ticket
	}{
		{"with the holders cache", 5 * time.Second, 10},
		{"without it (holders_ttl 0) the gate is spent", 0, -1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := newEdge(t, withConfig(func(c *Config) {
				// 1,000 units left: 20 admissions a second, a burst of 20.
				c.Rate.GateK, c.Rate.GateFloor = 0.02, 1
				c.HoldersTTL = tc.ttl
			}))
			l := &ledgerEngine{held: map[int64]string{}, remain: 1000, perUser: map[int64]int{}}
			e.eng.answer(l.occupy)
			const holders = 20
			for u := 1; u <= holders; u++ {
				mustStatus(t, e.order(strconv.Itoa(u), `{"skuId":1001}`), 200, "QUEUING")
			}
			time.Sleep(1100 * time.Millisecond) // the gate's burst refills
			for range 10 {
				for u := 1; u <= holders; u++ {
					r := e.order(strconv.Itoa(u), `{"skuId":1001}`)
					if r.status == 409 {
						if r.body["requestNo"] != l.held[int64(u)] {
							t.Fatalf("holder %d answered DUPLICATE naming %v, holds %s", u, r.body["requestNo"], l.held[int64(u)])
						}
						continue
					}
					if tc.ttl > 0 || r.status != 429 {
						t.Fatalf("holder %d retrying: %d %s", u, r.status, r.raw)
					}
				}
			}
			got := 0
			for u := 1000; u < 1010; u++ {
				if r := e.order(strconv.Itoa(u), `{"skuId":1001}`); r.status == 200 {
					got++
				} else if r.status != 429 {
					t.Fatalf("fresh buyer %d: %d %s", u, r.status, r.raw)
				}
			}
			if tc.fresh >= 0 {
				if got != tc.fresh {
					t.Fatalf("%d of 10 fresh buyers got a ticket while %d units remained, want %d", got, l.remain+int64(got), tc.fresh)
				}
				l.mu.Lock()
				defer l.mu.Unlock()
				for u := 1; u <= holders; u++ {
					if n := l.perUser[int64(u)]; n != 11 {
						t.Fatalf("holder %d reached the engine %d times, want 11: the engine answers every attempt", u, n)
					}
				}
				return
			}
			if got > 5 {
				t.Fatalf("without the holders cache %d of 10 fresh buyers got through: the test does not exercise the gate", got)
			}
		})
	}
}

// A holder is remembered for its activity, SKU and user only; another SKU
// or user is not answered from it, and the entry expires.
func TestHoldersAreExactAndExpire(t *testing.T) {
	var h holders
	h.open(100*time.Millisecond, 1024)
	now := time.Now().UnixNano()
	h.hold(7, 1001, 42, "rn-42", now)
	if rn, ok := h.held(7, 1001, 42, now); !ok || rn != "rn-42" {
		t.Fatalf("held: %q %v", rn, ok)
	}
	for _, k := range [][3]int64{{7, 1002, 42}, {7, 1001, 43}, {8, 1001, 42}} {
		if _, ok := h.held(k[0], k[1], k[2], now); ok {
			t.Fatalf("%v answered from another buyer's entry", k)
		}
	}
	if rn, ok := h.held(7, 1001, 42, now+int64(99*time.Millisecond)); !ok || rn != "rn-42" {
		t.Fatalf("held within the TTL: %q %v", rn, ok)
	}
	if _, ok := h.held(7, 1001, 42, now+int64(100*time.Millisecond)); ok {
		t.Fatal("the entry outlived its TTL")
	}
	if n := h.entries(now + int64(100*time.Millisecond)); n != 0 {
		t.Fatalf("%d entries counted past the TTL", n)
	}
	var off holders
	off.open(0, 0)
	off.hold(7, 1001, 42, "rn", now)
	if _, ok := off.held(7, 1001, 42, now); ok {
		t.Fatal("holders_ttl 0 remembered a holder")
	}
	if off.slots != nil {
		t.Fatal("holders_ttl 0 allocated a table")
	}
}

// The table is holders_max rounded up to a power of two.
func TestHoldersTableSize(t *testing.T) {
	for _, tc := range [][2]int{{1024, 1024}, {1025, 2048}, {1 << 20, 1 << 20}, {3, 4}, {1, 2}} {
		var h holders
		h.open(time.Second, tc[0])
		if len(h.slots) != tc[1] {
			t.Errorf("holders_max %d: %d slots, want %d", tc[0], len(h.slots), tc[1])
		}
	}
}

// In a table of one set every key collides: a buyer, SKU or activity
// other than the one an entry names is never answered from it, a third
// buyer evicts the entry that expires first, and a buyer held again
// replaces their own entry rather than taking the other way.
func TestHoldersCollisionsAreMissesAndOverwritesEvict(t *testing.T) {
	var h holders
	h.open(time.Second, 2)
	if h.sets != 0 {
		t.Fatalf("a table of 2 slots has set mask %d, want one set", h.sets)
	}
	now := int64(1_000_000_000)
	h.hold(7, 1001, 1, "rn-1", now)
	h.hold(7, 1001, 2, "rn-2", now+1)
	for _, k := range [][3]int64{{7, 1001, 3}, {7, 1002, 1}, {8, 1001, 1}, {7, 1002, 2}, {8, 1001, 2}, {1001, 7, 1}} {
		if rn, ok := h.held(k[0], k[1], k[2], now+2); ok {
			t.Fatalf("%v answered %q from a colliding entry", k, rn)
		}
	}
	for u, want := range map[int64]string{1: "rn-1", 2: "rn-2"} {
		if rn, ok := h.held(7, 1001, u, now+2); !ok || rn != want {
			t.Fatalf("buyer %d: %q %v, want %q", u, rn, ok, want)
		}
	}
	// Held again: buyer 1's own entry is replaced (and now expires last).
	h.hold(7, 1001, 1, "rn-1b", now+3)
	if rn, ok := h.held(7, 1001, 1, now+4); !ok || rn != "rn-1b" {
		t.Fatalf("buyer 1 held again: %q %v", rn, ok)
	}
	if rn, ok := h.held(7, 1001, 2, now+4); !ok || rn != "rn-2" {
		t.Fatalf("buyer 2 lost to buyer 1's second hold: %q %v", rn, ok)
	}
	// A third buyer overwrites the entry that expires first: buyer 2's.
	h.hold(7, 1001, 3, "rn-3", now+5)
	if _, ok := h.held(7, 1001, 2, now+6); ok {
		t.Fatal("buyer 2 survived the overwrite of the set's oldest entry")
	}
	for u, want := range map[int64]string{1: "rn-1b", 3: "rn-3"} {
		if rn, ok := h.held(7, 1001, u, now+6); !ok || rn != want {
			t.Fatalf("buyer %d after the eviction: %q %v, want %q", u, rn, ok, want)
		}
	}
	// An expired slot is taken before a live one.
	late := now + 3 + int64(time.Second) // buyer 1's entry has expired, buyer 3's not
	h.hold(7, 1001, 4, "rn-4", late)
	if rn, ok := h.held(7, 1001, 3, late); !ok || rn != "rn-3" {
		t.Fatalf("buyer 3 evicted while an expired slot was free: %q %v", rn, ok)
	}
	if n := h.entries(late); n != 2 {
		t.Fatalf("%d entries, want 2", n)
	}
}

// Holds and lookups from many goroutines over a small table (collisions,
// overwrites) never answer another buyer's ticket. Run under -race.
func TestHoldersConcurrent(t *testing.T) {
	var h holders
	h.open(time.Second, 64)
	now := time.Now().UnixNano()
	var wg sync.WaitGroup
	for g := range 4 {
		wg.Go(func() {
			for i := range 5000 {
				u := int64((i*7 + g) % 300)
				rn := strconv.FormatInt(u, 10)
				if got, ok := h.held(7, 1001, u, now+int64(i)); ok && got != rn {
					t.Errorf("buyer %d answered %q", u, got)
					return
				}
				h.hold(7, 1001, u, rn, now+int64(i))
			}
		})
	}
	wg.Wait()
}

// held, the request path's lookup, allocates nothing, hit or miss.
func TestHoldersHeldDoesNotAllocate(t *testing.T) {
	var h holders
	h.open(time.Second, 1024)
	now := time.Now().UnixNano()
	h.hold(7, 1001, 42, "rn-42", now)
	if n := testing.AllocsPerRun(100, func() {
		h.held(7, 1001, 42, now)
		h.held(7, 1001, 43, now)
	}); n != 0 {
		t.Fatalf("held allocates %v times a call", n)
	}
}

// BenchmarkHolders is the accept path's use: an attempt looks its buyer
// up (held), and the engine's answer records them (hold), over 64Ki
// buyers.
func BenchmarkHolders(b *testing.B) {
	var h holders
	h.open(5*time.Second, 1<<20)
	rn := "1234567890123"
	now := time.Now().UnixNano()
	var u int64
	for b.Loop() {
		u = (u + 1) & (1<<16 - 1)
		h.held(7, 1001, u, now)
		h.hold(7, 1001, u, rn, now)
	}
}

// One buyer stored in both ways (two holds racing for a set) reads as the
// later ticket, whichever way holds it.
func TestHoldersBuyerInBothWaysReadsTheLater(t *testing.T) {
	var h holders
	h.open(time.Second, 2)
	now := int64(1_000_000_000)
	for _, order := range [][2]int{{0, 1}, {1, 0}} {
		old := &holderEntry{activity: 7, sku: 1001, user: 1, expires: now + 10, requestNo: "old"}
		later := &holderEntry{activity: 7, sku: 1001, user: 1, expires: now + 20, requestNo: "later"}
		h.slots[order[0]].Store(old)
		h.slots[order[1]].Store(later)
		if rn, ok := h.held(7, 1001, 1, now); !ok || rn != "later" {
			t.Fatalf("old in way %d, later in way %d: %q %v, want the later ticket", order[0], order[1], rn, ok)
		}
		if rn, ok := h.held(7, 1001, 1, now+15); !ok || rn != "later" {
			t.Fatalf("after the old one lapsed: %q %v", rn, ok)
		}
	}
}

// sweep clears lapsed entries and keeps live ones.
func TestHoldersSweepClearsLapsed(t *testing.T) {
	var h holders
	h.open(time.Second, 1024)
	now := int64(1_000_000_000)
	for u := int64(1); u <= 200; u++ {
		h.hold(7, 1001, u, "rn-"+strconv.FormatInt(u, 10), now+u*int64(time.Millisecond))
	}
	live := h.entries(now + int64(time.Second))
	// At now+1s+100ms the first 100 have lapsed.
	at := now + int64(time.Second) + 100*int64(time.Millisecond)
	h.sweep(at)
	stored := 0
	for i := range h.slots {
		if e := h.slots[i].Load(); e != nil {
			stored++
			if e.expires <= at {
				t.Fatalf("sweep left buyer %d, lapsed at %d, in the table at %d", e.user, e.expires, at)
			}
		}
	}
	if want := h.entries(at); stored != want || want == 0 || want >= live {
		t.Fatalf("after the sweep %d entries stored, %d live (of %d before), want only the live ones", stored, want, live)
	}
	if rn, ok := h.held(7, 1001, 200, at); !ok || rn != "rn-200" {
		t.Fatalf("a live buyer lost to the sweep: %q %v", rn, ok)
	}
}
