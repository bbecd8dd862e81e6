package edge

import (
	"context"
	"encoding/json"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"io"
	"net"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"seckill/catalog"
	"seckill/engine"
	"seckill/sale"
)

// Behaviours of the fake risk service.
const (
	riskFast  = iota // answers its verdict at once
	riskSlow         // answers after 2s, long past the test timeout
	riskBroke        // answers 500
)

// fakeRisk is a risk service on a real 127.0.0.1 listener.
type fakeRisk struct {
	url     string
	mode    atomic.Int32
	verdict atomic.Value // string
	calls   atomic.Int64
	deny    atomic.Int64 // a user the service denies whatever verdict says
	mu      sync.Mutex
	last    map[string]any // the last query's JSON
}

func startFakeRisk(t *testing.T, verdict string) *fakeRisk {
	t.Helper()
	f := &fakeRisk{}
	f.verdict.Store(verdict)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: http.HandlerFunc(f.serve), ReadHeaderTimeout: 5 * time.Second}
	go srv.Serve(ln)
	t.Cleanup(func() { srv.Close() })
	f.url = "http://" + ln.Addr().String() + "/v1/check"
	return f
}

func (f *fakeRisk) serve(w http.ResponseWriter, r *http.Request) {
	f.calls.Add(1)
	b, _ := io.ReadAll(r.Body)
	var q map[string]any
	if r.Method != http.MethodPost || r.URL.Path != "/v1/check" || r.Header.Get("Content-Type") != "application/json" || json.Unmarshal(b, &q) != nil {
		http.Error(w, "bad query: "+string(b), http.StatusBadRequest)
		return
	}
	f.mu.Lock()
	f.last = q
	f.mu.Unlock()
	switch f.mode.Load() {
	case riskSlow:
		select {
		case <-time.After(2 * time.Second):
		case <-r.Context().Done():
			return
		}
	case riskBroke:
		http.Error(w, "internal", http.StatusInternalServerError)
		return
	}
	verdict := f.verdict.Load().(string)
	if u, _ := q["userId"].(float64); u != 0 && int64(u) == f.deny.Load() {
		verdict = sale.RiskDeny
	}
	w.Header().Set("Content-Type", "application/json")
	io.WriteString(w, `{"reason":"test","score":0.5,"verdict":"`+verdict+`","extra":{"a":[1,2]}}`)
}

func (f *fakeRisk) lastQuery() map[string]any {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.last
}

// downURL is an address nothing listens on.
func downURL(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	return "http://" + addr + "/v1/check"
}

// riskTimeoutForTests is generous for a loaded machine under -race: the fast
// service must always make it, the slow one never.
const riskTimeoutForTests = 300 * time.Millisecond

func withRisk(url, onError string, cacheTTL time.Duration) envOption {
	return withConfig(func(c *Config) {
		c.Risk.URL, c.Risk.OnError, c.Risk.CacheTTL, c.Risk.Timeout = url, onError, cacheTTL, riskTimeoutForTests
	})
}

// passLog records RISK_PASSED steps.
type passLog struct {
	mu    sync.Mutex
	steps []string // "requestNo remark"
}

func (l *passLog) RiskPassed(requestNo string, at time.Time, remark string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if at.IsZero() || time.Since(at) > time.Minute {
		remark = "BAD TIME " + remark
	}
	l.steps = append(l.steps, requestNo+" "+remark)
}

func (l *passLog) all() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]string(nil), l.steps...)
}

