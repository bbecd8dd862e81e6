package stock

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

func TestBatcherCoalescesUnderLoadWithinTheBound(t *testing.T) {
	r := newRig(t)
	a, k := r.preheat(t, activity(1, 1001, 100000, true))
	b := r.stock.NewBatcher(BatcherConfig{MaxSize: 16, Timeout: time.Second})
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
				res, err := b.Occupy(context.Background(), a, k, Extras{}, u, fmt.Sprint("rn", u), 1)
				if err != nil || res.Code != CodeOK || res.Holder != fmt.Sprint("rn", u) {
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
	b := r.stock.NewBatcher(BatcherConfig{MaxSize: 256, Timeout: time.Second})
	var sizes []int
	b.onBatch = func(n int) { sizes = append(sizes, n) }
	for u := int64(1); u <= 3; u++ {
		res, err := b.Occupy(context.Background(), a, k, Extras{}, u, fmt.Sprint("rn", u), 1)
		if err != nil || res != (OccupyResult{Code: CodeOK, Remaining: 10 - u, Holder: fmt.Sprint("rn", u)}) {
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
	b := r.stock.NewBatcher(BatcherConfig{MaxSize: 256, Timeout: time.Second})
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := b.Occupy(ctx, a, k, Extras{}, 1, "gone", 1); !errors.Is(err, context.Canceled) {
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
	b := r.stock.NewBatcher(BatcherConfig{MaxSize: 256, Timeout: time.Second})
	expired := make(chan struct{})
	close(expired)
	if _, err := b.OccupyWithin(context.Background(), expired, a, k, Extras{}, 1, "late", 1); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("occupy past its timeout: %v", err)
	}
	if c := r.counts(t, 1, 11); c.Remaining != 10 || c.Holders != 0 {
		t.Fatalf("a buyer past its timeout was occupied: %+v", c)
	}
}

// TestBatcherConcurrentNeverOversells is the ledger's never-oversell test
// (TestOccupyConcurrentNeverOversells) through group commit: 50
// goroutines, 3,000 attempts over 2,000 users (every third a repeat) on
// 1,000 units, coalesced into batches.
func TestBatcherConcurrentNeverOversells(t *testing.T) {
	r := newRig(t)
	a, k := r.preheat(t, activity(1, 1001, 1000, false))
	b := r.stock.NewBatcher(BatcherConfig{MaxSize: 256, Timeout: time.Second})
	neverOversells(t, r, func(ctx context.Context, user int64, rn string) (OccupyResult, error) {
		return b.Occupy(ctx, a, k, Extras{}, user, rn, 1)
	})
}
