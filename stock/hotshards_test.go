package stock

import (
	"context"
	"errors"
	"fmt"
	"regexp"
	"strconv"
	"testing"
	"time"

	"seckill/catalog"
	"seckill/internal/shard"
	"seckill/internal/testenv"
	"seckill/sale"
)

// hotRig is a Stock over a default redis-server and two hot ones.
type hotRig struct {
	def    *testenv.Redis
	hot    [2]*testenv.Redis
	cfg    shard.Config
	shards *shard.Set
	stock  *Stock
}

func newHotRig(t *testing.T) *hotRig {
	t.Helper()
	r := &hotRig{def: testenv.StartRedis(t), hot: [2]*testenv.Redis{testenv.StartRedis(t), testenv.StartRedis(t)}}
	r.cfg = shard.DefaultConfig()
	r.cfg.Default.Addrs = []string{r.def.Addr}
	r.cfg.Hot = shard.HotShards{{Addrs: []string{r.hot[0].Addr}}, {Addrs: []string{r.hot[1].Addr}}}
	if err := r.cfg.Validate(); err != nil {
		t.Fatal(err)
	}
	var err error
	if r.shards, err = shard.Open(r.cfg); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(r.shards.Close)
	r.stock = New(r.shards, catalog.New(r.shards.Default))
	return r
}

var skuTag = regexp.MustCompile(`^sk:\{a(\d+):s(\d+)\}:`)

// skusOn lists the SKUs (activity:sku) that have keys on rd.
func skusOn(t *testing.T, rd *testenv.Redis) map[string]bool {
	t.Helper()
	keys, err := rd.Do(t, "KEYS", "sk:{*").AsStrSlice()
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]bool{}
	for _, k := range keys {
		if m := skuTag.FindStringSubmatch(k); m != nil {
			out[m[1]+":"+m[2]] = true
		}
	}
	return out
}

// TestHotSKUsLandOnTheirShard: with two hot shards, a hot SKU lives on the
// shard its hotShard names, else on FNV-1a-32("<activity>:<sku>") mod 2; a
// plain SKU on default. Each redis-server holds the keys of its SKUs and
// of no other, and a sale on SKUs of both hot shards sells exactly each
// SKU's stock.
func TestHotSKUsLandOnTheirShard(t *testing.T) {
	r := newHotRig(t)
	ctx := context.Background()
	zero, one := 0, 1
	now := time.Now()
	a := sale.Activity{ID: 7, Start: now.Add(-time.Minute), End: now.Add(time.Hour), State: sale.StateOnline}
	for sku := int64(100); sku < 116; sku++ {
		a.SKUs = append(a.SKUs, sale.SKU{ID: sku, Stock: 3, Price: 100, LimitPerUser: 1, Hot: true})
	}
	// Explicit placements against the rule's choice, so the field is seen
	// to win.
	for i := range a.SKUs[:2] {
		k := &a.SKUs[i]
		if shard.HotIndex(7, k.ID, 2) == 0 {
			k.HotShard = &one
		} else {
			k.HotShard = &zero
		}
	}
	a.SKUs = append(a.SKUs, sale.SKU{ID: 200, Stock: 3, Price: 100, LimitPerUser: 1})
	if err := r.stock.Preheat(ctx, a); err != nil {
		t.Fatal(err)
	}

	want := [3]map[string]bool{{}, {}, {}} // default, hot0, hot1
	for i := range a.SKUs {
		k := &a.SKUs[i]
		idx := -1
		switch {
		case k.HotShard != nil:
			idx = *k.HotShard
		case k.Hot:
			idx = shard.HotIndex(7, k.ID, 2)
		}
		want[idx+1]["7:"+strconv.FormatInt(k.ID, 10)] = true
		if got := r.stock.Shard(7, k.ID); got != idx {
			t.Errorf("sku %d: Shard %d, want %d", k.ID, got, idx)
		}
		if got, w := r.stock.ShardName(7, k.ID), r.shards.Name(idx); got != w {
			t.Errorf("sku %d: ShardName %q, want %q", k.ID, got, w)
		}
		if r.stock.Client(7, k.ID) != r.shards.Client(idx) {
			t.Errorf("sku %d: Client is not shard %d's", k.ID, idx)
		}
	}
	if len(want[1]) < 3 || len(want[2]) < 3 {
		t.Fatalf("the test's SKUs do not spread over both hot shards: %v", want)
	}
	for i, rd := range []*testenv.Redis{r.def, r.hot[0], r.hot[1]} {
		if got := skusOn(t, rd); fmt.Sprint(got) != fmt.Sprint(want[i]) {
			t.Errorf("shard %s holds the keys of %v, want %v", r.shards.Name(i-1), got, want[i])
		}
	}

	// A sale on every SKU: 5 buyers each for 3 units.
	pa, _ := r.stock.Catalog().Activity(7)
	for i := range pa.SKUs {
		k := &pa.SKUs[i]
		var buyers []Buyer
		for u := int64(1); u <= 5; u++ {
			buyers = append(buyers, Buyer{UserID: u, RequestNo: fmt.Sprintf("%d-%d-%d", pa.ID, k.ID, u), Quantity: 1})
		}
		res, err := r.stock.OccupyBatch(ctx, pa, k, Extras{}, buyers, nil)
		if err != nil {
			t.Fatalf("sku %d: %v", k.ID, err)
		}
		ok := 0
		for _, o := range res {
			if o.Code == CodeOK {
				ok++
			} else if o.Code != CodeSoldOut {
				t.Errorf("sku %d: %+v", k.ID, o)
			}
		}
		c, err := r.stock.Counts(ctx, 7, k.ID)
		if err != nil {
			t.Fatal(err)
		}
		if ok != 3 || c.Remaining != 0 || c.Sold != 3 || c.Holders != 3 {
			t.Errorf("sku %d on %s: %d sold, counts %+v; want exactly its 3 units", k.ID, r.stock.ShardName(7, k.ID), ok, c)
		}
	}

	// The pipelines of the consumer (claim) and the sweeper (release)
	// group tickets by shard: one batch over SKUs of all three claims
	// each where it lives.
	var msgs []*sale.Message
	for i := range pa.SKUs {
		k := pa.SKUs[i].ID
		msgs = append(msgs, &sale.Message{RequestNo: fmt.Sprintf("7-%d-1", k), ActivityID: 7, SKUID: k, UserID: 1, Quantity: 1},
			&sale.Message{RequestNo: fmt.Sprintf("7-%d-2", k), ActivityID: 7, SKUID: k, UserID: 2, Quantity: 1})
	}
	held, err := r.stock.ClaimBatch(ctx, msgs)
	if err != nil {
		t.Fatal(err)
	}
	for i, h := range held {
		if !h {
			t.Errorf("claim of %s: not held", msgs[i].RequestNo)
		}
	}
	outs, err := r.stock.ReleaseBatch(ctx, msgs[1:2], true)
	if err != nil || outs[0] != Released {
		t.Fatalf("forced release across shards: %v, %v", outs, err)
	}
	for i := range pa.SKUs {
		k := pa.SKUs[i].ID
		c, _ := r.stock.Counts(ctx, 7, k)
		wantClaimed := int64(2)
		if k == msgs[1].SKUID {
			wantClaimed = 1
		}
		if c.Claimed != wantClaimed {
			t.Errorf("sku %d: claimed %d, want %d", k, c.Claimed, wantClaimed)
		}
	}
}

