package stock

import (
	"context"
	"errors"
	"testing"

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
	src := r.st.bucketClient(a.ID, k, 0)
	n, err := transferDebitScript.Exec(ctx, src,
		[]string{sale.KeysIn(a.ID, k.ID, 0).Stock, sale.TransfersKey(a.ID, k.ID, 0)}, []string{"deadbeef", "2", "1"}).AsInt64()
	if err != nil || n != 2 {
		t.Fatalf("debit: %d, %v", n, err)
	}
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
