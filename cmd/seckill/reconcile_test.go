package main

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/rueidis"

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
	ledger := stock.New(shards, catalog.New(shards.Default))
	if err := ledger.Catalog().Load(ctx); err != nil {
		t.Fatal(err)
	}
	if _, _, err := ledger.Restock(ctx, 9, 901, 2); err != nil {
		t.Fatal(err)
	}
	out.Reset()
	if err := runReconcile([]string{"--config", cfgPath}, &out); err != nil {
		t.Fatalf("clean books: %v\n%s", err, out.String())
	}
	if !strings.Contains(out.String(), "1 SKUs, 0 drifts") {
		t.Errorf("output:\n%s", out.String())
	}

	// User 7's order is closed unpaid and the closer's Redis half never
	// ran: his record still holds the unit. --repair gives it back and,
	// like every release of the running parts, counts the ticket's attempt
	// in the user × SKU window (edge.rate's default: 10 per 10s).
	sku := &a.SKUs[0]
	rn := sale.NewRequestNos(1).Next(a.ID, sku.ID)
	if res, err := ledger.Occupy(ctx, &a, sku, 7, rn, 1); err != nil || res.Code != stock.CodeOK {
		t.Fatalf("occupy: %+v %v", res, err)
	}
	m := sale.Message{RequestNo: rn, ActivityID: a.ID, SKUID: sku.ID, UserID: 7, Quantity: 1, UnitPrice: 100,
		AcceptedAt: time.Now().UnixMilli()}
	if ok, err := ledger.Claim(ctx, &m); err != nil || !ok {
		t.Fatalf("claim: %v %v", ok, err)
	}
	if o, err := st.SaveBatch(ctx, []sale.Message{m}); err != nil || o[0].Kind != store.Created {
		t.Fatalf("save: %+v %v", o, err)
	}
	if _, closed, err := st.CloseOrder(ctx, sale.OrderNo(rn), time.Now().Add(time.Hour)); err != nil || !closed {
		t.Fatalf("close: %v %v", closed, err)
	}
	if err := st.ReleaseDone(ctx, rn); err != nil {
		t.Fatal(err)
	}
	before := time.Now()
	out.Reset()
	if err := runReconcile([]string{"--config", cfgPath, "--repair"}, &out); err != nil ||
		!strings.Contains(out.String(), "record of a closed order") {
		t.Fatalf("repair of a closed order's record: %v\n%s", err, out.String())
	}
	// The repair ran in the window that held before or the one after.
	attempts := int64(0)
	window := (10 * time.Second).Milliseconds()
	first, last := before.UnixMilli()/window, time.Now().UnixMilli()/window
	for b := first; b <= last; b++ {
		key := sale.KeysFor(a.ID, sku.ID).Rate + strconv.FormatInt(b, 10)
		n, err := shards.Default.Do(ctx, shards.Default.B().Hget().Key(key).Field("7").Build()).AsInt64()
		if err != nil && !rueidis.IsRedisNil(err) {
			t.Fatal(err)
		}
		attempts += n
	}
	if attempts != 1 {
		t.Errorf("user 7's attempts in the window after the repair: %d, want 1 (the released ticket's)", attempts)
	}
}
