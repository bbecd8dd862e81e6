package reconcile

import (
	"context"
	"fmt"

	"go.uber.org/zap"

	"seckill/sale"
	"seckill/stock"
)

// A SKU split into buckets gets every check and repair of a SKU that is
// not split, on the sums of its buckets and, where a check is a bucket's
// own (its books, its sold counter against its records, its pending
// index), bucket by bucket: its records are the union of its buckets'
// (stock.Stock.Records), each ticket's repair goes to the bucket its
// number names.

// ledgers reads k's counters: for a SKU split into buckets, the sum of
// its buckets' and each bucket's own (per), after finishing the transfers
// left in flight (each credited once per id; a destination Redis lost is
// refused and the transfer stays in flight, its units counted there: a
// warning, not a drift) and trimming the records of those finished long
// ago (stock.TransferKeep).
func (r *Reconciler) ledgers(ctx context.Context, a *sale.Activity, k *sale.SKU) (stock.Ledger, []stock.Ledger, error) {
	if !k.Split() {
		led, err := r.stock.Ledger(ctx, a.ID, k)
		return led, nil, err
	}
	if _, err := r.stock.FinishTransfers(ctx, a.ID, k); err != nil {
		r.log.Warn("transfers left in flight", zap.Int64("activityId", a.ID), zap.Int64("skuId", k.ID), zap.Error(err))
	}
	if _, err := r.stock.TrimTransfers(ctx, a.ID, k, stock.TransferKeep); err != nil {
		// The record only grows until a later pass trims it.
		r.log.Warn("transfer records not trimmed", zap.Int64("activityId", a.ID), zap.Int64("skuId", k.ID), zap.Error(err))
	}
	per, err := r.stock.BucketLedgers(ctx, a.ID, k)
	if err != nil {
		return stock.Ledger{}, nil, err
	}
	return stock.SumLedgers(per), per, nil
}

// bucketsDrift is the KindBuckets amount of per: the units the buckets are
// off in their own books (initial + credited − debited = remaining +
// sold, each bucket read atomically), the sum of each bucket's
// |imbalance|, and the detail naming every bucket that is off. The
// SKU-wide identity is redis_ledger.
func bucketsDrift(per []stock.Ledger) (int64, string) {
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
	return off, fmt.Sprintf("%d units off over the buckets%s", off, detail)
}

// recordsDrift is the KindRedisRecords amount of a one-unit-per-ticket
// SKU: sold − user records; for a SKU split into buckets each bucket's
// own, summed as |difference| (a bucket over and one under do not cancel),
// the detail giving each bucket's signed difference.
func recordsDrift(led stock.Ledger, per []stock.Ledger) (int64, string) {
	if per == nil {
		return led.Sold - led.Holders, fmt.Sprintf("sold %d, %d user records", led.Sold, led.Holders)
	}
	var off int64
	detail := fmt.Sprintf("sold %d, %d user records", led.Sold, led.Holders)
	for b, c := range per {
		if d := c.Sold - c.Holders; d != 0 && c.Present {
			off += abs(d)
			detail += fmt.Sprintf("; bucket %d: sold %d, %d records (%+d)", b, c.Sold, c.Holders, d)
		}
	}
	return off, detail
}

// settleBuckets is the redis_records repair of a SKU split into buckets:
// each bucket whose sold counter is not its records is settled on its own
// (settle.lua, which checks the bucket's books first). It answers the
// units moved to the remaining stock in all and a detail per bucket.
func (r *Reconciler) settleBuckets(ctx context.Context, a *sale.Activity, k *sale.SKU) (int64, string, error) {
	per, err := r.stock.BucketLedgers(ctx, a.ID, k)
	if err != nil {
		return 0, "", err
	}
	var moved int64
	detail := ""
	for b, c := range per {
		if !c.Present || c.Sold == c.Holders {
			continue
		}
		code, m, err := r.stock.SettleIn(ctx, a.ID, k, b, c.Sold)
		if err != nil {
			return moved, detail, err
		}
		if code == stock.SettleDone && m != 0 {
			moved += m
			detail += fmt.Sprintf("; bucket %d: sold %d settled to its %d records: %+d units to remaining", b, c.Sold, c.Holders, m)
		}
	}
	return moved, detail, nil
}

// missingDetail is the redis_missing detail: for a SKU split into buckets
// it names the buckets Redis lost (per: their ledgers).
func missingDetail(per []stock.Ledger) string {
	if per == nil {
		return "no meta key in Redis: the watcher rebuilds the SKU from the database"
	}
	var lost []int
	for b, l := range per {
		if !l.Present {
			lost = append(lost, b)
		}
	}
	return fmt.Sprintf("buckets %v have no meta key in Redis: the watcher rebuilds them from the database and the other buckets", lost)
}

func abs(n int64) int64 {
	if n < 0 {
		return -n
	}
	return n
}
