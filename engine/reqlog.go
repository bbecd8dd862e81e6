package engine

import "seckill/sale"

// RequestLog receives the request-log steps (DESIGN §3) only the engine
// knows of: a ticket whose message could not be made durable is
// COMPENSATING, then FAILED once its occupancy is released. The consumer
// records the states a message proves (STOCK_OCCUPIED, MQ_QUEUED, …). A
// RequestLog that is also a RefusalLog gets the line's refusals.
//
// Record is called on the buyer's request path and must not block:
// implementations queue the step and write it in the background
// (package reqlog does).
type RequestLog interface {
	Record(m *sale.Message, state, remark string)
}

// RefusalLog records attempts refused after they cost something, each as
// a refusal of its buyer (a REJECTED row of its own, package reqlog):
// reason is the code the buyer is answered (SOLD_OUT, DUPLICATE, …),
// detail what names it. It must not block; a flood of refusals may drop
// only refusals. reqlog.Writer is one.
type RefusalLog interface {
	Refused(activity, sku, user, quantity int64, reason, detail, traceID string)
}

// Request-log states the engine records (the values of the request log's
// status column).
const (
	StateCompensating = "COMPENSATING"
	StateFailed       = "FAILED"
)

// WithRequestLog records the compensation path's steps in l.
func WithRequestLog(l RequestLog) Option { return func(e *Local) { e.reqlog = l } }

func (e *Local) record(m *sale.Message, state, remark string) {
	if e.reqlog != nil {
		e.reqlog.Record(m, state, remark)
	}
}
