package app

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"seckill/cmd/seckill/config"
	"seckill/internal/testenv"
	"seckill/sale"
)

// redisCPU is the CPU time the redis-server has used (INFO cpu).
func redisCPU(t *testing.T, r *testenv.Redis) time.Duration {
	t.Helper()
	c := r.Client(t)
	info, err := c.Do(context.Background(), c.B().Info().Section("cpu").Build()).ToString()
	if err != nil {
		t.Fatal(err)
	}
	var sum float64
	for _, l := range strings.Split(info, "\n") {
		k, v, ok := strings.Cut(strings.TrimSpace(l), ":")
		if ok && (k == "used_cpu_sys" || k == "used_cpu_user") {
			f, err := strconv.ParseFloat(v, 64)
			if err != nil {
				t.Fatal(err)
			}
			sum += f
		}
	}
	return time.Duration(sum * float64(time.Second))
}

// TestQueueModeFigures measures queue mode against direct purchases in
// one run, for bench/results/queue.md: purchases answered per second
// (200 QUEUING direct, 202 WAITING queued) by 32 clients over HTTP, the
// Redis CPU per buyer (for a queued buyer: the edge's waiting record and
// result plus the drainer's occupy), and the drain rate of a full line
// (held at 1/s while it fills, then let go).
// SECKILL_QUEUE_FIGURES=N runs it with N buyers per mode (it is a
// measurement, not a test of `make test`).
func TestQueueModeFigures(t *testing.T) {
	n, _ := strconv.Atoi(os.Getenv("SECKILL_QUEUE_FIGURES"))
	if n <= 0 {
		t.Skip("set SECKILL_QUEUE_FIGURES=N (buyers per mode) to measure")
	}
	c := startClusterWith(t, mode{"sqlite", false}, func(cfg *config.Config) {
		crowdBudgets(cfg)
		cfg.Engine.Queue.Enabled = true
		cfg.Engine.Queue.SessionTimeout = 6 * time.Second
		cfg.Edge.Rate.GateFloor = 1e6 // measure the path, not the gate
	})
	c.preheat(t, openActivity(1,
		sale.SKU{ID: 4001, Stock: int64(n), Price: 100, LimitPerUser: 1},
		sale.SKU{ID: 4002, Stock: int64(n), Price: 100, LimitPerUser: 1, Mode: sale.ModeQueue}))
	run := func(sku, base int64, want string) (time.Duration, []string) {
		var ok atomic.Int64
		rns := make([]string, n)
		work := make(chan int)
		var wg sync.WaitGroup
		start := time.Now()
		for range 32 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for i := range work {
					w := c.buyQueued(t, sku, base+int64(i))
					if w.Code == want {
						ok.Add(1)
						rns[i] = w.RequestNo
					}
				}
			}()
		}
		for i := range n {
			work <- i
		}
		close(work)
		wg.Wait()
		if int(ok.Load()) != n {
			t.Fatalf("sku %d: %d of %d answered %s", sku, ok.Load(), n, want)
		}
		return time.Since(start), rns
	}
	cpu0 := redisCPU(t, c.redis)
	direct, _ := run(4001, 1_000_000, "QUEUING")
	cpu1 := redisCPU(t, c.redis)
	// The line held (1 attempt/s) while it fills, then let go: the drain
	// rate is the shard's, not the intake's.
	c.setMode(t, 4002, `{"rate":1}`)
	time.Sleep(200 * time.Millisecond)
	queued, rns := run(4002, 2_000_000, "WAITING")
	c.setMode(t, 4002, `{"rate":0}`)
	taken := time.Now()
	// Drained: every attempt decided (read from the drainer's counter,
	// not from Redis, which would add to the CPU measured).
	var drained time.Time
	testenv.EventuallyOK(t, "the line drained", 120*time.Second, func() error {
		if d := testenv.Metric(t, c.sys.Reg, "seckill_queue_decided_total", nil); d < float64(len(rns)) {
			return fmt.Errorf("%v of %d decided", d, len(rns))
		}
		drained = time.Now()
		return nil
	})
	cpu2 := redisCPU(t, c.redis)
	decided := testenv.Metric(t, c.sys.Reg, "seckill_queue_decided_total", map[string]string{"outcome": "ok"})
	t.Logf("buyers per mode: %d (32 HTTP clients, one edge + in-process engine + drainer + consumer, one redis-server)", n)
	t.Logf("direct: %.0f accepted/s (200 QUEUING); Redis CPU %.1f µs per accepted buyer", float64(n)/direct.Seconds(),
		float64((cpu1-cpu0).Microseconds())/float64(n))
	t.Logf("queue:  %.0f taken/s (202 WAITING) = %.2f × direct; Redis CPU %.1f µs per queued buyer (waiting record, WAITING result, drained occupy, consumer)",
		float64(n)/queued.Seconds(), direct.Seconds()/queued.Seconds(), float64((cpu2-cpu1).Microseconds())/float64(n))
	t.Logf("line:   %v decided ok; a full line of %d drained in %v: %.0f attempts/s (%.2f × direct accepts/s)",
		decided, n, drained.Sub(taken).Round(time.Millisecond), float64(n)/drained.Sub(taken).Seconds(), direct.Seconds()/drained.Sub(taken).Seconds())
}
