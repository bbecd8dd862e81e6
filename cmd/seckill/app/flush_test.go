package app

import (
	"context"
	"testing"
	"time"

	"seckill/cmd/seckill/config"
	"seckill/sale"
)

// TestFlushedRedisAnswersBusyUntilRebuilt: Redis is flushed mid-sale (what
// a restart without persistence leaves). Until the watcher has rebuilt the
// SKU from the database every purchase — a new buyer's or one with an
// order — is 503 BUSY, never 404 UNKNOWN_SKU (the catalog keeps what Redis
// lost, and a process started after the flush learns the sale from the
// database) nor 425 NOT_OPEN (the occupy script reports the missing meta); then
// sales continue from initial − ordered and the books add up. The watcher
// is run by hand here (its period is an hour) so that the window between
// the flush and the rebuild is not a matter of timing.
func TestFlushedRedisAnswersBusyUntilRebuilt(t *testing.T) {
	eachStore(t, func(t *testing.T, driver string) {
		const stock = 12
		l := startLedgerSys(t, driver, func(c *config.Config) { c.Reconcile.WatchInterval = time.Hour })
		l.preheat(t, openActivity(1, sale.SKU{ID: 1001, Stock: stock, Price: 100, LimitPerUser: 1}))
		ctx := context.Background()
		for u := int64(1); u <= 4; u++ {
			a := l.buy(t, 1001, u)
			if a.Status != 200 {
				t.Fatalf("buyer %d before the flush: %+v", u, a)
			}
			if f := l.final(t, a.RequestNo, u, 15*time.Second); f.Code != sale.ResultSuccess {
				t.Fatalf("buyer %d before the flush: %+v", u, f)
			}
		}
		l.redis.Do(t, "FLUSHALL")
		// What the edge's periodic refresh does: it must not forget the sale.
		if err := l.sys.Catalog.Load(ctx); err != nil {
			t.Fatal(err)
		}
		for _, u := range []int64{1, 2, 100, 101, 102} {
			if a := l.buy(t, 1001, u); a.Status != 503 || a.Code != "BUSY" {
				t.Fatalf("buyer %d while Redis lost the SKU: %+v, want 503 BUSY", u, a)
			}
		}
		// A process started now, with nothing in Redis to load its catalog
		// from, knows the sale from the database: busy too, not unknown.
		late := startAnother(t, l, l.sys.Cfg)
		for _, u := range []int64{1, 103} {
			if a := late.buy(t, 1001, u); a.Status != 503 || a.Code != "BUSY" {
				t.Fatalf("buyer %d at a process started after the flush: %+v, want 503 BUSY", u, a)
			}
		}
		for range 2 { // missing at two checks in a row
			if _, err := l.sys.jobs.recon.Watch(ctx); err != nil {
				t.Fatal(err)
			}
		}
		if a := l.buy(t, 1001, 1); a.Status != 409 {
			t.Fatalf("a buyer with an order after the rebuild: %+v, want 409", a)
		}
		var tickets []ledgerAnswer
		for u := int64(100); len(tickets) < stock-4; u++ {
			a := l.buy(t, 1001, u)
			if a.Status != 200 {
				t.Fatalf("buyer %d after the rebuild: %+v (%d sold since)", u, a, len(tickets))
			}
			a.Status = int(u)
			tickets = append(tickets, a)
		}
		if a := l.buy(t, 1001, 999); a.Status != 410 {
			t.Fatalf("after initial − ordered more units: %+v, want 410", a)
		}
		for _, tk := range tickets {
			if f := l.final(t, tk.RequestNo, int64(tk.Status), 15*time.Second); f.Code != sale.ResultSuccess {
				t.Fatalf("ticket after the rebuild: %+v", f)
			}
		}
		orders, units, err := l.sys.Store.CountOrders(ctx, 1, 1001)
		if err != nil || orders != stock || units != stock {
			t.Fatalf("%d orders, %d units (%v), want %d", orders, units, err, stock)
		}
		n, _ := l.sys.Stock.Counts(ctx, 1, 1001)
		if n.Remaining != 0 || n.Sold != stock || n.Holders != stock || n.Initial != stock {
			t.Errorf("redis %+v after the sale", n)
		}
		if rep := l.reconcile(t, false); rep.Drifts != 0 {
			t.Errorf("drift: %v", driftList(rep))
		}
	})
}
