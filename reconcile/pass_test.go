package reconcile

import (
	"context"
	"fmt"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"go.uber.org/zap/zaptest"

	"seckill/sale"
	"seckill/stock/stocktest"
	"seckill/store"
)

// TestPassJudgesWhatChanged: while the sale runs the periodic pass reads
// counters and the orders made since its last pass — an order whose record
// Redis lost is found once, restored on repair, and the next pass does not
// read it again; counters that do not add up are found without reading a
// record.
func TestPassJudgesWhatChanged(t *testing.T) {
	runTest(t, func(t *testing.T, r *rig) {
		ctx := context.Background()
		now := time.Now()
		for u := int64(1); u <= 4; u++ {
			r.order(t, 501, u)
		}
		r.occupy(t, 502, 9) // an occupancy without an order: the sweeper's, never this pass's
		at := now.Add(time.Minute)
		rc, _ := r.reconciler(t, at)
		rep, err := rc.Pass(ctx, false)
		if err != nil {
			t.Fatal(err)
		}
		if rep.Drifts != 0 {
			t.Fatalf("books that add up: %+v", rep)
		}
		for _, l := range rep.SKUs {
			if l.Mode != ModeCounters {
				t.Fatalf("a running sale compared by %s: %+v", l.Mode, l)
			}
		}
		if rc.pass.mark == 0 {
			t.Fatal("the watermark did not move past the orders judged")
		}

		// One order more, whose buyer's record Redis then loses.
		m := r.order(t, 501, 5)
		r.redis.Do(t, "HDEL", sale.KeysFor(r.act.ID, 501).Users, "5")
		rep, err = rc.Pass(ctx, false)
		if err != nil {
			t.Fatal(err)
		}
		line := lineOf(t, rep, 501)
		if got := driftOf(line, KindOrderWithoutClaim); got != 1 {
			t.Fatalf("order_without_claim %d, want 1: %+v", got, line)
		}
		// The record's unit is still in sold: the counters see it too.
		if got := driftOf(line, KindRedisRecords); got != 1 {
			t.Fatalf("redis_records %d, want 1: %+v", got, line)
		}
		// The repair's pass: judged already, the order is not read again.
		rep, err = rc.Pass(ctx, true)
		if err != nil {
			t.Fatal(err)
		}
		if got := driftOf(lineOf(t, rep, 501), KindOrderWithoutClaim); got != 0 {
			t.Fatalf("the pass read an order it judged before: %+v", rep)
		}
		// A fresh reconciler (a restarted process) pages from the start,
		// finds it and restores it.
		rc2, _ := r.reconciler(t, at)
		rep, err = rc2.Pass(ctx, true)
		if err != nil {
			t.Fatal(err)
		}
		if len(lineOf(t, rep, 501).Repairs) != 1 {
			t.Fatalf("not restored: %+v", lineOf(t, rep, 501))
		}
		rn, claimed, err := r.stock.Holder(ctx, r.act.ID, 501, 5)
		if err != nil || rn != m.RequestNo || !claimed {
			t.Fatalf("record after the repair: %q %v %v", rn, claimed, err)
		}

		// A unit sold behind Redis's back: the counters say so.
		r.redis.Do(t, "INCRBY", sale.KeysFor(r.act.ID, 503).Stock, "1")
		rep, err = rc2.Pass(ctx, false)
		if err != nil {
			t.Fatal(err)
		}
		if got := driftOf(lineOf(t, rep, 503), KindRedisLedger); got != 1 {
			t.Fatalf("redis_ledger %d, want 1: %+v", got, lineOf(t, rep, 503))
		}
	})
}

// TestPassSkipsClosedOrders: an order closed after the page was read
// gave its record back; the pass must not call it lost (and restore a record
// for a closed order, which would hold a unit for ever).
func TestPassSkipsClosedOrders(t *testing.T) {
	runTest(t, func(t *testing.T, r *rig) {
		ctx := context.Background()
		m := r.order(t, 501, 1)
		o, err := r.st.OrderByRequest(ctx, m.RequestNo)
		if err != nil {
			t.Fatal(err)
		}
		if _, closed, err := r.st.CloseOrder(ctx, o.OrderNo, time.Now().Add(time.Hour)); err != nil || !closed {
			t.Fatalf("close: %v %v", closed, err)
		}
		if _, err := r.stock.ReleaseClosed(ctx, &m); err != nil {
			t.Fatal(err)
		}
		rc, _ := r.reconciler(t, time.Now().Add(time.Minute))
		rep, err := rc.Pass(ctx, true)
		if err != nil {
			t.Fatal(err)
		}
		if l := lineOf(t, rep, 501); len(l.Drifts)+len(l.Repairs) != 0 {
			t.Fatalf("a closed order judged: %+v", l)
		}
		if rn, _, err := r.stock.Holder(ctx, r.act.ID, 501, 1); err != nil || rn != "" {
			t.Fatalf("record of the closed order: %q %v", rn, err)
		}
	})
}

