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
// hot shard), and lets the buyer in again once it has reset.
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
	// the three attempts below share it.
	if left := x.WindowPeriod - time.Duration(time.Now().UnixNano())%x.WindowPeriod; left < 300*time.Millisecond {
		time.Sleep(left)
	}
	if res := occupy(a, k, "r1"); res.Code != CodeOK {
		t.Fatalf("first attempt: %+v", res)
	}
	if res := occupy(a, k, "r2"); res.Code != CodeDuplicate {
		t.Fatalf("second attempt: %+v", res)
	}
	res := occupy(a, k, "r3")
	if res.Code != CodeRateLimited || res.RetryAfter <= 0 || res.RetryAfter > 400*time.Millisecond {
		t.Fatalf("third attempt: %+v", res)
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

// TestWindowCountsTicketsThatAreReleased: the attempt that took a ticket
// counts in the window too. A buyer whose ticket is released each time
// (the engine's compensation after a broker refused the message) may try
// again, but not without end: with a limit of 2, the third attempt in the
// window is RATE_LIMITED though the first two were given back.
func TestWindowCountsTicketsThatAreReleased(t *testing.T) {
	r := newRig(t)
	ctx := context.Background()
	a, k := r.preheat(t, activity(3, 33, 100, false))
	x := Extras{WindowLimit: 2, WindowPeriod: time.Hour}
	for i, rn := range []string{"t1", "t2"} {
		res, err := r.stock.OccupyWith(ctx, a, k, x, 77, rn, 1)
		if err != nil || res.Code != CodeOK {
			t.Fatalf("attempt %d: %+v %v", i+1, res, err)
		}
		m := &sale.Message{RequestNo: rn, ActivityID: a.ID, SKUID: k.ID, UserID: 77, Quantity: 1}
		if out, err := r.stock.Release(ctx, m, false); err != nil || out != Released {
			t.Fatalf("release %d: %v %v", i+1, out, err)
		}
	}
	if res, err := r.stock.OccupyWith(ctx, a, k, x, 77, "t3", 1); err != nil || res.Code != CodeRateLimited {
		t.Fatalf("third attempt after two released tickets: %+v %v, want RATE_LIMITED", res, err)
	}
}
