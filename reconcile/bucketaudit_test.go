package reconcile

import (
	"context"
	"strconv"
	"testing"
	"time"

	"seckill/internal/testenv"
	"seckill/sale"
	"seckill/stock"
)

// TestBucketedSKUComparedAndRepairedTicketByTicket: the full comparison
// of a SKU in 4 buckets on two shards finds each per-ticket drift in the
// bucket that holds it and repairs it there, as for a SKU that is not
// split: bucket 1 lost the record of a live order (restored), bucket 2
// holds a claimed ticket whose message was consumed without an order
// (released, forced), bucket 3 an orphan (released), and bucket 0 counts
// a unit sold that no record holds (settled back to its stock) and misses
// a pending entry (reindexed). A second comparison finds nothing.
func TestBucketedSKUComparedAndRepairedTicketByTicket(t *testing.T) {
	runSharded(t, func(t *testing.T, r *rig, hot [2]*testenv.Redis, k *sale.SKU) {
		ctx := context.Background()
		redisOf := func(b int) *testenv.Redis { return hot[k.HotShards[b]] }
		orders := map[int][]sale.Message{}
		for b := 0; b < 4; b++ {
			for _, u := range usersOf(k, b, 1, 2) {
				orders[b] = append(orders[b], r.orderIn(t, &r.act, k, u))
			}
		}
		lostRec := orders[1][0]
		redisOf(1).Do(t, "HDEL", sale.KeysIn(r.act.ID, k.ID, 1).Users, strconv.FormatInt(lostRec.UserID, 10))
		stuck := r.occupyIn(t, k, usersOf(k, 2, 500, 1)[0])
		if ok, err := r.stock.Claim(ctx, &stuck); err != nil || !ok {
			t.Fatalf("claim: %v %v", ok, err)
		}
		orphan := r.occupyIn(t, k, usersOf(k, 3, 500, 1)[0])
		gone := r.occupyIn(t, k, usersOf(k, 0, 500, 1)[0]) // its record vanishes, its unit stays sold
		k0 := sale.KeysIn(r.act.ID, k.ID, 0)
		redisOf(0).Do(t, "HDEL", k0.Users, strconv.FormatInt(gone.UserID, 10))
		redisOf(0).Do(t, "ZREM", k0.Pending, stock.PendingMember(gone.UserID, gone.RequestNo))
		unindexed := r.occupyIn(t, k, usersOf(k, 0, 600, 1)[0])
		redisOf(0).Do(t, "ZREM", k0.Pending, stock.PendingMember(unindexed.UserID, unindexed.RequestNo))
		before := bucketLedgers(t, r, k)

		rc, _ := r.reconciler(t, r.later)
		rep, err := rc.Run(ctx, true)
		if err != nil {
			t.Fatal(err)
		}
		got := drifts(rep)
		for kind, want := range map[string]int64{KindOrderWithoutClaim: 1, KindClaimedWithoutOrder: 1, KindOrphan: 2,
			KindRedisRecords: 2} {
			if got["701/"+kind] != want {
				t.Errorf("drift %s = %d, want %d (all: %v)", kind, got["701/"+kind], want, got)
			}
		}
		line := lineOf(t, rep, 701)
		if line.Reindexed != 1 {
			t.Errorf("reindexed %d, want 1", line.Reindexed)
		}
		fixed := repairs(rep)
		for kind, want := range map[string]int64{KindOrderWithoutClaim: 1, KindClaimedWithoutOrder: 1, KindOrphan: 2,
			KindRedisRecords: 1} {
			if fixed["701/"+kind] != want {
				t.Errorf("repair %s = %d, want %d (all: %v)", kind, fixed["701/"+kind], want, fixed)
			}
		}
		// Each repair in its own bucket.
		if v := redisOf(1).Str(t, "HGET", sale.KeysIn(r.act.ID, k.ID, 1).Users, strconv.FormatInt(lostRec.UserID, 10)); v != lostRec.RequestNo {
			t.Errorf("bucket 1's record of %d: %q, want %s", lostRec.UserID, v, lostRec.RequestNo)
		}
		if n := redisOf(3).Int(t, "HEXISTS", sale.KeysIn(r.act.ID, k.ID, 3).Users, strconv.FormatInt(orphan.UserID, 10)); n != 0 {
			t.Errorf("bucket 3 still holds the orphan of user %d", orphan.UserID)
		}
		per := bucketLedgers(t, r, k)
		for b, want := range map[int]int64{0: before[0].Remaining + 2, 1: before[1].Remaining, 2: before[2].Remaining + 1,
			3: before[3].Remaining + 1} {
			if per[b].Remaining != want {
				t.Errorf("bucket %d remaining %d, want %d", b, per[b].Remaining, want)
			}
		}
		rep, err = rc.Run(ctx, false)
		if err != nil {
			t.Fatal(err)
		}
		if got := drifts(rep); len(got) != 0 {
			t.Errorf("drift after the repairs: %v", got)
		}
		checkBooks(t, r, k)
	})
}

