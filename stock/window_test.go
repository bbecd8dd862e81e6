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

// TestWindowCountsTicketsThatAreReleased: the attempt that took a ticket
// is not stored by the occupy script; the release that gives the ticket
// back counts it (Stock.SetWindow), whichever path releases it — Release
// (the engine's compensation after a broker refused the message),
// ReleaseBatch (the consumer, the sweeper, a WAIT that failed),
// ReleaseClosed (an unpaid close). With a limit of 2 a buyer's third
// attempt after two tickets given back is RATE_LIMITED. ReleaseUncounted
// (a drained attempt's) and a Stock without a window count nothing: that
// buyer's third attempt is OK.
func TestWindowCountsTicketsThatAreReleased(t *testing.T) {
	r := newRig(t)
	ctx := context.Background()
	a, k := r.preheat(t, activity(3, 33, 100, false))
	x := Extras{WindowLimit: 2, WindowPeriod: time.Hour}
	ids := sale.NewRequestNos(1)
	// The windows are fixed hours of the epoch: start early in one.
	if left := time.Until(time.Now().Truncate(time.Hour).Add(time.Hour)); left < time.Minute {
		time.Sleep(left)
	}
	releases := map[string]func(m *sale.Message) (ReleaseOutcome, error){
		"Release": func(m *sale.Message) (ReleaseOutcome, error) { return r.stock.Release(ctx, m, false) },
		"ReleaseBatch": func(m *sale.Message) (ReleaseOutcome, error) {
			o, err := r.stock.ReleaseBatch(ctx, []*sale.Message{m}, true)
			return o[0], err
		},
		"ReleaseClosed":    func(m *sale.Message) (ReleaseOutcome, error) { return r.stock.ReleaseClosed(ctx, m) },
		"ReleaseUncounted": func(m *sale.Message) (ReleaseOutcome, error) { return r.stock.ReleaseUncounted(ctx, m) },
		"no window": func(m *sale.Message) (ReleaseOutcome, error) {
			r.stock.SetWindow(0, 0)
			defer r.stock.SetWindow(x.WindowLimit, x.WindowPeriod)
			return r.stock.Release(ctx, m, false)
		},
	}
	r.stock.SetWindow(x.WindowLimit, x.WindowPeriod)
	user := int64(70)
	for name, release := range releases {
		user++
		for i := 1; i <= 2; i++ {
			rn := ids.Next(a.ID, k.ID)
			res, err := r.stock.OccupyWith(ctx, a, k, x, user, rn, 1)
			if err != nil || res.Code != CodeOK {
				t.Fatalf("%s: attempt %d: %+v %v", name, i, res, err)
			}
			m := &sale.Message{RequestNo: rn, ActivityID: a.ID, SKUID: k.ID, UserID: user, Quantity: 1}
			if out, err := release(m); err != nil || out != Released {
				t.Fatalf("%s: release %d: %v %v", name, i, out, err)
			}
			// A ticket is given back once: a second release counts nothing.
			if out, err := release(m); err != nil || out != NotHeld {
				t.Fatalf("%s: release %d again: %v %v", name, i, out, err)
			}
		}
		want := CodeRateLimited
		if name == "ReleaseUncounted" || name == "no window" {
			want = CodeOK
		}
		if res, err := r.stock.OccupyWith(ctx, a, k, x, user, ids.Next(a.ID, k.ID), 1); err != nil || res.Code != want {
			t.Fatalf("%s: third attempt after two tickets given back: %+v %v, want %s", name, res, err, want)
		}
	}
	// The release sets the window hash's expiry as the occupy script does:
	// the window's end and a second of grace, by Redis' clock.
	key := sale.RateKey(a.ID, k.ID, time.Now().UnixMilli()/time.Hour.Milliseconds())
	left := time.Until(time.Now().Truncate(time.Hour).Add(time.Hour)).Milliseconds()
	if ms := r.def.Int(t, "PTTL", key); ms < left-5000 || ms > left+1500 {
		t.Fatalf("%s PTTL %d ms, want the %d ms left in the window and a second", key, ms, left)
	}
}

// TestOneReleaseCountsEachReleasedBuyerOnce: a release of several tickets
// in one call adds one attempt to each released buyer's own count, keeping
// what the window held; the same ticket twice is counted once and a ticket
// not held counts nothing.
func TestOneReleaseCountsEachReleasedBuyerOnce(t *testing.T) {
	r := newRig(t)
	ctx := context.Background()
	a, k := r.preheat(t, activity(4, 44, 100, false))
	x := Extras{WindowLimit: 5, WindowPeriod: time.Hour}
	if left := time.Until(time.Now().Truncate(time.Hour).Add(time.Hour)); left < time.Minute {
		time.Sleep(left)
	}
	r.stock.SetWindow(x.WindowLimit, x.WindowPeriod)
	key := sale.RateKey(a.ID, k.ID, time.Now().UnixMilli()/time.Hour.Milliseconds())
	ids := sale.NewRequestNos(1)
	msg := func(user int64) *sale.Message {
		t.Helper()
		rn := ids.Next(a.ID, k.ID)
		if res, err := r.stock.OccupyWith(ctx, a, k, x, user, rn, 1); err != nil || res.Code != CodeOK {
			t.Fatalf("occupy of %d: %+v %v", user, res, err)
		}
		return &sale.Message{RequestNo: rn, ActivityID: a.ID, SKUID: k.ID, UserID: user, Quantity: 1}
	}
	m1, m2, m3 := msg(201), msg(202), msg(203)
	// 201 was refused twice in this window before (the occupy script's
	// count); 203's ticket is not held any more.
	r.def.Do(t, "HSET", key, "201", "2")
	if out, err := r.stock.ReleaseUncounted(ctx, m3); err != nil || out != Released {
		t.Fatalf("release of 203: %v %v", out, err)
	}
	out, err := r.stock.ReleaseBatch(ctx, []*sale.Message{m1, m2, m2, m3}, false)
	if err != nil {
		t.Fatal(err)
	}
	if want := []ReleaseOutcome{Released, Released, NotHeld, NotHeld}; len(out) != 4 || out[0] != want[0] || out[1] != want[1] || out[2] != want[2] || out[3] != want[3] {
		t.Fatalf("outcomes %v, want %v", out, want)
	}
	got, err := r.def.Do(t, "HGETALL", key).AsStrMap()
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 2 || got["201"] != "3" || got["202"] != "1" {
		t.Fatalf("window counts %v, want 201: 3 (2 + its ticket) and 202: 1, 203 none", got)
	}
}
