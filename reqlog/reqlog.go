// Package reqlog writes request-log steps off the hot path: the engine's
// compensation path (and anything else that must not wait for the
// database) hands a step to a bounded queue, and one goroutine writes the
// queued steps in batches. A full queue drops the step and counts it — the
// buyer's answer never waits for the log. The edge's refused attempts
// (refusal.go) have a bounded queue of their own, and its free rejections
// arrive as per-minute counts, added up between writes.
//
// Metrics:
//
//	seckill_reqlog_steps_total{outcome}            written, dropped (queue full), failed (database error)
//	seckill_reqlog_reject_counters_total{outcome}  minute counters written, failed
package reqlog

import (
	"context"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/zap"

	"seckill/sale"
	"seckill/store"
)

// Writer queues steps and writes them. Safe for concurrent use; Record,
// Log and Append never block.
type Writer struct {
	st       store.Store
	log      *zap.Logger
	ch       chan step
	refusals chan refusal
	kick     chan struct{} // counts has something
	counts   counts
	stop     chan struct{}
	done     chan struct{}
	once     sync.Once
	steps    *prometheus.CounterVec
	counted  *prometheus.CounterVec
	timeout  time.Duration
}

// step is a queued step: a request-log entry (the row and its history
// event), or, with history set, a history event alone.
type step struct {
	entry   store.LogEntry
	event   store.Event
	history bool
}

// maxBatch bounds the steps of one write.
const maxBatch = 200

// New starts a writer with a queue of size steps (default 4096).
func New(st store.Store, log *zap.Logger, reg prometheus.Registerer, size int) *Writer {
	if size <= 0 {
		size = 4096
	}
	w := &Writer{st: st, log: log, ch: make(chan step, size), refusals: make(chan refusal, size),
		kick: make(chan struct{}, 1), counts: counts{m: map[rejectKey]int64{}},
		stop: make(chan struct{}), done: make(chan struct{}), timeout: 5 * time.Second,
		steps: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "seckill_reqlog_steps_total", Help: "Request-log steps by outcome: written, dropped, failed."}, []string{"outcome"})}
	w.counted = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "seckill_reqlog_reject_counters_total", Help: "Free-rejection minute counters written or failed."}, []string{"outcome"})
	for _, o := range []string{"written", "dropped", "failed"} {
		w.steps.WithLabelValues(o)
	}
	for _, o := range []string{"written", "failed"} {
		w.counted.WithLabelValues(o)
	}
	if reg != nil {
		reg.MustRegister(w.steps, w.counted)
	}
	go w.run()
	return w
}

// Record implements engine.RequestLog.
func (w *Writer) Record(m *sale.Message, state, remark string) {
	w.Log(store.LogEntry{RequestNo: m.RequestNo, ActivityID: m.ActivityID, SKUID: m.SKUID, UserID: m.UserID,
		Quantity: m.Quantity, Status: state, TraceID: m.TraceID, Remark: remark, At: time.Now()})
}

// Log queues e; when the queue is full e is dropped and counted.
func (w *Writer) Log(e store.LogEntry) {
	if e.At.IsZero() {
		e.At = time.Now()
	}
	w.put(step{entry: e})
}

// Append queues a step of a ticket's history that leaves the request-log
// row as it is (store.AppendEvents): a step learnt out of order, such as
// the edge's RISK_PASSED, which may land after the consumer has written
// the ticket's later state and must not overwrite it. A zero At is now.
func (w *Writer) Append(e store.Event) {
	if e.At.IsZero() {
		e.At = time.Now()
	}
	w.put(step{event: e, history: true})
}

// RiskPassed implements edge.RiskLog: RISK_PASSED into the ticket's
// history at the time of the check.
func (w *Writer) RiskPassed(requestNo string, at time.Time, remark string) {
	w.Append(store.Event{RequestNo: requestNo, Status: store.StatusRiskPassed, Remark: remark, At: at})
}

