package payment

import (
	"context"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/zap"

	"seckill/sale"
	"seckill/stock"
	"seckill/stock/results"
	"seckill/store"
)

// Closer closes orders left unpaid past the payment timeout. For each one:
//
//  1. one database transaction: PENDING_PAYMENT → CLOSED (conditional: a
//     concurrent Pay wins or loses right there), the snapshot gets the
//     units back, a release marker is written;
//  2. the Redis release, forced (the ticket is claimed) and bound to the
//     order's requestNo, which restores the stock, clears the buyer's
//     record so the unit can be bought again, records the close (where the
//     activity sets rebuyAfterClose false, occupy then refuses that buyer
//     as a duplicate naming the closed ticket), and tells the edges;
//  3. the buyer's result becomes FAIL CLOSED and the marker is marked done.
//
// A crash or a Redis failure after step 1 leaves the marker pending; every
// scan retries pending markers first. A retried release finds the record
// gone (NOT_HELD) and changes nothing but writing the same close again, so
// stock comes back exactly once.
// Several closers (one per process) may run: the database decides which
// one closes an order. Safe for concurrent use.
type Closer struct {
	st      store.Store
	stock   *stock.Stock
	res     *results.Store
	log     *zap.Logger
	timeout time.Duration
	now     func() time.Time

	closed   prometheus.Counter
	releases *prometheus.CounterVec
	pending  prometheus.Gauge
}

// scanLimit bounds the orders and markers one query returns.
const scanLimit = 500

// NewCloser returns a closer for orders unpaid after payTimeout.
func NewCloser(st store.Store, stock *stock.Stock, res *results.Store, payTimeout time.Duration, log *zap.Logger,
	reg prometheus.Registerer, opts ...Option) *Closer {
	o := options{now: time.Now}
	for _, f := range opts {
		f(&o)
	}
	c := &Closer{st: st, stock: stock, res: res, log: log, timeout: payTimeout, now: o.now,
		closed: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "seckill_payment_closed_total", Help: "Orders closed unpaid."}),
		releases: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "seckill_payment_releases_total", Help: "Redis releases of closed orders by outcome."}, []string{"outcome"}),
		pending: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "seckill_payment_releases_pending", Help: "Release markers not done after the last scan."}),
	}
	for _, l := range []string{"released", "not_held", "error"} {
		c.releases.WithLabelValues(l)
	}
	if reg != nil {
		reg.MustRegister(c.closed, c.releases, c.pending)
	}
	return c
}

// Period is how often Run scans: a tenth of the payment timeout, between
// 100ms and 5s, so an order is closed within seconds of its deadline.
func (c *Closer) Period() time.Duration {
	return min(max(c.timeout/10, 100*time.Millisecond), 5*time.Second)
}

// Run scans every Period until ctx ends.
func (c *Closer) Run(ctx context.Context) {
	t := time.NewTicker(c.Period())
	defer t.Stop()
	for {
		if _, err := c.Scan(ctx); err != nil && ctx.Err() == nil {
			c.log.Warn("unpaid-order scan failed; retried next period", zap.Error(err))
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// Scan retries the pending releases, then closes every order past its
// deadline. It returns how many orders this call closed.
func (c *Closer) Scan(ctx context.Context) (int, error) {
	rel, err := c.st.PendingReleases(ctx, scanLimit)
	if err != nil {
		return 0, err
	}
	left := 0
	for _, r := range rel {
		if !c.release(ctx, r) {
			left++
		}
	}
	n := 0
	for ctx.Err() == nil {
		deadline := c.now().Add(-c.timeout)
		orders, err := c.st.ExpiredOrders(ctx, deadline, scanLimit)
		if err != nil {
			return n, err
		}
		for _, o := range orders {
			got, closed, err := c.st.CloseOrder(ctx, o.OrderNo, deadline)
			if err != nil {
				return n, err
			}
			if !closed {
				continue // paid meanwhile, or closed by another closer
			}
			n++
			c.closed.Inc()
			c.log.Info("unpaid order closed", zap.String("orderNo", got.OrderNo), zap.String("requestNo", got.RequestNo),
				zap.String("traceId", got.TraceID), zap.Int64("activityId", got.ActivityID), zap.Int64("skuId", got.SKUID),
				zap.Int64("userId", got.UserID), zap.Time("created", got.Created))
			r := store.Release{RequestNo: got.RequestNo, OrderNo: got.OrderNo, ActivityID: got.ActivityID,
				SKUID: got.SKUID, UserID: got.UserID, Quantity: got.Quantity}
			if !c.release(ctx, r) {
				left++
			}
		}
		if len(orders) < scanLimit {
			break
		}
	}
	c.pending.Set(float64(left))
	return n, nil
}

// release runs the Redis half of a close and marks the marker done; false
// leaves it pending for the next scan.
func (c *Closer) release(ctx context.Context, r store.Release) bool {
	fields := []zap.Field{zap.String("requestNo", r.RequestNo), zap.String("orderNo", r.OrderNo),
		zap.Int64("activityId", r.ActivityID), zap.Int64("skuId", r.SKUID), zap.Int64("userId", r.UserID)}
	// Release routes by the catalog: a SKU it does not know would be
	// looked for on the wrong shard and look released.
	cat := c.stock.Catalog()
	if _, _, ok := cat.Lookup(r.ActivityID, r.SKUID); !ok {
		if err := cat.Load(ctx); err != nil {
			c.releases.WithLabelValues("error").Inc()
			c.log.Warn("closed order's release waits: catalog not loaded", append(fields, zap.Error(err))...)
			return false
		}
		if _, _, ok := cat.Lookup(r.ActivityID, r.SKUID); !ok {
			c.releases.WithLabelValues("error").Inc()
			c.log.Warn("closed order's release waits: activity not in the catalog", fields...)
			return false
		}
	}
	m := r.Message()
	out, err := c.stock.ReleaseClosed(ctx, &m)
	if err != nil {
		c.releases.WithLabelValues("error").Inc()
		c.log.Warn("closed order's release failed; retried next scan", append(fields, zap.Error(err))...)
		return false
	}
	c.releases.WithLabelValues(out.String()).Inc()
	if out == stock.NotHeld {
		// Released before (a retry), or Redis lost the record: then the
		// unit stays out of Redis until the reconciler settles it.
		c.log.Info("closed order's record was not held", fields...)
	}
	err = c.res.Write(ctx, results.Entry{RequestNo: r.RequestNo, Activity: r.ActivityID, SKU: r.SKUID, Owner: r.UserID,
		State: sale.ResultFail, OrderNo: r.OrderNo, Code: sale.FailClosed})
	if err == nil {
		err = c.st.ReleaseDone(ctx, r.RequestNo)
	}
	if err != nil {
		c.log.Warn("closed order released; marker left pending", append(fields, zap.Error(err))...)
		return false
	}
	return true
}
