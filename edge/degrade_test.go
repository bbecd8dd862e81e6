package edge

import (
	"context"
	"testing"
	"time"

	"github.com/fasthttp/router"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/valyala/fasthttp"

	"seckill/routeswitch"
	"seckill/sale"
	"seckill/stock/results"
)

// degrade switches activity 7's degrade as the admin API does: the
// catalog entry, then the activity event; it waits until the edge's
// catalog holds it.
func (e *edgeEnv) degrade(change func(*sale.Degrade)) {
	e.t.Helper()
	a, err := e.cat.Update(context.Background(), 7, func(a *sale.Activity) { change(&a.Degrade) })
	if err != nil {
		e.t.Fatal(err)
	}
	e.publish(sale.Event{Kind: sale.EventActivity, Activity: 7})
	waitFor(e.t, "the edge sees the switch", func() bool {
		cur, ok := e.srv.views.cat.Activity(7)
		return ok && cur.Degrade == a.Degrade
	})
}

const order1001 = `{"activityId":7,"skuId":1001,"quantity":1}`

// TestReservedOnlyLetsOnlyTheReservedBuy: with reservedOnly on, a buyer
// not on the activity's reserved list is answered 403 RESERVED_ONLY
// before the engine, a reserved one buys; switched off, everyone buys
// again — all without re-posting the activity.
func TestReservedOnlyLetsOnlyTheReservedBuy(t *testing.T) {
	act := fixture()[0]
	act.ReservedUsers = []int64{5}
	e := newEdge(t, withActivities(act))
	e.waitSubscribed()
	e.degrade(func(d *sale.Degrade) { d.ReservedOnly = true })
	calls := e.eng.calls.Load()
	r := e.order("6", order1001)
	mustStatus(t, r, 403, "RESERVED_ONLY")
	if n := e.eng.calls.Load(); n != calls {
		t.Fatalf("a refused buyer reached the engine (%d calls)", n-calls)
	}
	if got := testutil.ToFloat64(e.srv.m.rejections[reasonReservedOnly]); got != 1 {
		t.Errorf("rejections{reserved_only} = %v, want 1", got)
	}
	mustStatus(t, e.order("5", order1001), 200, "QUEUING")
	e.degrade(func(d *sale.Degrade) { d.ReservedOnly = false })
	mustStatus(t, e.order("6", order1001), 200, "QUEUING")
}

// TestPausedIntakeAnswers503AndResultsStayReadable: a paused activity
// answers every purchase and token 503 PAUSED with Retry-After, asking
// neither the engine nor Redis for it (the Redis is stopped), while a
// result stays readable; unpaused, purchases go through again.
func TestPausedIntakeAnswers503AndResultsStayReadable(t *testing.T) {
	e := newEdge(t, withConfig(func(c *Config) { c.Degrade.PausedRetryAfter = 7 * time.Second }))
	e.waitSubscribed()
	const rn = "7-1001-385465232614494208"
	if err := e.res.Write(t.Context(), results.Entry{RequestNo: rn, Activity: 7, SKU: 1001, Owner: 5, State: sale.ResultQueuing}); err != nil {
		t.Fatal(err)
	}
	e.degrade(func(d *sale.Degrade) { d.Paused = true })
	calls := e.eng.calls.Load()
	for _, tc := range []struct{ name, path, body string }{
		{"a purchase", "/api/v1/flash-sale/order", order1001},
		{"the seed's purchase route", "/api/seckill/submit", order1001},
		{"a token", "/api/v1/flash-sale/token", `{"activityId":8,"skuId":2001}`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if tc.name == "a token" {
				if _, err := e.cat.Update(context.Background(), 8, func(a *sale.Activity) { a.Paused = true }); err != nil {
					t.Fatal(err)
				}
			}
			r := e.do("POST", tc.path, "5", tc.body)
			mustStatus(t, r, 503, "PAUSED")
			if r.header["Retry-After"] != "7" {
				t.Errorf("Retry-After %q, want 7", r.header["Retry-After"])
			}
		})
	}
	if n := e.eng.calls.Load(); n != calls {
		t.Fatalf("a paused purchase reached the engine (%d calls)", n-calls)
	}
	r := e.do("GET", "/api/v1/flash-sale/result/"+rn, "5", "")
	mustStatus(t, r, 200, "QUEUING")
	if v := e.do("GET", "/api/v1/flash-sale/activities/7", "", ""); v.body["paused"] != true {
		t.Errorf("the public view of a paused activity: %s", v.raw)
	}
	e.degrade(func(d *sale.Degrade) { d.Paused = false })
	if v := e.do("GET", "/api/v1/flash-sale/activities/7", "", ""); v.body["paused"] != nil {
		t.Errorf("the public view once resumed: %s", v.raw)
	}
	mustStatus(t, e.order("5", order1001), 200, "QUEUING")
}

