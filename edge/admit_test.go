package edge

import (
	"errors"
	"fmt"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/fasthttp/router"
	"github.com/valyala/fasthttp"

	"seckill/engine"
	"seckill/internal/testenv"
	"seckill/sale"
	"seckill/stock"
)

const orderPath = "/api/v1/flash-sale/order"

// mustRateLimited checks a 429 of the layer with its Retry-After.
func mustRateLimited(t *testing.T, r response, reason int) {
	t.Helper()
	if r.status != 429 || r.code() != "RATE_LIMITED" {
		t.Fatalf("got %d %s, want 429 RATE_LIMITED", r.status, r.raw)
	}
	ra, err := strconv.Atoi(r.header["Retry-After"])
	if err != nil || ra < 1 {
		t.Fatalf("Retry-After %q, want whole seconds ≥ 1", r.header["Retry-After"])
	}
	if msg, _ := r.body["message"].(string); msg == "" {
		t.Fatalf("429 without a message: %s", r.raw)
	}
	want := map[int]string{reasonRateIP: "network", reasonRateUser: "account", reasonRateUserSKU: "item", reasonGate: "demand", reasonInflight: "processed"}[reason]
	if msg, _ := r.body["message"].(string); !contains(msg, want) {
		t.Fatalf("message %q does not name the layer (%q)", msg, want)
	}
}

func mustStatus(t *testing.T, r response, status int, code string) {
	t.Helper()
	if r.status != status || r.code() != code {
		t.Fatalf("got %d %s, want %d %s", r.status, r.raw, status, code)
	}
}

func contains(s, sub string) bool {
	for i := 0; i+len(sub) <= len(s); i++ {
		if s[i:i+len(sub)] == sub {
			return true
		}
	}
	return false
}

func TestPerIPLimitTripsAndRecovers(t *testing.T) {
	e := newEdge(t, withConfig(func(c *Config) {
		c.Rate.IPPerSecond, c.Rate.IPBurst = 10, 2
		c.Rate.IPExempt = []string{"198.51.100.0/24"}
	}))
	c := e.from("203.0.113.7")
	for i := range 2 {
		mustStatus(t, e.doVia(c, "POST", orderPath, strconv.Itoa(100+i), `{"skuId":1001}`), 200, "QUEUING")
	}
	mustRateLimited(t, e.doVia(c, "POST", orderPath, "102", `{"skuId":1001}`), reasonRateIP)
	// Every public route shares the address's budget; health checks never
	// count.
	mustRateLimited(t, e.doVia(c, "GET", "/api/v1/flash-sale/activities/7", "", ""), reasonRateIP)
	mustStatus(t, e.doVia(c, "GET", "/healthz", "", ""), 200, "OK")
	// Another address has its own budget; an exempt one has none.
	mustStatus(t, e.doVia(e.from("203.0.113.8"), "POST", orderPath, "103", `{"skuId":1001}`), 200, "QUEUING")
	for i := range 5 {
		mustStatus(t, e.doVia(e.from("198.51.100.9"), "POST", orderPath, strconv.Itoa(200+i), `{"skuId":1001}`), 200, "QUEUING")
	}
	time.Sleep(150 * time.Millisecond) // > 1/rate
	mustStatus(t, e.doVia(c, "POST", orderPath, "104", `{"skuId":1001}`), 200, "QUEUING")

	// IPv6 clients are limited per /64: rotating the interface id does not
	// buy a fresh budget.
	a, b := e.from("2001:db8:1:2::1"), e.from("2001:db8:1:2::ffff")
	mustStatus(t, e.doVia(a, "POST", orderPath, "300", `{"skuId":1001}`), 200, "QUEUING")
	mustStatus(t, e.doVia(b, "POST", orderPath, "301", `{"skuId":1001}`), 200, "QUEUING")
	mustRateLimited(t, e.doVia(a, "POST", orderPath, "302", `{"skuId":1001}`), reasonRateIP)
	mustStatus(t, e.doVia(e.from("2001:db8:1:3::1"), "POST", orderPath, "303", `{"skuId":1001}`), 200, "QUEUING")

	if n := testenv.Metric(t, e.reg, "seckill_edge_rejections_total", map[string]string{"reason": reasons[reasonRateIP]}); n != 3 {
		t.Errorf("rate_ip rejections %v, want 3", n)
	}
	if n := testenv.Metric(t, e.reg, "seckill_edge_requests_total", map[string]string{"route": routes[routeGuard], "status": statusLabel(429)}); n != 3 {
		t.Errorf("requests{route=guard,status=429} %v, want 3", n)
	}
}

