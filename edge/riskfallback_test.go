package edge

import (
	"context"
	"fmt"
	"sort"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"seckill/internal/riskaudit"
	"seckill/sale"
)

// TestRiskFallsBackToLocalRulesAndRechecks walks a risk-service outage
// through the edge: a user with a cached allow buys on it; the first
// purchases time out and pass unchecked until the breaker opens; while it
// is open no call is made, the per-device rule refuses the fourth
// purchase of one device (403 RISK_REJECTED) and lets another device's
// through; every purchase that passed unchecked is recorded. Once the
// service answers, the breaker closes by the re-check's probe and every
// record is re-checked: the ones allowed are closed, the one refused is
// marked deny, its user blocked (their next purchase 403 BLOCKED) and
// their ticket left standing.
func TestRiskFallsBackToLocalRulesAndRechecks(t *testing.T) {
	f := startFakeRisk(t, sale.RiskAllow)
	e := newEdge(t, withRisk(f.url, sale.RiskAllow, time.Minute), withConfig(func(c *Config) {
		c.Risk.Breaker = BreakerConfig{Failures: 2, OpenFor: 3 * time.Second, Probes: 1}
		c.Risk.Local = LocalRiskConfig{DevicePerMinute: 3, IPPerMinute: 0, MaxKeys: 1024}
		c.Risk.RecheckInterval = 100 * time.Millisecond
	}))
	e.waitSubscribed()
	buy := func(user, device string) response {
		t.Helper()
		return e.doVia(e.client, "POST", "/api/v1/flash-sale/order", user, order1001, "X-Device-Id", device)
	}
	mustStatus(t, buy("9", "d9"), 200, "QUEUING") // healthy: user 9's allow is cached

	f.mode.Store(riskSlow)
	f.deny.Store(3)
	var tickets []string
	for _, u := range []string{"1", "2", "3"} {
		r := buy(u, "d1")
		mustStatus(t, r, 200, "QUEUING")
		tickets = append(tickets, r.body["requestNo"].(string))
	}
	if got := testutil.ToFloat64(e.srv.m.riskBreaker); got != 2 {
		t.Fatalf("breaker state %v after 2 timeouts, want 2 (open)", got)
	}
	calls := f.calls.Load()
	mustStatus(t, buy("4", "d1"), 403, "RISK_REJECTED") // the device's fourth in a minute
	mustStatus(t, buy("9", "d1"), 200, "QUEUING")       // cached allow: no rule, no record
	r := buy("5", "d2")
	mustStatus(t, r, 200, "QUEUING")
	tickets = append(tickets, r.body["requestNo"].(string))
	if n := f.calls.Load() - calls; n != 0 {
		t.Errorf("%d calls reached the service while the breaker was open", n)
	}
	if got := testutil.ToFloat64(e.srv.m.rejections[reasonRiskLocal]); got != 1 {
		t.Errorf("rejections{risk_local} = %v, want 1", got)
	}
	if got := testutil.ToFloat64(e.srv.m.riskFailures[riskOpen]); got < 2 {
		t.Errorf("risk failures{open} = %v, want the purchases the breaker judged", got)
	}
	recs, total, err := riskaudit.List(context.Background(), e.rdb, "", 100)
	if err != nil || total != 4 || len(recs) != 4 {
		t.Fatalf("records: %d (%v), want the 4 unchecked purchases", total, err)
	}
	var got []string
	for _, rec := range recs {
		got = append(got, fmt.Sprintf("%s u%d %s %s %s", rec.RequestNo, rec.User, rec.Device, rec.Why, rec.State))
	}
	want := []string{
		tickets[0] + " u1 d1 timeout pending", tickets[1] + " u2 d1 timeout pending",
		tickets[2] + " u3 d1 open pending", tickets[3] + " u5 d2 open pending",
	}
	sort.Strings(got)
	sort.Strings(want)
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("records\n%v\nwant\n%v", got, want)
	}

	f.mode.Store(riskFast) // the service is back
	waitFor(t, "every record re-checked", func() bool {
		n, _, err := riskaudit.List(context.Background(), e.rdb, riskaudit.Pending, 100)
		return err == nil && len(n) == 0
	})
	denied, _, err := riskaudit.List(context.Background(), e.rdb, riskaudit.Denied, 100)
	if err != nil || len(denied) != 1 || denied[0].RequestNo != tickets[2] || denied[0].Action != "user blocked" || denied[0].CheckedAt == 0 {
		t.Fatalf("denied records: %+v (%v), want user 3's ticket, blocked", denied, err)
	}
	if got := testutil.ToFloat64(e.srv.m.riskRechecks[recheckAllow]); got != 3 {
		t.Errorf("rechecks{allow} = %v, want 3", got)
	}
	if got := testutil.ToFloat64(e.srv.m.riskBreaker); got != 0 {
		t.Errorf("breaker state %v once the service is back, want 0 (closed)", got)
	}
	waitFor(t, "user 3 blocked on the edge", func() bool { return e.srv.admit.block.set().User(3) })
	mustStatus(t, buy("3", "d3"), 403, "BLOCKED")
	mustStatus(t, buy("6", "d1"), 200, "QUEUING") // checked again, by the service
}

// TestRiskFallbackUnderDenyPolicyAnswersBusy: with the policy deny, an
// open breaker answers 503 BUSY at once, records nothing and makes no
// call.
func TestRiskFallbackUnderDenyPolicyAnswersBusy(t *testing.T) {
	e := newEdge(t, withRisk(downURL(t), sale.RiskDeny, 0), withConfig(func(c *Config) {
		c.Risk.Breaker = BreakerConfig{Failures: 1, OpenFor: time.Minute, Probes: 1}
	}))
	for i := range 3 {
		mustStatus(t, e.order(fmt.Sprint(i+1), order1001), 503, "BUSY")
	}
	if got := testutil.ToFloat64(e.srv.m.riskFailures[riskOpen]); got != 2 {
		t.Errorf("risk failures{open} = %v, want 2 (after the first refused call)", got)
	}
	if _, total, err := riskaudit.List(context.Background(), e.rdb, "", 10); err != nil || total != 0 {
		t.Errorf("records under deny: %d (%v), want none", total, err)
	}
}
