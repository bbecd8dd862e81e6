package admin

import (
	"context"
	"encoding/json"
	"fmt"
	"testing"
	"time"

	"seckill/internal/testenv"
	"seckill/sale"
	"seckill/stock/stocktest"
)

// TestModeSwitchIsKeptAndAnnounced: PUT /admin/v1/skus/{id}/mode switches
// one SKU to queue and back in the catalog every edge loads and in the
// orders database (what a rebuild reads), keeps the rate when only the
// mode is named, announces an activity event each time, and refuses bad
// bodies and unknown SKUs without changing anything.
func TestModeSwitchIsKeptAndAnnounced(t *testing.T) {
	r := testenv.StartRedis(t)
	st, _ := stocktest.Stock(t, r)
	s, db := newServer(t, st)
	now := time.Now()
	body := fmt.Sprintf(`{"id":1,"start":%q,"end":%q,"skus":[{"id":10,"stock":5,"price":"1.00","limitPerUser":1},{"id":11,"stock":5,"price":"1.00","limitPerUser":1}]}`,
		now.Add(-time.Minute).Format(time.RFC3339), now.Add(time.Hour).Format(time.RFC3339))
	if ctx := send(s, "POST", "/admin/v1/activities", body); ctx.Response.StatusCode() != 200 {
		t.Fatalf("create: %d %s", ctx.Response.StatusCode(), ctx.Response.Body())
	}
	events := testenv.Subscribe(t, r.Client(t), sale.EventsChannel)
	inCatalog := func(sku int64) (string, int64) {
		t.Helper()
		a, k, ok := st.Catalog().Lookup(1, sku)
		if !ok || a == nil {
			t.Fatalf("sku %d left the catalog", sku)
		}
		return k.Mode, k.Rate
	}
	inDatabase := func(sku int64) string {
		t.Helper()
		acts, err := db.Activities(context.Background())
		if err != nil || len(acts) != 1 {
			t.Fatalf("activities: %+v %v", acts, err)
		}
		k := acts[0].SKU(sku)
		if k == nil {
			t.Fatalf("sku %d left the database", sku)
		}
		return fmt.Sprintf("%s %d", k.Mode, k.Rate)
	}
	for _, step := range []struct {
		body     string
		mode     string
		rate     int64
		wantView string
	}{
		{`{"mode":"queue","rate":500}`, sale.ModeQueue, 500, "{1 10 queue 500}"},
		{`{"rate":20}`, sale.ModeQueue, 20, "{1 10 queue 20}"},
		{`{"mode":"direct"}`, sale.ModeDirect, 20, "{1 10 direct 20}"},
		{`{"mode":"queue","activityId":1}`, sale.ModeQueue, 20, "{1 10 queue 20}"},
	} {
		ctx := send(s, "PUT", "/admin/v1/skus/10/mode", step.body)
		if ctx.Response.StatusCode() != 200 {
			t.Fatalf("%s: %d %s", step.body, ctx.Response.StatusCode(), ctx.Response.Body())
		}
		var v ModeView
		if err := json.Unmarshal(ctx.Response.Body(), &v); err != nil || fmt.Sprint(v) != step.wantView {
			t.Fatalf("%s answered %s (%v), want %s", step.body, ctx.Response.Body(), err, step.wantView)
		}
		if m, rate := inCatalog(10); m != step.mode || rate != step.rate {
			t.Fatalf("after %s the catalog holds %q %d", step.body, m, rate)
		}
		if got, want := inDatabase(10), fmt.Sprintf("%s %d", step.mode, step.rate); got != want {
			t.Fatalf("after %s the database holds %q, want %q", step.body, got, want)
		}
		events.Want(t, sale.EventActivity+" 1 0 ")
	}
	if m, rate := inCatalog(11); m != "" || rate != 0 {
		t.Fatalf("the other sku changed: %q %d", m, rate)
	}
	for body, status := range map[string]int{
		`{}`:                  400,
		`{"mode":"fifo"}`:     400,
		`{"rate":-1}`:         400,
		`{"rate":1000001}`:    400,
		`{"mode":1}`:          400,
		`{"mode":"queue","x"`: 400,
	} {
		if ctx := send(s, "PUT", "/admin/v1/skus/10/mode", body); ctx.Response.StatusCode() != status {
			t.Errorf("%s: %d, want %d", body, ctx.Response.StatusCode(), status)
		}
	}
	if ctx := send(s, "PUT", "/admin/v1/skus/99/mode", `{"mode":"queue"}`); ctx.Response.StatusCode() != 404 {
		t.Errorf("unknown sku: %d %s, want 404", ctx.Response.StatusCode(), ctx.Response.Body())
	}
	if ctx := send(s, "PUT", "/admin/v1/skus/10/mode?activityId=2", `{"mode":"direct"}`); ctx.Response.StatusCode() != 404 {
		t.Errorf("sku of an unknown activity: %d, want 404", ctx.Response.StatusCode())
	}
	if m, rate := inCatalog(10); m != sale.ModeQueue || rate != 20 {
		t.Fatalf("refused changes changed the mode: %q %d", m, rate)
	}
	if got := inDatabase(11); got != " 0" {
		t.Fatalf("the other sku changed in the database: %q", got)
	}
	ctx := send(s, "GET", "/admin/v1/skus/10/mode", "")
	var v ModeView
	if err := json.Unmarshal(ctx.Response.Body(), &v); err != nil || fmt.Sprint(v) != "{1 10 queue 20}" {
		t.Fatalf("GET mode: %s (%v)", ctx.Response.Body(), err)
	}
	ctx = send(s, "GET", "/admin/v1/modes", "")
	var list []ModeView
	if err := json.Unmarshal(ctx.Response.Body(), &list); err != nil || fmt.Sprint(list) != "[{1 10 queue 20} {1 11 direct 0}]" {
		t.Fatalf("GET modes: %s (%v)", ctx.Response.Body(), err)
	}
}

