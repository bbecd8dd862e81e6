package payment

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/valyala/fasthttp"
	"go.uber.org/zap/zaptest"

	"seckill/internal/results"
	"seckill/internal/sale"
	"seckill/internal/shard"
	"seckill/internal/testenv"
	"seckill/stock"
	"seckill/stock/stocktest"
	"seckill/store"
)

func TestMain(m *testing.M) { testenv.Main(m) }

// rig: a real redis-server (append-only, so it can be killed and come back
// with its data), a preheated activity and an orders database.
type rig struct {
	redis *testenv.Redis
	stock *stock.Stock
	res   *results.Store
	st    store.Store
	act   sale.Activity
	seq   atomic.Int64
}

const timeout = time.Minute

func runTest(t *testing.T, fn func(t *testing.T, r *rig)) {
	t.Helper()
	stocktest.EachStore(t, func(t *testing.T, cfg store.Config) { fn(t, newRig(t, cfg)) })
}

func newRig(t *testing.T, scfg store.Config) *rig {
	t.Helper()
	l := stocktest.NewLedger(t, scfg, stocktest.Options{
		Redis:  []testenv.RedisOption{testenv.WithRedisArgs("--appendonly", "yes", "--appendfsync", "always")},
		Shards: func(c *shard.Config) { c.Timeout = 500 * time.Millisecond },
	})
	r := &rig{redis: l.Redis, stock: l.Stock, res: l.Results, st: l.Store}
	now := time.Now()
	r.act = sale.Activity{ID: 3, Start: now.Add(-time.Hour), End: now.Add(time.Hour), State: sale.StateOnline,
		SKUs: []sale.SKU{{ID: 3001, Stock: 2, Price: 1250, LimitPerUser: 1}}}
	l.Sell(t, r.act)
	return r
}

// order makes user an order the way the engine and the consumer do:
// occupy, claim, save. ok false: the occupy script said no.
func (r *rig) order(t *testing.T, user int64) (store.Order, bool) {
	t.Helper()
	ctx := context.Background()
	rn := fmt.Sprintf("%d-%d", user, r.seq.Add(1))
	res, err := r.stock.Occupy(ctx, &r.act, &r.act.SKUs[0], user, rn, 1)
	for i := 0; err != nil && i < 30; i++ {
		// A connection dropped (the rig's 500ms Redis budget on a busy
		// machine, or one from before a restart): the script may have run.
		time.Sleep(100 * time.Millisecond)
		res, err = r.stock.Occupy(ctx, &r.act, &r.act.SKUs[0], user, rn, 1)
		if err == nil && res.Code == stock.CodeDuplicate && res.Holder == rn {
			res.Code = stock.CodeOK
		}
	}
	if err != nil {
		t.Fatal(err)
	}
	if res.Code != stock.CodeOK {
		return store.Order{}, false
	}
	m := sale.Message{RequestNo: rn, ActivityID: r.act.ID, SKUID: 3001, UserID: user, Quantity: 1, UnitPrice: 1250,
		AcceptedAt: time.Now().UnixMilli()}
	// Claim and the result write are idempotent: retried like the occupy
	// over a connection from before a Redis restart (EOF once per pipe).
	var claimed bool
	if err := retryRedis(func() (err error) { claimed, err = r.stock.Claim(ctx, &m); return err }); err != nil || !claimed {
		t.Fatalf("claim: %v %v", claimed, err)
	}
	out, err := r.st.SaveBatch(ctx, []sale.Message{m})
	if err != nil || out[0].Kind != store.Created {
		t.Fatalf("save: %+v %v", out, err)
	}
	if err := retryRedis(func() error {
		return r.res.Write(ctx, results.Entry{RequestNo: rn, Activity: r.act.ID, SKU: 3001, Owner: user,
			State: sale.ResultSuccess, OrderNo: out[0].OrderNo})
	}); err != nil {
		t.Fatal(err)
	}
	o, err := r.st.Order(ctx, out[0].OrderNo)
	if err != nil {
		t.Fatal(err)
	}
	return o, true
}

// retryRedis runs an idempotent Redis step up to 30 times, 100ms apart,
// while it fails (a dropped connection).
func retryRedis(step func() error) error {
	err := step()
	for i := 0; err != nil && i < 30; i++ {
		time.Sleep(100 * time.Millisecond)
		err = step()
	}
	return err
}