// TestPassComparesAnEndedSaleInFull: once the sale has ended and its
// tickets are past the grace period, each SKU is compared record by record
// once (finding what counters cannot: an orphan), then by counters again.
func TestPassComparesAnEndedSaleInFull(t *testing.T) {
	runTest(t, func(t *testing.T, r *rig) {
		ctx := context.Background()
		r.order(t, 501, 1)
		r.occupy(t, 502, 2) // never ordered: an orphan
		after := r.act.End.Add(time.Hour)
		rc, _ := r.reconciler(t, after)
		rep, err := rc.Pass(ctx, false)
		if err != nil {
			t.Fatal(err)
		}
		l := lineOf(t, rep, 502)
		if l.Mode != ModeFull || driftOf(l, KindOrphan) != 1 {
			t.Fatalf("the ended sale's first pass: %+v", l)
		}
		rep, err = rc.Pass(ctx, false)
		if err != nil {
			t.Fatal(err)
		}
		if l := lineOf(t, rep, 502); l.Mode != ModeCounters {
			t.Fatalf("compared in full twice: %+v", l)
		}
	})
}

// TestPassAuditsAFailedSKULater: a SKU whose records cannot be read is
// skipped on the pages of the pass after the one where it failed, while
// the other SKUs' orders on those pages are judged; the watermark moves on
// all the same, and the next pass that can read the SKU checks its orders
// from the page where it failed. A SKU the audit could read but whose
// counters it then could not is reported with what the audit found. So an
// order whose record Redis lost is reported once, whichever side of the
// failure it is on.
func TestPassAuditsAFailedSKULater(t *testing.T) {
	ctx := context.Background()
	cfg := store.DefaultConfig()
	cfg.DSN = filepath.Join(t.TempDir(), "orders.db")
	l := stocktest.NewLedger(t, cfg, stocktest.Options{})
	now := time.Now()
	const (
		pages  = 5
		orders = pages * auditPage // order x is SKU 901's, 902's or 903's by x % 3
	)
	act := sale.Activity{ID: 9, Start: now.Add(-time.Hour), End: now.Add(time.Hour), State: sale.StateOnline}
	for _, id := range []int64{901, 902, 903} {
		act.SKUs = append(act.SKUs, sale.SKU{ID: id, Stock: orders, Price: 100, LimitPerUser: 1})
	}
	l.Sell(t, act)
	fillOrders(t, l, cfg.DSN, 9, []int64{901, 902, 903}, 1, orders, now.Add(-30*time.Minute))
	// Records Redis lost: SKU 901's on page 2 (order 1,002), SKU 902's on
	// pages 1 and 3 (orders 4 and 2,002), SKU 903's on page 1 (order 5).
	k901, k902, k903 := sale.KeysFor(9, 901), sale.KeysFor(9, 902), sale.KeysFor(9, 903)
	l.Redis.Do(t, "HDEL", k901.Users, strconv.Itoa(auditPage+2))
	l.Redis.Do(t, "HDEL", k902.Users, "4", strconv.Itoa(2*auditPage+2))
	l.Redis.Do(t, "HDEL", k903.Users, "5")
	// SKU 902's records cannot be read: its users key is not a hash (the
	// shard answers PING, so only this SKU is left for later).
	saved := k902.Users + ":saved"
	l.Redis.Do(t, "RENAME", k902.Users, saved)
	l.Redis.Do(t, "SET", k902.Users, "not a hash")
	// SKU 903's snapshot row cannot be read: its counters cannot be
	// compared, after the audit of its orders.
	sqlite := func(q string) {
		t.Helper()
		if out, err := exec.Command("sqlite3", "-cmd", ".timeout 30000", cfg.DSN, q).CombinedOutput(); err != nil {
			t.Fatalf("sqlite3: %v: %s", err, out)
		}
	}
	sqlite(`UPDATE seckill_stock_snapshot SET version = 'not a number' WHERE activity_id = 9 AND sku_id = 903`)
	l.Redis.Do(t, "CONFIG", "RESETSTAT")

	rc := New(DefaultConfig(), l.Stock, l.Store, l.Results, &through{at: now}, zaptest.NewLogger(t),
		prometheus.NewRegistry(), WithClock(func() time.Time { return now.Add(time.Minute) }))
	// What an earlier judgement of SKU 903's counters found stays on its
	// gauge while they cannot be read.
	rc.m.drift.WithLabelValues("9", "903", KindRedisRecords).Set(7)
	rep, err := rc.Pass(ctx, false)
	if err == nil || !strings.Contains(err.Error(), "sku 902") || !strings.Contains(err.Error(), "sku 903") {
		t.Fatalf("a pass that could not judge SKUs 902 and 903: %v", err)
	}
	if got := driftOf(lineOf(t, rep, 901), KindOrderWithoutClaim); got != 1 {
		t.Fatalf("SKU 901 beside a failed SKU: order_without_claim %d, want 1: %+v", got, rep)
	}
	for _, line := range rep.SKUs {
		if line.SKUID == 902 {
			t.Fatalf("SKU 902 judged while unreadable: %+v", line)
		}
	}
	if l := lineOf(t, rep, 903); l.Mode != ModeAudit || driftOf(l, KindOrderWithoutClaim) != 1 || len(l.Drifts) != 1 {
		t.Fatalf("SKU 903, its counters unreadable: %+v, want the audit's one order_without_claim", l)
	}
	if got := testutil.ToFloat64(rc.m.drift.WithLabelValues("9", "903", KindOrderWithoutClaim)); got != 1 {
		t.Fatalf("SKU 903's order_without_claim gauge %v, want 1", got)
	}
	if got := testutil.ToFloat64(rc.m.drift.WithLabelValues("9", "903", KindRedisRecords)); got != 7 {
		t.Fatalf("SKU 903's redis_records gauge %v, want the last judgement's 7", got)
	}
	if rc.pass.mark != orders {
		t.Fatalf("watermark %d, want %d: a failed SKU held it back", rc.pass.mark, orders)
	}
	if m, ok := rc.pass.behind[[2]int64{9, 902}]; !ok || m != 0 || len(rc.pass.behind) != 1 {
		t.Fatalf("marks of the SKUs behind %v, want SKU 902's at 0 (it failed on the first page)", rc.pass.behind)
	}
	// SKU 902's records were asked for once, on the first page, not once a
	// page (each ask answers WRONGTYPE; its counters are not read either
	// once it failed).
	stats, err := l.Redis.Do(t, "INFO", "errorstats").ToString()
	if err != nil {
		t.Fatal(err)
	}
	const stat = "errorstat_WRONGTYPE:count="
	wrong := 0
	if i := strings.Index(stats, stat); i >= 0 {
		n, _, _ := strings.Cut(stats[i+len(stat):], "\r")
		wrong, _ = strconv.Atoi(n)
	}
	if wrong != 1 {
		t.Fatalf("SKU 902's records read %d times in a pass of %d pages: %s", wrong, pages, stats)
	}

	// SKU 902 readable again: the next pass checks its orders from its
	// mark, and the others' new ones only (none). SKU 903's counters still
	// cannot be read, and what its audit found is not reported again.
	l.Redis.Do(t, "RENAME", saved, k902.Users)
	rep, err = rc.Pass(ctx, false)
	if err == nil || strings.Contains(err.Error(), "sku 902") || !strings.Contains(err.Error(), "sku 903") {
		t.Fatalf("the pass with SKU 903 alone unreadable: %v", err)
	}
	if got := driftOf(lineOf(t, rep, 902), KindOrderWithoutClaim); got != 2 {
		t.Fatalf("SKU 902 once readable: order_without_claim %d, want 2: %+v", got, lineOf(t, rep, 902))
	}
	if got := driftOf(lineOf(t, rep, 901), KindOrderWithoutClaim); got != 0 {
		t.Fatalf("SKU 901 judged again: %+v", lineOf(t, rep, 901))
	}
	for _, line := range rep.SKUs {
		if line.SKUID == 903 {
			t.Fatalf("SKU 903's audit reported again: %+v", line)
		}
	}
	if len(rc.pass.behind) != 0 || rc.pass.mark != orders {
		t.Fatalf("after the catch-up: behind %v, watermark %d", rc.pass.behind, rc.pass.mark)
	}
	sqlite(`UPDATE seckill_stock_snapshot SET version = 1 WHERE activity_id = 9 AND sku_id = 903`)
	rep, err = rc.Pass(ctx, false)
	if err != nil {
		t.Fatal(err)
	}
	for _, sku := range []int64{901, 902, 903} {
		if l := lineOf(t, rep, sku); l.Mode != ModeCounters || driftOf(l, KindOrderWithoutClaim) != 0 {
			t.Fatalf("SKU %d in the pass after the catch-up: %+v", sku, l)
		}
	}
}

