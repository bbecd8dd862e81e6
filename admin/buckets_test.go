package admin

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"seckill/internal/testenv"
	"seckill/stock/stocktest"
)

// TestBucketCountOfALiveSKUCannotChange: an activity whose SKU sells in 4
// buckets, saved again with 2, is refused with 409 before the database
// keeps the 2; the database and the catalog still say 4.
func TestBucketCountOfALiveSKUCannotChange(t *testing.T) {
	st, _ := stocktest.Stock(t, testenv.StartRedis(t))
	s, db := newServer(t, st)
	now := time.Now()
	act := func(buckets int) string {
		return fmt.Sprintf(`{"id":1,"start":%q,"end":%q,"skus":[{"id":10,"stock":8,"price":"1.00","limitPerUser":1,"buckets":%d}]}`,
			now.Add(-time.Minute).Format(time.RFC3339), now.Add(time.Hour).Format(time.RFC3339), buckets)
	}
	if ctx := send(s, "POST", "/admin/v1/activities", act(4)); ctx.Response.StatusCode() != 200 {
		t.Fatalf("create: %d %s", ctx.Response.StatusCode(), ctx.Response.Body())
	}
	ctx := send(s, "POST", "/admin/v1/activities", act(2))
	if ctx.Response.StatusCode() != 409 || !strings.Contains(string(ctx.Response.Body()), "buckets") {
		t.Fatalf("4 → 2 buckets: %d %s, want 409", ctx.Response.StatusCode(), ctx.Response.Body())
	}
	acts, err := db.Activities(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if len(acts) != 1 || acts[0].SKUs[0].Buckets != 4 {
		t.Fatalf("the database says %+v, want one activity of 4 buckets", acts)
	}
	if _, k, ok := st.Catalog().Lookup(1, 10); !ok || k.Buckets != 4 {
		t.Fatalf("the catalog: %+v %v, want 4 buckets", k, ok)
	}
	// The same count again is an ordinary save.
	if ctx := send(s, "POST", "/admin/v1/activities", act(4)); ctx.Response.StatusCode() != 200 {
		t.Fatalf("save again with 4: %d %s", ctx.Response.StatusCode(), ctx.Response.Body())
	}
}