func TestRiskVerdictsDecideThePurchase(t *testing.T) {
	for _, tc := range []struct {
		name, verdict      string
		status             int
		code               string
		engineCalls        float64
		rejectedForRisk    float64
		allowed, denied    float64
		passed             int
		passedRemarkPrefix string
	}{
		{"an allow verdict lets the purchase reach the engine", sale.RiskAllow, 200, "QUEUING", 1, 0, 1, 0, 1, "risk service: allow"},
		{"a deny verdict is 403 RISK_REJECTED before the engine", sale.RiskDeny, 403, "RISK_REJECTED", 0, 1, 0, 1, 0, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := startFakeRisk(t, tc.verdict)
			log := &passLog{}
			e := newEdge(t, withRisk(f.url, sale.RiskAllow, 0), withOptions(WithRiskLog(log)))
			r := e.do("POST", "/api/v1/flash-sale/order", "42", `{"activityId":7,"skuId":1001,"quantity":1}`)
			mustStatus(t, r, tc.status, tc.code)
			if got := float64(e.eng.calls.Load()); got != tc.engineCalls {
				t.Errorf("engine calls %v, want %v", got, tc.engineCalls)
			}
			if got := testutil.ToFloat64(e.srv.m.rejections[reasonRisk]); got != tc.rejectedForRisk {
				t.Errorf("risk rejections %v, want %v", got, tc.rejectedForRisk)
			}
			if got := testutil.ToFloat64(e.srv.m.riskVerdicts[riskAllow][riskFromService]); got != tc.allowed {
				t.Errorf("allow verdicts %v, want %v", got, tc.allowed)
			}
			if got := testutil.ToFloat64(e.srv.m.riskVerdicts[riskDeny][riskFromService]); got != tc.denied {
				t.Errorf("deny verdicts %v, want %v", got, tc.denied)
			}
			steps := log.all()
			if len(steps) != tc.passed {
				t.Fatalf("RISK_PASSED steps %q, want %d", steps, tc.passed)
			}
			if tc.passed == 1 {
				if want := r.body["requestNo"].(string) + " " + tc.passedRemarkPrefix; steps[0] != want {
					t.Errorf("RISK_PASSED %q, want %q", steps[0], want)
				}
			}
		})
	}
}

// TestRiskQueryFollowsTheWireContract: the service gets the buyer, the
// resolved activity, the SKU, the quantity, the client address and the
// device header.
func TestRiskQueryFollowsTheWireContract(t *testing.T) {
	f := startFakeRisk(t, sale.RiskAllow)
	e := newEdge(t, withRisk(f.url, sale.RiskAllow, 0))
	r := e.doVia(e.from("203.0.113.7"), "POST", "/api/v1/flash-sale/order", "42", `{"skuId":1002,"quantity":2}`,
		"X-Device-Id", `dev "1"`)
	mustStatus(t, r, 200, "QUEUING")
	q := f.lastQuery()
	want := map[string]any{"userId": 42.0, "activityId": 7.0, "skuId": 1002.0, "quantity": 2.0, "ip": "203.0.113.7", "deviceId": `dev "1"`}
	for k, v := range want {
		if q[k] != v {
			t.Errorf("query %s = %v, want %v (query %v)", k, q[k], v, q)
		}
	}
	if len(q) != len(want) {
		t.Errorf("query %v has other fields than %v", q, want)
	}
	// No IP peer (in-memory connection) and no device: both as documented.
	mustStatus(t, e.order("43", `{"skuId":1002}`), 200, "QUEUING")
	q = f.lastQuery()
	if _, ok := q["deviceId"]; ok || q["ip"] != "" {
		t.Errorf("query without peer and device: %v", q)
	}
}