func TestPerUserLimitTripsAndRecovers(t *testing.T) {
	e := newEdge(t, withConfig(func(c *Config) { c.Rate.UserPerSecond, c.Rate.UserBurst = 10, 2 }), withActivities(reservedSale))
	for range 2 {
		mustStatus(t, e.order("5", `{"skuId":1001}`), 200, "QUEUING")
	}
	mustRateLimited(t, e.order("5", `{"skuId":1002}`), reasonRateUser)
	// Token requests (user 5 is reserved for SKU 6001) draw on the same
	// budget.
	mustRateLimited(t, e.do("POST", "/api/v1/flash-sale/token", "5", `{"skuId":6001}`), reasonRateUser)
	// Answers from local state alone come before the limit: a crowd on a
	// sold-out SKU costs no limiter entry.
	e.srv.HandleEvent(sale.Event{Kind: sale.EventSoldOut, Activity: 7, SKU: 1002})
	e.srv.flags.cache.Wait()
	mustStatus(t, e.order("5", `{"skuId":1002}`), 410, "SOLD_OUT")
	mustStatus(t, e.order("6", `{"skuId":1001}`), 200, "QUEUING")
	if calls := e.eng.calls.Load(); calls != 3 {
		t.Fatalf("engine calls %d, want 3: a limited request must not reach it", calls)
	}
	time.Sleep(150 * time.Millisecond)
	mustStatus(t, e.order("5", `{"skuId":1001}`), 200, "QUEUING")
}

// TestEngineRateLimitAnswers429WithItsRetryAfter: the user × SKU window is
// counted by the engine's occupy script, not by the edge. The edge maps the
// engine's RATE_LIMITED to 429 with the script's time left as Retry-After
// (whole seconds, rounded up), counts it as the rate_user_sku rejection and
// as the engine outcome rate_limited, and makes no Redis call of its own
// for the window: with the edge's Redis down the attempt still reaches the
// engine.
func TestEngineRateLimitAnswers429WithItsRetryAfter(t *testing.T) {
	e := newEdge(t)
	e.eng.answer(func(r *engine.Request) (engine.Ticket, error) {
		if r.UserID == 5 {
			return engine.Ticket{Remaining: -1, RetryAfter: 2500 * time.Millisecond}, fmt.Errorf("occupy: %w", stock.ErrRateLimited)
		}
		return engine.Ticket{RequestNo: "7-1001-1", Remaining: 50}, nil
	})
	r := e.order("5", `{"skuId":1001}`)
	mustRateLimited(t, r, reasonRateUserSKU)
	if ra := r.header["Retry-After"]; ra != "3" {
		t.Errorf("Retry-After %q, want 3 (2.5 s rounded up)", ra)
	}
	mustStatus(t, e.order("6", `{"skuId":1001}`), 200, "QUEUING")
	if n := testenv.Metric(t, e.reg, "seckill_edge_rejections_total", map[string]string{"reason": "rate_user_sku"}); n != 1 {
		t.Errorf("rate_user_sku rejections %v, want 1", n)
	}
	if n := testenv.Metric(t, e.reg, "seckill_edge_engine_calls_total", map[string]string{"outcome": "rate_limited"}); n != 1 {
		t.Errorf("rate_limited engine outcomes %v, want 1", n)
	}
	e.redis.Stop()
	t.Cleanup(func() { _ = e.redis.Start() })
	calls := e.eng.calls.Load()
	mustRateLimited(t, e.order("5", `{"skuId":1001}`), reasonRateUserSKU)
	if e.eng.calls.Load() != calls+1 {
		t.Fatal("the edge did not ask the engine with its own Redis down")
	}
}

