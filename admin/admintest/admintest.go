// Package admintest serves the real admin API for tests: the real
// handlers over a redis-server of their own, a SQLite orders database, an
// embedded Kafka-protocol broker (lag) and a real reconciler, on a loopback
// listener, with a sale in it that every route has something to say about.
package admintest

import (
	"context"
	"encoding/json"
	"net"
	"path/filepath"
	"testing"
	"time"

	"go.uber.org/zap/zaptest"

	"seckill/admin"
	"seckill/blocklist"
	"seckill/internal/lag"
	"seckill/internal/testenv"
	"seckill/reconcile"
	"seckill/sale"
	"seckill/stock"
	"seckill/stock/results"
	"seckill/stock/stocktest"
	"seckill/store"
)

// Token is the admin token of every Rig.
const Token = "admintest-token"

// The sale every Rig holds: activity Activity, online, selling SKUs SKU
// (5 units, hot shard none) and SKU+1; buyer User holds ticket Ticket, with
// its order written and its result SUCCESS.
const (
	Activity = 1
	SKU      = 10
	User     = 42
	Ticket   = "1-10-1"
)

// Rig is a running admin API.
type Rig struct {
	URL     string // http://127.0.0.1:port, no trailing slash
	Server  *admin.Server
	Redis   *testenv.Redis
	Stock   *stock.Stock
	Store   store.Store
	Results *results.Store
}

// Start serves the admin API until the test ends.
func Start(t testing.TB) *Rig {
	t.Helper()
	r := &Rig{Redis: testenv.StartRedis(t)}
	r.Stock, r.Results = stocktest.Stock(t, r.Redis)
	cfg := store.DefaultConfig()
	cfg.DSN = filepath.Join(t.TempDir(), "admin.db")
	db, err := store.Open(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	r.Store = db
	kafka := testenv.StartKafka(t, 2)
	lr, err := lag.New(kafka.Addrs, "seckill-consumer", testenv.OrdersTopic)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { lr.Close() })
	log := zaptest.NewLogger(t)
	recon := reconcile.New(reconcile.DefaultConfig(), r.Stock, db, r.Results, nil, log, nil)
	r.Server = admin.New(Token, admin.Deps{Stock: r.Stock, Store: db, Results: r.Results, Lag: lr,
		Reconcile: recon.Run, Blocklist: blocklist.NewStore(r.Stock.Shards().Default),
		BlocklistConfig: admin.BlocklistConfig{IPs: []string{"192.0.2.1"}, Users: []int64{7}}}, log)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go r.Server.Serve(ln)
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		r.Server.Shutdown(ctx)
	})
	r.URL = "http://" + ln.Addr().String()
	r.seed(t)
	return r
}

// ActivityJSON is the body that creates the rig's activity.
func ActivityJSON(t testing.TB) []byte {
	t.Helper()
	now := time.Now().UTC().Truncate(time.Second)
	a := sale.Activity{ID: Activity, State: sale.StateOnline, Start: now.Add(-time.Hour), End: now.Add(time.Hour),
		SKUs: []sale.SKU{{ID: SKU, Stock: 5, Price: 990, LimitPerUser: 1}, {ID: SKU + 1, Stock: 5, Price: 100, LimitPerUser: 2}}}
	b, err := json.Marshal(a)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// seed creates the activity (database and Redis, as POST /activities
// does) and the buyer's ticket: its order, its request log and its result.
func (r *Rig) seed(t testing.TB) {
	t.Helper()
	ctx := context.Background()
	var a sale.Activity
	if err := json.Unmarshal(ActivityJSON(t), &a); err != nil {
		t.Fatal(err)
	}
	if err := r.Store.PutActivity(ctx, a); err != nil {
		t.Fatal(err)
	}
	if err := r.Stock.Preheat(ctx, a); err != nil {
		t.Fatal(err)
	}
	m := sale.Message{RequestNo: Ticket, ActivityID: Activity, SKUID: SKU, UserID: User, Quantity: 1, UnitPrice: 990,
		AcceptedAt: time.Now().UnixMilli()}
	if _, err := r.Store.SaveBatch(ctx, []sale.Message{m}); err != nil {
		t.Fatal(err)
	}
	e := results.Entry{RequestNo: Ticket, Activity: Activity, SKU: SKU, Owner: User, State: sale.ResultSuccess, OrderNo: "O" + Ticket}
	if err := r.Results.Write(ctx, e); err != nil {
		t.Fatal(err)
	}
	// A pre-queue's draw, as a drainer records it.
	c := r.Stock.Client(Activity, SKU)
	draw := sale.Draw{Seed: [32]byte{1, 2, 3}, Partition: 0, Cutoff: 3}
	if err := c.Do(ctx, c.B().Hset().Key(sale.PrequeueKey(Activity, SKU)).FieldValue().
		FieldValue("draw", draw.String()).FieldValue("order", "2,0,1").FieldValue("done", "3").Build()).Error(); err != nil {
		t.Fatal(err)
	}
}
