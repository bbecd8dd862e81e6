package reconcile

import (
	"context"
	"errors"
	"fmt"
	"sort"

	"go.uber.org/zap"

	"seckill/internal/shard"
	"seckill/sale"
	"seckill/stock"
	"seckill/store"
)

// Watch finds the SKUs of the database's open activities (not yet ended)
// whose keys Redis lost — a restart without persistence, a failover to an
// empty replica, an eviction — and writes them back from the database, one
// atomic script per SKU (stock.Stock.Rebuild): remaining = initial −
// ordered, a claimed record for every live order, then the meta that makes
// the SKU sellable again, and the close of every order closed unpaid (for
// activities that forbid buying again after a close). The activity — its
// re-buy switch included — is the database's row, never the catalog
// snapshot, so a process started after the loss (empty catalog) rebuilds
// exactly what one that saw the sale would. Until then the occupy script
// finds no meta and answers MISSING, which buyers read as 503 BUSY (the
// catalog keeps the activities Redis lost, so the edge does not call the
// SKU unknown): the SKU is not sold, never sold from config.
//
// Occupancies that were live when Redis lost its data are not rebuilt:
// they are gone with it, and their messages fail the claim (FAIL RELEASED),
// so initial − ordered is exactly what may still be sold. An order whose
// transaction commits after the rebuild read the orders is the one case
// left: Redis then sells one unit too many, which the database snapshot
// refuses (FAIL SOLD_OUT, never an oversell) and the reconciler reports
// and settles.
//
// A SKU split into buckets is watched bucket by bucket: the buckets whose
// meta is missing are rebuilt from the database and from what the
// surviving buckets hold and recorded of their transfers with them
// (stock.Stock.RebuildBuckets), while the survivors keep selling; all of
// them lost at once is the SKU's rebuild spread over its buckets.
//
// A SKU is rebuilt when two checks in a row find it missing (so at most
// one watch interval late): an activity being created is written to the
// database a moment before Redis. It also puts back catalog entries the
// default Redis lost, by the same two-checks rule. It returns how many SKUs
// it rebuilt.
//
// A Redis that restarted on its files answers LOADING until it has read
// them: it has the keys, just not yet. The watch then rebuilds nothing and
// returns without an error — it waits for the next period — and logs once
// when the loading begins and once when it ends, not every period.
func (r *Reconciler) Watch(ctx context.Context) (n int, err error) {
	r.watchMu.Lock()
	defer r.watchMu.Unlock()
	defer func() {
		if shard.IsLoading(err) {
			if !r.loading {
				r.loading = true
				r.log.Info("Redis is loading its dataset: the watcher rebuilds nothing and waits", zap.Error(err))
			}
			err = nil
			return
		}
		if err == nil && r.loading {
			r.loading = false
			r.log.Info("Redis has loaded its dataset: the watcher resumes")
		}
	}()
	now := r.now()
	// Read every time: three small queries, and an activity created a
	// moment ago is watched at once.
	acts, err := r.st.Activities(ctx)
	if err != nil {
		return 0, fmt.Errorf("watch: %w", err)
	}
	c := r.stock.Shards().Default
	missing := map[[3]int64]bool{}
	defer func() { r.missing = missing }()
	for i := range acts {
		a := &acts[i]
		if !a.End.After(now) {
			continue
		}
		// Everything the rebuild and the put-back write comes from the
		// database's row, the re-buy switch included: it is written first
		// by every change (the admin API, preheat at start), while this
		// process's catalog snapshot is empty when it started after the
		// loss and may lag another process's change of the activity.
		for j := range a.SKUs {
			k := &a.SKUs[j]
			if k.Split() {
				ok, err := r.watchBuckets(ctx, a, k, missing)
				if err != nil {
					return n, fmt.Errorf("watch: %w", err)
				}
				if ok {
					n++
				}
				continue
			}
			led, err := r.stock.Ledger(ctx, a.ID, k)
			if errors.Is(err, shard.ErrNoShard) {
				// The SKU names a hot shard this process's redis.hot
				// lacks: a process configured with it watches the SKU;
				// this one must not fail the other SKUs' watch for it.
				continue
			}
			if err != nil {
				return n, fmt.Errorf("watch: %w", err)
			}
			if led.Present {
				continue
			}
			// Missing at two checks in a row: a SKU whose activity is
			// being created (database first, Redis a moment later) is not
			// a loss.
			key := [3]int64{a.ID, k.ID, sale.NoBucket}
			missing[key] = true
			if !r.missing[key] {
				continue
			}
			sn, refs, err := r.st.Ledger(ctx, a.ID, k.ID)
			if errors.Is(err, store.ErrNotFound) {
				continue
			}
			if err != nil {
				return n, fmt.Errorf("watch: %w", err)
			}
			ordered, holds, closed := holdsOf(refs)
			ok, err := r.stock.Rebuild(ctx, a, k, sn.Initial, ordered, holds, closed)
			if err != nil {
				return n, fmt.Errorf("watch: %w", err)
			}
			if ok {
				n++
				r.m.rebuilds.Inc()
				r.log.Warn("Redis lost the SKU; rebuilt from the database", zap.Int64("activityId", a.ID),
					zap.Int64("skuId", k.ID), zap.Int64("initial", sn.Initial), zap.Int64("ordered", ordered),
					zap.Int("records", len(holds)))
			}
		}
		exists, err := c.Do(ctx, c.B().Exists().Key(sale.ActivityKey(a.ID)).Build()).AsInt64()
		if err != nil {
			return n, fmt.Errorf("watch: %w", err)
		}
		if exists == 0 {
			// Missing at two checks in a row too: preheat writes the
			// catalog entry last, so one check during a creation (or at
			// a process's start) finds it missing for no loss at all.
			key := [3]int64{a.ID, 0, sale.NoBucket} // SKU ids are positive: 0 stands for the catalog entry
			missing[key] = true
			if !r.missing[key] {
				continue
			}
			if err := r.stock.Catalog().Put(ctx, *a); err != nil {
				return n, fmt.Errorf("watch: %w", err)
			}
			r.stock.Publish(ctx, sale.Event{Kind: sale.EventActivity, Activity: a.ID})
			r.log.Warn("Redis lost the catalog entry; put back from the database", zap.Int64("activityId", a.ID))
		}
	}
	return n, nil
}