func (r *rig) closer(t *testing.T, at time.Time) *Closer {
	return NewCloser(r.st, r.stock, r.res, timeout, zaptest.NewLogger(t), prometheus.NewRegistry(),
		WithClock(func() time.Time { return at }))
}

// books checks Redis and the database agree: Redis sold = live order
// units = snapshot sold, and nothing is held twice.
func (r *rig) books(t *testing.T) (remaining, ordered int64) {
	t.Helper()
	ctx := context.Background()
	n, err := r.stock.Counts(ctx, r.act.ID, 3001)
	if err != nil {
		t.Fatal(err)
	}
	_, units, err := r.st.CountOrders(ctx, r.act.ID, 3001)
	if err != nil {
		t.Fatal(err)
	}
	sn, err := r.st.Snapshot(ctx, r.act.ID, 3001)
	if err != nil {
		t.Fatal(err)
	}
	if n.Sold != units || n.Holders != units || n.Claimed != units || n.Remaining+units != n.Initial ||
		sn.Sold != units || sn.Available != sn.Initial-units {
		t.Fatalf("books do not add up: redis %+v, %d ordered, snapshot %+v", n, units, sn)
	}
	return n.Remaining, units
}

func TestPayIsForTheBuyerAndIdempotent(t *testing.T) {
	runTest(t, func(t *testing.T, r *rig) {
		ctx := context.Background()
		o, _ := r.order(t, 1)
		svc := New(r.st, timeout)
		if _, err := svc.Pay(ctx, o.OrderNo, 2); !errors.Is(err, ErrNotFound) {
			t.Errorf("someone else pays: %v", err)
		}
		for range 2 {
			if p, err := svc.Pay(ctx, o.OrderNo, 1); err != nil || p.Status != store.OrderPaid {
				t.Errorf("pay: %+v %v", p, err)
			}
		}
		late := New(r.st, timeout, WithClock(func() time.Time { return time.Now().Add(2 * timeout) }))
		o2, _ := r.order(t, 2)
		if _, err := late.Pay(ctx, o2.OrderNo, 2); !errors.Is(err, ErrExpired) {
			t.Errorf("pay past the deadline: %v", err)
		}
		if n, err := r.closer(t, time.Now().Add(2*timeout)).Scan(ctx); err != nil || n != 1 {
			t.Fatalf("close: %d %v", n, err)
		}
		if _, err := svc.Pay(ctx, o2.OrderNo, 2); !errors.Is(err, ErrClosed) {
			t.Errorf("pay a closed order: %v", err)
		}
		r.books(t)
	})
}

func TestPayHandlerAnswers(t *testing.T) {
	runTest(t, func(t *testing.T, r *rig) {
		o, _ := r.order(t, 7)
		h := Handler(New(r.st, timeout), 0)
		call := func(user, orderNo string) (int, Answer) {
			var c fasthttp.RequestCtx
			c.Request.Header.SetMethod("POST")
			if user != "" {
				c.Request.Header.Set("X-User-Id", user)
			}
			c.SetUserValue("orderNo", orderNo)
			h(&c)
			var a Answer
			if err := json.Unmarshal(c.Response.Body(), &a); err != nil {
				t.Fatalf("body %q: %v", c.Response.Body(), err)
			}
			return c.Response.StatusCode(), a
		}
		for _, tc := range []struct {
			name, user, order string
			status            int
			code              string
		}{
			{"no user is unauthorized", "", o.OrderNo, 401, "UNAUTHORIZED"},
			{"a malformed user is a bad request", "x7", o.OrderNo, 400, "BAD_REQUEST"},
			{"another buyer's order is not found", "8", o.OrderNo, 404, "NOT_FOUND"},
			{"an unknown order is not found", "7", "Onope", 404, "NOT_FOUND"},
			{"the buyer pays", "7", o.OrderNo, 200, "PAID"},
			{"paying again answers the paid order", "7", o.OrderNo, 200, "PAID"},
		} {
			t.Run(tc.name, func(t *testing.T) {
				status, a := call(tc.user, tc.order)
				if status != tc.status || a.Code != tc.code {
					t.Errorf("%d %+v, want %d %s", status, a, tc.status, tc.code)
				}
				if a.Code == "PAID" && (a.Status != store.OrderPaid || a.Amount != "12.50" || a.OrderNo != o.OrderNo) {
					t.Errorf("paid answer %+v", a)
				}
			})
		}
	})
}

