package reconcile

import (
	"context"
	"errors"
	"fmt"

	"seckill/sale"
)

// errBucketBooks: a bucket's books, or the SKU's sum of them, do not add up.
var errBucketBooks = errors.New("bucket books do not add up")

// checkBuckets checks a SKU split into buckets: it finishes the transfers
// left in flight (each credited once per id), then checks that every
// bucket's books balance (initial + credited − debited = remaining + sold)
// and that the buckets sum to the SKU's initial stock.
func (r *Reconciler) checkBuckets(ctx context.Context, a *sale.Activity, k *sale.SKU) error {
	if _, err := r.stock.FinishTransfers(ctx, a.ID, k); err != nil {
		return err
	}
	per, err := r.stock.BucketCounts(ctx, a.ID, k)
	if err != nil {
		return err
	}
	var initial, remaining, sold int64
	for b, c := range per {
		if c.Initial+c.In-c.Out != c.Remaining+c.Sold {
			return fmt.Errorf("%w: bucket %d: initial %d + in %d − out %d ≠ remaining %d + sold %d",
				errBucketBooks, b, c.Initial, c.In, c.Out, c.Remaining, c.Sold)
		}
		initial, remaining, sold = initial+c.Initial, remaining+c.Remaining+c.InFlight, sold+c.Sold
	}
	if initial != remaining+sold {
		return fmt.Errorf("%w: initial %d ≠ remaining %d (in flight included) + sold %d", errBucketBooks, initial, remaining, sold)
	}
	return nil
}
