package stock

import (
	"context"
	"errors"
	"testing"
	"time"

	"seckill/sale"
)

// TestWindowTripsAndRecovers: the user × SKU window the occupy script
// counts lets Limit attempts through per Period, answers RATE_LIMITED with
// the time left until it resets, counts each SKU apart (also one on the
// hot shard), does not count the attempt that took a ticket, and lets the
// buyer in again once it has reset.
func TestWindowTripsAndRecovers(t *testing.T) {
	r := newRig(t)
	ctx := context.Background()
	a, k := r.preheat(t, activity(1, 11, 100, false))
	ha, hk := r.preheat(t, activity(2, 22, 100, true))
	x := Extras{WindowLimit: 2, WindowPeriod: 400 * time.Millisecond}
	occupy := func(a *sale.Activity, k *sale.SKU, rn string) OccupyResult {
		t.Helper()
		res, err := r.stock.OccupyWith(ctx, a, k, x, 42, rn, 1)
		if err != nil {
			t.Fatal(err)
		}
		return res
	}
	// The windows are fixed, aligned on the epoch: start early in one so
	// the four attempts below share it.
	if left := x.WindowPeriod - time.Duration(time.Now().UnixNano())%x.WindowPeriod; left < 300*time.Millisecond {
		time.Sleep(left)
	}
	if res := occupy(a, k, "r1"); res.Code != CodeOK {
		t.Fatalf("first attempt: %+v", res)
	}
	// The ticket's attempt is not counted: two more answer DUPLICATE.
	for _, rn := range []string{"r2", "r3"} {
		if res := occupy(a, k, rn); res.Code != CodeDuplicate || res.Holder != "r1" {
			t.Fatalf("attempt %s: %+v", rn, res)
		}
	}
	res := occupy(a, k, "r3b")
	if res.Code != CodeRateLimited || res.RetryAfter <= 0 || res.RetryAfter > 400*time.Millisecond {
		t.Fatalf("fourth attempt: %+v", res)
	}
	if err := res.Err(); !errors.Is(err, ErrRateLimited) {
		t.Fatalf("RATE_LIMITED maps to %v", err)
	}
	if res := occupy(ha, hk, "s1"); res.Code != CodeOK {
		t.Fatalf("another SKU has its own window: %+v", res)
	}
	time.Sleep(res.RetryAfter + 50*time.Millisecond)
	if res := occupy(a, k, "r4"); res.Code != CodeDuplicate || res.Holder != "r1" {
		t.Fatalf("after the window reset: %+v, want the duplicate of r1", res)
	}
}
