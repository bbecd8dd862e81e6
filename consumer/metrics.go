package consumer

import "github.com/prometheus/client_golang/prometheus"

// Outcome labels of seckill_consumer_messages_total; every message is
// counted once.
const (
	outCreated   = "created"   // new order
	outExisting  = "existing"  // order existed already (redelivery)
	outDuplicate = "duplicate" // the user has an order from another ticket; this ticket released
	outSoldOut   = "soldout"   // database snapshot had no stock; ticket released
	outReleased  = "released"  // occupancy released before the consumer claimed it; no order
	outFailed    = "failed"    // failed past retries; ticket released, message dead-lettered
	outDLQ       = "dlq"       // undecodable; dead-lettered at once
)

var outcomes = []string{outCreated, outExisting, outDuplicate, outSoldOut, outReleased, outFailed, outDLQ}

// Labels of seckill_consumer_dead_letters_total.
const (
	letterSent        = "sent"        // accepted by the dead-letter topic (bounded ones too)
	letterBounded     = "bounded"     // too big as it was: sent truncated, with its size and digest
	letterQuarantined = "quarantined" // refused by the dead-letter topic; kept in seckill_dead_letter
)

// Metrics of the consumer (all created at start):
//
//	seckill_consumer_batches_total             batches processed
//	seckill_consumer_batch_size                messages per batch (histogram)
//	seckill_consumer_tx_seconds                one SaveBatch transaction, failed ones too (histogram)
//	seckill_consumer_messages_total{outcome}   created, existing, duplicate, soldout, released, failed, dlq
//	seckill_consumer_dead_letters_total{where} sent, bounded (sent truncated), quarantined (in the database)
type metrics struct {
	batches   prometheus.Counter
	batchSize prometheus.Histogram
	tx        prometheus.Histogram
	messages  *prometheus.CounterVec
	letters   *prometheus.CounterVec
}

func newMetrics(reg prometheus.Registerer) *metrics {
	m := &metrics{
		batches: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "seckill_consumer_batches_total", Help: "Batches of order messages processed."}),
		batchSize: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name: "seckill_consumer_batch_size", Help: "Messages per batch.",
			Buckets: []float64{1, 2, 5, 10, 20, 50, 100, 200, 500, 1000, 2000}}),
		tx: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name: "seckill_consumer_tx_seconds", Help: "Duration of one batch transaction.",
			Buckets: []float64{.001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5}}),
		messages: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "seckill_consumer_messages_total", Help: "Order messages by outcome."}, []string{"outcome"}),
		letters: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "seckill_consumer_dead_letters_total", Help: "Dead letters by where they went."}, []string{"where"}),
	}
	for _, o := range outcomes {
		m.messages.WithLabelValues(o)
	}
	for _, w := range []string{letterSent, letterBounded, letterQuarantined} {
		m.letters.WithLabelValues(w)
	}
	if reg != nil {
		reg.MustRegister(m.batches, m.batchSize, m.tx, m.messages, m.letters)
	}
	return m
}
