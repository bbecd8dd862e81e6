package stock

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"seckill/catalog"
	"seckill/internal/shard"
	"seckill/internal/testenv"
	"seckill/lua"
	"seckill/sale"
	"seckill/stock/results"
)

// bucketRig is a Stock over a default Redis and two hot shards, recording
// every event it publishes.
type bucketRig struct {
	def  *testenv.Redis
	hot  [2]*testenv.Redis
	st   *Stock
	cat  *catalog.Catalog
	mu   sync.Mutex
	evts []sale.Event
	// onSoldOut, if set, is called (in the publishing goroutine) for each
	// sold-out event.
	onSoldOut func()
}

func newBucketRig(t *testing.T, opts ...testenv.RedisOption) *bucketRig {
	t.Helper()
	r := &bucketRig{def: testenv.StartRedis(t)}
	cfg := shard.DefaultConfig()
	cfg.Default.Addrs = []string{r.def.Addr}
	for i := range r.hot {
		r.hot[i] = testenv.StartRedis(t, opts...)
		cfg.Hot = append(cfg.Hot, shard.Redis{Addrs: []string{r.hot[i].Addr}})
	}
	set, err := shard.Open(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(set.Close)
	r.cat = catalog.New(set.Default)
	r.st = New(set, r.cat, WithEventHook(func(e sale.Event) {
		r.mu.Lock()
		r.evts = append(r.evts, e)
		f := r.onSoldOut
		r.mu.Unlock()
		if e.Kind == sale.EventSoldOut && f != nil {
			f()
		}
	}))
	return r
}

func (r *bucketRig) soldOutEvents() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	n := 0
	for _, e := range r.evts {
		if e.Kind == sale.EventSoldOut {
			n++
		}
	}
	return n
}

// bucketed is activity 1 with one hot SKU of stock units in n buckets.
func (r *bucketRig) bucketed(t *testing.T, units int64, n int, hotShards ...int) (*sale.Activity, *sale.SKU) {
	t.Helper()
	a := activity(1, 5001, units, true)
	a.SKUs[0].Buckets, a.SKUs[0].HotShards = n, hotShards
	if err := r.st.Preheat(context.Background(), a); err != nil {
		t.Fatalf("preheat: %v", err)
	}
	pa, k, ok := r.cat.Lookup(1, 5001)
	if !ok {
		t.Fatal("catalog lost the activity")
	}
	return pa, k
}

// usersIn returns n user ids (from 1 up) whose bucket of k is b.
func usersIn(k *sale.SKU, b, n int) []int64 {
	var out []int64
	for u := int64(1); len(out) < n; u++ {
		if k.BucketOf(u) == b {
			out = append(out, u)
		}
	}
	return out
}

// bucketStock reads bucket b's stock key.
func (r *bucketRig) bucketStock(t *testing.T, k *sale.SKU, b int) int64 {
	t.Helper()
	c := r.st.bucketClient(1, k, b)
	n, err := c.Do(context.Background(), c.B().Get().Key(sale.KeysIn(1, k.ID, b).Stock).Build()).AsInt64()
	if err != nil {
		t.Fatalf("bucket %d stock: %v", b, err)
	}
	return n
}

