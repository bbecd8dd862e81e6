package admin

import (
	"context"
	"encoding/json"
	"fmt"
	"testing"
	"time"

	"seckill/internal/testenv"
	"seckill/routeswitch"
	"seckill/sale"
	"seckill/stock/stocktest"
)

// TestDegradeSwitchesAreKeptAndAnnounced: PUT .../degrade changes the
// switches it names and keeps the others, in the catalog every edge loads
// and in the database row a rebuild reads, and announces an activity
// event; bad bodies and unknown activities change nothing.
func TestDegradeSwitchesAreKeptAndAnnounced(t *testing.T) {
	r := testenv.StartRedis(t)
	st, _ := stocktest.Stock(t, r)
	s, db := newServer(t, st)
	now := time.Now()
	body := fmt.Sprintf(`{"id":1,"start":%q,"end":%q,"reservedUsers":[5,6],"skus":[{"id":10,"stock":5,"price":"1.00","limitPerUser":1}]}`,
		now.Add(-time.Minute).Format(time.RFC3339), now.Add(time.Hour).Format(time.RFC3339))
	if ctx := send(s, "POST", "/admin/v1/activities", body); ctx.Response.StatusCode() != 200 {
		t.Fatalf("create: %d %s", ctx.Response.StatusCode(), ctx.Response.Body())
	}
	events := testenv.Subscribe(t, r.Client(t), sale.EventsChannel)
	both := func() (catalog, database sale.Degrade) {
		t.Helper()
		a, ok := st.Catalog().Activity(1)
		if !ok {
			t.Fatal("activity 1 left the catalog")
		}
		acts, err := db.Activities(context.Background())
		if err != nil || len(acts) != 1 {
			t.Fatalf("database activities: %+v, %v", acts, err)
		}
		return a.Degrade, acts[0].Degrade
	}
	steps := []struct {
		body string
		want sale.Degrade
	}{
		{`{"reservedOnly":true}`, sale.Degrade{ReservedOnly: true}},
		{`{"pollAfterMs":3000}`, sale.Degrade{ReservedOnly: true, PollAfterMs: 3000}},
		{`{"paused":true,"reservedOnly":false}`, sale.Degrade{PollAfterMs: 3000, Paused: true}},
	}
	for _, step := range steps {
		ctx := send(s, "PUT", "/admin/v1/activities/1/degrade", step.body)
		if ctx.Response.StatusCode() != 200 {
			t.Fatalf("%s: %d %s", step.body, ctx.Response.StatusCode(), ctx.Response.Body())
		}
		var v DegradeView
		if err := json.Unmarshal(ctx.Response.Body(), &v); err != nil || v.Degrade != step.want || v.Reserved != 2 {
			t.Fatalf("%s answered %s (%v)", step.body, ctx.Response.Body(), err)
		}
		if c, d := both(); c != step.want || d != step.want {
			t.Fatalf("after %s: catalog %+v, database %+v, want %+v", step.body, c, d, step.want)
		}
		events.Want(t, sale.EventActivity+" 1 0 ")
	}
	for body, status := range map[string]int{
		`{}`:                    400,
		`{"pollAfterMs":60001}`: 400,
		`{"pollAfterMs":-1}`:    400,
		`{"paused":"yes"}`:      400,
		`{"speed":1}`:           400,
	} {
		if ctx := send(s, "PUT", "/admin/v1/activities/1/degrade", body); ctx.Response.StatusCode() != status {
			t.Errorf("%s: %d, want %d", body, ctx.Response.StatusCode(), status)
		}
	}
	if ctx := send(s, "PUT", "/admin/v1/activities/2/degrade", `{"paused":true}`); ctx.Response.StatusCode() != 404 {
		t.Errorf("unknown activity: %d, want 404", ctx.Response.StatusCode())
	}
	if c, d := both(); c != steps[2].want || d != steps[2].want {
		t.Fatalf("after refused changes: catalog %+v, database %+v", c, d)
	}
	ctx := send(s, "GET", "/admin/v1/degrade", "")
	var list []DegradeView
	if err := json.Unmarshal(ctx.Response.Body(), &list); err != nil || len(list) != 1 || list[0].Degrade != steps[2].want {
		t.Fatalf("GET /admin/v1/degrade: %s (%v)", ctx.Response.Body(), err)
	}
}

// TestRouteSwitchesAreKeptAndRestored: PUT /admin/v1/routes/{name}
// closes and opens one route in Redis and the database and announces it;
// after Redis lost its data, Restore puts back what the database holds;
// an unknown route or a body without open changes nothing.
func TestRouteSwitchesAreKeptAndRestored(t *testing.T) {
	r := testenv.StartRedis(t)
	st, _ := stocktest.Stock(t, r)
	s, db := newServer(t, st)
	rdb := r.Client(t)
	events := testenv.Subscribe(t, rdb, sale.EventsChannel)
	for _, step := range []struct {
		path, body string
		want       routeswitch.State
	}{
		{"/admin/v1/routes/orders", `{"open":false}`, 1 << routeswitch.Index(routeswitch.Orders)},
		{"/admin/v1/routes/events", `{"open":false}`, 1<<routeswitch.Index(routeswitch.Orders) | 1<<routeswitch.Index(routeswitch.Events)},
		{"/admin/v1/routes/orders", `{"open":true}`, 1 << routeswitch.Index(routeswitch.Events)},
	} {
		ctx := send(s, "PUT", step.path, step.body)
		if ctx.Response.StatusCode() != 200 {
			t.Fatalf("%s %s: %d %s", step.path, step.body, ctx.Response.StatusCode(), ctx.Response.Body())
		}
		got, found, err := routeswitch.Load(context.Background(), rdb)
		if err != nil || !found || got != step.want {
			t.Fatalf("after %s %s: Redis holds %v (found %v, %v), want %v", step.path, step.body, got, found, err, step.want)
		}
		events.Want(t, sale.EventRoutes+" 0 0 ")
	}
	for path, status := range map[string]int{"/admin/v1/routes/order": 404, "/admin/v1/routes/pay": 400} {
		if ctx := send(s, "PUT", path, `{}`); ctx.Response.StatusCode() != status {
			t.Errorf("%s: %d, want %d", path, ctx.Response.StatusCode(), status)
		}
	}
	var list []RouteView
	ctx := send(s, "GET", "/admin/v1/routes", "")
	if err := json.Unmarshal(ctx.Response.Body(), &list); err != nil || fmt.Sprint(list) != "[{orders true} {pay true} {events false}]" {
		t.Fatalf("GET /admin/v1/routes: %s (%v)", ctx.Response.Body(), err)
	}
	if err := rdb.Do(context.Background(), rdb.B().Flushall().Build()).Error(); err != nil {
		t.Fatal(err)
	}
	restored, err := routeswitch.Restore(context.Background(), rdb, db.RouteSwitches)
	if err != nil || !restored {
		t.Fatalf("restore: %v %v", restored, err)
	}
	if got, _, err := routeswitch.Load(context.Background(), rdb); err != nil || got != 1<<routeswitch.Index(routeswitch.Events) {
		t.Fatalf("after the restore Redis holds %v (%v), want events closed", got, err)
	}
	if again, err := routeswitch.Restore(context.Background(), rdb, db.RouteSwitches); err != nil || again {
		t.Fatalf("a second restore wrote (%v, %v): Redis had the switches", again, err)
	}
}
