package stock

import (
	"context"
	"fmt"
	"testing"
	"time"

	"seckill/catalog"
	"seckill/internal/shard"
	"seckill/internal/testenv"
	"seckill/sale"
	"seckill/stock/results"
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
	cfg.Hot = shard.HotShards{{Addrs: []string{r.hot.Addr}}}
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
	r.res = results.New(r.shards.Default, r.stock.BucketClient, 0)
	r.occupy = r.stock.Occupy
	return r
}

// occupyFunc is Stock.Occupy's shape.
type occupyFunc func(ctx context.Context, a *sale.Activity, sku *sale.SKU, user int64, requestNo string, q int64) (OccupyResult, error)

// eachOccupy runs f over a fresh rig once with each buyer alone in its
// script call (Stock.Occupy: a batch of one, as the engine sends a buyer
// who finds its SKU idle) and once with each buyer in a call beside others
// (between two bystanders who take nothing), as group commit sends it: the
// one occupy script must give a buyer the same answer either way. The
// rules themselves are checked against hand-computed batches
// (TestBatchScriptAgainstHandComputedBatches), and the engine's group
// commit under concurrency by its own tests.
func eachOccupy(t *testing.T, f func(t *testing.T, r *rig)) {
	for _, mode := range []string{"alone", "in a batch"} {
		t.Run(mode, func(t *testing.T) {
			r := newRig(t)
			if mode == "in a batch" {
				r.occupy = r.amongBystanders
			}
			f(t, r)
		})
	}
}

// bystanderQty is above any test SKU's per-user limit: a bystander is
// OVER_LIMIT (or a DUPLICATE, or shares a whole-batch answer) and changes
// nothing.
const bystanderQty = 1 << 40

// amongBystanders is one buyer's occupy in a batch of three: a bystander
// before it and one after it, users no test uses.
func (r *rig) amongBystanders(ctx context.Context, a *sale.Activity, sku *sale.SKU, user int64, requestNo string, q int64) (OccupyResult, error) {
	out, err := r.stock.OccupyBatch(ctx, a, sku, Extras{}, []Buyer{
		{UserID: -1, RequestNo: "bystander-before", Quantity: bystanderQty},
		{UserID: user, RequestNo: requestNo, Quantity: q},
		{UserID: -2, RequestNo: "bystander-after", Quantity: bystanderQty},
	}, nil)
	if err != nil {
		return OccupyResult{}, err
	}
	for _, i := range []int{0, 2} {
		if c := out[i].Code; c != CodeOverLimit && c != out[1].Code {
			return OccupyResult{}, fmt.Errorf("bystander %d answered %+v beside %+v", i, out[i], out[1])
		}
	}
	return out[1], nil
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