// TestClosedOrdersUnitSellsAgain: an unpaid order is closed, its unit is
// back in the snapshot and in Redis once, the buyer reads FAIL CLOSED, and
// the unit is bought again — by its first buyer and by another.
func TestClosedOrdersUnitSellsAgain(t *testing.T) {
	runTest(t, func(t *testing.T, r *rig) {
		ctx := context.Background()
		a, _ := r.order(t, 1)
		b, _ := r.order(t, 2)
		if _, ok := r.order(t, 3); ok {
			t.Fatal("a third unit was sold out of two")
		}
		if err := New(r.st, timeout).PayNow(ctx, b); err != nil {
			t.Fatal(err)
		}
		c := r.closer(t, time.Now().Add(timeout+time.Second))
		if n, err := c.Scan(ctx); err != nil || n != 1 {
			t.Fatalf("scan: %d %v", n, err)
		}
		if n, err := c.Scan(ctx); err != nil || n != 0 {
			t.Fatalf("second scan: %d %v", n, err)
		}
		if rem, ordered := r.books(t); rem != 1 || ordered != 1 {
			t.Fatalf("after the close: %d remaining, %d ordered", rem, ordered)
		}
		res, err := r.res.Read(ctx, a.RequestNo)
		if err != nil || res.State != sale.ResultFail || res.Code != sale.FailClosed || res.OrderNo != a.OrderNo {
			t.Errorf("closed buyer's result %+v, %v", res, err)
		}
		if again, ok := r.order(t, 1); !ok || again.OrderNo == a.OrderNo {
			t.Fatalf("the first buyer could not buy the freed unit again: %+v", again)
		}
		if _, ok := r.order(t, 3); ok {
			t.Fatal("sold more than the stock")
		}
		// Close that one too: another buyer takes the unit.
		if n, err := r.closer(t, time.Now().Add(timeout+time.Second)).Scan(ctx); err != nil || n != 1 {
			t.Fatalf("second close: %d %v", n, err)
		}
		if _, ok := r.order(t, 3); !ok {
			t.Fatal("another buyer could not buy the freed unit")
		}
		r.books(t)
		evs, _ := r.st.RequestEvents(ctx, a.RequestNo)
		var steps []string
		for _, e := range evs {
			steps = append(steps, e.Status)
		}
		if fmt.Sprint(steps[len(steps)-2:]) != fmt.Sprint([]string{store.EventOrderClosed, store.EventStockReleased}) {
			t.Errorf("history of the closed ticket: %v", steps)
		}
	})
}

// TestRedisDownBetweenCloseAndReleaseRetriesOnce: the database half of a
// close commits while Redis is down; the marker keeps the release pending
// until Redis is back, and the unit comes back exactly once.
func TestRedisDownBetweenCloseAndReleaseRetriesOnce(t *testing.T) {
	runTest(t, func(t *testing.T, r *rig) {
		ctx := context.Background()
		r.order(t, 1)
		r.order(t, 2)
		c := r.closer(t, time.Now().Add(timeout+time.Second))
		r.redis.Stop()
		sctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		n, err := c.Scan(sctx)
		cancel()
		if err != nil || n != 2 {
			t.Fatalf("scan with redis down: %d %v", n, err)
		}
		if rel, _ := r.st.PendingReleases(ctx, 10); len(rel) != 2 {
			t.Fatalf("%d releases pending, want 2", len(rel))
		}
		if err := r.redis.Start(); err != nil {
			t.Fatal(err)
		}
		testenv.Eventually(t, "no release pending once redis is back", 10*time.Second, func() bool {
			if _, err := c.Scan(ctx); err != nil {
				return false
			}
			rel, _ := r.st.PendingReleases(ctx, 10)
			return len(rel) == 0
		})
		c.Scan(ctx)
		if rem, ordered := r.books(t); rem != 2 || ordered != 0 {
			t.Fatalf("after the retried releases: %d remaining, %d ordered", rem, ordered)
		}
	})
}

