package reconcile

import (
	"strconv"

	"github.com/prometheus/client_golang/prometheus"

	"seckill/sale"
)

// Metrics of the reconciler, the sweeper and the watcher:
//
//	seckill_reconcile_drift{activity,sku,kind}   the last run's drift of each kind (0: none); a series per known SKU and kind from the start
//	seckill_reconcile_runs_total{outcome}        reconciliations: ok, error
//	seckill_reconcile_repairs_total{kind}        repairs applied, by drift kind
//	seckill_reconcile_orphans_released_total     occupancies released by the sweeper
//	seckill_reconcile_rebuilds_total             SKUs written back into a Redis that lost them
//	seckill_reconcile_expired_total              ended SKUs whose keys expired after their retention
//	seckill_reconcile_expiry_held                SKUs past their retention whose keys the last pass kept (drift, pending closes, consumer progress unknown)
//	seckill_reconcile_settled_total{outcome}     stale results settled: SUCCESS, FAIL; shed (too many at once), unwritten (Redis refused the write)
type metrics struct {
	expired  prometheus.Counter
	held     prometheus.Gauge
	drift    *prometheus.GaugeVec
	runs     *prometheus.CounterVec
	repairs  *prometheus.CounterVec
	orphans  prometheus.Counter
	rebuilds prometheus.Counter
	settled  *prometheus.CounterVec
}

func newMetrics(reg prometheus.Registerer) *metrics {
	m := &metrics{
		drift: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "seckill_reconcile_drift", Help: "Drift found by the last reconciliation, per SKU and kind (0: none)."},
			[]string{"activity", "sku", "kind"}),
		runs: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "seckill_reconcile_runs_total", Help: "Reconciliations by outcome."}, []string{"outcome"}),
		repairs: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "seckill_reconcile_repairs_total", Help: "Repairs applied, by drift kind."}, []string{"kind"}),
		orphans: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "seckill_reconcile_orphans_released_total", Help: "Orphan occupancies released by the sweeper."}),
		rebuilds: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "seckill_reconcile_rebuilds_total", Help: "SKUs written back from the database into a Redis that lost them."}),
		expired: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "seckill_reconcile_expired_total", Help: "Ended SKUs whose Redis keys expired after their retention."}),
		held: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "seckill_reconcile_expiry_held", Help: "SKUs past their retention whose Redis keys the last pass kept."}),
		settled: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "seckill_reconcile_settled_total", Help: "Stale results settled, by outcome."}, []string{"outcome"}),
	}
	for _, o := range []string{sale.ResultSuccess, sale.ResultFail, "shed", "unwritten"} {
		m.settled.WithLabelValues(o)
	}
	for _, o := range []string{"ok", "error"} {
		m.runs.WithLabelValues(o)
	}
	for _, k := range Kinds {
		m.repairs.WithLabelValues(k)
	}
	if reg != nil {
		reg.MustRegister(m.drift, m.runs, m.repairs, m.orphans, m.rebuilds, m.expired, m.held, m.settled)
	}
	return m
}

// know creates the drift series of every SKU of acts (value 0 unless set).
func (m *metrics) know(acts []sale.Activity) {
	for _, a := range acts {
		for _, k := range a.SKUs {
			for _, kind := range Kinds {
				m.drift.WithLabelValues(strconv.FormatInt(a.ID, 10), strconv.FormatInt(k.ID, 10), kind)
			}
		}
	}
}

// set records one SKU's drifts: every kind, 0 where none was found (a
// ModeAudit line: only the kinds it found).
func (m *metrics) set(r *SKUReport) {
	a, k := strconv.FormatInt(r.ActivityID, 10), strconv.FormatInt(r.SKUID, 10)
	got := map[string]int64{}
	for _, d := range r.Drifts {
		got[d.Kind] = d.Amount
	}
	for _, kind := range Kinds {
		// A line of the audit alone says nothing of the kinds it cannot
		// find: their gauges keep what the last judgement found.
		if n, ok := got[kind]; ok || r.Mode != ModeAudit {
			m.drift.WithLabelValues(a, k, kind).Set(float64(n))
		}
	}
}