// TestBucketedSKURetiresWithItsBuckets: past its retention an ended sale
// of a SKU in buckets is compared in full and then every bucket's keys go,
// its transfer record with them, on both shards.
func TestBucketedSKURetiresWithItsBuckets(t *testing.T) {
	runSharded(t, func(t *testing.T, r *rig, hot [2]*testenv.Redis, k *sale.SKU) {
		ctx := context.Background()
		for b := 0; b < 4; b++ {
			r.orderIn(t, &r.act, k, usersOf(k, b, 1, 1)[0])
		}
		if n, err := r.stock.Transfer(ctx, r.act.ID, k, 1, 0, 2); err != nil || n != 2 {
			t.Fatalf("transfer: %d %v", n, err)
		}
		r.exec(t, "UPDATE seckill_order SET status = 'PAID'")
		keep := time.Hour
		end := r.act.End
		rc := r.retiring(t, keep, end.Add(keep), end.Add(keep))
		rep, err := rc.Pass(ctx, false)
		if err != nil {
			t.Fatal(err)
		}
		if line := lineOf(t, rep, 701); line.Mode != ModeExpired || len(line.Drifts) != 0 {
			t.Fatalf("line %+v, want expired without drift", line)
		}
		for i, h := range hot {
			if n := h.Int(t, "DBSIZE"); n != 0 {
				keys, _ := h.Do(t, "KEYS", "*").AsStrSlice()
				t.Errorf("hot%d keeps %d keys after the retention: %v", i, n, keys)
			}
		}
	})
}

// TestBucketedCountersJudgeEachBucketsRecords: the periodic pass judges a
// bucketed SKU's sold counters against its records bucket by bucket, so a
// unit sold without a record in one bucket and a record sold does not
// count in another are two units of redis_records, not a sum of 0.
func TestBucketedCountersJudgeEachBucketsRecords(t *testing.T) {
	runSharded(t, func(t *testing.T, r *rig, hot [2]*testenv.Redis, k *sale.SKU) {
		ctx := context.Background()
		a := r.occupyIn(t, k, usersOf(k, 0, 1, 1)[0])
		hot[0].Do(t, "HDEL", sale.KeysIn(r.act.ID, k.ID, 0).Users, strconv.FormatInt(a.UserID, 10))
		hot[1].Do(t, "HSET", sale.KeysIn(r.act.ID, k.ID, 1).Users, "424242", "7-701.1-1")
		rc, _ := r.reconciler(t, time.Now())
		rep, err := rc.Pass(ctx, false)
		if err != nil {
			t.Fatal(err)
		}
		if got := drifts(rep)["701/"+KindRedisRecords]; got != 2 {
			t.Fatalf("redis_records %d, want 2: %v", got, drifts(rep))
		}
	})
}
