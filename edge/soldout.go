package edge

import (
	"context"
	"sync"
	"time"

	"go.uber.org/zap"
)

// StockCheck reports whether a SKU of an activity is sold out as the stock
// ledger (Redis) holds it now: remaining stock 0 or the on-call mark set.
type StockCheck func(ctx context.Context, activity, sku int64) (soldOut bool, err error)

// WithStockCheck lets the edge re-validate its sold-out flags against the
// ledger every half SoldOutTTL: a flag whose SKU is still sold out is
// extended, one whose SKU has stock again is dropped. Without it a flag
// simply expires after SoldOutTTL and the next buyer's request asks the
// engine again. Either way a missed "available" event can hide stock for
// at most SoldOutTTL.
func WithStockCheck(check StockCheck) Option { return func(s *Server) { s.stockCheck = check } }

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

// checkFlags runs until ctx ends.
func (s *Server) checkFlags(ctx context.Context) {
	defer s.wg.Done()
	every := s.cfg.SoldOutTTL / 2
	t := time.NewTicker(every)
	defer t.Stop()
	failing := false
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		s.flagged.m.Range(func(k, v any) bool {
			sku, f := k.(int64), v.(*flagged)
			activity := f.activity
			if activity == 0 {
				a, _, ok := s.cat.Current(sku, time.Unix(0, s.clock.now()))
				if !ok {
					return true
				}
				activity = a.ID
			}
			cctx, cancel := context.WithTimeout(ctx, s.cfg.RedisTimeout)
			out, err := s.stockCheck(cctx, activity, sku)
			cancel()
			if err != nil {
				// The flag runs out on its own; the engine answers next.
				if !failing {
					s.log.Warn("edge sold-out check failed; flags fall back to their TTL", zap.Error(err))
					failing = true
				}
				return ctx.Err() == nil
			}
			failing = false
			if cur, ok := s.flagged.m.Load(sku); !ok || cur != v {
				return true // dropped or raised anew meanwhile: that one is fresher
			}
			if out {
				s.flags.SetWithTTL(sku, soldOutFlag{epoch: s.epoch.Load(), activity: f.activity}, 1, s.cfg.SoldOutTTL)
			} else {
				s.flagged.drop(sku)
				s.flags.Del(sku)
			}
			return true
		})
	}
}
