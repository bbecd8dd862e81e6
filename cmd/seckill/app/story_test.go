package app

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"seckill/admin"
	"seckill/cmd/seckill/config"
	"seckill/internal/testenv"
	"seckill/internal/token"
	"seckill/sale"
	"seckill/store"
)

// lookup reads support's lookup of user (in activity, 0: every one) from
// the admin API.
func (c *cluster) lookup(t *testing.T, user, activity int64, query string) admin.UserRequests {
	t.Helper()
	u := fmt.Sprintf("%s/admin/v1/users/%d/requests?%s", c.admin, user, query)
	if activity != 0 {
		u += fmt.Sprintf("&activity=%d", activity)
	}
	r := send(t, "GET", u, 0, "Bearer "+c.cfg.Admin.Token, "")
	if r.status != 200 {
		t.Fatalf("lookup of user %d: %d %s", user, r.status, r.raw)
	}
	var out admin.UserRequests
	if err := json.Unmarshal([]byte(r.raw), &out); err != nil {
		t.Fatal(err)
	}
	return out
}

// TestEveryDecisionIsInTheRequestLog buys through the real edge, engine,
// Kafka and store: the refusals that cost something (the engine's
// DUPLICATE and OVER_LIMIT, a token refusal) become REJECTED rows of their
// buyer with reason and trace id; the free ones (not open, the sold-out
// flag, an unknown SKU) become minute counters; a token activity's ticket
// has TOKEN_VERIFIED in its history; support's lookup shows every attempt
// and ticket of a buyer, newest first, paged, and refuses bad arguments.
func TestEveryDecisionIsInTheRequestLog(t *testing.T) {
	c := startClusterWith(t, sqliteOnly(), func(cfg *config.Config) {
		cfg.Edge.RejectFlush = 100 * time.Millisecond
		cfg.Edge.Rate.UserSKULimit, cfg.Edge.Rate.UserPerSecond = 0, 0
		cfg.Token.Keys = []token.Key{tokenKey}
		crowdBudgets(cfg)
	})
	now := time.Now()
	c.preheat(t, openActivity(7, sale.SKU{ID: 7001, Stock: 2, Price: 990, LimitPerUser: 1}))
	c.preheat(t, sale.Activity{ID: 8, Start: now.Add(time.Hour), End: now.Add(2 * time.Hour), State: sale.StateOnline,
		SKUs: []sale.SKU{{ID: 8001, Stock: 1, LimitPerUser: 1}}})
	c.preheat(t, sale.Activity{ID: 9, Start: now.Add(-time.Minute), End: now.Add(time.Hour), State: sale.StateOnline,
		RequireToken: true, ReservedUsers: []int64{42}, SKUs: []sale.SKU{{ID: 9001, Stock: 5, LimitPerUser: 1}}})
	orderURL := c.base + "/api/v1/flash-sale/order"
	buy := func(user int64, body string) reply { return send(t, "POST", orderURL, user, "", body) }

	first := buy(42, `{"activityId":7,"skuId":7001,"requestId":"trace-first"}`)
	expect(t, "the first purchase", first, 200, "QUEUING")
	expect(t, "the same buyer again", buy(42, `{"activityId":7,"skuId":7001,"requestId":"trace-dup"}`), 409, "DUPLICATE")
	expect(t, "over the limit", buy(43, `{"activityId":7,"skuId":7001,"quantity":3,"requestId":"trace-over"}`), 400, "OVER_LIMIT")
	expect(t, "the last unit", buy(44, `{"activityId":7,"skuId":7001}`), 200, "QUEUING")
	for range 3 {
		expect(t, "after the last unit", buy(45, `{"activityId":7,"skuId":7001}`), 410, "SOLD_OUT")
	}
	expect(t, "before the start", buy(45, `{"activityId":8,"skuId":8001}`), 425, "NOT_OPEN")
	expect(t, "an unknown SKU", buy(45, `{"skuId":123456}`), 404, "UNKNOWN_SKU")
	expect(t, "no token", buy(46, `{"activityId":9,"skuId":9001,"requestId":"trace-notoken"}`), 403, "TOKEN_REQUIRED")
	tok := send(t, "POST", c.base+"/api/v1/flash-sale/token", 42, "", `{"activityId":9,"skuId":9001}`)
	expect(t, "a token", tok, 200, "")
	ticket := buy(42, fmt.Sprintf(`{"activityId":9,"skuId":9001,"token":%q}`, tok.body["token"]))
	expect(t, "the token purchase", ticket, 200, "QUEUING")

	ctx := context.Background()
	st := c.sys.Store
	testenv.EventuallyOK(t, "user 42's story", 15*time.Second, func() error {
		got := c.lookup(t, 42, 7, "")
		var lines []string
		for _, r := range got.Requests {
			lines = append(lines, r.Outcome+" "+r.Reason+" "+r.TraceID)
		}
		if len(got.Requests) != 2 || got.Requests[0].Outcome != "REJECTED" || got.Requests[0].Reason != "DUPLICATE" ||
			got.Requests[0].TraceID != "trace-dup" || !strings.Contains(got.Requests[0].Remark, first.body["requestNo"].(string)) ||
			got.Requests[1].Outcome != "SUCCESS" || got.Requests[1].RequestNo != first.body["requestNo"] ||
			got.Requests[1].Order == nil || got.Requests[1].Order.Source != "SECKILL" || got.Requests[1].MessageID == "" ||
			len(got.Requests[1].History) == 0 {
			return fmt.Errorf("user 42 in activity 7: %v", lines)
		}
		return nil
	})
	testenv.EventuallyOK(t, "the other refusals", 15*time.Second, func() error {
		over := c.lookup(t, 43, 0, "")
		none := c.lookup(t, 46, 9, "")
		if len(over.Requests) != 1 || over.Requests[0].Reason != "OVER_LIMIT" || over.Requests[0].Quantity != 3 ||
			over.Requests[0].SKUID != 7001 || len(none.Requests) != 1 || none.Requests[0].Reason != "TOKEN_REQUIRED" {
			return fmt.Errorf("user 43: %+v; user 46: %+v", over.Requests, none.Requests)
		}
		return nil
	})
	testenv.EventuallyOK(t, "TOKEN_VERIFIED in the token ticket's history", 15*time.Second, func() error {
		if _, err := st.RequestLog(ctx, ticket.body["requestNo"].(string)); err != nil {
			return err // the consumer has not written the ticket's row yet
		}
		evs, err := st.RequestEvents(ctx, ticket.body["requestNo"].(string))
		if err != nil {
			return err
		}
		for _, e := range evs {
			if e.Status == "TOKEN_VERIFIED" {
				return nil
			}
		}
		return fmt.Errorf("history %+v", evs)
	})
	testenv.EventuallyOK(t, "the free rejections' minute counters", 15*time.Second, func() error {
		counts := map[string]int64{}
		for _, a := range []int64{0, 7, 8} {
			cs, err := st.Rejections(ctx, a, now.Add(-time.Minute))
			if err != nil {
				return err
			}
			for _, x := range cs {
				counts[fmt.Sprintf("%d/%d/%s", x.ActivityID, x.SKUID, x.Reason)] += x.N
			}
		}
		if counts["7/7001/sold_out"] < 1 || counts["8/8001/not_open"] != 1 || counts["0/0/unknown_sku"] != 1 {
			return fmt.Errorf("counters %v", counts)
		}
		// Free rejections are counted, never logged row by row.
		if got := c.lookup(t, 45, 0, ""); len(got.Requests) > 3 {
			return fmt.Errorf("user 45 has %d rows", len(got.Requests))
		}
		return nil
	})

	// Paging: one entry a page, newest first, the cursor continuing.
	p1 := c.lookup(t, 42, 0, "limit=1")
	if len(p1.Requests) != 1 || p1.Next == "" {
		t.Fatalf("page 1: %+v", p1)
	}
	seen := map[string]bool{p1.Requests[0].RequestNo: true}
	for cur := p1.Next; cur != ""; {
		p := c.lookup(t, 42, 0, "limit=1&cursor="+cur)
		for _, r := range p.Requests {
			if seen[r.RequestNo] {
				t.Fatalf("%s twice", r.RequestNo)
			}
			seen[r.RequestNo] = true
		}
		cur = p.Next
	}
	if len(seen) != 3 { // activity 7's ticket and refusal, activity 9's ticket
		t.Fatalf("pages of user 42: %v", seen)
	}
	for _, bad := range []string{"limit=0", "limit=101", "cursor=x", "activity=-1"} {
		r := send(t, "GET", c.admin+"/admin/v1/users/42/requests?"+bad, 0, "Bearer "+c.cfg.Admin.Token, "")
		expect(t, bad, r, 400, "BAD_REQUEST")
	}
	expect(t, "no token", send(t, "GET", c.admin+"/admin/v1/users/42/requests", 0, "", ""), 401, "")
}

