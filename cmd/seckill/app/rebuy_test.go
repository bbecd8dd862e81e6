package app

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/redis/rueidis"
	"go.uber.org/zap/zaptest"

	"seckill/cmd/seckill/config"
	"seckill/internal/testenv"
	"seckill/sale"
	"seckill/store"
)

// TestRebuyAfterCloseSwitch: two activities created through the admin API,
// one with "rebuyAfterClose": false, one without the field (default true).
// A buyer's unpaid order is closed in both. Where re-buy is off, the unit
// sells to someone else and the buyer is answered 409 DUPLICATE naming the
// closed ticket; where it is on, the buyer buys again. The books add up.
func TestRebuyAfterCloseSwitch(t *testing.T) {
	eachStore(t, func(t *testing.T, driver string) {
		l := startLedgerSys(t, driver, func(c *config.Config) { c.Order.PayTimeout = time.Second })
		ctx := context.Background()
		now := time.Now()
		window := fmt.Sprintf(`"start":%q,"end":%q`, now.Add(-time.Minute).Format(time.RFC3339), now.Add(time.Hour).Format(time.RFC3339))
		for _, body := range []string{
			`{"id":1,` + window + `,"rebuyAfterClose":false,"skus":[{"id":1001,"stock":1,"price":"1.00","limitPerUser":1}]}`,
			`{"id":2,` + window + `,"skus":[{"id":2001,"stock":1,"price":"1.00","limitPerUser":1}]}`,
		} {
			var got map[string]any
			if st := l.call(t, "POST", l.admin+"/admin/v1/activities", 0, body, &got); st != 200 {
				t.Fatalf("create %s: %d %v", body, st, got)
			}
			if want := strings.Contains(body, "rebuyAfterClose"); (got["rebuyAfterClose"] != nil) != want {
				t.Fatalf("created activity %v: rebuyAfterClose shown %v, want %v", got, got["rebuyAfterClose"] != nil, want)
			}
		}
		first := map[int64]ledgerAnswer{}
		for _, sku := range []int64{1001, 2001} {
			a := l.buy(t, sku, 1)
			if a.Status != 200 {
				t.Fatalf("buyer 1 of sku %d: %+v", sku, a)
			}
			if f := l.final(t, a.RequestNo, 1, 15*time.Second); f.Code != sale.ResultSuccess {
				t.Fatalf("buyer 1 of sku %d: %+v", sku, f)
			}
			first[sku] = a
		}
		for sku, a := range first {
			testenv.EventuallyOK(t, fmt.Sprintf("sku %d: the unpaid order's close", sku), 15*time.Second, func() error {
				var r ledgerAnswer
				l.call(t, "GET", l.base+"/api/v1/flash-sale/result/"+a.RequestNo, 1, "", &r)
				if r.Code == sale.ResultFail && r.Reason == sale.FailClosed {
					return nil
				}
				return fmt.Errorf("unpaid order not closed: %+v", r)
			})
		}
		// buyUnit buys until the edge's sold-out flag, set while the order
		// held the unit, is cleared by the close's "available" event.
		buyUnit := func(sku, user int64) ledgerAnswer {
			t.Helper()
			for range 100 {
				if a := l.buy(t, sku, user); a.Status != 410 {
					return a
				}
				time.Sleep(50 * time.Millisecond)
			}
			t.Fatalf("sku %d stayed sold out after the close", sku)
			return ledgerAnswer{}
		}
		if a := buyUnit(1001, 1); a.Status != 409 || a.Code != "DUPLICATE" || a.RequestNo != first[1001].RequestNo {
			t.Fatalf("the closed buyer where re-buy is off: %+v, want 409 DUPLICATE naming %s", a, first[1001].RequestNo)
		}
		for _, b := range []struct{ sku, user int64 }{{1001, 2}, {2001, 1}} {
			a := buyUnit(b.sku, b.user)
			if a.Status != 200 {
				t.Fatalf("buyer %d of sku %d after the close: %+v", b.user, b.sku, a)
			}
			f := l.final(t, a.RequestNo, b.user, 15*time.Second)
			if f.Code != sale.ResultSuccess {
				t.Fatalf("buyer %d of sku %d after the close: %+v", b.user, b.sku, f)
			}
			l.pay(t, f.OrderNo, b.user)
		}
		for _, sku := range []int64{1001, 2001} {
			act := sku / 1000
			n, _ := l.sys.Stock.Counts(ctx, act, sku)
			_, units, _ := l.sys.Store.CountOrders(ctx, act, sku)
			if n.Remaining != 0 || n.Sold != 1 || n.Holders != 1 || units != 1 {
				t.Errorf("sku %d: redis %+v, %d units ordered; want the one unit sold once", sku, n, units)
			}
		}
		if rep := l.reconcile(t, false); rep.Drifts != 0 {
			t.Errorf("drift: %v", driftList(rep))
		}
	})
}

