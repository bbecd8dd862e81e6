package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"seckill/internal/testenv"
	"seckill/sale"
)

var (
	past   = time.Now().Add(-time.Hour) // createdSince that every order meets
	future = time.Now().Add(time.Hour)  // createdBefore that every order meets
)

func TestConfirmPaymentPaysOnceUnderOneReferenceAndOnlyInTime(t *testing.T) {
	runTest(t, func(t *testing.T, r runner) {
		ctx := context.Background()
		s := r.open(t)
		put(t, s, activity(1, sale.SKU{ID: 10, Stock: 5}))
		save(t, s, msg("r1", 1, 10, 100))
		save(t, s, msg("r2", 1, 10, 200))
		pay := func(order, ref string, amount sale.Cents, since time.Time) (Order, PaymentResult, error) {
			return s.ConfirmPayment(ctx, Payment{OrderNo: order, ProviderRef: ref, Amount: amount}, since)
		}
		if _, _, err := pay("Onone", "p0", 990, past); !errors.Is(err, ErrNotFound) {
			t.Errorf("unknown order: %v, want ErrNotFound", err)
		}
		if _, _, err := pay("Or1", "p1", 1, past); !errors.Is(err, ErrPaymentAmount) {
			t.Errorf("a wrong amount: %v, want ErrPaymentAmount", err)
		}
		if o, res, err := pay("Or1", "p1", 990, future); err != nil || res != PaymentNotPayable || o.Status != OrderPendingPayment {
			t.Errorf("pay past the deadline: %+v %v %v; want it left PENDING_PAYMENT", o, res, err)
		}
		if o, res, err := pay("Or1", "p1", 990, past); err != nil || res != PaymentApplied || o.Status != OrderPaid {
			t.Errorf("pay: %+v %v %v", o, res, err)
		}
		if o, res, err := pay("Or1", "p1", 990, past); err != nil || res != PaymentReplayed || o.Status != OrderPaid {
			t.Errorf("the same payment again: %+v %v %v, want a replay that changes nothing", o, res, err)
		}
		if _, _, err := pay("Or1", "p1", 1990, past); !errors.Is(err, ErrPaymentAmount) {
			t.Errorf("the reference again with another amount: %v, want ErrPaymentAmount", err)
		}
		if _, _, err := pay("Or2", "p1", 990, past); !errors.Is(err, ErrPaymentRefReused) {
			t.Errorf("the reference for another order: %v, want ErrPaymentRefReused", err)
		}
		if o, err := s.Order(ctx, "Or2"); err != nil || o.Status != OrderPendingPayment {
			t.Errorf("the other order after a reused reference: %+v %v", o, err)
		}
		if _, res, err := pay("Or1", "p9", 990, past); err != nil || res != PaymentNotPayable {
			t.Errorf("a second reference for a paid order: %v %v, want not payable", res, err)
		}
		evs, err := s.RequestEvents(ctx, "r1")
		if err != nil {
			t.Fatal(err)
		}
		paid := 0
		for _, e := range evs {
			if e.Status == EventOrderPaid {
				paid++
			}
		}
		if paid != 1 {
			t.Errorf("history %+v: want one ORDER_PAID", evs)
		}
		if _, closed, err := s.CloseOrder(ctx, "Or1", future); err != nil || closed {
			t.Errorf("close a paid order: closed=%v, %v", closed, err)
		}
		wantStock(t, s, 1, 10, 5, 3)
	})
}

