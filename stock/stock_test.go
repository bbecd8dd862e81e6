package stock

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"testing"
	"time"

	"seckill/internal/testenv"
	"seckill/sale"
)

func TestOccupyCodes(t *testing.T) { eachOccupy(t, testOccupyCodes) }

func testOccupyCodes(t *testing.T, r *rig) {
	ctx := context.Background()
	now := time.Now()
	open := activity(1, 11, 2, false)
	open.SKUs[0].LimitPerUser = 2
	notStarted := activity(2, 21, 5, false)
	notStarted.Start, notStarted.End = now.Add(time.Hour), now.Add(2*time.Hour)
	ended := activity(3, 31, 5, false)
	ended.Start, ended.End = now.Add(-2*time.Hour), now.Add(-time.Hour)
	offline := activity(4, 41, 5, false)
	offline.State = sale.StateOffline
	for _, a := range []sale.Activity{open, notStarted, ended, offline} {
		r.preheat(t, a)
	}
	occ := func(act, sku, user int64, rn string, q int64) OccupyResult {
		a, k, ok := r.cat.Lookup(act, sku)
		if !ok {
			t.Fatalf("no sku %d", sku)
		}
		res, err := r.occupy(ctx, a, k, user, rn, q)
		if err != nil {
			t.Fatal(err)
		}
		return res
	}
	tests := []struct {
		name          string
		act, sku, usr int64
		rn            string
		q             int64
		code          string
		remaining     int64
		holder        string
	}{
		{"an activity before its start is not open", 2, 21, 1, "r1", 1, CodeNotOpen, -1, ""},
		{"an activity after its end has ended", 3, 31, 1, "r2", 1, CodeEnded, -1, ""},
		{"an offline activity is not open", 4, 41, 1, "r3", 1, CodeNotOpen, -1, ""},
		{"a quantity above the limit is refused", 1, 11, 1, "r4", 3, CodeOverLimit, -1, ""},
		{"the first buyer gets stock", 1, 11, 1, "r5", 1, CodeOK, 1, "r5"},
		{"the same buyer again is a duplicate naming the held ticket", 1, 11, 1, "r6", 1, CodeDuplicate, -1, "r5"},
		{"more than what is left is sold out with the remainder", 1, 11, 2, "r7", 2, CodeSoldOut, 1, ""},
		{"the last unit sells", 1, 11, 3, "r8", 1, CodeOK, 0, "r8"},
		{"after that it is sold out", 1, 11, 4, "r9", 1, CodeSoldOut, 0, ""},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got := occ(tc.act, tc.sku, tc.usr, tc.rn, tc.q)
			if got.Code != tc.code || got.Remaining != tc.remaining || got.Holder != tc.holder {
				t.Fatalf("got %+v, want code %s remaining %d holder %q", got, tc.code, tc.remaining, tc.holder)
			}
		})
	}
	c := r.counts(t, 1, 11)
	if c.Remaining != 0 || c.Sold != 2 || c.Holders != 2 || c.Initial != 2 {
		t.Fatalf("counts after the table: %+v", c)
	}
}

func TestOccupyMissingMetaIsMissing(t *testing.T) { eachOccupy(t, testOccupyMissingMetaIsMissing) }

func testOccupyMissingMetaIsMissing(t *testing.T, r *rig) {
	a := activity(9, 99, 5, false)
	// Never preheated, or lost by Redis: the script finds no meta, and
	// says so apart from NOT_OPEN so that the engine answers busy.
	res, err := r.occupy(context.Background(), &a, &a.SKUs[0], 1, "x", 1)
	if err != nil || res.Code != CodeMissing || res.Remaining != -1 {
		t.Fatalf("got %+v, %v; want MISSING", res, err)
	}
	if err := res.Err(); !errors.Is(err, ErrBusy) || !errors.Is(err, ErrStateLost) || errors.Is(err, ErrNotOpen) {
		t.Fatalf("MISSING maps to %v, want busy (state lost)", err)
	}
}

// TestFlushedRedisIsMissingUntilRebuilt: a sale in progress, then Redis
// loses everything (FLUSHALL). Until the SKU is rebuilt every buyer — new
// or holding a ticket — is answered MISSING (busy), none NOT_OPEN, none
// sold anything; after the rebuild from the database (2 of 10 units
// ordered) sales go on from initial − ordered and the books add up.
func TestFlushedRedisIsMissingUntilRebuilt(t *testing.T) {
	eachOccupy(t, testFlushedRedisIsMissingUntilRebuilt)
}

