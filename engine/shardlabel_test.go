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
}