func TestPayAndCloseNeverBothWin(t *testing.T) {
	runTest(t, func(t *testing.T, r runner) {
		ctx := context.Background()
		s := r.open(t)
		const rounds = 40
		put(t, s, activity(1, sale.SKU{ID: 10, Stock: rounds}))
		paid, closed := 0, 0
		for i := range rounds {
			req := fmt.Sprintf("race%d", i)
			save(t, s, msg(req, 1, 10, int64(1000+i)))
			var (
				wg       sync.WaitGroup
				po       Order
				perr     error
				didClose bool
				cerr     error
			)
			start := make(chan struct{})
			wg.Go(func() {
				<-start
				po, _, perr = s.ConfirmPayment(ctx, Payment{OrderNo: testenv.OrderNo(req), ProviderRef: "ref-" + req, Amount: 990}, past)
			})
			wg.Go(func() { <-start; _, didClose, cerr = s.CloseOrder(ctx, testenv.OrderNo(req), future) })
			close(start)
			wg.Wait()
			if perr != nil || cerr != nil {
				t.Fatalf("round %d: pay %v, close %v", i, perr, cerr)
			}
			final, err := s.Order(ctx, testenv.OrderNo(req))
			if err != nil {
				t.Fatal(err)
			}
			switch {
			case didClose && po.Status == OrderPaid, didClose && final.Status != OrderClosed,
				!didClose && final.Status != OrderPaid:
				t.Fatalf("round %d: pay saw %s, close=%v, order ends %s", i, po.Status, didClose, final.Status)
			case didClose:
				closed++
			default:
				paid++
			}
		}
		t.Logf("%d paid, %d closed", paid, closed)
		wantStock(t, s, 1, 10, rounds, rounds-int64(paid))
		rel, err := s.PendingReleases(ctx, 1000)
		if err != nil || len(rel) != closed {
			t.Fatalf("%d release markers (%v), want one per closed order (%d)", len(rel), err, closed)
		}
	})
}

func TestClosedOrderLetsItsBuyerOrderAgain(t *testing.T) {
	runTest(t, func(t *testing.T, r runner) {
		ctx := context.Background()
		s := r.open(t)
		put(t, s, activity(1, sale.SKU{ID: 10, Stock: 1}))
		save(t, s, msg("r1", 1, 10, 100))
		o, closed, err := s.CloseOrder(ctx, "Or1", future)
		if err != nil || !closed || o.Status != OrderClosed {
			t.Fatalf("close: %+v, %v, %v", o, closed, err)
		}
		if _, closed, err := s.CloseOrder(ctx, "Or1", future); err != nil || closed {
			t.Fatalf("second close: %v, %v", closed, err)
		}
		wantStock(t, s, 1, 10, 1, 1)
		rel, err := s.PendingReleases(ctx, 10)
		if err != nil || len(rel) != 1 || rel[0].RequestNo != "r1" || rel[0].UserID != 100 || rel[0].Quantity != 1 {
			t.Fatalf("pending releases %+v, %v", rel, err)
		}
		// The unit sells again, to the same buyer; the closed ticket
		// redelivered is answered with its closed order.
		out := save(t, s, msg("r1", 1, 10, 100), msg("r2", 1, 10, 100))
		if out[0].Kind != Existing || out[0].OrderStatus != OrderClosed {
			t.Errorf("redelivered closed ticket: %+v", out[0])
		}
		if out[1].Kind != Created {
			t.Errorf("new ticket of the same buyer: %+v", out[1])
		}
		wantStock(t, s, 1, 10, 1, 0)
		for range 2 {
			if err := s.ReleaseDone(ctx, "r1"); err != nil {
				t.Fatal(err)
			}
		}
		if rel, _ := s.PendingReleases(ctx, 10); len(rel) != 0 {
			t.Errorf("release still pending after done: %+v", rel)
		}
		// Closing the second order too leaves two closed rows of one user.
		if _, closed, err := s.CloseOrder(ctx, "Or2", future); err != nil || !closed {
			t.Fatalf("close the second order: %v, %v", closed, err)
		}
		expired, err := s.ExpiredOrders(ctx, future, 10)
		if err != nil || len(expired) != 0 {
			t.Errorf("expired orders after closing all: %+v, %v", expired, err)
		}
	})
}

func TestExpiredOrdersAreOldestFirst(t *testing.T) {
	runTest(t, func(t *testing.T, r runner) {
		ctx := context.Background()
		clock := time.Now().Add(-time.Minute)
		s := r.open(t, WithClock(func() time.Time { return clock }))
		put(t, s, activity(1, sale.SKU{ID: 10, Stock: 5}))
		save(t, s, msg("r1", 1, 10, 100))
		clock = clock.Add(time.Second)
		save(t, s, msg("r2", 1, 10, 101))
		clock = clock.Add(time.Second)
		save(t, s, msg("r3", 1, 10, 102))
		got, err := s.ExpiredOrders(ctx, clock, 10)
		if err != nil || len(got) != 2 || got[0].OrderNo != "Or1" || got[1].OrderNo != "Or2" {
			t.Fatalf("expired before the third: %+v, %v", got, err)
		}
		if _, closed, _ := s.CloseOrder(ctx, "Or3", clock); closed {
			t.Error("closed an order not yet past its deadline")
		}
	})
}

