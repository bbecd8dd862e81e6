package reconcile

import (
	"context"
	"database/sql"
	"math/rand/v2"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/rueidis"

	"seckill/internal/shard"
	"seckill/internal/testenv"
	"seckill/lua"
	"seckill/sale"
	"seckill/stock"
	"seckill/stock/stocktest"
	"seckill/store"
)

// runSharded runs fn on each store with a rig whose Stock has a default
// Redis and two hot shards, each a redis-server of its own, selling
// activity 7: SKU 701 of 40 units (one per buyer) in 4 buckets pinned with
// hotShards [0,1,1,1], so bucket 0 is alone on hot0 and buckets 1..3 share
// hot1.
func runSharded(t *testing.T, fn func(t *testing.T, r *rig, hot [2]*testenv.Redis, k *sale.SKU)) {
	t.Helper()
	runShardedOf(t, 40, fn)
}

// runShardedOf is runSharded with a SKU of units.
func runShardedOf(t *testing.T, units int64, fn func(t *testing.T, r *rig, hot [2]*testenv.Redis, k *sale.SKU)) {
	t.Helper()
	runShardedWith(t, units, nil, fn)
}

// runShardedWith is runShardedOf with the activity changed by adjust
// (when not nil) before it is sold.
func runShardedWith(t *testing.T, units int64, adjust func(*sale.Activity), fn func(t *testing.T, r *rig, hot [2]*testenv.Redis, k *sale.SKU)) {
	t.Helper()
	stocktest.EachStore(t, func(t *testing.T, cfg store.Config) {
		dsn := cfg.DSN
		if cfg.Driver == "sqlite" {
			dsn += "?_pragma=busy_timeout(5000)"
		}
		hot := [2]*testenv.Redis{testenv.StartRedis(t), testenv.StartRedis(t)}
		r, l := newShardedRig(t, cfg, dsn, hot[:]...)
		now := time.Now()
		r.act = sale.Activity{ID: 7, Start: now.Add(-time.Hour), End: now.Add(2 * time.Hour), State: sale.StateOnline,
			SKUs: []sale.SKU{{ID: 701, Stock: units, Price: 100, LimitPerUser: 1, Hot: true, Buckets: 4, HotShards: []int{0, 1, 1, 1}}}}
		if adjust != nil {
			adjust(&r.act)
		}
		l.Sell(t, r.act)
		fn(t, r, hot, &r.act.SKUs[0])
	})
}

// newShardedRig is a rig without an activity over the orders database cfg
// names (dsn for raw access), with hot as its hot shards, in order; the
// caller sells its activity on the ledger.
func newShardedRig(t *testing.T, cfg store.Config, dsn string, hot ...*testenv.Redis) (*rig, *stocktest.Ledger) {
	t.Helper()
	l := stocktest.NewLedger(t, cfg, stocktest.Options{Shards: func(c *shard.Config) {
		for _, h := range hot {
			c.Hot = append(c.Hot, shard.Redis{Addrs: []string{h.Addr}})
		}
	}})
	r := &rig{redis: l.Redis, stock: l.Stock, res: l.Results, st: l.Store, ids: sale.NewRequestNos(7), later: time.Now().Add(time.Hour)}
	var err error
	if r.db, err = sql.Open(cfg.Driver, dsn); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { r.db.Close() })
	return r, l
}

// usersOf returns n user ids from `from` up whose bucket of k is b.
func usersOf(k *sale.SKU, b int, from int64, n int) []int64 {
	var out []int64
	for u := from; len(out) < n; u++ {
		if k.BucketOf(u) == b {
			out = append(out, u)
		}
	}
	return out
}

// watchTwice runs the watcher's two checks in a row and answers what the
// second rebuilt.
func watchTwice(t *testing.T, rc *Reconciler) int {
	t.Helper()
	ctx := context.Background()
	if n, err := rc.Watch(ctx); err != nil || n != 0 {
		t.Fatalf("first check: %d rebuilt, %v; want none (two checks in a row)", n, err)
	}
	n, err := rc.Watch(ctx)
	if err != nil {
		t.Fatalf("second check: %v", err)
	}
	return n
}

