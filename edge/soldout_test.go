package edge

import (
	"context"
	"sync"
	"testing"
	"time"

	"seckill/internal/sale"
)

// gatedLedger answers each check only when the test says so, so that the
// test knows when the checker re-validated a flag instead of guessing it
// from the ticker's period.
type gatedLedger struct {
	asked   chan int64 // the SKU a check is waiting for its answer about
	answers chan bool  // the next check's answer: sold out or not

	mu     sync.Mutex
	checks map[int64]int // checks asked per SKU, answered or not
}

func newGatedLedger() *gatedLedger {
	return &gatedLedger{asked: make(chan int64, 1), answers: make(chan bool, 1), checks: map[int64]int{}}
}

func (l *gatedLedger) check(ctx context.Context, activity, sku int64) (bool, error) {
	l.mu.Lock()
	l.checks[sku]++
	l.mu.Unlock()
	select {
	case l.asked <- sku:
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

// checked is the number of checks asked about sku so far.
func (l *gatedLedger) checked(sku int64) int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.checks[sku]
}

// ask waits for the checker to ask and returns the SKU it asks about,
// leaving the check waiting for its answer.
func (l *gatedLedger) ask(t *testing.T) int64 {
	t.Helper()
	select {
	case sku := <-l.asked:
		return sku
	case <-time.After(5 * time.Second):
		t.Fatal("timed out waiting for a sold-out check")
		return 0
	}
}

// answer waits for the checker to ask and answers soldOut; it returns a
// time no later than the moment the checker got the answer.
func (l *gatedLedger) answer(t *testing.T, soldOut bool) time.Time {
	t.Helper()
	l.ask(t)
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
	e.srv.flags.cache.Wait()
	lapsed := time.Now().Add(ttl) // the event's flag by itself is gone by then
	stalls := int64(0)            // requests a whole TTL after their check
	for checks := 1; ; checks++ {
		answered := l.answer(t, true)
		// The check sets the flag after answered, so it then expires no
		// earlier than answered+ttl; before, it expired earlier (the
		// previous set came before this check asked).
		waitFor(t, "the check to extend the flag", func() bool {
			left, ok := e.srv.flags.cache.GetTTL(1001)
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
		_, tracked := e.srv.flags.flagged.m.Load(int64(1001))
		return !tracked && !e.srv.flags.soldOut(1001, 7)
	})
	if r := e.order("5", `{"skuId":1001}`); r.status != 200 {
		t.Fatalf("after stock came back: %d %s", r.status, r.raw)
	}
}

func TestAvailableEventWinsOverAnInFlightCheck(t *testing.T) {
	// The race: the checker asks the ledger about a flagged SKU; while the
	// check is out, the stock comes back and the available event drops the
	// flag; then the check answers what the ledger held before: sold out.
	// That late answer must not raise the flag again. The flag's TTL is
	// long, so a wrongly raised flag is still there when the test looks.
	const ttl = 2 * time.Second
	l := newGatedLedger()
	e := newEdge(t, withConfig(func(c *Config) {
		c.SoldOutTTL = ttl
		c.RedisTimeout = time.Minute // the check waits for the test's answer, not a timeout
	}), withOptions(WithStockCheck(l.check)))
	e.srv.HandleEvent(sale.Event{Kind: sale.EventSoldOut, Activity: 7, SKU: 1001})
	if sku := l.ask(t); sku != 1001 {
		t.Fatalf("the checker asked about SKU %d, want 1001", sku)
	}
	// The check of 1001 is now in flight, blocked in the ledger.
	e.srv.HandleEvent(sale.Event{Kind: sale.EventAvailable, Activity: 7, SKU: 1001})
	if e.srv.flags.soldOut(1001, 7) {
		t.Fatal("the available event left the flag up")
	}
	l.answers <- true // the late answer: sold out
	// The checker reads one SKU at a time: once it asks about another SKU
	// it has applied the late answer about 1001.
	e.srv.HandleEvent(sale.Event{Kind: sale.EventSoldOut, Activity: 7, SKU: 1002})
	if sku := l.ask(t); sku != 1002 {
		t.Fatalf("the checker asked about SKU %d after the late answer, want 1002", sku)
	}
	if n := l.checked(1001); n != 1 {
		t.Fatalf("the ledger was checked %d times about SKU 1001, want exactly the one in flight", n)
	}
	e.srv.flags.cache.Wait()
	if e.srv.flags.soldOut(1001, 7) {
		t.Fatal("the in-flight check's late sold-out answer raised a flag the available event had dropped")
	}
	if _, tracked := e.srv.flags.flagged.m.Load(int64(1001)); tracked {
		t.Fatal("the checker tracks SKU 1001 again after the available event")
	}
	if r := e.order("5", `{"skuId":1001}`); r.status != 200 {
		t.Fatalf("a buyer after the stock came back: %d %s", r.status, r.raw)
	}
	if n := e.eng.calls.Load(); n != 1 {
		t.Fatalf("engine calls %d, want 1", n)
	}
}
