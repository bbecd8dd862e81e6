package store

import (
	"context"
	"database/sql"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"seckill/sale"
)

// userOrdersFixture writes orders of users 100 and 200 on SKUs 10–16 of
// activity 1: three in one batch (one millisecond), two more in two
// batches of one later millisecond, and one of 100's closed. It returns
// user 100's requestNos.
func userOrdersFixture(t *testing.T, r runner) (Store, []string) {
	t.Helper()
	ctx := context.Background()
	clock := time.UnixMilli(time.Now().Add(-time.Hour).UnixMilli())
	s := r.open(t, WithClock(func() time.Time { return clock }))
	var skus []sale.SKU
	for id := int64(10); id <= 16; id++ {
		skus = append(skus, sale.SKU{ID: id, Stock: 1000, Price: 990})
	}
	put(t, s, activity(1, skus...))
	save(t, s, msg("a1", 1, 10, 100), msg("b1", 1, 10, 200))
	clock = clock.Add(time.Second)
	save(t, s, msg("a2", 1, 11, 100), msg("b2", 1, 11, 200), msg("a3", 1, 12, 100), msg("a4", 1, 13, 100))
	clock = clock.Add(time.Second)
	save(t, s, msg("a5", 1, 14, 100))
	save(t, s, msg("b3", 1, 14, 200))
	save(t, s, msg("a6", 1, 15, 100))
	if _, closed, err := s.CloseOrder(ctx, "Oa3", clock.Add(time.Hour)); err != nil || !closed {
		t.Fatalf("close Oa3: %v, %v", closed, err)
	}
	return s, []string{"a1", "a2", "a3", "a4", "a5", "a6"}
}

// newestFirst is the expected order, computed from each order read alone
// (Store.OrderByRequest), sorted by (created, id) descending.
func newestFirst(t *testing.T, s Store, rns []string) []string {
	t.Helper()
	var os []Order
	for _, rn := range rns {
		o, err := s.OrderByRequest(context.Background(), rn)
		if err != nil {
			t.Fatal(err)
		}
		os = append(os, o)
	}
	slices.SortFunc(os, func(a, b Order) int {
		if c := b.Created.Compare(a.Created); c != 0 {
			return c
		}
		return int(b.ID - a.ID)
	})
	out := make([]string, len(os))
	for i, o := range os {
		out[i] = o.RequestNo
	}
	return out
}

func TestUserOrdersAreTheOwnersNewestFirst(t *testing.T) {
	runTest(t, func(t *testing.T, r runner) {
		ctx := context.Background()
		s, mine := userOrdersFixture(t, r)
		want := newestFirst(t, s, mine)
		// By hand: a5, a6 share the last millisecond, a2, a3, a4 the one
		// before; a1 is the oldest.
		if !slices.Contains(want[:2], "a5") || !slices.Contains(want[:2], "a6") || want[5] != "a1" {
			t.Fatalf("fixture: newest first %v", want)
		}
		got, err := s.UserOrders(ctx, 100, OrderCursor{}, 50)
		if err != nil {
			t.Fatal(err)
		}
		var rns []string
		for _, o := range got {
			rns = append(rns, o.RequestNo)
			if o.UserID != 100 {
				t.Errorf("user 100 got user %d's order %s", o.UserID, o.OrderNo)
			}
			if o.RequestNo == "a3" && o.Status != OrderClosed || o.RequestNo != "a3" && o.Status != OrderPendingPayment {
				t.Errorf("order %s status %s", o.OrderNo, o.Status)
			}
			if o.OrderNo != "O"+o.RequestNo || o.ActivityID != 1 || o.Quantity != 1 || o.Amount != 990 {
				t.Errorf("order %+v", o)
			}
		}
		if !slices.Equal(rns, want) {
			t.Fatalf("user 100's orders %v, want %v", rns, want)
		}
		theirs, err := s.UserOrders(ctx, 200, OrderCursor{}, 50)
		if err != nil || len(theirs) != 3 || theirs[0].RequestNo != "b3" || theirs[2].RequestNo != "b1" {
			t.Fatalf("user 200's orders %+v, %v", theirs, err)
		}
		if none, err := s.UserOrders(ctx, 300, OrderCursor{}, 50); err != nil || len(none) != 0 {
			t.Fatalf("a user without orders: %+v, %v", none, err)
		}
		if none, err := s.UserOrders(ctx, 100, OrderCursor{}, 0); err != nil || len(none) != 0 {
			t.Fatalf("limit 0: %+v, %v", none, err)
		}
	})
}

