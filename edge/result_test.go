package edge

import (
	"context"
	"testing"
	"time"

	"seckill/sale"
	"seckill/stock/results"
)

// hotActivity sells SKU 1201 from the hot-SKU shard.
var hotActivity = sale.Activity{ID: 12, Start: saleStart, End: saleStart.Add(time.Hour), State: sale.StateOnline,
	SKUs: []sale.SKU{{ID: 1201, Stock: 10, Price: 990, LimitPerUser: 1, Hot: true}}}

// TestResultIsReadableByItsOwnerOnly: the result route finds a ticket's
// result by its requestNo alone — which names the SKU, whose shard holds
// the result, the hot shard included — and shows it to its owner only.
func TestResultIsReadableByItsOwnerOnly(t *testing.T) {
	e := newEdge(t, withHotShard(), withActivities(hotActivity))
	const (
		queuing = "7-1001-385465232614494208"
		success = "7-1001-385465232614494209"
		failed  = "7-1001-385465232614494210"
		hot     = "12-1201-385465232614494211"
	)
	err := e.res.Write(t.Context(),
		results.Entry{RequestNo: queuing, Activity: 7, SKU: 1001, Owner: 5, State: sale.ResultQueuing},
		results.Entry{RequestNo: success, Activity: 7, SKU: 1001, Owner: 5, State: sale.ResultSuccess, OrderNo: "O" + success},
		results.Entry{RequestNo: failed, Activity: 7, SKU: 1001, Owner: 5, State: sale.ResultFail, Code: sale.FailReleased},
		results.Entry{RequestNo: hot, Activity: 12, SKU: 1201, Owner: 5, State: sale.ResultSuccess, OrderNo: "O" + hot},
	)
	if err != nil {
		t.Fatal(err)
	}
	// Each where its requestNo says (DESIGN §5): the hot SKU's on the hot
	// shard only.
	for rn, onHot := range map[string]bool{queuing: false, hot: true} {
		a, k, _, _ := sale.ParseRequestNo(rn)
		key := sale.ResultsKey(a, k)
		if n := e.hot.Int(t, "HEXISTS", key, rn); n != map[bool]int64{true: 1}[onHot] {
			t.Errorf("hot shard holds %s %s: %d", key, rn, n)
		}
		if n := e.redis.Int(t, "HEXISTS", key, rn); n != map[bool]int64{false: 1}[onHot] {
			t.Errorf("default Redis holds %s %s: %d", key, rn, n)
		}
	}
	unknown := e.do("GET", "/api/v1/flash-sale/result/7-1001-424242", "5", "")

	cases := []struct {
		name   string
		path   string
		user   string
		status int
		want   map[string]string
	}{
		{"the owner sees a queuing ticket", "/api/v1/flash-sale/result/" + queuing, "5", 200,
			map[string]string{"code": "QUEUING", "requestNo": queuing}},
		{"the owner sees the order of a successful ticket", "/api/v1/flash-sale/result/" + success, "5", 200,
			map[string]string{"code": "SUCCESS", "requestNo": success, "orderNo": "O" + success}},
		{"the owner sees why a ticket failed", "/api/v1/flash-sale/result/" + failed, "5", 200,
			map[string]string{"code": "FAIL", "requestNo": failed, "reason": "RELEASED"}},
		{"the owner reads a hot SKU's ticket from the hot shard by its requestNo alone", "/api/v1/flash-sale/result/" + hot, "5", 200,
			map[string]string{"code": "SUCCESS", "requestNo": hot, "orderNo": "O" + hot}},
		{"the seed's alias path answers the same", "/api/seckill/result/" + success, "5", 200,
			map[string]string{"code": "SUCCESS", "orderNo": "O" + success}},
		{"another user gets not found", "/api/v1/flash-sale/result/" + success, "6", 404,
			map[string]string{"code": "NOT_FOUND"}},
		{"another user gets not found on the hot shard too", "/api/v1/flash-sale/result/" + hot, "6", 404,
			map[string]string{"code": "NOT_FOUND"}},
		{"an unknown ticket is not found", "/api/v1/flash-sale/result/7-1001-999999", "5", 404,
			map[string]string{"code": "NOT_FOUND"}},
		{"a ticket of the right id under another SKU is not found", "/api/v1/flash-sale/result/7-1002-385465232614494209", "5", 404,
			map[string]string{"code": "NOT_FOUND"}},
		{"a bare number, not a ticket number, is not found", "/api/v1/flash-sale/result/385465232614494209", "5", 404,
			map[string]string{"code": "NOT_FOUND"}},
		{"a ticket number with odd characters is not found", "/api/v1/flash-sale/result/a%2Ab", "5", 404,
			map[string]string{"code": "NOT_FOUND"}},
		{"no user is 401", "/api/v1/flash-sale/result/" + queuing, "", 401,
			map[string]string{"code": "UNAUTHORIZED"}},
		{"a bad user is 400", "/api/v1/flash-sale/result/" + queuing, "x", 400,
			map[string]string{"code": "BAD_REQUEST"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			r := e.do("GET", c.path, c.user, "")
			if r.status != c.status {
				t.Fatalf("got %d %s, want %d", r.status, r.raw, c.status)
			}
			for k, v := range c.want {
				if r.body[k] != v {
					t.Errorf("%s = %v, want %q (body %s)", k, r.body[k], v, r.raw)
				}
			}
			if r.status == 404 && r.raw != unknown.raw {
				t.Errorf("404 body %s differs from an unknown ticket's %s", r.raw, unknown.raw)
			}
			if cc := r.header["Cache-Control"]; r.status == 200 && cc != "no-store" {
				t.Errorf("Cache-Control %q, want no-store", cc)
			}
		})
	}
}

