package edge

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"seckill/engine"
	"seckill/sale"
	"seckill/stock"
)

// skuPurchases reads every series of seckill_edge_sku_purchases_total from
// reg, keyed "activity/sku/outcome".
func skuPurchases(t *testing.T, reg prometheus.Gatherer) map[string]float64 {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]float64{}
	for _, mf := range mfs {
		if mf.GetName() != "seckill_edge_sku_purchases_total" {
			continue
		}
		for _, m := range mf.GetMetric() {
			l := map[string]string{}
			for _, lp := range m.GetLabel() {
				l[lp.GetName()] = lp.GetValue()
			}
			out[l["activity"]+"/"+l["sku"]+"/"+l["outcome"]] = m.GetCounter().GetValue()
		}
	}
	return out
}

// zeroSeries are the fixture's (activity, SKU) pairs, both outcomes at 0.
func zeroSeries(pairs ...string) map[string]float64 {
	want := map[string]float64{}
	for _, p := range pairs {
		want[p+"/accepted"], want[p+"/rejected"] = 0, 0
	}
	return want
}

func TestEachPurchaseCountsUnderItsOwnSKU(t *testing.T) {
	e := newEdge(t)
	want := zeroSeries("7/1001", "7/1002", "8/2001", "9/1003")
	if got := skuPurchases(t, e.reg); !maps.Equal(got, want) {
		t.Fatalf("before any purchase: %v, want every SKU of the catalog at 0: %v", got, want)
	}

	steps := []struct {
		name   string
		setup  func()
		user   string
		body   string
		status int
		counts string // the one series the purchase adds 1 to; "" for none
	}{
		{name: "a ticket issued is accepted", user: "1", body: `{"skuId":1001}`, status: 200, counts: "7/1001/accepted"},
		{name: "naming the activity counts the same", user: "2", body: `{"activityId":7,"skuId":1002}`, status: 200, counts: "7/1002/accepted"},
		{name: "the engine's duplicate is rejected", user: "1", body: `{"skuId":1001}`, status: 409, counts: "7/1001/rejected",
			setup: func() {
				e.eng.answer(func(*engine.Request) (engine.Ticket, error) {
					return engine.Ticket{RequestNo: "123", Remaining: 3}, fmt.Errorf("occupy: %w", stock.ErrDuplicate)
				})
			}},
		{name: "the engine's busy is rejected", user: "3", body: `{"skuId":1002}`, status: 503, counts: "7/1002/rejected",
			setup: func() {
				e.eng.answer(func(*engine.Request) (engine.Ticket, error) { return engine.Ticket{Remaining: -1}, engine.ErrBusy })
			}},
		{name: "the local sold-out flag is rejected", user: "4", body: `{"skuId":1002}`, status: 410, counts: "7/1002/rejected",
			setup: func() {
				e.eng.answer(nil)
				e.srv.HandleEvent(sale.Event{Kind: sale.EventSoldOut, Activity: 7, SKU: 1002})
				e.srv.flags.cache.Wait()
			}},
		{name: "a missing token is rejected", user: "5", body: `{"skuId":2001}`, status: 403, counts: "8/2001/rejected"},
		{name: "an offline activity is rejected", user: "6", body: `{"activityId":9,"skuId":1003}`, status: 425, counts: "9/1003/rejected"},
		{name: "an unknown SKU counts nowhere", user: "7", body: `{"skuId":4242}`, status: 404},
		{name: "a body that names no SKU counts nowhere", user: "8", body: `{"quantity":1}`, status: 400},
	}
	for _, s := range steps {
		if s.setup != nil {
			s.setup()
		}
		r := e.order(s.user, s.body)
		if r.status != s.status {
			t.Fatalf("%s: %d %s, want %d", s.name, r.status, r.raw, s.status)
		}
		if s.counts != "" {
			want[s.counts]++
		}
		if got := skuPurchases(t, e.reg); !maps.Equal(got, want) {
			t.Fatalf("%s: counts %v, want %v", s.name, got, want)
		}
	}
}

