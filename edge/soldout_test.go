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

// gatedLedger answers each check only when the test says so, so that the
// test knows when the checker re-validated a flag instead of guessing it
// from the ticker's period.
type gatedLedger struct {
	asked   chan struct{} // a check is waiting for its answer
	answers chan bool     // the next check's answer: sold out or not
}

func newGatedLedger() *gatedLedger {
	return &gatedLedger{asked: make(chan struct{}, 1), answers: make(chan bool, 1)}
}

func (l *gatedLedger) check(ctx context.Context, activity, sku int64) (bool, error) {
	select {
	case l.asked <- struct{}{}:
	default: // a check that timed out already said so
	}
	select {
	case out := <-l.answers:
		return out, nil
	case <-ctx.Done():
		// RedisTimeout: the flag falls back to its TTL, and the answer
		// stays for the next check.
		return false, ctx.Err()
	}
}

// answer waits for the checker to ask and answers soldOut; it returns a
// time no later than the moment the checker got the answer.
func (l *gatedLedger) answer(t *testing.T, soldOut bool) time.Time {
	t.Helper()
	select {
	case <-l.asked:
	case <-time.After(5 * time.Second):
		t.Fatal("timed out waiting for a sold-out check")
	}
	at := time.Now()
	l.answers <- soldOut
	return at
}

func TestCheckedSoldOutFlagOutlivesItsTTLWhileTheSKUIsSoldOut(t *testing.T) {
	// Nothing here assumes the checker keeps its schedule: a busy machine
	// may delay a check past a flag's TTL, and then the flag lapses and the
	// engine answers, as designed. So requests are sent only right after a
	// check has answered "sold out", when the flag must hold for a full TTL
	// from that answer, and the test goes on until such an answer comes
	// after the first flag's own TTL has run out.
	const ttl = 400 * time.Millisecond
	l := newGatedLedger()
	e := newEdge(t, withConfig(func(c *Config) { c.SoldOutTTL = ttl }), withOptions(WithStockCheck(l.check)))
	e.srv.HandleEvent(sale.Event{Kind: sale.EventSoldOut, Activity: 7, SKU: 1001})
	e.srv.flags.Wait()
	lapsed := time.Now().Add(ttl) // the event's flag by itself is gone by then
	stalls := int64(0)            // requests a whole TTL after their check
	for checks := 1; ; checks++ {
		answered := l.answer(t, true)
		// The check sets the flag after answered, so it then expires no
		// earlier than answered+ttl; before, it expired earlier (the
		// previous set came before this check asked).
		waitFor(t, "the check to extend the flag", func() bool {
			left, ok := e.srv.flags.GetTTL(1001)
			return ok && left >= ttl-time.Since(answered)
		})
		r := e.order("5", `{"skuId":1001}`)
		switch {
		case r.status == 410:
		case time.Since(answered) >= ttl:
			// This goroutine stalled for a whole TTL: the flag may have
			// lapsed, and the engine was rightly asked.
			stalls++
			t.Logf("check %d: a request %v after the check got %d", checks, time.Since(answered), r.status)
		default:
			t.Fatalf("after check %d said sold out: %d %s", checks, r.status, r.raw)
		}
		if r.status == 410 && answered.After(lapsed) && checks >= 3 {
			break
		}
	}
	if n := e.eng.calls.Load(); n > stalls {
		t.Fatalf("the engine was called %d times for a sold-out SKU", n)
	}
	// Stock comes back but the "available" event is lost: the next check
	// drops the flag (not its TTL: the checker forgets the SKU too).
	l.answer(t, false)
	waitFor(t, "the check to drop the flag without its event", func() bool {
		_, tracked := e.srv.flagged.m.Load(int64(1001))
		return !tracked && !e.srv.soldOut(1001, 7)
	})
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