// TestStaleResultsAreSettled: a result that reads QUEUING past the orphan
// grace, once Kafka has consumed past the ticket, is settled against the
// database and the ledger through the real edge: the order's SUCCESS when
// Redis kept a stale QUEUING (what a replica promoted before the SUCCESS
// write reached it holds), and FAIL RELEASED for a compensation whose
// Redis restarted empty before its FAIL was written (only the request
// log's COMPENSATING row is left). The request log follows both.
func TestStaleResultsAreSettled(t *testing.T) {
	c := startClusterWith(t, sqliteOnly(), func(cfg *config.Config) {
		crowdBudgets(cfg)
		cfg.Reconcile.OrphanGrace = cfg.Engine.OccupyTimeout + cfg.Engine.Kafka.SendTimeout + time.Second
	})
	c.preheat(t, openActivity(3, sale.SKU{ID: 3001, Stock: 5, Price: 990, LimitPerUser: 1}))
	ctx := context.Background()
	st := c.sys.Store

	// An order whose SUCCESS Redis lost, keeping QUEUING.
	a := c.buy(t, 3001, 31)
	if a.Status != 200 {
		t.Fatalf("buy: %+v", a)
	}
	testenv.EventuallyOK(t, "the order", 15*time.Second, func() error {
		if r := c.result(t, a.RequestNo, 31); r.Code != sale.ResultSuccess {
			return fmt.Errorf("result %+v", r)
		}
		return nil
	})

	// A compensation cut short by a Redis restart without persistence.
	rn := sale.NewRequestNos(777).Next(3, 3001)
	if err := st.LogRequest(ctx, store.LogEntry{RequestNo: rn, ActivityID: 3, SKUID: 3001, UserID: 32, Quantity: 1,
		Status: store.StatusCompensating, Remark: "produce: broker down"}); err != nil {
		t.Fatal(err)
	}
	c.redis.Stop()
	if err := c.redis.Start(); err != nil {
		t.Fatal(err)
	}
	keys := sale.KeysFor(3, 3001)
	stale := string(sale.AppendResultValue(nil, sale.ResultQueuing, 31, "", ""))
	c.redis.Do(t, "HSET", keys.Results, a.RequestNo, stale)

	testenv.EventuallyOK(t, "both settled", 30*time.Second, func() error {
		got, lost := c.result(t, a.RequestNo, 31), c.result(t, rn, 32)
		if got.Code != sale.ResultSuccess || got.OrderNo == "" || lost.Code != sale.ResultFail {
			return fmt.Errorf("stale order %+v, lost compensation %+v", got, lost)
		}
		return nil
	})
	l, err := st.RequestLog(ctx, rn)
	if err != nil || l.Status != store.StatusFailed || !strings.Contains(l.Remark, "settled") {
		t.Fatalf("the compensation's request log: %+v, %v", l, err)
	}
	if r := send(t, "GET", c.base+"/api/v1/flash-sale/result/"+rn, 32, "", ""); r.body["reason"] != sale.FailReleased {
		t.Fatalf("the compensation reads %s", r.raw)
	}
	// Settled results are written back: another buyer still reads 404.
	if r := c.result(t, rn, 33); r.Status != 404 {
		t.Fatalf("another buyer reads %+v", r)
	}
}

