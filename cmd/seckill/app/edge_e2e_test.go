package app

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"regexp"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"seckill/cmd/seckill/config"
	"seckill/internal/testenv"
	"seckill/internal/token"
	"seckill/sale"
)

// The edge's public-endpoint behaviour through a whole system on real
// servers: tokens with the real verifier, the admission gate under load,
// blocklists through the admin API, and every admin route's guard.

// reply is one HTTP answer, decoded.
type reply struct {
	status int
	header http.Header
	body   map[string]any
	raw    string
}

func (r reply) code() string { s, _ := r.body["code"].(string); return s }

// send makes one request; user 0 sends no X-User-Id, auth "" no
// Authorization.
func send(t testing.TB, method, url string, user int64, auth, body string) reply {
	t.Helper()
	req, _ := http.NewRequest(method, url, strings.NewReader(body))
	if user > 0 {
		req.Header.Set("X-User-Id", fmt.Sprint(user))
	}
	if auth != "" {
		req.Header.Set("Authorization", auth)
	}
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := client.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, url, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	r := reply{status: resp.StatusCode, header: resp.Header, raw: string(b)}
	_ = json.Unmarshal(b, &r.body)
	return r
}

func expect(t testing.TB, what string, r reply, status int, code string) {
	t.Helper()
	if r.status != status || code != "" && r.code() != code {
		t.Fatalf("%s: got %d %s, want %d %s", what, r.status, r.raw, status, code)
	}
}

func sqliteOnly() mode { return mode{driver: "sqlite"} }

var tokenKey = token.Key{ID: "k1", Secret: "0123456789abcdef-e2e"}

func TestTokensThroughTheEdge(t *testing.T) {
	c := startClusterWith(t, sqliteOnly(), func(cfg *config.Config) {
		cfg.Token.Keys = []token.Key{tokenKey}
		// Without the user × SKU window, the token verifier is the only
		// Redis call before the engine: the outage below hits it. User 42
		// sends more than a buyer would: no per-user limit.
		cfg.Edge.Rate.UserSKULimit, cfg.Edge.Rate.UserPerSecond = 0, 0
	})
	now := time.Now()
	open := sale.Activity{ID: 7, Start: now.Add(-time.Minute), End: now.Add(time.Hour), State: sale.StateOnline,
		RequireToken: true, ReservedUsers: []int64{42, 43},
		SKUs: []sale.SKU{{ID: 7001, Stock: 10, Price: 990, LimitPerUser: 1}, {ID: 7002, Stock: 10, Price: 990, LimitPerUser: 1}}}
	later := sale.Activity{ID: 8, Start: now.Add(time.Hour), End: now.Add(2 * time.Hour), RequireToken: true, ReservedUsers: []int64{42},
		SKUs: []sale.SKU{{ID: 8001, Stock: 1, LimitPerUser: 1}}}
	over := sale.Activity{ID: 9, Start: now.Add(-2 * time.Hour), End: now.Add(-time.Hour), RequireToken: true, ReservedUsers: []int64{42},
		SKUs: []sale.SKU{{ID: 9001, Stock: 1, LimitPerUser: 1}}}
	free := openActivity(10, sale.SKU{ID: 10001, Stock: 1, LimitPerUser: 1})
	for _, a := range []sale.Activity{open, later, over, free} {
		c.preheat(t, a)
	}
	tokenURL, orderURL := c.base+"/api/v1/flash-sale/token", c.base+"/api/v1/flash-sale/order"
	issue := func(user int64, body string) reply { return send(t, "POST", tokenURL, user, "", body) }
	buy := func(user int64, sku int64, tok string) reply {
		return send(t, "POST", orderURL, user, "", fmt.Sprintf(`{"activityId":7,"skuId":%d,"token":%q}`, sku, tok))
	}

	// Issuing: only a reserved user, only inside the window, only where
	// tokens are required.
	expect(t, "not reserved", issue(44, `{"activityId":7,"skuId":7001}`), 403, "NOT_RESERVED")
	expect(t, "before the window", issue(42, `{"activityId":8,"skuId":8001}`), 425, "NOT_OPEN")
	expect(t, "after the window", issue(42, `{"activityId":9,"skuId":9001}`), 410, "ENDED")
	expect(t, "a sale without tokens", issue(42, `{"activityId":10,"skuId":10001}`), 403, "TOKEN_NOT_REQUIRED")
	expect(t, "no user", issue(0, `{"activityId":7,"skuId":7001}`), 401, "UNAUTHORIZED")
	r := issue(42, `{"activityId":7,"skuId":7001}`)
	expect(t, "a reserved user in the window", r, 200, "")
	good, _ := r.body["token"].(string)
	if exp, err := time.Parse(time.RFC3339, fmt.Sprint(r.body["expireAt"])); err != nil || exp.Before(now) {
		t.Fatalf("expireAt %v: %v", r.body["expireAt"], err)
	}

	// Verification over HTTP with the real verifier: every bad token is
	// 403 and reaches neither Redis nor the engine.
	other, _ := token.New(token.Config{Keys: []token.Key{{ID: "k1", Secret: "not-the-edge-secret-at-all"}}, TTL: time.Minute}, nil)
	forged, _, _ := other.Issue(7, 7001, 42, now)
	expired, _, _ := c.sys.Tokens.Issue(7, 7001, 42, now.Add(-time.Hour))
	calls := testenv.Metric(t, c.sys.Reg, "seckill_edge_engine_calls_total", nil)
	for _, bad := range []struct {
		name string
		user int64
		sku  int64
		tok  string
		code string
	}{
		{"no token", 42, 7001, "", "TOKEN_REQUIRED"},
		{"a forged token", 42, 7001, forged, "TOKEN_INVALID"},
		{"an edited token", 42, 7001, editMiddle(good), "TOKEN_INVALID"},
		{"an expired token", 42, 7001, expired, "TOKEN_INVALID"},
		{"another user's token", 43, 7001, good, "TOKEN_INVALID"},
		{"a token for another sku", 42, 7002, good, "TOKEN_INVALID"},
	} {
		body := fmt.Sprintf(`{"activityId":7,"skuId":%d}`, bad.sku)
		if bad.tok != "" {
			body = fmt.Sprintf(`{"activityId":7,"skuId":%d,"token":%q}`, bad.sku, bad.tok)
		}
		expect(t, bad.name, send(t, "POST", orderURL, bad.user, "", body), 403, bad.code)
	}
	if got := testenv.Metric(t, c.sys.Reg, "seckill_edge_engine_calls_total", nil); got != calls {
		t.Fatalf("bad tokens reached the engine %v times", got-calls)
	}
	expect(t, "the good token", buy(42, 7001, good), 200, "QUEUING")
	expect(t, "the same token again", buy(42, 7001, good), 403, "TOKEN_INVALID")

	// Redis down: the nonce cannot be spent, so the answer is busy.
	r = issue(43, `{"activityId":7,"skuId":7001}`)
	expect(t, "a token for user 43", r, 200, "")
	c.redis.Stop()
	t.Cleanup(func() { _ = c.redis.Start() })
	expect(t, "a good token with Redis down", buy(43, 7001, r.body["token"].(string)), 503, "BUSY")
}

