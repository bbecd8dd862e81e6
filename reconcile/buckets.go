package reconcile

import (
	"context"
	"fmt"

	"go.uber.org/zap"

	"seckill/sale"
)

// checkBuckets checks a SKU split into buckets: it finishes the transfers
// left in flight (each credited once per id; a destination Redis lost is
// refused and the transfer stays in flight), then checks that every
// bucket's books balance (initial + credited − debited = remaining +
// sold, each bucket read atomically). It adds a KindBuckets drift of the
// units the buckets are off in all (the sum of each bucket's |imbalance|),
// naming every bucket that is off; the SKU-wide identity is the counters'
// redis_ledger (Ledger sums the buckets). A transfer it could not finish
// is a warning, not a drift: its units are counted in flight.
func (r *Reconciler) checkBuckets(ctx context.Context, a *sale.Activity, k *sale.SKU, line *SKUReport) error {
	if _, err := r.stock.FinishTransfers(ctx, a.ID, k); err != nil {
		r.log.Warn("transfers left in flight", zap.Int64("activityId", a.ID), zap.Int64("skuId", k.ID), zap.Error(err))
	}
	per, err := r.stock.BucketLedgers(ctx, a.ID, k)
	if err != nil {
		return err
	}
	var off int64
	detail := ""
	for b, c := range per {
		if !c.Present {
			continue // the SKU's redis_missing
		}
		if d := c.Initial + c.In - c.Out - c.Remaining - c.Sold; d != 0 {
			off += abs(d)
			detail += fmt.Sprintf("; bucket %d: initial %d + in %d − out %d ≠ remaining %d + sold %d",
				b, c.Initial, c.In, c.Out, c.Remaining, c.Sold)
		}
	}
	if off != 0 {
		line.Drifts = append(line.Drifts, Drift{Kind: KindBuckets, Amount: off,
			Detail: fmt.Sprintf("%d units off over the buckets%s", off, detail)})
	}
	return nil
}

func abs(n int64) int64 {
	if n < 0 {
		return -n
	}
	return n
}
