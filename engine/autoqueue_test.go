package engine

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/zap/zaptest"

	"seckill/internal/testenv"
	"seckill/sale"
)

// TestShardSlowForLongEnoughTurnsItsSKUsToQueueMode: with
// engine.queue.auto_latency 25ms over 3 readings, a hot shard whose writes
// are paused 150 ms before each reading (every occupy of the reading slow)
// puts the hot SKU selling now into queue mode at auto_rate — in the
// catalog, announced, counted — and leaves alone the SKU on the healthy
// default Redis and the hot SKU of an activity not yet started. Readings
// of a fast shard, or with only a few slow occupies, switch nothing.
func TestShardSlowForLongEnoughTurnsItsSKUsToQueueMode(t *testing.T) {
	r := newRig(t)
	cfg := DefaultConfig()
	k := testenv.StartKafka(t, 1)
	cfg.Kafka.Brokers = k.Addrs
	cfg.Signing = testSigning
	cfg.Queue.Enabled = true
	cfg.Queue.AutoLatency, cfg.Queue.AutoFor, cfg.Queue.AutoRate = 25*time.Millisecond, 3*time.Second, 77
	if err := cfg.Validate(); err != nil {
		t.Fatal(err)
	}
	reg := prometheus.NewRegistry()
	e, err := New(cfg, r.stock, r.res, zaptest.NewLogger(t), reg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { e.Close() })
	now := time.Now()
	selling := sale.Activity{ID: 1, Start: now.Add(-time.Minute), End: now.Add(time.Hour), State: sale.StateOnline,
		SKUs: []sale.SKU{{ID: 10, Stock: 500, Price: 100, LimitPerUser: 1, Hot: true}, {ID: 20, Stock: 500, Price: 100, LimitPerUser: 1}}}
	later := sale.Activity{ID: 2, Start: now.Add(time.Hour), End: now.Add(2 * time.Hour), State: sale.StateOnline,
		SKUs: []sale.SKU{{ID: 30, Stock: 5, Price: 100, LimitPerUser: 1, Hot: true}}}
	for _, a := range []sale.Activity{selling, later} {
		if err := r.stock.Preheat(context.Background(), a); err != nil {
			t.Fatal(err)
		}
	}
	q := e.newAutoQueue(cfg.Queue, zaptest.NewLogger(t))
	// Readings are taken by hand here, one a second's worth each: three
	// make auto_for.
	user := int64(0)
	buy := func(sku int64, n int, pauseMs int) {
		t.Helper()
		if pauseMs > 0 {
			r.hot.Do(t, "CLIENT", "PAUSE", fmt.Sprint(pauseMs), "WRITE")
		}
		var wg sync.WaitGroup
		for range n {
			user++
			req := r.order(t, sku, user)
			wg.Add(1)
			go func() {
				defer wg.Done()
				if _, err := e.Occupy(context.Background(), req); err != nil {
					t.Errorf("occupy: %v", err)
				}
			}()
		}
		wg.Wait()
	}
	mode := func(a, sku int64) string {
		t.Helper()
		if err := r.cat.Load(context.Background()); err != nil {
			t.Fatal(err)
		}
		_, k, ok := r.cat.Lookup(a, sku)
		if !ok {
			t.Fatalf("sku %d left the catalog", sku)
		}
		return fmt.Sprintf("%s %d", k.Mode, k.Rate)
	}
	tick := func() { q.tick(context.Background(), time.Now()) }

	for range 4 { // fast readings
		buy(10, 20, 0)
		buy(20, 20, 0)
		tick()
	}
	for range 4 { // 3 slow of 23 a reading: not half
		buy(10, 20, 0)
		buy(10, 3, 150)
		tick()
	}
	buy(10, 20, 150)
	tick()
	buy(10, 20, 150)
	tick()
	if got := mode(1, 10); got != " 0" {
		t.Fatalf("sku 10 switched after two slow readings of three: %q", got)
	}
	for len(r.events) > 0 {
		<-r.events
	}
	buy(10, 20, 150)
	tick()
	if got := mode(1, 10); got != "queue 77" {
		t.Fatalf("sku 10 after three slow readings: %q, want queue 77", got)
	}
	for sku, a := range map[int64]int64{20: 1, 30: 2} {
		if got := mode(a, sku); got != " 0" {
			t.Errorf("sku %d (activity %d) switched too: %q", sku, a, got)
		}
	}
	select {
	case ev := <-r.events:
		if ev.Kind != sale.EventActivity || ev.Activity != 1 {
			t.Errorf("announced %+v, want an activity event of activity 1", ev)
		}
	case <-time.After(2 * time.Second):
		t.Error("the switch was not announced")
	}
	if n := testenv.Metric(t, reg, "seckill_engine_auto_queue_total", map[string]string{"shard": r.stock.Shards().Name(0)}); n != 1 {
		t.Errorf("seckill_engine_auto_queue_total %v, want 1", n)
	}
	// Already in queue mode: a slow shard switches nothing more.
	buy(20, 1, 0)
	for range 3 {
		buy(10, 20, 150)
		tick()
	}
	if n := testenv.Metric(t, reg, "seckill_engine_auto_queue_total", map[string]string{"shard": r.stock.Shards().Name(0)}); n != 1 {
		t.Errorf("seckill_engine_auto_queue_total %v after more slow readings, want 1", n)
	}
}
