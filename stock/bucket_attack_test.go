package stock

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/redis/rueidis"

	"seckill/sale"
)

// TestBucketSumCountsATransferLandingBetweenReads: 4 units, all in bucket
// 1 after a first transfer. While the sum reads bucket 0 (empty), a
// transfer moves all 4 from bucket 1 back to bucket 0 and settles: the
// read of bucket 1 finds it empty with no in-flight entry. The sum must
// still be 4 — a 0 there is a false sold-out with 4 units on the shelf.
func TestBucketSumCountsATransferLandingBetweenReads(t *testing.T) {
	r := newBucketRig(t)
	a, k := r.bucketed(t, 4, 2)
	ctx := context.Background()
	if n, err := r.st.Transfer(ctx, a.ID, k, 0, 1, 2); err != nil || n != 2 {
		t.Fatalf("transfer 0→1: %d, %v", n, err)
	}
	fired := false
	afterBucketRead = func(b int) {
		if b != 0 || fired {
			return
		}
		fired = true
		if n, err := r.st.Transfer(ctx, a.ID, k, 1, 0, 4); err != nil || n != 4 {
			t.Errorf("transfer 1→0 between the reads: %d, %v", n, err)
		}
	}
	t.Cleanup(func() { afterBucketRead = nil })
	rem, inFlight, err := r.st.bucketRemaining(ctx, a.ID, k)
	if err != nil {
		t.Fatal(err)
	}
	afterBucketRead = nil
	if !fired {
		t.Fatal("the hook never ran")
	}
	total := inFlight
	for _, n := range rem {
		total += n
	}
	if total != 4 {
		t.Fatalf("sum of buckets %v + in flight %d = %d, want 4", rem, inFlight, total)
	}
	// And on the shelf: bucket 0 holds the 4.
	if got := r.bucketStock(t, k, 0); got != 4 {
		t.Fatalf("bucket 0 holds %d, want 4", got)
	}
}

// TestTransferNeverCreditsALostBucket: a transfer's debit is recorded on
// bucket 0 and the process dies; bucket 1's shard restarts empty. Finishing
// the transfer must not write a bare stock key on bucket 1 (its books are
// gone: the units would be sold with no meta, limit or records, or vanish
// in a rebuild): it fails and the units stay in flight on bucket 0, where
// the sum still counts them.
func TestTransferNeverCreditsALostBucket(t *testing.T) {
	r := newBucketRig(t)
	a, k := r.bucketed(t, 4, 2)
	ctx := context.Background()
	src := r.debitOnly(t, k, 0, 1, "deadbeef", 2)
	dst := r.st.bucketClient(a.ID, k, 1)
	if err := dst.Do(ctx, dst.B().Flushall().Build()).Error(); err != nil {
		t.Fatal(err)
	}
	if _, err := r.st.FinishTransfers(ctx, a.ID, k); err == nil {
		t.Fatal("finished a transfer into a bucket Redis lost")
	}
	ex, err := dst.Do(ctx, dst.B().Exists().Key(sale.KeysIn(a.ID, k.ID, 1).Stock).Build()).AsInt64()
	if err != nil {
		t.Fatal(err)
	}
	if ex != 0 {
		t.Fatal("the credit wrote a stock key on the lost bucket")
	}
	left, err := src.Do(ctx, src.B().Hget().Key(sale.TransfersKey(a.ID, k.ID, 0)).Field("f:deadbeef").Build()).ToString()
	if err != nil || left != "1:2" {
		t.Fatalf("in-flight entry on bucket 0: %q, %v; want \"1:2\"", left, err)
	}
	if _, _, err := r.st.bucketRemaining(ctx, a.ID, k); !errors.Is(err, ErrStateLost) {
		t.Fatalf("sum over a lost bucket: %v, want ErrStateLost", err)
	}
}

// transfersOut reads bucket b's units ever debited by transfers (0: none).
func (r *bucketRig) transfersOut(t *testing.T, k *sale.SKU, b int) int64 {
	t.Helper()
	c := r.st.bucketClient(1, k, b)
	n, err := c.Do(context.Background(), c.B().Hget().Key(sale.TransfersKey(1, k.ID, b)).Field("out").Build()).AsInt64()
	if rueidis.IsRedisNil(err) {
		return 0
	}
	if err != nil {
		t.Fatalf("bucket %d transfers: %v", b, err)
	}
	return n
}

