package engine

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"go.uber.org/zap/zaptest"

	"seckill/internal/testenv"
)

// TestOccupyOnAStalledRedisIsBusyWithinTheTimeout: while the SKU's Redis
// is stuck in a long script, buyers of a group-commit batch — the one in
// flight and those queued behind it — answer busy within
// engine.occupy_timeout (and its tick), not when Redis comes back.
func TestOccupyOnAStalledRedisIsBusyWithinTheTimeout(t *testing.T) {
	r := newRig(t)
	k := testenv.StartKafka(t, 1)
	r.preheat(t, activity(1, 7001, 100, true)) // on the hot shard
	cfg := DefaultConfig()
	cfg.Kafka.Brokers = k.Addrs
	cfg.OccupyTimeout = 400 * time.Millisecond
	cfg.Signing = testSigning
	e, err := New(cfg, r.stock, r.res, zaptest.NewLogger(t), nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { e.Close() })
	stall := r.hot.Client(t)
	stalled := make(chan error, 1)
	go func() {
		// Redis runs one script at a time: this one holds it for 1.5 s.
		spin := "local t = redis.call('TIME'); local s = t[1] * 1e6 + t[2]; " +
			"repeat t = redis.call('TIME') until t[1] * 1e6 + t[2] - s > 1500000; return 1"
		stalled <- stall.Do(context.Background(), stall.B().Eval().Script(spin).Numkeys(0).Build()).Error()
	}()
	time.Sleep(100 * time.Millisecond) // the spin has started
	var wg sync.WaitGroup
	var slow atomic.Int64
	for u := range int64(20) {
		wg.Go(func() {
			start := time.Now()
			_, err := e.Occupy(context.Background(), r.order(t, 7001, 100+u))
			// A queued buyer sent after the first batch timed out would
			// answer after two timeouts: the shared timeout drops it.
			if took := time.Since(start); took > cfg.OccupyTimeout+150*time.Millisecond {
				slow.Add(1)
				t.Errorf("buyer %d answered after %v", u, took)
			}
			if !errors.Is(err, ErrBusy) {
				t.Errorf("buyer %d on a stalled Redis: %v, want busy", u, err)
			}
		})
	}
	wg.Wait()
	if err := <-stalled; err != nil {
		t.Fatalf("the stalling script: %v", err)
	}
	if slow.Load() > 0 {
		t.Fatalf("%d of 20 buyers waited past the occupy timeout", slow.Load())
	}
}
