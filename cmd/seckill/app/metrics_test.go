package app

import (
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"os"
	"regexp"
	"strings"
	"testing"
	"time"

	"go.yaml.in/yaml/v3"

	"seckill/internal/testenv"
	"seckill/sale"
)

// documentedMetrics are names docs/metrics.md lists; every one must be on
// /metrics from the first scrape, before any traffic.
var documentedMetrics = []string{
	// edge
	"seckill_edge_requests_total", "seckill_edge_rejections_total", "seckill_edge_engine_calls_total",
	"seckill_edge_request_seconds", "seckill_edge_soldout_propagation_seconds", "seckill_edge_blocklist_entries",
	"seckill_edge_risk_verdicts_total", "seckill_edge_risk_failures_total", "seckill_edge_risk_degraded_total",
	"seckill_edge_risk_call_seconds", "seckill_edge_sku_purchases_total",
	"seckill_edge_backlog_seconds", "seckill_edge_backlog_drain_per_second", "seckill_edge_backlog_shedding",
	"seckill_edge_risk_breaker_state", "seckill_edge_risk_unchecked_total", "seckill_edge_risk_rechecks_total",
	"seckill_edge_cache_entries", "seckill_edge_cache_capacity_entries", "seckill_edge_limiter_entries",
	"seckill_edge_limiter_capacity_entries", "seckill_edge_sku_state_entries", "seckill_edge_inflight_attempts",
	// engine
	"seckill_engine_occupy_total", "seckill_engine_lua_seconds", "seckill_engine_lua_errors_total",
	"seckill_engine_occupy_batch_buyers", "seckill_engine_produce_seconds", "seckill_engine_produce_errors_total",
	"seckill_engine_releases_total",
	// consumer
	"seckill_consumer_batches_total", "seckill_consumer_batch_size", "seckill_consumer_tx_seconds",
	"seckill_consumer_messages_total", "seckill_consumer_lag_messages",
	// stock and ledger
	"seckill_sku_remaining_units", "seckill_sku_occupied_units", "seckill_sku_ordered_units",
	"seckill_sku_initial_units", "seckill_sku_sold_out_timestamp_seconds",
	"seckill_reconcile_drift", "seckill_reconcile_runs_total", "seckill_reconcile_repairs_total",
	"seckill_reconcile_orphans_released_total", "seckill_reconcile_rebuilds_total",
	"seckill_payment_closed_total", "seckill_payment_releases_total", "seckill_payment_releases_pending",
	"seckill_reqlog_steps_total", "seckill_reqlog_reject_counters_total", "seckill_reconcile_settled_total",
	"seckill_monitor_errors_total", "seckill_dependency_up",
}

// queueMetrics are the drainer's names docs/metrics.md lists: on
// /metrics of an engine that drains (TestQueueModeEndToEnd checks them).
var queueMetrics = []string{"seckill_queue_length", "seckill_queue_drain_rate", "seckill_queue_wait_seconds",
	"seckill_queue_decided_total", "seckill_queue_retries_total"}

// TestTheMetricsDocNamesEveryCheckedMetric: docs/metrics.md, where
// on-call looks a metric up, names each of documentedMetrics.
func TestTheMetricsDocNamesEveryCheckedMetric(t *testing.T) {
	b, err := os.ReadFile("../../../docs/metrics.md")
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range append(documentedMetrics[:len(documentedMetrics):len(documentedMetrics)], queueMetrics...) {
		// A table cell may shorten a name of its row's part to
		// "…_thing_unit".
		parts := strings.SplitN(name, "_", 3)
		if !strings.Contains(string(b), "`"+name) && !strings.Contains(string(b), "`…_"+parts[2]) {
			t.Errorf("docs/metrics.md does not name %s", name)
		}
	}
}

