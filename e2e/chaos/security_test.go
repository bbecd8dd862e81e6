package chaos

import (
	"bufio"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"
)

const (
	tokenActivity = 2
	tokenSKU      = 201
	tokenSKU2     = 202
)

// TestSecurity runs the hostile-client and authentication checks against
// one system of real processes. Fast: runs in make test.
func TestSecurity(t *testing.T) {
	s := startSystem(t, Options{NoConsumer: true})
	s.preheat(saleActivity(1000, 1000))
	now := time.Now()
	reserved := make([]int64, 0, 20)
	for u := int64(5001); u <= 5020; u++ {
		reserved = append(reserved, u)
	}
	s.preheat(activity{ID: tokenActivity, Start: now.Add(-time.Minute), End: now.Add(time.Hour), State: stateOnline,
		RequireToken: true, ReservedUsers: reserved,
		SKUs: []skuSpec{{ID: tokenSKU, Stock: 100, Price: "1.00", LimitPerUser: 1}, {ID: tokenSKU2, Stock: 100, Price: "1.00", LimitPerUser: 1}}})

	t.Run("admin routes refuse a missing or wrong token with 401", func(t *testing.T) { testAdminAuth(t, s) })
	t.Run("qualification tokens that are forged, expired, replayed or someone else's get 403", func(t *testing.T) { testTokens(t, s) })
	t.Run("the public token endpoint issues only to reserved buyers", func(t *testing.T) { testTokenEndpoint(t, s) })
	t.Run("a missing or garbage X-User-Id is refused", func(t *testing.T) { testUserHeader(t, s) })
	t.Run("oversized bodies and headers are refused", func(t *testing.T) { testOversized(t, s) })
	t.Run("slow clients are cut off and other buyers do not notice", func(t *testing.T) { testSlowClients(t, s) })
	t.Run("another buyer's result reads as not found", func(t *testing.T) { testForeignResult(t, s) })
}