// TestRiskFailureFollowsTheActivityPolicy: a slow, down or broken risk
// service gives no verdict; the activity's policy (its own, else
// edge.risk.on_error) then passes the purchase (counted as degraded) or
// answers 503 BUSY.
func TestRiskFailureFollowsTheActivityPolicy(t *testing.T) {
	for _, svc := range []struct {
		name string
		kind int
		url  func(t *testing.T) string
	}{
		{"slow", riskTimeout, func(t *testing.T) string { f := startFakeRisk(t, sale.RiskAllow); f.mode.Store(riskSlow); return f.url }},
		{"down", riskError, downURL},
		{"broken", riskError, func(t *testing.T) string {
			f := startFakeRisk(t, sale.RiskAllow)
			f.mode.Store(riskBroke)
			return f.url
		}},
	} {
		for _, pol := range []struct {
			name              string
			edgeDefault, act  string
			status            int
			code              string
			passedRemarkCheck string
		}{
			{"edge default allow", sale.RiskAllow, "", 200, "QUEUING", remarkRiskDegraded[svc.kind]},
			{"edge default deny", sale.RiskDeny, "", 503, "BUSY", ""},
			{"activity allow over edge deny", sale.RiskDeny, sale.RiskAllow, 200, "QUEUING", remarkRiskDegraded[svc.kind]},
			{"activity deny over edge allow", sale.RiskAllow, sale.RiskDeny, 503, "BUSY", ""},
		} {
			t.Run(svc.name+" service, "+pol.name, func(t *testing.T) {
				act := sale.Activity{ID: 60, Start: saleStart, End: saleStart.Add(time.Hour), State: sale.StateOnline,
					RiskOnError: pol.act, SKUs: []sale.SKU{{ID: 6001, Stock: 10, LimitPerUser: 1}}}
				log := &passLog{}
				e := newEdge(t, withRisk(svc.url(t), pol.edgeDefault, time.Minute), withActivities(act), withOptions(WithRiskLog(log)))
				start := time.Now()
				for i := range 2 { // failures are not cached: both ask
					mustStatus(t, e.order(strconv.Itoa(70+i), `{"activityId":60,"skuId":6001}`), pol.status, pol.code)
				}
				if took := time.Since(start); took > 2*riskTimeoutForTests+time.Second {
					t.Errorf("two purchases took %v: the timeout did not bound the call", took)
				}
				if got := testutil.ToFloat64(e.srv.m.riskFailures[svc.kind]); got != 2 {
					t.Errorf("%s failures %v, want 2", riskFailureNames[svc.kind], got)
				}
				allowed, denied := testutil.ToFloat64(e.srv.m.riskDegraded[riskAllow]), testutil.ToFloat64(e.srv.m.riskDegraded[riskDeny])
				if pol.status == 200 {
					if allowed != 2 || denied != 0 || e.eng.calls.Load() != 2 {
						t.Errorf("degraded allow %v deny %v, engine calls %d; want 2, 0, 2", allowed, denied, e.eng.calls.Load())
					}
					steps := log.all()
					if len(steps) != 2 || !strings.HasSuffix(steps[0], " "+pol.passedRemarkCheck) {
						t.Errorf("RISK_PASSED steps %q, want 2 saying %q", steps, pol.passedRemarkCheck)
					}
				} else {
					if allowed != 0 || denied != 2 || e.eng.calls.Load() != 0 {
						t.Errorf("degraded allow %v deny %v, engine calls %d; want 0, 2, 0", allowed, denied, e.eng.calls.Load())
					}
					if n := testutil.ToFloat64(e.srv.m.rejections[reasonBusy]); n != 2 {
						t.Errorf("busy rejections %v, want 2", n)
					}
					if steps := log.all(); len(steps) != 0 {
						t.Errorf("RISK_PASSED steps %q for refused purchases", steps)
					}
				}
				if n := e.srv.admit.inflight.InFlight(6001); n != 0 {
					t.Errorf("in flight %d after the risk check answered, want 0", n)
				}
			})
		}
	}
}

// TestRiskPolicySwitchesLiveOnARunningEdge: on-call flips the activity's
// policy (the catalog entry plus an activity event, what the admin API
// does) and a running edge follows without a restart.
func TestRiskPolicySwitchesLiveOnARunningEdge(t *testing.T) {
	e := newEdge(t, withRisk(downURL(t), sale.RiskAllow, time.Minute))
	e.waitSubscribed()
	mustStatus(t, e.order("80", `{"skuId":1001}`), 200, "QUEUING")

	// Another process (the admin API's) switches the policy.
	admin := newAdminCatalog(t, e)
	flip := func(policy string) {
		a, ok := admin.Activity(7)
		if !ok {
			t.Fatal("activity 7 missing")
		}
		cp := *a
		cp.RiskOnError = policy
		if err := admin.Put(context.Background(), cp); err != nil {
			t.Fatal(err)
		}
		e.publish(sale.Event{Kind: sale.EventActivity, Activity: 7})
	}
	flip(sale.RiskDeny)
	user := 81
	waitFor(t, "the edge to answer 503 under deny", func() bool {
		user++
		return e.order(strconv.Itoa(user), `{"skuId":1001}`).status == 503
	})
	mustStatus(t, e.order("90", `{"skuId":1001}`), 503, "BUSY")
	flip(sale.RiskAllow)
	waitFor(t, "the edge to pass purchases under allow again", func() bool {
		user++
		return e.order(strconv.Itoa(user), `{"skuId":1001}`).status == 200
	})
	if testutil.ToFloat64(e.srv.m.riskDegraded[riskDeny]) < 1 || testutil.ToFloat64(e.srv.m.riskDegraded[riskAllow]) < 2 {
		t.Errorf("degraded counts: allow %v, deny %v", testutil.ToFloat64(e.srv.m.riskDegraded[riskAllow]), testutil.ToFloat64(e.srv.m.riskDegraded[riskDeny]))
	}
}