// TestProductDataThroughTheAdminAPIAndTheEdge: a SKU's title and original
// price go in through the admin API, land in the database and the Redis
// catalog copy, and come out of the edge's activity view; a title with
// control characters or an original price below the price is refused.
func TestProductDataThroughTheAdminAPIAndTheEdge(t *testing.T) {
	c := startCluster(t, sqliteOnly())
	now := time.Now().UTC()
	auth := "Bearer " + c.cfg.Admin.Token
	body := func(title, orig string) string {
		return fmt.Sprintf(`{"id":5,"start":%q,"end":%q,"skus":[{"id":5001,"stock":3,"price":"99.00","originalPrice":%q,"title":%q,"limitPerUser":1}]}`,
			now.Add(-time.Minute).Format(time.RFC3339), now.Add(time.Hour).Format(time.RFC3339), orig, title)
	}
	for _, bad := range []string{body("tea\u0007cup", "129.00"), body("tea cup", "9.00"), body(strings.Repeat("x", 257), "129.00")} {
		expect(t, "a bad product", send(t, "POST", c.admin+"/admin/v1/activities", 0, auth, bad), 400, "BAD_REQUEST")
	}
	expect(t, "the activity", send(t, "POST", c.admin+"/admin/v1/activities", 0, auth, body("Tea cup · 茶杯", "129.00")), 200, "")
	acts, err := c.sys.Store.Activities(context.Background())
	if err != nil || len(acts) != 1 || acts[0].SKUs[0].Title != "Tea cup · 茶杯" || acts[0].SKUs[0].OriginalPrice != 12900 {
		t.Fatalf("database: %+v, %v", acts, err)
	}
	raw, err := c.redis.Do(t, "GET", sale.ActivityKey(5)).ToString()
	if err != nil || !strings.Contains(raw, `"title":"Tea cup · 茶杯"`) || !strings.Contains(raw, `"originalPrice":"129.00"`) {
		t.Fatalf("the Redis catalog copy: %s, %v", raw, err)
	}
	testenv.EventuallyOK(t, "the edge's view", 10*time.Second, func() error {
		r := send(t, "GET", c.base+"/api/v1/flash-sale/activities/5", 0, "", "")
		if r.status != 200 || !strings.Contains(r.raw, `"title":"Tea cup · 茶杯"`) || !strings.Contains(r.raw, `"originalPrice":"129.00"`) {
			return fmt.Errorf("activity view %d %s", r.status, r.raw)
		}
		return nil
	})
	a := c.buy(t, 5001, 51)
	testenv.EventuallyOK(t, "the order's source", 15*time.Second, func() error {
		o, err := c.sys.Store.OrderByRequest(context.Background(), a.RequestNo)
		if err != nil || o.Source != "SECKILL" {
			return fmt.Errorf("order %+v, %v", o, err)
		}
		return nil
	})
}