// TestBucketsAgainstHandComputedOccupiesAndTransfers walks one SKU of 10
// units in two buckets (5 and 5) through occupies and transfers whose every
// answer and every bucket's stock were worked out by hand from the rules
// (DESIGN §5, "Buckets"): a buyer is judged in its bucket; a remaining is
// the bucket's × 2 until a bucket runs dry, then the SKU's total; a dry
// bucket pulls half of the fullest (at least what it needs) and serves the
// buyer in the same call; the SKU is sold out only when both are empty.
func TestBucketsAgainstHandComputedOccupiesAndTransfers(t *testing.T) {
	r := newBucketRig(t)
	a, k := r.bucketed(t, 10, 2)
	ctx := context.Background()
	u0, u1 := usersIn(k, 0, 12), usersIn(k, 1, 12)
	ids := sale.NewRequestNos(1)
	type step struct {
		user       int64
		code       string
		remaining  int64
		b0, b1     int64 // each bucket's stock after the step
		transfer   [3]int64
		soldOutEvt int // sold-out events so far
	}
	steps := []step{
		{user: u0[0], code: "OK", remaining: 8, b0: 4, b1: 5},
		{user: u0[1], code: "OK", remaining: 6, b0: 3, b1: 5},
		{user: u0[2], code: "OK", remaining: 4, b0: 2, b1: 5},
		{user: u0[3], code: "OK", remaining: 2, b0: 1, b1: 5},
		// Bucket 0 runs dry: the SKU's total is told, not 0.
		{user: u0[4], code: "OK", remaining: 5, b0: 0, b1: 5},
		// Bucket 0 empty: it pulls (5+1)/2 = 3 from bucket 1, serves u0[5].
		{user: u0[5], code: "OK", remaining: 4, b0: 2, b1: 2},
		{user: u0[0], code: "DUPLICATE", remaining: -1, b0: 2, b1: 2},
		// A transfer by hand asks 10 of bucket 1 and moves what it has: 2.
		{transfer: [3]int64{1, 0, 10}, b0: 4, b1: 0},
		// Bucket 1 empty: it pulls (4+1)/2 = 2 from bucket 0.
		{user: u1[0], code: "OK", remaining: 2, b0: 2, b1: 1},
		{user: u1[1], code: "OK", remaining: 2, b0: 2, b1: 0},
		// Bucket 1 empty again: it pulls (2+1)/2 = 1; the SKU holds 1 more.
		{user: u1[2], code: "OK", remaining: 1, b0: 1, b1: 0},
		// The last unit: bucket 1 pulls it and sells it; every bucket empty.
		{user: u1[3], code: "OK", remaining: 0, b0: 0, b1: 0, soldOutEvt: 1},
		{user: u0[6], code: "SOLD_OUT", remaining: 0, b0: 0, b1: 0, soldOutEvt: 2},
	}
	for i, s := range steps {
		if s.transfer[2] > 0 {
			moved, err := r.st.Transfer(ctx, a.ID, k, int(s.transfer[0]), int(s.transfer[1]), s.transfer[2])
			if err != nil || moved != s.b0-2 {
				t.Fatalf("step %d: transfer moved %d (%v)", i, moved, err)
			}
		} else {
			rn := ids.NextIn(a.ID, k.ID, k.BucketOf(s.user))
			res, err := r.st.Occupy(ctx, a, k, s.user, rn, 1)
			if err != nil {
				t.Fatalf("step %d: %v", i, err)
			}
			if res.Code != s.code || res.Remaining != s.remaining {
				t.Fatalf("step %d (user %d of bucket %d): %s remaining %d, want %s remaining %d", i, s.user, k.BucketOf(s.user), res.Code, res.Remaining, s.code, s.remaining)
			}
		}
		if b0, b1 := r.bucketStock(t, k, 0), r.bucketStock(t, k, 1); b0 != s.b0 || b1 != s.b1 {
			t.Fatalf("step %d: buckets hold %d and %d, want %d and %d", i, b0, b1, s.b0, s.b1)
		}
		if n := r.soldOutEvents(); n != s.soldOutEvt {
			t.Fatalf("step %d: %d sold-out events, want %d", i, n, s.soldOutEvt)
		}
	}
	c, err := r.st.Counts(ctx, a.ID, k.ID)
	if err != nil {
		t.Fatal(err)
	}
	if c != (Counts{Initial: 10, Remaining: 0, Sold: 10, Holders: 10, Pending: 10}) {
		t.Fatalf("counts %+v", c)
	}
	per, err := r.st.BucketCounts(ctx, a.ID, k)
	if err != nil {
		t.Fatal(err)
	}
	for b, pc := range per {
		if pc.Initial+pc.In-pc.Out != pc.Remaining+pc.Sold || pc.InFlight != 0 {
			t.Fatalf("bucket %d's books do not balance: %+v", b, pc)
		}
	}
	// Each ticket is in the bucket its number names.
	for _, u := range []int64{u0[0], u1[3]} {
		rn, _, err := r.st.Holder(ctx, a.ID, k.ID, u)
		if err != nil || sale.TicketBucket(rn) != k.BucketOf(u) {
			t.Fatalf("user %d holds %q (%v), want a ticket of bucket %d", u, rn, err, k.BucketOf(u))
		}
	}
}

