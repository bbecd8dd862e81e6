package stock

import (
	"context"
	"testing"

	"seckill/sale"
)

// TestForgedQuantityDoesNotInflateStock: a message naming a held ticket
// but a quantity larger than the occupancy took (a forged copy)
// is released — by the consumer after a failed order, forced — with the
// units the occupancy recorded, never the message's: remaining never
// climbs above initial. One-unit SKUs (no qty entry) and multi-unit SKUs
// (qty entry) both.
func TestForgedQuantityDoesNotInflateStock(t *testing.T) {
	for _, tc := range []struct {
		name  string
		limit int64
		took  int64
	}{{"one unit per ticket", 1, 1}, {"several units per ticket", 5, 2}} {
		t.Run(tc.name, func(t *testing.T) {
			r := newRig(t)
			act := activity(1, 11, 5, false)
			act.SKUs[0].LimitPerUser = tc.limit
			a, k := r.preheat(t, act)
			ctx := context.Background()
			if res, err := r.stock.Occupy(ctx, a, k, 7, "rn-7", tc.took); err != nil || res.Code != CodeOK {
				t.Fatalf("occupy: %+v %v", res, err)
			}
			forged := &sale.Message{RequestNo: "rn-7", ActivityID: 1, SKUID: 11, UserID: 7, Quantity: 99}
			if _, err := r.stock.ClaimBatch(ctx, []*sale.Message{forged}); err != nil {
				t.Fatal(err)
			}
			for range 2 { // twice: a retried release gives nothing back again
				if _, err := r.stock.Release(ctx, forged, true); err != nil {
					t.Fatal(err)
				}
			}
			if c := r.counts(t, 1, 11); c.Remaining != 5 || c.Sold != 0 || c.Holders != 0 {
				t.Fatalf("after the forged release: %+v, want remaining 5 (initial) and nothing sold", c)
			}
		})
	}
}
