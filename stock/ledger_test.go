package stock

import (
	"context"
	"strconv"
	"testing"

	"seckill/sale"
)

func TestLedgerRestoreSettleAndRebuild(t *testing.T) {
	r := newRig(t)
	ctx := context.Background()
	a, sku := r.preheat(t, activity(1, 1001, 10, true))
	for u := int64(1); u <= 3; u++ {
		if res, err := r.stock.Occupy(ctx, a, sku, u, "rn"+strconv.FormatInt(u, 10), 1); err != nil || res.Code != CodeOK {
			t.Fatalf("occupy: %+v %v", res, err)
		}
	}
	m := sale.Message{RequestNo: "rn1", ActivityID: 1, SKUID: 1001, UserID: 1, Quantity: 1}
	if ok, err := r.stock.Claim(ctx, &m); err != nil || !ok {
		t.Fatalf("claim: %v %v", ok, err)
	}
	l, err := r.stock.Ledger(ctx, 1, sku)
	if err != nil || !l.Present || l.Initial != 10 || l.Remaining != 7 || l.Sold != 3 || l.Holders != 3 || l.Claimed != 1 ||
		l.Pending != 2 {
		t.Fatalf("ledger %+v, %v", l, err)
	}
	recs, err := r.stock.Records(ctx, 1, sku)
	if err != nil || len(recs.Users) != 3 || recs.Users[2] != "rn2" || !recs.Claimed["rn1"] || len(recs.Claimed) != 1 ||
		len(recs.Pending) != 3 || recs.Pending["2:rn2"].RequestNo != "rn2" || recs.Pending["3:rn3"].UserID != 3 {
		t.Fatalf("records %+v, %v", recs, err)
	}
	if rn, claimed, err := r.stock.Holder(ctx, 1, 1001, 1); err != nil || rn != "rn1" || !claimed {
		t.Fatalf("holder of user 1: %q %v %v", rn, claimed, err)
	}

	// Redis loses user 2's record and user 9's order record: restore
	// gives back 9's, keeps 3's own ticket over an order of 3's.
	k := sale.KeysFor(1, 1001)
	r.hot.Do(t, "HDEL", k.Users, "2")
	n, err := r.stock.RestoreRecords(ctx, 1, sku, []Hold{{UserID: 9, RequestNo: "rn9"}, {UserID: 3, RequestNo: "old3"}})
	if err != nil || n != 1 {
		t.Fatalf("restore: %d %v", n, err)
	}
	if rn, claimed, _ := r.stock.Holder(ctx, 1, 1001, 9); rn != "rn9" || !claimed {
		t.Fatalf("user 9's restored record: %q, claimed %v", rn, claimed)
	}
	if rn, claimed, _ := r.stock.Holder(ctx, 1, 1001, 3); rn != "rn3" || claimed {
		t.Fatalf("user 3's own record was replaced: %q %v", rn, claimed)
	}
	// Records: 1, 3, 9 = 3 units; sold says 3: nothing to settle. Drop
	// 9's record again: one unit held by nothing goes back on sale.
	if code, moved, err := r.stock.Settle(ctx, 1, sku, 3); err != nil || code != SettleDone || moved != 0 {
		t.Fatalf("settle in balance: %s %d %v", code, moved, err)
	}
	r.hot.Do(t, "HDEL", k.Users, "9")
	if code, _, _ := r.stock.Settle(ctx, 1, sku, 99); code != SettleStale {
		t.Fatalf("settle with a stale view: %s", code)
	}
	if code, moved, err := r.stock.Settle(ctx, 1, sku, 3); err != nil || code != SettleDone || moved != 1 {
		t.Fatalf("settle a phantom unit: %s %d %v", code, moved, err)
	}
	if l := r.counts(t, 1, 1001); l.Remaining != 8 || l.Sold != 2 || l.Holders != 2 {
		t.Fatalf("after settle %+v", l)
	}

	// Rebuild refuses while the meta exists, then writes everything at once.
	if ok, err := r.stock.Rebuild(ctx, a, sku, 10, 2, nil, nil); err != nil || ok {
		t.Fatalf("rebuild over a live sku: %v %v", ok, err)
	}
	r.hot.Do(t, "FLUSHALL")
	if l, _ := r.stock.Ledger(ctx, 1, sku); l.Present {
		t.Fatal("ledger sees the flushed sku")
	}
	r.hot.Do(t, "ZADD", k.Pending, "1", "7:left-over") // lost with the rest, in truth: the rebuild empties it
	ok, err := r.stock.Rebuild(ctx, a, sku, 10, 2, []Hold{{UserID: 1, RequestNo: "rn1"}, {UserID: 4, RequestNo: "rn4"}}, nil)
	if err != nil || !ok {
		t.Fatalf("rebuild: %v %v", ok, err)
	}
	l, _ = r.stock.Ledger(ctx, 1, sku)
	if !l.Present || l.Initial != 10 || l.Remaining != 8 || l.Sold != 2 || l.Holders != 2 || l.Claimed != 2 || l.Pending != 0 {
		t.Fatalf("rebuilt ledger %+v", l)
	}
	if res, err := r.stock.Occupy(ctx, a, sku, 4, "again", 1); err != nil || res.Code != CodeDuplicate || res.Holder != "rn4" {
		t.Fatalf("buyer with an order after the rebuild: %+v %v", res, err)
	}
	if res, err := r.stock.Occupy(ctx, a, sku, 5, "rn5", 1); err != nil || res.Code != CodeOK || res.Remaining != 7 {
		t.Fatalf("new buyer after the rebuild: %+v %v", res, err)
	}
}
