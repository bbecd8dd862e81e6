package admin

import (
	"encoding/json"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/valyala/fasthttp"
	"go.uber.org/zap/zaptest"

	"seckill/internal/shard"
	"seckill/internal/testenv"
	"seckill/stock"
	"seckill/stock/stocktest"
	"seckill/store"
)

func TestMain(m *testing.M) { testenv.Main(m) }

func send(s *Server, method, path, body string) *fasthttp.RequestCtx {
	var ctx fasthttp.RequestCtx
	var req fasthttp.Request
	req.Header.SetMethod(method)
	req.SetRequestURI(path)
	req.Header.Set("Authorization", "Bearer tok")
	req.SetBodyString(body)
	ctx.Init(&req, nil, nil)
	s.Handler()(&ctx)
	return &ctx
}

// newServer is an admin server (token "tok") on st and a SQLite store of
// its own.
func newServer(t *testing.T, st *stock.Stock) (*Server, store.Store) {
	t.Helper()
	scfg := store.DefaultConfig()
	scfg.DSN = filepath.Join(t.TempDir(), "admin.db")
	db, err := store.Open(scfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	return New("tok", Deps{Stock: st, Store: db}, zaptest.NewLogger(t)), db
}

// TestHotShardIsCheckedAndShown: with two hot shards, creating a SKU that
// names hot shard 2 is refused (it would be refused by every process);
// hotShard 1 is kept, and the stock view names the shard of each SKU.
func TestHotShardIsCheckedAndShown(t *testing.T) {
	def, h0, h1 := testenv.StartRedis(t), testenv.StartRedis(t), testenv.StartRedis(t)
	st, _ := stocktest.Stock(t, def, func(c *shard.Config) {
		c.Hot = shard.HotShards{{Addrs: []string{h0.Addr}}, {Addrs: []string{h1.Addr}}}
	})
	s, _ := newServer(t, st)

	now := time.Now()
	act := func(hotShard int) string {
		return fmt.Sprintf(`{"id":1,"start":%q,"end":%q,"skus":[{"id":10,"stock":5,"price":"1.00","limitPerUser":1},`+
			`{"id":11,"stock":5,"price":"1.00","limitPerUser":1,"hot":true,"hotShard":%d}]}`,
			now.Add(-time.Minute).Format(time.RFC3339), now.Add(time.Hour).Format(time.RFC3339), hotShard)
	}
	if ctx := send(s, "POST", "/admin/v1/activities", act(2)); ctx.Response.StatusCode() != 400 ||
		!strings.Contains(string(ctx.Response.Body()), "hotShard 2") {
		t.Fatalf("hotShard 2 of 2 shards: %d %s, want 400 naming it", ctx.Response.StatusCode(), ctx.Response.Body())
	}
	if ctx := send(s, "POST", "/admin/v1/activities", act(1)); ctx.Response.StatusCode() != 200 {
		t.Fatalf("hotShard 1: %d %s", ctx.Response.StatusCode(), ctx.Response.Body())
	}
	ctx := send(s, "GET", "/admin/v1/activities/1/stock", "")
	var rep StockReport
	if err := json.Unmarshal(ctx.Response.Body(), &rep); err != nil || len(rep.SKUs) != 2 {
		t.Fatalf("stock view %d %s: %v", ctx.Response.StatusCode(), ctx.Response.Body(), err)
	}
	for _, l := range rep.SKUs {
		want := map[int64]string{10: "default", 11: "hot1"}[l.SKUID]
		if l.Shard != want || l.Remaining != 5 {
			t.Errorf("sku %d: shard %q remaining %d, want %q and 5", l.SKUID, l.Shard, l.Remaining, want)
		}
	}
	if n, err := h1.Do(t, "EXISTS", "sk:{a1:s11}:stock").AsInt64(); err != nil || n != 1 {
		t.Fatalf("sku 11's stock on hot1: %d, %v", n, err)
	}
}

// TestBucketsAreCheckedAndShown: a bucketed SKU pinning a hot shard the
// fleet lacks is refused (400); one on both hot shards is created with its
// stock spread (4 buckets of 2, two on each shard), and the stock view
// shows the SKU's sums and each bucket's line.
func TestBucketsAreCheckedAndShown(t *testing.T) {
	def, h0, h1 := testenv.StartRedis(t), testenv.StartRedis(t), testenv.StartRedis(t)
	st, _ := stocktest.Stock(t, def, func(c *shard.Config) {
		c.Hot = shard.HotShards{{Addrs: []string{h0.Addr}}, {Addrs: []string{h1.Addr}}}
	})
	s, _ := newServer(t, st)
	now := time.Now()
	act := func(pins string) string {
		return fmt.Sprintf(`{"id":1,"start":%q,"end":%q,"skus":[{"id":11,"stock":8,"price":"1.00","limitPerUser":1,"hot":true,"buckets":4,"hotShards":%s}]}`,
			now.Add(-time.Minute).Format(time.RFC3339), now.Add(time.Hour).Format(time.RFC3339), pins)
	}
	if ctx := send(s, "POST", "/admin/v1/activities", act("[0,2]")); ctx.Response.StatusCode() != 400 ||
		!strings.Contains(string(ctx.Response.Body()), "hotShards names 2") {
		t.Fatalf("hotShards [0,2] of 2 shards: %d %s, want 400 naming it", ctx.Response.StatusCode(), ctx.Response.Body())
	}
	if ctx := send(s, "POST", "/admin/v1/activities", act("[0,1]")); ctx.Response.StatusCode() != 200 {
		t.Fatalf("hotShards [0,1]: %d %s", ctx.Response.StatusCode(), ctx.Response.Body())
	}
	ctx := send(s, "GET", "/admin/v1/activities/1/stock", "")
	var rep StockReport
	if err := json.Unmarshal(ctx.Response.Body(), &rep); err != nil || len(rep.SKUs) != 1 {
		t.Fatalf("stock view %d %s: %v", ctx.Response.StatusCode(), ctx.Response.Body(), err)
	}
	l := rep.SKUs[0]
	if l.Remaining != 8 || l.Initial != 8 || l.Drift != 0 || len(l.Buckets) != 4 {
		t.Fatalf("sku line %+v", l)
	}
	for b, bl := range l.Buckets {
		if want := []string{"hot0", "hot1"}[b%2]; bl.Bucket != b || bl.Shard != want || bl.Remaining != 2 || bl.Initial != 2 {
			t.Errorf("bucket line %+v, want bucket %d on %s with 2 of 2", bl, b, want)
		}
	}
	for b, h := range []*testenv.Redis{h0, h1, h0, h1} {
		if n, err := h.Do(t, "GET", fmt.Sprintf("sk:{a1:s11:b%d}:stock", b)).AsInt64(); err != nil || n != 2 {
			t.Fatalf("bucket %d's stock on its shard: %d, %v", b, n, err)
		}
	}
}
