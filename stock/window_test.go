package stock

import (
	"context"
	"errors"
	"fmt"
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

// TestWindowCountsTicketsThatAreReleased: the attempt that took a ticket
// is not stored by the occupy script, and a release alone does not count
// it: buyer 78's tickets, released twice, leave a third attempt OK. The
// caller that gives a ticket back counts it (CountAttempt, as the engine's
// compensation after a broker refused the message does): with a limit of
// 2, buyer 77's third attempt in the window is RATE_LIMITED though the
// first two were given back.
func TestWindowCountsTicketsThatAreReleased(t *testing.T) {
	r := newRig(t)
	ctx := context.Background()
	a, k := r.preheat(t, activity(3, 33, 100, false))
	x := Extras{WindowLimit: 2, WindowPeriod: time.Hour}
	for _, user := range []int64{77, 78} {
		for i := 1; i <= 2; i++ {
			rn := fmt.Sprintf("t%d-%d", user, i)
			res, err := r.stock.OccupyWith(ctx, a, k, x, user, rn, 1)
			if err != nil || res.Code != CodeOK {
				t.Fatalf("buyer %d attempt %d: %+v %v", user, i, res, err)
			}
			m := &sale.Message{RequestNo: rn, ActivityID: a.ID, SKUID: k.ID, UserID: user, Quantity: 1}
			if out, err := r.stock.Release(ctx, m, false); err != nil || out != Released {
				t.Fatalf("buyer %d release %d: %v %v", user, i, out, err)
			}
			if user == 77 {
				if err := r.stock.CountAttempt(ctx, m, x); err != nil {
					t.Fatal(err)
				}
			}
		}
	}
	if res, err := r.stock.OccupyWith(ctx, a, k, x, 77, "t77-3", 1); err != nil || res.Code != CodeRateLimited {
		t.Fatalf("third attempt after two tickets given back and counted: %+v %v, want RATE_LIMITED", res, err)
	}
	if res, err := r.stock.OccupyWith(ctx, a, k, x, 78, "t78-3", 1); err != nil || res.Code != CodeOK {
		t.Fatalf("third attempt after two releases not counted: %+v %v, want OK", res, err)
	}
	// The counted hash expires with its window, as the script's does.
	key := sale.RateKey(a.ID, k.ID, time.Now().UnixMilli()/time.Hour.Milliseconds())
	if ms := r.def.Int(t, "PTTL", key); ms <= 0 || ms > time.Hour.Milliseconds()+1000 {
		t.Fatalf("%s PTTL %d ms, want within the window's end and a second", key, ms)
	}
	// With the window off nothing is counted.
	m := &sale.Message{RequestNo: "t79-1", ActivityID: a.ID, SKUID: k.ID, UserID: 79, Quantity: 1}
	if err := r.stock.CountAttempt(ctx, m, Extras{}); err != nil || r.def.Int(t, "HEXISTS", key, "79") != 0 {
		t.Fatalf("a count with the window off: %v", err)
	}
}