// holdsOf splits a SKU's orders into the live ones (and their units) and
// the closed ones, oldest first.
func holdsOf(refs []store.OrderRef) (ordered int64, holds, closed []stock.Hold) {
	for _, o := range refs {
		h := stock.Hold{UserID: o.UserID, RequestNo: o.RequestNo, Quantity: o.Quantity}
		if o.Live() {
			ordered += o.Quantity
			holds = append(holds, h)
		} else {
			closed = append(closed, h)
		}
	}
	sortByCreated(refs, closed)
	return ordered, holds, closed
}

// watchBuckets is Watch for a SKU split into buckets: the buckets whose
// meta is missing at two checks in a row are rebuilt from the database and
// the surviving buckets (stock.Stock.RebuildBuckets: each lost bucket in
// one atomic script, the others selling meanwhile). It reports whether it
// rebuilt any.
func (r *Reconciler) watchBuckets(ctx context.Context, a *sale.Activity, k *sale.SKU, missing map[[3]int64]bool) (bool, error) {
	per, err := r.stock.BucketLedgers(ctx, a.ID, k)
	if errors.Is(err, shard.ErrNoShard) {
		return false, nil // as for a SKU that is not split (Watch)
	}
	if err != nil {
		return false, err
	}
	lost, due := 0, true
	for b, l := range per {
		if l.Present {
			continue
		}
		key := [3]int64{a.ID, k.ID, int64(b)}
		missing[key] = true
		lost++
		due = due && r.missing[key] // every lost bucket waits for its second check
	}
	if lost == 0 || !due {
		return false, nil
	}
	sn, refs, err := r.st.Ledger(ctx, a.ID, k.ID)
	if errors.Is(err, store.ErrNotFound) {
		return false, nil
	}
	if err != nil {
		return false, err
	}
	ordered, holds, closed := holdsOf(refs)
	rebuilt, err := r.stock.RebuildBuckets(ctx, a, k, sn.Initial, holds, closed)
	if errors.Is(err, stock.ErrBucketsMoving) {
		return false, nil // the next watch reads them again
	}
	if len(rebuilt) > 0 {
		r.m.rebuilds.Inc()
		r.log.Warn("Redis lost buckets of the SKU; rebuilt from the database and the other buckets",
			zap.Int64("activityId", a.ID), zap.Int64("skuId", k.ID), zap.Ints("buckets", rebuilt),
			zap.Int64("initial", sn.Initial), zap.Int64("ordered", ordered), zap.Error(err))
	}
	return len(rebuilt) > 0, err
}

// sortByCreated orders closed (built from refs in refs' order) oldest order
// first, so that a buyer closed twice keeps the latest close.
func sortByCreated(refs []store.OrderRef, closed []stock.Hold) {
	at := make(map[string]int64, len(closed))
	for _, o := range refs {
		at[o.RequestNo] = o.Created.UnixNano()
	}
	sort.SliceStable(closed, func(i, j int) bool { return at[closed[i].RequestNo] < at[closed[j].RequestNo] })
}