// TestAdmissionGateNeverStarvesTheLastUnits runs a crowd far larger than
// a strict gate admits (K = 0.1, floor 20/s: the floor rules throughout),
// a quarter of it ticket holders trying again (409s that spend gate
// capacity). Buyers turned away with 429 retry. The gate holds the engine's
// load near the stock, and still every unit sells.
func TestAdmissionGateNeverStarvesTheLastUnits(t *testing.T) {
	c := startClusterWith(t, sqliteOnly(), func(cfg *config.Config) {
		crowdBudgets(cfg)
		cfg.Edge.Rate.GateK, cfg.Edge.Rate.GateFloor = 0.1, 20
		cfg.Edge.Rate.UserPerSecond, cfg.Edge.Rate.UserSKULimit = 0, 0 // buyers retry fast here
	})
	const stock = 100
	c.preheat(t, openActivity(1, sale.SKU{ID: 1001, Stock: stock, Price: 100, LimitPerUser: 1}))
	var (
		mu                                sync.Mutex
		holders                           []int64
		next, sent                        atomic.Int64
		tickets, gated, dup, soldOut, bad atomic.Int64
		wg                                sync.WaitGroup
	)
	start := time.Now()
	deadline := start.Add(60 * time.Second)
	for w := range 32 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			user := next.Add(1)
			for i := 0; time.Now().Before(deadline) && tickets.Load() < stock; i++ {
				u := user
				mu.Lock()
				if i%4 == w%4 && len(holders) > 0 {
					u = holders[i%len(holders)]
				}
				mu.Unlock()
				sent.Add(1)
				r := send(t, "POST", c.base+"/api/v1/flash-sale/order", u, "", `{"skuId":1001}`)
				switch {
				case r.status == 200:
					tickets.Add(1)
					mu.Lock()
					holders = append(holders, u)
					mu.Unlock()
					user = next.Add(1)
				case r.status == 409:
					dup.Add(1)
				case r.status == 429 && r.code() == "RATE_LIMITED":
					gated.Add(1)
					if ra := r.header.Get("Retry-After"); ra == "" || ra == "0" {
						t.Errorf("429 with Retry-After %q", ra)
					}
					time.Sleep(10 * time.Millisecond) // a real buyer waits Retry-After; the test cannot
				case r.status == 410:
					soldOut.Add(1)
					return
				default:
					bad.Add(1)
					t.Errorf("unexpected %d %s", r.status, r.raw)
				}
			}
		}()
	}
	wg.Wait()
	calls := testenv.Metric(t, c.sys.Reg, "seckill_edge_engine_calls_total", nil)
	t.Logf("%v: %d requests: %d tickets, %d gated (429), %d duplicates, %d sold out; engine calls %v",
		time.Since(start).Round(time.Millisecond), sent.Load(), tickets.Load(), gated.Load(), dup.Load(), soldOut.Load(), calls)
	if tickets.Load() != stock {
		t.Fatalf("%d tickets for %d units: the gate starved the sale", tickets.Load(), stock)
	}
	if n := c.redis.Int(t, "GET", sale.KeysFor(1, 1001).Stock); n != 0 {
		t.Fatalf("Redis stock %d, want 0", n)
	}
	if gated.Load() < int64(stock) {
		t.Fatalf("only %d requests gated: the test did not load the gate", gated.Load())
	}
	// At 20/s for 100 units the sale lasts about 5 s; whatever the crowd
	// sent, the engine saw roughly what the gate admits — besides the
	// retries of buyers it had told hold a ticket, which pass the gate
	// without spending it and are answered DUPLICATE by the engine.
	if max := float64(stock)*2 + 20*time.Since(start).Seconds(); calls-float64(dup.Load()) > max {
		t.Errorf("%v engine calls (%d of them duplicates), want at most %v others: the gate let the crowd through", calls, dup.Load(), max)
	}
}

