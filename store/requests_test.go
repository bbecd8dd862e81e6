package store

import (
	"context"
	"database/sql"
	"fmt"
	"strings"
	"testing"
	"time"

	"seckill/sale"
)

// TestUserRequestsPagesNewestFirst: a buyer's entries of one activity, and
// of every activity, come newest first, a page at a time, the cursor
// neither skipping nor repeating entries made in the same millisecond;
// another buyer's entries never show.
func TestUserRequestsPagesNewestFirst(t *testing.T) {
	runTest(t, func(t *testing.T, r runner) {
		s := r.open(t)
		ctx := context.Background()
		base := time.UnixMilli(time.Now().UnixMilli())
		var es []LogEntry
		for i := 0; i < 7; i++ {
			act := int64(1 + i%2)
			es = append(es, LogEntry{RequestNo: fmt.Sprintf("r%d", i), ActivityID: act, SKUID: 10, UserID: 42,
				Quantity: 1, Status: StatusRejected, Remark: "SOLD_OUT", Created: base.Add(time.Duration(i/2) * time.Millisecond)})
		}
		es = append(es, LogEntry{RequestNo: "other", ActivityID: 1, SKUID: 10, UserID: 43, Quantity: 1,
			Status: StatusRejected, Created: base.Add(time.Hour)})
		if err := s.LogRequests(ctx, es); err != nil {
			t.Fatal(err)
		}
		var got []string
		var cur RequestCursor
		for pages := 0; ; pages++ {
			page, next, err := s.UserRequests(ctx, 42, 0, cur, 3)
			if err != nil {
				t.Fatal(err)
			}
			for _, e := range page {
				if e.UserID != 42 {
					t.Fatalf("entry of user %d in user 42's list", e.UserID)
				}
				got = append(got, e.RequestNo)
			}
			if next.IsZero() {
				break
			}
			if pages > 5 {
				t.Fatal("the cursor never ends")
			}
			if cur, err = ParseRequestCursor(next.String()); err != nil {
				t.Fatal(err)
			}
		}
		want := "[r6 r5 r4 r3 r2 r1 r0]"
		if fmt.Sprint(got) != want {
			t.Fatalf("pages read %v, want %s", got, want)
		}
		page, _, err := s.UserRequests(ctx, 42, 2, RequestCursor{}, 10)
		if err != nil {
			t.Fatal(err)
		}
		got = got[:0]
		for _, e := range page {
			got = append(got, e.RequestNo)
		}
		if fmt.Sprint(got) != "[r5 r3 r1]" {
			t.Fatalf("activity 2 reads %v", got)
		}
		h, err := s.RequestHistories(ctx, []string{"r0", "r5", "none"})
		if err != nil {
			t.Fatal(err)
		}
		if len(h["r0"]) != 1 || h["r0"][0].Status != StatusRejected || len(h["r5"]) != 1 || len(h["none"]) != 0 {
			t.Fatalf("histories %+v", h)
		}
	})
}

func TestParseRequestCursorRefusesGarbage(t *testing.T) {
	for _, s := range []string{"x", "1", "1-", "-1", "0-1", "1-0", "1-2-3", "a-b"} {
		if _, err := ParseRequestCursor(s); err == nil {
			t.Errorf("cursor %q accepted", s)
		}
	}
	c, err := ParseRequestCursor("1700000000000-9")
	if err != nil || c != (RequestCursor{1700000000000, 9}) {
		t.Fatalf("good cursor: %+v %v", c, err)
	}
}

// TestRejectionsAddUpPerMinute: counts of one (activity, sku, reason,
// minute) add up over flushes; other minutes and reasons stay apart.
func TestRejectionsAddUpPerMinute(t *testing.T) {
	runTest(t, func(t *testing.T, r runner) {
		s := r.open(t)
		ctx := context.Background()
		m := time.Now().Truncate(time.Minute)
		for i := 0; i < 2; i++ {
			if err := s.CountRejections(ctx, []RejectCount{
				{ActivityID: 7, SKUID: 70, Reason: "SOLD_OUT", Minute: m.Add(5 * time.Second), N: 10},
				{ActivityID: 7, SKUID: 70, Reason: "NOT_OPEN", Minute: m, N: 1},
				{ActivityID: 7, SKUID: 70, Reason: "SOLD_OUT", Minute: m.Add(time.Minute), N: 3},
				{ActivityID: 8, SKUID: 80, Reason: "SOLD_OUT", Minute: m, N: 99},
			}); err != nil {
				t.Fatal(err)
			}
		}
		got, err := s.Rejections(ctx, 7, m)
		if err != nil {
			t.Fatal(err)
		}
		want := []RejectCount{
			{ActivityID: 7, SKUID: 70, Reason: "NOT_OPEN", Minute: m, N: 2},
			{ActivityID: 7, SKUID: 70, Reason: "SOLD_OUT", Minute: m, N: 20},
			{ActivityID: 7, SKUID: 70, Reason: "SOLD_OUT", Minute: m.Add(time.Minute), N: 6},
		}
		if len(got) != len(want) {
			t.Fatalf("rejections %+v", got)
		}
		for i := range want {
			if got[i].Reason != want[i].Reason || got[i].N != want[i].N || !got[i].Minute.Equal(want[i].Minute) {
				t.Fatalf("rejection %d: %+v, want %+v", i, got[i], want[i])
			}
		}
	})
}