func TestUserOrdersPageAcrossEqualTimestamps(t *testing.T) {
	runTest(t, func(t *testing.T, r runner) {
		ctx := context.Background()
		s, mine := userOrdersFixture(t, r)
		want := newestFirst(t, s, mine)
		for _, limit := range []int{1, 2, 4, 6, 50} {
			var got []string
			after, pages := OrderCursor{}, 0
			for {
				page, err := s.UserOrders(ctx, 100, after, limit)
				if err != nil {
					t.Fatal(err)
				}
				if len(page) > limit {
					t.Fatalf("limit %d: a page of %d", limit, len(page))
				}
				for _, o := range page {
					got = append(got, o.RequestNo)
				}
				if len(page) < limit {
					break
				}
				after = page[len(page)-1].Cursor()
				if pages++; pages > len(mine)+1 {
					t.Fatalf("limit %d: paging does not end: %v", limit, got)
				}
			}
			if !slices.Equal(got, want) {
				t.Errorf("limit %d: pages give %v, want %v", limit, got, want)
			}
		}
		// A cursor in the middle of a millisecond: after the newest of
		// a2, a3, a4 come the other two, then a1.
		mid, err := s.OrderByRequest(ctx, want[2])
		if err != nil {
			t.Fatal(err)
		}
		rest, err := s.UserOrders(ctx, 100, mid.Cursor(), 50)
		if err != nil {
			t.Fatal(err)
		}
		var rns []string
		for _, o := range rest {
			rns = append(rns, o.RequestNo)
		}
		if !slices.Equal(rns, want[3:]) {
			t.Errorf("after %s: %v, want %v", want[2], rns, want[3:])
		}
	})
}

// explain returns the database's plan for query q, as text.
func explain(t *testing.T, s Store, driver, q string, args ...any) string {
	t.Helper()
	q = "EXPLAIN QUERY PLAN " + q
	if driver == "mysql" {
		q = strings.TrimPrefix(q, "EXPLAIN QUERY PLAN ")
		q = "EXPLAIN " + q
	}
	rows, err := s.(*sqlStore).r.Query(q, args...)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	cols, _ := rows.Columns()
	var b strings.Builder
	for rows.Next() {
		vals := make([]sql.NullString, len(cols))
		ptrs := make([]any, len(cols))
		for i := range vals {
			ptrs[i] = &vals[i]
		}
		if err := rows.Scan(ptrs...); err != nil {
			t.Fatal(err)
		}
		for i, v := range vals {
			b.WriteString(cols[i] + "=" + v.String + " ")
		}
		b.WriteString("\n")
	}
	return b.String()
}

func TestUserOrdersReadByTheUserIndex(t *testing.T) {
	runTest(t, func(t *testing.T, r runner) {
		s, _ := userOrdersFixture(t, r)
		// On a table of a few rows MariaDB rightly prefers a scan: give
		// it a crowd of other buyers, as in a sale, and fresh statistics.
		var msgs []sale.Message
		for u := int64(1000); u < 1500; u++ {
			msgs = append(msgs, msg("c"+strconv.FormatInt(u, 10), 1, 16, u))
		}
		save(t, s, msgs...)
		if r.cfg.Driver == "mysql" {
			if _, err := s.(*sqlStore).w.Exec(`ANALYZE TABLE seckill_order`); err != nil {
				t.Fatal(err)
			}
		}
		name := map[string]string{"sqlite": "idx_order_user_created", "mysql": "idx_user_created"}[r.cfg.Driver]
		now := time.Now().UnixMilli()
		for _, q := range []struct {
			name, sql string
			args      []any
		}{
			{"first page", userOrdersFirst, []any{100, 20}},
			{"next page", userOrdersAfter, []any{100, now, now, 1 << 40, 20}},
		} {
			plan := explain(t, s, r.cfg.Driver, q.sql, q.args...)
			if !strings.Contains(plan, name) || strings.Contains(plan, "TEMP B-TREE") || strings.Contains(plan, "filesort") {
				t.Errorf("the %s does not read the index %s in order:\n%s", q.name, name, plan)
			}
		}
	})
}

// TestOrdersTableWithoutTheUserIndexIsMigrated opens a database whose
// seckill_order has the live flag but not the user index: the index is
// added, and migrating again is a no-op.
func TestOrdersTableWithoutTheUserIndexIsMigrated(t *testing.T) {
	runTest(t, func(t *testing.T, r runner) {
		ctx := context.Background()
		s := r.open(t)
		st := s.(*sqlStore)
		drop := `DROP INDEX idx_order_user_created`
		name := "idx_order_user_created"
		if r.cfg.Driver == "mysql" {
			drop, name = `ALTER TABLE seckill_order DROP INDEX idx_user_created`, "idx_user_created"
		}
		if _, err := st.w.ExecContext(ctx, drop); err != nil {
			t.Fatal(err)
		}
		if has, err := st.hasIndex(ctx, "seckill_order", name); err != nil || has {
			t.Fatalf("after dropping: has %v, %v", has, err)
		}
		s.Close()
		for range 2 {
			st := r.open(t).(*sqlStore)
			if has, err := st.hasIndex(ctx, "seckill_order", name); err != nil || !has {
				t.Fatalf("after migrating: has %v, %v", has, err)
			}
			st.Close()
		}
	})
}
