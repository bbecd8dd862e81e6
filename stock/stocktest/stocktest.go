// Package stocktest builds what the stock ledger tests of the bookkeeping
// parts (consumer, payment, reconcile, monitor) run against: the ledger's
// Stock and the results store over a real redis-server, and every orders
// database implementation in turn. It sits apart from internal/testenv
// because it imports the ledger and the store, parts that internal/ may not
// import (and whose own tests import testenv).
package stocktest

import (
	"path/filepath"
	"testing"

	"seckill/internal/catalog"
	"seckill/internal/results"
	"seckill/internal/shard"
	"seckill/internal/testenv"
	"seckill/stock"
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
	return stock.New(shards, catalog.New(shards.Default)), results.New(shards.Default, 0)
}
