package stock

import (
	"context"
	"testing"

	"seckill/lua"
	"seckill/sale"

	"github.com/redis/rueidis"
)

// TestScriptsRefuseAQuantityBelowOne: release and restock answer an error
// for a quantity that is not an integer >= 1 and change nothing — the
// scripts guard the books themselves, whatever a caller checked before
// (occupy's own case is a row of TestBatchScriptAgainstHandComputedBatches).
func TestScriptsRefuseAQuantityBelowOne(t *testing.T) {
	r := newRig(t)
	ctx := context.Background()
	pa, k := r.preheat(t, activity(1, 11, 5, false))
	got, err := r.stock.Occupy(ctx, pa, k, 7, "r7", 1)
	if err != nil || got.Code != CodeOK {
		t.Fatalf("occupy: %+v %v", got, err)
	}
	before := r.counts(t, 1, 11)
	for _, q := range []int64{0, -1, -100} {
		m := sale.Message{RequestNo: "r7", ActivityID: 1, SKUID: 11, UserID: 7, Quantity: q}
		if out, err := r.stock.Release(ctx, &m, true); err == nil {
			t.Errorf("release with quantity %d: %v, want an error", q, out)
		}
	}
	rdb := r.def.Client(t)
	keys := sale.KeysFor(1, 11)
	restock := rueidis.NewLuaScript(lua.Restock)
	for _, n := range []string{"0", "-4", "1.5", "x"} {
		if v, err := restock.Exec(ctx, rdb, []string{keys.Meta, keys.Stock}, []string{n}).ToArray(); err == nil {
			t.Errorf("restock by %q: %v, want an error", n, v)
		}
	}
	if after := r.counts(t, 1, 11); after != before {
		t.Fatalf("the refused calls changed the books: %+v, was %+v", after, before)
	}
	// The ticket is still held and releases with its real quantity.
	m := sale.Message{RequestNo: "r7", ActivityID: 1, SKUID: 11, UserID: 7, Quantity: 1}
	if out, err := r.stock.Release(ctx, &m, true); err != nil || out != Released {
		t.Fatalf("release with quantity 1: %v %v", out, err)
	}
	if c := r.counts(t, 1, 11); c.Remaining != 5 {
		t.Fatalf("remaining %d after the release, want 5", c.Remaining)
	}
}