func lineOf(t *testing.T, rep Report, sku int64) SKUReport {
	t.Helper()
	for _, l := range rep.SKUs {
		if l.SKUID == sku {
			return l
		}
	}
	t.Fatalf("no line for sku %d: %+v", sku, rep)
	return SKUReport{}
}

func driftOf(l SKUReport, kind string) int64 {
	var n int64
	for _, d := range l.Drifts {
		if d.Kind == kind {
			n += d.Amount
		}
	}
	return n
}

// TestPassCostsTheChangeNotTheCrowd: the periodic pass of a SKU with
// 1,000,000 orders behind its watermark costs what the pass of one with
// 1,000 costs — the same 1,000 new orders judged, the same bytes allocated
// — where the full comparison loads every order and record. -short
// compares 1,000 with 20,000 instead (whose first pass pages through every
// order).
func TestPassCostsTheChangeNotTheCrowd(t *testing.T) {
	sizes := []int{1000, 1000000}
	if testing.Short() {
		sizes[1] = 20000
	}
	var base uint64
	for _, n := range sizes {
		alloc := passCost(t, n)
		t.Logf("%d orders behind the watermark: the pass of 1,000 new ones allocated %d bytes", n, alloc)
		if base == 0 {
			base = alloc
			continue
		}
		// Other goroutines (the Redis client's, the database pool's)
		// allocate now and then during a pass, and SQLite's page cache
		// (bounded by its cache_size) fills with the deeper index of a
		// bigger table: a margin of 4 MB for them, far below what reading
		// the orders costs (the full comparison of a million orders peaks
		// above a gigabyte).
		if alloc > base+4<<20 {
			t.Fatalf("%d orders: %d bytes allocated, %d with 1,000: the pass grows with the crowd", n, alloc, base)
		}
	}
}