func TestAdmissionGateTripsAndRecovers(t *testing.T) {
	e := newEdge(t, withConfig(func(c *Config) { c.Rate.GateK, c.Rate.GateFloor = 1, 5 }))
	e.eng.answer(func(r *engine.Request) (engine.Ticket, error) {
		return engine.Ticket{RequestNo: "1", Remaining: 2}, nil
	})
	user := 100
	buy := func() response {
		user++
		return e.order(strconv.Itoa(user), `{"skuId":1001}`)
	}
	// Remaining unknown: not gated. The answer teaches the gate 2 left:
	// max(1 × 2, floor 5) = 5/s with a burst of 5.
	mustStatus(t, buy(), 200, "QUEUING")
	if got := e.srv.admit.gate.Remaining(1001); got != 2 {
		t.Fatalf("gate learnt remaining %d, want 2", got)
	}
	for range 5 {
		mustStatus(t, buy(), 200, "QUEUING")
	}
	mustRateLimited(t, buy(), reasonGate)
	// Another SKU is not held back.
	mustStatus(t, e.order("99", `{"skuId":1002}`), 200, "QUEUING")
	time.Sleep(250 * time.Millisecond) // one token at 5/s
	mustStatus(t, buy(), 200, "QUEUING")

	// Events: sold out means nothing left; available means unknown (not
	// gated) until the engine answers again.
	e.srv.HandleEvent(sale.Event{Kind: sale.EventSoldOut, Activity: 7, SKU: 1001})
	if got := e.srv.admit.gate.Remaining(1001); got != 0 {
		t.Fatalf("after soldout: remaining %d, want 0", got)
	}
	e.srv.HandleEvent(sale.Event{Kind: sale.EventAvailable, Activity: 7, SKU: 1001})
	if got := e.srv.admit.gate.Remaining(1001); got != -1 {
		t.Fatalf("after available: remaining %d, want -1", got)
	}
	e.eng.answer(func(r *engine.Request) (engine.Ticket, error) {
		return engine.Ticket{RequestNo: "1", Remaining: -1}, fmt.Errorf("x: %w", engine.ErrBusy)
	})
	for range 10 {
		if r := buy(); r.status != 503 {
			t.Fatalf("ungated after available: %d %s", r.status, r.raw)
		}
	}
}