// TestTransferStepsApplyOncePerID: a debit retried with its id debits once;
// a credit retried is applied once; a transfer interrupted after its debit
// leaves its units in flight — the SKU is not sold out meanwhile — and
// FinishTransfers credits them exactly once.
func TestTransferStepsApplyOncePerID(t *testing.T) {
	r := newBucketRig(t)
	a, k := r.bucketed(t, 4, 2) // 2 and 2
	ctx := context.Background()
	c0 := r.st.bucketClient(a.ID, k, 0)
	debit := func() int64 {
		n, err := transferDebitScript.Exec(ctx, c0, []string{sale.KeysIn(a.ID, k.ID, 0).Stock, sale.TransfersKey(a.ID, k.ID, 0)}, []string{"x1", "2", "1"}).AsInt64()
		if err != nil {
			t.Fatal(err)
		}
		return n
	}
	if n1, n2 := debit(), debit(); n1 != 2 || n2 != 2 {
		t.Fatalf("debit answered %d then %d, want 2 twice", n1, n2)
	}
	if b0 := r.bucketStock(t, k, 0); b0 != 0 {
		t.Fatalf("bucket 0 holds %d after a retried debit of 2 of 2, want 0", b0)
	}
	// The process died here: the units are in flight, bucket 1 holds 2.
	c, err := r.st.Counts(ctx, a.ID, k.ID)
	if err != nil || c.Remaining != 2 || c.InFlight != 2 {
		t.Fatalf("counts mid-transfer %+v (%v), want 2 remaining and 2 in flight", c, err)
	}
	// Sell bucket 1's 2 units: the SKU must not be sold out — 2 are in flight.
	ids := sale.NewRequestNos(1)
	for _, u := range usersIn(k, 1, 2) {
		if res, err := r.st.Occupy(ctx, a, k, u, ids.NextIn(a.ID, k.ID, 1), 1); err != nil || res.Code != CodeOK {
			t.Fatalf("user %d: %+v %v", u, res, err)
		}
	}
	if n := r.soldOutEvents(); n != 0 {
		t.Fatalf("%d sold-out events with 2 units in flight", n)
	}
	// A buyer of bucket 0 finishes the transfer and is served.
	u := usersIn(k, 0, 1)[0]
	if res, err := r.st.Occupy(ctx, a, k, u, ids.NextIn(a.ID, k.ID, 0), 1); err != nil || res.Code != CodeOK {
		t.Fatalf("bucket 0 buyer after the interrupted transfer: %+v %v", res, err)
	}
	// Crediting the same id again changes nothing.
	c1 := r.st.bucketClient(a.ID, k, 1)
	again, err := transferCreditScript.Exec(ctx, c1, []string{sale.KeysIn(a.ID, k.ID, 1).Stock, sale.TransfersKey(a.ID, k.ID, 1), sale.KeysIn(a.ID, k.ID, 1).Meta}, []string{"x1", "2", "0"}).AsInt64()
	if err != nil || again != 0 {
		t.Fatalf("second credit of x1 answered %d (%v), want 0", again, err)
	}
	if done, err := r.st.FinishTransfers(ctx, a.ID, k); err != nil || done != 0 {
		t.Fatalf("FinishTransfers after the credit: %d (%v), want 0", done, err)
	}
	c, err = r.st.Counts(ctx, a.ID, k.ID)
	if err != nil || c.Remaining+c.Sold != 4 || c.Sold != 3 || c.InFlight != 0 {
		t.Fatalf("counts %+v (%v), want 3 sold, 1 remaining, none in flight", c, err)
	}
	if lua.TransferDebit == "" || lua.TransferCredit == "" {
		t.Fatal("transfer scripts not embedded")
	}
}

