package chaos

import (
	"bufio"
	"bytes"
	"context"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"
)

// TestRiskServiceSlowDuringTheSale is the seed's degrade case: the edge asks
// a risk service (edge.risk.url, the production timeout of 20 ms) and the
// service gets slow. Under the activity's policy deny the edge answers
// 503 BUSY and takes nothing; switched live to allow through the admin
// API, the crowd buys while the service is slow — every purchase passes
// by the local rules, counted and recorded — and the books still add up.
// Fast.
func TestRiskServiceSlowDuringTheSale(t *testing.T) {
	sc := newScenario(t, Options{})
	s := sc.s
	risk := startStoppableRisk(t)
	s.useRisk(risk.url(), "20ms")

	load, skus := crowd()
	sc.open(skus)

	// Deny, the service slow: refused with 503 before the stock.
	const slow = int64(2 * time.Second)
	risk.delay.Store(slow)
	s.setRiskPolicy("deny")
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	probe := s.buy(ctx, LoadSpec{Users: 40, FirstUser: 900_001, HotFrac: load.HotFrac, Rate: 100, Workers: 8, Seed: 7})
	cancel()
	s.expect("under deny a slow risk service is answered 503 BUSY", probe.Statuses["503 BUSY"] == probe.sent() && probe.accepted() == 0,
		"%d probes: %s", probe.sent(), probe.summary())

	// Allow, the service fast, then slow in the middle of the sale.
	risk.delay.Store(0)
	s.setRiskPolicy("allow")
	// The switch reaches the edge by the activity event (milliseconds) or,
	// were it lost, the edge's catalog refresh: give it that long, so no
	// purchase of the crowd meets the old deny policy.
	time.Sleep(time.Second)
	var slowFrom, slowTo atomic.Int64
	run, _ := s.buyWithFault(load, faultPlan{
		Name: "risk service answers in 2s (edge.risk.timeout 20ms), policy allow", At: 2 * time.Second,
		Inject: func() error { slowFrom.Store(time.Now().UnixNano()); risk.delay.Store(slow); return nil },
		HealAt: 6 * time.Second,
		Heal:   func() error { risk.delay.Store(0); slowTo.Store(time.Now().UnixNano()); return nil },
		// Degrade open: buyers see a healthy sale while the service is slow.
		During: healthy,
	})
	during := 0
	for _, a := range run.Attempts {
		if a.Status == 200 && a.Sent.UnixNano() >= slowFrom.Load() && a.Sent.Add(a.Took).UnixNano() <= slowTo.Load() {
			during++
		}
	}
	m := s.edgeMetrics()
	s.expect("under allow the sale went on while the risk service was slow", during > 0,
		"%d tickets issued while it was slow (%s)", during, run.summary())
	s.expect("the slow calls were counted as timeouts and degraded passes",
		m[`seckill_edge_risk_failures_total{kind="timeout"}`] > 0 && m[`seckill_edge_risk_degraded_total{policy="allow"}`] > 0 &&
			m[`seckill_edge_risk_degraded_total{policy="deny"}`] >= float64(probe.sent()),
		"timeouts %v, degraded allow %v, degraded deny %v", m[`seckill_edge_risk_failures_total{kind="timeout"}`],
		m[`seckill_edge_risk_degraded_total{policy="allow"}`], m[`seckill_edge_risk_degraded_total{policy="deny"}`])
	sc.finish(run)
}

// useRisk points the edge at the risk service: its environment gets
// SECKILL_EDGE_RISK_URL and _TIMEOUT (README "Configuration": every key can
// be overridden so), and the edge restarts to read them. The crowd comes
// from one address (127.0.0.1), which the fallback's per-IP rule would
// count as one buyer: it is set past the crowd's pace.
func (s *System) useRisk(url, timeout string, env ...string) {
	s.t.Helper()
	s.Edge.kill(syscall.SIGTERM)
	if err := s.lastExit(s.Edge); err != nil {
		s.t.Fatal(err)
	}
	// The edge is stopped: nothing reads its environment now.
	s.Edge.Env = append(append([]string(nil), s.Edge.Env...), "SECKILL_EDGE_RISK_URL="+url, "SECKILL_EDGE_RISK_TIMEOUT="+timeout,
		"SECKILL_EDGE_RISK_LOCAL_IP_PER_MINUTE=1000000")
	s.Edge.Env = append(s.Edge.Env, env...)
	if err := s.restart(s.Edge, s.waitEdge); err != nil {
		s.t.Fatal(err)
	}
}

// setRiskPolicy switches the activity's policy through the admin API.
func (s *System) setRiskPolicy(policy string) {
	s.t.Helper()
	var out struct {
		OnError string `json:"onError"`
	}
	if err := s.adminJSON("PUT", "/admin/v1/activities/"+strconv.Itoa(activityID)+"/risk", map[string]string{"onError": policy}, &out); err != nil || out.OnError != policy {
		s.t.Fatalf("risk policy %s: %+v %v", policy, out, err)
	}
}

// edgeMetrics reads the edge's /metrics into series → value.
func (s *System) edgeMetrics() map[string]float64 {
	s.t.Helper()
	st, b, err := s.get("/metrics", 0)
	if err != nil || st != 200 {
		s.t.Fatalf("edge metrics: %d %v", st, err)
	}
	out := map[string]float64{}
	sc := bufio.NewScanner(bytes.NewReader(b))
	sc.Buffer(make([]byte, 1<<16), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if strings.HasPrefix(line, "#") {
			continue
		}
		i := strings.LastIndexByte(line, ' ')
		if i < 0 {
			continue
		}
		if v, err := strconv.ParseFloat(line[i+1:], 64); err == nil {
			out[line[:i]] = v
		}
	}
	return out
}
