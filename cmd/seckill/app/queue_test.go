package app

import (
	"database/sql"
	"encoding/json"
	"fmt"
	"math"
	"sort"
	"strconv"
	"sync"
	"testing"
	"time"

	"seckill/cmd/seckill/config"
	"seckill/internal/testenv"
	"seckill/sale"
)

// queueCluster is a whole system (in-process engine, SQLite) with queue
// mode on.
func queueCluster(t *testing.T) *cluster {
	t.Helper()
	return startClusterWith(t, mode{"sqlite", false}, func(cfg *config.Config) {
		crowdBudgets(cfg)
		cfg.Engine.Queue.Enabled = true
		cfg.Engine.Queue.SessionTimeout = 6 * time.Second
	})
}

// waitAnswer is a 202 WAITING (or any answer) with the queue fields.
type waitAnswer struct {
	Status      int
	Code        string `json:"code"`
	RequestNo   string `json:"requestNo"`
	Position    *int64 `json:"position"`
	EtaMs       *int64 `json:"etaMs"`
	PollAfterMs int64  `json:"pollAfterMs"`
	Reason      string `json:"reason"`
}

func (c *cluster) buyQueued(t testing.TB, sku, user int64) waitAnswer {
	t.Helper()
	r := send(t, "POST", c.base+"/api/v1/flash-sale/order", user, "", fmt.Sprintf(`{"skuId":%d,"quantity":1}`, sku))
	for try := 0; r.status == 429 && try < 30; try++ {
		time.Sleep(time.Second)
		r = send(t, "POST", c.base+"/api/v1/flash-sale/order", user, "", fmt.Sprintf(`{"skuId":%d,"quantity":1}`, sku))
	}
	return decodeWait(t, r)
}

func (c *cluster) resultQueued(t testing.TB, rn string, user int64) waitAnswer {
	t.Helper()
	return decodeWait(t, send(t, "GET", c.base+"/api/v1/flash-sale/result/"+rn, user, "", ""))
}

func decodeWait(t testing.TB, r reply) waitAnswer {
	t.Helper()
	w := waitAnswer{Status: r.status}
	if err := json.Unmarshal([]byte(r.raw), &w); err != nil {
		t.Fatalf("answer %d %s: %v", r.status, r.raw, err)
	}
	return w
}

func (c *cluster) setMode(t testing.TB, sku int64, body string) {
	t.Helper()
	r := send(t, "PUT", c.admin+"/admin/v1/skus/"+strconv.FormatInt(sku, 10)+"/mode", 0, "Bearer "+c.cfg.Admin.Token, body)
	if r.status != 200 {
		t.Fatalf("set mode of %d to %s: %d %s", sku, body, r.status, r.raw)
	}
}

// spearman is Spearman's rank correlation of x and y (no ties in x; ties
// in y get their mean rank).
// acceptTimes is the engine's accept time (MQ_QUEUED: the request-log
// row's queued_ms) of each accepted ticket of the SKU, by requestNo.
func acceptTimes(db *sql.DB, activity, sku int64) (map[string]int64, error) {
	rs, err := db.Query(`SELECT request_no, queued_ms FROM seckill_request_log
		WHERE queued_ms > 0 AND activity_id = ? AND sku_id = ?`, activity, sku)
	if err != nil {
		return nil, err
	}
	defer rs.Close()
	out := map[string]int64{}
	for rs.Next() {
		var rn string
		var ms int64
		if err := rs.Scan(&rn, &ms); err != nil {
			return nil, err
		}
		out[rn] = ms
	}
	return out, rs.Err()
}

func spearman(x, y []float64) float64 {
	rank := func(v []float64) []float64 {
		idx := make([]int, len(v))
		for i := range idx {
			idx[i] = i
		}
		sort.SliceStable(idx, func(a, b int) bool { return v[idx[a]] < v[idx[b]] })
		r := make([]float64, len(v))
		for i := 0; i < len(idx); {
			j := i
			for j+1 < len(idx) && v[idx[j+1]] == v[idx[i]] {
				j++
			}
			for k := i; k <= j; k++ {
				r[idx[k]] = float64(i+j) / 2
			}
			i = j + 1
		}
		return r
	}
	rx, ry := rank(x), rank(y)
	var mx, my float64
	for i := range rx {
		mx += rx[i]
		my += ry[i]
	}
	mx /= float64(len(rx))
	my /= float64(len(ry))
	var sxy, sxx, syy float64
	for i := range rx {
		sxy += (rx[i] - mx) * (ry[i] - my)
		sxx += (rx[i] - mx) * (rx[i] - mx)
		syy += (ry[i] - my) * (ry[i] - my)
	}
	return sxy / math.Sqrt(sxx*syy)
}