func TestARateLimitedPurchaseIsRejectedUnderItsSKU(t *testing.T) {
	e := newEdge(t, withConfig(func(c *Config) { c.Rate.UserPerSecond, c.Rate.UserBurst = 1e-6, 1 }))
	if r := e.order("9", `{"skuId":1001}`); r.status != 200 {
		t.Fatalf("first: %d %s", r.status, r.raw)
	}
	if r := e.order("9", `{"skuId":1002}`); r.status != 429 {
		t.Fatalf("second: %d %s, want 429", r.status, r.raw)
	}
	got := skuPurchases(t, e.reg)
	if got["7/1001/accepted"] != 1 || got["7/1002/rejected"] != 1 || got["7/1001/rejected"] != 0 || got["7/1002/accepted"] != 0 {
		t.Fatalf("counts %v", got)
	}
}

func TestSKUSeriesFollowTheCatalog(t *testing.T) {
	e := newEdge(t)
	if r := e.order("1", `{"skuId":1001}`); r.status != 200 {
		t.Fatalf("buy: %d %s", r.status, r.raw)
	}
	if r := e.order("1", `{"skuId":1002}`); r.status != 200 {
		t.Fatalf("buy: %d %s", r.status, r.raw)
	}
	// Activity 7 drops SKU 1002 and starts selling 1004.
	a := fixture()[0]
	a.SKUs = []sale.SKU{a.SKUs[0], {ID: 1004, Stock: 3, Price: 100, LimitPerUser: 1}}
	if err := e.cat.Put(context.Background(), a); err != nil {
		t.Fatal(err)
	}
	if err := e.srv.views.load(context.Background()); err != nil {
		t.Fatal(err)
	}
	got := skuPurchases(t, e.reg)
	want := zeroSeries("7/1001", "7/1004", "8/2001", "9/1003")
	want["7/1001/accepted"] = 1 // kept across the load
	if !maps.Equal(got, want) {
		t.Fatalf("after 1002 left and 1004 came: %v, want %v", slices.Sorted(maps.Keys(got)), want)
	}
	if r := e.order("2", `{"skuId":1002}`); r.status != 404 {
		t.Fatalf("the SKU that left: %d %s", r.status, r.raw)
	}
	if r := e.order("2", `{"skuId":1004}`); r.status != 200 {
		t.Fatalf("the new SKU: %d %s", r.status, r.raw)
	}
	if got := skuPurchases(t, e.reg); got["7/1004/accepted"] != 1 || len(got) != 8 {
		t.Fatalf("after buying the new SKU: %v", got)
	}
}

func TestATallyComesWithAPutBeforeTheNextLoad(t *testing.T) {
	// A Put in this process (the admin API in `seckill dev`) reaches the
	// catalog before the edge's next load: the SKU's first purchase makes
	// its tally, once.
	e := newEdge(t)
	a := sale.Activity{ID: 10, Start: saleStart, End: saleStart.Add(time.Hour), State: sale.StateOnline,
		SKUs: []sale.SKU{{ID: 3001, Stock: 3, Price: 100, LimitPerUser: 1}}}
	if err := e.cat.Put(context.Background(), a); err != nil {
		t.Fatal(err)
	}
	if r := e.order("1", `{"activityId":10,"skuId":3001}`); r.status != 200 {
		t.Fatalf("buy: %d %s", r.status, r.raw)
	}
	if r := e.order("2", `{"activityId":10,"skuId":3001}`); r.status != 200 {
		t.Fatalf("buy: %d %s", r.status, r.raw)
	}
	if got := skuPurchases(t, e.reg); got["10/3001/accepted"] != 2 || got["10/3001/rejected"] != 0 {
		t.Fatalf("counts %v", got)
	}
	// A SKU the catalog does not hold gets no tally.
	if c := e.srv.views.tallies.of(10, 3002); c != nil {
		t.Fatalf("tally for a SKU outside the catalog: %+v", c)
	}
}