// passCost builds a SKU with n orders and their records cheaply (the
// sqlite3 shell generates the rows in one statement — the Go driver under
// -race takes a millisecond a row —, a Lua loop writes the records), lets
// a reconciler judge them, adds 1,000 orders more — one of whose records
// Redis loses — and returns the bytes the next pass allocates.
func passCost(t *testing.T, n int) uint64 {
	t.Helper()
	ctx := context.Background()
	cfg := store.DefaultConfig()
	cfg.DSN = filepath.Join(t.TempDir(), "orders.db")
	l := stocktest.NewLedger(t, cfg, stocktest.Options{})
	now := time.Now()
	const more = 1000
	act := sale.Activity{ID: 8, Start: now.Add(-time.Hour), End: now.Add(time.Hour), State: sale.StateOnline,
		SKUs: []sale.SKU{{ID: 801, Stock: int64(n + more), Price: 100, LimitPerUser: 1}}}
	l.Sell(t, act)
	fill := func(from, to int, created time.Time) {
		t.Helper()
		fillOrders(t, l, cfg.DSN, 8, []int64{801}, from, to, created)
	}
	fill(1, n, now.Add(-30*time.Minute))
	rc := New(DefaultConfig(), l.Stock, l.Store, l.Results, &through{at: now}, zaptest.NewLogger(t),
		prometheus.NewRegistry(), WithClock(func() time.Time { return now.Add(time.Minute) }))
	if n <= 20000 {
		// The first pass pages through every order.
		if rep, err := rc.Pass(ctx, false); err != nil || rep.Drifts != 0 {
			t.Fatalf("first pass over %d orders: %+v %v", n, rep, err)
		}
	} else {
		// The first pass over a million orders pages through them as the
		// smaller sizes show; here a reconciler that judged them already
		// is what is measured.
		rc.pass.mark = int64(n)
	}
	fill(n+1, n+more, now)
	l.Redis.Do(t, "HDEL", sale.KeysFor(8, 801).Users, strconv.Itoa(n+7))

	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	rep, err := rc.Pass(ctx, false)
	runtime.ReadMemStats(&after)
	if err != nil {
		t.Fatal(err)
	}
	line := lineOf(t, rep, 801)
	if got := driftOf(line, KindOrderWithoutClaim); got != 1 {
		t.Fatalf("%d orders: order_without_claim %d, want 1: %+v", n, got, line)
	}
	if line.Redis.Records != int64(n+more-1) || line.DB.Sold != int64(n+more) {
		t.Fatalf("%d orders: the pass read %+v", n, line)
	}
	if rc.pass.mark != int64(n+more) {
		t.Fatalf("watermark %d, want %d", rc.pass.mark, n+more)
	}
	return after.TotalAlloc - before.TotalAlloc
}

