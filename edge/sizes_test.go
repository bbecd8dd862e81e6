package edge

import (
	"strconv"
	"testing"

	"seckill/engine"
	"seckill/internal/testenv"
)

// TestSizeGaugesFollowTheCrowdToTheirBounds: a crowd of distinct buyers
// larger than edge.rate.max_keys fills the per-user limiter to its bound
// (within its shards' rounding) and no further, every buyer's ticket is in the holders cache, and the
// per-SKU layers hold one state for the one SKU — all read from /metrics'
// registry, as a soak samples them. After Shutdown the gauges go (the
// caches are closed), and a scrape does not fail.
func TestSizeGaugesFollowTheCrowdToTheirBounds(t *testing.T) {
	const crowd = 1100
	e := newEdge(t, withConfig(func(c *Config) {
		c.Rate.MaxKeys = 1024
		c.Rate.UserPerSecond, c.Rate.UserBurst = 10, 10
		c.Rate.SKUInflight = 64
		c.Rate.GateK, c.Rate.GateFloor = 1000, 1000
	}))
	e.eng.answer(func(r *engine.Request) (engine.Ticket, error) {
		return engine.Ticket{RequestNo: strconv.FormatInt(500000+r.UserID, 10), Remaining: 1000}, nil
	})
	for u := range crowd {
		mustStatus(t, e.order(strconv.Itoa(1+u), `{"skuId":1001,"quantity":1}`), 200, "QUEUING")
	}
	gauge := func(name, label, value string) float64 {
		v, ok := testenv.MetricPresent(t, e.reg, name, map[string]string{label: value})
		if !ok {
			t.Fatalf("no %s{%s=%q}", name, label, value)
		}
		return v
	}
	// Each of the limiter's 64 shards holds 16 keys; the crowd fills
	// nearly all of them (a shard its ids hash to fewer than 16 times
	// stays short), never one past its bound.
	if n, c := gauge("seckill_edge_limiter_entries", "limiter", "user"), gauge("seckill_edge_limiter_capacity_entries", "limiter", "user"); c != 1024 || n > c || n < 0.95*c {
		t.Errorf("user limiter holds %v of %v keys after %d buyers, want 973-1024 of 1024", n, c, crowd)
	}
	waitFor(t, "every buyer in the holders cache", func() bool {
		return gauge("seckill_edge_cache_entries", "cache", "holders") == crowd
	})
	if c := gauge("seckill_edge_cache_capacity_entries", "cache", "holders"); c != float64(DefaultConfig().HoldersMax) {
		t.Errorf("holders capacity %v, want edge.holders_max %d", c, DefaultConfig().HoldersMax)
	}
	if v := gauge("seckill_edge_cache_entries", "cache", "views"); v < 1 {
		t.Errorf("views cache holds %v entries after purchases of SKU 1001", v)
	}
	for _, layer := range []string{"gate", "inflight"} {
		if v := gauge("seckill_edge_sku_state_entries", "layer", layer); v != 1 {
			t.Errorf("%s holds %v SKU states, want 1 (SKU 1001)", layer, v)
		}
	}
	if v, ok := testenv.MetricPresent(t, e.reg, "seckill_edge_inflight_attempts", nil); !ok || v != 0 {
		t.Errorf("attempts in flight %v (present %v) after every answer, want 0", v, ok)
	}
	if _, ok := testenv.MetricPresent(t, e.reg, "seckill_edge_limiter_entries", map[string]string{"limiter": "ip"}); ok {
		t.Error("a disabled limiter (edge.rate.ip_per_second 0) reports a size")
	}

	if err := e.srv.Shutdown(t.Context()); err != nil {
		t.Fatal(err)
	}
	if _, ok := testenv.MetricPresent(t, e.reg, "seckill_edge_cache_entries", nil); ok {
		t.Error("a shut-down edge still reports its closed caches")
	}
}