// TestRiskVerdictIsCachedPerUser: a user's second purchase within
// edge.risk.cache_ttl does not call the service; another user does; after
// the TTL the user is asked again. A cached deny refuses like a fresh one.
func TestRiskVerdictIsCachedPerUser(t *testing.T) {
	f := startFakeRisk(t, sale.RiskAllow)
	const ttl = 400 * time.Millisecond
	e := newEdge(t, withRisk(f.url, sale.RiskAllow, ttl))
	mustStatus(t, e.order("100", `{"skuId":1001}`), 200, "QUEUING")
	e.srv.risk.cache.Wait() // ristretto applies a Set asynchronously
	mustStatus(t, e.order("100", `{"skuId":1002}`), 200, "QUEUING")
	if n := f.calls.Load(); n != 1 {
		t.Fatalf("service called %d times for one user within the TTL, want 1", n)
	}
	if n := testutil.ToFloat64(e.srv.m.riskVerdicts[riskAllow][riskFromCache]); n != 1 {
		t.Errorf("cached allow verdicts %v, want 1", n)
	}
	mustStatus(t, e.order("101", `{"skuId":1001}`), 200, "QUEUING")
	if n := f.calls.Load(); n != 2 {
		t.Fatalf("service called %d times for two users, want 2", n)
	}
	time.Sleep(ttl + 100*time.Millisecond)
	f.verdict.Store(sale.RiskDeny)
	mustStatus(t, e.order("100", `{"skuId":1001}`), 403, "RISK_REJECTED")
	if n := f.calls.Load(); n != 3 {
		t.Fatalf("service called %d times after the TTL, want 3", n)
	}
	e.srv.risk.cache.Wait()
	f.verdict.Store(sale.RiskAllow)
	mustStatus(t, e.order("100", `{"skuId":1001}`), 403, "RISK_REJECTED")
	if n := f.calls.Load(); n != 3 {
		t.Fatalf("a cached deny called the service (%d calls)", n)
	}
	if n := testutil.ToFloat64(e.srv.m.rejections[reasonRisk]); n != 2 {
		t.Errorf("risk rejections %v, want 2", n)
	}
}

// TestRiskCheckIsOffByDefault: without edge.risk.url nothing is asked and
// the series exist at 0.
func TestRiskCheckIsOffByDefault(t *testing.T) {
	e := newEdge(t)
	if e.srv.risk != nil {
		t.Fatal("risk check built without edge.risk.url")
	}
	mustStatus(t, e.order("5", `{"skuId":1001}`), 200, "QUEUING")
	r := e.do("GET", "/metrics", "", "")
	for _, line := range []string{
		`seckill_edge_risk_verdicts_total{source="cache",verdict="allow"} 0`,
		`seckill_edge_risk_verdicts_total{source="service",verdict="deny"} 0`,
		`seckill_edge_risk_failures_total{kind="timeout"} 0`,
		`seckill_edge_risk_failures_total{kind="error"} 0`,
		`seckill_edge_risk_degraded_total{policy="allow"} 0`,
		`seckill_edge_risk_degraded_total{policy="deny"} 0`,
		`seckill_edge_risk_call_seconds_count 0`,
		`seckill_edge_rejections_total{reason="risk"} 0`,
	} {
		if !strings.Contains(r.raw, line) {
			t.Errorf("metrics miss %s", line)
		}
	}
}

// TestRiskTicketStoryOnlyForTickets: an engine answer without a ticket
// (sold out, busy) writes no RISK_PASSED, though the check passed.
func TestRiskTicketStoryOnlyForTickets(t *testing.T) {
	f := startFakeRisk(t, sale.RiskAllow)
	log := &passLog{}
	e := newEdge(t, withRisk(f.url, sale.RiskAllow, 0), withOptions(WithRiskLog(log)))
	e.eng.answer(func(*engine.Request) (engine.Ticket, error) { return engine.Ticket{Remaining: -1}, engine.ErrBusy })
	mustStatus(t, e.order("110", `{"skuId":1001}`), 503, "BUSY")
	if steps := log.all(); len(steps) != 0 {
		t.Fatalf("RISK_PASSED %q without a ticket", steps)
	}
}

func TestParseRiskVerdict(t *testing.T) {
	for _, tc := range []struct {
		body    string
		verdict int
		ok      bool
	}{
		{`{"verdict":"allow"}`, riskAllow, true},
		{` {"reason":"x","verdict":"deny","n":[1,{"a":null}]} `, riskDeny, true},
		{`{"verdict":"al\u006cow"}`, riskAllow, true},
		{`{"verdict":"ALLOW"}`, 0, false},
		{`{"verdict":"maybe"}`, 0, false},
		{`{"verdict":true}`, 0, false},
		{`{"reason":"no verdict"}`, 0, false},
		{`{"verdict":"allow","verdict":"deny"}`, 0, false},
		{`{"verdict":"allow"} x`, 0, false},
		{`{"verdict":"allow"`, 0, false},
		{``, 0, false},
		{`[]`, 0, false},
	} {
		v, ok := parseRiskVerdict([]byte(tc.body))
		if ok != tc.ok || ok && v != tc.verdict {
			t.Errorf("%s: got %d %v, want %d %v", tc.body, v, ok, tc.verdict, tc.ok)
		}
	}
}