// TestMarkedBucketedSKUIsSoldOutNotRebalancing: on-call marks a SKU of 8
// units in 2 buckets sold out. A buyer is answered SOLD_OUT (410), not
// REBALANCING (a 429 that tells it to retry forever), and its request
// moves no unit between the buckets.
func TestMarkedBucketedSKUIsSoldOutNotRebalancing(t *testing.T) {
	r := newBucketRig(t)
	a, k := r.bucketed(t, 8, 2)
	ctx := context.Background()
	if err := r.st.SetSoldOut(ctx, a.ID, k.ID, true); err != nil {
		t.Fatal(err)
	}
	ids := sale.NewRequestNos(1)
	for _, u := range usersIn(k, 0, 2) {
		res, err := r.st.Occupy(ctx, a, k, u, ids.NextIn(a.ID, k.ID, 0), 1)
		if err != nil {
			t.Fatal(err)
		}
		if res.Code != CodeSoldOut || res.Remaining != 0 {
			t.Fatalf("marked sku: %s remaining %d, want SOLD_OUT remaining 0", res.Code, res.Remaining)
		}
	}
	for b := range 2 {
		if out := r.transfersOut(t, k, b); out != 0 {
			t.Fatalf("bucket %d: %d units transferred out while the sku was marked sold out", b, out)
		}
		if got := r.bucketStock(t, k, b); got != 4 {
			t.Fatalf("bucket %d holds %d, want 4", b, got)
		}
	}
}

// TestBucketedBuyerAskingMoreThanTheSKUHoldsIsSoldOut: a SKU of 3 units
// per buyer at most, 2 buckets; 1 unit is left in all. A buyer asking 2 is
// SOLD_OUT (remaining 1), as on a SKU not split — not REBALANCING, which
// no transfer can ever serve — and a buyer asking 1 still gets the unit.
func TestBucketedBuyerAskingMoreThanTheSKUHoldsIsSoldOut(t *testing.T) {
	r := newBucketRig(t)
	act := activity(1, 5001, 4, true)
	act.SKUs[0].Buckets, act.SKUs[0].LimitPerUser = 2, 3
	ctx := context.Background()
	if err := r.st.Preheat(ctx, act); err != nil {
		t.Fatal(err)
	}
	a, k, ok := r.cat.Lookup(1, 5001)
	if !ok {
		t.Fatal("catalog lost the activity")
	}
	ids := sale.NewRequestNos(1)
	u0, u1 := usersIn(k, 0, 3), usersIn(k, 1, 3)
	// Bucket 0 sells its 2, bucket 1 one of its 2: 1 left, in bucket 1.
	for _, buy := range []struct {
		user int64
		q    int64
	}{{u0[0], 2}, {u1[0], 1}} {
		res, err := r.st.Occupy(ctx, a, k, buy.user, ids.NextIn(a.ID, k.ID, k.BucketOf(buy.user)), buy.q)
		if err != nil || res.Code != CodeOK {
			t.Fatalf("user %d buys %d: %+v %v", buy.user, buy.q, res, err)
		}
	}
	res, err := r.st.Occupy(ctx, a, k, u0[1], ids.NextIn(a.ID, k.ID, 0), 2)
	if err != nil {
		t.Fatal(err)
	}
	if res.Code != CodeSoldOut || res.Remaining != 1 {
		t.Fatalf("2 asked, 1 left: %s remaining %d, want SOLD_OUT remaining 1", res.Code, res.Remaining)
	}
	res, err = r.st.Occupy(ctx, a, k, u0[2], ids.NextIn(a.ID, k.ID, 0), 1)
	if err != nil || res.Code != CodeOK || res.Remaining != 0 {
		t.Fatalf("1 asked, 1 left: %+v %v, want OK remaining 0", res, err)
	}
}

