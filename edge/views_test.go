package edge

import (
	"testing"
	"time"

	"seckill/sale"
)

func TestCurrentActivityChangesAtTheBoundary(t *testing.T) {
	// Activity 20 ends when 21 starts, both selling SKU 3001; views are
	// cached far longer than the gap between requests.
	mid := saleStart.Add(2 * time.Hour)
	e := newEdge(t, withConfig(func(c *Config) { c.ViewTTL = time.Hour }), withActivities(
		sale.Activity{ID: 20, Start: saleStart, End: mid, SKUs: []sale.SKU{{ID: 3001, Stock: 1, LimitPerUser: 1}}},
		sale.Activity{ID: 21, Start: mid, End: mid.Add(time.Hour), SKUs: []sale.SKU{{ID: 3001, Stock: 1, LimitPerUser: 1}}},
	))
	e.clock.set(mid.Add(-time.Second))
	if r := e.order("5", `{"skuId":3001}`); r.status != 200 {
		t.Fatalf("before the boundary: %d %s", r.status, r.raw)
	}
	e.srv.views.cache.Wait()
	if got := e.eng.lastRequest().Activity.ID; got != 20 {
		t.Fatalf("before the boundary: activity %d, want 20", got)
	}
	e.clock.set(mid)
	if r := e.order("5", `{"skuId":3001}`); r.status != 200 {
		t.Fatalf("at the boundary: %d %s", r.status, r.raw)
	}
	if got := e.eng.lastRequest().Activity.ID; got != 21 {
		t.Fatalf("at the boundary: activity %d, want 21", got)
	}
}
