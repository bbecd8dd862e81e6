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
	if err := h.open(100*time.Millisecond, 1024); err != nil {
		t.Fatal(err)
	}
	defer h.close()
	h.hold(7, 1001, 42, "rn-42")
	h.cache.Wait()
	if rn, ok := h.held(7, 1001, 42); !ok || rn != "rn-42" {
		t.Fatalf("held: %q %v", rn, ok)
	}
	for _, k := range [][3]int64{{7, 1002, 42}, {7, 1001, 43}, {8, 1001, 42}} {
		if _, ok := h.held(k[0], k[1], k[2]); ok {
			t.Fatalf("%v answered from another buyer's entry", k)
		}
	}
	time.Sleep(200 * time.Millisecond)
	if _, ok := h.held(7, 1001, 42); ok {
		t.Fatal("the entry outlived its TTL")
	}
	var off holders
	if err := off.open(0, 0); err != nil {
		t.Fatal(err)
	}
	off.hold(7, 1001, 42, "rn")
	if _, ok := off.held(7, 1001, 42); ok {
		t.Fatal("holders_ttl 0 remembered a holder")
	}
}

// BenchmarkHolders is the accept path's use: an attempt looks its buyer
// up (held), and the engine's answer records them (hold), over 64Ki
// buyers.
func BenchmarkHolders(b *testing.B) {
	var h holders
	if err := h.open(5*time.Second, 1<<20); err != nil {
		b.Fatal(err)
	}
	defer h.close()
	rn := "1234567890123"
	var u int64
	for b.Loop() {
		u = (u + 1) & (1<<16 - 1)
		h.held(7, 1001, u)
		h.hold(7, 1001, u, rn)
	}
}
