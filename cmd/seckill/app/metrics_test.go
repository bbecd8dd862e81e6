package app

import (
	"encoding/json"
	"io"
	"net/http"
	"os"
	"regexp"
	"strings"
	"testing"

	"seckill/internal/sale"
)

// documentedMetrics are the names the README's Metrics section lists; every
// one must be on /metrics from the first scrape, before any traffic.
var documentedMetrics = []string{
	// edge
	"seckill_edge_requests_total", "seckill_edge_rejections_total", "seckill_edge_engine_calls_total",
	"seckill_edge_request_seconds", "seckill_edge_soldout_propagation_seconds", "seckill_edge_blocklist_entries",
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
	"seckill_reqlog_steps_total", "seckill_monitor_errors_total",
}

func TestEveryDocumentedSignalIsOnMetricsFromTheStart(t *testing.T) {
	c := startCluster(t, mode{driver: "sqlite"})
	c.preheat(t, openActivity(1, sale.SKU{ID: 1001, Stock: 10, Price: 100, LimitPerUser: 1}))
	// The SKU's series appear within one sample.
	c.sys.Monitor.Sample(t.Context())
	resp, err := http.Get(c.base + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	body := string(b)
	for _, name := range documentedMetrics {
		if !strings.Contains(body, "\n"+name) && !strings.Contains(body, "# TYPE "+name+" ") {
			t.Errorf("%s is not on /metrics", name)
		}
	}
	for _, series := range []string{
		`seckill_edge_rejections_total{reason="sold_out"} 0`,
		`seckill_engine_occupy_total{code="duplicate"} 0`,
		`seckill_consumer_messages_total{outcome="dlq"} 0`,
		`seckill_sku_remaining_units{activity="1",sku="1001"} 10`,
		`seckill_reconcile_drift{activity="1",kind="ledger",sku="1001"} 0`,
	} {
		if !strings.Contains(body, series) {
			t.Errorf("series %s missing before any traffic", series)
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
	for _, n := range documentedMetrics {
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