func TestBlocklistThroughTheAdminAPI(t *testing.T) {
	c := startClusterWith(t, sqliteOnly(), func(cfg *config.Config) { cfg.Edge.Blocklist.Users = []int64{900} })
	c.preheat(t, openActivity(1, sale.SKU{ID: 1001, Stock: 100, Price: 100, LimitPerUser: 1}))
	auth := "Bearer " + c.cfg.Admin.Token
	admin := func(method, path string) reply { return send(t, method, c.admin+path, 0, auth, "") }
	buy := func(user int64) reply {
		return send(t, "POST", c.base+"/api/v1/flash-sale/order", user, "", `{"skuId":1001}`)
	}
	// probe asks without buying: an empty body is 400 unless the user is
	// blocked (the blocklist is checked first).
	probe := func(user int64) func() reply {
		return func() reply { return send(t, "POST", c.base+"/api/v1/flash-sale/order", user, "", `{}`) }
	}
	waitStatus := func(what string, f func() reply, status int) {
		t.Helper()
		testenv.EventuallyOK(t, what, 5*time.Second, func() error {
			if r := f(); r.status != status {
				return fmt.Errorf("%d %s, want %d", r.status, r.raw, status)
			}
			return nil
		})
	}

	r := admin("PUT", "/admin/v1/blocklist/users/555")
	if r.status != 200 || r.body["blocked"] != true || r.body["changed"] != true {
		t.Fatalf("block user: %d %s", r.status, r.raw)
	}
	waitStatus("user 555 blocked", probe(555), 403)
	expect(t, "a blocked user", buy(555), 403, "BLOCKED")
	expect(t, "a configured block", buy(900), 403, "BLOCKED")
	expect(t, "anyone else", buy(556), 200, "QUEUING")

	// Blocking the test client's own address: loopback is exempt from the
	// per-IP limit, never from the blocklist.
	expect(t, "block 127.0.0.0/8", admin("PUT", "/admin/v1/blocklist/ips/127.0.0.0/8"), 200, "")
	waitStatus("127.0.0.1 blocked", func() reply { return buy(557) }, 403)
	list := admin("GET", "/admin/v1/blocklist")
	if !strings.Contains(list.raw, `"127.0.0.0/8"`) || !strings.Contains(list.raw, "555") || !strings.Contains(list.raw, `"configured":{"ips":[],"users":[900]}`) {
		t.Fatalf("blocklist: %s", list.raw)
	}
	expect(t, "unblock 127.0.0.0/8", admin("DELETE", "/admin/v1/blocklist/ips/127.0.0.0/8"), 200, "")
	r = admin("DELETE", "/admin/v1/blocklist/users/555")
	if r.status != 200 || r.body["blocked"] != false || r.body["changed"] != true {
		t.Fatalf("unblock user: %d %s", r.status, r.raw)
	}
	waitStatus("user 555 unblocked", probe(555), 400)
	expect(t, "user 555 buys", buy(555), 200, "QUEUING")
	// A configured entry cannot be lifted through the API, and says so.
	r = admin("DELETE", "/admin/v1/blocklist/users/900")
	if r.status != 200 || r.body["blocked"] != true || r.body["note"] == nil {
		t.Fatalf("unblock a configured user: %d %s", r.status, r.raw)
	}
	expect(t, "a bad address", admin("PUT", "/admin/v1/blocklist/ips/not-an-ip"), 400, "BAD_REQUEST")
	expect(t, "a bad user", admin("PUT", "/admin/v1/blocklist/users/-4"), 400, "BAD_REQUEST")
}