// TestRebuyBarSurvivesFlushAndANewProcess: an activity created through the
// admin API with "rebuyAfterClose": false; a buyer's unpaid order is
// closed. Redis is flushed, and the SKU is rebuilt by a process started
// after the flush — its catalog is empty, so the switch it rebuilds with
// can only come from the database (the first process, whose snapshot still
// holds the activity, never watches here). The closed order's buyer is
// still answered 409 DUPLICATE naming the closed ticket through the new
// process's edge, another buyer gets the unit, and the books add up.
func TestRebuyBarSurvivesFlushAndANewProcess(t *testing.T) {
	eachStore(t, func(t *testing.T, driver string) {
		l := startLedgerSys(t, driver, func(c *config.Config) {
			c.Order.PayTimeout = time.Second
			c.Reconcile.WatchInterval = time.Hour
		})
		ctx := context.Background()
		now := time.Now()
		body := fmt.Sprintf(`{"id":1,"start":%q,"end":%q,"rebuyAfterClose":false,`+
			`"skus":[{"id":1001,"stock":2,"price":"1.00","limitPerUser":1}]}`,
			now.Add(-time.Minute).Format(time.RFC3339), now.Add(time.Hour).Format(time.RFC3339))
		if st := l.call(t, "POST", l.admin+"/admin/v1/activities", 0, body, nil); st != 200 {
			t.Fatalf("create: %d", st)
		}
		first := l.buy(t, 1001, 1)
		if first.Status != 200 {
			t.Fatalf("buyer 1: %+v", first)
		}
		if f := l.final(t, first.RequestNo, 1, 15*time.Second); f.Code != sale.ResultSuccess {
			t.Fatalf("buyer 1: %+v", f)
		}
		testenv.EventuallyOK(t, "the unpaid order's close and release", 15*time.Second, func() error {
			o, err := l.sys.Store.OrderByRequest(ctx, first.RequestNo)
			if err == nil && o.Status == store.OrderClosed {
				if n, _ := l.sys.Stock.Counts(ctx, 1, 1001); n.Remaining == 2 {
					return nil // closed, and its unit back in Redis
				}
			}
			return fmt.Errorf("unpaid order not closed and released: %+v %v", o, err)
		})

		l.redis.Do(t, "FLUSHALL")
		cfg := l.sys.Cfg
		cfg.Reconcile.WatchInterval = 100 * time.Millisecond
		n := startAnother(t, l, cfg)
		// It knows the sale only from the database (Redis has no catalog
		// entry): the rebuild below must take the switch from there too.
		if a, ok := n.sys.Catalog.Activity(1); !ok || a.Rebuy() {
			t.Fatalf("the process started after the flush: activity %+v %v, want the database's, re-buy off", a, ok)
		}
		if ex := l.redis.Do(t, "EXISTS", sale.ActivityKey(1)); ex.Error() != nil || mustInt64(t, ex) != 0 {
			t.Fatal("the catalog entry is in Redis before any rebuild")
		}
		testenv.Eventually(t, "the new process' watcher's rebuild of the SKU", 15*time.Second, func() bool {
			return testenv.Metric(t, n.sys.Reg, "seckill_reconcile_rebuilds_total", nil) >= 1
		})
		// Until the rebuild the SKU answers busy; then the closed buyer is
		// barred.
		var again ledgerAnswer
		testenv.EventuallyOK(t, "the new process' edge to serve the SKU after the rebuild", 10*time.Second, func() error {
			if again = n.buy(t, 1001, 1); again.Status != 404 && again.Status != 503 {
				return nil
			}
			return fmt.Errorf("still %+v", again)
		})
		if again.Status != 409 || again.Code != "DUPLICATE" || again.RequestNo != first.RequestNo {
			t.Fatalf("the closed buyer after the flush and rebuild: %+v, want 409 DUPLICATE naming %s", again, first.RequestNo)
		}
		if a, ok := n.sys.Catalog.Activity(1); !ok || a.Rebuy() {
			t.Errorf("the new process' catalog after the put-back: %+v %v, want re-buy off", a, ok)
		}
		other := n.buy(t, 1001, 2)
		if other.Status != 200 {
			t.Fatalf("another buyer after the rebuild: %+v", other)
		}
		if f := n.final(t, other.RequestNo, 2, 15*time.Second); f.Code != sale.ResultSuccess {
			t.Fatalf("another buyer after the rebuild: %+v", f)
		}
		if rep := n.reconcile(t, false); rep.Drifts != 0 {
			t.Errorf("drift: %v", driftList(rep))
		}
	})
}

// startAnother starts a second whole system on l's Redis, Kafka and
// database with cfg (l's configuration, adjusted): a process started later.
func startAnother(t *testing.T, l *ledgerSys, cfg config.Config) *ledgerSys {
	t.Helper()
	sys, err := New(cfg, zaptest.NewLogger(t), Roles{Edge: true, Engine: true, Consumer: true})
	if err != nil {
		t.Fatal(err)
	}
	edgeAddr, adminAddr := serveSystem(t, sys)
	return &ledgerSys{sys: sys, redis: l.redis, base: "http://" + edgeAddr, admin: "http://" + adminAddr}
}

func mustInt64(t *testing.T, r rueidis.RedisResult) int64 {
	t.Helper()
	n, err := r.AsInt64()
	if err != nil {
		t.Fatal(err)
	}
	return n
}