// TestPreheatAgainKeepsEachBucketsBooks: 8 units in 4 buckets, restocked by
// 1 twice (bucket 0 gets both), then preheated again with the database's
// 10 (at start, or an activity saved again): every bucket's books still
// balance — preheat does not reset a live bucket's initial to its share
// of 10.
func TestPreheatAgainKeepsEachBucketsBooks(t *testing.T) {
	r := newBucketRig(t)
	a, k := r.bucketed(t, 8, 4)
	ctx := context.Background()
	for range 2 {
		if _, _, err := r.st.Restock(ctx, a.ID, k.ID, 1); err != nil {
			t.Fatal(err)
		}
	}
	again := *a
	again.SKUs = append([]sale.SKU(nil), a.SKUs...)
	again.SKUs[0].Stock = 10
	if err := r.st.Preheat(ctx, again); err != nil {
		t.Fatal(err)
	}
	var initial int64
	for _, l := range r.balancedBuckets(t, a, k) {
		initial += l.Initial
	}
	if initial != 10 {
		t.Fatalf("the buckets' initial sums to %d, want 10", initial)
	}
}

// TestPreheatRefusesToChangeALiveSKUsBuckets: a SKU sold in 4 buckets is
// saved again with 2 (or not split). The preheat is refused: buyers of
// buckets 2 and 3 would map to 0 and 1 and buy a second ticket, and the
// units left in 2 and 3 would never sell.
func TestPreheatRefusesToChangeALiveSKUsBuckets(t *testing.T) {
	r := newBucketRig(t)
	a, k := r.bucketed(t, 8, 4)
	ctx := context.Background()
	ids := sale.NewRequestNos(1)
	u := usersIn(k, 3, 1)[0]
	if res, err := r.st.Occupy(ctx, a, k, u, ids.NextIn(a.ID, k.ID, 3), 1); err != nil || res.Code != CodeOK {
		t.Fatalf("occupy: %+v %v", res, err)
	}
	for _, n := range []int{2, 0} {
		again := *a
		again.SKUs = append([]sale.SKU(nil), a.SKUs...)
		again.SKUs[0].Buckets = n
		if err := r.st.Preheat(ctx, again); !errors.Is(err, ErrBucketsChanged) {
			t.Fatalf("preheat with %d buckets: %v, want ErrBucketsChanged", n, err)
		}
	}
	_, cur, ok := r.cat.Lookup(a.ID, k.ID)
	if !ok || cur.Buckets != 4 {
		t.Fatalf("the catalog's sku after the refused preheats: %+v", cur)
	}
	res, err := r.st.Occupy(ctx, a, k, u, ids.NextIn(a.ID, k.ID, k.BucketOf(u)), 1)
	if err != nil || res.Code != CodeDuplicate {
		t.Fatalf("the buyer again: %+v %v, want DUPLICATE", res, err)
	}
}

