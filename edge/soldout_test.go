package edge

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"seckill/internal/sale"
)

// ledger is the test's stand-in for the stock ledger's answer.
type ledger struct {
	soldOut atomic.Bool
	checks  atomic.Int64
}

func (l *ledger) check(_ context.Context, activity, sku int64) (bool, error) {
	l.checks.Add(1)
	return l.soldOut.Load(), nil
}

func TestCheckedSoldOutFlagOutlivesItsTTLWhileTheSKUIsSoldOut(t *testing.T) {
	l := &ledger{}
	l.soldOut.Store(true)
	e := newEdge(t, withConfig(func(c *Config) { c.SoldOutTTL = 200 * time.Millisecond }), withOptions(WithStockCheck(l.check)))
	e.srv.HandleEvent(sale.Event{Kind: sale.EventSoldOut, Activity: 7, SKU: 1001})
	e.srv.flags.Wait()
	// Five TTLs later the flag still answers, and the engine was never asked.
	deadline := time.Now().Add(time.Second)
	for time.Now().Before(deadline) {
		if r := e.order("5", `{"skuId":1001}`); r.status != 410 {
			t.Fatalf("while sold out: %d %s", r.status, r.raw)
		}
		time.Sleep(20 * time.Millisecond)
	}
	if n := e.eng.calls.Load(); n != 0 {
		t.Fatalf("the engine was called %d times for a sold-out SKU", n)
	}
	if l.checks.Load() == 0 {
		t.Fatal("the ledger was never checked")
	}
	// Stock comes back but the "available" event is lost: the next check
	// drops the flag, well before a TTL.
	l.soldOut.Store(false)
	waitFor(t, "the flag to drop without its event", func() bool { return !e.srv.soldOut(1001, 7) })
	if r := e.order("5", `{"skuId":1001}`); r.status != 200 {
		t.Fatalf("after stock came back: %d %s", r.status, r.raw)
	}
}

func TestAvailableEventWinsOverAnInFlightCheck(t *testing.T) {
	l := &ledger{}
	l.soldOut.Store(true)
	e := newEdge(t, withConfig(func(c *Config) { c.SoldOutTTL = 100 * time.Millisecond }), withOptions(WithStockCheck(l.check)))
	e.srv.HandleEvent(sale.Event{Kind: sale.EventSoldOut, Activity: 7, SKU: 1001})
	e.srv.flags.Wait()
	e.srv.HandleEvent(sale.Event{Kind: sale.EventAvailable, Activity: 7, SKU: 1001})
	// The ledger still (wrongly) says sold out; the checker must not raise
	// a flag the event dropped.
	time.Sleep(300 * time.Millisecond)
	e.srv.flags.Wait()
	if e.srv.soldOut(1001, 7) {
		t.Fatal("the checker raised a flag that an available event had dropped")
	}
}
