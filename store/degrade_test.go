package store

import (
	"context"
	"errors"
	"testing"

	"seckill/sale"
)

// TestDegradeSwitchesComeBackFromTheDatabase: an activity's degrade
// switches, set live by SetDegrade, round-trip through the activity row —
// so an activity rebuilt from the database keeps what on-call chose — and
// leave its reserved users alone; PutActivity writes them too; an unknown
// activity is ErrNotFound and a switch out of range is refused.
func TestDegradeSwitchesComeBackFromTheDatabase(t *testing.T) {
	runTest(t, func(t *testing.T, r runner) {
		ctx := context.Background()
		s := r.open(t)
		a := activity(1, sale.SKU{ID: 10, Stock: 1})
		a.ReservedUsers = []int64{5, 6}
		put(t, s, a)
		b := activity(2, sale.SKU{ID: 20, Stock: 1})
		b.Degrade = sale.Degrade{Paused: true, PollAfterMs: 1500}
		put(t, s, b)
		want := sale.Degrade{ReservedOnly: true, PollAfterMs: 3000}
		if err := s.SetDegrade(ctx, 1, want); err != nil {
			t.Fatal(err)
		}
		if err := s.SetDegrade(ctx, 99, want); !errors.Is(err, ErrNotFound) {
			t.Errorf("SetDegrade of an unknown activity: %v, want ErrNotFound", err)
		}
		if err := s.SetDegrade(ctx, 1, sale.Degrade{PollAfterMs: sale.MaxPollAfterMs + 1}); err == nil {
			t.Error("SetDegrade took a pollAfterMs over the bound")
		}
		s.Close()
		acts, err := r.open(t).Activities(ctx)
		if err != nil {
			t.Fatal(err)
		}
		got := map[int64]sale.Activity{}
		for _, x := range acts {
			got[x.ID] = x
		}
		if got[1].Degrade != want || len(got[1].ReservedUsers) != 2 {
			t.Errorf("activity 1 after SetDegrade: %+v reserved %v, want %+v and 2 reserved users", got[1].Degrade, got[1].ReservedUsers, want)
		}
		if got[2].Degrade != b.Degrade {
			t.Errorf("activity 2 as put: %+v, want %+v", got[2].Degrade, b.Degrade)
		}
	})
}

// TestRouteSwitchesAreKept: a route switch is recorded, switched back and
// read by another process after a restart.
func TestRouteSwitchesAreKept(t *testing.T) {
	runTest(t, func(t *testing.T, r runner) {
		ctx := context.Background()
		s := r.open(t)
		if m, err := s.RouteSwitches(ctx); err != nil || len(m) != 0 {
			t.Fatalf("switches of a new database: %v %v, want none", m, err)
		}
		for _, sw := range []struct {
			name string
			open bool
		}{{"orders", false}, {"pay", false}, {"pay", true}} {
			if err := s.PutRouteSwitch(ctx, sw.name, sw.open); err != nil {
				t.Fatal(err)
			}
		}
		s.Close()
		m, err := r.open(t).RouteSwitches(ctx)
		if err != nil || len(m) != 2 || m["orders"] || !m["pay"] {
			t.Fatalf("switches after a restart: %v %v, want orders closed, pay open", m, err)
		}
	})
}

// TestModeComesBackFromTheDatabase: a SKU's mode and drain rate, set live
// by SetMode (also to what it already is) or put with the activity,
// round-trip through its item row, leaving the other SKU alone; an
// unknown SKU is ErrNotFound and a mode out of range is refused.
func TestModeComesBackFromTheDatabase(t *testing.T) {
	runTest(t, func(t *testing.T, r runner) {
		ctx := context.Background()
		s := r.open(t)
		a := activity(1, sale.SKU{ID: 10, Stock: 1}, sale.SKU{ID: 11, Stock: 1, Mode: sale.ModeQueue, Rate: 50})
		put(t, s, a)
		for range 2 {
			if err := s.SetMode(ctx, 1, 10, sale.ModeQueue, 500); err != nil {
				t.Fatal(err)
			}
		}
		if err := s.SetMode(ctx, 1, 12, sale.ModeQueue, 0); !errors.Is(err, ErrNotFound) {
			t.Errorf("SetMode of a SKU the activity does not sell: %v, want ErrNotFound", err)
		}
		if err := s.SetMode(ctx, 1, 10, "fifo", 0); err == nil || errors.Is(err, ErrNotFound) {
			t.Errorf("SetMode took mode fifo: %v", err)
		}
		s.Close()
		acts, err := r.open(t).Activities(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if len(acts) != 1 || len(acts[0].SKUs) != 2 {
			t.Fatalf("activities: %+v", acts)
		}
		got := map[int64]sale.SKU{}
		for _, k := range acts[0].SKUs {
			got[k.ID] = k
		}
		if k := got[10]; k.Mode != sale.ModeQueue || k.Rate != 500 {
			t.Errorf("sku 10 after SetMode: mode %q rate %d, want queue 500", k.Mode, k.Rate)
		}
		if k := got[11]; k.Mode != sale.ModeQueue || k.Rate != 50 {
			t.Errorf("sku 11 as put: mode %q rate %d, want queue 50", k.Mode, k.Rate)
		}
	})
}