// TestForgedTicketBucketsChangeNothing: a buyer of bucket b holds a
// ticket. Messages naming the same id under another bucket, a bucket past
// the SKU's count, or a bucket suffix on a SKU not split neither claim nor
// release anything (forced, and as a closed order): every bucket's stock
// and the buyer's record stay, and the true ticket still claims.
func TestForgedTicketBucketsChangeNothing(t *testing.T) {
	r := newBucketRig(t)
	a, k := r.bucketed(t, 8, 4)
	ctx := context.Background()
	u := usersIn(k, 1, 1)[0]
	rn := sale.NewRequestNos(1).NextIn(a.ID, k.ID, 1)
	if res, err := r.st.Occupy(ctx, a, k, u, rn, 1); err != nil || res.Code != CodeOK {
		t.Fatalf("occupy: %+v %v", res, err)
	}
	_, _, _, id, ok := sale.ParseTicket(rn)
	if !ok {
		t.Fatalf("ticket %s does not parse", rn)
	}
	forged := []string{
		fmt.Sprintf("%d-%d.0-%s", a.ID, k.ID, id),  // another bucket
		fmt.Sprintf("%d-%d.63-%s", a.ID, k.ID, id), // past the SKU's 4
		fmt.Sprintf("%d-%d-%s", a.ID, k.ID, id),    // no bucket
	}
	before := make([]int64, 4)
	for b := range before {
		before[b] = r.bucketStock(t, k, b)
	}
	for _, f := range forged {
		m := &sale.Message{RequestNo: f, ActivityID: a.ID, SKUID: k.ID, UserID: u, Quantity: 1}
		held, err := r.st.ClaimBatch(ctx, []*sale.Message{m})
		if err != nil || held[0] {
			t.Fatalf("claim of forged %s: %v %v", f, held, err)
		}
		for _, rel := range []func() (ReleaseOutcome, error){
			func() (ReleaseOutcome, error) { return r.st.Release(ctx, m, true) },
			func() (ReleaseOutcome, error) { return r.st.ReleaseClosed(ctx, m) },
		} {
			if out, err := rel(); err != nil || out != NotHeld {
				t.Fatalf("release of forged %s: %v %v, want not_held", f, out, err)
			}
		}
	}
	for b := range before {
		if got := r.bucketStock(t, k, b); got != before[b] {
			t.Fatalf("bucket %d: %d units after the forged tickets, %d before", b, got, before[b])
		}
	}
	m := &sale.Message{RequestNo: rn, ActivityID: a.ID, SKUID: k.ID, UserID: u, Quantity: 1}
	if held, err := r.st.ClaimBatch(ctx, []*sale.Message{m}); err != nil || !held[0] {
		t.Fatalf("the true ticket no longer claims: %v %v", held, err)
	}
	// A bucket suffix on a SKU not split names nothing either.
	pr := newRig(t)
	pa, pk := pr.preheat(t, activity(2, 6001, 3, false))
	prn := sale.NewRequestNos(2).Next(pa.ID, pk.ID)
	if res, err := pr.stock.Occupy(ctx, pa, pk, u, prn, 1); err != nil || res.Code != CodeOK {
		t.Fatalf("occupy on a SKU not split: %+v %v", res, err)
	}
	_, _, _, pid, _ := sale.ParseTicket(prn)
	fake := fmt.Sprintf("%d-%d.0-%s", pa.ID, pk.ID, pid)
	pm := &sale.Message{RequestNo: fake, ActivityID: pa.ID, SKUID: pk.ID, UserID: u, Quantity: 1}
	if out, err := pr.stock.Release(ctx, pm, true); err != nil || out != NotHeld {
		t.Fatalf("release of %s on a SKU not split: %v %v", fake, out, err)
	}
	if n, err := pr.stock.Counts(ctx, pa.ID, pk.ID); err != nil || n.Remaining != 2 || n.Holders != 1 {
		t.Fatalf("the SKU not split after the forged release: %+v %v, want remaining 2 and 1 record", n, err)
	}
}

// TestStuckTransferDoesNotStopRebalancing: a transfer into bucket 1 is cut
// after its debit and bucket 1's shard restarts empty, so it cannot be
// finished. A buyer of bucket 0, empty, is still served by a transfer from
// another bucket: one stuck transfer does not stop the SKU's rebalancing.
func TestStuckTransferDoesNotStopRebalancing(t *testing.T) {
	r := newBucketRig(t)
	a, k := r.bucketed(t, 8, 4, 0, 1) // buckets 0, 2 on hot0; 1, 3 on hot1
	ctx := context.Background()
	r.debitOnly(t, k, 0, 1, "cafe", 2)
	// Bucket 1 is lost; bucket 3 (same shard) with it. Bucket 0 is empty.
	lost := r.st.bucketClient(a.ID, k, 1)
	if err := lost.Do(ctx, lost.B().Flushall().Build()).Error(); err != nil {
		t.Fatal(err)
	}
	u := usersIn(k, 0, 1)[0]
	res, err := r.st.Occupy(ctx, a, k, u, sale.NewRequestNos(1).NextIn(a.ID, k.ID, 0), 1)
	if err != nil {
		t.Fatal(err)
	}
	if res.Code != CodeOK {
		t.Fatalf("buyer of the empty bucket 0: %s, want OK after a transfer from bucket 2", res.Code)
	}
}

