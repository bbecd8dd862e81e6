package engine

import (
	"context"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/zap/zaptest"

	"seckill/internal/testenv"
)

// TestLuaMetricsNameTheShard: the occupy script's latency and failures
// are labelled with the shard that holds the SKU (default, hot0), as the
// admin stock view names it.
func TestLuaMetricsNameTheShard(t *testing.T) {
	r := newRig(t)
	k := testenv.StartKafka(t, 3)
	cfg := DefaultConfig()
	cfg.Kafka.Brokers, cfg.Kafka.SendTimeout, cfg.Signing = k.Addrs, 2*time.Second, testSigning
	reg := prometheus.NewRegistry()
	e, err := New(cfg, r.stock, r.res, zaptest.NewLogger(t), reg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { e.Close() })
	r.preheat(t, activity(1, 11, 10, false))
	r.preheat(t, activity(2, 22, 10, true))
	for i, sku := range []int64{11, 22, 22} {
		if _, err := e.Occupy(context.Background(), r.order(t, sku, int64(i+1))); err != nil {
			t.Fatal(err)
		}
	}
	if got := r.stock.ShardName(2, 22); got != "hot0" {
		t.Fatalf("the hot SKU is on %q, want hot0", got)
	}
	for shard, want := range map[string]float64{"default": 1, "hot0": 2} {
		if got := testenv.Metric(t, reg, "seckill_engine_lua_seconds", map[string]string{"shard": shard}); got != want {
			t.Errorf("lua_seconds{shard=%s} count %v, want %v", shard, got, want)
		}
	}
	if _, found := testenv.MetricPresent(t, reg, "seckill_engine_lua_seconds", map[string]string{"shard": "hot"}); found {
		t.Error("a series still says shard=hot")
	}
	// Each answer is counted under its code: buyer 1 again is a
	// duplicate, a buyer past the one unit of SKU 33 sold out.
	r.preheat(t, activity(3, 33, 1, false))
	if _, err := e.Occupy(context.Background(), r.order(t, 11, 1)); err == nil {
		t.Fatal("buyer 1 again: no error, want a duplicate")
	}
	if _, err := e.Occupy(context.Background(), r.order(t, 33, 7)); err != nil {
		t.Fatalf("the one unit of SKU 33: %v", err)
	}
	if _, err := e.Occupy(context.Background(), r.order(t, 33, 8)); err == nil {
		t.Fatal("past the stock: no error, want sold out")
	}
	for code, want := range map[string]float64{"ok": 4, "duplicate": 1, "sold_out": 1, "ended": 0, "error": 0} {
		if got := testenv.Metric(t, reg, "seckill_engine_occupy_total", map[string]string{"code": code}); got != want {
			t.Errorf("occupy_total{code=%s} = %v, want %v", code, got, want)
		}
	}
}