func testFlushedRedisIsMissingUntilRebuilt(t *testing.T, r *rig) {
	ctx := context.Background()
	a, k := r.preheat(t, activity(1, 11, 10, true))
	for u := int64(1); u <= 3; u++ {
		if res, _ := r.occupy(ctx, a, k, u, fmt.Sprint("rn-", u), 1); res.Code != CodeOK {
			t.Fatalf("occupy before the loss: %+v", res)
		}
	}
	for _, rd := range []*testenv.Redis{r.def, r.hot} {
		c := rd.Client(t)
		if err := c.Do(ctx, c.B().Flushall().Build()).Error(); err != nil {
			t.Fatal(err)
		}
	}
	if err := r.cat.Load(ctx); err != nil {
		t.Fatal(err)
	}
	a, k, ok := r.cat.Lookup(1, 11)
	if !ok {
		t.Fatal("the catalog forgot the activity Redis lost")
	}
	for _, u := range []int64{1, 4, 5} {
		res, err := r.occupy(ctx, a, k, u, fmt.Sprint("lost-", u), 1)
		if err != nil || res.Code != CodeMissing {
			t.Fatalf("user %d while Redis lost the SKU: %+v %v, want MISSING", u, res, err)
		}
	}
	// Users 1 and 2 hold orders in the database; user 3's ticket was lost
	// with Redis (its message will fail the claim).
	holds := []Hold{{UserID: 1, RequestNo: "rn-1"}, {UserID: 2, RequestNo: "rn-2"}}
	if ok, err := r.stock.Rebuild(ctx, a, k, 10, 2, holds, nil); err != nil || !ok {
		t.Fatalf("rebuild: %v %v", ok, err)
	}
	if res, _ := r.occupy(ctx, a, k, 1, "again-1", 1); res.Code != CodeDuplicate || res.Holder != "rn-1" {
		t.Fatalf("a buyer with an order after the rebuild: %+v, want DUPLICATE rn-1", res)
	}
	sold := 0
	for u := int64(3); u <= 20; u++ {
		if res, _ := r.occupy(ctx, a, k, u, fmt.Sprint("new-", u), 1); res.Code == CodeOK {
			sold++
		}
	}
	if sold != 8 {
		t.Fatalf("%d units sold after the rebuild, want 8 = 10 initial - 2 ordered", sold)
	}
	if c := r.counts(t, 1, 11); c.Remaining != 0 || c.Sold != 10 || c.Holders != 10 || c.Initial != 10 {
		t.Fatalf("books after the rebuild: %+v", c)
	}
}

func TestOccupyConcurrentNeverOversells(t *testing.T) {
	eachOccupy(t, testOccupyConcurrentNeverOversells)
}

func testOccupyConcurrentNeverOversells(t *testing.T, r *rig) {
	a, k := r.preheat(t, activity(1, 1001, 1000, false))
	neverOversells(t, r, func(ctx context.Context, user int64, rn string) (OccupyResult, error) {
		return r.occupy(ctx, a, k, user, rn, 1)
	})
}

// neverOversells runs 50 goroutines of 60 attempts each through occupy,
// 3,000 attempts over 2,000 distinct users (every third attempt repeats a
// user another goroutine uses), on SKU 1001 of activity 1 with 1,000
// units: exactly 1,000 OKs, one per user, and the ledger agrees.
func neverOversells(t *testing.T, r *rig, occupy func(ctx context.Context, user int64, rn string) (OccupyResult, error)) {
	t.Helper()
	ctx := context.Background()
	var mu sync.Mutex
	okUsers := map[int64]int{}
	var wg sync.WaitGroup
	for g := 0; g < 50; g++ {
		wg.Add(1)
		go func(g int) {
			defer wg.Done()
			for i := 0; i < 60; i++ {
				user := int64((g*60+i)%2000 + 1)
				res, err := occupy(ctx, user, fmt.Sprintf("g%d-%d", g, i))
				if err != nil {
					t.Error(err)
					return
				}
				if res.Code == CodeOK {
					mu.Lock()
					okUsers[user]++
					mu.Unlock()
				}
			}
		}(g)
	}
	wg.Wait()
	total := 0
	for u, n := range okUsers {
		if n != 1 {
			t.Errorf("user %d got %d OKs", u, n)
		}
		total += n
	}
	if total != 1000 {
		t.Fatalf("%d OK answers, want exactly 1000", total)
	}
	c := r.counts(t, 1, 1001)
	if c.Remaining != 0 || c.Sold != 1000 || c.Holders != 1000 {
		t.Fatalf("counts: %+v, want remaining 0, sold 1000, 1000 holders", c)
	}
}