func TestRequestHistoryTellsTheStory(t *testing.T) {
	runTest(t, func(t *testing.T, r runner) {
		ctx := context.Background()
		s := r.open(t)
		put(t, s, activity(1, sale.SKU{ID: 10, Stock: 5}))
		rn := sale.NewRequestNos(1).Next(1, 10)
		m := msg(rn, 1, 10, 100)
		save(t, s, m)
		if err := s.LogRequests(ctx, []LogEntry{{RequestNo: rn, ActivityID: 1, SKUID: 10, UserID: 100, Quantity: 1,
			Status: StatusSuccess, OrderNo: testenv.OrderNo(rn)}}); err != nil {
			t.Fatal(err)
		}
		evs, err := s.RequestEvents(ctx, rn)
		if err != nil {
			t.Fatal(err)
		}
		var got []string
		for _, e := range evs {
			got = append(got, e.Status)
		}
		want := fmt.Sprint([]string{StatusStockOccupied, StatusMQQueued, StatusOrderCreated, StatusSuccess})
		if fmt.Sprint(got) != want {
			t.Errorf("history %v, want %v", got, want)
		}
		if e, err := s.RequestLog(ctx, rn); err != nil || e.Status != StatusSuccess {
			t.Errorf("request log %+v, %v", e, err)
		}
		if evs, err := s.RequestEvents(ctx, "none"); err != nil || len(evs) != 0 {
			t.Errorf("history of an unknown ticket: %+v, %v", evs, err)
		}
	})
}

// TestDeliveredTellsTheSameStory: SaveBatch with Delivered leaves the
// request log and the history of every ticket as SaveBatch followed by a
// LogRequests of the SUCCESS steps did: the same states, remarks and order
// numbers, for created, duplicate, sold-out, repeated and redelivered
// tickets, in a batch larger than one statement.
func TestDeliveredTellsTheSameStory(t *testing.T) {
	runTest(t, func(t *testing.T, r runner) {
		ctx := context.Background()
		s := r.open(t)
		const n, stock = 1300, 1000
		put(t, s, activity(1, sale.SKU{ID: 10, Stock: stock}))
		put(t, s, activity(2, sale.SKU{ID: 10, Stock: stock}))
		batch := func(act int64, prefix string) []sale.Message {
			var msgs []sale.Message
			for i := range n {
				// Every tenth buyer sends a second ticket: a duplicate.
				u := int64(100 + i - i%10/9)
				msgs = append(msgs, msg(fmt.Sprintf("%s%d", prefix, i), act, 10, u))
			}
			return append(msgs, msgs[3], msgs[7]) // repeated tickets
		}
		old, nu := batch(1, "a"), batch(2, "b")
		out := save(t, s, old...)
		var es []LogEntry
		for i, o := range out {
			if o.Kind == Created && i < n {
				m := old[i]
				es = append(es, LogEntry{RequestNo: m.RequestNo, ActivityID: m.ActivityID, SKUID: m.SKUID,
					UserID: m.UserID, Quantity: m.Quantity, Status: StatusSuccess, OrderNo: o.OrderNo,
					TraceID: m.TraceID, Remark: "result written"})
			}
		}
		if err := s.LogRequests(ctx, es); err != nil {
			t.Fatal(err)
		}
		save(t, s, old...) // a redelivery: only its duplicates log again
		// The second time is a redelivery: nothing changes.
		for range 2 {
			outB, err := s.SaveBatch(ctx, nu, Delivered("result written"))
			if err != nil {
				t.Fatal(err)
			}
			for i := range outB {
				if outB[i].Kind != out[i].Kind && outB[i].Kind != Existing {
					t.Fatalf("ticket %d: %v, old way %v", i, outB[i].Kind, out[i].Kind)
				}
			}
		}
		// The two runs differ only in these letters.
		norm := strings.NewReplacer("Oa", "O", "Ob", "O", "t-a", "t-", "t-b", "t-")
		created := 0
		for i := range n {
			a, b := old[i].RequestNo, nu[i].RequestNo
			la, err := s.RequestLog(ctx, a)
			if err != nil {
				t.Fatal(err)
			}
			lb, err := s.RequestLog(ctx, b)
			if err != nil {
				t.Fatal(err)
			}
			if la.Status != lb.Status || norm.Replace(la.OrderNo) != norm.Replace(lb.OrderNo) ||
				norm.Replace(la.TraceID) != norm.Replace(lb.TraceID) || norm.Replace(la.Remark) != norm.Replace(lb.Remark) {
				t.Fatalf("ticket %d: request log %+v, the old way %+v", i, lb, la)
			}
			if la.Status == StatusSuccess {
				created++
			}
			ha, err := s.RequestEvents(ctx, a)
			if err != nil {
				t.Fatal(err)
			}
			hb, err := s.RequestEvents(ctx, b)
			if err != nil {
				t.Fatal(err)
			}
			story := func(h []Event) string {
				var b strings.Builder
				for _, e := range h {
					fmt.Fprintf(&b, "%s(%s) ", e.Status, norm.Replace(e.Remark))
				}
				return b.String()
			}
			if story(ha) != story(hb) {
				t.Fatalf("ticket %d: history %s, the old way %s", i, story(hb), story(ha))
			}
		}
		if created != stock {
			t.Errorf("%d tickets reached SUCCESS, want %d", created, stock)
		}
	})
}