func testAdminAuth(t *testing.T, s *System) {
	routes := []struct{ method, path, body string }{
		{"POST", "/admin/v1/activities", `{"id":9,"start":"2030-01-01T00:00:00Z","end":"2030-01-02T00:00:00Z","skus":[{"id":901,"stock":5}]}`},
		{"GET", "/admin/v1/activities", ""},
		{"PUT", "/admin/v1/activities/1/state", `{"state":"OFFLINE"}`},
		{"GET", "/admin/v1/activities/1/stock", ""},
		{"PUT", "/admin/v1/skus/101/soldout", `{"soldOut":true}`},
		{"POST", "/admin/v1/skus/101/restock", `{"units":1000}`},
		{"GET", "/admin/v1/requests/123", ""},
		{"POST", "/admin/v1/reconcile", ""},
		{"GET", "/admin/v1/lag", ""},
		{"GET", "/admin/v1/no-such-route", ""},
	}
	bad := map[string]string{
		"no header":            "",
		"wrong token":          "Bearer not-the-token",
		"empty bearer":         "Bearer ",
		"token as Basic":       "Basic " + base64.StdEncoding.EncodeToString([]byte("admin:"+adminToken)),
		"token without Bearer": adminToken,
		"token prefix":         "Bearer " + adminToken[:len(adminToken)-1],
		"token plus a byte":    "Bearer " + adminToken + "x",
		"token twice":          "Bearer " + adminToken + adminToken,
	}
	names := make([]string, 0, len(bad))
	for n := range bad {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, r := range routes {
		for _, n := range names {
			hdr := map[string]string{}
			if bad[n] != "" {
				hdr["Authorization"] = bad[n]
			}
			var body []byte
			if r.body != "" {
				body = []byte(r.body)
			}
			st, b, err := s.do(r.method, "http://"+s.adminAddr+r.path, 0, body, hdr)
			if err != nil {
				t.Fatalf("%s %s (%s): %v", r.method, r.path, n, err)
			}
			if st != http.StatusUnauthorized {
				t.Errorf("%s %s with %s: %d %s, want 401", r.method, r.path, n, st, trim(b))
			}
		}
	}
	// Paths that try to slip past the check through the public on-call
	// page prefix or path tricks carry no data.
	for _, path := range []string{
		"/admin/ui/../v1/lag", "/admin/ui/%2e%2e/v1/lag", "/admin/ui%2F..%2Fv1%2Flag", "/admin/uiv1/lag",
		"//admin/v1/lag", "/admin/v1/lag/", "/ADMIN/v1/lag", "/admin/v1/./lag", "/admin/v1/activities/1/stock?x=/admin/ui",
	} {
		for _, method := range []string{"GET", "HEAD"} {
			st, body, err := rawResponse(s.adminAddr, method+" "+path+" HTTP/1.1\r\nHost: a\r\nConnection: close\r\n\r\n", 3*time.Second)
			if err != nil && st == 0 {
				t.Errorf("%s %s: %v", method, path, err)
				continue
			}
			if st != http.StatusUnauthorized && st != http.StatusNotFound && st != http.StatusBadRequest && (st < 300 || st >= 400) {
				t.Errorf("%s %s without a token: %d %s, want 401 (or 404/400/redirect)", method, path, st, trim(body))
			}
			if strings.Contains(string(body), `"total"`) || strings.Contains(string(body), `"skus"`) {
				t.Errorf("%s %s without a token leaked admin data: %s", method, path, trim(body))
			}
		}
	}

	// Nothing the refused calls asked for happened: the sale still sells
	// SKU 101 (no sold-out mark, activity online), stock unchanged.
	var sr struct {
		State string `json:"state"`
		SKUs  []struct {
			SKUID   int64 `json:"skuId"`
			Initial int64 `json:"initial"`
			Marked  bool  `json:"markedSoldOut"`
		} `json:"skus"`
	}
	if err := s.adminJSON("GET", "/admin/v1/activities/1/stock", nil, &sr); err != nil {
		t.Fatal(err)
	}
	if sr.State != stateOnline {
		t.Errorf("activity 1 is %s after refused calls", sr.State)
	}
	for _, l := range sr.SKUs {
		if l.Marked || l.Initial != 1000 {
			t.Errorf("sku %d after refused calls: marked sold out %v, initial %d", l.SKUID, l.Marked, l.Initial)
		}
	}
	if st, b, _ := s.admin("GET", "/admin/v1/activities/9/stock", nil); st != http.StatusNotFound {
		t.Errorf("activity 9 (created by a refused call?): %d %s", st, trim(b))
	}
	// The right token passes.
	if st, b, err := s.admin("GET", "/admin/v1/activities", nil); err != nil || st != 200 {
		t.Errorf("with the right token: %d %s %v", st, trim(b), err)
	}
}

// buyToken buys on the token activity with tok as user.
func (s *System) buyToken(t *testing.T, user, sku int64, tok string) (int, string) {
	t.Helper()
	body, _ := json.Marshal(map[string]any{"activityId": tokenActivity, "skuId": sku, "quantity": 1, "token": tok})
	if tok == "" {
		body, _ = json.Marshal(map[string]any{"activityId": tokenActivity, "skuId": sku, "quantity": 1})
	}
	st, b, err := s.do("POST", s.url("/api/v1/flash-sale/order"), user, body, nil)
	if err != nil {
		t.Fatal(err)
	}
	var ans struct{ Code string }
	_ = json.Unmarshal(b, &ans)
	return st, ans.Code
}

// signToken makes a qualification token as docs/security.md describes it:
// base64url(payload).base64url(HMAC-SHA256(payload)), the payload
// v1|keyId|activity|sku|user|expireAt|nonce with expireAt in Unix seconds
// and a nonce of 12 random bytes in hex. The suite signs its own tokens
// rather than borrowing the product's signer.
func signToken(t *testing.T, secret string, sku, user int64, expire time.Time) string {
	t.Helper()
	var n [12]byte
	if _, err := rand.Read(n[:]); err != nil {
		t.Fatal(err)
	}
	p := fmt.Sprintf("v1|%s|%d|%d|%d|%d|%s", tokenKeyID, tokenActivity, sku, user, expire.Unix(), hex.EncodeToString(n[:]))
	h := hmac.New(sha256.New, []byte(secret))
	h.Write([]byte(p))
	enc := base64.RawURLEncoding
	return enc.EncodeToString([]byte(p)) + "." + enc.EncodeToString(h.Sum(nil))
}

func testTokens(t *testing.T, s *System) {
	const (
		issuer = tokenSecret
		forger = "not-the-secret-at-all-000"
	)
	issue := func(secret string, sku, user int64, now time.Time) string {
		return signToken(t, secret, sku, user, now.Add(time.Minute).Truncate(time.Second))
	}
	valid := issue(issuer, tokenSKU, 5001, time.Now())
	// The same signature over claims for another user.
	payload, sig, _ := strings.Cut(valid, ".")
	raw, _ := base64.RawURLEncoding.DecodeString(payload)
	tampered := base64.RawURLEncoding.EncodeToString([]byte(strings.Replace(string(raw), "|5001|", "|5002|", 1))) + "." + sig

	cases := []struct {
		name  string
		user  int64
		sku   int64
		token string
		code  string
	}{
		{"no token", 5002, tokenSKU, "", "TOKEN_REQUIRED"},
		{"garbage", 5002, tokenSKU, "not-a-token", "TOKEN_INVALID"},
		{"signed with another secret", 5002, tokenSKU, issue(forger, tokenSKU, 5002, time.Now()), "TOKEN_INVALID"},
		{"claims changed under a valid signature", 5002, tokenSKU, tampered, "TOKEN_INVALID"},
		{"expired", 5002, tokenSKU, issue(issuer, tokenSKU, 5002, time.Now().Add(-2*time.Minute)), "TOKEN_INVALID"},
		{"another user's", 5002, tokenSKU, valid, "TOKEN_INVALID"},
		{"for another SKU", 5001, tokenSKU2, valid, "TOKEN_INVALID"},
		{"oversized", 5002, tokenSKU, strings.Repeat("A", 600) + "." + sig, "TOKEN_INVALID"},
	}
	for _, c := range cases {
		st, code := s.buyToken(t, c.user, c.sku, c.token)
		if st != http.StatusForbidden || code != c.code {
			t.Errorf("%s: %d %s, want 403 %s", c.name, st, code, c.code)
		}
	}
	// The rightful owner can still use the token the others tried.
	if st, code := s.buyToken(t, 5001, tokenSKU, valid); st != 200 {
		t.Errorf("owner's token after others tried it: %d %s, want 200", st, code)
	}
	// Replayed: a second use of a spent token, even by its owner on another
	// attempt, is refused before the engine.
	if st, code := s.buyToken(t, 5001, tokenSKU, valid); st != http.StatusForbidden || code != "TOKEN_INVALID" {
		t.Errorf("replayed token: %d %s, want 403 TOKEN_INVALID", st, code)
	}
	fresh := issue(issuer, tokenSKU, 5003, time.Now())
	if st, code := s.buyToken(t, 5003, tokenSKU, fresh); st != 200 {
		t.Errorf("fresh token of user 5003: %d %s, want 200", st, code)
	}
	if st, code := s.buyToken(t, 5003, tokenSKU, fresh); st != http.StatusForbidden {
		t.Errorf("the same token again: %d %s, want 403", st, code)
	}
}

// testTokenEndpoint covers POST /api/v1/flash-sale/token (README "HTTP
// API"): a reserved buyer gets a token bound to them and the SKU.
func testTokenEndpoint(t *testing.T, s *System) {
	ask := func(user, activity, sku int64) (int, map[string]any) {
		body, _ := json.Marshal(map[string]any{"activityId": activity, "skuId": sku})
		st, b, err := s.do("POST", s.url("/api/v1/flash-sale/token"), user, body, nil)
		if err != nil {
			t.Fatal(err)
		}
		var m map[string]any
		_ = json.Unmarshal(b, &m)
		return st, m
	}
	st, m := ask(5010, tokenActivity, tokenSKU)
	if st != 200 || m["token"] == nil || m["expireAt"] == nil {
		t.Fatalf("reserved buyer 5010: %d %v, want 200 with token and expireAt", st, m)
	}
	tok, _ := m["token"].(string)
	if exp, err := time.Parse(time.RFC3339, fmt.Sprint(m["expireAt"])); err != nil || !exp.After(time.Now()) {
		t.Errorf("expireAt %v: %v", m["expireAt"], err)
	}
	if st, code := s.buyToken(t, 5011, tokenSKU, tok); st != http.StatusForbidden {
		t.Errorf("5010's issued token used by 5011: %d %s, want 403", st, code)
	}
	if st, code := s.buyToken(t, 5010, tokenSKU2, tok); st != http.StatusForbidden {
		t.Errorf("5010's token for sku %d used on %d: %d %s, want 403", tokenSKU, tokenSKU2, st, code)
	}
	if st, code := s.buyToken(t, 5010, tokenSKU, tok); st != 200 {
		t.Errorf("5010 with its issued token: %d %s, want 200", st, code)
	}
	if st, code := s.buyToken(t, 5010, tokenSKU, tok); st != http.StatusForbidden {
		t.Errorf("5010 replaying its token: %d %s, want 403", st, code)
	}
	if st, m := ask(9999, tokenActivity, tokenSKU); st != http.StatusForbidden {
		t.Errorf("token for a buyer who is not reserved: %d %v, want 403", st, m)
	}
	if st, m := ask(0, tokenActivity, tokenSKU); st != http.StatusUnauthorized {
		t.Errorf("token without X-User-Id: %d %v, want 401", st, m)
	}
	if st, m := ask(5012, tokenActivity, 999); st < 400 || st >= 500 {
		t.Errorf("token for a SKU the activity does not sell: %d %v, want 4xx", st, m)
	}
}

func testUserHeader(t *testing.T, s *System) {
	order := []byte(fmt.Sprintf(`{"activityId":%d,"skuId":%d,"quantity":1}`, activityID, skuNormal))
	for _, path := range []string{"/api/v1/flash-sale/order", "/api/seckill/submit", "/api/v1/flash-sale/result/1234567890"} {
		method, body := "POST", order
		if strings.Contains(path, "result") {
			method, body = "GET", nil
		}
		st, b, err := s.do(method, s.url(path), 0, body, nil)
		if err != nil || st != http.StatusUnauthorized {
			t.Errorf("%s without X-User-Id: %d %s %v, want 401", path, st, trim(b), err)
		}
		for _, v := range []string{"abc", "-5", "0", "1.5", "12abc", "0x10", "1e3", "+7", "99999999999999999999", "١٢٣", "7 7"} {
			st, b, err := s.do(method, s.url(path), 0, body, map[string]string{"X-User-Id": v})
			if err != nil || st != http.StatusBadRequest {
				t.Errorf("%s with X-User-Id %q: %d %s %v, want 400", path, v, st, trim(b), err)
			}
		}
	}
}

// raw sends data on a fresh connection and returns the status code of the
// answer (0 if the server closed the connection without one).
func raw(addr string, data []byte, wait time.Duration) (int, error) {
	c, err := net.DialTimeout("tcp", addr, time.Second)
	if err != nil {
		return 0, err
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(wait))
	if _, err := c.Write(data); err != nil && !errors.Is(err, net.ErrClosed) {
		// The server may close before reading it all; read its answer.
		_ = err
	}
	return readStatus(c)
}

// rawResponse sends req on a fresh connection and returns the answer's
// status and body (read until the server closes or wait passes).
func rawResponse(addr, req string, wait time.Duration) (int, []byte, error) {
	c, err := net.DialTimeout("tcp", addr, time.Second)
	if err != nil {
		return 0, nil, err
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(wait))
	if _, err := c.Write([]byte(req)); err != nil {
		return 0, nil, err
	}
	resp, err := http.ReadResponse(bufio.NewReader(c), &http.Request{Method: strings.Fields(req)[0]})
	if err != nil {
		return 0, nil, err
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, b, nil
}

func readStatus(c net.Conn) (int, error) {
	line, err := bufio.NewReader(c).ReadString('\n')
	if line == "" {
		return 0, err
	}
	var proto string
	var st int
	if _, err := fmt.Sscanf(line, "%s %d", &proto, &st); err != nil {
		return 0, fmt.Errorf("status line %q: %w", line, err)
	}
	return st, nil
}

func testOversized(t *testing.T, s *System) {
	pad := func(n int) string {
		b := `{"activityId":1,"skuId":101,"quantity":1,"requestId":"`
		return b + strings.Repeat("x", n-len(b)-2) + `"}`
	}
	cases := []struct {
		name string
		req  string
		want int
	}{
		{"a 5 KiB body", "POST /api/v1/flash-sale/order HTTP/1.1\r\nHost: e\r\nX-User-Id: 42\r\nContent-Type: application/json\r\nContent-Length: 5120\r\n\r\n" + pad(5120), 413},
		{"a 1 MiB body", "POST /api/v1/flash-sale/order HTTP/1.1\r\nHost: e\r\nX-User-Id: 42\r\nContent-Length: 1048576\r\n\r\n" + pad(1<<20), 413},
		{"a chunked 8 KiB body", "POST /api/v1/flash-sale/order HTTP/1.1\r\nHost: e\r\nX-User-Id: 42\r\nTransfer-Encoding: chunked\r\n\r\n2000\r\n" + pad(8192) + "\r\n0\r\n\r\n", 413},
		{"an 8 KiB header", "POST /api/v1/flash-sale/order HTTP/1.1\r\nHost: e\r\nX-User-Id: 42\r\nX-Junk: " + strings.Repeat("j", 8192) + "\r\nContent-Length: 2\r\n\r\n{}", 431},
		{"200 headers", "GET /api/v1/flash-sale/activities/1 HTTP/1.1\r\nHost: e\r\n" + strings.Repeat("X-Many: 0123456789012345678901234567890123456789\r\n", 200) + "\r\n", 431},
		{"a 10 KiB URL", "GET /api/v1/flash-sale/result/" + strings.Repeat("9", 10240) + " HTTP/1.1\r\nHost: e\r\nX-User-Id: 42\r\n\r\n", 431},
	}
	for _, c := range cases {
		st, err := raw(s.edgeAddr, []byte(c.req), 5*time.Second)
		if st != c.want {
			t.Errorf("%s: status %d (%v), want %d", c.name, st, err, c.want)
		}
	}
	// The edge is fine afterwards.
	if st, _, err := s.get("/healthz", 0); err != nil || st != 200 {
		t.Errorf("healthz after oversized requests: %d %v", st, err)
	}
}

func testSlowClients(t *testing.T, s *System) {
	const slow = 40
	readTimeout := 2 * time.Second // edge.read_timeout in the harness config
	type outcome struct {
		closedAfter time.Duration
		status      int
		sent        int
		err         error
	}
	outs := make(chan outcome, slow)
	stop := make(chan struct{})
	for i := 0; i < slow; i++ {
		go func() {
			start := time.Now()
			c, err := net.DialTimeout("tcp", s.edgeAddr, time.Second)
			if err != nil {
				outs <- outcome{err: err}
				return
			}
			defer c.Close()
			req := []byte("POST /api/v1/flash-sale/order HTTP/1.1\r\nHost: e\r\nX-User-Id: 77\r\nContent-Length: 40\r\n\r\n")
			if i%2 == 1 {
				// Headers at once, then the body trickles.
				c.Write(req)
				req = []byte(`{"activityId":1,"skuId":101,"quantity":1}`)
			}
			// Reader: notices when the server closes or answers.
			closed := make(chan outcome, 1)
			go func() {
				c.SetReadDeadline(time.Now().Add(readTimeout + 8*time.Second))
				st, err := readStatus(c)
				if st != 0 {
					// Drain until the server closes.
					_, _ = io.Copy(io.Discard, c)
				}
				closed <- outcome{closedAfter: time.Since(start), status: st, err: err}
			}()
			sent := 0
			tick := time.NewTicker(250 * time.Millisecond)
			defer tick.Stop()
			for {
				select {
				case o := <-closed:
					o.sent = sent
					outs <- o
					return
				case <-stop:
					outs <- outcome{closedAfter: time.Since(start), sent: sent, err: errors.New("still open when the test gave up")}
					return
				case <-tick.C:
					if sent < len(req) {
						if _, err := c.Write(req[sent : sent+1]); err == nil {
							sent++
						}
					}
				}
			}
		}()
	}
	// Meanwhile ordinary buyers (activity views and purchases) are served
	// at once.
	time.Sleep(300 * time.Millisecond)
	var (
		mu    sync.Mutex
		worst time.Duration
		fails []string
		wg    sync.WaitGroup
	)
	for i := 0; i < 200; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			a := attempt{User: int64(60000 + i), SKU: skuNormal}
			s.attempt(&a)
			mu.Lock()
			defer mu.Unlock()
			worst = max(worst, a.Took)
			if a.Status != 200 {
				fails = append(fails, fmt.Sprintf("%d %s %s", a.Status, a.Code, a.Err))
			}
		}()
	}
	wg.Wait()
	if len(fails) > 0 || worst > 2*time.Second {
		t.Errorf("buyers next to %d slow clients: slowest answer %v, %d not accepted %v", slow, worst, len(fails), head(fails, 3))
	} else {
		t.Logf("200 buyers next to %d slow clients: all accepted, slowest answer %v", slow, worst)
	}
	timer := time.AfterFunc(readTimeout+10*time.Second, func() { close(stop) })
	defer timer.Stop()
	var latest time.Duration
	for i := 0; i < slow; i++ {
		o := <-outs
		switch {
		case o.err != nil && o.closedAfter == 0:
			t.Errorf("slow client: %v", o.err)
		case o.closedAfter > readTimeout+3*time.Second:
			t.Errorf("slow client (sent %d bytes) cut off only after %v (edge.read_timeout %v): %v", o.sent, o.closedAfter, readTimeout, o.err)
		case o.status != 0 && o.status != http.StatusRequestTimeout && o.status != http.StatusBadRequest:
			t.Errorf("slow client answered %d, want 408 or a closed connection", o.status)
		}
		latest = max(latest, o.closedAfter)
	}
	t.Logf("%d slow clients cut off, the last after %v (edge.read_timeout %v)", slow, latest.Round(10*time.Millisecond), readTimeout)
}