// TestQueueModeEndToEnd: 2,000 buyers of a 500-unit SKU in queue mode,
// over HTTP through the real edge, engine, drainer, consumer, Redis,
// kfake and a store. Every buyer is answered 202 WAITING with a
// position; every ticket ends, exactly the stock becomes orders, one per
// buyer; the units go in line order (Spearman ρ ≥ 0.95 between arrival
// and acceptance); a buyer who waits gets 409 naming the ticket; once
// sold out the edge takes no more waiters.
func TestQueueModeEndToEnd(t *testing.T) {
	c := queueCluster(t)
	c.preheat(t, openActivity(1, sale.SKU{ID: 2001, Stock: 500, Price: 9900, LimitPerUser: 1, Mode: sale.ModeQueue},
		sale.SKU{ID: 2002, Stock: 5, Price: 100, LimitPerUser: 1, Mode: sale.ModeQueue, Rate: 1}))

	// A slow line (1/s): the second attempt of a waiting buyer is 409
	// naming the first ticket, and the result route says WAITING with a
	// position.
	first := c.buyQueued(t, 2002, 7)
	if first.Status != 202 || first.Code != "WAITING" || first.RequestNo == "" || first.Position == nil || first.PollAfterMs <= 0 {
		t.Fatalf("first attempt: %+v", first)
	}
	second := c.buyQueued(t, 2002, 8)
	again := c.buyQueued(t, 2002, 8)
	if again.Status != 409 || again.Code != "WAITING" || again.RequestNo != second.RequestNo {
		t.Fatalf("a waiting buyer again: %+v, want 409 naming %s", again, second.RequestNo)
	}
	if r := c.resultQueued(t, second.RequestNo, 8); !(r.Code == "WAITING" && r.Position != nil && r.PollAfterMs > 0) && r.Code != "QUEUING" && r.Code != "SUCCESS" {
		t.Fatalf("result of a waiting ticket: %+v", r)
	}

	const buyers = 2000
	type took struct {
		user int64
		w    waitAnswer
	}
	out := make(chan took, buyers)
	work := make(chan int64)
	var wg sync.WaitGroup
	for range 32 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for u := range work {
				out <- took{u, c.buyQueued(t, 2001, u)}
			}
		}()
	}
	for u := int64(1); u <= buyers; u++ {
		work <- 1000 + u
	}
	close(work)
	wg.Wait()
	close(out)
	tickets := map[string]int64{}
	late := 0
	for g := range out {
		switch {
		case g.w.Status == 202 && g.w.Code == "WAITING" && g.w.Position != nil:
			tickets[g.w.RequestNo] = g.user
		case g.w.Status == 410 && g.w.Code == "SOLD_OUT":
			late++ // the line sold out before this buyer came
		default:
			t.Fatalf("buyer %d: %+v", g.user, g.w)
		}
	}
	if len(tickets) < 500 {
		t.Fatalf("%d tickets, %d sold out at the edge: want at least the stock in line", len(tickets), late)
	}

	// Every WAITING ticket ends: SUCCESS for exactly the stock.
	won := map[string]int64{}
	open := make(map[string]int64, len(tickets))
	for rn, u := range tickets {
		open[rn] = u
	}
	testenv.EventuallyOK(t, "every ticket's end", 60*time.Second, func() error {
		for rn, u := range open {
			r := c.resultQueued(t, rn, u)
			switch {
			case r.Code == "SUCCESS":
				won[rn] = u
			case r.Code == "FAIL" && r.Reason == "SOLD_OUT":
			case r.Code == "WAITING" || r.Code == "QUEUING":
				return fmt.Errorf("ticket %s: %+v (%d open)", rn, r, len(open))
			default:
				t.Fatalf("ticket %s: %+v", rn, r)
			}
			delete(open, rn)
		}
		return nil
	})
	if len(won) != 500 {
		t.Fatalf("%d SUCCESS, want 500", len(won))
	}
	db := c.db(t)
	var rows, distinct int
	if err := db.QueryRow("SELECT COUNT(*), COUNT(DISTINCT user_id) FROM seckill_order WHERE activity_id=1 AND sku_id=2001").Scan(&rows, &distinct); err != nil {
		t.Fatal(err)
	}
	if rows != 500 || distinct != 500 {
		t.Fatalf("seckill_order: %d rows for %d buyers, want 500 and 500", rows, distinct)
	}
	// A ticket the line refused is in its buyer's story too: a refusal
	// naming it.
	testenv.EventuallyOK(t, "the refused tickets' request log", 10*time.Second, func() error {
		var refused int
		if err := db.QueryRow(`SELECT COUNT(*) FROM seckill_request_log WHERE activity_id=1 AND sku_id=2001
			AND status='REJECTED' AND remark LIKE 'SOLD_OUT: refused in line: ticket %'`).Scan(&refused); err != nil {
			return err
		}
		if want := len(tickets) - 500; refused != want {
			return fmt.Errorf("%d refusals in the request log, want one per refused ticket (%d)", refused, want)
		}
		return nil
	})

	// FIFO: arrival is the ticket number's order (taken by the edge as
	// the attempt came), acceptance the engine's accept time (MQ_QUEUED,
	// the request-log row's queued_ms).
	var arrival, accepted []float64
	times, err := acceptTimes(db, 1, 2001)
	if err != nil {
		t.Fatal(err)
	}
	for rn, ms := range times {
		_, _, id, _ := sale.ParseRequestNo(rn)
		n, err := strconv.ParseInt(id, 10, 64)
		if err != nil {
			t.Fatal(err)
		}
		arrival = append(arrival, float64(n))
		accepted = append(accepted, float64(ms))
	}
	if len(arrival) != 500 {
		t.Fatalf("%d accepted tickets in the request log, want 500", len(arrival))
	}
	rho := spearman(arrival, accepted)
	t.Logf("FIFO: Spearman ρ = %.3f over %d accepted of %d in line", rho, len(arrival), len(tickets))
	if rho < 0.95 {
		t.Fatalf("Spearman ρ %.3f between arrival and acceptance, want ≥ 0.95", rho)
	}

	// Sold out: no more waiters, answered at the edge.
	testenv.EventuallyOK(t, "the sold-out flag", 10*time.Second, func() error {
		if w := c.buyQueued(t, 2001, 9_000_001); w.Status != 410 {
			return fmt.Errorf("after sell-out: %+v", w)
		}
		return nil
	})
	if n := c.redis.Int(t, "HLEN", sale.WaitingKey(1, 2001)); n != 0 {
		t.Fatalf("%d buyers still recorded waiting", n)
	}
	// The drainer's metrics: the decisions counted, the line's length
	// and drain rate published.
	// The slow line drains one attempt a second: wait for its two.
	testenv.EventuallyOK(t, "the decisions counted", 10*time.Second, func() error {
		if n := testenv.Metric(t, c.sys.Reg, "seckill_queue_decided_total", map[string]string{"outcome": "ok"}); n != 502 {
			return fmt.Errorf("seckill_queue_decided_total{outcome=ok} %v, want 502 (500 + the slow line's 2)", n)
		}
		return nil
	})
	testenv.EventuallyOK(t, "the line's gauges", 5*time.Second, func() error {
		for _, name := range queueMetrics {
			if _, ok := testenv.MetricPresent(t, c.sys.Reg, name, nil); !ok {
				return fmt.Errorf("%s is not on /metrics", name)
			}
		}
		return nil
	})
}