// TestStalledDatabaseDoesNotSlowPurchases: while another connection holds
// the SQLite write lock (every database write waits), buyers are still
// answered at Redis speed — accepted ones, and refused ones whose refusal
// goes to the request log — and once the lock is gone the refusals are
// written.
func TestStalledDatabaseDoesNotSlowPurchases(t *testing.T) {
	c := startClusterWith(t, sqliteOnly(), func(cfg *config.Config) {
		cfg.Edge.Rate.UserSKULimit, cfg.Edge.Rate.UserPerSecond = 0, 0
		crowdBudgets(cfg)
	})
	c.preheat(t, openActivity(6, sale.SKU{ID: 6001, Stock: 100, Price: 990, LimitPerUser: 1}))
	lock, err := sql.Open("sqlite", "file:"+c.storeDB+"?_txlock=immediate")
	if err != nil {
		t.Fatal(err)
	}
	defer lock.Close()
	tx, err := lock.Begin()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := tx.Exec(`INSERT INTO seckill_reject_minute VALUES (6, 0, 'lock', 0, 1)`); err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback()
	start := time.Now()
	var slowest time.Duration
	for u := int64(1); u <= 20; u++ {
		for range 5 { // one accepted, four refused as DUPLICATE
			t0 := time.Now()
			a := c.buy(t, 6001, 600+u)
			slowest = max(slowest, time.Since(t0))
			if a.Status != 200 && a.Status != 409 {
				t.Fatalf("buyer %d: %+v", 600+u, a)
			}
		}
	}
	if took := time.Since(start); slowest > time.Second || took > 20*time.Second {
		t.Fatalf("100 purchases took %v (slowest %v) with the database stalled", took, slowest)
	}
	if err := tx.Rollback(); err != nil {
		t.Fatal(err)
	}
	testenv.EventuallyOK(t, "the refusals written after the stall", 30*time.Second, func() error {
		got := c.lookup(t, 601, 6, "")
		for _, r := range got.Requests {
			if r.Reason == "DUPLICATE" {
				return nil
			}
		}
		return fmt.Errorf("user 601: %+v", got.Requests)
	})
}
