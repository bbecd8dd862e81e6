package main

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"seckill/catalog"
	"seckill/internal/shard"
	"seckill/internal/testenv"
	"seckill/sale"
	"seckill/stock"
	"seckill/store"
)

// TestReconcileCommand runs `seckill reconcile` against a real Redis, an
// SQLite file and kfake: drift makes it fail and names the kind; --repair
// fixes the safe kind and the second pass is clean.
func TestReconcileCommand(t *testing.T) {
	ctx := context.Background()
	r := testenv.StartRedis(t)
	k := testenv.StartKafka(t, 1)
	dsn := filepath.Join(t.TempDir(), "seckill.db")
	cfgPath := filepath.Join(t.TempDir(), "reconcile.yaml")
	yaml := fmt.Sprintf(`log: {format: console, level: error}
redis: {default: {addrs: [%s]}}
consumer: {brokers: [%s]}
engine: {kafka: {brokers: [%s]}}
store: {driver: sqlite, dsn: %s}
`, r.Addr, k.Addrs[0], k.Addrs[0], dsn)
	if err := os.WriteFile(cfgPath, []byte(yaml), 0o644); err != nil {
		t.Fatal(err)
	}

	scfg := store.DefaultConfig()
	scfg.DSN = dsn
	st, err := store.Open(scfg)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	rcfg := shard.DefaultConfig()
	rcfg.Default.Addrs = []string{r.Addr}
	shards, err := shard.Open(rcfg)
	if err != nil {
		t.Fatal(err)
	}
	defer shards.Close()
	now := time.Now()
	a := sale.Activity{ID: 9, Start: now.Add(-time.Hour), End: now.Add(time.Hour), State: sale.StateOnline,
		SKUs: []sale.SKU{{ID: 901, Stock: 5, Price: 100, LimitPerUser: 1}}}
	if err := st.PutActivity(ctx, a); err != nil {
		t.Fatal(err)
	}
	if err := stock.New(shards, catalog.New(shards.Default)).Preheat(ctx, a); err != nil {
		t.Fatal(err)
	}
	if err := st.Restock(ctx, 9, 901, 2); err != nil { // the database half of a restock only
		t.Fatal(err)
	}

	var out bytes.Buffer
	err = runReconcile([]string{"--config", cfgPath}, &out)
	if err == nil || !strings.Contains(out.String(), "initial") {
		t.Fatalf("reconcile with drift: %v\n%s", err, out.String())
	}
	// initial drift is not repairable: --repair leaves it and still fails.
	out.Reset()
	if err := runReconcile([]string{"--config", cfgPath, "--repair", "--json"}, &out); err == nil ||
		!strings.Contains(out.String(), `"kind": "initial"`) {
		t.Fatalf("repair of an unsafe kind: %v\n%s", err, out.String())
	}
	// The Redis half of the restock: the books add up.
	stock := stock.New(shards, catalog.New(shards.Default))
	if err := stock.Catalog().Load(ctx); err != nil {
		t.Fatal(err)
	}
	if _, _, err := stock.Restock(ctx, 9, 901, 2); err != nil {
		t.Fatal(err)
	}
	out.Reset()
	if err := runReconcile([]string{"--config", cfgPath}, &out); err != nil {
		t.Fatalf("clean books: %v\n%s", err, out.String())
	}
	if !strings.Contains(out.String(), "1 SKUs, 0 drifts") {
		t.Errorf("output:\n%s", out.String())
	}
}