// TestQueueModeSwitchedMidSale: a SKU switched from direct to queue and
// back while buyers come: each buyer is answered by the mode in force
// (200 QUEUING direct, 202 WAITING queued), and exactly the stock
// becomes orders, one per buyer.
func TestQueueModeSwitchedMidSale(t *testing.T) {
	c := queueCluster(t)
	c.preheat(t, openActivity(1, sale.SKU{ID: 3001, Stock: 60, Price: 100, LimitPerUser: 1}))
	user := int64(0)
	codes := map[string]int{}
	tickets := map[string]int64{}
	buy := func(want string) {
		t.Helper()
		user++
		w := c.buyQueued(t, 3001, user)
		codes[w.Code]++
		switch w.Code {
		case "QUEUING", "WAITING":
			tickets[w.RequestNo] = user
		case "SOLD_OUT":
		default:
			t.Fatalf("buyer %d: %+v", user, w)
		}
		if want != "" && w.Code != want {
			t.Fatalf("buyer %d: %s, want %s", user, w.Code, want)
		}
	}
	// Until the edge has the switch, a buyer is answered either way.
	switchTo := func(m, want string) {
		t.Helper()
		c.setMode(t, 3001, `{"mode":"`+m+`"}`)
		testenv.EventuallyOK(t, "the "+m+" mode at the edge", 10*time.Second, func() error {
			buy("")
			if a, k, ok := c.sys.Catalog.Lookup(1, 3001); !ok || a == nil || k.Mode != m {
				return fmt.Errorf("catalog mode not %s yet", m)
			}
			return nil
		})
		buy(want)
	}
	for range 20 {
		buy("QUEUING")
	}
	switchTo(sale.ModeQueue, "WAITING")
	for range 20 {
		buy("WAITING")
	}
	switchTo(sale.ModeDirect, "")
	for range 30 {
		buy("")
	}
	testenv.EventuallyOK(t, "every ticket's end", 30*time.Second, func() error {
		for rn, u := range tickets {
			if r := c.resultQueued(t, rn, u); r.Code != "SUCCESS" && !(r.Code == "FAIL" && r.Reason == "SOLD_OUT") {
				return fmt.Errorf("ticket %s: %+v", rn, r)
			}
		}
		return nil
	})
	var rows, distinct int
	if err := c.db(t).QueryRow("SELECT COUNT(*), COUNT(DISTINCT user_id) FROM seckill_order WHERE sku_id=3001").Scan(&rows, &distinct); err != nil {
		t.Fatal(err)
	}
	if rows != 60 || distinct != 60 {
		t.Fatalf("seckill_order: %d rows for %d buyers, want 60 and 60 (answers %v)", rows, distinct, codes)
	}
	if codes["WAITING"] < 20 || codes["QUEUING"] < 20 {
		t.Fatalf("answers %v: both modes should have served", codes)
	}
}
