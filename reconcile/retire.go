package reconcile

import (
	"context"
	"strings"
	"time"

	"go.uber.org/zap"

	"seckill/sale"
)

// retired reports whether a's keys have outlived their retention at now:
// its end plus Config.KeepAfterEnd (the last pay deadline plus
// order.redis_retention).
func (r *Reconciler) retired(a *sale.Activity, now time.Time) bool {
	return r.cfg.KeepAfterEnd > 0 && !now.Before(a.End.Add(r.cfg.KeepAfterEnd))
}

// heldKinds are the drifts whose evidence is in Redis: while one of them
// is found, the SKU's keys are kept for an operator. The database-side
// kinds (initial, db_snapshot, oversell) are answered from the database
// and keep nothing.
var heldKinds = map[string]bool{KindRedisLedger: true, KindRedisRecords: true, KindOrderWithoutClaim: true,
	KindClaimedWithoutOrder: true, KindOrphan: true, KindBuckets: true}

// retire ends the Redis life of SKU k of a, an activity past its
// retention: the full comparison first (repairing when repair), then —
// when the consumer has provably passed the sale's end, no close of its
// orders waits for its Redis half and no drift whose evidence is in Redis
// is left — the expiry of its keys on every deployment (stock.Expire).
// Otherwise the keys are kept, with a warning, until a later pass. It
// reports whether the keys are gone. Idempotent: a SKU found without keys
// is expired again (a results hash rewritten late, a copy on a shard it
// left) and remembered.
func (r *Reconciler) retire(ctx context.Context, a *sale.Activity, k *sale.SKU, in *fullInputs, repair bool) (SKUReport, bool, error) {
	key := [2]int64{a.ID, k.ID}
	line := SKUReport{ActivityID: a.ID, SKUID: k.ID, Mode: ModeExpired}
	if r.pass.expired[key] {
		return line, true, nil
	}
	led, err := r.stock.Ledger(ctx, a.ID, k)
	if err != nil {
		return line, false, err
	}
	if led.Present {
		var held string
		switch {
		case in.through.Before(a.End.Add(r.cfg.OrphanGrace)):
			held = "the consumer has not provably passed the sale's end"
		case in.pendingSKU[key]:
			held = "a closed order's release is still pending"
		case in.unpaidBefore(ctx, r, a.End):
			held = "unpaid orders past their deadline are not closed yet"
		default:
			if line, err = r.checkSKU(ctx, a, k, in.through, in.pending, repair); err != nil {
				return line, false, err
			}
			left := line.Drifts
			if len(line.Repairs) > 0 {
				again, err := r.checkSKU(ctx, a, k, in.through, in.pending, false)
				if err != nil {
					return line, false, err
				}
				left = again.Drifts
			}
			var kinds []string
			for _, d := range left {
				if heldKinds[d.Kind] {
					kinds = append(kinds, d.Kind)
				}
			}
			if len(kinds) > 0 {
				held = "drift: " + strings.Join(kinds, ", ")
			}
		}
		if held != "" {
			r.log.Warn("keys kept past their retention", zap.Int64("activityId", a.ID), zap.Int64("skuId", k.ID),
				zap.String("reason", held))
			line.Mode = ModeFull
			return line, false, nil
		}
	}
	n, err := r.stock.Expire(ctx, a.ID, k)
	if err != nil {
		return line, false, err
	}
	r.pass.expired[key] = true
	if n > 0 {
		r.m.expired.Inc()
		r.log.Info("keys expired after their retention", zap.Int64("activityId", a.ID), zap.Int64("skuId", k.ID),
			zap.Int64("keys", n), zap.Time("end", a.End))
	}
	line.Mode, line.Redis.Present = ModeExpired, false
	return line, true, nil
}

// forget removes an activity whose every SKU's keys expired from the
// catalog the edges read, and tells them; once per process.
func (r *Reconciler) forget(ctx context.Context, a *sale.Activity) error {
	if r.pass.forgotten[a.ID] {
		return nil
	}
	if err := r.stock.Catalog().Remove(ctx, a.ID); err != nil {
		return err
	}
	r.stock.Publish(ctx, sale.Event{Kind: sale.EventActivity, Activity: a.ID})
	r.pass.forgotten[a.ID] = true
	return nil
}

// unpaidBefore reports whether an order made before t is still waiting
// for its payment: past the retention it is past its deadline too, and the
// closer, behind, will write its close (and its result) to the SKU's keys.
// One indexed read of the oldest unpaid order per pass; an error counts as
// yes.
func (in *fullInputs) unpaidBefore(ctx context.Context, r *Reconciler, t time.Time) bool {
	if !in.unpaidRead {
		in.unpaidRead = true
		os, err := r.st.ExpiredOrders(ctx, r.now(), 1)
		switch {
		case err != nil:
			r.log.Warn("unpaid orders not read; no keys expire this pass", zap.Error(err))
			in.oldestUnpaid = time.Unix(1<<40, 0) // after every end
		case len(os) > 0:
			in.oldestUnpaid = os[0].Created
		}
	}
	return !in.oldestUnpaid.IsZero() && in.oldestUnpaid.Before(t)
}
