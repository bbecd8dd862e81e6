package reconcile

import (
	"context"
	"fmt"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"seckill/internal/testenv"
	"seckill/sale"
	"seckill/stock"
	"seckill/store"
)

// TestSweepCostDoesNotGrowWithTheCrowd: a sweep reads the pending journal, not
// the SKU's holders. Two sales alike but for the crowd — SKU 501 holding
// 1,000 claimed tickets in one, 1,000,000 in the other, each with the same
// three orphans and one young occupancy — are swept, and INFO commandstats
// counts the Redis commands each sweep ran: the same commands, the same
// number of times, and no scan of a whole per-SKU set. (SQLite only: the
// store is not what this measures, and the database side of a sweep is a
// lookup per candidate either way.)
func TestSweepCostDoesNotGrowWithTheCrowd(t *testing.T) {
	sweep := func(t *testing.T, crowd int) (testenv.Commands, int) {
		cfg := store.DefaultConfig()
		cfg.DSN = filepath.Join(t.TempDir(), "orders.db")
		r := newRig(t, cfg, "sqlite", cfg.DSN+"?_pragma=busy_timeout(5000)")
		ctx := context.Background()
		keys := sale.KeysFor(r.act.ID, 501)
		c := r.redis.Client(t)
		// The crowd: claimed records of users 10,000,001 on, written by a
		// script 10,000 at a time (one command per ticket would take
		// minutes; one script of 100,000 can outlast the client's read
		// timeout on a loaded machine).
		const fill = `for i = tonumber(ARGV[1]), tonumber(ARGV[2]) do
  local rn = 'c' .. i
  redis.call('HSET', KEYS[1], i, rn)
  redis.call('SADD', KEYS[2], rn)
end
return 0`
		for lo := 1; lo <= crowd; lo += 10_000 {
			hi := min(lo+10_000-1, crowd)
			err := c.Do(ctx, c.B().Eval().Script(fill).Numkeys(2).Key(keys.Users, keys.Claim).
				Arg(strconv.Itoa(10_000_000+lo), strconv.Itoa(10_000_000+hi)).Build()).Error()
			if err != nil {
				t.Fatal(err)
			}
		}
		if n := r.counts(t, 501); n.Holders != int64(crowd) || n.Claimed != int64(crowd) {
			t.Fatalf("crowd %+v, want %d claimed records", n, crowd)
		}
		for u := int64(1); u <= 3; u++ {
			r.occupy(t, 501, u) // orphans: never claimed, no message coming
		}
		r.order(t, 501, 4)
		young := r.occupy(t, 501, 5)
		// The reconciler's clock is an hour on; the young ticket is younger
		// than the grace by the index's clock (Redis TIME), as one taken
		// just now would be.
		r.redis.Do(t, "ZADD", keys.Pending, "XX", strconv.FormatInt(r.later.UnixMilli(), 10),
			stock.PendingMember(5, young.RequestNo))

		rc, _ := r.reconciler(t, r.later)
		before := testenv.CommandStats(t, c)
		n, err := rc.Sweep(ctx)
		if err != nil {
			t.Fatal(err)
		}
		cost := testenv.CommandStats(t, c).Since(before)
		if after := r.counts(t, 501); after.Holders != int64(crowd)+2 || after.Pending != 1 {
			t.Fatalf("after the sweep %+v, want the crowd, the order and the young ticket", after)
		}
		return cost, n
	}
	var costs [2]testenv.Commands
	crowds := []int{1_000, 1_000_000}
	if testing.Short() {
		crowds[1] = 50_000 // make check: still fifty times the first
	}
	for i, crowd := range crowds {
		t.Run(fmt.Sprint(crowd, " holders"), func(t *testing.T) {
			start := time.Now()
			cost, n := sweep(t, crowd)
			if n != 3 {
				t.Fatalf("released %d, want the 3 orphans", n)
			}
			for _, scan := range []string{"hscan", "sscan", "zscan", "hgetall", "smembers", "hlen", "scard"} {
				if cost[scan] != 0 {
					t.Errorf("the sweep ran %s %d times", scan, cost[scan])
				}
			}
			if cost["zrangebyscore"] == 0 {
				t.Errorf("the sweep never read the pending journal: %v", cost)
			}
			costs[i] = cost
			t.Logf("%d holders: %v (%v)", crowd, cost, time.Since(start).Round(time.Millisecond))
		})
	}
	if fmt.Sprint(costs[0]) != fmt.Sprint(costs[1]) {
		t.Fatalf("a sweep over 1,000,000 holders ran %v, over 1,000 %v: want the same commands", costs[1], costs[0])
	}
}