// bucketLedgers reads every bucket's counters.
func bucketLedgers(t *testing.T, r *rig, k *sale.SKU) []stock.Ledger {
	t.Helper()
	per, err := r.stock.BucketLedgers(context.Background(), r.act.ID, k)
	if err != nil {
		t.Fatal(err)
	}
	return per
}

// checkBooks fails unless every bucket's books and the SKU's balance:
// initial + in − out = remaining + sold per bucket, Σ initial = 40 =
// Σ remaining + in flight + Σ sold, and the full reconciliation finds no
// drift.
func checkBooks(t *testing.T, r *rig, k *sale.SKU) stock.Ledger {
	return checkBooksOf(t, r, k, 40)
}

// checkBooksOf is checkBooks for a SKU of initial units.
func checkBooksOf(t *testing.T, r *rig, k *sale.SKU, initial int64) stock.Ledger {
	t.Helper()
	ctx := context.Background()
	var sum stock.Ledger
	for b, l := range bucketLedgers(t, r, k) {
		if !l.Present || l.Initial+l.In-l.Out != l.Remaining+l.Sold {
			t.Errorf("bucket %d: %+v: its books do not balance", b, l)
		}
		sum.Initial, sum.Remaining, sum.Sold = sum.Initial+l.Initial, sum.Remaining+l.Remaining, sum.Sold+l.Sold
		sum.InFlight += l.Out - l.In
	}
	if sum.Initial != initial || sum.Remaining+sum.InFlight+sum.Sold != initial {
		t.Errorf("the SKU: %+v, want initial %d = remaining + in flight + sold", sum.Counts, initial)
	}
	rc, _ := r.reconciler(t, time.Now())
	rep, err := rc.Run(ctx, false)
	if err != nil {
		t.Fatal(err)
	}
	if got := drifts(rep); len(got) != 0 {
		t.Errorf("drift after the rebuild: %v", got)
	}
	return sum
}

// sellOut sells every unit left to fresh buyers (from user 10000 up) and
// orders every ticket given, as the consumer would: a ticket whose record
// Redis lost fails its claim and gets no order. It answers the buyers
// served per bucket.
func sellOut(t *testing.T, r *rig, k *sale.SKU, tickets []sale.Message) map[int]int {
	t.Helper()
	ctx := context.Background()
	served := map[int]int{}
	for u := int64(10000); ; u++ {
		b := k.BucketOf(u)
		rn := r.ids.NextIn(r.act.ID, k.ID, b)
		res, err := r.stock.Occupy(ctx, &r.act, k, u, rn, 1)
		if err != nil {
			t.Fatalf("occupy user %d: %v", u, err)
		}
		if res.Code == stock.CodeSoldOut {
			break
		}
		if res.Code == stock.CodeRebalancing {
			continue // its bucket pulls units; the next buyer finds them
		}
		if res.Code != stock.CodeOK {
			t.Fatalf("occupy user %d: %+v", u, res)
		}
		served[b]++
		tickets = append(tickets, sale.Message{RequestNo: rn, ActivityID: r.act.ID, SKUID: k.ID, UserID: u, Quantity: 1,
			UnitPrice: 100, AcceptedAt: time.Now().UnixMilli()})
		if u > 20000 {
			t.Fatal("the sale did not end")
		}
	}
	var held []sale.Message
	for i := range tickets {
		ok, err := r.stock.Claim(ctx, &tickets[i])
		if err != nil {
			t.Fatal(err)
		}
		if ok {
			held = append(held, tickets[i])
		}
	}
	out, err := r.st.SaveBatch(ctx, held)
	if err != nil {
		t.Fatal(err)
	}
	for i, o := range out {
		if o.Kind != store.Created {
			t.Fatalf("order of %s: %+v (the database refused a unit Redis sold)", held[i].RequestNo, o)
		}
	}
	return served
}

// liveUnits counts the database's units of live orders of k.
func liveUnits(t *testing.T, r *rig, k *sale.SKU) int64 {
	t.Helper()
	_, refs, err := r.st.Ledger(context.Background(), r.act.ID, k.ID)
	if err != nil {
		t.Fatal(err)
	}
	var n int64
	for _, o := range refs {
		if o.Live() {
			n += o.Quantity
		}
	}
	return n
}