func TestEveryDocumentedSignalIsOnMetricsFromTheStart(t *testing.T) {
	c := startCluster(t, mode{driver: "sqlite"})
	c.preheat(t, openActivity(1, sale.SKU{ID: 1001, Stock: 10, Price: 100, LimitPerUser: 1}))
	// The SKU's series appear within one sample, and with the edge's
	// catalog load the preheat's event asks for.
	c.sys.Monitor.Sample(t.Context())
	var body string
	testenv.EventuallyOK(t, "the edge's per-SKU series", 10*time.Second, func() error {
		resp, err := http.Get(c.base + "/metrics")
		if err != nil {
			return err
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		body = string(b)
		if !strings.Contains(body, `seckill_edge_sku_purchases_total{activity="1",outcome="rejected",sku="1001"} 0`) {
			return errors.New("no rejected series of activity 1's SKU 1001")
		}
		return nil
	})
	for _, name := range documentedMetrics {
		if !strings.Contains(body, "\n"+name) && !strings.Contains(body, "# TYPE "+name+" ") {
			t.Errorf("%s is not on /metrics", name)
		}
	}
	for _, series := range []string{
		`seckill_edge_rejections_total{reason="sold_out"} 0`,
		`seckill_edge_rejections_total{reason="backlog"} 0`,
		`seckill_edge_backlog_shedding 0`,
		`seckill_edge_risk_degraded_total{policy="allow"} 0`,
		`seckill_engine_occupy_total{code="duplicate"} 0`,
		`seckill_consumer_messages_total{outcome="dlq"} 0`,
		`seckill_sku_remaining_units{activity="1",sku="1001"} 10`,
		`seckill_edge_sku_purchases_total{activity="1",outcome="accepted",sku="1001"} 0`,
		`seckill_reconcile_drift{activity="1",kind="ledger",sku="1001"} 0`,
		// The cluster's three dependencies answered the sample's pings.
		`seckill_dependency_up{dep="redis.default"} 1`,
		`seckill_dependency_up{dep="redis.hot0"} 1`,
		`seckill_dependency_up{dep="store"} 1`,
	} {
		if !strings.Contains(body, series) {
			t.Errorf("series %s missing before any traffic", series)
		}
	}
	// A histogram bucket an alert rule counts against must exist.
	for _, r := range alertRules(t) {
		for _, m := range regexp.MustCompile(`(seckill_[a-z_]+_bucket)\{le="([^"]+)"\}`).FindAllStringSubmatch(r.Expr, -1) {
			if series := m[1] + `{le="` + m[2] + `"}`; !strings.Contains(body, series) {
				t.Errorf("alert %s counts %s, which is not on /metrics", r.Alert, series)
			}
		}
	}
}

// alertRule is one rule of deploy/prometheus/alerts.yml.
type alertRule struct {
	Alert       string
	Expr        string
	Labels      map[string]string
	Annotations map[string]string
}

func alertRules(t *testing.T) []alertRule {
	t.Helper()
	b, err := os.ReadFile("../../../deploy/prometheus/alerts.yml")
	if err != nil {
		t.Fatal(err)
	}
	var f struct{ Groups []struct{ Rules []alertRule } }
	if err := yaml.Unmarshal(b, &f); err != nil {
		t.Fatal(err)
	}
	var rules []alertRule
	for _, g := range f.Groups {
		rules = append(rules, g.Rules...)
	}
	if len(rules) < 8 {
		t.Fatalf("%d alert rules in deploy/prometheus/alerts.yml", len(rules))
	}
	return rules
}

// TestAlertRulesUseOnlyDocumentedMetrics keeps deploy/prometheus/alerts.yml
// in step with the code: every metric a rule reads is a documented one (and
// so on /metrics, by the test above), and every alert has a severity, a
// summary, a description and a runbook section of its own in
// docs/runbook.md. promtool (scripts/promtool-test.sh) tests what the rules
// do; it cannot know which names the code exports.
func TestAlertRulesUseOnlyDocumentedMetrics(t *testing.T) {
	known := map[string]bool{}
	for _, n := range append(documentedMetrics[:len(documentedMetrics):len(documentedMetrics)], queueMetrics...) {
		known[n] = true
	}
	runbook, err := os.ReadFile("../../../docs/runbook.md")
	if err != nil {
		t.Fatal(err)
	}
	re := regexp.MustCompile(`seckill_[a-z_]+`)
	for _, r := range alertRules(t) {
		for _, n := range re.FindAllString(r.Expr, -1) {
			base := strings.TrimSuffix(strings.TrimSuffix(strings.TrimSuffix(n, "_bucket"), "_sum"), "_count")
			if !known[base] {
				t.Errorf("alert %s uses %s, which is not a documented metric", r.Alert, n)
			}
		}
		if s := r.Labels["severity"]; s != "critical" && s != "warning" {
			t.Errorf("alert %s: severity %q, want critical or warning", r.Alert, s)
		}
		if r.Annotations["summary"] == "" || r.Annotations["description"] == "" {
			t.Errorf("alert %s needs a summary and a description", r.Alert)
		}
		if want := "docs/runbook.md#" + strings.ToLower(r.Alert); r.Annotations["runbook_url"] != want {
			t.Errorf("alert %s: runbook_url %q, want %q", r.Alert, r.Annotations["runbook_url"], want)
		}
		if !strings.Contains(string(runbook), "\n## "+r.Alert+"\n") {
			t.Errorf("docs/runbook.md has no section \"## %s\"", r.Alert)
		}
	}
}

// TestDashboardUsesOnlyDocumentedMetrics keeps configs/grafana-dashboard.json
// in step with the metric names.
func TestDashboardUsesOnlyDocumentedMetrics(t *testing.T) {
	b, err := os.ReadFile("../../../configs/grafana-dashboard.json")
	if err != nil {
		t.Fatal(err)
	}
	var d struct {
		Panels []struct {
			Title   string
			Targets []struct{ Expr string }
		}
	}
	if err := json.Unmarshal(b, &d); err != nil {
		t.Fatal(err)
	}
	known := map[string]bool{}
	for _, n := range append(documentedMetrics[:len(documentedMetrics):len(documentedMetrics)], queueMetrics...) {
		known[n] = true
	}
	re := regexp.MustCompile(`seckill_[a-z_]+`)
	for _, p := range d.Panels {
		for _, tg := range p.Targets {
			for _, n := range re.FindAllString(tg.Expr, -1) {
				base := strings.TrimSuffix(strings.TrimSuffix(strings.TrimSuffix(n, "_bucket"), "_sum"), "_count")
				if !known[base] {
					t.Errorf("panel %q uses %s, which is not a documented metric", p.Title, n)
				}
			}
		}
	}
	if len(d.Panels) < 10 {
		t.Fatalf("%d panels", len(d.Panels))
	}
}
