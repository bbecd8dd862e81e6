package admin

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"seckill/internal/testenv"
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
