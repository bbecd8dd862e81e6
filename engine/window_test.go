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
// alike (the attempt that took a ticket is not counted); SetWindow changes it on the running engine, limit 0 turns it off,
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
			for try := 2; try <= 3; try++ {
				if _, err := m.e.Occupy(ctx, r.order(t, 1001, m.user)); !errors.Is(err, stock.ErrDuplicate) {
					t.Fatalf("attempt %d: %v, want duplicate", try, err)
				}
			}
			// The windows are fixed hours of the unix epoch: the wait is
			// what is left of this one.
			left := time.Until(time.Now().Truncate(time.Hour).Add(time.Hour))
			tk, err := m.e.Occupy(ctx, r.order(t, 1001, m.user))
			if !errors.Is(err, stock.ErrRateLimited) || tk.RetryAfter <= left-5*time.Second || tk.RetryAfter > left+time.Second || tk.RequestNo != "" {
				t.Fatalf("fourth attempt: %+v %v, want rate limited for the rest of the hour (%v)", tk, err, left)
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
	// A buyer's own requests still spend it (all but the one that took
	// its ticket).
	if _, err := e.Occupy(context.Background(), r.order(t, 1001, 4)); err != nil {
		t.Fatal(err)
	}
	if _, err := e.Occupy(context.Background(), r.order(t, 1001, 4)); !errors.Is(err, stock.ErrDuplicate) {
		t.Fatalf("a buyer's second request in a window of 1: %v, want DUPLICATE", err)
	}
	if _, err := e.Occupy(context.Background(), r.order(t, 1001, 4)); !errors.Is(err, stock.ErrRateLimited) {
		t.Fatalf("a buyer's third request in a window of 1: %v, want RATE_LIMITED", err)
	}
}

// TestABuyerWhoseTicketsAreGivenBackIsRateLimited: the occupy script does
// not count the attempt that takes a ticket, so the engine counts it when
// it gives the ticket back after the broker refused its message. With a
// window of 2 and the broker gone, a buyer's first two attempts each take
// a ticket that is released (busy), and the third is RATE_LIMITED — not
// one more occupy, produce and release without end. A drained attempt's
// release counts nothing (its occupy counted nothing either), and the
// stock is whole again.
func TestABuyerWhoseTicketsAreGivenBackIsRateLimited(t *testing.T) {
	r := newRig(t)
	k := testenv.StartKafka(t, 1)
	e := newLocal(t, r, k.Addrs)
	if err := e.SetWindow(Window{Limit: 2, Period: time.Hour}); err != nil {
		t.Fatal(err)
	}
	r.preheat(t, activity(1, 1001, 5, false))
	k.Cluster.Close()
	ctx := context.Background()
	for try := 1; try <= 2; try++ {
		if _, err := e.Occupy(ctx, r.order(t, 1001, 9)); !errors.Is(err, ErrBusy) {
			t.Fatalf("attempt %d with the broker gone: %v, want busy", try, err)
		}
	}
	if tk, err := e.Occupy(ctx, r.order(t, 1001, 9)); !errors.Is(err, stock.ErrRateLimited) || tk.RetryAfter <= 0 {
		t.Fatalf("third attempt after two tickets given back: %+v %v, want RATE_LIMITED", tk, err)
	}
	drained := r.order(t, 1001, 8)
	drained.RequestNo, drained.Place = sale.NewRequestNos(1).Next(1, 1001), "0:7"
	if _, err := e.Occupy(ctx, drained); !errors.Is(err, ErrBusy) {
		t.Fatalf("a drained attempt with the broker gone: %v, want busy", err)
	}
	window := sale.RateKey(1, 1001, time.Now().UnixMilli()/time.Hour.Milliseconds())
	if n, err := r.def.Do(t, "HGET", window, "9").AsInt64(); err != nil || n != 3 {
		t.Fatalf("%s buyer 9: %d %v, want 3 attempts (two given back, one refused)", window, n, err)
	}
	if n := r.def.Int(t, "HEXISTS", window, "8"); n != 0 {
		t.Fatalf("%s counts the drained attempt", window)
	}
	if c := r.counts(t, 1, 1001); c.Remaining != 5 {
		t.Fatalf("stock after the releases: %+v, want 5 remaining", c)
	}
}
