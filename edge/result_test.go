package edge

import (
	"testing"

	"seckill/internal/results"
	"seckill/internal/sale"
)

func TestResultIsReadableByItsOwnerOnly(t *testing.T) {
	e := newEdge(t)
	err := e.res.Write(t.Context(),
		results.Entry{RequestNo: "1001", Activity: 7, SKU: 1001, Owner: 5, State: sale.ResultQueuing},
		results.Entry{RequestNo: "1002", Activity: 7, SKU: 1001, Owner: 5, State: sale.ResultSuccess, OrderNo: "O1002"},
		results.Entry{RequestNo: "1003", Activity: 7, SKU: 1001, Owner: 5, State: sale.ResultFail, Code: sale.FailReleased},
	)
	if err != nil {
		t.Fatal(err)
	}
	unknown := e.do("GET", "/api/v1/flash-sale/result/424242", "5", "")

	cases := []struct {
		name   string
		path   string
		user   string
		status int
		want   map[string]string
	}{
		{"the owner sees a queuing ticket", "/api/v1/flash-sale/result/1001", "5", 200,
			map[string]string{"code": "QUEUING", "requestNo": "1001"}},
		{"the owner sees the order of a successful ticket", "/api/v1/flash-sale/result/1002", "5", 200,
			map[string]string{"code": "SUCCESS", "requestNo": "1002", "orderNo": "O1002"}},
		{"the owner sees why a ticket failed", "/api/v1/flash-sale/result/1003", "5", 200,
			map[string]string{"code": "FAIL", "requestNo": "1003", "reason": "RELEASED"}},
		{"the seed's alias path answers the same", "/api/seckill/result/1002", "5", 200,
			map[string]string{"code": "SUCCESS", "orderNo": "O1002"}},
		{"another user gets not found", "/api/v1/flash-sale/result/1002", "6", 404,
			map[string]string{"code": "NOT_FOUND"}},
		{"an unknown ticket is not found", "/api/v1/flash-sale/result/999999", "5", 404,
			map[string]string{"code": "NOT_FOUND"}},
		{"a ticket number with odd characters is not found", "/api/v1/flash-sale/result/a%2Ab", "5", 404,
			map[string]string{"code": "NOT_FOUND"}},
		{"no user is 401", "/api/v1/flash-sale/result/1001", "", 401,
			map[string]string{"code": "UNAUTHORIZED"}},
		{"a bad user is 400", "/api/v1/flash-sale/result/1001", "x", 400,
			map[string]string{"code": "BAD_REQUEST"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			r := e.do("GET", c.path, c.user, "")
			if r.status != c.status {
				t.Fatalf("got %d %s, want %d", r.status, r.raw, c.status)
			}
			for k, v := range c.want {
				if r.body[k] != v {
					t.Errorf("%s = %v, want %q (body %s)", k, r.body[k], v, r.raw)
				}
			}
			if r.status == 404 && r.raw != unknown.raw {
				t.Errorf("404 body %s differs from an unknown ticket's %s", r.raw, unknown.raw)
			}
			if cc := r.header["Cache-Control"]; r.status == 200 && cc != "no-store" {
				t.Errorf("Cache-Control %q, want no-store", cc)
			}
		})
	}
}

func TestResultIsBusyWhenRedisIsDown(t *testing.T) {
	e := newEdge(t)
	e.redis.Stop()
	if r := e.do("GET", "/api/v1/flash-sale/result/1001", "5", ""); r.status != 503 || r.code() != "BUSY" {
		t.Fatalf("got %d %s, want 503 BUSY", r.status, r.raw)
	}
}