// debitOnly runs only the first step of a transfer of units from bucket src
// to dst under id (the process dies after it) and answers src's client.
func (r *bucketRig) debitOnly(t *testing.T, k *sale.SKU, src, dst int, id string, units int64) rueidis.Client {
	t.Helper()
	c := r.st.bucketClient(1, k, src)
	n, err := transferDebitScript.Exec(context.Background(), c,
		[]string{sale.KeysIn(1, k.ID, src).Stock, sale.TransfersKey(1, k.ID, src)},
		[]string{id, strconv.FormatInt(units, 10), strconv.Itoa(dst)}).AsInt64()
	if err != nil || n != units {
		t.Fatalf("debit: %d, %v", n, err)
	}
	return c
}

// TestFinishedTransfersAreTrimmed: a finished transfer's per-id entries
// stay for the keep TrimTransfers is given, then go; a transfer still in
// flight keeps its entries (and is finished afterwards, once), and the
// totals the books and a rebuild read stay, so every bucket's books still
// balance.
func TestFinishedTransfersAreTrimmed(t *testing.T) {
	r := newBucketRig(t)
	a, k := r.bucketed(t, 40, 2)
	ctx := context.Background()
	for range 5 {
		for _, x := range [][2]int{{0, 1}, {1, 0}} {
			if n, err := r.st.Transfer(ctx, a.ID, k, x[0], x[1], 1); err != nil || n != 1 {
				t.Fatalf("transfer %v: %d %v", x, n, err)
			}
		}
	}
	r.debitOnly(t, k, 0, 1, "open", 2)
	if n, err := r.st.TrimTransfers(ctx, a.ID, k, time.Minute); err != nil || n != 0 {
		t.Fatalf("trim of young entries: %d %v, want none", n, err)
	}
	time.Sleep(5 * time.Millisecond)
	if n, err := r.st.TrimTransfers(ctx, a.ID, k, time.Millisecond); err != nil || n != 20 {
		t.Fatalf("trim: %d %v, want 20 (a d: and a c: for each of 10 transfers)", n, err)
	}
	want := [][]string{{"d:open", "f:open", "from:1", "in", "out", "to:1"}, {"from:0", "in", "out", "to:0"}}
	for b := range 2 {
		c := r.st.bucketClient(a.ID, k, b)
		fs, err := c.Do(ctx, c.B().Hkeys().Key(sale.TransfersKey(a.ID, k.ID, b)).Build()).AsStrSlice()
		if err != nil {
			t.Fatal(err)
		}
		slices.Sort(fs)
		if !slices.Equal(fs, want[b]) {
			t.Errorf("bucket %d record %v, want %v", b, fs, want[b])
		}
	}
	if n, err := r.st.FinishTransfers(ctx, a.ID, k); err != nil || n != 1 {
		t.Fatalf("finish the open transfer: %d %v", n, err)
	}
	if s := SumLedgers(r.balancedBuckets(t, a, k)); s.Remaining != 40 || s.InFlight != 0 {
		t.Errorf("sum %+v, want 40 remaining, none in flight", s.Counts)
	}
}

// balancedBuckets reads k's bucket ledgers and fails the test for each
// bucket whose books do not balance (initial + in − out = remaining +
// sold).
func (r *bucketRig) balancedBuckets(t *testing.T, a *sale.Activity, k *sale.SKU) []Ledger {
	t.Helper()
	per, err := r.st.BucketLedgers(context.Background(), a.ID, k)
	if err != nil {
		t.Fatal(err)
	}
	for b, l := range per {
		if l.Initial+l.In-l.Out != l.Remaining+l.Sold {
			t.Errorf("bucket %d: initial %d + in %d − out %d ≠ remaining %d + sold %d", b, l.Initial, l.In, l.Out, l.Remaining, l.Sold)
		}
	}
	return per
}