// TestEveryAdminRouteWithAndWithoutTheToken walks the admin router of a
// running system (including routes other packages mount), so a new route
// is covered without editing this test.
func TestEveryAdminRouteWithAndWithoutTheToken(t *testing.T) {
	c := startCluster(t, sqliteOnly())
	c.preheat(t, openActivity(1, sale.SKU{ID: 1001, Stock: 10, Price: 100, LimitPerUser: 1}))
	rn := c.buy(t, 1001, 5).RequestNo
	param := regexp.MustCompile(`\{([a-zA-Z]+)(:\*|\?)?\}`)
	sample := map[string]string{"id": "1", "sku": "1001", "requestNo": rn, "ip": "192.0.2.1", "orderNo": "O" + rn}
	bodies := map[string]string{
		"PUT /admin/v1/activities/{id}/state": `{"state":"ONLINE"}`,
		"PUT /admin/v1/skus/{sku}/soldout":    `{"soldOut":false}`,
		"POST /admin/v1/skus/{sku}/restock":   `{"units":1}`,
		"POST /admin/v1/activities":           `{}`,
	}
	var routes []string
	for method, paths := range c.sys.Admin.Router().List() {
		for _, p := range paths {
			if strings.HasPrefix(p, "/admin/ui") {
				continue // the on-call page shell: public by design, it holds no data
			}
			if p == "/readyz" {
				continue // the edge's readiness for the balancer's probe: public by design (TestAdminServesReadyzAndMetrics)
			}
			routes = append(routes, method+" "+p)
		}
	}
	sort.Strings(routes)
	for _, route := range routes {
		method, pattern, _ := strings.Cut(route, " ")
		path := param.ReplaceAllStringFunc(pattern, func(m string) string {
			name := param.FindStringSubmatch(m)[1]
			if v, ok := sample[name]; ok {
				return v
			}
			return "1"
		})
		body := bodies[route]
		t.Run(route, func(t *testing.T) {
			for _, auth := range []string{"", "Bearer wrong", "Bearer " + c.cfg.Admin.Token + "x", c.cfg.Admin.Token} {
				if r := send(t, method, c.admin+path, 0, auth, body); r.status != 401 {
					t.Fatalf("Authorization %q: %d %s, want 401", auth, r.status, r.raw)
				}
			}
			r := send(t, method, c.admin+path, 0, "Bearer "+c.cfg.Admin.Token, body)
			if r.status == 401 || r.status >= 500 && r.status != 503 {
				t.Fatalf("with the token: %d %s", r.status, r.raw)
			}
		})
	}
	if len(routes) < 14 {
		t.Fatalf("only %d admin routes: %v", len(routes), routes)
	}
}

// editMiddle changes one character in the middle of a token's signature, a
// character all six bits of which are signed bytes (the last one is not).
func editMiddle(tok string) string {
	b := []byte(tok)
	i := len(b) - 10
	if b[i] == 'A' {
		b[i] = 'B'
	} else {
		b[i] = 'A'
	}
	return string(b)
}

// TestAdminServesReadyzAndMetrics: the admin listener serves the edge's
// /readyz without the token (the balancer's probe) and /metrics with it
// only; production keeps both off the public listener (edge.public_ops).
func TestAdminServesReadyzAndMetrics(t *testing.T) {
	c := startClusterWith(t, sqliteOnly(), func(cfg *config.Config) { cfg.Edge.PublicOps = false })
	if r := send(t, "GET", c.admin+"/readyz", 0, "", ""); r.status != 200 {
		t.Fatalf("admin /readyz without the token: %d %s", r.status, r.raw)
	}
	if r := send(t, "GET", c.admin+"/metrics", 0, "", ""); r.status != 401 {
		t.Fatalf("admin /metrics without the token: %d, want 401", r.status)
	}
	if r := send(t, "GET", c.admin+"/metrics", 0, "Bearer "+c.cfg.Admin.Token, ""); r.status != 200 || !strings.Contains(r.raw, "seckill_edge_requests_total") {
		t.Fatalf("admin /metrics with the token: %d", r.status)
	}
	for _, p := range []string{"/readyz", "/metrics"} {
		if r := send(t, "GET", c.base+p, 0, "", ""); r.status != 404 {
			t.Errorf("public %s with public_ops off: %d, want 404", p, r.status)
		}
	}
}
