package edge

import (
	"testing"
	"time"

	"seckill/sale"
)

func TestActivityView(t *testing.T) {
	e := newEdge(t)
	e.srv.HandleEvent(sale.Event{Kind: sale.EventSoldOut, Activity: 7, SKU: 1002})
	e.srv.flags.cache.Wait()

	r := e.do("GET", "/api/v1/flash-sale/activities/7", "", "")
	if r.status != 200 {
		t.Fatalf("got %d %s", r.status, r.raw)
	}
	if cc := r.header["Cache-Control"]; cc != "public, max-age=1" {
		t.Errorf("Cache-Control %q, want public, max-age=1", cc)
	}
	want := map[string]any{
		"id":           float64(7),
		"serverTime":   saleOpen.Format(timeLayout),
		"serverTimeMs": float64(saleOpen.UnixMilli()),
		"start":        saleStart.Format(timeLayout),
		"end":          saleStart.Add(time.Hour).Format(timeLayout),
		"state":        "ONLINE",
		"phase":        "OPEN",
		"requireToken": false,
	}
	for k, v := range want {
		if r.body[k] != v {
			t.Errorf("%s = %v, want %v", k, r.body[k], v)
		}
	}
	skus, _ := r.body["skus"].([]any)
	if len(skus) != 2 {
		t.Fatalf("skus: %s", r.raw)
	}
	wantSKUs := []map[string]any{
		{"id": float64(1001), "price": "9.90", "limitPerUser": float64(1), "soldOut": false},
		{"id": float64(1002), "price": "120.00", "limitPerUser": float64(2), "soldOut": true},
	}
	for i, w := range wantSKUs {
		got, _ := skus[i].(map[string]any)
		for k, v := range w {
			if got[k] != v {
				t.Errorf("skus[%d].%s = %v, want %v", i, k, got[k], v)
			}
		}
	}
}

func TestActivityViewPhases(t *testing.T) {
	e := newEdge(t)
	cases := []struct {
		name  string
		at    time.Time
		phase string
	}{
		{"before the start it is upcoming", saleStart.Add(-time.Second), "UPCOMING"},
		{"at the start it is open", saleStart, "OPEN"},
		{"at the end it has ended", saleStart.Add(time.Hour), "ENDED"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			e.clock.set(c.at)
			r := e.do("GET", "/api/v1/flash-sale/activities/8", "", "")
			if r.body["phase"] != c.phase || r.body["requireToken"] != true {
				t.Fatalf("got %s, want phase %s and requireToken", r.raw, c.phase)
			}
		})
	}
}

func TestActivityViewOfAnUnknownActivityIsNotFound(t *testing.T) {
	e := newEdge(t)
	for _, p := range []string{"/api/v1/flash-sale/activities/99", "/api/v1/flash-sale/activities/x", "/api/v1/flash-sale/activities/-1"} {
		if r := e.do("GET", p, "", ""); r.status != 404 || r.code() != "NOT_FOUND" {
			t.Errorf("%s: got %d %s, want 404", p, r.status, r.raw)
		}
	}
}
