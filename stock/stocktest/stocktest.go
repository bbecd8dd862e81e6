// Package stocktest builds what the stock ledger tests of the bookkeeping
// parts (consumer, payment, reconcile, monitor) run against: the ledger's
// Stock and the results store over a real redis-server, and every orders
// database implementation in turn. It sits apart from internal/testenv
// because it imports the ledger and the store, parts that internal/ may not
// import (and whose own tests import testenv).
package stocktest

import (
	"context"
	"path/filepath"
	"testing"

	"seckill/catalog"
	"seckill/internal/shard"
	"seckill/internal/testenv"
	"seckill/sale"
	"seckill/stock"
	"seckill/stock/results"
	"seckill/store"
)

// EachStore runs fn once per store implementation, each on a fresh
// database: SQLite in a temporary file, then MariaDB (testenv.MySQL).
func EachStore(t *testing.T, fn func(t *testing.T, cfg store.Config)) {
	t.Helper()
	t.Run("sqlite", func(t *testing.T) {
		cfg := store.DefaultConfig()
		cfg.DSN = filepath.Join(t.TempDir(), "orders.db")
		fn(t, cfg)
	})
	t.Run("mysql", func(t *testing.T) {
		cfg := store.DefaultConfig()
		cfg.Driver, cfg.DSN = "mysql", testenv.MySQL(t)
		fn(t, cfg)
	})
}

// Stock returns the Stock and the results store over r as the only shard
// (default and hot), closed when the test ends. adjust, if given, changes
// the shard configuration first.
func Stock(t testing.TB, r *testenv.Redis, adjust ...func(*shard.Config)) (*stock.Stock, *results.Store) {
	t.Helper()
	cfg := shard.DefaultConfig()
	cfg.Default.Addrs = []string{r.Addr}
	for _, f := range adjust {
		f(&cfg)
	}
	shards, err := shard.Open(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(shards.Close)
	st := stock.New(shards, catalog.New(shards.Default))
	return st, results.New(shards.Default, st.BucketClient, 0)
}

// Ledger is the rig the bookkeeping parts' tests share: a redis-server of
// their own, the stock ledger and the results store over it, and an orders
// database. What a part does with them (its activity, its broker, its
// clock) stays in its own tests.
type Ledger struct {
	Redis   *testenv.Redis
	Stock   *stock.Stock
	Results *results.Store
	Store   store.Store
}

// Options changes how NewLedger builds a Ledger; the zero value is a Redis
// without persistence, the default shard configuration and no store options.
type Options struct {
	Redis  []testenv.RedisOption // e.g. append-only persistence, for a test that restarts Redis
	Shards func(*shard.Config)   // e.g. a shorter Redis timeout
	Store  []store.Option
}

// NewLedger starts the Ledger over the orders database scfg names (one
// EachStore gives), everything closed when the test ends.
func NewLedger(t testing.TB, scfg store.Config, o Options) *Ledger {
	t.Helper()
	l := &Ledger{Redis: testenv.StartRedis(t, o.Redis...)}
	var adjust []func(*shard.Config)
	if o.Shards != nil {
		adjust = append(adjust, o.Shards)
	}
	l.Stock, l.Results = Stock(t, l.Redis, adjust...)
	st, err := store.Open(scfg, o.Store...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	l.Store = st
	return l
}

// Sell puts act in the orders database and preheats its stock into Redis,
// as the admin API does when an activity is created.
func (l *Ledger) Sell(t testing.TB, act sale.Activity) {
	t.Helper()
	ctx := context.Background()
	if err := l.Store.PutActivity(ctx, act); err != nil {
		t.Fatal(err)
	}
	if err := l.Stock.Preheat(ctx, act); err != nil {
		t.Fatal(err)
	}
}