// TestEmptyBucketIsRebalancingNotSoldOut: a buyer whose bucket is empty
// while the bucket with stock cannot be reached (its shard is down) is
// answered REBALANCING with a short Retry-After — a 429 — never SOLD_OUT,
// and no sold-out event is published.
func TestEmptyBucketIsRebalancingNotSoldOut(t *testing.T) {
	r := newBucketRig(t)
	a, k := r.bucketed(t, 2, 2, 0, 1) // bucket 0 on hot0, bucket 1 on hot1
	ctx := context.Background()
	ids := sale.NewRequestNos(1)
	u0 := usersIn(k, 0, 2)
	if res, err := r.st.Occupy(ctx, a, k, u0[0], ids.NextIn(a.ID, k.ID, 0), 1); err != nil || res.Code != CodeOK {
		t.Fatalf("first buyer: %+v %v", res, err)
	}
	r.hot[1].Stop()
	// The occupy itself is on hot0; reading hot1 fails within the bound.
	octx, cancel := context.WithTimeout(ctx, 500*time.Millisecond)
	defer cancel()
	res, err := r.st.Occupy(octx, a, k, u0[1], ids.NextIn(a.ID, k.ID, 0), 1)
	if err != nil {
		t.Fatal(err)
	}
	if res.Code != CodeRebalancing || res.RetryAfter != rebalanceRetryAfter || !errors.Is(res.Err(), ErrRateLimited) || OutcomeOf(res.Err()) != Rebalancing {
		t.Fatalf("empty bucket with stock unreachable elsewhere: %+v (%v)", res, res.Err())
	}
	if n := r.soldOutEvents(); n != 0 {
		t.Fatalf("%d sold-out events while bucket 1 holds a unit", n)
	}
}

