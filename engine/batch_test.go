package engine

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"go.uber.org/zap/zaptest"

	"seckill/internal/testenv"
	"seckill/stock"
)

func TestBatcherCoalescesUnderLoadWithinTheBound(t *testing.T) {
	r := newRig(t)
	a, k := r.preheat(t, activity(1, 1001, 100000, true))
	b := NewBatcher(r.stock, BatchConfig{Enabled: true, MaxSize: 16}, time.Second)
	var mu sync.Mutex
	sizes := map[int]int{}
	b.onBatch = func(n int) { mu.Lock(); sizes[n]++; mu.Unlock() }

	const workers, each = 64, 40
	var wg sync.WaitGroup
	var oks atomic.Int64
	for g := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range each {
				u := int64(g*each + i + 1)
				res, err := b.Occupy(context.Background(), a, k, stock.Extras{}, u, fmt.Sprint("rn", u), 1)
				if err != nil || res.Code != stock.CodeOK || res.Holder != fmt.Sprint("rn", u) {
					t.Errorf("user %d: %+v %v", u, res, err)
					return
				}
				oks.Add(1)
			}
		}()
	}
	wg.Wait()
	calls, buyers, biggest := 0, 0, 0
	for n, c := range sizes {
		calls += c
		buyers += n * c
		biggest = max(biggest, n)
	}
	if buyers != workers*each || oks.Load() != workers*each {
		t.Fatalf("%d buyers sent, %d OK, want %d", buyers, oks.Load(), workers*each)
	}
	if biggest > 16 {
		t.Fatalf("a batch of %d buyers, above max_size 16 (%v)", biggest, sizes)
	}
	if calls >= buyers/2 {
		t.Fatalf("%d script calls for %d buyers: concurrent occupies were not coalesced (%v)", calls, buyers, sizes)
	}
	if c := r.counts(t, 1, 1001); c.Sold != workers*each || c.Holders != workers*each {
		t.Fatalf("counts %+v", c)
	}
	t.Logf("%d buyers in %d script calls; sizes %v", buyers, calls, sizes)
}

func TestBatcherSendsALoneOccupyAtOnce(t *testing.T) {
	r := newRig(t)
	a, k := r.preheat(t, activity(1, 11, 10, false))
	b := NewBatcher(r.stock, DefaultConfig().Batch, time.Second)
	var sizes []int
	b.onBatch = func(n int) { sizes = append(sizes, n) }
	for u := int64(1); u <= 3; u++ {
		res, err := b.Occupy(context.Background(), a, k, stock.Extras{}, u, fmt.Sprint("rn", u), 1)
		if err != nil || res != (stock.OccupyResult{Code: stock.CodeOK, Remaining: 10 - u, Holder: fmt.Sprint("rn", u)}) {
			t.Fatalf("user %d: %+v %v", u, res, err)
		}
	}
	if fmt.Sprint(sizes) != "[1 1 1]" {
		t.Fatalf("batch sizes %v, want each idle occupy sent alone", sizes)
	}
}

func TestBatcherDropsABuyerWhoseContextEnded(t *testing.T) {
	r := newRig(t)
	a, k := r.preheat(t, activity(1, 11, 10, false))
	b := NewBatcher(r.stock, DefaultConfig().Batch, time.Second)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := b.Occupy(ctx, a, k, stock.Extras{}, 1, "gone", 1); !errors.Is(err, context.Canceled) {
		t.Fatalf("occupy with an ended context: %v", err)
	}
	if c := r.counts(t, 1, 11); c.Remaining != 10 || c.Holders != 0 {
		t.Fatalf("a buyer who had gone was occupied: %+v", c)
	}
}

// TestBatcherDropsABuyerWhoseTimeoutExpired: a buyer whose shared timeout
// has closed before its batch goes out is dropped with
// context.DeadlineExceeded, and nothing is occupied for it.
func TestBatcherDropsABuyerWhoseTimeoutExpired(t *testing.T) {
	r := newRig(t)
	a, k := r.preheat(t, activity(1, 11, 10, false))
	b := NewBatcher(r.stock, DefaultConfig().Batch, time.Second)
	expired := make(chan struct{})
	close(expired)
	if _, err := b.OccupyWithin(context.Background(), expired, a, k, stock.Extras{}, 1, "late", 1); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("occupy past its timeout: %v", err)
	}
	if c := r.counts(t, 1, 11); c.Remaining != 10 || c.Holders != 0 {
		t.Fatalf("a buyer past its timeout was occupied: %+v", c)
	}
}

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

// TestBatcherConcurrentNeverOversells is the ledger's never-oversell test
// (stock.TestOccupyConcurrentNeverOversells) through group commit: 50
// goroutines, 3,000 attempts over 2,000 users (every third a repeat) on
// 1,000 units, coalesced into batches.
func TestBatcherConcurrentNeverOversells(t *testing.T) {
	r := newRig(t)
	a, k := r.preheat(t, activity(1, 1001, 1000, false))
	b := NewBatcher(r.stock, DefaultConfig().Batch, time.Second)
	ctx := context.Background()
	var mu sync.Mutex
	okUsers := map[int64]int{}
	var wg sync.WaitGroup
	for g := 0; g < 50; g++ {
		wg.Add(1)
		go func(g int) {
			defer wg.Done()
			for i := 0; i < 60; i++ {
				user := int64((g*60+i)%2000 + 1)
				rn := fmt.Sprintf("g%d-%d", g, i)
				res, err := b.Occupy(ctx, a, k, stock.Extras{}, user, rn, 1)
				if err != nil {
					t.Error(err)
					return
				}
				if res.Code == stock.CodeOK {
					mu.Lock()
					okUsers[user]++
					mu.Unlock()
				}
			}
		}(g)
	}
	wg.Wait()
	total := 0
	for u, n := range okUsers {
		if n != 1 {
			t.Errorf("user %d got %d OKs", u, n)
		}
		total += n
	}
	if total != 1000 {
		t.Fatalf("%d OK answers, want exactly 1000", total)
	}
	c := r.counts(t, 1, 1001)
	if c.Remaining != 0 || c.Sold != 1000 || c.Holders != 1000 {
		t.Fatalf("counts: %+v, want remaining 0, sold 1000, 1000 holders", c)
	}
}
