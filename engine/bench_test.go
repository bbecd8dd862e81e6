package engine

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"seckill/internal/testenv"
	"seckill/sale"
	"seckill/stock"
)

// Engine micro-benchmarks against real servers (redis-server, the embedded
// Kafka-protocol broker). Load numbers come from bench/ (make bench); these
// track the cost and allocations of one call and how group commit scales.
// Buyers are distinct across iterations, on a SKU whose stock outlasts the
// run, so every call takes the accept path.

const benchStock = 1 << 40

// occupyFunc is Stock.OccupyWith's shape, which Batcher.Occupy shares.
type occupyFunc func(ctx context.Context, a *sale.Activity, sku *sale.SKU, x stock.Extras, user int64, requestNo string, q int64) (stock.OccupyResult, error)

// benchmarkCrowd runs, per iteration, a crowd of n concurrent buyers through
// occupy and waits for all of them: the shape of a flash sale's burst.
// buyers/s compares one script call per buyer with group commit.
func benchmarkCrowd(b *testing.B, n int, occupy occupyFunc, r *rig) {
	a, k := r.preheat(b, activity(1, 1001, benchStock, true))
	ctx := context.Background()
	var u atomic.Int64
	var wg sync.WaitGroup
	b.ReportAllocs()
	for b.Loop() {
		for range n {
			wg.Go(func() {
				if res, err := occupy(ctx, a, k, stock.Extras{}, u.Add(1), "rn", 1); err != nil || res.Code != stock.CodeOK {
					b.Error(res, err)
				}
			})
		}
		wg.Wait()
	}
	b.ReportMetric(float64(b.N*n)/b.Elapsed().Seconds(), "buyers/s")
}

func BenchmarkCrowd256Single(b *testing.B) {
	r := newRig(b)
	benchmarkCrowd(b, 256, r.stock.OccupyWith, r)
}

func BenchmarkCrowd256Batched(b *testing.B) {
	r := newRig(b)
	benchmarkCrowd(b, 256, r.stock.NewBatcher(stock.BatcherConfig{MaxSize: DefaultConfig().Batch.MaxSize, Timeout: time.Second}).Occupy, r)
}

// BenchmarkLocalOccupy is the whole in-process accept path for one buyer at
// a time: occupy (with the QUEUING result), produce and wait for the broker's ack.
func BenchmarkLocalOccupy(b *testing.B) {
	r := newRig(b)
	k := testenv.StartKafka(b, 1)
	e := newLocal(b, r, k.Addrs)
	r.preheat(b, activity(1, 1001, benchStock, true))
	buy := r.buyers(b, 1001)
	ctx := context.Background()
	var u int64
	b.ReportAllocs()
	for b.Loop() {
		u++
		if _, err := e.Occupy(ctx, buy(u)); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkLocalCrowd256 is the accept path for a crowd of 256 concurrent
// buyers per iteration (group commit and producer batches both fill up).
func BenchmarkLocalCrowd256(b *testing.B) {
	r := newRig(b)
	k := testenv.StartKafka(b, 1)
	e := newLocal(b, r, k.Addrs)
	r.preheat(b, activity(1, 1001, benchStock, true))
	buy := r.buyers(b, 1001)
	ctx := context.Background()
	var u atomic.Int64
	var wg sync.WaitGroup
	b.ReportAllocs()
	for b.Loop() {
		for range 256 {
			wg.Go(func() {
				if _, err := e.Occupy(ctx, buy(u.Add(1))); err != nil {
					b.Error(err)
				}
			})
		}
		wg.Wait()
	}
	b.ReportMetric(float64(b.N*256)/b.Elapsed().Seconds(), "buyers/s")
}
