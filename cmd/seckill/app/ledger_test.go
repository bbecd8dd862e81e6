package app

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"go.uber.org/zap/zaptest"

	"seckill/admin"
	"seckill/cmd/seckill/config"
	"seckill/engine"
	"seckill/internal/testenv"
	"seckill/payment"
	"seckill/reconcile"
	"seckill/sale"
	"seckill/store"
)

// The books under faults, end to end: a whole in-process system (edge,
// engine, consumer, jobs) on a real redis-server, kfake and each store.

// ledgerSys is one such system.
type ledgerSys struct {
	sys   *System
	redis *testenv.Redis
	base  string // edge
	admin string
}

func eachStore(t *testing.T, f func(t *testing.T, driver string)) {
	for _, d := range []string{"sqlite", "mysql"} {
		t.Run(d, func(t *testing.T) { f(t, d) })
	}
}

func startLedgerSys(t *testing.T, driver string, tweak func(*config.Config), opts ...Option) *ledgerSys {
	t.Helper()
	return startLedgerSysOn(t, testenv.StartRedis(t), driver, tweak, opts...)
}

// startLedgerSysOn is startLedgerSys on a Redis the test started (with
// persistence, say).
func startLedgerSysOn(t *testing.T, r *testenv.Redis, driver string, tweak func(*config.Config), opts ...Option) *ledgerSys {
	t.Helper()
	l := &ledgerSys{redis: r}
	k := testenv.StartKafka(t, 2)
	cfg := config.Default()
	cfg.Edge.Identity = "any" // buyers send X-User-Id straight to the edge
	cfg.Log.Format = "console"
	cfg.Redis.Default.Addrs = []string{l.redis.Addr}
	cfg.Engine.Kafka.Brokers, cfg.Consumer.Brokers = k.Addrs, k.Addrs
	cfg.Engine.Kafka.SendTimeout = time.Second
	cfg.OrderSigning = testOrderSigning
	cfg.Consumer.MaxWait = 10 * time.Millisecond
	cfg.Consumer.RejoinBackoff = 200 * time.Millisecond
	cfg.Consumer.RetryBackoff = 20 * time.Millisecond
	cfg.Admin.Token = "ledger-token"
	cfg.Payment.ProviderKey = ledgerPaymentKey
	cfg.Edge.Rate.IPExempt = []string{"127.0.0.0/8"}
	cfg.Reconcile.OrphanGrace = 2 * time.Second
	cfg.Reconcile.SweepInterval = 200 * time.Millisecond
	cfg.Reconcile.WatchInterval = 200 * time.Millisecond
	cfg.Store.Driver = driver
	if driver == "sqlite" {
		cfg.Store.DSN = filepath.Join(t.TempDir(), "seckill.db")
	} else {
		cfg.Store.DSN = testenv.MySQL(t)
	}
	if tweak != nil {
		tweak(&cfg)
	}
	sys, err := New(cfg, zaptest.NewLogger(t), Roles{Edge: true, Engine: true, Consumer: true}, opts...)
	if err != nil {
		t.Fatal(err)
	}
	edgeAddr, adminAddr := serveSystem(t, sys)
	l.sys, l.base, l.admin = sys, "http://"+edgeAddr, "http://"+adminAddr
	return l
}

// ledgerPaymentKey is the payment provider's key of the ledger systems.
const ledgerPaymentKey = "ledger-payment-provider-key-0123456789"

