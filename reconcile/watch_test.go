package reconcile

import (
	"context"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/zap"
	"go.uber.org/zap/zaptest/observer"

	"seckill/internal/testenv"
	"seckill/stock"
)

// TestWatchWaitsForALoadingRedis: Redis restarts on its files and answers
// LOADING for seconds. The watcher must not take that for a loss: however
// many periods pass, it rebuilds nothing and fails no job, logs the wait
// once, and once Redis has loaded every SKU is as it was before the
// restart (a rebuild would have reset it from the database).
func TestWatchWaitsForALoadingRedis(t *testing.T) {
	runTest(t, func(t *testing.T, r *rig) {
		ctx := context.Background()
		r.occupy(t, 501, 1)
		r.occupy(t, 501, 2)
		r.occupy(t, 504, 3) // the hot SKU; one redis-server serves both here
		before := map[int64]stock.Counts{}
		for _, k := range r.act.SKUs {
			before[k.ID] = r.counts(t, k.ID)
		}
		core, logs := observer.New(zap.InfoLevel)
		reg := prometheus.NewRegistry()
		rc := New(DefaultConfig(), r.stock, r.st, r.res, &through{at: r.later}, zap.New(core), reg, WithClock(func() time.Time { return r.later.Add(-time.Hour) }))
		if n, err := rc.Watch(ctx); err != nil || n != 0 {
			t.Fatalf("watch before the restart: %d %v", n, err)
		}

		r.redis.Fill(t, 20000, 64)
		if err := r.redis.RestartLoading(3 * time.Second); err != nil {
			t.Fatal(err)
		}
		// The watcher's period, squeezed: watch every 100ms while Redis
		// loads. A watch may also fail on a connection the restart broke
		// (EOF, once per pipelined connection): a failed period, logged by
		// the job. None may rebuild.
		waited := 0
		for {
			l, err := r.redis.Loading()
			if err != nil {
				t.Fatal(err)
			}
			if !l {
				break
			}
			n, err := rc.Watch(ctx)
			if n != 0 {
				t.Fatalf("watch while Redis loads: %d rebuilt, %v", n, err)
			}
			if err == nil {
				waited++
			} else {
				t.Logf("watch while Redis loads: %v", err)
			}
			time.Sleep(100 * time.Millisecond)
		}
		// The two-checks rule would have rebuilt at the second.
		if waited < 3 {
			t.Fatalf("only %d watches met the loading Redis: the test needs a longer load", waited)
		}
		if n := logs.FilterMessage("Redis is loading its dataset: the watcher rebuilds nothing and waits").Len(); n != 1 {
			t.Errorf("%d lines about the loading Redis over %d watches, want 1", n, waited)
		}
		for ok, i := 0, 0; ok < 2; i++ {
			n, err := rc.Watch(ctx)
			if n != 0 {
				t.Fatalf("watch after loading: %d rebuilt, %v", n, err)
			}
			if err != nil {
				ok = 0
				if i > 10 {
					t.Fatalf("watch after loading: %v", err)
				}
				continue
			}
			ok++
		}
		if n := logs.FilterMessage("Redis has loaded its dataset: the watcher resumes").Len(); n != 1 {
			t.Errorf("%d lines about the end of loading, want 1", n)
		}
		for _, k := range r.act.SKUs {
			if got := r.counts(t, k.ID); got != before[k.ID] {
				t.Errorf("sku %d after the restart: %+v, was %+v", k.ID, got, before[k.ID])
			}
		}
		if v, ok := testenv.MetricPresent(t, reg, "seckill_reconcile_rebuilds_total", nil); !ok || v != 0 {
			t.Errorf("seckill_reconcile_rebuilds_total = %v (present %v), want 0", v, ok)
		}
	})
}
