package engine

import (
	"context"
	"errors"
	"sync"
	"testing"

	"go.uber.org/zap/zaptest"

	"seckill/catalog"
	"seckill/internal/testenv"
	"seckill/sale"
	"seckill/stock"
)

// engineProcess is an engine that runs apart from the edge (the sidecar):
// its own catalog, loaded at start (before the test creates any activity),
// and a client of it. The rig's catalog plays the edge's.
func engineProcess(t *testing.T, r *rig) (*catalog.Catalog, *Client) {
	t.Helper()
	k := testenv.StartKafka(t, 1)
	own := catalog.New(r.shards.Default)
	if err := own.Load(context.Background()); err != nil {
		t.Fatal(err)
	}
	cfg := DefaultConfig()
	cfg.Kafka.Brokers = k.Addrs
	cfg.Signing = testSigning
	e, err := New(cfg, stock.New(r.shards, own), r.res, zaptest.NewLogger(t), nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { e.Close() })
	return own, startSidecar(t, e, own, ClientConfig{})
}

// The sidecar has its own copy of the catalog: an activity preheated by
// another process after it started must sell at once when an edge resolved
// a purchase to it, not answer UNKNOWN_SKU until a restart.
func TestSidecarLearnsAnActivityCreatedAfterItStarted(t *testing.T) {
	r := newRig(t)
	_, c := engineProcess(t, r)
	// Another process (the admin API) creates the activity.
	r.preheat(t, activity(1, 1001, 5, false))
	tk, err := c.Occupy(context.Background(), r.order(t, 1001, 1))
	if err != nil || tk.RequestNo == "" || tk.Remaining != 4 {
		t.Fatalf("first purchase after the activity appeared: %+v %v", tk, err)
	}
}

// The first burst after an activity appears: every buyer of it gets a
// ticket, none an UNKNOWN_SKU while one of them reloads the catalog.
func TestBuyersWaitForTheCatalogReloadTheirMissStarted(t *testing.T) {
	r := newRig(t)
	_, c := engineProcess(t, r)
	r.preheat(t, activity(1, 1001, 100, false))
	buy := r.buyers(t, 1001)
	var wg sync.WaitGroup
	errs := make(chan error, 50)
	for u := int64(1); u <= 50; u++ {
		wg.Go(func() {
			if _, err := c.Occupy(context.Background(), buy(u)); err != nil {
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

// The sidecar trusts ids, not the edge: a pair its catalog does not know
// even after a reload is UNKNOWN_SKU, and nothing is occupied for it — also
// a SKU of a known activity that the activity does not sell.
func TestSidecarRefusesAPairItsCatalogDoesNotKnow(t *testing.T) {
	r := newRig(t)
	own, c := engineProcess(t, r)
	a, k := r.preheat(t, activity(1, 1001, 5, false))
	other := activity(2, 2001, 5, false)
	r.preheat(t, other)
	for _, bad := range []struct {
		name     string
		activity *sale.Activity
		sku      *sale.SKU
	}{
		{"an unknown activity", &sale.Activity{ID: 99}, k},
		{"an unknown sku", a, &sale.SKU{ID: 999}},
		{"another activity's sku", a, &sale.SKU{ID: 2001}},
	} {
		tk, err := c.Occupy(context.Background(), &Request{Activity: bad.activity, SKU: bad.sku, UserID: 1, Quantity: 1})
		if !errors.Is(err, stock.ErrUnknownSKU) || tk.RequestNo != "" {
			t.Errorf("%s: %+v %v, want UNKNOWN_SKU", bad.name, tk, err)
		}
	}
	if _, _, ok := own.Lookup(1, 1001); !ok {
		t.Fatal("the sidecar's catalog did not reload after its misses")
	}
	if n := r.counts(t, 1, 1001); n.Remaining != 5 || n.Holders != 0 {
		t.Fatalf("counts %+v after refused pairs: nothing may be occupied", n)
	}
	if n := r.counts(t, 2, 2001); n.Remaining != 5 || n.Holders != 0 {
		t.Fatalf("counts of activity 2 %+v after refused pairs: nothing may be occupied", n)
	}
}
