package app

import (
	"testing"
	"time"

	"seckill/sale"
)

// TestRouteSwitchesCloseTheRealRoutes: through a whole system, closing
// orders, pay and events with the admin API answers each of the real
// routes 503 ROUTE_CLOSED with Retry-After before its handler runs, while
// purchases and result polls go on; reopened, they serve again. And a
// paused activity answers 503 PAUSED while its results stay readable.
func TestRouteSwitchesCloseTheRealRoutes(t *testing.T) {
	c := startCluster(t, sqliteOnly())
	c.preheat(t, openActivity(1, sale.SKU{ID: 1001, Stock: 10, Price: 100, LimitPerUser: 1}))
	auth := "Bearer " + c.cfg.Admin.Token
	a := c.buy(t, 1001, 42)
	if a.Status != 200 {
		t.Fatalf("buy: %+v", a)
	}
	routes := map[string][2]string{
		"orders": {"GET", "/api/v1/flash-sale/orders"},
		"pay":    {"POST", "/api/v1/flash-sale/orders/O1/pay"},
		"events": {"GET", "/api/v1/flash-sale/result/" + a.RequestNo + "/events"},
	}
	for name := range routes {
		expect(t, "close "+name, send(t, "PUT", c.admin+"/admin/v1/routes/"+name, 0, auth, `{"open":false}`), 200, "")
	}
	for name, r := range routes {
		// The event reaches the in-process edge at once; the Redis
		// subscription catches up too.
		deadline := time.Now().Add(5 * time.Second)
		var got reply
		for {
			got = send(t, r[0], c.base+r[1], 42, "", `{}`)
			if got.status == 503 || time.Now().After(deadline) {
				break
			}
			time.Sleep(50 * time.Millisecond)
		}
		expect(t, name+" closed", got, 503, "ROUTE_CLOSED")
		if got.header.Get("Retry-After") == "" {
			t.Errorf("%s closed: no Retry-After", name)
		}
	}
	expect(t, "a purchase with the routes closed", send(t, "POST", c.base+"/api/v1/flash-sale/order", 43, "", `{"skuId":1001,"quantity":1}`), 200, "QUEUING")
	if r := c.result(t, a.RequestNo, 42); r.Status != 200 {
		t.Fatalf("a result poll with the routes closed: %+v", r)
	}
	for name := range routes {
		expect(t, "open "+name, send(t, "PUT", c.admin+"/admin/v1/routes/"+name, 0, auth, `{"open":true}`), 200, "")
	}
	deadline := time.Now().Add(5 * time.Second)
	for {
		r := send(t, "GET", c.base+routes["orders"][1], 42, "", "")
		if r.status == 200 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("orders after reopening: %d %s", r.status, r.raw)
		}
		time.Sleep(50 * time.Millisecond)
	}

	expect(t, "pause", send(t, "PUT", c.admin+"/admin/v1/activities/1/degrade", 0, auth, `{"paused":true}`), 200, "")
	deadline = time.Now().Add(5 * time.Second)
	for {
		r := send(t, "POST", c.base+"/api/v1/flash-sale/order", 44, "", `{"skuId":1001,"quantity":1}`)
		if r.status == 503 && r.code() == "PAUSED" && r.header.Get("Retry-After") != "" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("a purchase while paused: %d %s", r.status, r.raw)
		}
		time.Sleep(50 * time.Millisecond)
	}
	if r := c.result(t, a.RequestNo, 42); r.Status != 200 {
		t.Fatalf("a result poll while paused: %+v", r)
	}
	if r := send(t, "GET", c.base+routes["orders"][1], 42, "", ""); r.status != 200 {
		t.Fatalf("orders while paused: %d %s", r.status, r.raw)
	}
}