func TestRiskQueryAndVerdictDoNotAllocate(t *testing.T) {
	body := []byte(`{"verdict":"allow","reason":"fine"}`)
	work := make([]byte, len(body))
	var buf [384]byte
	q := riskQuery{user: 42, activity: 7, sku: 1001, quantity: 1}
	if n := testing.AllocsPerRun(100, func() {
		_ = appendRiskQuery(buf[:0], q, []byte("203.0.113.7"), []byte("device"))
		copy(work, body)
		if _, ok := parseRiskVerdict(work); !ok {
			t.Fatal("verdict not read")
		}
	}); n != 0 {
		t.Fatalf("%v allocations per query and verdict, want 0", n)
	}
}

func TestRiskDeviceHeaderIsEscapedOrLeftOut(t *testing.T) {
	q := riskQuery{user: 1, activity: 2, sku: 3, quantity: 1}
	for _, tc := range []struct{ device, want string }{
		{"", ""},
		{"d\x00\xff<", `d\u0000\u00ff\u003c`},
		{strings.Repeat("x", maxDeviceIDLen+1), ""},
	} {
		var m map[string]any
		b := appendRiskQuery(nil, q, nil, []byte(tc.device))
		if err := json.Unmarshal(b, &m); err != nil {
			t.Fatalf("%q: %s is not JSON: %v", tc.device, b, err)
		}
		got, _ := m["deviceId"].(string)
		var want string
		if tc.want != "" {
			_ = json.Unmarshal([]byte(`"`+tc.want+`"`), &want)
		}
		if got != want {
			t.Errorf("%q: deviceId %q, want %q", tc.device, got, want)
		}
	}
}

// newAdminCatalog is another process's view of e's catalog.
func newAdminCatalog(t *testing.T, e *edgeEnv) *catalog.Catalog {
	t.Helper()
	c := catalog.New(e.rdb)
	if err := c.Load(context.Background()); err != nil {
		t.Fatal(err)
	}
	return c
}

func TestConfigRefusesBadRiskKeys(t *testing.T) {
	for key, f := range map[string]func(*Config){
		"edge.risk.url":                     func(c *Config) { c.Risk.URL = "ftp://risk/check" },
		"edge.risk.on_error":                func(c *Config) { c.Risk.OnError = "maybe" },
		"edge.risk.timeout":                 func(c *Config) { c.Risk.Timeout = 0 },
		"edge.risk.cache_ttl":               func(c *Config) { c.Risk.CacheTTL = -time.Second },
		"edge.risk.max_conns":               func(c *Config) { c.Risk.MaxConns = 0 },
		"edge.risk.breaker.failures":        func(c *Config) { c.Risk.Breaker.Failures = 0 },
		"edge.risk.breaker.open_for":        func(c *Config) { c.Risk.Breaker.OpenFor = 0 },
		"edge.risk.breaker.probes":          func(c *Config) { c.Risk.Breaker.Probes = 0 },
		"edge.risk.local.device_per_minute": func(c *Config) { c.Risk.Local.DevicePerMinute = -1 },
		"edge.risk.local.max_keys":          func(c *Config) { c.Risk.Local.MaxKeys = 1 },
		"edge.risk.recheck_interval":        func(c *Config) { c.Risk.RecheckInterval = 0 },
		"edge.risk.recheck_batch":           func(c *Config) { c.Risk.RecheckBatch = 0 },
		"edge.degrade.poll_after":           func(c *Config) { c.Degrade.PollAfter = 2 * time.Minute },
		"edge.degrade.paused_retry_after":   func(c *Config) { c.Degrade.PausedRetryAfter = 0 },
		"edge.degrade.refresh_interval":     func(c *Config) { c.Degrade.RefreshInterval = 0 },
	} {
		c := DefaultConfig()
		c.Risk.URL = "http://127.0.0.1:9/v1/check"
		f(&c)
		if err := c.Validate(); err == nil || !strings.Contains(err.Error(), key) {
			t.Errorf("%s: error %v should name it", key, err)
		}
	}
	c := DefaultConfig()
	c.Identity = "any"
	if c.Risk.URL != "" || c.Risk.Timeout != 20*time.Millisecond || c.Risk.OnError != sale.RiskAllow || c.Validate() != nil {
		t.Fatalf("defaults: %+v", c.Risk)
	}
}
