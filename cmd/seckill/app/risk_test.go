package app

import (
	"io"
	"net"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"seckill/cmd/seckill/config"
	"seckill/internal/testenv"
	"seckill/sale"
)

// TestRiskCheckThroughTheAdminAPI: a whole system with edge.risk.url set:
// a passed check joins the ticket's story (RISK_PASSED before
// STOCK_OCCUPIED), a slow risk service degrades open under the default
// policy, the admin API switches the activity to deny (503) and back, and
// a deny verdict is 403 RISK_REJECTED.
func TestRiskCheckThroughTheAdminAPI(t *testing.T) {
	var slow, deny atomic.Bool
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	risk := &http.Server{ReadHeaderTimeout: 5 * time.Second, Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body)
		if slow.Load() {
			select {
			case <-time.After(2 * time.Second):
			case <-r.Context().Done():
				return
			}
		}
		v := sale.RiskAllow
		if deny.Load() {
			v = sale.RiskDeny
		}
		io.WriteString(w, `{"verdict":"`+v+`"}`)
	})}
	go risk.Serve(ln)
	t.Cleanup(func() { risk.Close() })

	c := startClusterWith(t, sqliteOnly(), func(cfg *config.Config) {
		cfg.Edge.Risk.URL = "http://" + ln.Addr().String() + "/v1/check"
		cfg.Edge.Risk.Timeout = 300 * time.Millisecond
		cfg.Edge.Risk.CacheTTL = 0
	})
	c.preheat(t, openActivity(1, sale.SKU{ID: 1001, Stock: 100, Price: 100, LimitPerUser: 1}))
	auth := "Bearer " + c.cfg.Admin.Token
	buy := func(user int64) reply {
		return send(t, "POST", c.base+"/api/v1/flash-sale/order", user, "", `{"skuId":1001}`)
	}
	setRisk := func(id, body string) reply {
		return send(t, "PUT", c.admin+"/admin/v1/activities/"+id+"/risk", 0, auth, body)
	}

	r := buy(1)
	expect(t, "an allowed buyer", r, 200, "QUEUING")
	rn, _ := r.body["requestNo"].(string)
	var story string
	testenv.Eventually(t, "the ticket's story to hold RISK_PASSED and its order", 10*time.Second, func() bool {
		story = send(t, "GET", c.admin+"/admin/v1/requests/"+rn, 0, auth, "").raw
		return strings.Contains(story, `"RISK_PASSED"`) && strings.Contains(story, `"SUCCESS"`)
	})
	if i, j := strings.Index(story, `"RISK_PASSED"`), strings.Index(story, `"STOCK_OCCUPIED"`); j < 0 || i > j {
		t.Fatalf("RISK_PASSED should come before STOCK_OCCUPIED: %s", story)
	}

	slow.Store(true)
	expect(t, "a slow risk service under the default policy", buy(2), 200, "QUEUING")
	expect(t, "switch to deny", setRisk("1", `{"onError":"deny"}`), 200, "")
	expect(t, "a slow risk service under deny", buy(3), 503, "BUSY")
	if a := send(t, "GET", c.admin+"/admin/v1/activities", 0, auth, ""); !strings.Contains(a.raw, `"riskOnError":"deny"`) {
		t.Fatalf("activities after the switch: %s", a.raw)
	}
	expect(t, "switch back to allow", setRisk("1", `{"onError":"allow"}`), 200, "")
	expect(t, "a slow risk service under allow again", buy(4), 200, "QUEUING")
	expect(t, "a bad policy", setRisk("1", `{"onError":"maybe"}`), 400, "BAD_REQUEST")
	expect(t, "an unknown activity", setRisk("99", `{"onError":"deny"}`), 404, "NOT_FOUND")

	slow.Store(false)
	deny.Store(true)
	expect(t, "a deny verdict", buy(5), 403, "RISK_REJECTED")
	if n := labeled(t, c.sys.Reg, "seckill_edge_risk_degraded_total", "policy", "allow"); n != 2 {
		t.Errorf("degraded passes %v, want 2", n)
	}
	if n := labeled(t, c.sys.Reg, "seckill_edge_risk_failures_total", "kind", "timeout"); n != 3 {
		t.Errorf("risk timeouts %v, want 3", n)
	}
}
