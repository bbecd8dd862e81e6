package engine

import (
	"github.com/prometheus/client_golang/prometheus"

	"seckill/stock"
)

// Metrics of the engine (all created at start, so they exist from the first
// scrape):
//
//	seckill_engine_occupy_total{code}          occupy outcomes: ok, not_open, ended, sold_out, duplicate, over_limit, rate_limited (user × SKU window), missing (Redis lost the SKU: busy), error
//	seckill_engine_lua_seconds{shard}          occupy script latency per shard (default, hot0, hot1, …)
//	seckill_engine_lua_errors_total{shard}     occupy script failures per shard
//	seckill_engine_produce_seconds             wait for the broker's ack
//	seckill_engine_produce_errors_total        sends that failed or timed out
//	seckill_engine_releases_total{outcome}     compensations: released, not_held, claimed, error
//	seckill_engine_occupy_batch_buyers         buyers per group-commit occupy script call
//	seckill_engine_auto_queue_total{shard}     SKUs put in queue mode by themselves (engine.queue.auto_latency)
type metrics struct {
	occupy      *prometheus.CounterVec
	occupyBy    [stock.Outcomes]prometheus.Counter // occupy's child of each outcome; nil where not counted
	lua         *prometheus.HistogramVec
	luaErrors   *prometheus.CounterVec
	produce     prometheus.Histogram
	produceErrs prometheus.Counter
	releases    *prometheus.CounterVec
	batch       prometheus.Histogram
	autoQueue   *prometheus.CounterVec
}

// luaBuckets are seckill_engine_lua_seconds' bounds (what
// engine.queue.auto_latency rounds down to).
var luaBuckets = []float64{.0001, .00025, .0005, .001, .0025, .005, .01, .025, .05, .1, .25, .5}

func newMetrics(reg prometheus.Registerer) *metrics {
	m := &metrics{
		occupy: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "seckill_engine_occupy_total", Help: "Occupy outcomes by code."}, []string{"code"}),
		lua: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name: "seckill_engine_lua_seconds", Help: "Occupy script latency per shard.",
			Buckets: luaBuckets}, []string{"shard"}),
		luaErrors: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "seckill_engine_lua_errors_total", Help: "Occupy script failures per shard."}, []string{"shard"}),
		produce: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name: "seckill_engine_produce_seconds", Help: "Time from send to the broker's ack.",
			Buckets: []float64{.0005, .001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5}}),
		produceErrs: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "seckill_engine_produce_errors_total", Help: "Order messages that failed or timed out."}),
		releases: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "seckill_engine_releases_total", Help: "Compensating releases by outcome."}, []string{"outcome"}),
		batch: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name: "seckill_engine_occupy_batch_buyers", Help: "Buyers per group-commit occupy script call.",
			Buckets: []float64{1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1024}}),
		autoQueue: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "seckill_engine_auto_queue_total", Help: "SKUs put in queue mode by themselves, by the shard found degraded."}, []string{"shard"}),
	}
	for o := range m.occupyBy {
		if l := stock.Outcome(o).Label(); l != "" {
			m.occupyBy[o] = m.occupy.WithLabelValues(l)
		}
	}
	for _, o := range []string{"released", "not_held", "claimed", "error"} {
		m.releases.WithLabelValues(o)
	}
	if reg != nil {
		reg.MustRegister(m.occupy, m.lua, m.luaErrors, m.produce, m.produceErrs, m.releases, m.batch, m.autoQueue)
	}
	return m
}

// occupied counts an occupy script's code in occupy_total: under the
// outcome table's label, "error" (Busy's) for a code no script answers.
func (m *metrics) occupied(code string) {
	o, _ := stock.OutcomeOfCode(code)
	if c := m.occupyBy[o]; c != nil {
		c.Inc()
	}
}