// creditUnsettled runs a transfer's debit and credit but not its settle on
// the source (the HDEL of "f:<id>" failed, or a failover lost it), then
// dates the credit's entry an hour back.
func (r *bucketRig) creditUnsettled(t *testing.T, k *sale.SKU, src, dst int, id string, units int64) {
	t.Helper()
	ctx := context.Background()
	r.debitOnly(t, k, src, dst, id, units)
	dc := r.st.bucketClient(1, k, dst)
	dk := sale.KeysIn(1, k.ID, dst)
	if err := transferCreditScript.Exec(ctx, dc, []string{dk.Stock, sale.TransfersKey(1, k.ID, dst), dk.Meta},
		[]string{id, strconv.FormatInt(units, 10), strconv.Itoa(src)}).Error(); err != nil {
		t.Fatal(err)
	}
	old := strconv.FormatInt(units, 10) + "|" + strconv.FormatInt(time.Now().Add(-time.Hour).UnixMilli(), 10)
	if err := dc.Do(ctx, dc.B().Hset().Key(sale.TransfersKey(1, k.ID, dst)).FieldValue().FieldValue("c:"+id, old).Build()).Error(); err != nil {
		t.Fatal(err)
	}
}

// hasCredit tells whether bucket b's record still holds transfer id's
// credit entry.
func (r *bucketRig) hasCredit(t *testing.T, k *sale.SKU, b int, id string) bool {
	t.Helper()
	c := r.st.bucketClient(1, k, b)
	ok, err := c.Do(context.Background(), c.B().Hexists().Key(sale.TransfersKey(1, k.ID, b)).Field("c:"+id).Build()).AsBool()
	if err != nil {
		t.Fatal(err)
	}
	return ok
}

// TestTrimKeepsTheCreditOfATransferStillInFlight: a transfer credited long
// ago whose source never settled it is still in flight there, and
// FinishTransfers credits it again. The trim must not drop the credit's
// entry that makes that repeat a no-op, however old: else the destination
// gets the units twice and the SKU sells more than it has.
func TestTrimKeepsTheCreditOfATransferStillInFlight(t *testing.T) {
	r := newBucketRig(t)
	a, k := r.bucketed(t, 40, 2)
	ctx := context.Background()
	r.creditUnsettled(t, k, 0, 1, "late", 3)
	if _, err := r.st.TrimTransfers(ctx, a.ID, k, time.Minute); err != nil {
		t.Fatal(err)
	}
	if !r.hasCredit(t, k, 1, "late") {
		t.Fatal("the trim dropped the credit of a transfer its source still has in flight")
	}
	if n, err := r.st.FinishTransfers(ctx, a.ID, k); err != nil || n != 1 {
		t.Fatalf("finish: %d %v, want 1", n, err)
	}
	if s := SumLedgers(r.balancedBuckets(t, a, k)); s.Remaining+s.Sold != 40 {
		t.Fatalf("the buckets hold %d units after the transfer was finished, want the SKU's 40", s.Remaining+s.Sold)
	}
	// Settled now: the next trim drops the old entry.
	if _, err := r.st.TrimTransfers(ctx, a.ID, k, time.Minute); err != nil {
		t.Fatal(err)
	}
	if r.hasCredit(t, k, 1, "late") {
		t.Error("a settled transfer's old credit entry was kept")
	}
}

// TestTrimKeepsEveryCreditWhileABucketIsUnreadable: with the source's
// record unreadable (here not a hash: a read that fails at once, where a
// shard that is down fails at the caller's deadline), which transfers it
// has in flight is not known: no credit entry is dropped anywhere, and the
// trim says why.
func TestTrimKeepsEveryCreditWhileABucketIsUnreadable(t *testing.T) {
	r := newBucketRig(t)
	a, k := r.bucketed(t, 40, 2)
	ctx := context.Background()
	r.creditUnsettled(t, k, 0, 1, "late", 3)
	c := r.st.bucketClient(a.ID, k, 0)
	if err := c.Do(ctx, c.B().Set().Key(sale.TransfersKey(a.ID, k.ID, 0)).Value("not a hash").Build()).Error(); err != nil {
		t.Fatal(err)
	}
	if _, err := r.st.TrimTransfers(ctx, a.ID, k, time.Minute); err == nil {
		t.Error("a trim with a bucket unreadable reported no error")
	}
	if !r.hasCredit(t, k, 1, "late") {
		t.Fatal("the trim dropped a credit entry while the source bucket could not be read")
	}
}
