package admin

import (
	"context"
	"fmt"
	"testing"
	"time"

	"seckill/internal/sale"
	"seckill/internal/testenv"
	"seckill/stock/stocktest"
)

// TestRiskSwitchIsKeptInTheDatabase: PUT .../risk changes the activity's
// policy in the catalog every edge loads and in its database row, so a
// catalog rebuilt from the database (Redis lost) keeps it; a bad policy
// and an unknown activity change nothing.
func TestRiskSwitchIsKeptInTheDatabase(t *testing.T) {
	st, _ := stocktest.Stock(t, testenv.StartRedis(t))
	s, db := newServer(t, st)
	now := time.Now()
	body := fmt.Sprintf(`{"id":1,"start":%q,"end":%q,"skus":[{"id":10,"stock":5,"price":"1.00","limitPerUser":1}]}`,
		now.Add(-time.Minute).Format(time.RFC3339), now.Add(time.Hour).Format(time.RFC3339))
	if ctx := send(s, "POST", "/admin/v1/activities", body); ctx.Response.StatusCode() != 200 {
		t.Fatalf("create: %d %s", ctx.Response.StatusCode(), ctx.Response.Body())
	}
	policy := func() (catalog, database string) {
		t.Helper()
		a, ok := st.Catalog().Activity(1)
		if !ok {
			t.Fatal("activity 1 left the catalog")
		}
		acts, err := db.Activities(context.Background())
		if err != nil || len(acts) != 1 {
			t.Fatalf("database activities: %+v, %v", acts, err)
		}
		return a.RiskOnError, acts[0].RiskOnError
	}
	for _, p := range []string{sale.RiskDeny, sale.RiskAllow, sale.RiskDeny} {
		if ctx := send(s, "PUT", "/admin/v1/activities/1/risk", `{"onError":"`+p+`"}`); ctx.Response.StatusCode() != 200 {
			t.Fatalf("risk %s: %d %s", p, ctx.Response.StatusCode(), ctx.Response.Body())
		}
		if c, d := policy(); c != p || d != p {
			t.Fatalf("after PUT %s: catalog %q, database %q", p, c, d)
		}
	}
	if ctx := send(s, "PUT", "/admin/v1/activities/1/risk", `{"onError":"maybe"}`); ctx.Response.StatusCode() != 400 {
		t.Fatalf("bad policy: %d, want 400", ctx.Response.StatusCode())
	}
	if ctx := send(s, "PUT", "/admin/v1/activities/2/risk", `{"onError":"allow"}`); ctx.Response.StatusCode() != 404 {
		t.Fatalf("unknown activity: %d, want 404", ctx.Response.StatusCode())
	}
	if c, d := policy(); c != sale.RiskDeny || d != sale.RiskDeny {
		t.Fatalf("after refused changes: catalog %q, database %q, want deny", c, d)
	}
}
