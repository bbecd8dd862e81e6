package reconcile

import (
	"context"
	"strings"
	"testing"
	"time"

	"seckill/internal/testenv"
	"seckill/sale"
	"seckill/stock/stocktest"
	"seckill/store"
)

// TestADeadShardDoesNotStopTheOthers: SKUs 801 and 803 live on a hot shard
// that is down, SKU 802 on the default shard holds an orphan. The sweep,
// the periodic pass and the full comparison each fail naming SKUs 801 and
// 803 — 803 skipped at once, its shard having not answered a PING after
// 801's reads failed — and still judge SKU 802: the sweep releases its
// orphan, the pass and the comparison report it. SKU 801 comes first, so
// a pass that stopped at the first SKU it could not read would never
// reach SKU 802. An order of SKU 801 whose buyer's record Redis does not
// have is made while the shard is down: the audit cannot check it then,
// and its watermark moves on for SKU 802's orders. Once the shard is back, the next pass audits
// SKU 801's orders from where it could not (order_without_claim, the
// record restored), and the one after that finds nothing left.
func TestADeadShardDoesNotStopTheOthers(t *testing.T) {
	stocktest.EachStore(t, func(t *testing.T, cfg store.Config) {
		dsn := cfg.DSN
		if cfg.Driver == "sqlite" {
			dsn += "?_pragma=busy_timeout(5000)"
		}
		hot := testenv.StartRedis(t, testenv.WithRedisArgs("--appendonly", "yes", "--appendfsync", "always"))
		r, l := newShardedRig(t, cfg, dsn, hot)
		now := time.Now()
		r.act = sale.Activity{ID: 8, Start: now.Add(-time.Hour), End: now.Add(2 * time.Hour), State: sale.StateOnline,
			SKUs: []sale.SKU{
				{ID: 801, Stock: 5, Price: 100, LimitPerUser: 1, Hot: true},
				{ID: 802, Stock: 5, Price: 100, LimitPerUser: 1},
				{ID: 803, Stock: 5, Price: 100, LimitPerUser: 1, Hot: true},
			}}
		l.Sell(t, r.act)
		r.order(t, 801, 1)
		orphan := r.occupy(t, 802, 2) // never claimed, no message coming
		r.order(t, 802, 3)
		r.order(t, 803, 4)
		hot.Stop()
		lost := sale.Message{RequestNo: r.ids.Next(r.act.ID, 801), ActivityID: r.act.ID, SKUID: 801, UserID: 9, Quantity: 1,
			UnitPrice: 100, AcceptedAt: time.Now().UnixMilli()}
		if out, err := r.st.SaveBatch(context.Background(), []sale.Message{lost}); err != nil || out[0].Kind != store.Created {
			t.Fatalf("save: %+v %v", out, err)
		}

		rc, _ := r.reconciler(t, r.later)
		ctx := context.Background()
		// onceEach: both SKUs of the dead shard named, and only one of them
		// read (whichever came first): the other skipped after a PING.
		onceEach := func(s string) bool {
			return strings.Contains(s, "sku 801: ") && strings.Contains(s, "sku 803: ") &&
				strings.Count(s, ": skipped: its shard 0 did not answer PING") == 1
		}
		named := func(what string, err error) {
			t.Helper()
			if err == nil || !onceEach(err.Error()) || strings.Contains(err.Error(), "sku 802") {
				t.Errorf("%s: error %v, want one naming skus 801 and 803, one of them skipped, not sku 802", what, err)
			}
		}
		n, err := rc.Sweep(ctx)
		named("sweep", err)
		if n != 1 {
			t.Errorf("sweep released %d, want SKU 802's orphan", n)
		}
		if c := r.counts(t, 802); c.Holders != 1 {
			t.Errorf("sku 802 after the sweep: %+v, want only the ordered buyer's record", c)
		}
		if e, err := r.res.Read(ctx, orphan.UserID, orphan.RequestNo); err != nil || e.State != sale.ResultFail {
			t.Errorf("the orphan's result %+v %v, want FAIL", e, err)
		}
		judged := func(what string, rep Report) {
			t.Helper()
			var skus []int64
			for _, l := range rep.SKUs {
				skus = append(skus, l.SKUID)
			}
			if len(skus) != 1 || skus[0] != 802 {
				t.Errorf("%s reported SKUs %v, want [802]", what, skus)
			}
			if len(rep.Warnings) != 2 || !onceEach(strings.Join(rep.Warnings, "; ")) {
				t.Errorf("%s warnings %q, want sku 801's and sku 803's, one of them skipped", what, rep.Warnings)
			}
		}
		rep, err := rc.Pass(ctx, true)
		named("pass", err)
		judged("pass", rep)
		rep, err = rc.Run(ctx, false)
		named("full comparison", err)
		judged("full comparison", rep)
		for _, l := range rep.SKUs {
			if len(l.Drifts) != 0 {
				t.Errorf("sku %d drifts %+v after the sweep, want none", l.SKUID, l.Drifts)
			}
		}

		if err := hot.Start(); err != nil {
			t.Fatal(err)
		}
		pass := func(what string) Report {
			t.Helper()
			rep, err := rc.Pass(ctx, true)
			if err != nil || len(rep.Warnings) != 0 {
				t.Fatalf("%s: %v, warnings %q", what, err, rep.Warnings)
			}
			for _, l := range rep.SKUs {
				if l.Mode != ModeCounters {
					t.Errorf("%s: sku %d compared %s, want counters (the sale is on)", what, l.SKUID, l.Mode)
				}
			}
			return rep
		}
		rep = pass("the pass after the shard came back")
		if d, x := drifts(rep)["801/"+KindOrderWithoutClaim], repairs(rep)["801/"+KindOrderWithoutClaim]; d != 1 || x != 1 {
			t.Errorf("the pass after the shard came back: order_without_claim drift %d repaired %d on sku 801, want 1 and 1 (drifts %v)",
				d, x, drifts(rep))
		}
		if hs, err := r.stock.HoldersOf(ctx, r.act.ID, r.act.SKU(801), []int64{lost.UserID}, nil); err != nil || hs[0] != lost.RequestNo {
			t.Errorf("user 9's record on sku 801: %v %v, want %s restored", hs, err, lost.RequestNo)
		}
		rep = pass("the pass after that")
		if d := drifts(rep)["801/"+KindOrderWithoutClaim]; d != 0 {
			t.Errorf("the pass after that: order_without_claim %d on sku 801, want none (audited already)", d)
		}
	})
}

// TestADeadBucketDoesNotStopTheSweepOfTheOthers: SKU 701 is split into four
// buckets, bucket 0 on a hot shard that is down, the others on a second
// one. The sweep fails naming bucket 0, and still releases the orphan of
// bucket 1.
func TestADeadBucketDoesNotStopTheSweepOfTheOthers(t *testing.T) {
	runSharded(t, func(t *testing.T, r *rig, hot [2]*testenv.Redis, k *sale.SKU) {
		orphan := r.occupyIn(t, k, usersOf(k, 1, 500, 1)[0]) // never claimed, no message coming
		hot[0].Stop()
		rc, _ := r.reconciler(t, r.later)
		n, err := rc.Sweep(context.Background())
		if err == nil || !strings.Contains(err.Error(), "bucket 0") {
			t.Errorf("sweep: %v, want an error naming bucket 0", err)
		}
		if n != 1 {
			t.Errorf("sweep released %d, want bucket 1's orphan", n)
		}
		if e, err := r.res.Read(context.Background(), orphan.UserID, orphan.RequestNo); err != nil || e.State != sale.ResultFail {
			t.Errorf("the orphan's result %+v %v, want FAIL", e, err)
		}
	})
}
