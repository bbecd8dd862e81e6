package edge

import (
	"context"
	"errors"
	"strings"
	"sync/atomic"
	"testing"
)

func TestReadiness(t *testing.T) {
	var kafkaDown atomic.Bool
	e := newEdge(t, withOptions(WithReadiness(func(context.Context) error {
		if kafkaDown.Load() {
			return errors.New("kafka: no broker")
		}
		return nil
	})))
	if r := e.do("GET", "/healthz", "", ""); r.status != 200 {
		t.Fatalf("healthz: %d %s", r.status, r.raw)
	}
	if r := e.do("GET", "/readyz", "", ""); r.status != 200 {
		t.Fatalf("readyz: %d %s", r.status, r.raw)
	}
	kafkaDown.Store(true)
	if r := e.do("GET", "/readyz", "", ""); r.status != 503 || !strings.Contains(r.raw, "kafka") {
		t.Fatalf("readyz with a failing check: %d %s", r.status, r.raw)
	}
	kafkaDown.Store(false)
	e.redis.Stop()
	if r := e.do("GET", "/readyz", "", ""); r.status != 503 || r.code() != "NOT_READY" {
		t.Fatalf("readyz without Redis: %d %s", r.status, r.raw)
	}
	if r := e.do("GET", "/healthz", "", ""); r.status != 200 {
		t.Fatalf("healthz without Redis: %d %s", r.status, r.raw)
	}
}

func TestMetricsExistFromTheFirstScrape(t *testing.T) {
	e := newEdge(t)
	r := e.do("GET", "/metrics", "", "")
	if r.status != 200 {
		t.Fatalf("metrics: %d", r.status)
	}
	for _, reason := range reasons {
		if line := `seckill_edge_rejections_total{reason="` + reason + `"} 0`; !strings.Contains(r.raw, line) {
			t.Errorf("missing %s", line)
		}
	}
	for _, o := range outcomes {
		if line := `seckill_edge_engine_calls_total{outcome="` + o + `"} 0`; !strings.Contains(r.raw, line) {
			t.Errorf("missing %s", line)
		}
	}
	for _, name := range []string{"seckill_edge_requests_total", "seckill_edge_request_seconds_bucket", "seckill_edge_soldout_propagation_seconds_bucket"} {
		if !strings.Contains(r.raw, name) {
			t.Errorf("missing %s", name)
		}
	}

	e.order("", `{"skuId":1001}`)
	e.order("5", `{"skuId":1001}`)
	r = e.do("GET", "/metrics", "", "")
	for _, line := range []string{
		`seckill_edge_rejections_total{reason="no_user"} 1`,
		`seckill_edge_engine_calls_total{outcome="queued"} 1`,
		`seckill_edge_requests_total{route="order",status="200"} 1`,
		`seckill_edge_requests_total{route="order",status="401"} 1`,
	} {
		if !strings.Contains(r.raw, line) {
			t.Errorf("missing %s", line)
		}
	}
}
