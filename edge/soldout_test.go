package edge

import (
	"context"
	"sync"
	"testing"
	"time"

	"seckill/engine"
	"seckill/sale"
	"seckill/stock"
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
			fl, ok := e.srv.flags.cache.Get(1001)
			return ok && time.Until(fl.until) >= ttl-time.Since(answered)
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

func TestSoldOutFlagFromEngineAnswers(t *testing.T) {
	cases := []struct {
		name    string
		ticket  engine.Ticket
		err     error
		status  int
		flagged bool
	}{
		{"a sold-out answer with nothing left raises the flag", engine.Ticket{Remaining: 0}, stock.ErrSoldOut, 410, true},
		{"a sold-out answer that did not read the stock raises the flag", engine.Ticket{Remaining: -1}, stock.ErrSoldOut, 410, true},
		{"a sold-out answer with stock left for smaller orders does not", engine.Ticket{Remaining: 1}, stock.ErrSoldOut, 410, false},
		{"a ticket for the last unit raises the flag", engine.Ticket{RequestNo: "1", Remaining: 0}, nil, 200, true},
		{"a ticket with stock left does not", engine.Ticket{RequestNo: "1", Remaining: 4}, nil, 200, false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			e := newEdge(t)
			e.eng.answer(func(*engine.Request) (engine.Ticket, error) { return c.ticket, c.err })
			if r := e.order("5", `{"skuId":1001}`); r.status != c.status {
				t.Fatalf("first order: %d %s, want %d", r.status, r.raw, c.status)
			}
			e.srv.flags.cache.Wait()
			r := e.order("6", `{"skuId":1001}`)
			calls := e.eng.calls.Load()
			if c.flagged {
				if r.status != 410 || r.code() != "SOLD_OUT" || calls != 1 {
					t.Fatalf("second order: %d %s after %d engine calls, want 410 SOLD_OUT from the flag", r.status, r.raw, calls)
				}
			} else if calls != 2 {
				t.Fatalf("second order did not reach the engine (%d calls): %s", calls, r.raw)
			}
		})
	}
}

func TestSoldOutFlagExpiresWhenItsEventIsMissed(t *testing.T) {
	e := newEdge(t, withConfig(func(c *Config) { c.SoldOutTTL = 300 * time.Millisecond }))
	e.srv.HandleEvent(sale.Event{Kind: sale.EventSoldOut, Activity: 7, SKU: 1001, At: time.Now().UnixNano()})
	e.srv.flags.cache.Wait()
	if r := e.order("5", `{"skuId":1001}`); r.status != 410 {
		t.Fatalf("with the flag: %d %s", r.status, r.raw)
	}
	// No "available" event comes; the TTL must let buyers through again.
	time.Sleep(350 * time.Millisecond)
	if r := e.order("5", `{"skuId":1001}`); r.status != 200 || e.eng.calls.Load() != 1 {
		t.Fatalf("after the TTL: %d %s, engine calls %d", r.status, r.raw, e.eng.calls.Load())
	}
}

func TestSoldOutFlagIsPerActivity(t *testing.T) {
	e := newEdge(t)
	e.srv.HandleEvent(sale.Event{Kind: sale.EventSoldOut, Activity: 99, SKU: 1001})
	e.srv.flags.cache.Wait()
	if r := e.order("5", `{"skuId":1001}`); r.status != 200 {
		t.Fatalf("a flag of activity 99 stopped activity 7: %d %s", r.status, r.raw)
	}
}

// Whatever told the edge — a soldout event or the engine's answer for the
// last unit — the flag raised is the same: it holds for its activity only,
// and the stock check re-validates it (and drops it once the ledger has
// stock again).
func TestEverySourceRaisesTheSameFlag(t *testing.T) {
	for _, src := range []struct {
		name  string
		raise func(e *edgeEnv)
	}{
		{"a soldout event", func(e *edgeEnv) {
			e.srv.HandleEvent(sale.Event{Kind: sale.EventSoldOut, Activity: 7, SKU: 1001})
		}},
		{"the engine's answer for the last unit", func(e *edgeEnv) {
			e.eng.answer(func(*engine.Request) (engine.Ticket, error) { return engine.Ticket{RequestNo: "1", Remaining: 0}, nil })
			if r := e.order("5", `{"skuId":1001}`); r.status != 200 {
				t.Fatalf("the last unit: %d %s", r.status, r.raw)
			}
		}},
	} {
		t.Run(src.name, func(t *testing.T) {
			l := newGatedLedger()
			// Activity 70 sells SKU 1001 too, tomorrow.
			e := newEdge(t, withActivities(sale.Activity{ID: 70, Start: saleStart.Add(24 * time.Hour), End: saleStart.Add(25 * time.Hour),
				SKUs: []sale.SKU{{ID: 1001, Stock: 1, LimitPerUser: 1}}}), withOptions(WithStockCheck(l.check)))
			src.raise(e)
			if !e.srv.flags.soldOut(1001, 7) || e.srv.flags.soldOut(1001, 70) {
				t.Fatalf("flag for activity 7: %v, for activity 70: %v; want it for 7 only",
					e.srv.flags.soldOut(1001, 7), e.srv.flags.soldOut(1001, 70))
			}
			if sku := l.ask(t); sku != 1001 {
				t.Fatalf("the stock check asked about SKU %d, want the flagged 1001", sku)
			}
			l.answers <- false // the ledger has stock
			waitFor(t, "the check to drop the flag", func() bool { return !e.srv.flags.soldOut(1001, 7) })
		})
	}
}
