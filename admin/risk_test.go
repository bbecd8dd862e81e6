package admin

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"seckill/internal/riskaudit"
	"seckill/internal/testenv"
	"seckill/sale"
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

// TestUncheckedListsTheRecords: GET /admin/v1/risk/unchecked lists the
// purchases the edges let through without a verdict, oldest first, by
// state and up to limit; a bad state or limit is refused.
func TestUncheckedListsTheRecords(t *testing.T) {
	r := testenv.StartRedis(t)
	st, _ := stocktest.Stock(t, r)
	s, _ := newServer(t, st)
	rdb := r.Client(t)
	ctx := context.Background()
	for i, rn := range []string{"1-10-3", "1-10-1", "1-10-2"} {
		if err := riskaudit.Add(ctx, rdb, riskaudit.Record{RequestNo: rn, User: int64(i + 1), Activity: 1, SKU: 10, Quantity: 1, Why: "open", At: int64(100 - i)}); err != nil {
			t.Fatal(err)
		}
	}
	if err := riskaudit.Resolve(ctx, rdb, riskaudit.Record{RequestNo: "1-10-1", User: 2, State: riskaudit.Denied, At: 99, Action: "user blocked"}); err != nil {
		t.Fatal(err)
	}
	list := func(q string) (UncheckedView, int) {
		t.Helper()
		c := send(s, "GET", "/admin/v1/risk/unchecked"+q, "")
		var v UncheckedView
		if c.Response.StatusCode() == 200 {
			if err := json.Unmarshal(c.Response.Body(), &v); err != nil {
				t.Fatal(err)
			}
		}
		return v, c.Response.StatusCode()
	}
	names := func(v UncheckedView) string {
		var out []string
		for _, r := range v.Records {
			out = append(out, r.RequestNo+":"+r.State)
		}
		return strings.Join(out, " ")
	}
	if v, _ := list(""); v.Total != 3 || names(v) != "1-10-2:pending 1-10-1:deny 1-10-3:pending" {
		t.Errorf("all: %d %s", v.Total, names(v))
	}
	if v, _ := list("?state=pending&limit=1"); names(v) != "1-10-2:pending" {
		t.Errorf("pending, limit 1: %s", names(v))
	}
	if v, _ := list("?state=deny"); names(v) != "1-10-1:deny" || v.Records[0].Action != "user blocked" {
		t.Errorf("deny: %+v", v.Records)
	}
	for _, q := range []string{"?state=maybe", "?limit=0", "?limit=x"} {
		if _, status := list(q); status != 400 {
			t.Errorf("%s: %d, want 400", q, status)
		}
	}
}
