package engine

import "seckill/sale"

// RequestLog receives the request-log steps (DESIGN §3) only the engine
// knows of: a ticket whose message could not be made durable is
// COMPENSATING, then FAILED once its occupancy is released; an attempt
// the line's drainer refused (sold out, a duplicate, …) is FAILED, naming
// the code. The consumer records the states a message proves
// (STOCK_OCCUPIED, MQ_QUEUED, …).
//
// Record is called on the buyer's request path and must not block:
// implementations queue the step and write it in the background
// (package reqlog does).
type RequestLog interface {
	Record(m *sale.Message, state, remark string)
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
