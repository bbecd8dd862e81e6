package monitor

import (
	"context"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/zap/zaptest"

	"seckill/internal/testenv"
	"seckill/sale"
	"seckill/stock"
	"seckill/stock/stocktest"
	"seckill/store"
)

func TestMain(m *testing.M) { testenv.Main(m) }

// openStore is an orders database in a SQLite file of the test's own.
func openStore(t *testing.T) store.Store {
	t.Helper()
	scfg := store.DefaultConfig()
	scfg.DSN = filepath.Join(t.TempDir(), "s.db")
	st, err := store.Open(scfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	return st
}

func TestGaugesFollowTheSale(t *testing.T) {
	r := testenv.StartRedis(t)
	st := openStore(t)
	ledger, _ := stocktest.Stock(t, r)
	ctx := context.Background()
	now := time.Now()
	a := sale.Activity{ID: 3, Start: now.Add(-time.Minute), End: now.Add(time.Hour), State: sale.StateOnline,
		SKUs: []sale.SKU{{ID: 30, Stock: 2, Price: 100, LimitPerUser: 1}}}
	if err := st.PutActivity(ctx, a); err != nil {
		t.Fatal(err)
	}
	if err := ledger.Preheat(ctx, a); err != nil {
		t.Fatal(err)
	}
	reg := prometheus.NewRegistry()
	m := New(ledger, st, nil, time.Second, zaptest.NewLogger(t), reg)
	l := map[string]string{"activity": "3", "sku": "30"}
	if v, ok := testenv.MetricPresent(t, reg, "seckill_sku_remaining_units", l); !ok || v != 0 {
		t.Fatalf("the series must exist before the first sample: %v %v", v, ok)
	}
	m.Sample(ctx)
	if v, _ := testenv.MetricPresent(t, reg, "seckill_sku_remaining_units", l); v != 2 {
		t.Fatalf("remaining %v", v)
	}
	pa, k, _ := ledger.Catalog().Lookup(3, 30)
	for u := int64(1); u <= 2; u++ {
		if res, err := ledger.Occupy(ctx, pa, k, u, "rn"+string(rune('0'+u)), 1); err != nil || res.Code != stock.CodeOK {
			t.Fatal(res, err)
		}
	}
	// One of the two becomes an order.
	if _, err := st.SaveBatch(ctx, []sale.Message{{RequestNo: "rn1", ActivityID: 3, SKUID: 30, UserID: 1, Quantity: 1, UnitPrice: 100}}); err != nil {
		t.Fatal(err)
	}
	m.Sample(ctx)
	for name, want := range map[string]float64{
		"seckill_sku_remaining_units": 0, "seckill_sku_occupied_units": 1,
		"seckill_sku_ordered_units": 1, "seckill_sku_initial_units": 2,
	} {
		if v, _ := testenv.MetricPresent(t, reg, name, l); v != want {
			t.Errorf("%s = %v, want %v", name, v, want)
		}
	}
	if v, _ := testenv.MetricPresent(t, reg, "seckill_sku_sold_out_timestamp_seconds", l); v < float64(now.Unix()-1) {
		t.Fatalf("sold-out time %v not set", v)
	}
	m.HandleEvent(sale.Event{Kind: sale.EventAvailable, Activity: 3, SKU: 30})
	if v, _ := testenv.MetricPresent(t, reg, "seckill_sku_sold_out_timestamp_seconds", l); v != 0 {
		t.Fatalf("sold-out time %v after available", v)
	}
	at := time.Now()
	m.HandleEvent(sale.Event{Kind: sale.EventSoldOut, Activity: 3, SKU: 30, At: at.UnixNano()})
	if v, _ := testenv.MetricPresent(t, reg, "seckill_sku_sold_out_timestamp_seconds", l); v != float64(at.UnixMilli())/1000 {
		t.Fatalf("sold-out time %v, want the event's %v", v, at.Unix())
	}
}

func TestDependencyUpFollowsEachPing(t *testing.T) {
	r := testenv.StartRedis(t)
	hot := testenv.StartRedis(t)
	hc := hot.Client(t)
	st := openStore(t)
	stk, _ := stocktest.Stock(t, r)
	reg := prometheus.NewRegistry()
	m := New(stk, st, nil, time.Second, zaptest.NewLogger(t), reg,
		Dependency{Name: "redis.hot", Ping: func(ctx context.Context) error { return hc.Do(ctx, hc.B().Ping().Build()).Error() }},
		Dependency{Name: "store", Ping: st.Ping})
	up := func(dep string) float64 {
		t.Helper()
		v, ok := testenv.MetricPresent(t, reg, "seckill_dependency_up", map[string]string{"dep": dep})
		if !ok {
			t.Fatalf("no seckill_dependency_up{dep=%q}", dep)
		}
		return v
	}
	// Declared at 0 (not known to be up) before the first sample.
	if up("redis.hot") != 0 || up("store") != 0 {
		t.Fatal("the series must exist at 0 before the first sample")
	}
	ctx := context.Background()
	m.Sample(ctx)
	if up("redis.hot") != 1 || up("store") != 1 {
		t.Fatalf("both answer: hot %v, store %v", up("redis.hot"), up("store"))
	}

	hot.Stop()
	m.Sample(ctx)
	if up("redis.hot") != 0 || up("store") != 1 {
		t.Fatalf("hot shard stopped: hot %v, store %v", up("redis.hot"), up("store"))
	}

	if err := hot.Start(); err != nil {
		t.Fatal(err)
	}
	st.Close()
	m.Sample(ctx)
	if up("redis.hot") != 1 || up("store") != 0 {
		t.Fatalf("hot shard back, store closed: hot %v, store %v", up("redis.hot"), up("store"))
	}
}

// readsOfOrders is a store that records every call that reads the orders
// table (counts, lists, lookups) and every snapshot read.
type readsOfOrders struct {
	store.Store
	orders    []string
	snapshots int
}

func (s *readsOfOrders) CountOrders(ctx context.Context, a, k int64) (int64, int64, error) {
	s.orders = append(s.orders, "CountOrders")
	return s.Store.CountOrders(ctx, a, k)
}

func (s *readsOfOrders) Ledger(ctx context.Context, a, k int64) (store.Snapshot, []store.OrderRef, error) {
	s.orders = append(s.orders, "Ledger")
	return s.Store.Ledger(ctx, a, k)
}

func (s *readsOfOrders) Order(ctx context.Context, no string) (store.Order, error) {
	s.orders = append(s.orders, "Order")
	return s.Store.Order(ctx, no)
}

func (s *readsOfOrders) OrderByRequest(ctx context.Context, rn string) (store.Order, error) {
	s.orders = append(s.orders, "OrderByRequest")
	return s.Store.OrderByRequest(ctx, rn)
}

func (s *readsOfOrders) ExpiredOrders(ctx context.Context, t time.Time, limit int) ([]store.Order, error) {
	s.orders = append(s.orders, "ExpiredOrders")
	return s.Store.ExpiredOrders(ctx, t, limit)
}

func (s *readsOfOrders) Snapshot(ctx context.Context, a, k int64) (store.Snapshot, error) {
	s.snapshots++
	return s.Store.Snapshot(ctx, a, k)
}

// TestSampleReadsCountersNotTheOrders: a sample costs the database one
// snapshot row per SKU (the ordered units the order transactions keep),
// never a count or a list of the orders, however many there are — that is
// the reconciler's full comparison, on its own interval.
func TestSampleReadsCountersNotTheOrders(t *testing.T) {
	r := testenv.StartRedis(t)
	scfg := store.DefaultConfig()
	scfg.DSN = filepath.Join(t.TempDir(), "s.db")
	db, err := store.Open(scfg)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	st := &readsOfOrders{Store: db}
	ledger, _ := stocktest.Stock(t, r)
	ctx := context.Background()
	now := time.Now()
	a := sale.Activity{ID: 4, Start: now.Add(-time.Minute), End: now.Add(time.Hour), State: sale.StateOnline,
		SKUs: []sale.SKU{{ID: 40, Stock: 500, Price: 100, LimitPerUser: 1}, {ID: 41, Stock: 5, Price: 100, LimitPerUser: 1}}}
	if err := st.PutActivity(ctx, a); err != nil {
		t.Fatal(err)
	}
	if err := ledger.Preheat(ctx, a); err != nil {
		t.Fatal(err)
	}
	pa, k, _ := ledger.Catalog().Lookup(4, 40)
	var msgs []sale.Message
	for u := int64(1); u <= 300; u++ {
		rn := "rn" + strconv.FormatInt(u, 10)
		if res, err := ledger.Occupy(ctx, pa, k, u, rn, 1); err != nil || res.Code != stock.CodeOK {
			t.Fatal(res, err)
		}
		msgs = append(msgs, sale.Message{RequestNo: rn, ActivityID: 4, SKUID: 40, UserID: u, Quantity: 1, UnitPrice: 100})
	}
	if _, err := st.SaveBatch(ctx, msgs[:250]); err != nil {
		t.Fatal(err)
	}
	reg := prometheus.NewRegistry()
	m := New(ledger, st, nil, time.Second, zaptest.NewLogger(t), reg)
	for range 3 {
		m.Sample(ctx)
	}
	if len(st.orders) != 0 || st.snapshots != 3*2 {
		t.Fatalf("3 samples of 2 SKUs read the orders %v and %d snapshot rows, want none and 6", st.orders, st.snapshots)
	}
	l := map[string]string{"activity": "4", "sku": "40"}
	for name, want := range map[string]float64{"seckill_sku_ordered_units": 250, "seckill_sku_occupied_units": 50,
		"seckill_sku_remaining_units": 200} {
		if v, _ := testenv.MetricPresent(t, reg, name, l); v != want {
			t.Errorf("%s = %v, want %v", name, v, want)
		}
	}
}