func testForeignResult(t *testing.T, s *System) {
	a := attempt{User: 7001, SKU: skuNormal}
	s.attempt(&a)
	if a.Status != 200 || a.RequestNo == "" {
		t.Fatalf("buy as 7001: %+v", a)
	}
	path := "/api/v1/flash-sale/result/" + a.RequestNo
	st, own, err := s.get(path, 7001)
	if err != nil || st != 200 {
		t.Fatalf("owner reads its result: %d %s %v", st, own, err)
	}
	st, other, _ := s.get(path, 7002)
	// An unknown ticket of the same SKU (README "Numbers": <activity>-<sku>-<id>).
	i := strings.LastIndexByte(a.RequestNo, '-')
	unknownSt, unknown, _ := s.get("/api/v1/flash-sale/result/"+a.RequestNo[:i+1]+strings.Repeat("7", len(a.RequestNo)-i-1), 7002)
	if st != http.StatusNotFound || unknownSt != http.StatusNotFound || string(other) != string(unknown) {
		t.Errorf("another buyer reads 7001's result: %d %s; an unknown ticket: %d %s — want the same 404", st, trim(other), unknownSt, trim(unknown))
	}
	st, alias, _ := s.get("/api/seckill/result/"+a.RequestNo, 7002)
	if st != http.StatusNotFound || string(alias) != string(unknown) {
		t.Errorf("another buyer on the seed alias: %d %s", st, trim(alias))
	}
	for _, rn := range []string{"..%2F..%2Fadmin", "a%20b", "%00", strings.Repeat("1", 65), "'%3BDROP"} {
		if st, b, _ := s.get("/api/v1/flash-sale/result/"+rn, 7001); st != http.StatusNotFound {
			t.Errorf("result %q: %d %s, want 404", rn, st, trim(b))
		}
	}
	// The admin story of the ticket is behind the admin token.
	if st, b, _ := s.do("GET", "http://"+s.adminAddr+"/admin/v1/requests/"+a.RequestNo, 0, nil, nil); st != http.StatusUnauthorized {
		t.Errorf("ticket story without the admin token: %d %s", st, trim(b))
	}
}