// TestSKUNamingAMissingHotShardFailsClosed: a process configured with
// fewer hot shards than a SKU names never touches another shard for it:
// preheat and occupy fail, and no shard holds a key of it.
func TestSKUNamingAMissingHotShardFailsClosed(t *testing.T) {
	r := newHotRig(t)
	ctx := context.Background()
	five := 5
	a := activity(8, 800, 10, true)
	a.SKUs[0].HotShard = &five
	// The catalog may hold it (another process with more shards wrote it).
	if err := r.stock.Catalog().Put(ctx, a); err != nil {
		t.Fatal(err)
	}
	if err := r.stock.Preheat(ctx, a); !errors.Is(err, shard.ErrNoShard) {
		t.Fatalf("preheat: %v, want ErrNoShard", err)
	}
	pa, k, ok := r.stock.Catalog().Lookup(8, 800)
	if !ok {
		t.Fatal("catalog lost the activity")
	}
	if _, err := r.stock.Occupy(ctx, pa, k, 1, "rn-1", 1); !errors.Is(err, shard.ErrNoShard) {
		t.Fatalf("occupy: %v, want ErrNoShard", err)
	}
	if got := r.stock.ShardName(8, 800); got != "missing" {
		t.Errorf("ShardName %q, want missing", got)
	}
	for _, rd := range []*testenv.Redis{r.def, r.hot[0], r.hot[1]} {
		if got := skusOn(t, rd); got["8:800"] {
			t.Errorf("%s holds keys of the SKU", rd.Addr)
		}
	}
}

// TestReadinessCoversEveryHotShard: Ping and the start-up dependencies
// fail while either hot shard is down.
func TestReadinessCoversEveryHotShard(t *testing.T) {
	r := newHotRig(t)
	ctx := context.Background()
	if err := r.shards.Ping(ctx); err != nil {
		t.Fatalf("all up: %v", err)
	}
	deps := shard.Dependencies(r.cfg)
	if len(deps) != 3 {
		t.Fatalf("dependencies %v, want default, hot0, hot1", deps)
	}
	r.hot[1].Stop()
	pctx, cancel := context.WithTimeout(ctx, 3*time.Second)
	defer cancel()
	if err := r.shards.Ping(pctx); err == nil {
		t.Fatal("Ping with hot1 down: nil")
	}
	for _, d := range deps {
		err := d.Check(ctx)
		if (d.Name == "redis.hot1") != (err != nil) {
			t.Errorf("%s with hot1 down: %v", d.Name, err)
		}
	}
}