// TestWatchRebuildsALostBucketMidSale: bucket 0's shard restarts empty
// while the sale goes on in buckets 1..3 (orders, occupancies, a transfer
// that landed in bucket 0 before the loss). Its buyers are busy until the
// watcher's second check rebuilds it from the database and the surviving
// buckets — its orders as claimed records, the units no other bucket holds
// as its stock — then they buy again; the books balance with no drift, and
// the sale ends with exactly 40 units in orders: no unit created, none
// lost.
func TestWatchRebuildsALostBucketMidSale(t *testing.T) {
	runSharded(t, func(t *testing.T, r *rig, hot [2]*testenv.Redis, k *sale.SKU) {
		ctx := context.Background()
		for b := 0; b < 4; b++ {
			for _, u := range usersOf(k, b, 1, 3) {
				r.orderIn(t, &r.act, k, u)
			}
		}
		// Bucket 1 gives bucket 0 two units; buckets 0 and 2 each hold an
		// occupancy whose order is not made yet.
		if n, err := r.stock.Transfer(ctx, r.act.ID, k, 1, 0, 2); err != nil || n != 2 {
			t.Fatalf("transfer: %d %v", n, err)
		}
		lostTicket := r.occupyIn(t, k, usersOf(k, 0, 500, 1)[0])
		heldTicket := r.occupyIn(t, k, usersOf(k, 2, 500, 1)[0])
		before := bucketLedgers(t, r, k)

		hot[0].Do(t, "FLUSHALL") // bucket 0's shard restarts empty
		u0 := usersOf(k, 0, 700, 1)[0]
		if res, err := r.stock.Occupy(ctx, &r.act, k, u0, r.ids.NextIn(r.act.ID, k.ID, 0), 1); err == nil && res.Code == stock.CodeOK {
			t.Fatalf("a buyer of the lost bucket was served: %+v", res)
		}
		// The other buckets sell on meanwhile.
		heldToo := r.occupyIn(t, k, usersOf(k, 3, 500, 1)[0])
		before[3].Remaining, before[3].Sold, before[3].Holders, before[3].Pending =
			before[3].Remaining-1, before[3].Sold+1, before[3].Holders+1, before[3].Pending+1

		rc, reg := r.reconciler(t, time.Now())
		rep, err := rc.Pass(ctx, false)
		if err != nil {
			t.Fatal(err)
		}
		if d := lineOf(t, rep, 701).Drifts; len(d) != 1 || d[0].Kind != KindRedisMissing || !strings.Contains(d[0].Detail, "buckets [0]") {
			t.Errorf("pass with bucket 0 lost: %+v, want redis_missing naming bucket 0", d)
		}
		if n := watchTwice(t, rc); n != 1 {
			t.Fatalf("second check rebuilt %d SKUs, want 1", n)
		}
		if v, _ := testenv.MetricPresent(t, reg, "seckill_reconcile_rebuilds_total", nil); v != 1 {
			t.Errorf("seckill_reconcile_rebuilds_total = %v, want 1", v)
		}
		// By hand: the survivors hold their initial 30 (10 each, by their
		// books), bucket 1 sent bucket 0 two units, so bucket 0 holds
		// 40 − 30 + 2 = 12: its 3 orders (claimed records) and 9 on sale;
		// its occupancy went with the shard.
		per := bucketLedgers(t, r, k)
		want := stock.Ledger{Present: true, Counts: stock.Counts{Initial: 10, Remaining: 9, Sold: 3, Holders: 3, Claimed: 3, In: 2}}
		if per[0] != want {
			t.Errorf("bucket 0 rebuilt as %+v, want %+v", per[0], want)
		}
		for b := 1; b < 4; b++ {
			if per[b] != before[b] {
				t.Errorf("bucket %d changed by the rebuild: %+v, was %+v", b, per[b], before[b])
			}
		}
		checkBooks(t, r, k)
		if n, err := rc.Watch(ctx); err != nil || n != 0 {
			t.Fatalf("a watch after the rebuild: %d %v", n, err)
		}

		if ok, err := r.stock.Claim(ctx, &lostTicket); err != nil || ok {
			t.Fatalf("claim of the occupancy the shard lost: %v %v, want not held", ok, err)
		}
		served := sellOut(t, r, k, []sale.Message{heldTicket, heldToo})
		if served[0] == 0 {
			t.Errorf("no buyer of the rebuilt bucket was served: %v", served)
		}
		if n := liveUnits(t, r, k); n != 40 {
			t.Fatalf("%d units in orders after the sale, want exactly 40", n)
		}
		if sum := checkBooks(t, r, k); sum.Remaining != 0 || sum.InFlight != 0 {
			t.Fatalf("after the sale: %+v", sum.Counts)
		}
	})
}

