package engine

import "github.com/prometheus/client_golang/prometheus"

// Metrics of the drainer (queue mode):
//
//	seckill_queue_decided_total{outcome}     attempts decided: ok, a FAIL reason (SOLD_OUT, …), redelivered, skipped_<why>
//	seckill_queue_length{partition}          attempts in the partition's line not yet drained (high water − drained)
//	seckill_queue_drain_rate{partition}      attempts decided per second, the last 4 s
//	seckill_queue_wait_seconds               from the edge's accept to the drainer's decision
//	seckill_queue_retries_total              busy occupies and result writes retried
type drainMetrics struct {
	decided *prometheus.CounterVec
	length  *prometheus.GaugeVec
	rate    *prometheus.GaugeVec
	wait    prometheus.Histogram
	retries prometheus.Counter
}

func newDrainMetrics(reg prometheus.Registerer) *drainMetrics {
	m := &drainMetrics{
		decided: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "seckill_queue_decided_total",
			Help: "Attempts of the waiting lines decided, by outcome."}, []string{"outcome"}),
		length: prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "seckill_queue_length",
			Help: "Attempts in a partition's line not drained yet."}, []string{"partition"}),
		rate: prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "seckill_queue_drain_rate",
			Help: "Attempts a partition's drainer decides per second."}, []string{"partition"}),
		wait: prometheus.NewHistogram(prometheus.HistogramOpts{Name: "seckill_queue_wait_seconds",
			Help:    "Time an attempt waited in line, from the edge's accept to its decision.",
			Buckets: []float64{.01, .05, .1, .5, 1, 2.5, 5, 10, 30, 60, 120, 300, 600}}),
		retries: prometheus.NewCounter(prometheus.CounterOpts{Name: "seckill_queue_retries_total",
			Help: "Busy occupies and result writes the drainer retried."}),
	}
	if reg != nil {
		reg.MustRegister(m.decided, m.length, m.rate, m.wait, m.retries)
	}
	return m
}
