package engine

import (
	"context"
	"testing"

	"go.uber.org/zap/zaptest"

	"seckill/internal/catalog"
	"seckill/internal/testenv"
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
	e, err := New(cfg, NewStock(r.shards, own), r.res, zaptest.NewLogger(t), nil)
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
