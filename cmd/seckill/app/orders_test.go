package app

import (
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"seckill/cmd/seckill/config"
	"seckill/internal/testenv"
	"seckill/sale"
	"seckill/web"
)

// myOrders reads GET /api/v1/flash-sale/orders with X-User-Id set to
// user as given (not set when empty).
func (c *cluster) myOrders(t *testing.T, user string) (int, web.OrdersPage) {
	t.Helper()
	req, _ := http.NewRequest("GET", c.base+web.OrdersPath, nil)
	if user != "" {
		req.Header.Set("X-User-Id", user)
	}
	resp, err := client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	var p web.OrdersPage
	if resp.StatusCode == 200 {
		if err := json.Unmarshal(b, &p); err != nil {
			t.Fatalf("my orders: %v: %s", err, b)
		}
	}
	return resp.StatusCode, p
}

// TestMyOrdersThroughTheEdge buys two SKUs as one buyer and reads them back
// from "my orders" on the edge, newest first, with the pay deadline of
// order.pay_timeout; another buyer sees none of them.
func TestMyOrdersThroughTheEdge(t *testing.T) {
	c := startClusterWith(t, mode{driver: "sqlite"}, crowdBudgets)
	c.preheat(t, openActivity(1,
		sale.SKU{ID: 1001, Stock: 10, Price: 9900, LimitPerUser: 1},
		sale.SKU{ID: 1002, Stock: 10, Price: 1990, LimitPerUser: 1}))
	for _, sku := range []int64{1001, 1002} {
		a := c.buy(t, sku, 4242)
		if a.Status != 200 {
			t.Fatalf("buy %d: %+v", sku, a)
		}
		testenv.Eventually(t, "ticket "+a.RequestNo+" to become an order", 20*time.Second, func() bool {
			return c.result(t, a.RequestNo, 4242).Code == sale.ResultSuccess
		})
	}
	status, p := c.myOrders(t, "4242")
	if status != 200 || len(p.Orders) != 2 || p.Next != "" {
		t.Fatalf("my orders: %d %+v", status, p)
	}
	for i, want := range []struct {
		sku    int64
		amount string
	}{{1002, "19.90"}, {1001, "99.00"}} {
		o := p.Orders[i]
		if o.SKUID != want.sku || o.Amount != want.amount || o.ActivityID != 1 || o.Quantity != 1 ||
			o.State != "PENDING_PAYMENT" || o.OrderNo != "O"+o.RequestNo ||
			!o.PayDeadline.Equal(o.Created.Add(c.cfg.Order.PayTimeout)) {
			t.Errorf("order %d: %+v, want SKU %d for %s", i, o, want.sku, want.amount)
		}
	}
	if status, p := c.myOrders(t, "4243"); status != 200 || len(p.Orders) != 0 {
		t.Fatalf("another buyer: %d %+v", status, p)
	}
}

// TestMyOrdersReadsTheUserAsThePurchaseDoes: for every X-User-Id, "my
// orders" and the purchase route agree on missing (401), malformed (400)
// or a user.
func TestMyOrdersReadsTheUserAsThePurchaseDoes(t *testing.T) {
	c := startCluster(t, mode{driver: "sqlite"})
	kind := func(status int) string {
		switch status {
		case 401, 400:
			return http.StatusText(status)
		}
		return "a user"
	}
	for _, h := range []string{"", "0", "00", "7", "007", "+7", "-7", "7a", "0x1f", "1e3", "7.0",
		"123456789012345678", "1234567890123456789", "99999999999999999999", strings.Repeat("9", 18)} {
		req, _ := http.NewRequest("POST", c.base+"/api/v1/flash-sale/order", strings.NewReader(`{"skuId":424242,"quantity":1}`))
		req.Header.Set("Content-Type", "application/json")
		if h != "" {
			req.Header.Set("X-User-Id", h)
		}
		resp, err := client.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		mine, _ := c.myOrders(t, h)
		if kind(resp.StatusCode) != kind(mine) {
			t.Errorf("X-User-Id %q: the purchase answers %d, my orders %d", h, resp.StatusCode, mine)
		}
	}
}

// TestEveryBuyerRouteRunsTheIdentityCheck: under identity trusted_proxies
// with a gateway range the test client (127.0.0.1) is not in, every route
// that reads X-User-Id — the edge's own and those the process mounts on it
// (result stream, my orders, pay) — answers 401; a doubled header is 400.
func TestEveryBuyerRouteRunsTheIdentityCheck(t *testing.T) {
	c := startClusterWith(t, mode{driver: "sqlite"}, func(cfg *config.Config) {
		cfg.Edge.Identity = "trusted_proxies"
		cfg.Edge.TrustedProxies = []string{"10.99.0.0/16"}
	})
	for _, rt := range []struct{ method, path, body string }{
		{"POST", "/api/v1/flash-sale/order", `{"skuId":1001,"quantity":1}`},
		{"POST", "/api/seckill/submit", `{"activityId":1,"skuId":1001}`},
		{"POST", "/api/v1/flash-sale/token", `{"activityId":1,"skuId":1001}`},
		{"GET", "/api/v1/flash-sale/result/123", ""},
		{"GET", "/api/v1/flash-sale/result/123/events", ""},
		{"GET", web.OrdersPath, ""},
		{"POST", "/api/v1/flash-sale/orders/O123/pay", ""},
	} {
		for _, users := range [][]string{{"42"}, {"42", "43"}} {
			req, _ := http.NewRequest(rt.method, c.base+rt.path, strings.NewReader(rt.body))
			req.Header.Set("Content-Type", "application/json")
			for _, u := range users {
				req.Header.Add("X-User-Id", u)
			}
			resp, err := client.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			b, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			want := 401
			if len(users) == 2 {
				want = 400
			}
			if resp.StatusCode != want {
				t.Errorf("%s %s with X-User-Id %v from a foreign peer: %d %s, want %d", rt.method, rt.path, users, resp.StatusCode, b, want)
			}
		}
	}
}
