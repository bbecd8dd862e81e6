package edge

import (
	"fmt"
	"sort"
	"sync"
	"testing"
	"time"

	"seckill/engine"
	"seckill/stock"
)

// recordedLog is a DecisionLog that keeps what it is handed.
type recordedLog struct {
	mu       sync.Mutex
	refused  []string
	verified []string
	counts   map[string]int64
}

func (l *recordedLog) Refused(activity, sku, user, quantity int64, reason, detail, traceID string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.refused = append(l.refused, fmt.Sprintf("%d/%d/%d/%d %s [%s] %s", activity, sku, user, quantity, reason, detail, traceID))
}

func (l *recordedLog) TokenVerified(requestNo string, _ time.Time) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.verified = append(l.verified, requestNo)
}

func (l *recordedLog) Rejected(activity, sku int64, reason string, _ time.Time, n int64) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.counts == nil {
		l.counts = map[string]int64{}
	}
	l.counts[fmt.Sprintf("%d/%d/%s", activity, sku, reason)] += n
}

func (l *recordedLog) snapshot() ([]string, map[string]int64) {
	l.mu.Lock()
	defer l.mu.Unlock()
	r := append([]string(nil), l.refused...)
	sort.Strings(r)
	c := map[string]int64{}
	for k, v := range l.counts {
		c[k] = v
	}
	return r, c
}

// TestDecisionsReachTheLog: the engine's refusals are handed over with
// buyer, SKU, quantity, reason, the held ticket of a duplicate and the
// trace id; an accepted purchase is not a refusal; the free rejections
// arrive as counts per activity, SKU and reason (unknown SKUs under 0/0).
func TestDecisionsReachTheLog(t *testing.T) {
	l := &recordedLog{}
	e := newEdge(t, withOptions(WithDecisionLog(l)), withConfig(func(c *Config) { c.RejectFlush = 50 * time.Millisecond }))
	if r := e.order("42", `{"skuId":1001,"requestId":"ok-1"}`); r.status != 200 {
		t.Fatalf("accepted: %+v", r)
	}
	e.eng.answer(func(*engine.Request) (engine.Ticket, error) {
		return engine.Ticket{RequestNo: "7-1001-55", Remaining: 10}, stock.ErrDuplicate
	})
	if r := e.order("42", `{"skuId":1001,"requestId":"dup-1"}`); r.status != 409 {
		t.Fatalf("duplicate: %+v", r)
	}
	e.eng.answer(func(*engine.Request) (engine.Ticket, error) {
		return engine.Ticket{Remaining: -1}, fmt.Errorf("%w: redis down", engine.ErrBusy)
	})
	if r := e.order("43", `{"skuId":1002,"quantity":2}`); r.status != 503 {
		t.Fatalf("busy: %+v", r)
	}
	e.eng.answer(func(*engine.Request) (engine.Ticket, error) {
		return engine.Ticket{Remaining: 0}, stock.ErrSoldOut
	})
	if r := e.order("44", `{"skuId":1002}`); r.status != 410 {
		t.Fatalf("sold out: %+v", r)
	}
	// The flag is up now: free rejections from here on.
	for range 3 {
		if r := e.order("45", `{"skuId":1002}`); r.status != 410 {
			t.Fatalf("flagged sold out: %+v", r)
		}
	}
	if r := e.order("45", `{"skuId":1003}`); r.status != 425 {
		t.Fatalf("offline: %+v", r)
	}
	if r := e.order("45", `{"skuId":424242}`); r.status != 404 {
		t.Fatalf("unknown: %+v", r)
	}
	want := []string{
		"7/1001/42/1 DUPLICATE [holds ticket 7-1001-55] dup-1",
		"7/1002/43/2 BUSY [system busy: redis down] ",
		"7/1002/44/1 SOLD_OUT [] ",
	}
	waitFor(t, "the decisions", func() bool {
		r, c := l.snapshot()
		return fmt.Sprint(r) == fmt.Sprint(want) && c["7/1002/sold_out"] == 3 && c["9/1003/not_open"] == 1 &&
			c["0/0/unknown_sku"] == 1
	})
	if r, c := l.snapshot(); fmt.Sprint(r) != fmt.Sprint(want) || len(c) != 3 {
		t.Fatalf("refused %q, counts %v", r, c)
	}
}
