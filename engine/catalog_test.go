package engine

import (
	"context"
	"sync"
	"testing"

	"go.uber.org/zap/zaptest"

	"seckill/internal/catalog"
	"seckill/internal/testenv"
	"seckill/stock"
)

// An engine that runs apart from the edge (the sidecar) has its own copy of
// the catalog: an activity preheated by another process after it started
// must sell at once, not answer UNKNOWN_SKU until a restart.
func TestEngineLearnsAnActivityCreatedAfterItStarted(t *testing.T) {
	r := newRig(t)
	k := testenv.StartKafka(t, 1)
	// The engine's process: its own catalog, loaded (empty) at start.
	own := catalog.New(r.shards.Default)
	if err := own.Load(context.Background()); err != nil {
		t.Fatal(err)
	}
	cfg := DefaultConfig()
	cfg.Kafka.Brokers = k.Addrs
	e, err := New(cfg, stock.New(r.shards, own), r.res, zaptest.NewLogger(t), nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { e.Close() })
	// Another process (the admin API) creates the activity.
	r.preheat(t, activity(1, 1001, 5, false))
	tk, err := e.Occupy(context.Background(), &Request{SKUID: 1001, UserID: 1, Quantity: 1})
	if err != nil || tk.RequestNo == "" || tk.Remaining != 4 {
		t.Fatalf("first purchase after the activity appeared: %+v %v", tk, err)
	}
}

// The first burst after an activity appears: every buyer of it gets a
// ticket, none an UNKNOWN_SKU while one of them reloads the catalog.
func TestBuyersWaitForTheCatalogReloadTheirMissStarted(t *testing.T) {
	r := newRig(t)
	k := testenv.StartKafka(t, 1)
	own := catalog.New(r.shards.Default)
	cfg := DefaultConfig()
	cfg.Kafka.Brokers = k.Addrs
	e, err := New(cfg, stock.New(r.shards, own), r.res, zaptest.NewLogger(t), nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { e.Close() })
	r.preheat(t, activity(1, 1001, 100, false))
	var wg sync.WaitGroup
	errs := make(chan error, 50)
	for u := int64(1); u <= 50; u++ {
		wg.Go(func() {
			if _, err := e.Occupy(context.Background(), &Request{SKUID: 1001, UserID: u, Quantity: 1}); err != nil {
				errs <- err
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Errorf("a buyer of the new activity: %v", err)
	}
}
