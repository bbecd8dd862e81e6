package stock

import (
	"context"
	"testing"
	"time"

	"seckill/internal/catalog"
	"seckill/internal/results"
	"seckill/internal/sale"
	"seckill/internal/shard"
	"seckill/internal/testenv"
)

func TestMain(m *testing.M) { testenv.Main(m) }

// rig is a Stock over two real redis-servers (default and hot shard).
type rig struct {
	def, hot *testenv.Redis
	shards   *shard.Set
	cat      *catalog.Catalog
	stock    *Stock
	occupy   occupyFunc // r.stock.Occupy, or the batch script (eachOccupy)
	res      *results.Store
	events   chan sale.Event
}

func newRig(t testing.TB) *rig {
	t.Helper()
	r := &rig{def: testenv.StartRedis(t), hot: testenv.StartRedis(t), events: make(chan sale.Event, 1024)}
	cfg := shard.DefaultConfig()
	cfg.Default.Addrs = []string{r.def.Addr}
	cfg.Hot.Addrs = []string{r.hot.Addr}
	var err error
	if r.shards, err = shard.Open(cfg); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(r.shards.Close)
	r.cat = catalog.New(r.shards.Default)
	r.stock = New(r.shards, r.cat, WithEventHook(func(e sale.Event) {
		select {
		case r.events <- e:
		default:
		}
	}))
	r.res = results.New(r.shards.Default, 0)
	r.occupy = r.stock.Occupy
	return r
}

// occupyFunc is Stock.Occupy's shape.
type occupyFunc func(ctx context.Context, a *sale.Activity, sku *sale.SKU, user int64, requestNo string, q int64) (OccupyResult, error)

// eachOccupy runs f over a fresh rig once with one occupy.lua call per buyer
// and once through the batch script (occupy_batch.lua, one buyer per call,
// as the engine's group commit sends an occupy that finds its SKU idle), so
// every Stock-level test holds for both scripts. Batches of many buyers are
// proven equal to single calls by TestBatchScriptAnswersLikeOneCallPerBuyer
// here, and the engine's group commit (engine.Batcher) under concurrency by
// its own tests.
func eachOccupy(t *testing.T, f func(t *testing.T, r *rig)) {
	for _, mode := range []string{"single", "batched"} {
		t.Run(mode, func(t *testing.T) {
			r := newRig(t)
			if mode == "batched" {
				r.occupy = r.batchOfOne
			}
			f(t, r)
		})
	}
}

// batchOfOne is one buyer's occupy through the batch script.
func (r *rig) batchOfOne(ctx context.Context, a *sale.Activity, sku *sale.SKU, user int64, requestNo string, q int64) (OccupyResult, error) {
	out, err := r.stock.OccupyBatch(ctx, a, sku, []Buyer{{UserID: user, RequestNo: requestNo, Quantity: q}}, nil)
	if err != nil {
		return OccupyResult{}, err
	}
	return out[0], nil
}

// activity is open now for an hour with one SKU of the given stock.
func activity(id, sku, stock int64, hot bool) sale.Activity {
	now := time.Now()
	return sale.Activity{ID: id, Start: now.Add(-time.Minute), End: now.Add(time.Hour), State: sale.StateOnline,
		SKUs: []sale.SKU{{ID: sku, Stock: stock, Price: 9900, LimitPerUser: 1, Hot: hot}}}
}

func (r *rig) preheat(t testing.TB, a sale.Activity) (*sale.Activity, *sale.SKU) {
	t.Helper()
	if err := r.stock.Preheat(context.Background(), a); err != nil {
		t.Fatalf("preheat: %v", err)
	}
	pa, k, ok := r.cat.Lookup(a.ID, a.SKUs[0].ID)
	if !ok {
		t.Fatal("catalog lost the activity")
	}
	return pa, k
}

func (r *rig) counts(t *testing.T, a, sku int64) Counts {
	t.Helper()
	c, err := r.stock.Counts(context.Background(), a, sku)
	if err != nil {
		t.Fatal(err)
	}
	return c
}