func TestReleaseIsBoundToTheTicket(t *testing.T) { eachOccupy(t, testReleaseIsBoundToTheTicket) }

func testReleaseIsBoundToTheTicket(t *testing.T, r *rig) {
	a, k := r.preheat(t, activity(1, 11, 10, false))
	ctx := context.Background()
	res, err := r.occupy(ctx, a, k, 7, "rn-7", 1)
	if err != nil || res.Code != CodeOK {
		t.Fatalf("occupy: %+v %v", res, err)
	}
	m := &sale.Message{RequestNo: "rn-7", ActivityID: 1, SKUID: 11, UserID: 7, Quantity: 1}

	foreign := *m
	foreign.RequestNo = "someone-else"
	if out, err := r.stock.Release(ctx, &foreign, true); err != nil || out != NotHeld {
		t.Fatalf("release with a foreign requestNo: %v %v, want not_held", out, err)
	}
	if c := r.counts(t, 1, 11); c.Remaining != 9 || c.Pending != 1 {
		t.Fatalf("a foreign release changed stock or the unclaimed records: %+v", c)
	}
	if out, err := r.stock.Release(ctx, m, false); err != nil || out != Released {
		t.Fatalf("first release: %v %v", out, err)
	}
	if out, err := r.stock.Release(ctx, m, false); err != nil || out != NotHeld {
		t.Fatalf("second release: %v %v, want not_held", out, err)
	}
	if c := r.counts(t, 1, 11); c.Remaining != 10 || c.Sold != 0 || c.Holders != 0 || c.Pending != 0 {
		t.Fatalf("after two releases: %+v, want stock restored once and nothing pending", c)
	}
	// The user may buy again once released.
	if res, _ := r.occupy(ctx, a, k, 7, "rn-7b", 1); res.Code != CodeOK {
		t.Fatalf("re-buy after release: %+v", res)
	}
}

func TestClaimedTicketIsOnlyReleasedByForce(t *testing.T) {
	eachOccupy(t, testClaimedTicketIsOnlyReleasedByForce)
}

func testClaimedTicketIsOnlyReleasedByForce(t *testing.T, r *rig) {
	a, k := r.preheat(t, activity(1, 11, 10, false))
	ctx := context.Background()
	if res, _ := r.occupy(ctx, a, k, 7, "rn-7", 1); res.Code != CodeOK {
		t.Fatalf("occupy: %+v", res)
	}
	m := &sale.Message{RequestNo: "rn-7", ActivityID: 1, SKUID: 11, UserID: 7, Quantity: 1}
	if ok, err := r.stock.Claim(ctx, m); !ok || err != nil {
		t.Fatalf("claim: %v %v", ok, err)
	}
	if ok, err := r.stock.Claim(ctx, m); !ok || err != nil {
		t.Fatalf("claim again must stay claimed: %v %v", ok, err)
	}
	if out, _ := r.stock.Release(ctx, m, false); out != Claimed {
		t.Fatalf("unforced release of a claimed ticket: %v, want claimed", out)
	}
	if c := r.counts(t, 1, 11); c.Remaining != 9 || c.Claimed != 1 || c.Pending != 0 {
		t.Fatalf("counts: %+v, want the claimed ticket no longer pending", c)
	}
	if out, _ := r.stock.Release(ctx, m, true); out != Released {
		t.Fatalf("forced release: %v", out)
	}
	if c := r.counts(t, 1, 11); c.Remaining != 10 || c.Claimed != 0 || c.Holders != 0 {
		t.Fatalf("counts after forced release: %+v", c)
	}
	if ok, _ := r.stock.Claim(ctx, m); ok {
		t.Fatal("a released ticket was claimed")
	}
}