// TestLogRequestsAppliesStepsInOrder: several steps of one ticket in one
// call end at the last, and the history keeps them all, in order.
func TestLogRequestsAppliesStepsInOrder(t *testing.T) {
	runTest(t, func(t *testing.T, r runner) {
		ctx := context.Background()
		s := r.open(t)
		var es []LogEntry
		for i := range 700 {
			es = append(es, LogEntry{RequestNo: fmt.Sprint("r", i), ActivityID: 1, SKUID: 10, UserID: int64(i), Quantity: 1,
				Status: StatusCompensating, Remark: "send failed"})
		}
		es = append(es, LogEntry{RequestNo: "r5", ActivityID: 1, SKUID: 10, UserID: 5, Quantity: 1,
			Status: StatusFailed, Remark: "released"})
		if err := s.LogRequests(ctx, es); err != nil {
			t.Fatal(err)
		}
		for _, c := range []struct {
			rn, status string
			steps      int
		}{{"r5", StatusFailed, 2}, {"r0", StatusCompensating, 1}, {"r699", StatusCompensating, 1}} {
			e, err := s.RequestLog(ctx, c.rn)
			if err != nil || e.Status != c.status {
				t.Errorf("%s: request log %+v, %v; want %s", c.rn, e, err, c.status)
			}
			h, err := s.RequestEvents(ctx, c.rn)
			if err != nil || len(h) != c.steps || h[len(h)-1].Status != c.status {
				t.Errorf("%s: history %+v, %v", c.rn, h, err)
			}
		}
	})
}

