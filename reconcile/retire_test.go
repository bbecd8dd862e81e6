package reconcile

import (
	"context"
	"strconv"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"go.uber.org/zap/zaptest"

	"seckill/sale"
)

// retiring returns a reconciler whose clock is past r's activity's end
// plus a retention of keep, and whose consumer has committed through at.
func (r *rig) retiring(t *testing.T, keep time.Duration, at, consumed time.Time) *Reconciler {
	cfg := DefaultConfig()
	cfg.KeepAfterEnd = keep
	return New(cfg, r.stock, r.st, r.res, &through{at: consumed}, zaptest.NewLogger(t), prometheus.NewRegistry(),
		WithClock(func() time.Time { return at }))
}

// skuKeys counts the keys of (activity, sku) left in Redis, the results
// hash and the window counters included.
func (r *rig) skuKeys(t *testing.T, sku int64) int {
	t.Helper()
	keys, err := r.redis.Do(t, "KEYS", "sk:{a5:s"+strconv.FormatInt(sku, 10)+"}:*").AsStrSlice()
	if err != nil {
		t.Fatal(err)
	}
	return len(keys)
}

// TestPassExpiresAnEndedSaleAfterItsRetention: past the end plus the
// retention, each SKU is compared in full and its keys go from Redis (the
// results hash with them), the activity leaves the catalog, and the
// on-demand reconciliation calls the SKU expired, not missing. Before the
// retention, or while the consumer's progress is unknown, nothing goes.
func TestPassExpiresAnEndedSaleAfterItsRetention(t *testing.T) {
	runTest(t, func(t *testing.T, r *rig) {
		ctx := context.Background()
		r.order(t, 501, 1)
		r.order(t, 504, 2) // the hot SKU
		keep := time.Hour
		end := r.act.End
		if n := r.skuKeys(t, 501); n == 0 {
			t.Fatal("no keys before the retention")
		}

		// Unpaid orders past their deadline, not closed yet (the closer
		// is behind): kept.
		rc := r.retiring(t, keep, end.Add(keep), end.Add(keep))
		if _, err := rc.Pass(ctx, false); err != nil {
			t.Fatal(err)
		}
		if n := r.skuKeys(t, 501); n == 0 {
			t.Fatal("keys expired while an unpaid order may still be closed into them")
		}
		r.exec(t, "UPDATE seckill_order SET status = 'PAID'") // the buyers paid

		// One second before the retention ends: kept.
		rc = r.retiring(t, keep, end.Add(keep-time.Second), end.Add(keep))
		if _, err := rc.Pass(ctx, false); err != nil {
			t.Fatal(err)
		}
		if n := r.skuKeys(t, 501); n == 0 {
			t.Fatal("keys expired before their retention")
		}
		// The consumer's progress before the sale's end: kept, and held.
		rc = r.retiring(t, keep, end.Add(keep), end.Add(-time.Minute))
		if _, err := rc.Pass(ctx, false); err != nil {
			t.Fatal(err)
		}
		if n := r.skuKeys(t, 501); n == 0 {
			t.Fatal("keys expired while the consumer may still bring a message")
		}
		if got := testutil.ToFloat64(rc.m.held); got != float64(len(r.act.SKUs)) {
			t.Fatalf("expiry held for %v SKUs, want %d", got, len(r.act.SKUs))
		}

		rc = r.retiring(t, keep, end.Add(keep), end.Add(keep))
		rep, err := rc.Pass(ctx, false)
		if err != nil {
			t.Fatal(err)
		}
		for _, l := range rep.SKUs {
			if l.Mode != ModeExpired {
				t.Fatalf("sku %d not expired: %+v", l.SKUID, l)
			}
		}
		for _, k := range r.act.SKUs {
			if n := r.skuKeys(t, k.ID); n != 0 {
				t.Fatalf("sku %d: %d keys left", k.ID, n)
			}
		}
		if n, err := r.redis.Do(t, "EXISTS", sale.ActivityKey(r.act.ID)).AsInt64(); err != nil || n != 0 {
			t.Fatalf("catalog entry left: %d %v", n, err)
		}
		if ok, err := r.redis.Do(t, "SISMEMBER", sale.ActivitiesKey, "5").AsBool(); err != nil || ok {
			t.Fatalf("catalog id left: %v %v", ok, err)
		}
		// Idempotent, and the full reconciliation knows why Redis is empty.
		if rep, err = rc.Pass(ctx, false); err != nil || rep.Drifts != 0 {
			t.Fatalf("the pass after the expiry: %+v %v", rep, err)
		}
		full, err := rc.Run(ctx, false)
		if err != nil {
			t.Fatal(err)
		}
		for _, l := range full.SKUs {
			if l.Mode != ModeExpired || len(l.Drifts) != 0 {
				t.Fatalf("the full reconciliation of an expired SKU: %+v", l)
			}
		}
	})
}

// TestPassKeepsTheKeysOfDrift: a record Redis holds that the database does
// not explain (claimed, no order, never released) keeps the SKU's keys past
// the retention, for an operator; the SKUs that add up go.
func TestPassKeepsTheKeysOfDrift(t *testing.T) {
	runTest(t, func(t *testing.T, r *rig) {
		ctx := context.Background()
		r.order(t, 501, 1)
		r.claim(t, 502, 2) // claimed, its order never written
		r.exec(t, "UPDATE seckill_order SET status = 'PAID'")
		keep := time.Minute
		at := r.act.End.Add(keep)
		rc := r.retiring(t, keep, at, at)
		if _, err := rc.Pass(ctx, false); err != nil {
			t.Fatal(err)
		}
		if n := r.skuKeys(t, 502); n == 0 {
			t.Fatal("the keys of a drift expired")
		}
		if n := r.skuKeys(t, 501); n != 0 {
			t.Fatalf("sku 501 adds up, yet %d keys are left", n)
		}
		if n, err := r.redis.Do(t, "EXISTS", sale.ActivityKey(r.act.ID)).AsInt64(); err != nil || n != 1 {
			t.Fatalf("the catalog entry of an activity with keys left: %d %v", n, err)
		}
		// The repair releases the claim; then the keys go.
		if _, err := rc.Pass(ctx, true); err != nil {
			t.Fatal(err)
		}
		if n := r.skuKeys(t, 502); n != 0 {
			t.Fatalf("after the repair %d keys are left", n)
		}
	})
}