// pay pays orderNo of user as it happens in production, over the edge: the
// buyer starts the payment (an intent, which pays nothing), then the
// provider's signed callback pays it.
func (l *ledgerSys) pay(t testing.TB, orderNo string, user int64) {
	t.Helper()
	var in payment.Answer
	if st := l.call(t, "POST", l.base+"/api/v1/flash-sale/orders/"+orderNo+"/pay", user, "", &in); st != 200 || in.Code != "PAYMENT_PENDING" {
		t.Fatalf("payment intent of %s: %d %+v", orderNo, st, in)
	}
	if o, err := l.sys.Store.Order(context.Background(), orderNo); err != nil || o.Status != store.OrderPendingPayment {
		t.Fatalf("the buyer's intent changed the order: %+v %v", o, err)
	}
	ref := "ref-" + orderNo
	body, _ := json.Marshal(map[string]any{"orderNo": orderNo, "amountCents": in.AmountCents, "providerRef": ref,
		"signature": payment.Sign(ledgerPaymentKey, orderNo, sale.Cents(in.AmountCents), ref)})
	req, _ := http.NewRequest("POST", l.base+payment.CallbackPath, bytes.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	resp, err := ledgerClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var a payment.Answer
	if err := json.NewDecoder(resp.Body).Decode(&a); err != nil || resp.StatusCode != 200 || a.Code != "PAID" {
		t.Fatalf("the provider's callback for %s: %d %+v %v", orderNo, resp.StatusCode, a, err)
	}
}

var ledgerClient = &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 64}, Timeout: 10 * time.Second}

type ledgerAnswer struct {
	Status    int
	Code      string `json:"code"`
	RequestNo string `json:"requestNo"`
	OrderNo   string `json:"orderNo"`
	Reason    string `json:"reason"`
}

