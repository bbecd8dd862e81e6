package app

import (
	"encoding/json"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"seckill/cmd/seckill/config"
	"seckill/internal/testenv"
	"seckill/sale"
)

// prequeueAnswer is a 202 WAITING of the pre-queue.
type prequeueAnswer struct {
	waitAnswer
	Prequeued  bool  `json:"prequeued"`
	StartsInMs int64 `json:"startsInMs"`
}

// TestPrequeueEndToEnd: 1,000 buyers take a queue-mode SKU's line before
// the start (its activity's pre-queue), over HTTP through the real edge,
// engine, drainer, consumer, Redis, kfake and SQLite. Before the start a
// pre-queued buyer is answered 202 WAITING without a position (a direct
// SKU of the activity still 425 NOT_OPEN) and nothing of the SKU is
// served; at the start the drainer records a draw, serves the pre-queue
// in the recorded permutation (window by window, |Spearman ρ| ≤ 0.2
// between arrival and acceptance), then the arrivals after the start in
// line order behind it; exactly the stock becomes orders, one per buyer.
func TestPrequeueEndToEnd(t *testing.T) {
	testenv.Long(t) // it waits ~25 s for the sale's start
	const window = 50
	c := startClusterWith(t, mode{"sqlite", false}, func(cfg *config.Config) {
		crowdBudgets(cfg)
		cfg.Engine.Queue.Enabled = true
		cfg.Engine.Queue.SessionTimeout = 6 * time.Second
		cfg.Engine.Queue.Window = window
	})
	const pre, post, stock = 1000, 100, 1050
	// The start leaves the intake of 1,000 buyers time on a busy machine
	// under -race.
	start := time.Now().Add(25 * time.Second)
	c.preheat(t, sale.Activity{ID: 1, Start: start, End: start.Add(time.Hour), State: sale.StateOnline, Prequeue: 1,
		SKUs: []sale.SKU{{ID: 4001, Stock: stock, Price: 100, LimitPerUser: 1, Mode: sale.ModeQueue},
			{ID: 4002, Stock: 5, Price: 100, LimitPerUser: 1}}})

	// The public view tells the page when the line opens and which SKU
	// takes it.
	var view struct {
		Phase     string `json:"phase"`
		LineOpens string `json:"lineOpens"`
		SKUs      []struct {
			ID     int64 `json:"id"`
			Queued bool  `json:"queued"`
		} `json:"skus"`
	}
	if r := send(t, "GET", c.base+"/api/v1/flash-sale/activities/1", 0, "", ""); r.status != 200 || json.Unmarshal([]byte(r.raw), &view) != nil ||
		view.Phase != "UPCOMING" || view.LineOpens != start.Add(-time.Minute).UTC().Format("2006-01-02T15:04:05.000Z07:00") ||
		len(view.SKUs) != 2 || !view.SKUs[0].Queued || view.SKUs[1].Queued {
		t.Fatalf("the activity's view before the start: %d %s", r.status, r.raw)
	}
	if r := send(t, "POST", c.base+"/api/v1/flash-sale/order", 5, "", `{"skuId":4002,"quantity":1}`); r.status != 425 {
		t.Fatalf("a direct SKU before the start: %d %s, want 425", r.status, r.raw)
	}
	arrival := map[string]int{} // requestNo -> the buyer's arrival (its ticket's number)
	owner := map[string]int64{}
	var mu sync.Mutex
	work := make(chan int64)
	var wg sync.WaitGroup
	for range 32 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for u := range work {
				r := send(t, "POST", c.base+"/api/v1/flash-sale/order", u, "", `{"skuId":4001,"quantity":1}`)
				w := prequeueAnswer{waitAnswer: waitAnswer{Status: r.status}}
				if err := json.Unmarshal([]byte(r.raw), &w); err != nil || w.Status != 202 || w.Code != "WAITING" || !w.Prequeued ||
					w.Position != nil || w.StartsInMs <= 0 || w.PollAfterMs <= 0 {
					t.Errorf("pre-queued buyer %d: %s (%v)", u, r.raw, err)
					continue
				}
				mu.Lock()
				owner[w.RequestNo] = u
				mu.Unlock()
			}
		}()
	}
	for u := int64(1); u <= pre; u++ {
		work <- 10_000 + u
	}
	close(work)
	wg.Wait()
	if time.Now().After(start) {
		t.Fatalf("the pre-queue took past the start (%d tickets); the test's start is too close", len(owner))
	}
	if len(owner) != pre {
		t.Fatalf("%d pre-queued tickets, want %d", len(owner), pre)
	}
	for rn := range owner {
		_, _, id, _ := sale.ParseRequestNo(rn)
		n, err := strconv.Atoi(id)
		if err != nil {
			t.Fatal(err)
		}
		arrival[rn] = n
	}
	// Each ticket's offset in the line, from its WAITING result's code
	// ("<partition>:<offset>").
	offset := map[string]int64{}
	res, err := c.redis.Do(t, "HGETALL", sale.ResultsKey(1, 4001)).AsStrMap()
	if err != nil {
		t.Fatal(err)
	}
	for rn, v := range res {
		f := strings.Split(v, "|")
		_, o, ok := strings.Cut(f[len(f)-1], ":")
		n, err := strconv.ParseInt(o, 10, 64)
		if f[0] != "WAITING" || !ok || err != nil {
			t.Fatalf("ticket %s before the start: %q", rn, v)
		}
		offset[rn] = n
	}
	if len(offset) != pre {
		t.Fatalf("%d WAITING results, want %d", len(offset), pre)
	}
	// Nothing is served before the start, and a poll says so.
	for rn, u := range owner {
		r := send(t, "GET", c.base+"/api/v1/flash-sale/result/"+rn, u, "", "")
		var w prequeueAnswer
		if err := json.Unmarshal([]byte(r.raw), &w); err != nil || w.Code != "WAITING" || !w.Prequeued || w.Position != nil {
			t.Fatalf("a pre-queued ticket's result before the start: %d %s", r.status, r.raw)
		}
		break
	}
	db := c.db(t)
	time.Sleep(time.Until(start) - time.Second)
	var early int
	if err := db.QueryRow("SELECT COUNT(*) FROM seckill_request_log WHERE queued_ms > 0 AND request_no LIKE '1-4001-%'").Scan(&early); err != nil {
		t.Fatal(err)
	}
	if early != 0 || c.redis.Int(t, "EXISTS", sale.PrequeueKey(1, 4001)) != 0 {
		t.Fatalf("%d pre-queued attempts served before the start (or a draw recorded)", early)
	}

	// After the start: arrivals one by one, in line behind the pre-queue.
	time.Sleep(time.Until(start) + 100*time.Millisecond)
	var later []string
	for u := int64(1); u <= post; u++ {
		w := c.buyQueued(t, 4001, 20_000+u)
		switch {
		case w.Status == 202 && w.Code == "WAITING" && w.Position != nil:
			later = append(later, w.RequestNo)
			owner[w.RequestNo] = 20_000 + u
		case w.Status == 410 && w.Code == "SOLD_OUT":
		default:
			t.Fatalf("buyer %d after the start: %+v", 20_000+u, w)
		}
	}

	won := map[string]bool{}
	testenv.EventuallyOK(t, "every ticket's end", 60*time.Second, func() error {
		for rn, u := range owner {
			if won[rn] {
				continue
			}
			r := c.resultQueued(t, rn, u)
			switch {
			case r.Code == "SUCCESS":
				won[rn] = true
			case r.Code == "FAIL" && r.Reason == "SOLD_OUT":
				delete(owner, rn)
			case r.Code == "WAITING" || r.Code == "QUEUING":
				return fmt.Errorf("ticket %s: %+v", rn, r)
			default:
				t.Fatalf("ticket %s: %+v", rn, r)
			}
		}
		return nil
	})
	var rows, distinct int
	if err := db.QueryRow("SELECT COUNT(*), COUNT(DISTINCT user_id) FROM seckill_order WHERE activity_id=1 AND sku_id=4001").Scan(&rows, &distinct); err != nil {
		t.Fatal(err)
	}
	if rows != stock || distinct != stock || len(won) != stock {
		t.Fatalf("seckill_order: %d rows for %d buyers (%d SUCCESS), want %d", rows, distinct, len(won), stock)
	}

	// The record: the draw and the served order of the offsets.
	draw, err := sale.ParseDraw(c.redis.Str(t, "HGET", sale.PrequeueKey(1, 4001), "draw"))
	if err != nil {
		t.Fatal(err)
	}
	var order []int64
	for _, f := range strings.Split(c.redis.Str(t, "HGET", sale.PrequeueKey(1, 4001), "order"), ",") {
		o, err := strconv.ParseInt(f, 10, 64)
		if err != nil {
			t.Fatalf("order field %q: %v", f, err)
		}
		order = append(order, o)
	}
	if len(order) != pre {
		t.Fatalf("%d offsets in the recorded order, want %d", len(order), pre)
	}
	if again := draw.Permute(order); !slices.Equal(again, order) {
		t.Fatal("the recorded order is not the draw's permutation of its offsets")
	}

	// Acceptance: the engine's accept time of each ticket.
	var accepted map[string]int64
	testenv.EventuallyOK(t, "the request log's accepts", 20*time.Second, func() error {
		var err error
		if accepted, err = acceptTimes(db, 1, 4001); err != nil {
			t.Fatal(err)
		}
		if len(accepted) < stock {
			return fmt.Errorf("%d accepts in the request log, want %d", len(accepted), stock)
		}
		return nil
	})
	pos := map[int64]int{}
	for i, o := range order {
		pos[o] = i
	}
	var xs, ys []float64
	last := make([]int64, pre/window) // the latest accept of each window of the order
	first := make([]int64, pre/window)
	for rn, n := range arrival {
		ms, ok := accepted[rn]
		if !ok {
			t.Fatalf("pre-queued ticket %s not accepted", rn)
		}
		xs = append(xs, float64(n))
		ys = append(ys, float64(ms))
		off := offset[rn]
		i, ok := pos[off]
		if !ok {
			t.Fatalf("ticket %s at offset %d is not in the recorded order", rn, off)
		}
		w := i / window
		last[w] = max(last[w], ms)
		if first[w] == 0 || ms < first[w] {
			first[w] = ms
		}
	}
	rho := spearman(xs, ys)
	t.Logf("pre-queue: Spearman ρ = %.3f over %d; draw %s", rho, len(xs), draw)
	if rho > 0.2 || rho < -0.2 {
		t.Fatalf("Spearman ρ %.3f between arrival and acceptance in the pre-queue, want |ρ| ≤ 0.2", rho)
	}
	for w := 1; w < len(first); w++ {
		if first[w] != 0 && last[w-1] > first[w] {
			t.Fatalf("window %d of the recorded order accepted before window %d ended (%d > %d)", w, w-1, last[w-1], first[w])
		}
	}
	// The arrivals after the start: behind the pre-queue (after all but
	// its last window: the engine stamps a ticket's accept time as it
	// takes the occupy into a group commit, and the line's next attempt
	// may be stamped while the last window's commit is in flight), and in
	// line order: the units left after the pre-queue go to the first
	// arrivals (they came one by one; a window occupies together).
	for i, rn := range later {
		ms, ok := accepted[rn]
		if ok != (i < stock-pre) {
			t.Fatalf("arrival %d after the start (%s): accepted %v, want the first %d to be", i, rn, ok, stock-pre)
		}
		if ok && ms < last[len(last)-2] {
			t.Fatalf("ticket %s after the start accepted at %d, inside the pre-queue (window ending %d)", rn, ms, last[len(last)-2])
		}
	}
}