// TestWatchRebuildsWhileTheSurvivorsSell: 8 buyers buy 400 units in 4
// buckets while random transfers move units between them; once 100 are
// ordered bucket 0's shard restarts empty and the watcher (every 300 ms)
// rebuilds it while the other buckets sell and rebalance on. Every ticket
// is claimed and ordered as the consumer would. The sale ends with exactly
// 400 units in orders (no unit created, none lost), one order per buyer,
// buyers of the rebuilt bucket served again, and no drift.
func TestWatchRebuildsWhileTheSurvivorsSell(t *testing.T) {
	runShardedOf(t, 400, func(t *testing.T, r *rig, hot [2]*testenv.Redis, k *sale.SKU) {
		ctx := context.Background()
		rc, _ := r.reconciler(t, time.Now())
		var (
			mu                 sync.Mutex
			ordered, refused   int
			servedAfter        int
			rebuilt, soldOut   atomic.Bool
			next               atomic.Int64
			buyers, background sync.WaitGroup
		)
		stop := make(chan struct{})
		background.Go(func() { // random transfers, as rebalancing does
			rng := rand.New(rand.NewPCG(3, 4))
			for {
				select {
				case <-stop:
					return
				case <-time.After(2 * time.Millisecond):
				}
				if src, dst := rng.IntN(4), rng.IntN(4); src != dst {
					_, _ = r.stock.Transfer(ctx, r.act.ID, k, src, dst, int64(1+rng.IntN(5))) // refused toward the lost bucket
				}
			}
		})
		background.Go(func() { // the fault, then the watcher's period
			for {
				mu.Lock()
				n := ordered
				mu.Unlock()
				if n >= 100 {
					break
				}
				time.Sleep(time.Millisecond)
			}
			hot[0].Do(t, "FLUSHALL")
			for !rebuilt.Load() {
				time.Sleep(300 * time.Millisecond)
				n, err := rc.Watch(ctx)
				if err != nil {
					t.Errorf("watch: %v", err)
					return
				}
				rebuilt.Store(n == 1)
			}
		})
		for range 8 {
			buyers.Go(func() {
				for !soldOut.Load() {
					u := next.Add(1)
					if u > 20000 {
						t.Error("the sale did not end within 20,000 buyers")
						return
					}
					b := k.BucketOf(u)
					m := sale.Message{RequestNo: r.ids.NextIn(r.act.ID, k.ID, b), ActivityID: r.act.ID, SKUID: k.ID,
						UserID: u, Quantity: 1, UnitPrice: 100, AcceptedAt: time.Now().UnixMilli()}
					after := rebuilt.Load()
					res, err := r.stock.Occupy(ctx, &r.act, k, u, m.RequestNo, 1)
					switch {
					case err != nil:
						time.Sleep(2 * time.Millisecond) // its bucket is lost: busy
						continue
					case res.Code == stock.CodeSoldOut:
						soldOut.Store(true)
						continue
					case res.Code != stock.CodeOK:
						continue // REBALANCING: a transfer serves the next one
					}
					held, err := r.stock.Claim(ctx, &m)
					if err != nil || !held {
						continue // the shard took the occupancy: FAIL RELEASED, no order
					}
					out, err := r.st.SaveBatch(ctx, []sale.Message{m})
					if err != nil {
						t.Errorf("save: %v", err)
						return
					}
					mu.Lock()
					if out[0].Kind == store.Created {
						ordered++
						if after && b == 0 {
							servedAfter++
						}
					} else {
						refused++ // the snapshot refused a unit: released, as the consumer does
						_, _ = r.stock.Release(ctx, &m, true)
					}
					mu.Unlock()
				}
			})
		}
		buyers.Wait()
		close(stop)
		background.Wait()
		if !rebuilt.Load() {
			t.Fatal("the sale ended before the lost bucket was rebuilt")
		}
		if _, err := r.stock.FinishTransfers(ctx, r.act.ID, k); err != nil {
			t.Fatal(err)
		}
		if n := liveUnits(t, r, k); n != 400 || n != int64(ordered) {
			t.Fatalf("%d units in orders (%d ordered, %d refused by the snapshot), want exactly 400", n, ordered, refused)
		}
		if servedAfter == 0 {
			t.Error("no buyer of the rebuilt bucket was served after the rebuild")
		}
		if sum := checkBooksOf(t, r, k, 400); sum.Remaining != 0 || sum.InFlight != 0 {
			t.Errorf("after the sale: %+v", sum.Counts)
		}
		t.Logf("%d ordered, %d refused by the snapshot, %d of the rebuilt bucket after the rebuild", ordered, refused, servedAfter)
	})
}