// TestPayAndCloseRaceNeverBoth races a buyer's payment against the closer
// for many orders: each ends paid or closed, never both, and the books add
// up after every round.
func TestPayAndCloseRaceNeverBoth(t *testing.T) {
	runTest(t, func(t *testing.T, r *rig) {
		ctx := context.Background()
		svc := New(r.st, timeout)
		c := r.closer(t, time.Now().Add(timeout+time.Second))
		if err := r.st.Restock(ctx, r.act.ID, 3001, 30); err != nil {
			t.Fatal(err)
		}
		if _, _, err := r.stock.Restock(ctx, r.act.ID, 3001, 30); err != nil {
			t.Fatal(err)
		}
		paid, closed := 0, 0
		for i := range 30 {
			user := int64(100 + i)
			o, ok := r.order(t, user)
			if !ok {
				t.Fatalf("round %d: no unit to buy", i)
			}
			var (
				wg   sync.WaitGroup
				perr error
				n    int
				cerr error
			)
			wg.Go(func() { _, perr = svc.Pay(ctx, o.OrderNo, user) })
			wg.Go(func() { n, cerr = c.Scan(ctx) })
			wg.Wait()
			if cerr != nil || (perr != nil && !errors.Is(perr, ErrClosed)) {
				t.Fatalf("round %d: pay %v, close %v", i, perr, cerr)
			}
			final, _ := r.st.Order(ctx, o.OrderNo)
			switch {
			case perr == nil && n == 0 && final.Status == store.OrderPaid:
				paid++
			case errors.Is(perr, ErrClosed) && n == 1 && final.Status == store.OrderClosed:
				closed++
			default:
				t.Fatalf("round %d: pay %v, closed %d, order %s", i, perr, n, final.Status)
			}
			r.books(t)
		}
		t.Logf("%d paid, %d closed", paid, closed)
	})
}

// PayNow pays o for its buyer (a test shorthand).
func (s *Service) PayNow(ctx context.Context, o store.Order) error {
	_, err := s.Pay(ctx, o.OrderNo, o.UserID)
	return err
}

// TestClosedBuyerMayNotBuyAgainWhereTheActivitySaysSo: an activity with
// rebuyAfterClose false. The close is still exactly once — database first,
// marker, Redis second, retried while Redis is down — the unit comes back
// once and sells to another buyer, and the closed order's buyer is refused
// as a duplicate naming the closed ticket.
func TestClosedBuyerMayNotBuyAgainWhereTheActivitySaysSo(t *testing.T) {
	runTest(t, func(t *testing.T, r *rig) {
		ctx := context.Background()
		no := false
		r.act.RebuyAfterClose = &no
		if err := r.stock.Preheat(ctx, r.act); err != nil {
			t.Fatal(err)
		}
		a, _ := r.order(t, 1)
		r.order(t, 2)
		c := r.closer(t, time.Now().Add(timeout+time.Second))
		r.redis.Stop()
		sctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		n, err := c.Scan(sctx)
		cancel()
		if err != nil || n != 2 {
			t.Fatalf("scan with redis down: %d %v", n, err)
		}
		if err := r.redis.Start(); err != nil {
			t.Fatal(err)
		}
		testenv.Eventually(t, "no release pending once redis is back", 10*time.Second, func() bool {
			if _, err := c.Scan(ctx); err != nil {
				return false
			}
			rel, _ := r.st.PendingReleases(ctx, 10)
			return len(rel) == 0
		})
		c.Scan(ctx)
		if rem, ordered := r.books(t); rem != 2 || ordered != 0 {
			t.Fatalf("after the retried releases: %d remaining, %d ordered", rem, ordered)
		}
		res, err := r.stock.Occupy(ctx, &r.act, &r.act.SKUs[0], 1, "again", 1)
		for i := 0; err != nil && i < 50; i++ { // a connection from before the restart
			time.Sleep(100 * time.Millisecond)
			res, err = r.stock.Occupy(ctx, &r.act, &r.act.SKUs[0], 1, "again", 1)
		}
		if err != nil || res.Code != stock.CodeDuplicate || res.Holder != a.RequestNo {
			t.Fatalf("the closed buyer again: %+v %v, want DUPLICATE naming %s", res, err, a.RequestNo)
		}
		if _, ok := r.order(t, 1); ok {
			t.Fatal("the closed buyer bought again")
		}
		if _, ok := r.order(t, 3); !ok {
			t.Fatal("another buyer could not buy the freed unit")
		}
		if _, ok := r.order(t, 4); !ok {
			t.Fatal("another buyer could not buy the second freed unit")
		}
		if rem, ordered := r.books(t); rem != 0 || ordered != 2 {
			t.Fatalf("at the end: %d remaining, %d ordered", rem, ordered)
		}
	})
}