// TestPausedIntakeAsksNoDependency: with the Redis down, a paused
// activity still answers PAUSED (not BUSY): the edge judged it alone.
func TestPausedIntakeAsksNoDependency(t *testing.T) {
	e := newEdge(t)
	e.waitSubscribed()
	e.degrade(func(d *sale.Degrade) { d.Paused = true })
	e.redis.Shutdown()
	mustStatus(t, e.order("5", order1001), 503, "PAUSED")
}

// TestPollAfterFollowsTheSwitch: QUEUING answers and queuing results
// carry pollAfterMs and Retry-After — edge.degrade.poll_after by default,
// the activity's pollAfterMs once on-call sets it.
func TestPollAfterFollowsTheSwitch(t *testing.T) {
	e := newEdge(t)
	e.waitSubscribed()
	const rn = "7-1001-385465232614494208"
	if err := e.res.Write(t.Context(), results.Entry{RequestNo: rn, Activity: 7, SKU: 1001, Owner: 5, State: sale.ResultQueuing}); err != nil {
		t.Fatal(err)
	}
	check := func(r response, ms float64, retry string) {
		t.Helper()
		mustStatus(t, r, 200, "QUEUING")
		if got, _ := r.body["pollAfterMs"].(float64); got != ms || r.header["Retry-After"] != retry {
			t.Errorf("pollAfterMs %v Retry-After %q, want %v and %s (%s)", r.body["pollAfterMs"], r.header["Retry-After"], ms, retry, r.raw)
		}
	}
	check(e.order("5", order1001), 1000, "1")
	check(e.do("GET", "/api/v1/flash-sale/result/"+rn, "5", ""), 1000, "1")
	e.degrade(func(d *sale.Degrade) { d.PollAfterMs = 3000 })
	check(e.order("6", order1001), 3000, "3")
	check(e.do("GET", "/api/v1/flash-sale/result/"+rn, "5", ""), 3000, "3")
}

// TestClosedRouteAnswers503AtOnce: a route on-call closed answers 503
// ROUTE_CLOSED with Retry-After without running its handler; the others
// and the purchase route stay open; reopened, it serves again; an edge
// that starts while it is closed starts closed.
func TestClosedRouteAnswers503AtOnce(t *testing.T) {
	var ran [len(routeswitch.Names)]int
	mount := WithGuardedRoutes(func(r *router.Router, guard RouteGuard) {
		for i, name := range routeswitch.Names {
			r.GET("/t/"+name, guard(name, func(ctx *fasthttp.RequestCtx) { ran[i]++; ctx.SetStatusCode(200) }))
		}
	})
	e := newEdge(t, withOptions(mount), withConfig(func(c *Config) { c.Degrade.ClosedRetryAfter = 9 * time.Second }))
	e.waitSubscribed()
	ctx := context.Background()
	if err := routeswitch.Put(ctx, e.rdb, routeswitch.State(0).With(routeswitch.Index(routeswitch.Pay), false)); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the edge closes pay", func() bool { return !e.srv.routeSw.state().Open(routeswitch.Index(routeswitch.Pay)) })
	r := e.do("GET", "/t/pay", "5", "")
	mustStatus(t, r, 503, "ROUTE_CLOSED")
	if r.header["Retry-After"] != "9" {
		t.Errorf("Retry-After %q, want 9", r.header["Retry-After"])
	}
	if ran[routeswitch.Index(routeswitch.Pay)] != 0 {
		t.Error("the closed route's handler ran")
	}
	for _, open := range []string{"orders", "events"} {
		if r := e.do("GET", "/t/"+open, "5", ""); r.status != 200 {
			t.Errorf("%s: %d, want it open", open, r.status)
		}
	}
	mustStatus(t, e.order("5", order1001), 200, "QUEUING")

	late := newEdge(t, withRedis(e.redis), withOptions(mount))
	if r := late.do("GET", "/t/pay", "5", ""); r.status != 503 {
		t.Errorf("an edge started while pay is closed serves it: %d", r.status)
	}

	if err := routeswitch.Put(ctx, e.rdb, 0); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the edge reopens pay", func() bool { return e.srv.routeSw.state() == 0 })
	if r := e.do("GET", "/t/pay", "5", ""); r.status != 200 || ran[routeswitch.Index(routeswitch.Pay)] != 1 {
		t.Errorf("reopened pay: %d, handler ran %d times", r.status, ran[routeswitch.Index(routeswitch.Pay)])
	}
}