// TestWatchRebuildsEveryLostBucket: both shards restart empty, so every
// bucket is lost: the rebuild is the SKU's rebuild from the database —
// each bucket's orders as its sold units and claimed records, the 28 units
// no order holds spread 7 a bucket — and the sale ends with exactly 40
// units in orders.
func TestWatchRebuildsEveryLostBucket(t *testing.T) {
	runSharded(t, func(t *testing.T, r *rig, hot [2]*testenv.Redis, k *sale.SKU) {
		ctx := context.Background()
		for b := 0; b < 4; b++ {
			for _, u := range usersOf(k, b, 1, 3) {
				r.orderIn(t, &r.act, k, u)
			}
		}
		if n, err := r.stock.Transfer(ctx, r.act.ID, k, 1, 0, 2); err != nil || n != 2 {
			t.Fatalf("transfer: %d %v", n, err)
		}
		lost := r.occupyIn(t, k, usersOf(k, 2, 500, 1)[0])
		hot[0].Do(t, "FLUSHALL")
		hot[1].Do(t, "FLUSHALL")
		rc, _ := r.reconciler(t, time.Now())
		if n := watchTwice(t, rc); n != 1 {
			t.Fatalf("second check rebuilt %d SKUs, want 1", n)
		}
		for b, l := range bucketLedgers(t, r, k) {
			want := stock.Ledger{Present: true, Counts: stock.Counts{Initial: 10, Remaining: 7, Sold: 3, Holders: 3, Claimed: 3}}
			if l != want {
				t.Errorf("bucket %d rebuilt as %+v, want %+v", b, l, want)
			}
		}
		checkBooks(t, r, k)
		if ok, err := r.stock.Claim(ctx, &lost); err != nil || ok {
			t.Fatalf("claim of a lost occupancy: %v %v, want not held", ok, err)
		}
		sellOut(t, r, k, nil)
		if n := liveUnits(t, r, k); n != 40 {
			t.Fatalf("%d units in orders after the sale, want exactly 40", n)
		}
		checkBooks(t, r, k)
	})
}