// TestBucketsConcurrentNeverOversell: 600 units in 4 buckets on two hot
// shards; 32 goroutines of buyers (2,400 users, every fourth attempt a
// repeat), a goroutine of random transfers and a restart of one hot shard
// (append-only file, fsync always) mid-sale. No user ever holds two
// tickets or gets two OKs, no more than 600 OKs, the sold-out event comes
// only when every bucket is empty, and the sale ends with every unit sold
// or held: remaining 0, sold 600, 600 records.
func TestBucketsConcurrentNeverOversell(t *testing.T) {
	r := newBucketRig(t, testenv.WithRedisArgs("--appendonly", "yes", "--appendfsync", "always"))
	a, k := r.bucketed(t, 600, 4, 0, 1)
	ctx := context.Background()
	var early atomic.Int64
	r.mu.Lock()
	r.onSoldOut = func() {
		rem, inFlight, err := r.st.bucketRemaining(ctx, a.ID, k)
		if err != nil {
			return
		}
		for _, n := range rem {
			inFlight += n
		}
		if inFlight != 0 {
			early.Add(1)
		}
	}
	r.mu.Unlock()
	b := r.st.NewBatcher(BatcherConfig{MaxSize: 64, Timeout: 2 * time.Second})
	ids := sale.NewRequestNos(1)
	var mu sync.Mutex
	oks := map[int64]int{}
	var soldOut, restarted, soldBeforeRestart atomic.Bool
	stop := make(chan struct{})
	var wg sync.WaitGroup
	wg.Go(func() { // random transfers
		rng := rand.New(rand.NewPCG(1, 2))
		for {
			select {
			case <-stop:
				return
			case <-time.After(2 * time.Millisecond):
			}
			src, dst := rng.IntN(4), rng.IntN(4)
			if src != dst {
				_, _ = r.st.Transfer(ctx, a.ID, k, src, dst, int64(1+rng.IntN(20))) // errors while a shard restarts
			}
		}
	})
	wg.Go(func() { // one hot shard restarts mid-sale: once 100 of 600 are sold
		for {
			mu.Lock()
			n := len(oks)
			mu.Unlock()
			if n >= 100 {
				break
			}
			time.Sleep(time.Millisecond)
		}
		r.hot[0].Stop()
		if err := r.hot[0].Start(); err != nil {
			t.Errorf("restart hot0: %v", err)
		}
		restarted.Store(true)
	})
	var buyers sync.WaitGroup
	var next atomic.Int64
	for range 32 {
		buyers.Go(func() {
			for !soldOut.Load() {
				i := next.Add(1)
				user := i%2400 + 1
				if i%4 == 0 {
					user = (i/4)%600 + 1 // a repeat
				}
				res, err := b.Occupy(ctx, a, k, Extras{}, user, ids.NextIn(a.ID, k.ID, k.BucketOf(user)), 1)
				if err != nil {
					time.Sleep(5 * time.Millisecond) // busy: the shard is restarting
					continue
				}
				switch res.Code {
				case CodeOK:
					mu.Lock()
					oks[user]++
					mu.Unlock()
				case CodeSoldOut:
					if !restarted.Load() {
						soldBeforeRestart.Store(true)
					}
					soldOut.Store(true)
				case CodeRebalancing:
					time.Sleep(time.Millisecond)
				}
				if i > 200000 {
					t.Error("the sale did not end within 200,000 attempts")
					return
				}
			}
		})
	}
	buyers.Wait()
	close(stop)
	wg.Wait()
	total := 0
	for u, n := range oks {
		if n != 1 {
			t.Errorf("user %d got %d OKs", u, n)
		}
		total += n
	}
	if total > 600 {
		t.Fatalf("%d OKs for 600 units", total)
	}
	if _, err := r.st.FinishTransfers(ctx, a.ID, k); err != nil {
		t.Fatal(err)
	}
	c, err := r.st.Counts(ctx, a.ID, k.ID)
	if err != nil {
		t.Fatal(err)
	}
	// Sold counts the OKs and any occupy whose answer was lost in the restart.
	if c.Remaining != 0 || c.InFlight != 0 || c.Sold != 600 || c.Holders != 600 || int64(total) > c.Sold {
		t.Fatalf("the sale ended with %+v and %d OKs, want every unit sold or held", c, total)
	}
	if soldBeforeRestart.Load() {
		t.Fatal("the sale ended before the shard restarted: the restart was not mid-sale")
	}
	if early.Load() != 0 {
		t.Fatalf("%d sold-out events while a bucket still held stock", early.Load())
	}
	// One record per user: each lives only in the user's bucket.
	for bk := 0; bk < 4; bk++ {
		cl := r.st.bucketClient(a.ID, k, bk)
		users, err := cl.Do(ctx, cl.B().Hkeys().Key(sale.KeysIn(a.ID, k.ID, bk).Users).Build()).AsStrSlice()
		if err != nil {
			t.Fatal(err)
		}
		for _, u := range users {
			var id int64
			if _, err := fmt.Sscan(u, &id); err != nil || k.BucketOf(id) != bk {
				t.Fatalf("bucket %d holds user %s of bucket %d", bk, u, k.BucketOf(id))
			}
		}
	}
	t.Logf("%d OKs, %d sold (the rest occupied by answers lost in the restart)", total, c.Sold)
}