// TestInflightBoundRefusesBeyondItAndFreesOnAnswer holds attempts inside
// an engine that answers only when released: the bound is reached exactly,
// the next attempt is a 429 without an engine call, another SKU has its
// own bound, and every place comes back — after a ticket, an engine error
// or a refused token alike.
func TestInflightBoundRefusesBeyondItAndFreesOnAnswer(t *testing.T) {
	e := newEdge(t, withConfig(func(c *Config) { c.Rate.SKUInflight, c.Rate.SKUInflightWait = 2, 0 }))
	release := make(chan struct{})
	var entered atomic.Int64
	e.eng.answer(func(r *engine.Request) (engine.Ticket, error) {
		if r.SKU.ID == 1001 {
			entered.Add(1)
			<-release
			if r.UserID == 101 {
				return engine.Ticket{Remaining: -1}, fmt.Errorf("x: %w", engine.ErrBusy)
			}
		}
		return engine.Ticket{RequestNo: strconv.FormatInt(r.UserID, 10), Remaining: 50}, nil
	})
	done := make(chan response, 2)
	for _, u := range []string{"100", "101"} {
		go func() { done <- e.order(u, `{"skuId":1001}`) }()
	}
	waitFor(t, "two attempts inside the engine", func() bool { return entered.Load() == 2 })
	if n := e.srv.admit.inflight.InFlight(1001); n != 2 {
		t.Fatalf("in flight %d, want 2", n)
	}
	calls := e.eng.calls.Load()
	r := e.order("102", `{"skuId":1001}`)
	mustRateLimited(t, r, reasonInflight)
	if r.header["Retry-After"] != "1" {
		t.Fatalf("Retry-After %q, want 1 (a place frees as soon as any attempt is answered)", r.header["Retry-After"])
	}
	if e.eng.calls.Load() != calls {
		t.Fatal("the engine was called beyond the bound")
	}
	// Another SKU is not held back.
	mustStatus(t, e.order("103", `{"skuId":1002}`), 200, "QUEUING")

	close(release)
	got := map[int]int{}
	for range 2 {
		got[(<-done).status]++
	}
	if got[200] != 1 || got[503] != 1 {
		t.Fatalf("answers of the held attempts %v, want one 200 and one 503", got)
	}
	if n := e.srv.admit.inflight.InFlight(1001); n != 0 {
		t.Fatalf("in flight %d after every answer, want 0", n)
	}
	for i := range 3 {
		mustStatus(t, e.order(strconv.Itoa(200+i), `{"skuId":1001}`), 200, "QUEUING")
	}
	if n := testenv.Metric(t, e.reg, "seckill_edge_rejections_total", map[string]string{"reason": reasons[reasonInflight]}); n != 1 {
		t.Errorf("inflight rejections %v, want 1", n)
	}
}

// TestInflightWaitLetsTheNextBuyerInWhenAPlaceFrees: past the bound a
// buyer waits (edge.rate.sku_inflight_wait) instead of being refused, and
// takes the place the first buyer's answer frees; the engine never holds
// more than the bound.
func TestInflightWaitLetsTheNextBuyerInWhenAPlaceFrees(t *testing.T) {
	e := newEdge(t, withConfig(func(c *Config) { c.Rate.SKUInflight, c.Rate.SKUInflightWait = 1, time.Minute }))
	release := make(chan struct{})
	var entered, peak, inside atomic.Int64
	e.eng.answer(func(r *engine.Request) (engine.Ticket, error) {
		n := inside.Add(1)
		defer inside.Add(-1)
		if n > peak.Load() {
			peak.Store(n)
		}
		entered.Add(1)
		if r.UserID == 400 {
			<-release
		}
		return engine.Ticket{RequestNo: strconv.FormatInt(r.UserID, 10), Remaining: 50}, nil
	})
	first := make(chan response, 1)
	go func() { first <- e.order("400", `{"skuId":1001}`) }()
	waitFor(t, "the first buyer inside the engine", func() bool { return entered.Load() == 1 })
	second := make(chan response, 1)
	go func() { second <- e.order("401", `{"skuId":1001}`) }()
	select {
	case r := <-second:
		t.Fatalf("the second buyer was answered (%d) while the only place was held", r.status)
	case <-time.After(50 * time.Millisecond):
	}
	if entered.Load() != 1 {
		t.Fatal("the engine was called beyond the bound")
	}
	close(release)
	mustStatus(t, <-first, 200, "QUEUING")
	mustStatus(t, <-second, 200, "QUEUING")
	if p := peak.Load(); p != 1 {
		t.Fatalf("%d inside the engine at once, bound 1", p)
	}
	if n := testenv.Metric(t, e.reg, "seckill_edge_rejections_total", map[string]string{"reason": reasons[reasonInflight]}); n != 0 {
		t.Errorf("inflight rejections %v, want 0", n)
	}
}