// TestRestockOfASKURedisLostIsDoneOnce: a restock of a SKU whose keys Redis
// lost raises the database and answers 200 "rebuilding" (not an error an
// operator would retry, raising the database twice); Redis is left to the
// watcher's rebuild, which sells the raised stock.
func TestRestockOfASKURedisLostIsDoneOnce(t *testing.T) {
	r := testenv.StartRedis(t)
	st, _ := stocktest.Stock(t, r)
	s, db := newServer(t, st)
	now := time.Now()
	body := fmt.Sprintf(`{"id":1,"start":%q,"end":%q,"skus":[{"id":10,"stock":5,"price":"1.00","limitPerUser":1}]}`,
		now.Add(-time.Minute).Format(time.RFC3339), now.Add(time.Hour).Format(time.RFC3339))
	if ctx := send(s, "POST", "/admin/v1/activities", body); ctx.Response.StatusCode() != 200 {
		t.Fatalf("create: %d %s", ctx.Response.StatusCode(), ctx.Response.Body())
	}
	keys, err := r.Client(t).Do(context.Background(), r.Client(t).B().Keys().Pattern("sk:{a1:s10}*").Build()).AsStrSlice()
	if err != nil || len(keys) == 0 {
		t.Fatalf("the SKU's keys: %v %v", keys, err)
	}
	r.Do(t, append([]string{"DEL"}, keys...)...)
	ctx := send(s, "POST", "/admin/v1/skus/10/restock", `{"units":3}`)
	var v RestockAnswer
	if err := json.Unmarshal(ctx.Response.Body(), &v); ctx.Response.StatusCode() != 200 || err != nil || !v.Rebuilding || v.Added != 3 {
		t.Fatalf("restock of a lost sku: %d %s, want 200 rebuilding", ctx.Response.StatusCode(), ctx.Response.Body())
	}
	sn, err := db.Snapshot(context.Background(), 1, 10)
	if err != nil || sn.Initial != 8 {
		t.Fatalf("database snapshot after the restock: %+v %v, want initial 8", sn, err)
	}
	if n, err := r.Client(t).Do(context.Background(), r.Client(t).B().Exists().Key(keys...).Build()).AsInt64(); err != nil || n != 0 {
		t.Fatalf("the restock wrote %d of the lost keys (%v): the watcher would not rebuild them", n, err)
	}
}
