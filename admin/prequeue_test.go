package admin

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"seckill/internal/testenv"
	"seckill/sale"
	"seckill/stock/stocktest"
)

// TestActivityPrequeueIsKeptAndValidated: an activity posted with a
// pre-queue keeps it in the catalog and shows it; one out of range is 400
// and changes nothing.
func TestActivityPrequeueIsKeptAndValidated(t *testing.T) {
	r := testenv.StartRedis(t)
	st, _ := stocktest.Stock(t, r)
	s, _ := newServer(t, st)
	now := time.Now()
	body := func(pq int64) string {
		return fmt.Sprintf(`{"id":1,"start":%q,"end":%q,"prequeue":%d,"skus":[{"id":10,"stock":5,"price":"1.00","limitPerUser":1,"mode":"queue"}]}`,
			now.Add(time.Hour).Format(time.RFC3339), now.Add(2*time.Hour).Format(time.RFC3339), pq)
	}
	if ctx := send(s, "POST", "/admin/v1/activities", body(30)); ctx.Response.StatusCode() != 200 {
		t.Fatalf("create: %d %s", ctx.Response.StatusCode(), ctx.Response.Body())
	}
	if a, _, ok := st.Catalog().Lookup(1, 10); !ok || a.Prequeue != 30 {
		t.Fatalf("catalog: %+v %v, want prequeue 30", a, ok)
	}
	for _, bad := range []int64{-1, 24*60 + 1} {
		ctx := send(s, "POST", "/admin/v1/activities", body(bad))
		if ctx.Response.StatusCode() != 400 || !strings.Contains(string(ctx.Response.Body()), "prequeue") {
			t.Fatalf("prequeue %d: %d %s, want 400 naming prequeue", bad, ctx.Response.StatusCode(), ctx.Response.Body())
		}
	}
	if a, _, ok := st.Catalog().Lookup(1, 10); !ok || a.Prequeue != 30 {
		t.Fatalf("catalog after refused posts: %+v %v", a, ok)
	}
}

// TestPrequeueRecordIsShown: GET /admin/v1/skus/{sku}/prequeue shows the
// drainer's record of the draw — none before it, then the seed, cutoff,
// the count served and (asked for) the order; a record that does not
// parse is a 500 naming it, never a made-up draw.
func TestPrequeueRecordIsShown(t *testing.T) {
	r := testenv.StartRedis(t)
	st, _ := stocktest.Stock(t, r)
	s, _ := newServer(t, st)
	now := time.Now()
	body := fmt.Sprintf(`{"id":1,"start":%q,"end":%q,"prequeue":30,"skus":[{"id":10,"stock":5,"price":"1.00","limitPerUser":1,"mode":"queue"}]}`,
		now.Add(time.Hour).Format(time.RFC3339), now.Add(2*time.Hour).Format(time.RFC3339))
	if ctx := send(s, "POST", "/admin/v1/activities", body); ctx.Response.StatusCode() != 200 {
		t.Fatalf("create: %d %s", ctx.Response.StatusCode(), ctx.Response.Body())
	}
	get := func(path string) (int, PrequeueView) {
		t.Helper()
		ctx := send(s, "GET", path, "")
		var v PrequeueView
		if ctx.Response.StatusCode() == 200 {
			if err := json.Unmarshal(ctx.Response.Body(), &v); err != nil {
				t.Fatal(err)
			}
		}
		return ctx.Response.StatusCode(), v
	}
	if st, v := get("/admin/v1/skus/10/prequeue"); st != 200 || v.Drawn || v.Prequeue != 30 || v.Served != 0 || v.Done {
		t.Fatalf("before the draw: %d %+v", st, v)
	}
	d := sale.Draw{Seed: [32]byte{0xab}, Partition: 2, Cutoff: 41}
	pk := sale.PrequeueKey(1, 10)
	r.Do(t, "HSET", pk, "draw", d.String(), "order", "40,7,12")
	st1, v := get("/admin/v1/skus/10/prequeue")
	if st1 != 200 || !v.Drawn || v.Partition != 2 || v.Cutoff != 41 || v.Served != 3 || v.Order != nil || v.Done ||
		v.Seed != d.String()[:64] {
		t.Fatalf("drawn, serving: %d %+v", st1, v)
	}
	r.Do(t, "HSET", pk, "done", "3")
	if st, v := get("/admin/v1/skus/10/prequeue?order=true&activityId=1"); st != 200 || !v.Done || fmt.Sprint(v.Order) != "[40 7 12]" {
		t.Fatalf("served, with the order: %d %+v", st, v)
	}
	r.Do(t, "HSET", pk, "draw", "not-a-draw")
	if ctx := send(s, "GET", "/admin/v1/skus/10/prequeue", ""); ctx.Response.StatusCode() != 500 || !strings.Contains(string(ctx.Response.Body()), "BAD_RECORD") {
		t.Fatalf("a broken record: %d %s", ctx.Response.StatusCode(), ctx.Response.Body())
	}
}
