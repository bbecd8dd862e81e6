// Package payment is the order lifecycle after the consumer: a buyer pays a
// PENDING_PAYMENT order (Pay, and Handler for the edge's
// POST /api/v1/flash-sale/orders/{orderNo}/pay), and the Closer closes the
// orders left unpaid past order.pay_timeout, giving their units back to the
// database snapshot and then to Redis exactly once (a durable marker
// between the two steps).
//
// Metrics (Closer):
//
//	seckill_payment_closed_total              orders closed unpaid
//	seckill_payment_releases_total{outcome}   Redis releases of closed orders: released, not_held, error
//	seckill_payment_releases_pending          release markers not done at the end of the last scan
package payment

import (
	"context"
	"errors"
	"fmt"
	"time"

	"seckill/store"
)

// Service pays orders. Safe for concurrent use.
type Service struct {
	st      store.Store
	timeout time.Duration
	now     func() time.Time
}

// Option is a test seam.
type Option func(*options)

type options struct{ now func() time.Time }

// WithClock replaces time.Now.
func WithClock(now func() time.Time) Option { return func(o *options) { o.now = now } }

// New returns a Service over st; payTimeout is order.pay_timeout.
func New(st store.Store, payTimeout time.Duration, opts ...Option) *Service {
	o := options{now: time.Now}
	for _, f := range opts {
		f(&o)
	}
	return &Service{st: st, timeout: payTimeout, now: o.now}
}

// Pay marks orderNo PAID for its buyer user. Paying a paid order again
// answers the paid order (idempotent). The race with the closer is decided
// by one conditional update in the database: an order is either paid or
// closed, never both. Errors are the sentinels of errors.go.
func (s *Service) Pay(ctx context.Context, orderNo string, user int64) (store.Order, error) {
	if orderNo == "" || len(orderNo) > 80 || user <= 0 {
		return store.Order{}, ErrNotFound
	}
	o, err := s.st.PayOrder(ctx, orderNo, user, s.now().Add(-s.timeout))
	switch {
	case errors.Is(err, store.ErrNotFound):
		return o, ErrNotFound
	case err != nil:
		return o, fmt.Errorf("%w: %v", ErrBusy, err)
	}
	switch o.Status {
	case store.OrderPaid:
		return o, nil
	case store.OrderClosed:
		return o, ErrClosed
	default:
		return o, ErrExpired
	}
}
