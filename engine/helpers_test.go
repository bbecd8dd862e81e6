package engine

import (
	"context"
	"testing"
	"time"

	"go.uber.org/zap/zaptest"

	"seckill/catalog"
	"seckill/internal/keyring"
	"seckill/internal/shard"
	"seckill/internal/testenv"
	"seckill/sale"
	"seckill/stock"
	"seckill/stock/results"
)

func TestMain(m *testing.M) { testenv.Main(m) }

// rig is a stock ledger over two real redis-servers (default and hot shard).
type rig struct {
	def, hot *testenv.Redis
	shards   *shard.Set
	cat      *catalog.Catalog
	stock    *stock.Stock
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
	r.stock = stock.New(r.shards, r.cat, stock.WithEventHook(func(e sale.Event) {
		select {
		case r.events <- e:
		default:
		}
	}))
	r.res = results.New(r.shards.Default, r.stock.BucketClient, 0)
	return r
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

// order is one unit of sku for user as the edge hands it to the engine:
// resolved to the SKU's current activity in the rig's catalog.
func (r *rig) order(t testing.TB, sku, user int64) *Request {
	t.Helper()
	a, k, ok := r.cat.Current(sku, time.Now())
	if !ok {
		t.Fatalf("no activity sells sku %d", sku)
	}
	return &Request{Activity: a, SKU: k, UserID: user, Quantity: 1}
}

// buyers resolves sku once, as the edge does, and returns a maker of
// one-unit requests for it that any goroutine may call.
func (r *rig) buyers(t testing.TB, sku int64) func(user int64) *Request {
	t.Helper()
	base := r.order(t, sku, 0)
	return func(user int64) *Request {
		q := *base
		q.UserID = user
		return &q
	}
}

func (r *rig) counts(t *testing.T, a, sku int64) stock.Counts {
	t.Helper()
	c, err := r.stock.Counts(context.Background(), a, sku)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// testSigning is the order-signing key of the tests' engines.
var testSigning = sale.SigningConfig{Keys: []keyring.Key{{ID: "t1", Secret: "engine-test-order-secret-0123456789"}}}

func newLocal(t testing.TB, r *rig, brokers []string, opts ...Option) *Local {
	t.Helper()
	cfg := DefaultConfig()
	cfg.Kafka.Brokers = brokers
	cfg.Kafka.SendTimeout = 2 * time.Second
	cfg.Signing = testSigning
	e, err := New(cfg, r.stock, r.res, zaptest.NewLogger(t), nil, opts...)
	if err != nil {
		t.Fatalf("engine: %v", err)
	}
	t.Cleanup(func() { e.Close() })
	return e
}

// eachMode runs f against the in-process engine (group-commit occupy, the
// default), the same with one occupy script call per buyer, and the engine
// behind the sidecar protocol on a unix socket.
func eachMode(t *testing.T, f func(t *testing.T, r *rig, k *testenv.Kafka, e Engine)) {
	for _, mode := range []string{"in-process", "in-process single occupy", "sidecar"} {
		t.Run(mode, func(t *testing.T) {
			r := newRig(t)
			k := testenv.StartKafka(t, 3)
			loc := newLocal(t, r, k.Addrs)
			if mode == "in-process single occupy" {
				loc.batch = nil
			}
			var e Engine = loc
			if mode == "sidecar" {
				e = startSidecar(t, loc, r.cat, ClientConfig{})
			}
			f(t, r, k, e)
		})
	}
}

// startSidecar serves eng on a unix socket, looking the wire's ids up in
// cat, and returns a client for it.
func startSidecar(t *testing.T, eng Engine, cat *catalog.Catalog, cfg ClientConfig) *Client {
	t.Helper()
	addr := "unix://" + t.TempDir() + "/engine.sock"
	serveSidecar(t, eng, cat, addr)
	return NewClient(addr, cfg)
}

func serveSidecar(t *testing.T, eng Engine, cat *catalog.Catalog, addr string) (*Server, chan error) {
	t.Helper()
	return serveSidecarWith(t, eng, cat, addr, DefaultConfig())
}

func serveSidecarWith(t *testing.T, eng Engine, cat *catalog.Catalog, addr string, cfg Config) (*Server, chan error) {
	t.Helper()
	ln, err := Listen(addr)
	if err != nil {
		t.Fatal(err)
	}
	srv, err := NewServer(eng, cat, cfg, zaptest.NewLogger(t))
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- srv.Serve(ln) }()
	t.Cleanup(func() { _ = srv.Shutdown(context.Background()) })
	return srv, done
}