// TestProductDataAndSourceComeBack: a SKU's title and original price are
// stored and read back; an order's source is SECKILL; the request log
// keeps the message id once one step named it.
func TestProductDataAndSourceComeBack(t *testing.T) {
	runTest(t, func(t *testing.T, r runner) {
		s := r.open(t)
		ctx := context.Background()
		put(t, s, activity(1, sale.SKU{ID: 10, Stock: 5, Price: 990, Title: "茶杯 · Tea cup", OriginalPrice: 1990}))
		acts, err := s.Activities(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if k := acts[0].SKUs[0]; k.Title != "茶杯 · Tea cup" || k.OriginalPrice != 1990 {
			t.Fatalf("sku read back %+v", k)
		}
		outs, err := s.SaveBatch(ctx, []sale.Message{msg("m1", 1, 10, 5)}, Delivered("ok"), MessageIDs([]string{"3/1234"}))
		if err != nil || outs[0].Kind != Created {
			t.Fatalf("save: %+v %v", outs, err)
		}
		o, err := s.OrderByRequest(ctx, "m1")
		if err != nil || o.Source != SourceSeckill {
			t.Fatalf("order %+v %v", o, err)
		}
		if err := s.LogRequest(ctx, LogEntry{RequestNo: "m1", ActivityID: 1, SKUID: 10, UserID: 5, Quantity: 1,
			Status: StatusSuccess, OrderNo: o.OrderNo}); err != nil {
			t.Fatal(err)
		}
		l, err := s.RequestLog(ctx, "m1")
		if err != nil || l.MessageID != "3/1234" {
			t.Fatalf("log %+v %v", l, err)
		}
	})
}

// TestOldRequestLogAndItemsAreMigrated: tables made before message_id,
// the (user, activity) index, the product columns and source gain them
// in place, their rows kept; migrating again is a no-op.
func TestOldRequestLogAndItemsAreMigrated(t *testing.T) {
	runTest(t, func(t *testing.T, r runner) {
		db, err := sql.Open(map[string]string{"sqlite": "sqlite", "mysql": "mysql"}[r.cfg.Driver], r.cfg.DSN)
		if err != nil {
			t.Fatal(err)
		}
		defer db.Close()
		for _, q := range []string{
			`CREATE TABLE seckill_request_log (id INTEGER PRIMARY KEY AUTO_INCREMENT, request_no VARCHAR(64) NOT NULL UNIQUE,
				activity_id BIGINT NOT NULL, sku_id BIGINT NOT NULL, user_id BIGINT NOT NULL, quantity BIGINT NOT NULL,
				status VARCHAR(32) NOT NULL, order_no VARCHAR(80) NOT NULL DEFAULT '', trace_id VARCHAR(128) NOT NULL DEFAULT '',
				remark VARCHAR(255) NOT NULL DEFAULT '', created_ms BIGINT NOT NULL, updated_ms BIGINT NOT NULL)`,
			`INSERT INTO seckill_request_log (request_no, activity_id, sku_id, user_id, quantity, status, created_ms, updated_ms)
				VALUES ('old', 1, 10, 42, 1, 'SUCCESS', 1, 1)`,
			`CREATE TABLE flash_sale_item (activity_id BIGINT NOT NULL, sku_id BIGINT NOT NULL,
				price_cents BIGINT NOT NULL, stock BIGINT NOT NULL, limit_per_user BIGINT NOT NULL,
				hot TINYINT NOT NULL DEFAULT 0, hot_shard INT NULL, PRIMARY KEY (activity_id, sku_id))`,
			`INSERT INTO flash_sale_item VALUES (1, 10, 990, 5, 1, 0, NULL)`,
		} {
			if r.cfg.Driver == "sqlite" {
				q = strings.ReplaceAll(q, "AUTO_INCREMENT", "AUTOINCREMENT")
			}
			if _, err := db.Exec(q); err != nil {
				t.Fatal(err)
			}
		}
		s := r.open(t)
		es, _, err := s.UserRequests(context.Background(), 42, 1, RequestCursor{}, 10)
		if err != nil || len(es) != 1 || es[0].RequestNo != "old" || es[0].MessageID != "" {
			t.Fatalf("old row after the migration: %+v %v", es, err)
		}
		var title string
		var orig int64
		if err := db.QueryRow(`SELECT title, original_price_cents FROM flash_sale_item`).Scan(&title, &orig); err != nil ||
			title != "" || orig != 0 {
			t.Fatalf("migrated item: %q %d %v", title, orig, err)
		}
		s.Close()
		r.open(t) // no-op the second time
	})
}