// fillOrders writes orders from..to of activity act into the SQLite file
// dsn and their records into l's Redis, cheaply (the sqlite3 shell
// generates the rows in one statement, a Lua loop writes the records):
// order x, in id order, is user x's, of SKU skus[x % len(skus)], ticket
// "<act>-<sku>-x", made at created and waiting for its payment; the SKUs'
// snapshots and counters are moved by the units sold.
func fillOrders(t *testing.T, l *stocktest.Ledger, dsn string, act int64, skus []int64, from, to int, created time.Time) {
	t.Helper()
	sqlite3, err := exec.LookPath("sqlite3")
	if err != nil {
		t.Fatalf("the sqlite3 shell builds the orders (scripts/deps.sh --test installs it): %v", err)
	}
	n := len(skus)
	of := "CASE x % " + strconv.Itoa(n)
	var snapshots strings.Builder
	firsts := make([]int, n) // skus[i]'s first order
	for i, sku := range skus {
		of += fmt.Sprintf(" WHEN %d THEN %d", i, sku)
		firsts[i] = from + ((i-from)%n+n)%n
		if units := (to-firsts[i])/n + 1; firsts[i] <= to {
			fmt.Fprintf(&snapshots, `UPDATE seckill_stock_snapshot SET sold = sold + %[1]d, available = available - %[1]d
				WHERE activity_id = %[2]d AND sku_id = %[3]d;`, units, act, sku)
		}
	}
	of += " END"
	q := fmt.Sprintf(`BEGIN;
		INSERT INTO seckill_order (order_no, request_no, activity_id, sku_id, user_id, quantity,
			unit_price_cents, amount_cents, status, created_ms, updated_ms)
		WITH RECURSIVE c(x) AS (SELECT %[1]d UNION ALL SELECT x + 1 FROM c WHERE x < %[2]d)
		SELECT 'O%[5]d-' || (%[6]s) || '-' || x, '%[5]d-' || (%[6]s) || '-' || x, %[5]d, %[6]s, x, 1, 100, 100,
			'%[3]s', %[4]d, %[4]d FROM c;
		%[7]s
		COMMIT;`, from, to, store.OrderPendingPayment, created.UnixMilli(), act, of, snapshots.String())
	if out, err := exec.Command(sqlite3, "-cmd", ".timeout 30000", dsn, q).CombinedOutput(); err != nil {
		t.Fatalf("sqlite3: %v: %s", err, out)
	}
	const perCall = 50000 // records a Lua call writes
	for i, sku := range skus {
		k := sale.KeysFor(act, sku)
		prefix := fmt.Sprintf("%d-%d-", act, sku)
		for lo := firsts[i]; lo <= to; lo += perCall * n {
			hi := min(lo+(perCall-1)*n, to)
			if err := l.Redis.Do(t, "EVAL", `local k = 0
				for x = tonumber(ARGV[1]), tonumber(ARGV[2]), tonumber(ARGV[3]) do
					redis.call('HSET', KEYS[1], x, ARGV[4] .. x)
					k = k + 1
				end
				redis.call('INCRBY', KEYS[2], k)
				redis.call('DECRBY', KEYS[3], k)
				return 1`, "3", k.Users, k.Sold, k.Stock, strconv.Itoa(lo), strconv.Itoa(hi), strconv.Itoa(n), prefix).Error(); err != nil {
				t.Fatal(err)
			}
		}
	}
}