func TestActivitiesComeBackFromTheDatabase(t *testing.T) {
	runTest(t, func(t *testing.T, r runner) {
		ctx := context.Background()
		s := r.open(t)
		a := activity(2, sale.SKU{ID: 20, Stock: 5, Price: 990, LimitPerUser: 1, Hot: true}, sale.SKU{ID: 21, Stock: 7, LimitPerUser: 2})
		a.RequireToken, a.ReservedUsers, a.Prequeue = true, []int64{5, 6}, 15
		put(t, s, a)
		put(t, s, activity(1, sale.SKU{ID: 10, Stock: 3}))
		if err := s.Restock(ctx, 2, 21, 3); err != nil {
			t.Fatal(err)
		}
		got, err := s.Activities(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if len(got) != 2 || got[0].ID != 1 || got[1].ID != 2 {
			t.Fatalf("activities %+v", got)
		}
		b := got[1]
		if !b.RequireToken || fmt.Sprint(b.ReservedUsers) != "[5 6]" || b.State != sale.StateOnline || b.Prequeue != 15 || got[0].Prequeue != 0 ||
			b.Start.UnixMilli() != a.Start.UnixMilli() || b.End.UnixMilli() != a.End.UnixMilli() {
			t.Errorf("activity 2 = %+v", b)
		}
		want := []sale.SKU{{ID: 20, Stock: 5, Price: 990, LimitPerUser: 1, Hot: true}, {ID: 21, Stock: 10, LimitPerUser: 2}}
		if fmt.Sprint(b.SKUs) != fmt.Sprint(want) {
			t.Errorf("skus %+v, want %+v (stock = snapshot initial, restock included)", b.SKUs, want)
		}
	})
}

// TestHotShardComesBackFromTheDatabase: a SKU's explicit hot shard is
// where its keys live, so a rebuild from the database must find it (and
// a SKU without one must not come back with one: the rule places it).
func TestHotShardComesBackFromTheDatabase(t *testing.T) {
	runTest(t, func(t *testing.T, r runner) {
		one := 1
		s := r.open(t)
		put(t, s, activity(3, sale.SKU{ID: 30, Stock: 5, LimitPerUser: 1, Hot: true, HotShard: &one}, sale.SKU{ID: 31, Stock: 5, LimitPerUser: 1, Hot: true}))
		got, err := s.Activities(context.Background())
		if err != nil || len(got) != 1 || len(got[0].SKUs) != 2 {
			t.Fatalf("activities %+v, %v", got, err)
		}
		if k := got[0].SKUs[0]; k.HotShard == nil || *k.HotShard != 1 {
			t.Errorf("sku 30: hotShard %v, want 1", k.HotShard)
		}
		if k := got[0].SKUs[1]; k.HotShard != nil {
			t.Errorf("sku 31: hotShard %v, want none", *k.HotShard)
		}
	})
}

// TestBucketsComeBackFromTheDatabase: a SKU's buckets and their pinned hot
// shards are where its keys live, so a rebuild from the database must find
// them (and a SKU without buckets must come back without).
func TestBucketsComeBackFromTheDatabase(t *testing.T) {
	runTest(t, func(t *testing.T, r runner) {
		s := r.open(t)
		put(t, s, activity(4, sale.SKU{ID: 40, Stock: 8, LimitPerUser: 1, Hot: true, Buckets: 4, HotShards: []int{0, 1}},
			sale.SKU{ID: 41, Stock: 5, LimitPerUser: 1}))
		got, err := s.Activities(context.Background())
		if err != nil || len(got) != 1 || len(got[0].SKUs) != 2 {
			t.Fatalf("activities %+v, %v", got, err)
		}
		if k := got[0].SKUs[0]; k.Buckets != 4 || fmt.Sprint(k.HotShards) != "[0 1]" {
			t.Errorf("sku 40: buckets %d on %v, want 4 on [0 1]", k.Buckets, k.HotShards)
		}
		if k := got[0].SKUs[1]; k.Buckets != 0 || k.HotShards != nil {
			t.Errorf("sku 41: buckets %d on %v, want none", k.Buckets, k.HotShards)
		}
	})
}

func TestLedgerAndRecountSnapshot(t *testing.T) {
	runTest(t, func(t *testing.T, r runner) {
		ctx := context.Background()
		s := r.open(t)
		put(t, s, activity(1, sale.SKU{ID: 10, Stock: 5}))
		save(t, s, msg("r1", 1, 10, 100), msg("r2", 1, 10, 101))
		if _, _, err := s.CloseOrder(ctx, "Or2", future); err != nil {
			t.Fatal(err)
		}
		sn, refs, err := s.Ledger(ctx, 1, 10)
		if err != nil || sn.Sold != 1 || len(refs) != 2 {
			t.Fatalf("ledger %+v %+v %v", sn, refs, err)
		}
		live := 0
		for _, o := range refs {
			if o.Live() {
				live++
			}
		}
		if live != 1 {
			t.Errorf("%d live orders in %+v", live, refs)
		}
		// Drift injected behind the store's back.
		if _, err := s.(*sqlStore).w.Exec(`UPDATE seckill_stock_snapshot SET available = 4, sold = 3`); err != nil {
			t.Fatal(err)
		}
		before, after, err := s.RecountSnapshot(ctx, 1, 10)
		if err != nil || before.Sold != 3 || after.Sold != 1 || after.Available != 4 || after.Version != before.Version+1 {
			t.Fatalf("recount %+v -> %+v, %v", before, after, err)
		}
		wantStock(t, s, 1, 10, 5, 4)
		if _, _, err := s.Ledger(ctx, 1, 99); !errors.Is(err, ErrNotFound) {
			t.Errorf("ledger of an unknown sku: %v", err)
		}
	})
}

// TestOldOrdersTableIsMigrated opens a database whose seckill_order has the
// schema before the live flag: closed orders stop blocking their buyers.
func TestOldOrdersTableIsMigrated(t *testing.T) {
	runTest(t, func(t *testing.T, r runner) {
		ctx := context.Background()
		db, err := sql.Open(map[string]string{"sqlite": "sqlite", "mysql": "mysql"}[r.cfg.Driver], r.cfg.DSN)
		if err != nil {
			t.Fatal(err)
		}
		defer db.Close()
		old := `CREATE TABLE seckill_order (id INTEGER PRIMARY KEY AUTOINCREMENT, order_no VARCHAR(80) NOT NULL UNIQUE,
			request_no VARCHAR(64) NOT NULL UNIQUE, activity_id BIGINT NOT NULL, sku_id BIGINT NOT NULL,
			user_id BIGINT NOT NULL, quantity BIGINT NOT NULL, unit_price_cents BIGINT NOT NULL,
			amount_cents BIGINT NOT NULL, status VARCHAR(32) NOT NULL, trace_id VARCHAR(128) NOT NULL DEFAULT '',
			created_ms BIGINT NOT NULL, updated_ms BIGINT NOT NULL, UNIQUE (activity_id, sku_id, user_id))`
		if r.cfg.Driver == "mysql" {
			old = `CREATE TABLE seckill_order (id BIGINT NOT NULL AUTO_INCREMENT PRIMARY KEY,
				order_no VARCHAR(80) NOT NULL, request_no VARCHAR(64) NOT NULL, activity_id BIGINT NOT NULL,
				sku_id BIGINT NOT NULL, user_id BIGINT NOT NULL, quantity BIGINT NOT NULL,
				unit_price_cents BIGINT NOT NULL, amount_cents BIGINT NOT NULL, status VARCHAR(32) NOT NULL,
				trace_id VARCHAR(128) NOT NULL DEFAULT '', created_ms BIGINT NOT NULL, updated_ms BIGINT NOT NULL,
				UNIQUE KEY uk_order_no (order_no), UNIQUE KEY uk_request_no (request_no),
				UNIQUE KEY uk_activity_sku_user (activity_id, sku_id, user_id),
				KEY idx_status_created (status, created_ms)) ENGINE=InnoDB`
		}
		if _, err := db.Exec(old); err != nil {
			t.Fatal(err)
		}
		if _, err := db.Exec(`INSERT INTO seckill_order (order_no, request_no, activity_id, sku_id, user_id, quantity,
			unit_price_cents, amount_cents, status, created_ms, updated_ms) VALUES
			('Oold1', 'old1', 1, 10, 100, 1, 990, 990, 'CLOSED', 1, 1),
			('Oold2', 'old2', 1, 10, 101, 1, 990, 990, 'PAID', 1, 1)`); err != nil {
			t.Fatal(err)
		}
		db.Close()
		s := r.open(t)
		put(t, s, activity(1, sale.SKU{ID: 10, Stock: 5}))
		out := save(t, s, msg("new1", 1, 10, 100), msg("new2", 1, 10, 101))
		if out[0].Kind != Created || out[1].Kind != Duplicate || out[1].OrderNo != "Oold2" {
			t.Errorf("after migration: %+v", out)
		}
		if n, _, err := s.CountOrders(ctx, 1, 10); err != nil || n != 2 {
			t.Errorf("%d live orders, %v; want 2", n, err)
		}
		// The live flag's SQLite table copy must not lose the user index.
		name := map[string]string{"sqlite": "idx_order_user_created", "mysql": "idx_user_created"}[r.cfg.Driver]
		if has, err := s.(*sqlStore).hasIndex(ctx, "seckill_order", name); err != nil || !has {
			t.Errorf("after migration the user index %s: %v, %v", name, has, err)
		}
		s.Close()
		r.open(t) // migrating the migrated table is a no-op
	})
}

// TestRebuySwitchComesBackFromTheDatabase: rebuyAfterClose round-trips
// through the activity row — false stays false, absent and true read as
// the default (absent) — and putting an activity again changes it both ways.
func TestRebuySwitchComesBackFromTheDatabase(t *testing.T) {
	runTest(t, func(t *testing.T, r runner) {
		s := r.open(t)
		yes, no := true, false
		off := activity(1, sale.SKU{ID: 10, Stock: 1})
		off.RebuyAfterClose = &no
		on := activity(2, sale.SKU{ID: 20, Stock: 1})
		on.RebuyAfterClose = &yes
		put(t, s, off)
		put(t, s, on)
		put(t, s, activity(3, sale.SKU{ID: 30, Stock: 1}))
		wantRebuy(t, s, map[int64]string{1: "false", 2: "default", 3: "default"})
		off.RebuyAfterClose, on.RebuyAfterClose = nil, &no
		put(t, s, off)
		put(t, s, on)
		wantRebuy(t, s, map[int64]string{1: "default", 2: "false", 3: "default"})
		s.Close()
		// What another process reads after a restart.
		wantRebuy(t, r.open(t), map[int64]string{1: "default", 2: "false", 3: "default"})
	})
}

// TestRiskPolicyComesBackFromTheDatabase: an activity's risk policy
// (riskOnError, switched live by the admin API) round-trips through the
// activity row, so an activity rebuilt from the database after Redis lost
// its catalog keeps the policy on-call chose; putting it again changes it
// both ways, and none reads as none.
func TestRiskPolicyComesBackFromTheDatabase(t *testing.T) {
	runTest(t, func(t *testing.T, r runner) {
		s := r.open(t)
		deny := activity(1, sale.SKU{ID: 10, Stock: 1})
		deny.RiskOnError = sale.RiskDeny
		allow := activity(2, sale.SKU{ID: 20, Stock: 1})
		allow.RiskOnError = sale.RiskAllow
		put(t, s, deny)
		put(t, s, allow)
		put(t, s, activity(3, sale.SKU{ID: 30, Stock: 1}))
		wantRisk(t, s, map[int64]string{1: sale.RiskDeny, 2: sale.RiskAllow, 3: ""})
		deny.RiskOnError, allow.RiskOnError = sale.RiskAllow, sale.RiskDeny
		put(t, s, deny)
		put(t, s, allow)
		s.Close()
		wantRisk(t, r.open(t), map[int64]string{1: sale.RiskAllow, 2: sale.RiskDeny, 3: ""})
	})
}

// wantRisk checks each activity's RiskOnError as Activities reads it.
func wantRisk(t *testing.T, s Store, want map[int64]string) {
	t.Helper()
	acts, err := s.Activities(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	got := map[int64]string{}
	for _, a := range acts {
		got[a.ID] = a.RiskOnError
	}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("riskOnError by activity %v, want %v", got, want)
	}
}

// wantRebuy checks each activity's RebuyAfterClose as Activities reads it:
// "false", or "default" for nil.
func wantRebuy(t *testing.T, s Store, want map[int64]string) {
	t.Helper()
	acts, err := s.Activities(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	got := map[int64]string{}
	for _, a := range acts {
		switch {
		case a.RebuyAfterClose == nil:
			got[a.ID] = "default"
		case *a.RebuyAfterClose:
			got[a.ID] = "true" // never: true is the default, read as absent
		default:
			got[a.ID] = "false"
		}
	}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("rebuyAfterClose by activity %v, want %v", got, want)
	}
}

// TestOldItemTableIsMigrated: a flash_sale_item made before hot_shard
// gains the column, its rows reading as "no explicit shard".
func TestOldItemTableIsMigrated(t *testing.T) {
	runTest(t, func(t *testing.T, r runner) {
		db, err := sql.Open(map[string]string{"sqlite": "sqlite", "mysql": "mysql"}[r.cfg.Driver], r.cfg.DSN)
		if err != nil {
			t.Fatal(err)
		}
		defer db.Close()
		if _, err := db.Exec(`CREATE TABLE flash_sale_item (activity_id BIGINT NOT NULL, sku_id BIGINT NOT NULL,
			price_cents BIGINT NOT NULL, stock BIGINT NOT NULL, limit_per_user BIGINT NOT NULL,
			hot TINYINT NOT NULL DEFAULT 0, PRIMARY KEY (activity_id, sku_id))`); err != nil {
			t.Fatal(err)
		}
		if _, err := db.Exec(`INSERT INTO flash_sale_item VALUES (1, 10, 0, 5, 1, 1)`); err != nil {
			t.Fatal(err)
		}
		s := r.open(t)
		var n int
		if err := db.QueryRow(`SELECT COUNT(*) FROM flash_sale_item WHERE hot_shard IS NULL`).Scan(&n); err != nil || n != 1 {
			t.Fatalf("migrated rows without a shard: %d, %v", n, err)
		}
		two := 2
		put(t, s, activity(2, sale.SKU{ID: 20, Stock: 1, LimitPerUser: 1, Hot: true, HotShard: &two}))
		s.Close()
		r.open(t) // no-op the second time
		if err := db.QueryRow(`SELECT hot_shard FROM flash_sale_item WHERE sku_id = 20`).Scan(&n); err != nil || n != 2 {
			t.Fatalf("hot_shard of sku 20: %d, %v", n, err)
		}
	})
}

// TestOldActivityTableIsMigrated opens a database whose flash_sale_activity
// predates rebuy_after_close and risk_on_error: the columns are added with
// their defaults (1, empty) on the existing row, the activity reads as
// allowing re-buy with no risk policy of its own, the switches can then be
// set and are kept, and migrating again is a no-op.
func TestOldActivityTableIsMigrated(t *testing.T) {
	runTest(t, func(t *testing.T, r runner) {
		db, err := sql.Open(map[string]string{"sqlite": "sqlite", "mysql": "mysql"}[r.cfg.Driver], r.cfg.DSN)
		if err != nil {
			t.Fatal(err)
		}
		defer db.Close()
		old := `CREATE TABLE flash_sale_activity (id INTEGER NOT NULL PRIMARY KEY, start_ms INTEGER NOT NULL,
			end_ms INTEGER NOT NULL, state TEXT NOT NULL, require_token INTEGER NOT NULL DEFAULT 0,
			updated_ms INTEGER NOT NULL)`
		if r.cfg.Driver == "mysql" {
			old = `CREATE TABLE flash_sale_activity (id BIGINT NOT NULL PRIMARY KEY, start_ms BIGINT NOT NULL,
				end_ms BIGINT NOT NULL, state VARCHAR(16) NOT NULL, require_token TINYINT NOT NULL DEFAULT 0,
				updated_ms BIGINT NOT NULL) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4`
		}
		if _, err := db.Exec(old); err != nil {
			t.Fatal(err)
		}
		now := time.Now()
		if _, err := db.Exec(`INSERT INTO flash_sale_activity (id, start_ms, end_ms, state, require_token, updated_ms)
			VALUES (1, ?, ?, 'ONLINE', 1, 1)`, now.Add(-time.Hour).UnixMilli(), now.Add(time.Hour).UnixMilli()); err != nil {
			t.Fatal(err)
		}
		s := r.open(t)
		var rebuy int
		if err := db.QueryRow(`SELECT rebuy_after_close FROM flash_sale_activity WHERE id = 1`).Scan(&rebuy); err != nil || rebuy != 1 {
			t.Fatalf("migrated row: rebuy_after_close %d, %v; want the default 1", rebuy, err)
		}
		acts, err := s.Activities(context.Background())
		if err != nil || len(acts) != 1 || !acts[0].RequireToken || acts[0].RebuyAfterClose != nil || acts[0].RiskOnError != "" || acts[0].Prequeue != 0 {
			t.Fatalf("activities after migration: %+v %v", acts, err)
		}
		// A row inserted without the column (what an older process that is
		// still running writes) takes the default too.
		if _, err := db.Exec(`INSERT INTO flash_sale_activity (id, start_ms, end_ms, state, require_token, updated_ms)
			VALUES (2, ?, ?, 'ONLINE', 0, 1)`, now.Add(-time.Hour).UnixMilli(), now.Add(time.Hour).UnixMilli()); err != nil {
			t.Fatal(err)
		}
		no := false
		a := activity(3, sale.SKU{ID: 30, Stock: 1})
		a.RebuyAfterClose = &no
		a.RiskOnError = sale.RiskDeny
		put(t, s, a)
		wantRebuy(t, s, map[int64]string{1: "default", 2: "default", 3: "false"})
		s.Close()
		s = r.open(t) // no-op the second time
		wantRebuy(t, s, map[int64]string{1: "default", 2: "default", 3: "false"})
		wantRisk(t, s, map[int64]string{1: "", 2: "", 3: sale.RiskDeny})
	})
}