// TestSweepFindsATicketFromBeforeTheIndexOnceReconciled: a ticket taken by
// a binary older than the pending journal has a record but no entry. The
// sweeper, which reads only the journal, leaves it; the reconciler's full
// comparison reports it as an orphan and puts it in the journal (whether
// or not it repairs); the next sweep releases it.
func TestSweepFindsATicketFromBeforeTheIndexOnceReconciled(t *testing.T) {
	runTest(t, func(t *testing.T, r *rig) {
		ctx := context.Background()
		legacy := r.occupy(t, 501, 1)
		r.order(t, 501, 2) // a claimed one is not added back
		r.redis.Do(t, "ZREM", sale.KeysFor(r.act.ID, 501).Pending, stock.PendingMember(1, legacy.RequestNo))
		rc, _ := r.reconciler(t, r.later)
		if n, err := rc.Sweep(ctx); err != nil || n != 0 {
			t.Fatalf("sweep before the reconciler: %d %v, want nothing found", n, err)
		}
		rep, err := rc.Run(ctx, false)
		if err != nil {
			t.Fatal(err)
		}
		if d := drifts(rep); d["501/"+KindOrphan] != 1 {
			t.Fatalf("drift %v, want the legacy orphan reported", d)
		}
		if rep.SKUs[0].Reindexed != 1 || rep.SKUs[0].Redis.Pending != 1 {
			t.Fatalf("report %+v, want the one unclaimed record's entry added", rep.SKUs[0])
		}
		if n := r.counts(t, 501); n.Pending != 1 || n.Holders != 2 {
			t.Fatalf("after the run %+v: indexed, nothing released", n)
		}
		if n, err := rc.Sweep(ctx); err != nil || n != 1 {
			t.Fatalf("sweep after the reconciler: %d %v, want the legacy orphan released", n, err)
		}
		if rn, _, _ := r.stock.Holder(ctx, r.act.ID, 501, 1); rn != "" {
			t.Fatalf("user 1 still holds %s", rn)
		}
		if again, err := rc.Run(ctx, false); err != nil || again.SKUs[0].Reindexed != 0 || again.Drifts != 0 {
			t.Fatalf("second run: %v %v, reindexed %d", drifts(again), err, again.SKUs[0].Reindexed)
		}
	})
}

// TestSweepEndsADeadLetteredTicketAndSaysWhy: a ticket whose message was
// dead-lettered (its history has the consumer's DEAD_LETTERED step) is
// released by the sweep, FAIL RELEASED, and its story names the letter.
func TestSweepEndsADeadLetteredTicketAndSaysWhy(t *testing.T) {
	runTest(t, func(t *testing.T, r *rig) {
		ctx := context.Background()
		m := r.occupy(t, 501, 1)
		if _, err := r.st.SaveBatch(ctx, nil, store.DeadLettered([]store.DeadLetter{{Topic: sale.OrdersTopic,
			Offset: 3, Reason: "order message signature invalid", RequestNo: m.RequestNo}})); err != nil {
			t.Fatal(err)
		}
		rc, _ := r.reconciler(t, r.later)
		if n, err := rc.Sweep(ctx); err != nil || n != 1 {
			t.Fatalf("sweep: %d %v, want the dead-lettered ticket released", n, err)
		}
		if e, err := r.res.Read(ctx, m.UserID, m.RequestNo); err != nil || e.State != sale.ResultFail || e.Code != sale.FailReleased {
			t.Errorf("result %+v %v, want FAIL RELEASED", e, err)
		}
		e, err := r.st.RequestLog(ctx, m.RequestNo)
		if err != nil || e.Status != store.StatusFailed || !strings.Contains(e.Remark, "dead-lettered (order message signature invalid)") {
			t.Errorf("request log %+v %v", e, err)
		}
		if n := r.counts(t, 501); n.Holders != 0 || n.Pending != 0 {
			t.Errorf("after the sweep %+v", n)
		}
	})
}