func TestResultIsBusyWhenRedisIsDown(t *testing.T) {
	e := newEdge(t, withHotShard(), withActivities(hotActivity))
	for _, down := range []struct {
		name string
		rn   string
		stop func()
	}{
		{"the default Redis", "7-1001-1001", e.redis.Stop},
		{"the hot shard", "12-1201-1001", e.hot.Stop},
	} {
		down.stop()
		if r := e.do("GET", "/api/v1/flash-sale/result/"+down.rn, "5", ""); r.status != 503 || r.code() != "BUSY" {
			t.Fatalf("%s down: got %d %s, want 503 BUSY", down.name, r.status, r.raw)
		}
	}
}

// TestQueuingIsTheBuyersRecordAndAClaimAsksTheDatabase: a ticket with no
// result field reads QUEUING to the user whose record names it (the
// occupy script writes no QUEUING field) and is unknown to anyone else; a
// claimed one (the consumer is writing its order, or Redis lost its final
// result) is asked of the database, whose final answer wins and whose
// in-flight answer, or a request log's FAILED row, leaves it QUEUING. A
// bucket's ticket (<activity>-<sku>.<bucket>-<id>) is read like any other.
func TestQueuingIsTheBuyersRecordAndAClaimAsksTheDatabase(t *testing.T) {
	const (
		queuing = "7-1001-385465232614494301"   // user 5's record, unclaimed
		written = "7-1001-385465232614494302"   // user 6's record, claimed, order in the database
		writing = "7-1001-385465232614494303"   // user 8's record, claimed, order not yet committed
		logged  = "7-1001-385465232614494304"   // user 9's record, claimed, a FAILED request-log row only
		bucket  = "7-1001.2-385465232614494305" // a bucket's ticket, its SUCCESS written
	)
	asked := map[string]int{}
	fallback := func(_ context.Context, rn string) (results.Entry, error) {
		asked[rn]++
		switch rn {
		case written:
			return results.Entry{RequestNo: rn, Activity: 7, SKU: 1001, Owner: 6, State: sale.ResultSuccess, OrderNo: "O" + rn}, nil
		case writing:
			return results.Entry{RequestNo: rn, Activity: 7, SKU: 1001, Owner: 8, State: sale.ResultQueuing}, nil
		case logged:
			return results.Entry{RequestNo: rn, Activity: 7, SKU: 1001, Owner: 9, State: sale.ResultFail, Code: sale.FailReleased}, nil
		}
		return results.Entry{}, results.ErrNotFound
	}
	e := newEdge(t, withOptions(WithResultFallback(fallback)))
	users := sale.KeysFor(7, 1001).Users
	e.redis.Do(t, "HSET", users, "5", queuing, "6", written, "8", writing, "9", logged)
	e.redis.Do(t, "SADD", sale.KeysFor(7, 1001).Claim, written, writing, logged)
	if err := e.res.Write(t.Context(), results.Entry{RequestNo: bucket, Activity: 7, SKU: 1001, Owner: 5,
		State: sale.ResultSuccess, OrderNo: "O" + bucket}); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		rn, user string
		status   int
		code     string
	}{
		{queuing, "5", 200, "QUEUING"},
		{queuing, "6", 404, "NOT_FOUND"},
		{written, "6", 200, "SUCCESS"},
		{writing, "8", 200, "QUEUING"},
		{writing, "5", 404, "NOT_FOUND"},
		// The request log may say FAILED before the consumer writes the
		// true end: only an order answers a claimed ticket.
		{logged, "9", 200, "QUEUING"},
		{bucket, "5", 200, "SUCCESS"},
	} {
		r := e.do("GET", "/api/v1/flash-sale/result/"+c.rn, c.user, "")
		if r.status != c.status || r.body["code"] != c.code {
			t.Errorf("%s as user %s: %d %s, want %d %s", c.rn, c.user, r.status, r.raw, c.status, c.code)
		}
	}
	if asked[queuing] != 1 || asked[written] != 1 || asked[writing] != 2 {
		t.Errorf("database asked %v: want the unclaimed ticket only by the stranger, the claimed ones by their owners (and the stranger)", asked)
	}
}
