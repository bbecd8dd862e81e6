package engine

import (
	"context"
	"errors"
	"testing"
	"time"

	"seckill/internal/testenv"
	"seckill/sale"
	"seckill/stock"
)

// TestWindowAnswersRateLimitedWithRetryAfter: the engine's occupy script
// counts the user × SKU window (engine.Window, from edge.rate): past the
// limit a buyer is stock.ErrRateLimited with the time until the window
// resets in Ticket.RetryAfter, in process and over the sidecar protocol
// alike; SetWindow changes it on the running engine, limit 0 turns it off,
// and a bad window is refused naming its key.
func TestWindowAnswersRateLimitedWithRetryAfter(t *testing.T) {
	r := newRig(t)
	k := testenv.StartKafka(t, 1)
	loc := newLocal(t, r, k.Addrs)
	if err := loc.SetWindow(Window{Limit: 2, Period: time.Hour}); err != nil {
		t.Fatal(err)
	}
	r.preheat(t, activity(1, 1001, 100, true))
	ctx := context.Background()
	for _, m := range []struct {
		name string
		user int64
		e    Engine
	}{
		{"in-process", 5, loc},
		{"sidecar", 6, startSidecar(t, loc, r.cat, ClientConfig{})},
	} {
		t.Run(m.name, func(t *testing.T) {
			if _, err := m.e.Occupy(ctx, r.order(t, 1001, m.user)); err != nil {
				t.Fatalf("first attempt: %v", err)
			}
			if _, err := m.e.Occupy(ctx, r.order(t, 1001, m.user)); !errors.Is(err, stock.ErrDuplicate) {
				t.Fatalf("second attempt: %v, want duplicate", err)
			}
			// The windows are fixed hours of the unix epoch: the wait is
			// what is left of this one.
			left := time.Until(time.Now().Truncate(time.Hour).Add(time.Hour))
			tk, err := m.e.Occupy(ctx, r.order(t, 1001, m.user))
			if !errors.Is(err, stock.ErrRateLimited) || tk.RetryAfter <= left-5*time.Second || tk.RetryAfter > left+time.Second || tk.RequestNo != "" {
				t.Fatalf("third attempt: %+v %v, want rate limited for the rest of the hour (%v)", tk, err, left)
			}
		})
	}
	if err := loc.SetWindow(Window{}); err != nil {
		t.Fatal(err)
	}
	if _, err := loc.Occupy(ctx, r.order(t, 1001, 5)); !errors.Is(err, stock.ErrDuplicate) {
		t.Fatalf("with the window off: %v, want duplicate", err)
	}
	if err := loc.SetWindow(Window{Limit: 1}); err == nil || err.Error() != "edge.rate.user_sku_window must be at least 1ms" {
		t.Fatalf("a window without a period: %v", err)
	}
}

// TestDrainedAttemptIsNotCountedInTheWindow: the user × SKU window counts
// a buyer's requests; a drained attempt (its Place in line) is one request
// the line may occupy again — retried after a busy answer, redelivered
// after a drainer died — and must not spend the buyer's window: with a
// window of 1, occupying the attempt twice answers its own record
// (DUPLICATE naming its own ticket, which the drainer takes as done), not
// RATE_LIMITED.
func TestDrainedAttemptIsNotCountedInTheWindow(t *testing.T) {
	r := newRig(t)
	k := testenv.StartKafka(t, 1)
	e := newLocal(t, r, k.Addrs)
	if err := e.SetWindow(Window{Limit: 1, Period: 10 * time.Second}); err != nil {
		t.Fatal(err)
	}
	r.preheat(t, activity(1, 1001, 5, false))
	req := r.order(t, 1001, 3)
	req.RequestNo, req.Place = sale.NewRequestNos(1).Next(1, 1001), "0:7"
	for try := range 2 {
		tk, err := e.Occupy(context.Background(), req)
		if try == 0 && err != nil || try == 1 && (!errors.Is(err, stock.ErrDuplicate) || tk.RequestNo != req.RequestNo) {
			t.Fatalf("occupy %d of the drained attempt: %+v %v", try+1, tk, err)
		}
	}
	// A buyer's own requests still spend it.
	if _, err := e.Occupy(context.Background(), r.order(t, 1001, 4)); err != nil {
		t.Fatal(err)
	}
	if _, err := e.Occupy(context.Background(), r.order(t, 1001, 4)); !errors.Is(err, stock.ErrRateLimited) {
		t.Fatalf("a buyer's second request in a window of 1: %v, want RATE_LIMITED", err)
	}
}