// TestWatchRebuildKeepsTransfersAcrossTheLostShard: transfers of every
// kind touch bucket 0 when its shard is lost — debited toward it and not
// credited (t1), debited from it and not credited (t2: its record went
// with it), credited to it but not settled on the source (t3), and
// finished both ways. Worked by hand, the rebuilt bucket holds what no
// survivor holds: t1 and t3 land in it once each, t2's units are its own
// again, and no transfer is left in flight.
func TestWatchRebuildKeepsTransfersAcrossTheLostShard(t *testing.T) {
	runSharded(t, func(t *testing.T, r *rig, hot [2]*testenv.Redis, k *sale.SKU) {
		ctx := context.Background()
		for _, u := range usersOf(k, 0, 1, 2) {
			r.orderIn(t, &r.act, k, u)
		}
		for _, x := range []struct {
			src, dst int
			units    int64
		}{{0, 1, 1}, {3, 0, 4}} {
			if n, err := r.stock.Transfer(ctx, r.act.ID, k, x.src, x.dst, x.units); err != nil || n != x.units {
				t.Fatalf("transfer %d→%d: %d %v", x.src, x.dst, n, err)
			}
		}
		debitOnly(t, r, hot, k, 2, 0, "t1", 3)
		debitOnly(t, r, hot, k, 0, 3, "t2", 2)
		debitOnly(t, r, hot, k, 2, 0, "t3", 1)
		d := sale.KeysIn(r.act.ID, k.ID, 0)
		if err := rueidis.NewLuaScript(lua.TransferCredit).Exec(ctx, hot[0].Client(t),
			[]string{d.Stock, sale.TransfersKey(r.act.ID, k.ID, 0), d.Meta}, []string{"t3", "1", "2"}).Error(); err != nil {
			t.Fatal(err)
		}
		hot[0].Do(t, "FLUSHALL")
		rc, _ := r.reconciler(t, time.Now())
		if n := watchTwice(t, rc); n != 1 {
			t.Fatalf("second check rebuilt %d SKUs, want 1", n)
		}
		// Survivors: initial 30; toward bucket 0 they debited 3+1 (bucket
		// 2, both still in flight) and 4 (bucket 3, landed); bucket 1 got
		// 1 from it. So bucket 0 is rebuilt with in 4, out 1: 10 + 4 − 1
		// = 13 units, 2 in orders, 11 on sale; then t1 and t3 land: in 8,
		// 15 on sale.
		per := bucketLedgers(t, r, k)
		want := stock.Ledger{Present: true, Counts: stock.Counts{Initial: 10, Remaining: 15, Sold: 2, Holders: 2, Claimed: 2, In: 8, Out: 1}}
		if per[0] != want {
			t.Errorf("bucket 0 rebuilt as %+v, want %+v", per[0], want)
		}
		if sum := checkBooks(t, r, k); sum.InFlight != 0 {
			t.Errorf("%d units still in flight after the rebuild", sum.InFlight)
		}
		// The rebuilt bucket mirrors its survivors' records: a later loss
		// of bucket 2 finds in bucket 0 the 4 units it credited from it.
		v, err := hot[0].Do(t, "HGET", sale.TransfersKey(r.act.ID, k.ID, 0), "from:2").AsInt64()
		if err != nil || v != 4 {
			t.Errorf("bucket 0 from:2 = %d (%v), want 4", v, err)
		}
		sellOut(t, r, k, nil)
		if n := liveUnits(t, r, k); n != 40 {
			t.Fatalf("%d units in orders after the sale, want exactly 40", n)
		}
	})
}

// TestRestockWhileABucketIsLost: a restock of 8 units while bucket 0's
// shard is empty raises the database first, gives buckets 1..3 their 2
// each and writes nothing to bucket 0 (a bare stock key or an
// initial-only meta would read as present and stop the rebuild); the
// rebuild gives bucket 0 its share, so the SKU sells exactly 48.
func TestRestockWhileABucketIsLost(t *testing.T) {
	runSharded(t, func(t *testing.T, r *rig, hot [2]*testenv.Redis, k *sale.SKU) {
		ctx := context.Background()
		for _, u := range usersOf(k, 0, 1, 2) {
			r.orderIn(t, &r.act, k, u)
		}
		hot[0].Do(t, "FLUSHALL")
		if err := r.st.Restock(ctx, r.act.ID, k.ID, 8); err != nil {
			t.Fatal(err)
		}
		if _, _, err := r.stock.Restock(ctx, r.act.ID, k.ID, 8); err != nil {
			t.Fatalf("restock with a lost bucket: %v", err)
		}
		if n := hot[0].Int(t, "DBSIZE"); n != 0 {
			t.Fatalf("the restock wrote %d keys into the lost bucket's shard", n)
		}
		rc, _ := r.reconciler(t, time.Now())
		if n := watchTwice(t, rc); n != 1 {
			t.Fatalf("second check rebuilt %d SKUs, want 1", n)
		}
		per := bucketLedgers(t, r, k)
		want := stock.Ledger{Present: true, Counts: stock.Counts{Initial: 12, Remaining: 10, Sold: 2, Holders: 2, Claimed: 2}}
		if per[0] != want {
			t.Errorf("bucket 0 rebuilt as %+v, want %+v", per[0], want)
		}
		checkBooksOf(t, r, k, 48)
		sellOut(t, r, k, nil)
		if n := liveUnits(t, r, k); n != 48 {
			t.Fatalf("%d units in orders after the sale, want exactly 48", n)
		}
	})
}