func (l *ledgerSys) call(t testing.TB, method, url string, user int64, body string, out any) int {
	req, _ := http.NewRequest(method, url, strings.NewReader(body))
	if user > 0 {
		req.Header.Set("X-User-Id", fmt.Sprint(user))
	}
	if strings.HasPrefix(url, l.admin) {
		req.Header.Set("Authorization", "Bearer ledger-token")
	}
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := ledgerClient.Do(req)
	if err != nil {
		t.Errorf("%s %s: %v", method, url, err)
		return 0
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if out != nil && len(b) > 0 {
		if err := json.Unmarshal(b, out); err != nil {
			t.Errorf("%s %s: %d %q: %v", method, url, resp.StatusCode, b, err)
		}
	}
	return resp.StatusCode
}

func (l *ledgerSys) buy(t testing.TB, sku, user int64) ledgerAnswer {
	var a ledgerAnswer
	a.Status = l.call(t, "POST", l.base+"/api/v1/flash-sale/order", user, fmt.Sprintf(`{"skuId":%d,"quantity":1}`, sku), &a)
	return a
}

// final polls a ticket until its result is SUCCESS or FAIL.
func (l *ledgerSys) final(t *testing.T, rn string, user int64, within time.Duration) ledgerAnswer {
	t.Helper()
	var a ledgerAnswer
	testenv.EventuallyOK(t, fmt.Sprintf("ticket %s of user %d to end", rn, user), within, func() error {
		a = ledgerAnswer{}
		a.Status = l.call(t, "GET", l.base+"/api/v1/flash-sale/result/"+rn, user, "", &a)
		if a.Code == sale.ResultSuccess || a.Code == sale.ResultFail {
			return nil
		}
		return fmt.Errorf("still %+v", a)
	})
	return a
}

func (l *ledgerSys) preheat(t *testing.T, a sale.Activity) {
	t.Helper()
	if err := l.sys.Preheat(context.Background(), a); err != nil {
		t.Fatal(err)
	}
}

func (l *ledgerSys) reconcile(t *testing.T, repair bool) reconcile.Report {
	t.Helper()
	var rep reconcile.Report
	url := l.admin + "/admin/v1/reconcile"
	if repair {
		url += "?repair=true"
	}
	if st := l.call(t, "POST", url, 0, "", &rep); st != 200 {
		t.Fatalf("POST /admin/v1/reconcile: %d", st)
	}
	return rep
}

func driftList(rep reconcile.Report) []string {
	var out []string
	for _, s := range rep.SKUs {
		for _, d := range s.Drifts {
			out = append(out, fmt.Sprintf("sku %d %s %+d (%s)", s.SKUID, d.Kind, d.Amount, d.Detail))
		}
	}
	return out
}

// TestOrphanReleasedAfterEngineCrash: the engine "dies" between occupy and
// produce (the before_produce fault, which compensates nothing). The
// occupancy stays and blocks the buyer (409 names the orphan ticket) until
// the sweeper proves no message can come — grace passed, Kafka consumed —
// and releases it: FAIL RELEASED, the story says why, the unit and the
// buyer are free again.
func TestOrphanReleasedAfterEngineCrash(t *testing.T) {
	eachStore(t, func(t *testing.T, driver string) {
		var crash atomic.Bool
		fault := engine.WithFault(func(stage string) error {
			if stage == "before_produce" && crash.Load() {
				return errors.New("engine killed")
			}
			return nil
		})
		l := startLedgerSys(t, driver, nil, WithEngineOptions(fault))
		l.preheat(t, openActivity(1, sale.SKU{ID: 1001, Stock: 3, Price: 100, LimitPerUser: 1}))

		ok := l.buy(t, 1001, 2)
		crash.Store(true)
		if a := l.buy(t, 1001, 1); a.Status != 503 {
			t.Fatalf("buy through a crashing engine: %+v, want 503", a)
		}
		crash.Store(false)
		dup := l.buy(t, 1001, 1)
		if dup.Status != 409 || dup.RequestNo == "" {
			t.Fatalf("the orphan does not hold the buyer's record: %+v", dup)
		}
		orphan := dup.RequestNo
		if a := l.final(t, ok.RequestNo, 2, 15*time.Second); a.Code != sale.ResultSuccess {
			t.Fatalf("the healthy ticket: %+v", a)
		}
		a := l.final(t, orphan, 1, 15*time.Second)
		if a.Code != sale.ResultFail || a.Reason != sale.FailReleased {
			t.Fatalf("orphan's result %+v, want FAIL RELEASED", a)
		}
		// The sweeper answers the buyer (the result in Redis) before it
		// writes the request log row and its history (one transaction in
		// the database), and the story reads the row and the history one
		// after the other: it is complete once both show the FAILED step,
		// a moment after the result.
		var (
			st    admin.Story
			steps []string
		)
		testenv.EventuallyOK(t, "the orphan's story to show the FAILED step", 10*time.Second, func() error {
			st = admin.Story{}
			if code := l.call(t, "GET", l.admin+"/admin/v1/requests/"+orphan, 0, "", &st); code != 200 {
				t.Fatalf("story: %d", code)
			}
			steps = steps[:0]
			for _, e := range st.History {
				steps = append(steps, e.Status)
			}
			if logged := st.Log != nil && st.Log.Status == store.StatusFailed; logged && slices.Contains(steps, store.StatusFailed) {
				return nil
			}
			return fmt.Errorf("story %+v (history %v)", st, steps)
		})
		if fmt.Sprint(steps) != fmt.Sprint([]string{store.StatusStockOccupied, store.StatusFailed}) ||
			st.Occupancy == nil || st.Occupancy.Held || !strings.Contains(st.Answer, "orphan") {
			t.Errorf("orphan's story: %+v (history %v)", st, steps)
		}
		again := l.buy(t, 1001, 1)
		if again.Status != 200 {
			t.Fatalf("the buyer after the release: %+v", again)
		}
		if a := l.final(t, again.RequestNo, 1, 15*time.Second); a.Code != sale.ResultSuccess {
			t.Fatalf("the buyer's new ticket: %+v", a)
		}
		n, _ := l.sys.Stock.Counts(context.Background(), 1, 1001)
		if n.Remaining != 1 || n.Sold != 2 || n.Holders != 2 {
			t.Errorf("redis %+v: want 2 orders and 1 unit left", n)
		}
		if rep := l.reconcile(t, false); rep.Drifts != 0 {
			t.Errorf("drift after the sweep: %v", driftList(rep))
		}
	})
}

// TestClosedOrderUnitSoldAgain: an order left unpaid is closed within
// seconds of order.pay_timeout, its buyer reads FAIL CLOSED, the unit is
// back in Redis and sells to the next buyer; a paid order stays paid.
func TestClosedOrderUnitSoldAgain(t *testing.T) {
	eachStore(t, func(t *testing.T, driver string) {
		l := startLedgerSys(t, driver, func(c *config.Config) { c.Order.PayTimeout = time.Second })
		l.preheat(t, openActivity(1, sale.SKU{ID: 1001, Stock: 1, Price: 100, LimitPerUser: 1}))
		first := l.buy(t, 1001, 1)
		if a := l.final(t, first.RequestNo, 1, 15*time.Second); a.Code != sale.ResultSuccess {
			t.Fatalf("first buyer: %+v", a)
		}
		if a := l.buy(t, 1001, 2); a.Status != 410 {
			t.Fatalf("second buyer before the close: %+v, want sold out", a)
		}
		start := time.Now()
		testenv.EventuallyOK(t, "the unpaid order's close", 10*time.Second, func() error {
			var a ledgerAnswer
			l.call(t, "GET", l.base+"/api/v1/flash-sale/result/"+first.RequestNo, 1, "", &a)
			if a.Code == sale.ResultFail && a.Reason == sale.FailClosed {
				return nil
			}
			return fmt.Errorf("unpaid order not closed: %+v", a)
		})
		t.Logf("closed %v after the first check", time.Since(start))
		// The edge's sold-out flag is cleared by the release's event.
		var second ledgerAnswer
		for range 50 {
			if second = l.buy(t, 1001, 2); second.Status == 200 {
				break
			}
			time.Sleep(100 * time.Millisecond)
		}
		if second.Status != 200 {
			t.Fatalf("the freed unit did not sell again: %+v", second)
		}
		a := l.final(t, second.RequestNo, 2, 15*time.Second)
		if a.Code != sale.ResultSuccess {
			t.Fatalf("second buyer: %+v", a)
		}
		l.pay(t, a.OrderNo, 2)
		time.Sleep(1500 * time.Millisecond)
		if o, err := l.sys.Store.Order(context.Background(), a.OrderNo); err != nil || o.Status != store.OrderPaid {
			t.Fatalf("paid order after the deadline: %+v %v", o, err)
		}
		n, _ := l.sys.Stock.Counts(context.Background(), 1, 1001)
		if n.Remaining != 0 || n.Sold != 1 || n.Holders != 1 {
			t.Errorf("redis %+v: want the one unit sold to the second buyer", n)
		}
		if rep := l.reconcile(t, false); rep.Drifts != 0 {
			t.Errorf("drift: %v", driftList(rep))
		}
	})
}

// TestRestartWithEmptyRedisMidSale: buyers keep buying while Redis dies
// and comes back empty. The watcher writes the SKU back from the database
// (remaining = initial − ordered, a record per order) instead of the
// configured stock: orders never exceed the stock, no buyer has two, and
// after the reconciler's safe repairs the books add up.
func TestRestartWithEmptyRedisMidSale(t *testing.T) {
	testenv.Long(t)
	eachStore(t, func(t *testing.T, driver string) {
		const stock = 300
		l := startLedgerSys(t, driver, nil)
		l.preheat(t, openActivity(1, sale.SKU{ID: 1001, Stock: stock, Price: 100, LimitPerUser: 1},
			sale.SKU{ID: 1002, Stock: 1, Price: 100, LimitPerUser: 1}))
		// The consumer is at work before the sale starts.
		warm := l.buy(t, 1002, 1_000_000)
		if a := l.final(t, warm.RequestNo, 1_000_000, 20*time.Second); a.Code != sale.ResultSuccess {
			t.Fatalf("warm-up ticket: %+v", a)
		}
		var (
			users     atomic.Int64
			queued    atomic.Int64
			after     atomic.Int64 // tickets taken after the restart
			stop      atomic.Bool
			restarted atomic.Bool
			restart   = make(chan struct{})
			statuses  sync.Map
			wg        sync.WaitGroup
		)
		for range 16 {
			wg.Go(func() {
				for !stop.Load() {
					u := users.Add(1)
					a := l.buy(t, 1001, u)
					v, _ := statuses.LoadOrStore(a.Status, new(atomic.Int64))
					v.(*atomic.Int64).Add(1)
					if a.Status == 200 {
						queued.Add(1)
						if restarted.Load() {
							after.Add(1)
						}
					}
					time.Sleep(5 * time.Millisecond)
				}
			})
		}
		wg.Go(func() {
			// Mid-sale: some tickets are orders already, others in flight.
			for !stop.Load() {
				n, _, _ := l.sys.Store.CountOrders(context.Background(), 1, 1001)
				if n >= 10 && queued.Load() >= stock/3 {
					break
				}
				time.Sleep(time.Millisecond)
			}
			l.redis.Stop()
			if err := l.redis.Start(); err != nil {
				t.Error(err)
			}
			restarted.Store(true)
			close(restart)
		})
		select {
		case <-restart:
		case <-time.After(20 * time.Second):
			t.Fatal("the sale never got going")
		}
		// The rebuild gives the buyers with orders their records back: a
		// second attempt is a duplicate, not a second ticket.
		testenv.Eventually(t, "the watcher's rebuild of the SKU", 10*time.Second, func() bool {
			return testenv.Metric(t, l.sys.Reg, "seckill_reconcile_rebuilds_total", nil) >= 1
		})
		_, refs, err := l.sys.Store.Ledger(context.Background(), 1, 1001)
		if err != nil || len(refs) == 0 {
			t.Fatalf("no order before the restart: %v", err)
		}
		if a := l.buy(t, 1001, refs[0].UserID); a.Status != 409 && a.Status != 410 {
			t.Errorf("a buyer with an order bought again after the rebuild: %+v", a)
		}
		// Keep buying until the SKU sold out again after the rebuild.
		testenv.EventuallyOK(t, "the SKU to sell out again after the restart", 20*time.Second, func() error {
			n, err := l.sys.Stock.Counts(context.Background(), 1, 1001)
			if err == nil && n.Initial == stock && n.Remaining == 0 {
				return nil
			}
			return fmt.Errorf("not sold out: %+v %v", n, err)
		})
		time.Sleep(300 * time.Millisecond)
		stop.Store(true)
		wg.Wait()
		got := map[int]int64{}
		statuses.Range(func(k, v any) bool { got[k.(int)] = v.(*atomic.Int64).Load(); return true })
		t.Logf("answers %v, %d queued, %d after the restart", got, queued.Load(), after.Load())
		if after.Load() == 0 {
			t.Fatal("nothing sold after the restart")
		}

		ctx := context.Background()
		if err := l.sys.drain(ctxTimeout(t, 20*time.Second)); err != nil {
			t.Fatalf("drain: %v", err)
		}
		orders, units, err := l.sys.Store.CountOrders(ctx, 1, 1001)
		if err != nil {
			t.Fatal(err)
		}
		if units > stock {
			t.Fatalf("OVERSOLD: %d units ordered of %d", units, stock)
		}
		sn, _, err := l.sys.Store.Ledger(ctx, 1, 1001)
		if err != nil || sn.Sold != units || sn.Available != stock-units {
			t.Fatalf("snapshot %+v (%v), %d units ordered", sn, err, units)
		}
		// Past the grace period the reconciler may judge every leftover.
		time.Sleep(2500 * time.Millisecond)
		rep := l.reconcile(t, true)
		t.Logf("before repair: %v; repairs %d", driftList(rep), rep.Repairs)
		if after := l.reconcile(t, false); after.Drifts != 0 {
			t.Errorf("drift left after repair: %v", driftList(after))
		}
		n, _ := l.sys.Stock.Counts(ctx, 1, 1001)
		_, units, _ = l.sys.Store.CountOrders(ctx, 1, 1001)
		if n.Remaining+units != stock || n.Sold != units {
			t.Errorf("books: redis %+v, %d units ordered of %d", n, units, stock)
		}
		t.Logf("%d orders of %d units after the restart", orders, stock)
	})
}

func ctxTimeout(t *testing.T, d time.Duration) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	t.Cleanup(cancel)
	return ctx
}
