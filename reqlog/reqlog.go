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

// Writer queues steps and writes them. Safe for concurrent use; Record and
// Log never block.
type Writer struct {
	st      store.Store
	log     *zap.Logger
	ch      chan store.LogEntry
	stop    chan struct{}
	done    chan struct{}
	once    sync.Once
	steps   *prometheus.CounterVec
	timeout time.Duration
}

// maxBatch bounds the steps of one write.
const maxBatch = 200

// New starts a writer with a queue of size steps (default 4096).
func New(st store.Store, log *zap.Logger, reg prometheus.Registerer, size int) *Writer {
	if size <= 0 {
		size = 4096
	}
	w := &Writer{st: st, log: log, ch: make(chan store.LogEntry, size), stop: make(chan struct{}), done: make(chan struct{}),
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
	select {
	case w.ch <- e:
	default:
		w.steps.WithLabelValues("dropped").Inc()
	}
}

func (w *Writer) run() {
	defer close(w.done)
	batch := make([]store.LogEntry, 0, maxBatch)
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

func (w *Writer) write(batch []store.LogEntry) {
	ctx, cancel := context.WithTimeout(context.Background(), w.timeout)
	defer cancel()
	if err := w.st.LogRequests(ctx, batch); err != nil {
		w.steps.WithLabelValues("failed").Add(float64(len(batch)))
		w.log.Warn("request log write failed", zap.Int("steps", len(batch)), zap.String("requestNo", batch[0].RequestNo), zap.Error(err))
		return
	}
	w.steps.WithLabelValues("written").Add(float64(len(batch)))
}

// Close writes what is queued and stops. Steps logged after Close are
// dropped.
func (w *Writer) Close() {
	w.once.Do(func() { close(w.stop) })
	<-w.done
}