// TestWatchRebuildKeepsALostBucketsCloses: on an activity that bars a
// buyer after a close, an order of bucket 0 closed unpaid before its shard
// was lost is its close record again after the rebuild (the buyer is
// refused, naming the closed ticket), its unit on sale for the others.
func TestWatchRebuildKeepsALostBucketsCloses(t *testing.T) {
	no := false
	runShardedWith(t, 40, func(a *sale.Activity) { a.RebuyAfterClose = &no }, func(t *testing.T, r *rig, hot [2]*testenv.Redis, k *sale.SKU) {
		ctx := context.Background()
		us := usersOf(k, 0, 1, 2)
		m := r.orderIn(t, &r.act, k, us[0])
		r.orderIn(t, &r.act, k, us[1])
		if _, closed, err := r.st.CloseOrder(ctx, sale.OrderNo(m.RequestNo), time.Now().Add(time.Minute)); err != nil || !closed {
			t.Fatalf("close: %v %v", closed, err)
		}
		if out, err := r.stock.ReleaseClosed(ctx, &m); err != nil || out != stock.Released {
			t.Fatalf("release closed: %v %v", out, err)
		}
		hot[0].Do(t, "FLUSHALL")
		rc, _ := r.reconciler(t, time.Now())
		if n := watchTwice(t, rc); n != 1 {
			t.Fatalf("second check rebuilt %d SKUs, want 1", n)
		}
		if v := hot[0].Str(t, "HGET", sale.KeysIn(r.act.ID, k.ID, 0).Closed, strconv.FormatInt(m.UserID, 10)); v != m.RequestNo {
			t.Fatalf("bucket 0's close record of user %d: %q, want %s", m.UserID, v, m.RequestNo)
		}
		res, err := r.stock.Occupy(ctx, &r.act, k, m.UserID, r.ids.NextIn(r.act.ID, k.ID, 0), 1)
		if err != nil || res.Code != stock.CodeDuplicate {
			t.Fatalf("the closed buyer after the rebuild: %+v %v, want DUPLICATE", res, err)
		}
		per := bucketLedgers(t, r, k)
		if per[0].Sold != 1 || per[0].Remaining != 9 {
			t.Errorf("bucket 0 rebuilt as %+v, want 1 sold (the live order) and 9 on sale", per[0])
		}
		checkBooks(t, r, k)
	})
}

// occupyIn occupies one unit of k for user under a ticket of its bucket.
func (r *rig) occupyIn(t *testing.T, k *sale.SKU, user int64) sale.Message {
	t.Helper()
	rn := r.ids.NextIn(r.act.ID, k.ID, k.BucketOf(user))
	res, err := r.stock.Occupy(context.Background(), &r.act, k, user, rn, 1)
	if err != nil || res.Code != stock.CodeOK {
		t.Fatalf("occupy user %d: %+v %v", user, res, err)
	}
	return sale.Message{RequestNo: rn, ActivityID: r.act.ID, SKUID: k.ID, UserID: user, Quantity: 1, UnitPrice: 100,
		AcceptedAt: time.Now().UnixMilli()}
}

// debitOnly runs the first step of a transfer from bucket src toward dst
// and stops there, as a crash between the steps would.
func debitOnly(t *testing.T, r *rig, hot [2]*testenv.Redis, k *sale.SKU, src, dst int, id string, units int64) {
	t.Helper()
	c := hot[k.HotShards[src%len(k.HotShards)]].Client(t)
	n, err := rueidis.NewLuaScript(lua.TransferDebit).Exec(context.Background(), c,
		[]string{sale.KeysIn(r.act.ID, k.ID, src).Stock, sale.TransfersKey(r.act.ID, k.ID, src)},
		[]string{id, strconv.FormatInt(units, 10), strconv.Itoa(dst)}).AsInt64()
	if err != nil || n != units {
		t.Fatalf("debit %s of bucket %d: %d %v", id, src, n, err)
	}
}
