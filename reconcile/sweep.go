package reconcile

import (
	"context"
	"errors"
	"fmt"
	"time"

	"go.uber.org/zap"

	"seckill/sale"
	"seckill/store"
)

// sweepPage is how many pending-journal entries one read judges at most
// (stock.Stock.PendingIn also bounds the tickets).
const sweepPage = 64

// Sweep releases orphan occupancies: user records that are not claimed,
// whose ticket is older than the grace period, whose message Kafka proves
// is not on its way (the consumer group has committed everything produced
// up to a point past ticket time + grace: lag.ConsumedThrough), and for
// which the database has no order. The release runs with force=false, so
// a ticket the consumer claims at the last moment is left alone (the
// script decides, atomically). The buyer's result becomes FAIL RELEASED
// and the request log records STOCK_OCCUPIED and FAILED, the remark saying
// whether a message naming the ticket was dead-lettered (orphanReason).
// This is how every acknowledged ticket whose message the consumer
// dead-letters without acting on it ends: the consumer releases only what
// a verified message names, the sweeper only what Redis, the database and
// Kafka's committed offsets together prove orphaned.
//
// It reads only the SKU's pending journal (stock.Stock.Pending: one entry
// per occupy call, by accept time), up to min(now, consumed-through) −
// grace, a page at a time: one script call per SKU when nothing is that
// old, whatever number of buyers the SKU has had. The read drops the
// entries it finds spent (every ticket claimed or released) and returns
// the tickets still held unclaimed; each is then judged by its requestNo's
// time as before (the journal's time is Redis's clock, the requestNo's the
// engine's). A ticket taken before the journal existed is not in it until
// the reconciler's next full comparison puts it there.
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
	before := now
	if through.Before(before) {
		before = through
	}
	before = before.Add(-r.cfg.OrphanGrace)
	n := 0
	// A SKU whose shard is down is left for the next sweep; the others
	// are swept all the same.
	var failed skuErrors
	down := r.newShardsDown()
	for i := range acts {
		a := &acts[i]
		for j := range a.SKUs {
			if ctx.Err() != nil {
				break
			}
			m, err := r.sweepSKU(ctx, down, a, &a.SKUs[j], before, now, through)
			n += m
			if err != nil {
				failed.add(nil, a, &a.SKUs[j], err)
			}
		}
	}
	if err := failed.err(ctx); err != nil {
		return n, fmt.Errorf("sweep: %w", err)
	}
	return n, nil
}

// orphanReason says why an orphan got no order: the consumer dead-lettered
// a message naming it (its history has the DEAD_LETTERED step the
// consumer wrote: a message it could not verify, or could not decode as
// the engine writes it, which it never acts on), or its message never
// reached the consumer.
func (r *Reconciler) orphanReason(ctx context.Context, rn string) (string, error) {
	evs, err := r.st.RequestEvents(ctx, rn)
	if err != nil {
		return "", err
	}
	for i := len(evs) - 1; i >= 0; i-- {
		if evs[i].Status == store.EventDeadLettered {
			return "orphan: no order, its message was dead-lettered (" + evs[i].Remark + ")", nil
		}
	}
	return "orphan: no order, and its message never reached the consumer", nil
}

// sweepSKU sweeps one SKU's pending tickets accepted before before.
func (r *Reconciler) sweepSKU(ctx context.Context, down *shardsDown, a *sale.Activity, k *sale.SKU, before, now, through time.Time) (int, error) {
	// A SKU split into buckets has a pending journal per bucket; a ticket's
	// release goes to the bucket its number names. A bucket whose shard is
	// down does not keep the others from being swept.
	n := 0
	var errs []error
	for _, b := range k.BucketIndexes() {
		if ctx.Err() != nil {
			break
		}
		bucketErr := func(err error) error {
			if b >= 0 {
				err = fmt.Errorf("bucket %d: %w", b, err)
			}
			return err
		}
		if err := down.skip(a, k, b); err != nil {
			errs = append(errs, bucketErr(err))
			continue
		}
		m, err := r.sweepBucket(ctx, a, k, b, before, now, through)
		n += m
		if err != nil {
			errs = append(errs, bucketErr(err))
			down.failed(ctx, a, k, b)
		}
	}
	return n, errors.Join(errs...)
}

// sweepBucket sweeps the pending journal of bucket b of k (sale.NoBucket:
// the SKU's own).
func (r *Reconciler) sweepBucket(ctx context.Context, a *sale.Activity, k *sale.SKU, b int, before, now, through time.Time) (int, error) {
	n := 0
	routed := false
	// offset skips the entries earlier pages kept in the journal: an entry
	// with a ticket held unclaimed stays until a later read finds it spent
	// (this sweep's releases included), so each page either shrinks the
	// journal below before or moves offset on by what it kept.
	offset := 0
	for {
		page, err := r.stock.PendingIn(ctx, a.ID, k, b, before, offset, sweepPage)
		if err != nil {
			return n, err
		}
		for _, p := range page.Tickets {
			if !r.stale(p.RequestNo, now, through) {
				continue
			}
			if _, err := r.st.OrderByRequest(ctx, p.RequestNo); !errors.Is(err, store.ErrNotFound) {
				if err != nil {
					return n, err
				}
				continue // an order exists: not an orphan (the reconciler looks at it)
			}
			q := p.Units
			if q == 0 {
				if k.LimitPerUser > 1 {
					continue // units known only to the lost message
				}
				q = 1
			}
			if !routed {
				// Release routes by the catalog: a SKU it does not know
				// would be looked for on the wrong shard.
				cat := r.stock.Catalog()
				if _, _, ok := cat.Lookup(a.ID, k.ID); !ok {
					if err := cat.Load(ctx); err != nil {
						return n, err
					}
					if _, _, ok := cat.Lookup(a.ID, k.ID); !ok {
						return n, nil
					}
				}
				routed = true
			}
			reason, err := r.orphanReason(ctx, p.RequestNo)
			if err != nil {
				return n, err
			}
			ok, err := r.release(ctx, a, k, ticket{user: p.UserID, rn: p.RequestNo, qty: q, reason: reason})
			if err != nil {
				return n, err
			}
			if ok {
				n++
				r.m.orphans.Inc()
				r.log.Warn("orphan occupancy released", zap.String("requestNo", p.RequestNo), zap.Int64("activityId", a.ID),
					zap.Int64("skuId", k.ID), zap.Int64("userId", p.UserID), zap.Time("consumedThrough", through))
			}
		}
		if !page.More {
			return n, nil
		}
		offset += page.Kept
	}
}
