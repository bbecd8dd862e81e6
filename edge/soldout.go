package edge

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/dgraph-io/ristretto/v2"
	"go.uber.org/zap"
)

// soldOutFlag is a local sold-out flag. It counts only while its epoch is
// the flags' own: every re-subscription to the events channel bumps the
// epoch, dropping flags whose "available" event may have been missed while
// the subscription was down.
type soldOutFlag struct {
	epoch    uint64
	activity int64     // the activity it was raised for; 0: any
	until    time.Time // when it lapses without another raise (monotonic)
}

// soldOutFlags are the edge's per-SKU sold-out flags. Three sources raise a
// flag, all through raise: the engine's answer (nothing left), a "soldout"
// event, and the stock check that re-validates raised flags. A flag is
// dropped by an "available" event or the stock check, and expires after
// edge.soldout_ttl without a raise (the fallback for a missed event). Safe
// for concurrent use; soldOut takes no lock and does not allocate.
type soldOutFlags struct {
	cache   *ristretto.Cache[int64, soldOutFlag] // SKU -> flag
	epoch   atomic.Uint64                        // see soldOutFlag
	ttl     time.Duration                        // edge.soldout_ttl
	check   StockCheck                           // optional (WithStockCheck)
	flagged flaggedSKUs                          // the SKUs with a raised flag, for check
}

// open makes the cache. Sized so that admission never refuses an entry for
// any realistic number of SKUs (cost 1 each).
func (f *soldOutFlags) open() error {
	cache, err := ristretto.NewCache(&ristretto.Config[int64, soldOutFlag]{
		NumCounters: 1 << 18, MaxCost: 1 << 16, BufferItems: 64, IgnoreInternalCost: true,
	})
	if err != nil {
		return fmt.Errorf("edge sold-out cache: %w", err)
	}
	f.cache = cache
	return nil
}

// soldOut reports a live flag for sku in activity now.
func (f *soldOutFlags) soldOut(sku, activity int64) bool {
	return f.soldOutAt(sku, activity, time.Now())
}

// soldOutAt reports a live flag for sku in activity at, a time.Now
// reading (the request's, fasthttp's RequestCtx.Time): the flag carries
// its own lapse, so a lookup reads no clock. No allocation.
func (f *soldOutFlags) soldOutAt(sku, activity int64, at time.Time) bool {
	fl, ok := f.cache.Get(sku)
	return ok && fl.epoch == f.epoch.Load() && (fl.activity == 0 || fl.activity == activity) && at.Before(fl.until)
}

// raise raises (or refreshes) the flag of sku in activity for SoldOutTTL:
// the one way a flag goes up, whatever told the edge. The set is buffered
// by ristretto; raise waits until it is applied, so the flag holds for the
// next request already and a drop that follows (an available event)
// cannot be overtaken by it.
func (f *soldOutFlags) raise(sku, activity int64) {
	// The lapse is the flag's own, not a ristretto TTL: a cache entry with
	// a TTL costs a clock read on every Get.
	f.cache.Set(sku, soldOutFlag{epoch: f.epoch.Load(), activity: activity, until: time.Now().Add(f.ttl)}, 1)
	f.cache.Wait()
	if f.check != nil {
		f.flagged.raise(sku, activity)
	}
}

// drop takes the flag of sku down at once. Del is immediate, but a raise of
// the same key still in ristretto's buffer would land after it and raise
// the flag again until the buffered delete follows: delete, let the buffer
// drain, delete again, so a flag never outlives the stock coming back.
func (f *soldOutFlags) drop(sku int64) {
	f.flagged.drop(sku)
	f.cache.Del(sku)
	f.cache.Wait()
	f.cache.Del(sku)
}

// newEpoch drops every flag raised so far (events may have been missed).
func (f *soldOutFlags) newEpoch() { f.epoch.Add(1) }

// close releases the cache; nothing may use the flags after it.
func (f *soldOutFlags) close() { f.cache.Close() }

// StockCheck reports whether a SKU of an activity is sold out as the stock
// ledger (Redis) holds it now: remaining stock 0 or the on-call mark set.
type StockCheck func(ctx context.Context, activity, sku int64) (soldOut bool, err error)

// WithStockCheck lets the edge re-validate its sold-out flags against the
// ledger every half SoldOutTTL: a flag whose SKU is still sold out is
// extended, one whose SKU has stock again is dropped. Without it a flag
// simply expires after SoldOutTTL and the next buyer's request asks the
// engine again. Either way a missed "available" event can hide stock for
// at most SoldOutTTL.
func WithStockCheck(check StockCheck) Option { return func(s *Server) { s.flags.check = check } }

// flagged is one SKU with a raised flag; its identity tells the checker
// whether the flag was dropped or raised anew while Redis was being read.
type flagged struct{ activity int64 }

// flaggedSKUs tracks the raised flags for the checker. No lock on the
// request path: a sync.Map of SKU -> *flagged.
type flaggedSKUs struct{ m sync.Map }

func (f *flaggedSKUs) raise(sku, activity int64) {
	if cur, ok := f.m.Load(sku); ok && cur.(*flagged).activity == activity {
		return // already tracked: no allocation on repeated raises
	}
	f.m.Store(sku, &flagged{activity: activity})
}

func (f *flaggedSKUs) drop(sku int64) { f.m.Delete(sku) }

// recheck runs the stock check every half SoldOutTTL until ctx ends, each
// call bounded by timeout (edge.redis_timeout). current names the activity
// a flag raised for any activity (0) is checked in.
func (f *soldOutFlags) recheck(ctx context.Context, timeout time.Duration, current func(sku int64) (int64, bool), log *zap.Logger) {
	t := time.NewTicker(f.ttl / 2)
	defer t.Stop()
	failing := false
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		f.flagged.m.Range(func(k, v any) bool {
			sku, fl := k.(int64), v.(*flagged)
			activity := fl.activity
			if activity == 0 {
				var ok bool
				if activity, ok = current(sku); !ok {
					return true
				}
			}
			cctx, cancel := context.WithTimeout(ctx, timeout)
			out, err := f.check(cctx, activity, sku)
			cancel()
			if err != nil {
				// The flag runs out on its own; the engine answers next.
				if !failing {
					log.Warn("edge sold-out check failed; flags fall back to their TTL", zap.Error(err))
					failing = true
				}
				return ctx.Err() == nil
			}
			failing = false
			if cur, ok := f.flagged.m.Load(sku); !ok || cur != v {
				return true // dropped or raised anew meanwhile: that one is fresher
			}
			if out {
				f.raise(sku, fl.activity)
			} else {
				f.drop(sku)
			}
			return true
		})
	}
}