func TestSoldOutAndAvailableEvents(t *testing.T) { eachOccupy(t, testSoldOutAndAvailableEvents) }

func testSoldOutAndAvailableEvents(t *testing.T, r *rig) {
	a, k := r.preheat(t, activity(5, 55, 1, false))
	ctx := context.Background()
	drain(r.events)
	if res, _ := r.occupy(ctx, a, k, 1, "a", 1); res.Code != CodeOK || res.Remaining != 0 {
		t.Fatalf("occupy: %+v", res)
	}
	expectEvent(t, r.events, sale.EventSoldOut, 55)
	if _, err := r.stock.Release(ctx, &sale.Message{RequestNo: "a", ActivityID: 5, SKUID: 55, UserID: 1, Quantity: 1}, false); err != nil {
		t.Fatal(err)
	}
	expectEvent(t, r.events, sale.EventAvailable, 55)
}

func TestPreheatKeepsLiveStockAndRebuildsFromOrders(t *testing.T) {
	eachOccupy(t, testPreheatKeepsLiveStockAndRebuildsFromOrders)
}

func testPreheatKeepsLiveStockAndRebuildsFromOrders(t *testing.T, r *rig) {
	ctx := context.Background()
	a, k := r.preheat(t, activity(1, 11, 10, false))
	if res, _ := r.occupy(ctx, a, k, 1, "x", 1); res.Code != CodeOK {
		t.Fatal(res)
	}
	r.preheat(t, activity(1, 11, 10, false))
	if c := r.counts(t, 1, 11); c.Remaining != 9 {
		t.Fatalf("preheating a live activity reset its stock: %+v", c)
	}
	// Redis comes back empty while the database holds 4 ordered units.
	r.def.Stop()
	if err := r.def.Start(); err != nil {
		t.Fatal(err)
	}
	s2 := New(r.shards, r.cat, WithOrdered(func(context.Context, int64, int64) (int64, error) { return 4, nil }))
	var err error
	for i := 0; i < 50; i++ { // the client reconnects by itself
		if err = s2.Preheat(ctx, activity(1, 11, 10, false)); err == nil {
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	if err != nil {
		t.Fatal(err)
	}
	if c, _ := s2.Counts(ctx, 1, 11); c.Remaining != 6 || c.Sold != 4 || c.Initial != 10 {
		t.Fatalf("rebuilt counts: %+v, want remaining 6 = 10 - 4 ordered", c)
	}
}

func TestSetStateTakesEffectInTheScript(t *testing.T) {
	eachOccupy(t, testSetStateTakesEffectInTheScript)
}

func testSetStateTakesEffectInTheScript(t *testing.T, r *rig) {
	ctx := context.Background()
	r.preheat(t, activity(1, 11, 10, false))
	if err := r.stock.SetState(ctx, 1, sale.StateOffline); err != nil {
		t.Fatal(err)
	}
	a, k, _ := r.cat.Lookup(1, 11)
	if a.State != sale.StateOffline {
		t.Fatalf("catalog state %s", a.State)
	}
	if res, _ := r.occupy(ctx, a, k, 1, "x", 1); res.Code != CodeNotOpen {
		t.Fatalf("offline occupy: %+v", res)
	}
	if err := r.stock.SetState(ctx, 1, sale.StateOnline); err != nil {
		t.Fatal(err)
	}
	if res, _ := r.occupy(ctx, a, k, 1, "x", 1); res.Code != CodeOK {
		t.Fatalf("online again occupy: %+v", res)
	}
}

func drain(ch chan sale.Event) {
	for {
		select {
		case <-ch:
		default:
			return
		}
	}
}

func expectEvent(t *testing.T, ch chan sale.Event, kind string, sku int64) {
	t.Helper()
	deadline := time.After(2 * time.Second)
	for {
		select {
		case e := <-ch:
			if e.Kind == kind && e.SKU == sku {
				return
			}
		case <-deadline:
			t.Fatalf("no %s event for sku %d", kind, sku)
		}
	}
}

func TestOnCallSoldOutMarkAndRestock(t *testing.T) { eachOccupy(t, testOnCallSoldOutMarkAndRestock) }

func testOnCallSoldOutMarkAndRestock(t *testing.T, r *rig) {
	ctx := context.Background()
	a, k := r.preheat(t, activity(1, 11, 2, false))
	if err := r.stock.SetSoldOut(ctx, 1, 11, true); err != nil {
		t.Fatal(err)
	}
	expectEvent(t, r.events, sale.EventSoldOut, 11)
	if res, _ := r.occupy(ctx, a, k, 1, "a", 1); res.Code != CodeSoldOut || res.Remaining != 0 {
		t.Fatalf("occupy while marked sold out: %+v", res)
	}
	if err := r.stock.SetSoldOut(ctx, 1, 11, false); err != nil {
		t.Fatal(err)
	}
	expectEvent(t, r.events, sale.EventAvailable, 11)
	if res, _ := r.occupy(ctx, a, k, 1, "a", 1); res.Code != CodeOK || res.Remaining != 1 {
		t.Fatalf("occupy after clearing the mark: %+v", res)
	}
	if res, _ := r.occupy(ctx, a, k, 2, "b", 1); res.Code != CodeOK || res.Remaining != 0 {
		t.Fatalf("last unit: %+v", res)
	}
	rem, initial, err := r.stock.Restock(ctx, 1, 11, 3)
	if err != nil || rem != 3 || initial != 5 {
		t.Fatalf("restock: %d %d %v", rem, initial, err)
	}
	expectEvent(t, r.events, sale.EventAvailable, 11)
	if c := r.counts(t, 1, 11); c.Holders != 2 || c.Sold != 2 || c.Remaining != 3 || c.Initial != 5 {
		t.Fatalf("counts after restock: %+v (occupancies must be kept)", c)
	}
}

func TestRestockUnderConcurrentOccupyKeepsTheBooks(t *testing.T) {
	eachOccupy(t, testRestockUnderConcurrentOccupyKeepsTheBooks)
}

func testRestockUnderConcurrentOccupyKeepsTheBooks(t *testing.T, r *rig) {
	ctx := context.Background()
	a, k := r.preheat(t, activity(1, 11, 100, false))
	var wg sync.WaitGroup
	for g := 0; g < 10; g++ {
		wg.Add(1)
		go func(g int) {
			defer wg.Done()
			for i := 0; i < 30; i++ {
				u := int64(g*100 + i + 1)
				_, _ = r.occupy(ctx, a, k, u, "rn"+strconv.FormatInt(u, 10), 1)
			}
		}(g)
	}
	for i := 0; i < 10; i++ {
		if _, _, err := r.stock.Restock(ctx, 1, 11, 10); err != nil {
			t.Error(err)
		}
	}
	wg.Wait()
	c := r.counts(t, 1, 11)
	if c.Initial != 200 || c.Remaining+c.Sold != c.Initial || c.Sold != c.Holders {
		t.Fatalf("books do not add up after concurrent restock: %+v", c)
	}
}

// TestClosedBuyerIsBarredWhereRebuyIsOff: a ticket whose order was closed
// unpaid is released with ReleaseClosed. Its unit goes back on sale for
// everyone; its buyer may buy again only where the activity allows it
// (rebuyAfterClose, default true) — elsewhere the buyer is a duplicate
// naming the closed ticket, also in a batch, also after a rebuild.
func TestClosedBuyerIsBarredWhereRebuyIsOff(t *testing.T) {
	eachOccupy(t, testClosedBuyerIsBarredWhereRebuyIsOff)
}

func testClosedBuyerIsBarredWhereRebuyIsOff(t *testing.T, r *rig) {
	ctx := context.Background()
	no := false
	barring := activity(1, 11, 1, false)
	barring.RebuyAfterClose = &no
	a1, k1 := r.preheat(t, barring)
	a2, k2 := r.preheat(t, activity(2, 22, 1, false))
	for _, c := range []struct {
		a *sale.Activity
		k *sale.SKU
	}{{a1, k1}, {a2, k2}} {
		if res, _ := r.occupy(ctx, c.a, c.k, 7, "closed-7", 1); res.Code != CodeOK {
			t.Fatalf("occupy: %+v", res)
		}
		m := &sale.Message{RequestNo: "closed-7", ActivityID: c.a.ID, SKUID: c.k.ID, UserID: 7, Quantity: 1}
		if ok, _ := r.stock.Claim(ctx, m); !ok {
			t.Fatal("claim")
		}
		if out, err := r.stock.ReleaseClosed(ctx, m); err != nil || out != Released {
			t.Fatalf("release of the closed order: %v %v", out, err)
		}
		// A retried close (its marker was left pending) changes nothing.
		if out, err := r.stock.ReleaseClosed(ctx, m); err != nil || out != NotHeld {
			t.Fatalf("retried release: %v %v", out, err)
		}
		if n := r.counts(t, c.a.ID, c.k.ID); n.Remaining != 1 || n.Sold != 0 || n.Holders != 0 || n.Claimed != 0 {
			t.Fatalf("activity %d after the close: %+v, want the unit back once", c.a.ID, n)
		}
	}
	if res, _ := r.occupy(ctx, a1, k1, 7, "again-7", 1); res.Code != CodeDuplicate || res.Holder != "closed-7" {
		t.Fatalf("the closed buyer where re-buy is off: %+v, want DUPLICATE naming closed-7", res)
	}
	batch, err := r.stock.OccupyBatch(ctx, a1, k1, Extras{}, []Buyer{{7, "b-7", 1}, {8, "b-8", 1}}, nil)
	if err != nil || batch[0].Code != CodeDuplicate || batch[0].Holder != "closed-7" || batch[1].Code != CodeOK {
		t.Fatalf("a batch with the closed buyer: %+v %v", batch, err)
	}
	if res, _ := r.occupy(ctx, a2, k2, 7, "again-7", 1); res.Code != CodeOK {
		t.Fatalf("the closed buyer where re-buy is on (default): %+v, want OK", res)
	}

	// Redis loses activity 1's SKU; the rebuild brings the close back.
	r.def.Do(t, "FLUSHALL")
	closed := []Hold{{UserID: 7, RequestNo: "closed-7"}}
	live := []Hold{{UserID: 8, RequestNo: "b-8"}}
	if ok, err := r.stock.Rebuild(ctx, a1, k1, 1, 1, live, closed); err != nil || !ok {
		t.Fatalf("rebuild: %v %v", ok, err)
	}
	if res, _ := r.occupy(ctx, a1, k1, 7, "after-7", 1); res.Code != CodeDuplicate || res.Holder != "closed-7" {
		t.Fatalf("the closed buyer after the rebuild: %+v", res)
	}
	if res, _ := r.occupy(ctx, a1, k1, 8, "after-8", 1); res.Code != CodeDuplicate || res.Holder != "b-8" {
		t.Fatalf("the order holder after the rebuild: %+v", res)
	}
	if n := r.counts(t, 1, 11); n.Remaining != 0 || n.Sold != 1 || n.Holders != 1 || n.Claimed != 1 {
		t.Fatalf("books after the rebuild: %+v", n)
	}
}

// TestMultiUnitTicketsRecordTheirUnits: on a SKU of several units per
// ticket every record's units are kept in the qty hash (single and batched
// occupy, restore, rebuild), so a release gives back exactly what the
// ticket took even when its caller does not know (a quantity of 1 asked);
// a SKU of one unit per ticket records nothing.
func TestMultiUnitTicketsRecordTheirUnits(t *testing.T) {
	eachOccupy(t, testMultiUnitTicketsRecordTheirUnits)
}

func testMultiUnitTicketsRecordTheirUnits(t *testing.T, r *rig) {
	ctx := context.Background()
	multi := activity(1, 11, 20, false)
	multi.SKUs[0].LimitPerUser = 3
	a, k := r.preheat(t, multi)
	if res, _ := r.occupy(ctx, a, k, 1, "rn-1", 3); res.Code != CodeOK || res.Remaining != 17 {
		t.Fatalf("occupy 3: %+v", res)
	}
	got, err := r.stock.OccupyBatch(ctx, a, k, Extras{}, []Buyer{{2, "rn-2", 2}, {3, "rn-3", 1}, {2, "rn-2b", 1}}, nil)
	if err != nil || got[0].Code != CodeOK || got[1].Code != CodeOK || got[2].Code != CodeDuplicate {
		t.Fatalf("batch: %+v %v", got, err)
	}
	recs, err := r.stock.Records(ctx, 1, k)
	if err != nil {
		t.Fatal(err)
	}
	if fmt.Sprint(recs.Units) != fmt.Sprint(map[string]int64{"rn-1": 3, "rn-2": 2, "rn-3": 1}) {
		t.Fatalf("units recorded: %v", recs.Units)
	}
	for rn, want := range map[string]int64{"rn-1": 3, "rn-3": 1} {
		if q, ok := recs.UnitsOf(rn, k.LimitPerUser); !ok || q != want {
			t.Fatalf("units of %s: %d %v, want %d", rn, q, ok, want)
		}
	}
	if _, ok := recs.UnitsOf("unrecorded", k.LimitPerUser); ok {
		t.Fatal("a ticket without recorded units on a several-units SKU is known")
	}
	m := &sale.Message{RequestNo: "rn-1", ActivityID: 1, SKUID: 11, UserID: 1, Quantity: 1}
	if out, err := r.stock.Release(ctx, m, false); err != nil || out != Released {
		t.Fatalf("release: %v %v", out, err)
	}
	if c := r.counts(t, 1, 11); c.Remaining != 17 || c.Sold != 3 || c.Holders != 2 {
		t.Fatalf("after releasing the 3-unit ticket: %+v, want its 3 units back", c)
	}
	if recs, _ := r.stock.Records(ctx, 1, k); len(recs.Units) != 2 {
		t.Fatalf("a released ticket's units stay recorded: %v", recs.Units)
	}

	// Restore and rebuild record the units of live orders.
	r.def.Do(t, "HDEL", sale.KeysFor(1, 11).Users, "2")
	if n, err := r.stock.RestoreRecords(ctx, 1, k, []Hold{{UserID: 2, RequestNo: "rn-2", Quantity: 2}}); err != nil || n != 1 {
		t.Fatalf("restore: %d %v", n, err)
	}
	r.def.Do(t, "FLUSHALL")
	holds := []Hold{{UserID: 2, RequestNo: "rn-2", Quantity: 2}, {UserID: 4, RequestNo: "rn-4", Quantity: 3}}
	if ok, err := r.stock.Rebuild(ctx, a, k, 20, 5, holds, nil); err != nil || !ok {
		t.Fatalf("rebuild: %v %v", ok, err)
	}
	if recs, _ := r.stock.Records(ctx, 1, k); fmt.Sprint(recs.Units) != fmt.Sprint(map[string]int64{"rn-2": 2, "rn-4": 3}) {
		t.Fatalf("units after the rebuild: %v", recs.Units)
	}
	m = &sale.Message{RequestNo: "rn-4", ActivityID: 1, SKUID: 11, UserID: 4, Quantity: 1}
	if out, err := r.stock.ReleaseClosed(ctx, m); err != nil || out != Released {
		t.Fatalf("release after the rebuild: %v %v", out, err)
	}
	if c := r.counts(t, 1, 11); c.Remaining != 18 || c.Sold != 2 || c.Holders != 1 {
		t.Fatalf("after the rebuild and a release: %+v", c)
	}

	// One unit per ticket: nothing recorded.
	b, kb := r.preheat(t, activity(2, 22, 5, false))
	if res, _ := r.occupy(ctx, b, kb, 1, "one", 1); res.Code != CodeOK {
		t.Fatalf("occupy: %+v", res)
	}
	if n := r.def.Int(t, "EXISTS", sale.KeysFor(2, 22).Qty); n != 0 {
		t.Fatal("a one-unit SKU recorded units")
	}
}

// TestRestockOfALostSKUWritesNothing: a restock of a SKU whose keys Redis
// lost answers ErrLost and writes nothing: a bare stock key and an
// initial-only meta would read as present to the watcher, which would
// then never rebuild the SKU's records and orders.
func TestRestockOfALostSKUWritesNothing(t *testing.T) {
	r := newRig(t)
	a, k := r.preheat(t, activity(1, 77, 10, true))
	r.hot.Do(t, "FLUSHALL")
	if _, _, err := r.stock.Restock(context.Background(), a.ID, k.ID, 5); !errors.Is(err, ErrLost) {
		t.Fatalf("a restock of a lost SKU answered %v, want ErrLost", err)
	}
	if n := r.hot.Int(t, "DBSIZE"); n != 0 {
		t.Fatalf("the restock wrote %d keys into the empty shard", n)
	}
}
