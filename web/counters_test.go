package web

import (
	"encoding/json"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/valyala/fasthttp"
)

// TestCountersAnswerThePerSKUPurchases: the counters the page and the
// console turn into per-SKU rates are in the answer with their labels;
// other families are not.
func TestCountersAnswerThePerSKUPurchases(t *testing.T) {
	reg := prometheus.NewRegistry()
	sku := prometheus.NewCounterVec(prometheus.CounterOpts{Name: "seckill_edge_sku_purchases_total", Help: "h"}, []string{"activity", "sku", "outcome"})
	other := prometheus.NewCounter(prometheus.CounterOpts{Name: "seckill_something_else_total", Help: "h"})
	reg.MustRegister(sku, other)
	sku.WithLabelValues("7", "1001", "accepted").Add(3)
	sku.WithLabelValues("7", "1001", "rejected").Add(5)
	other.Inc()

	var ctx fasthttp.RequestCtx
	Counters(reg)(&ctx)
	var got []Counter
	if err := json.Unmarshal(ctx.Response.Body(), &got); err != nil {
		t.Fatalf("%v: %s", err, ctx.Response.Body())
	}
	want := map[string]float64{"accepted": 3, "rejected": 5}
	for _, c := range got {
		if c.Name != "seckill_edge_sku_purchases_total" {
			t.Errorf("unexpected family in the answer: %+v", c)
			continue
		}
		if c.Labels["activity"] != "7" || c.Labels["sku"] != "1001" || c.Value != want[c.Labels["outcome"]] {
			t.Errorf("counter %+v", c)
		}
		delete(want, c.Labels["outcome"])
	}
	if len(want) != 0 {
		t.Errorf("missing from the answer: %v (got %+v)", want, got)
	}
}
