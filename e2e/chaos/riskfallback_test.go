package chaos

import (
	"io"
	"net"
	"net/http"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// TestRiskServiceSlowThenRefusing is seed 001 §16 scenario 5 with the
// reaction built in: mid-sale the risk service gets 100 ms slower (still
// inside edge.risk.timeout: verdicts, slower answers), then refuses
// connections (its listener closed), then comes back. The crowd's answers
// stay those of a healthy sale throughout — the breaker opens and the
// local rules pass the purchases instead of each waiting on a dead
// service — every purchase that got a ticket without a verdict is
// recorded, and once the service answers again every record is re-checked
// (none is left pending); the books hold as ever.
func TestRiskServiceSlowThenRefusing(t *testing.T) {
	sc := newScenario(t, Options{})
	s := sc.s
	risk := startStoppableRisk(t)
	s.useRisk(risk.url(), "300ms", "SECKILL_EDGE_RISK_BREAKER_OPEN_FOR=1s", "SECKILL_EDGE_RISK_RECHECK_INTERVAL=200ms")
	load, skus := crowd()
	sc.open(skus)
	s.setRiskPolicy("allow")
	time.Sleep(time.Second) // the policy's event, or the edge's refresh
	refused := make(chan struct{})
	run, _ := s.buyWithFault(load, faultPlan{
		Name: "risk service +100ms, then refusing connections from 2s later", At: 2 * time.Second,
		Inject: func() error {
			risk.delay.Store(int64(100 * time.Millisecond))
			go func() { time.Sleep(2 * time.Second); risk.stop(); close(refused) }()
			return nil
		},
		HealAt: 8 * time.Second,
		Heal: func() error {
			<-refused
			risk.delay.Store(0)
			return risk.start()
		},
		// The breaker's probe and the re-check find the service within
		// open_for of its return.
		During: healthy, Settle: 2 * time.Second,
	})

	// Judged with the invariants, by finish below.
	m := s.edgeMetrics()
	unchecked := m[`seckill_edge_risk_unchecked_total`]
	s.expect("the refused calls opened the breaker and the local rules passed purchases",
		m[`seckill_edge_risk_failures_total{kind="error"}`] > 0 && m[`seckill_edge_risk_failures_total{kind="open"}`] > 0 && unchecked > 0,
		"errors %v, open %v, unchecked %v", m[`seckill_edge_risk_failures_total{kind="error"}`],
		m[`seckill_edge_risk_failures_total{kind="open"}`], unchecked)
	s.expect("verdicts were given while the service was only slow", risk.answered.Load() > 0, "%d answers", risk.answered.Load())
	var pending, all struct {
		Total   int64            `json:"total"`
		Records []map[string]any `json:"records"`
	}
	deadline := time.Now().Add(20 * time.Second)
	for {
		if err := s.adminJSON("GET", "/admin/v1/risk/unchecked?state=pending&limit=10000", nil, &pending); err != nil {
			t.Fatal(err)
		}
		if len(pending.Records) == 0 || time.Now().After(deadline) {
			break
		}
		time.Sleep(200 * time.Millisecond)
	}
	if err := s.adminJSON("GET", "/admin/v1/risk/unchecked?limit=10000", nil, &all); err != nil {
		t.Fatal(err)
	}
	s.expect("every unchecked purchase was recorded and re-checked once the service was back",
		len(pending.Records) == 0 && float64(all.Total) == unchecked && m[`seckill_edge_risk_rechecks_total{outcome="unrecorded"}`] == 0,
		"%d pending of %d records, %v unchecked, %v unrecorded", len(pending.Records), all.Total, unchecked,
		m[`seckill_edge_risk_rechecks_total{outcome="unrecorded"}`])
	sc.finish(run)
}

// stoppableRisk is a risk service on a fixed 127.0.0.1 port that allows
// every purchase after delay; stop closes its listener (connections are
// refused), start listens again on the same port.
type stoppableRisk struct {
	addr     string
	delay    atomic.Int64 // nanoseconds
	answered atomic.Int64
	mu       sync.Mutex
	srv      *http.Server
}

func startStoppableRisk(t *testing.T) *stoppableRisk {
	t.Helper()
	r := &stoppableRisk{addr: "127.0.0.1:0"}
	if err := r.start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(r.stop)
	return r
}

func (r *stoppableRisk) url() string { return "http://" + r.addr + "/v1/check" }

func (r *stoppableRisk) start() error {
	ln, err := net.Listen("tcp", r.addr)
	if err != nil {
		return err
	}
	r.addr = ln.Addr().String()
	srv := &http.Server{ReadHeaderTimeout: 5 * time.Second, Handler: http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		_, _ = io.Copy(io.Discard, req.Body)
		if d := time.Duration(r.delay.Load()); d > 0 {
			select {
			case <-time.After(d):
			case <-req.Context().Done():
				return
			}
		}
		r.answered.Add(1)
		w.Header().Set("Content-Type", "application/json")
		_, _ = io.WriteString(w, `{"verdict":"allow"}`)
	})}
	r.mu.Lock()
	r.srv = srv
	r.mu.Unlock()
	go srv.Serve(ln)
	return nil
}

func (r *stoppableRisk) stop() {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.srv != nil {
		r.srv.Close() // the listener and every connection
		r.srv = nil
	}
}
