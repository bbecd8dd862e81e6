package edge

import (
	"context"
	"errors"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/fasthttp/router"
	"github.com/valyala/fasthttp"
)

func TestReadiness(t *testing.T) {
	var kafkaDown atomic.Bool
	e := newEdge(t, withOptions(WithReadiness(func(context.Context) error {
		if kafkaDown.Load() {
			return &NotReady{Check: "kafka", Err: errors.New("dial tcp 10.0.0.9:9092: no broker")}
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
	// The public listener's body is generic; the admin listener's (MountOps)
	// names the failing check.
	if r := e.do("GET", "/readyz", "", ""); r.status != 503 || r.code() != "NOT_READY" || strings.Contains(r.raw, "kafka") || strings.Contains(r.raw, "broker") {
		t.Fatalf("public readyz with a failing check: %d %s, want 503 with a generic body", r.status, r.raw)
	}
	ops := router.New()
	e.srv.MountOps(ops)
	admin := func() (int, string) {
		var ctx fasthttp.RequestCtx
		ctx.Request.Header.SetMethod("GET")
		ctx.Request.SetRequestURI("/readyz")
		ops.Handler(&ctx)
		return ctx.Response.StatusCode(), string(ctx.Response.Body())
	}
	// The admin listener names the check, never the error's text.
	if code, body := admin(); code != 503 || !strings.Contains(body, "kafka") || strings.Contains(body, "10.0.0.9") || strings.Contains(body, "dial") {
		t.Fatalf("admin readyz with a failing check: %d %s, want 503 naming the check only", code, body)
	}
	kafkaDown.Store(false)
	e.redis.Stop()
	if r := e.do("GET", "/readyz", "", ""); r.status != 503 || r.code() != "NOT_READY" {
		t.Fatalf("readyz without Redis: %d %s", r.status, r.raw)
	}
	if code, body := admin(); code != 503 || !strings.Contains(body, "redis.default") || strings.Contains(body, "127.0.0.1") || strings.Contains(body, "dial") {
		t.Fatalf("admin readyz without Redis: %d %s, want 503 naming redis.default only", code, body)
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

// With edge.public_ops false (production) the public listener has no
// /readyz and no /metrics: they are unknown paths behind the address
// checks; /healthz stays.
func TestOpsOffThePublicListener(t *testing.T) {
	e := newEdge(t, withConfig(func(c *Config) { c.PublicOps = false }))
	for _, p := range []string{"/readyz", "/metrics"} {
		if r := e.do("GET", p, "", ""); r.status != 404 {
			t.Errorf("public %s with public_ops off: %d, want 404", p, r.status)
		}
	}
	if r := e.do("GET", "/healthz", "", ""); r.status != 200 {
		t.Errorf("healthz: %d", r.status)
	}
	ops := router.New()
	e.srv.MountOps(ops)
	for _, p := range []string{"/readyz", "/metrics"} {
		var ctx fasthttp.RequestCtx
		ctx.Request.Header.SetMethod("GET")
		ctx.Request.SetRequestURI(p)
		ops.Handler(&ctx)
		if ctx.Response.StatusCode() != 200 {
			t.Errorf("admin %s: %d %s", p, ctx.Response.StatusCode(), ctx.Response.Body())
		}
	}
}