// TestInflightPlaceComesBackWhenALaterCheckRefuses: the place is taken
// before the token is spent and the engine counts the user × SKU window;
// an attempt either refuses must give the place back.
func TestInflightPlaceComesBackWhenALaterCheckRefuses(t *testing.T) {
	spent := tokenFunc(func([]byte, int64, *sale.Activity, int64, time.Time) error { return errors.New("spent") })
	e := newEdge(t, withConfig(func(c *Config) { c.Rate.SKUInflight = 1 }), withOptions(WithTokenVerifier(spent)))
	var tries atomic.Int64
	e.eng.answer(func(r *engine.Request) (engine.Ticket, error) {
		if tries.Add(1) > 1 { // the window holds one attempt
			return engine.Ticket{Remaining: -1, RetryAfter: time.Hour}, stock.ErrRateLimited
		}
		return engine.Ticket{RequestNo: "7-1001-1", Remaining: 50}, nil
	})
	for i := range 3 {
		mustStatus(t, e.order(strconv.Itoa(300+i), `{"skuId":2001,"token":"t"}`), 403, "TOKEN_INVALID")
	}
	if n := e.srv.admit.inflight.InFlight(2001); n != 0 {
		t.Fatalf("in flight %d after refused tokens, want 0", n)
	}
	mustStatus(t, e.order("310", `{"skuId":1001}`), 200, "QUEUING")
	for range 3 {
		mustRateLimited(t, e.order("310", `{"skuId":1001}`), reasonRateUserSKU)
	}
	if n := e.srv.admit.inflight.InFlight(1001); n != 0 {
		t.Fatalf("in flight %d after window refusals, want 0", n)
	}
}

// TestGateSharedByEdgesAdmitsOneShare: with gate_edges N each edge admits
// 1/N of gate_k × remaining. The fake engine answers 50 left; with k 1 one
// edge alone admits 50/s (burst 50), while one of 1000 edges admits 0.05/s
// (burst one, the next in 20 s).
func TestGateSharedByEdgesAdmitsOneShare(t *testing.T) {
	for _, tc := range []struct {
		name     string
		edges    int
		admitted int
	}{
		{name: "one edge admits the whole burst", edges: 1, admitted: 10},
		{name: "one of 1000 edges admits its share, one attempt", edges: 1000, admitted: 2},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := newEdge(t, withConfig(func(c *Config) { c.Rate.GateK, c.Rate.GateFloor, c.Rate.GateEdges = 1, 1, tc.edges }))
			// The first attempt is ungated (remaining unknown) and teaches
			// the gate 50 left.
			var last response
			admitted := 0
			for i := range 10 {
				last = e.order(strconv.Itoa(400+i), `{"skuId":1001}`)
				if last.status == 200 {
					admitted++
				}
			}
			if admitted != tc.admitted {
				t.Fatalf("admitted %d of 10, want %d", admitted, tc.admitted)
			}
			if tc.admitted < 10 {
				mustRateLimited(t, last, reasonGate)
				if ra, _ := strconv.Atoi(last.header["Retry-After"]); ra < 10 {
					t.Fatalf("Retry-After %d, want about 20 s (1 / (50 × 1/1000) per s)", ra)
				}
			}
		})
	}
}

func TestForwardedForIsHonouredOnlyFromTrustedProxies(t *testing.T) {
	// Over HTTP: the blocklist and the per-IP limit judge the address the
	// trusted proxy vouches for, and nobody else can choose it.
	cfg := func(c *Config) {
		c.TrustedProxies = []string{"10.0.0.0/8"}
		c.Blocklist.IPs = []string{"192.0.2.66"}
		c.Rate.IPPerSecond, c.Rate.IPBurst = 1, 1
	}
	e := newEdge(t, withConfig(cfg))
	proxy, stranger := e.from("10.0.0.5"), e.from("172.16.0.1")
	mustStatus(t, e.doVia(proxy, "POST", orderPath, "5", `{"skuId":1001}`, "X-Forwarded-For", "192.0.2.66"), 403, "BLOCKED")
	mustStatus(t, e.doVia(stranger, "POST", orderPath, "5", `{"skuId":1001}`, "X-Forwarded-For", "192.0.2.66"), 200, "QUEUING")
	// Spoofing a left-hand entry through the proxy does not pick the address.
	mustStatus(t, e.doVia(proxy, "POST", orderPath, "6", `{"skuId":1001}`, "X-Forwarded-For", "192.0.2.66, 198.51.100.1"), 200, "QUEUING")
	// Clients behind one proxy get their own budgets...
	mustStatus(t, e.doVia(proxy, "POST", orderPath, "7", `{"skuId":1001}`, "X-Forwarded-For", "198.51.100.2"), 200, "QUEUING")
	mustRateLimited(t, e.doVia(proxy, "POST", orderPath, "8", `{"skuId":1001}`, "X-Forwarded-For", "198.51.100.2"), reasonRateIP)
	// ...and a stranger cannot get a fresh one by writing the header.
	mustRateLimited(t, e.doVia(stranger, "POST", orderPath, "9", `{"skuId":1001}`, "X-Forwarded-For", "198.51.100.99"), reasonRateIP)
}