// TestBucketedTicketIsFoundByItsNumber: a ticket of a bucketed SKU is
// found by its number alone — its QUEUING result (the results store), its
// pending entry (the sweeper's index of its bucket), its claim and its
// release go to the bucket it names, and the released unit is back there.
func TestBucketedTicketIsFoundByItsNumber(t *testing.T) {
	r := newBucketRig(t)
	a, k := r.bucketed(t, 8, 4, 0, 1)
	ctx := context.Background()
	u := usersIn(k, 3, 1)[0]
	rn := sale.NewRequestNos(1).NextIn(a.ID, k.ID, 3)
	if res, err := r.st.Occupy(ctx, a, k, u, rn, 1); err != nil || res.Code != CodeOK {
		t.Fatalf("occupy: %+v %v", res, err)
	}
	res := results.New(r.st.shards.Default, r.st.BucketClient, 0)
	if e, err := res.Read(ctx, u, rn); err != nil || e.State != sale.ResultQueuing || e.Owner != u {
		t.Fatalf("result of %s: %+v %v", rn, e, err)
	}
	page, err := r.st.PendingIn(ctx, a.ID, k, 3, time.Now().Add(time.Minute), 0, 10)
	if err != nil || len(page.Tickets) != 1 || page.Tickets[0].RequestNo != rn {
		t.Fatalf("bucket 3's pending journal: %+v %v", page, err)
	}
	if others, err := r.st.PendingIn(ctx, a.ID, k, 2, time.Now().Add(time.Minute), 0, 10); err != nil || len(others.Tickets) != 0 {
		t.Fatalf("bucket 2's pending journal: %+v %v", others, err)
	}
	m := &sale.Message{RequestNo: rn, ActivityID: a.ID, SKUID: k.ID, UserID: u, Quantity: 1}
	if held, err := r.st.Claim(ctx, m); err != nil || !held {
		t.Fatalf("claim: %v %v", held, err)
	}
	if b3 := r.bucketStock(t, k, 3); b3 != 1 {
		t.Fatalf("bucket 3 holds %d after one sale of its 2", b3)
	}
	// The release counts the ticket's attempt in bucket 3's window, on
	// its shard, where the occupy would have counted it.
	r.st.SetWindow(5, time.Hour)
	if out, err := r.st.Release(ctx, m, true); err != nil {
		t.Fatalf("release: %v %v", out, err)
	}
	window := sale.KeysIn(a.ID, k.ID, 3).Rate + strconv.FormatInt(time.Now().UnixMilli()/time.Hour.Milliseconds(), 10)
	b3c := r.st.BucketClient(a.ID, k.ID, 3)
	if n, err := b3c.Do(ctx, b3c.B().Hget().Key(window).Field(strconv.FormatInt(u, 10)).Build()).AsInt64(); err != nil || n != 1 {
		t.Fatalf("%s %d on bucket 3's shard: %d %v, want the released ticket's attempt", window, u, n, err)
	}
	if b3 := r.bucketStock(t, k, 3); b3 != 2 {
		t.Fatalf("bucket 3 holds %d after the release, want its 2 back", b3)
	}
	if c, err := r.st.Counts(ctx, a.ID, k.ID); err != nil || c.Remaining != 8 || c.Sold != 0 {
		t.Fatalf("counts after the release: %+v %v", c, err)
	}
}

// TestRestockSpreadsOverTheBuckets: 7 units restocked over 4 buckets go
// 2, 2, 2, 1; the SKU's remaining and initial are the sums.
func TestRestockSpreadsOverTheBuckets(t *testing.T) {
	r := newBucketRig(t)
	a, k := r.bucketed(t, 8, 4)
	rem, initial, err := r.st.Restock(context.Background(), a.ID, k.ID, 7)
	if err != nil || rem != 15 || initial != 15 {
		t.Fatalf("restock: remaining %d initial %d (%v), want 15 and 15", rem, initial, err)
	}
	for b, want := range []int64{4, 4, 4, 3} {
		if got := r.bucketStock(t, k, b); got != want {
			t.Fatalf("bucket %d holds %d, want %d", b, got, want)
		}
	}
}