func (w *Writer) put(s step) {
	select {
	case w.ch <- s:
	default:
		w.steps.WithLabelValues("dropped").Inc()
	}
}

func (w *Writer) run() {
	defer close(w.done)
	batch := make([]step, 0, maxBatch)
	refused := make([]refusal, 0, maxBatch)
	for {
		stopping := false
		select {
		case e := <-w.ch:
			batch = append(batch[:0], e)
			refused = refused[:0]
		case r := <-w.refusals:
			batch = batch[:0]
			refused = append(refused[:0], r)
		case <-w.kick:
			batch, refused = batch[:0], refused[:0]
		case <-w.stop:
			batch, refused = batch[:0], refused[:0]
			stopping = true
		}
		// Drain what is queued (all of it when stopping), a batch at a
		// time.
		for {
			batch, refused = w.fill(batch), w.fillRefusals(refused)
			cs := w.takeCounts()
			if len(batch) == 0 && len(refused) == 0 && len(cs) == 0 {
				break
			}
			w.write(batch, refused, cs)
			batch, refused = batch[:0], refused[:0]
			if !stopping {
				break
			}
		}
		if stopping {
			return
		}
	}
}

// fill adds queued steps to batch, up to maxBatch, without waiting.
func (w *Writer) fill(batch []step) []step {
	for len(batch) < maxBatch {
		select {
		case e := <-w.ch:
			batch = append(batch, e)
		default:
			return batch
		}
	}
	return batch
}

// fillRefusals adds queued refusals to rs, up to maxBatch, without waiting.
func (w *Writer) fillRefusals(rs []refusal) []refusal {
	for len(rs) < maxBatch {
		select {
		case r := <-w.refusals:
			rs = append(rs, r)
		default:
			return rs
		}
	}
	return rs
}

// write writes the entries of batch, then its history-only events, then
// the refusals' rows and the rejection counts.
func (w *Writer) write(batch []step, refused []refusal, cs []store.RejectCount) {
	var entries []store.LogEntry
	var events []store.Event
	for i := range batch {
		if batch[i].history {
			events = append(events, batch[i].event)
		} else {
			entries = append(entries, batch[i].entry)
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), w.timeout)
	defer cancel()
	if len(entries) > 0 {
		w.count(len(entries), entries[0].RequestNo, w.st.LogRequests(ctx, entries))
	}
	if len(events) > 0 {
		w.count(len(events), events[0].RequestNo, w.st.AppendEvents(ctx, events))
	}
	if len(refused) > 0 {
		rows := refusalEntries(refused)
		w.count(len(refused), rows[0].RequestNo, w.st.LogRequests(ctx, rows))
	}
	if len(cs) > 0 {
		if err := w.st.CountRejections(ctx, cs); err != nil {
			// Kept for the next write (bounded like any other count).
			w.counted.WithLabelValues("failed").Add(float64(len(cs)))
			w.log.Warn("rejection counts not written; kept for the next write", zap.Int("counters", len(cs)), zap.Error(err))
			select {
			case <-w.stop:
				// Closing: the database is not there to take them.
			default:
				// No kick: the next step or count brings them along.
				for _, c := range cs {
					w.addCount(c.ActivityID, c.SKUID, c.Reason, c.Minute, c.N)
				}
			}
		} else {
			w.counted.WithLabelValues("written").Add(float64(len(cs)))
		}
	}
}

// count counts n steps written or failed.
func (w *Writer) count(n int, requestNo string, err error) {
	if err != nil {
		w.steps.WithLabelValues("failed").Add(float64(n))
		w.log.Warn("request log write failed", zap.Int("steps", n), zap.String("requestNo", requestNo), zap.Error(err))
		return
	}
	w.steps.WithLabelValues("written").Add(float64(n))
}

// Close writes what is queued and stops. Steps logged after Close are
// dropped.
func (w *Writer) Close() {
	w.once.Do(func() { close(w.stop) })
	<-w.done
}