func TestMountedRoutesAreServedBehindTheAddressChecks(t *testing.T) {
	var paid []string
	mount := func(r *router.Router) {
		r.POST("/api/v1/flash-sale/orders/{orderNo}/pay", func(ctx *fasthttp.RequestCtx) {
			paid = append(paid, ctx.UserValue("orderNo").(string))
			ctx.SetStatusCode(200)
			ctx.SetContentType("application/json")
			ctx.SetBodyString(`{"code":"PAID","message":"paid"}`)
		})
	}
	e := newEdge(t, withOptions(WithRoutes(mount)), withConfig(func(c *Config) { c.Blocklist.IPs = []string{"203.0.113.9"} }))
	mustStatus(t, e.do("POST", "/api/v1/flash-sale/orders/O123/pay", "5", `{}`), 200, "PAID")
	mustStatus(t, e.doVia(e.from("203.0.113.9"), "POST", "/api/v1/flash-sale/orders/O124/pay", "5", `{}`), 403, "BLOCKED")
	if len(paid) != 1 || paid[0] != "O123" {
		t.Fatalf("pay handler saw %v", paid)
	}
	// The edge's own routes still answer.
	mustStatus(t, e.order("5", `{"skuId":1001}`), 200, "QUEUING")

	// A clash with an edge route is an error of New, not a panic.
	clash := func(r *router.Router) { r.POST(orderPath, func(*fasthttp.RequestCtx) {}) }
	cfg := unlimited()
	if _, err := New(cfg, &fakeEngine{}, e.cat, e.res, e.rdb, e.srv.log, nil, WithRoutes(clash)); err == nil {
		t.Fatal("a clashing route must fail New")
	}
}

// TestEngineRebalancingAnswers429NeverSoldOut: the engine's REBALANCING
// (the buyer's bucket is empty while other buckets of the SKU hold stock)
// is a 429 REBALANCING with the engine's short Retry-After, and raises no
// sold-out flag: the next buyer still reaches the engine.
func TestEngineRebalancingAnswers429NeverSoldOut(t *testing.T) {
	e := newEdge(t)
	e.eng.answer(func(r *engine.Request) (engine.Ticket, error) {
		if r.UserID == 5 {
			return engine.Ticket{Remaining: 30, RetryAfter: time.Second}, fmt.Errorf("occupy: %w", stock.ErrRebalancing)
		}
		return engine.Ticket{RequestNo: "7-1001.1-1", Remaining: 29}, nil
	})
	r := e.order("5", `{"skuId":1001}`)
	mustStatus(t, r, 429, "REBALANCING")
	if ra := r.header["Retry-After"]; ra != "1" {
		t.Errorf("Retry-After %q, want 1", ra)
	}
	calls := e.eng.calls.Load()
	mustStatus(t, e.order("6", `{"skuId":1001}`), 200, "QUEUING")
	if e.eng.calls.Load() != calls+1 {
		t.Fatal("the buyer after a REBALANCING did not reach the engine: the SKU was flagged sold out")
	}
}