// TestMidRestockBuyersAreServedFromTheRestockedBucket: a restock of a
// bucketed SKU reaches its buckets one after another (one script each, not
// one step). Between two of them — bucket 0 restocked, bucket 1 not yet —
// a buyer of bucket 1 is served by a transfer from bucket 0, never told
// sold out while bucket 0 holds units; once every unit is sold the SKU is
// sold out again.
func TestMidRestockBuyersAreServedFromTheRestockedBucket(t *testing.T) {
	r := newBucketRig(t)
	a, k := r.bucketed(t, 4, 2)
	ctx := context.Background()
	ids := sale.NewRequestNos(1)
	buy := func(u int64) OccupyResult {
		t.Helper()
		res, err := r.st.Occupy(ctx, a, k, u, ids.NextIn(a.ID, k.ID, k.BucketOf(u)), 1)
		if err != nil {
			t.Fatalf("occupy user %d: %v", u, err)
		}
		return res
	}
	for b := range 2 {
		for _, u := range usersIn(k, b, 2) {
			if res := buy(u); res.Code != CodeOK {
				t.Fatalf("user %d: %+v", u, res)
			}
		}
	}
	// Restock's first step only: bucket 0's share of 4 units.
	k0 := sale.KeysIn(a.ID, k.ID, 0)
	if err := restockScript.Exec(ctx, r.st.bucketClient(a.ID, k, 0), []string{k0.Meta, k0.Stock}, []string{"2"}).Error(); err != nil {
		t.Fatal(err)
	}
	for i, u := range usersIn(k, 1, 5)[2:] {
		res := buy(u)
		want := CodeOK
		if i == 2 {
			want = CodeSoldOut // both restocked units sold
		}
		if res.Code != want {
			t.Fatalf("buyer %d of bucket 1 mid-restock: %+v, want %s", i, res, want)
		}
	}
}

// TestMidMarkBucketsAnswerByTheirOwnMark: the on-call sold-out mark too
// reaches the buckets one after another. Between two — bucket 0 marked,
// bucket 1 not yet — a buyer of bucket 0 is SOLD_OUT and one of bucket 1
// is still served from its own stock: the mark is per bucket until
// SetSoldOut has written every one (milliseconds), then the SKU is sold
// out for all.
func TestMidMarkBucketsAnswerByTheirOwnMark(t *testing.T) {
	r := newBucketRig(t)
	a, k := r.bucketed(t, 8, 2)
	ctx := context.Background()
	ids := sale.NewRequestNos(1)
	c := r.st.bucketClient(a.ID, k, 0)
	if err := c.Do(ctx, c.B().Hset().Key(sale.KeysIn(a.ID, k.ID, 0).Meta).FieldValue().FieldValue("soldout", "1").Build()).Error(); err != nil {
		t.Fatal(err)
	}
	for b, want := range []string{CodeSoldOut, CodeOK} {
		u := usersIn(k, b, 1)[0]
		res, err := r.st.Occupy(ctx, a, k, u, ids.NextIn(a.ID, k.ID, b), 1)
		if err != nil || res.Code != want {
			t.Fatalf("buyer of bucket %d with only bucket 0 marked: %+v %v, want %s", b, res, err, want)
		}
	}
	if err := r.st.SetSoldOut(ctx, a.ID, k.ID, true); err != nil {
		t.Fatal(err)
	}
	u := usersIn(k, 1, 2)[1]
	if res, err := r.st.Occupy(ctx, a, k, u, ids.NextIn(a.ID, k.ID, 1), 1); err != nil || res.Code != CodeSoldOut {
		t.Fatalf("buyer of bucket 1 once every bucket is marked: %+v %v, want SOLD_OUT", res, err)
	}
}
