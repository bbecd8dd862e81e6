// Package reqlog writes request-log steps off the hot path: the engine's
// compensation path (and anything else that must not wait for the
// database) hands a step to a bounded queue, and one goroutine writes the
// queued steps in batches. A full queue drops the step and counts it — the
// buyer's answer never waits for the log.
//
// Metrics:
//
//	seckill_reqlog_steps_total{outcome}   written, dropped (queue full), failed (database error)
package reqlog

import (
	"context"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/zap"

	"seckill/internal/sale"
	"seckill/store"
)

// Writer queues steps and writes them. Safe for concurrent use; Record,
// Log and Append never block.
type Writer struct {
	st      store.Store
	log     *zap.Logger
	ch      chan step
	stop    chan struct{}
	done    chan struct{}
	once    sync.Once
	steps   *prometheus.CounterVec
	timeout time.Duration
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
	w := &Writer{st: st, log: log, ch: make(chan step, size), stop: make(chan struct{}), done: make(chan struct{}),
		timeout: 5 * time.Second,
		steps: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "seckill_reqlog_steps_total", Help: "Request-log steps by outcome: written, dropped, failed."}, []string{"outcome"})}
	for _, o := range []string{"written", "dropped", "failed"} {
		w.steps.WithLabelValues(o)
	}
	if reg != nil {
		reg.MustRegister(w.steps)
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
	for {
		select {
		case e := <-w.ch:
			batch = append(batch[:0], e)
		case <-w.stop:
			// Drain what is queued, then stop.
			for {
				batch = batch[:0]
				for len(batch) < maxBatch {
					select {
					case e := <-w.ch:
						batch = append(batch, e)
						continue
					default:
					}
					break
				}
				if len(batch) == 0 {
					return
				}
				w.write(batch)
			}
		}
	more:
		for len(batch) < maxBatch {
			select {
			case e := <-w.ch:
				batch = append(batch, e)
			default:
				break more
			}
		}
		w.write(batch)
	}
}

// write writes the entries of batch, then its history-only events.
func (w *Writer) write(batch []step) {
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
