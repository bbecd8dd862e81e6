package stock

import (
	"context"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/redis/rueidis"

	"seckill/internal/testenv"
	"seckill/sale"
)

// Stock ledger micro-benchmarks against a real redis-server. Load numbers
// come from bench/ (make bench); these track the cost and allocations of
// one script call and how the batch scripts scale. Buyers are distinct
// across iterations, on a SKU whose stock outlasts the run, so every call
// takes the accept path.

const benchStock = 1 << 40

// BenchmarkStockOccupy is one occupy script call per buyer (a batch of
// one), one at a time.
func BenchmarkStockOccupy(b *testing.B) {
	r := newRig(b)
	a, k := r.preheat(b, activity(1, 1001, benchStock, true))
	ctx := context.Background()
	var u int64
	b.ReportAllocs()
	for b.Loop() {
		u++
		if res, err := r.stock.Occupy(ctx, a, k, u, "rn", 1); err != nil || res.Code != CodeOK {
			b.Fatal(res, err)
		}
	}
}

// benchmarkOccupyBatch is one occupy script call for n buyers at a time;
// buyers/s is what one shard connection sustains call after call, and
// redis-µs/buyer the redis-server's CPU per buyer (INFO cpu).
func benchmarkOccupyBatch(b *testing.B, n int, x Extras) {
	r := newRig(b)
	a, k := r.preheat(b, activity(1, 1001, benchStock, true))
	ctx := context.Background()
	buyers := make([]Buyer, n)
	for i := range buyers {
		buyers[i] = Buyer{RequestNo: "rn" + strconv.Itoa(i), Quantity: 1}
	}
	out := make([]OccupyResult, 0, n)
	rdb := r.hot.Client(b)
	cpu0 := redisCPU(b, rdb)
	var u int64
	b.ReportAllocs()
	for b.Loop() {
		for i := range buyers {
			u++
			buyers[i].UserID = u
		}
		var err error
		if out, err = r.stock.OccupyBatch(ctx, a, k, x, buyers, out[:0]); err != nil || out[n-1].Code != CodeOK {
			b.Fatal(out, err)
		}
	}
	b.ReportMetric(float64((redisCPU(b, rdb)-cpu0).Microseconds())/float64(b.N*n), "redis-µs/buyer")
	b.ReportMetric(float64(b.N*n)/b.Elapsed().Seconds(), "buyers/s")
}

// devExtras are the engine's extras with the dev defaults: the user × SKU
// window counted and the QUEUING results written in the call.
var devExtras = Extras{WindowLimit: 10, WindowPeriod: 10 * time.Second}

// redisCPU is the redis-server's CPU time so far (INFO cpu, user + sys).
func redisCPU(b *testing.B, c rueidis.Client) time.Duration {
	b.Helper()
	s, err := c.Do(context.Background(), c.B().Info().Section("cpu").Build()).ToString()
	if err != nil {
		b.Fatal(err)
	}
	cpu, err := testenv.InfoCPU(s)
	if err != nil {
		b.Fatal(err)
	}
	return cpu
}

func BenchmarkStockOccupyWindow1(b *testing.B)  { benchmarkOccupyBatch(b, 1, devExtras) }
func BenchmarkStockOccupyWindow64(b *testing.B) { benchmarkOccupyBatch(b, 64, devExtras) }

func BenchmarkStockOccupyBatch1(b *testing.B)   { benchmarkOccupyBatch(b, 1, Extras{}) }
func BenchmarkStockOccupyBatch16(b *testing.B)  { benchmarkOccupyBatch(b, 16, Extras{}) }
func BenchmarkStockOccupyBatch128(b *testing.B) { benchmarkOccupyBatch(b, 128, Extras{}) }
func BenchmarkStockOccupyBatch512(b *testing.B) { benchmarkOccupyBatch(b, 512, Extras{}) }

// benchmarkClaim256 claims a consumer batch of 256 tickets of one hot SKU
// per iteration: one script call per ticket (concurrently, as the consumer
// does) or one ClaimBatch.
func benchmarkClaim256(b *testing.B, batched bool) {
	r := newRig(b)
	a, k := r.preheat(b, activity(1, 1001, benchStock, true))
	ctx := context.Background()
	msgs := make([]*sale.Message, 256)
	for i := range msgs {
		rn := "rn" + strconv.Itoa(i)
		if _, err := r.stock.Occupy(ctx, a, k, int64(i+1), rn, 1); err != nil {
			b.Fatal(err)
		}
		msgs[i] = &sale.Message{RequestNo: rn, ActivityID: 1, SKUID: 1001, UserID: int64(i + 1), Quantity: 1}
	}
	var wg sync.WaitGroup
	b.ReportAllocs()
	for b.Loop() {
		if batched {
			if _, err := r.stock.ClaimBatch(ctx, msgs); err != nil {
				b.Fatal(err)
			}
			continue
		}
		for _, m := range msgs {
			wg.Go(func() {
				if _, err := r.stock.Claim(ctx, m); err != nil {
					b.Error(err)
				}
			})
		}
		wg.Wait()
	}
	b.ReportMetric(float64(b.N*256)/b.Elapsed().Seconds(), "tickets/s")
}

func BenchmarkClaim256PerTicket(b *testing.B) { benchmarkClaim256(b, false) }
func BenchmarkClaim256Batch(b *testing.B)     { benchmarkClaim256(b, true) }

// benchmarkOccupyReplicated is benchmarkOccupyBatch (16 buyers a call, one
// call after another, as one engine's group commit sends a SKU's batches)
// on a master with a replica, with redis.wait_replicas off (0) or 1: the
// price of the WAIT after each batch (DESIGN §11, "Durable occupy") is the
// difference in ns/op (one batch's round trip) and buyers/s.
func benchmarkOccupyReplicated(b *testing.B, wait int) {
	const n = 16
	_, st := replicatedStock(b, wait, 50*time.Millisecond)
	ctx := context.Background()
	if err := st.Preheat(ctx, activity(1, 1001, benchStock, true)); err != nil {
		b.Fatal(err)
	}
	a, k, _ := st.Catalog().Lookup(1, 1001)
	ids := sale.NewRequestNos(1)
	buyers := make([]Buyer, n)
	out := make([]OccupyResult, 0, n)
	var u int64
	b.ReportAllocs()
	for b.Loop() {
		for i := range buyers {
			u++
			buyers[i] = Buyer{UserID: u, RequestNo: ids.Next(a.ID, k.ID), Quantity: 1}
		}
		var err error
		if out, err = st.OccupyBatch(ctx, a, k, Extras{}, buyers, out[:0]); err != nil || out[n-1].Code != CodeOK {
			b.Fatal(out, err)
		}
	}
	b.ReportMetric(float64(b.N*n)/b.Elapsed().Seconds(), "buyers/s")
}

func BenchmarkStockOccupyBatch16ReplicatedWait0(b *testing.B) { benchmarkOccupyReplicated(b, 0) }
func BenchmarkStockOccupyBatch16ReplicatedWait1(b *testing.B) { benchmarkOccupyReplicated(b, 1) }
