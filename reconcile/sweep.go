package reconcile

import (
	"context"
	"errors"
	"fmt"

	"go.uber.org/zap"

	"seckill/store"
)

// Sweep releases orphan occupancies: user records that are not claimed,
// whose ticket is older than the grace period, whose message Kafka proves
// is not on its way (the consumer group has committed everything produced
// up to a point past ticket time + grace: lag.ConsumedThrough), and for
// which the database has no order. The release runs with force=false, so
// a ticket the consumer claims at the last moment is left alone (the
// script decides, atomically). The buyer's result becomes FAIL RELEASED
// and the request log records STOCK_OCCUPIED and FAILED.
//
// Each orphan gives back the units its ticket took: 1 on a SKU of one unit
// per ticket, else what the SKU's qty hash recorded at occupy. A ticket of
// a several-units SKU without a recorded quantity (taken before quantities
// were recorded) is left for an operator: the reconciler reports it.
//
// It returns how many occupancies it released.
func (r *Reconciler) Sweep(ctx context.Context) (int, error) {
	r.sweepMu.Lock()
	defer r.sweepMu.Unlock()
	through, err := r.consumedThrough(ctx)
	if err != nil {
		return 0, fmt.Errorf("sweep: %w", err)
	}
	if through.IsZero() {
		return 0, nil
	}
	acts, err := r.st.Activities(ctx)
	if err != nil {
		return 0, fmt.Errorf("sweep: %w", err)
	}
	now := r.now()
	loaded := false
	n := 0
	for i := range acts {
		a := &acts[i]
		for j := range a.SKUs {
			k := &a.SKUs[j]
			led, err := r.stock.Ledger(ctx, a.ID, k)
			if err != nil {
				return n, fmt.Errorf("sweep: %w", err)
			}
			if !led.Present || led.Holders == led.Claimed {
				continue // every record is claimed: no orphan
			}
			recs, err := r.stock.Records(ctx, a.ID, k)
			if err != nil {
				return n, fmt.Errorf("sweep: %w", err)
			}
			for u, rn := range recs.Users {
				if recs.Claimed[rn] || !r.stale(rn, now, through) {
					continue
				}
				if _, err := r.st.OrderByRequest(ctx, rn); !errors.Is(err, store.ErrNotFound) {
					if err != nil {
						return n, fmt.Errorf("sweep: %w", err)
					}
					continue // an order exists: not an orphan (the reconciler looks at it)
				}
				if !loaded {
					if _, _, ok := r.stock.Catalog().Lookup(a.ID, k.ID); !ok {
						if err := r.stock.Catalog().Load(ctx); err != nil {
							return n, fmt.Errorf("sweep: %w", err)
						}
					}
					loaded = true
				}
				q, known := recs.UnitsOf(rn, k.LimitPerUser)
				if !known {
					continue
				}
				ok, err := r.release(ctx, a, k, ticket{user: u, rn: rn, qty: q,
					reason: "orphan: no order, and its message never reached the consumer"})
				if err != nil {
					return n, fmt.Errorf("sweep: %w", err)
				}
				if ok {
					n++
					r.m.orphans.Inc()
					r.log.Warn("orphan occupancy released", zap.String("requestNo", rn), zap.Int64("activityId", a.ID),
						zap.Int64("skuId", k.ID), zap.Int64("userId", u), zap.Time("consumedThrough", through))
				}
			}
		}
	}
	return n, nil
}
