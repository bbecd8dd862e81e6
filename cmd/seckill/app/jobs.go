package app

import (
	"seckill/routeswitch"

	"context"
	"sync"
	"time"

	"go.uber.org/zap"

	"seckill/admin"
	"seckill/engine"
	"seckill/internal/lag"
	"seckill/payment"
	"seckill/reconcile"
	"seckill/reqlog"
)

// jobs are the bookkeeping parts of a process with an orders database: the
// request-log writer behind the in-process engine and the edge's risk check, and (reconcile.jobs) the
// periodic jobs — unpaid-order closer, orphan sweeper, Redis watcher,
// reconciler. They start with System.Start and stop in Shutdown before the
// connections close.
type jobs struct {
	s      *System
	reqlog *reqlog.Writer
	recon  *reconcile.Reconciler
	closer *payment.Closer
	lag    *lazyLag
	cancel context.CancelFunc
	wg     sync.WaitGroup
}

// newJobs builds the jobs of s (nothing without a store), sets s.Payments
// and adds the request-log hook to the engine's options. Call it after the
// store and the stock exist and before the engine is built.
func newJobs(s *System, roles Roles, o *options) *jobs {
	j := &jobs{s: s}
	if s.Store == nil {
		return j
	}
	cfg := s.Cfg
	s.Payments = payment.New(s.Store, cfg.Payment, cfg.Order.PayTimeout, s.Log.Named("payment"))
	if roles.Engine || roles.Edge {
		// One writer for the engine's compensation steps and the edge's
		// RISK_PASSED (wired in New).
		j.reqlog = reqlog.New(s.Store, s.Log.Named("reqlog"), s.Reg, 0)
	}
	if roles.Engine {
		o.engineOpts = append(o.engineOpts, engine.WithRequestLog(j.reqlog))
	}
	j.lag = &lazyLag{brokers: cfg.Consumer.Brokers, group: cfg.Consumer.Group, topic: cfg.Consumer.Topic}
	j.recon = reconcile.New(cfg.ReconcileConfig(), s.Stock, s.Store, s.Results, j.lag, s.Log.Named("reconcile"), s.Reg)
	if cfg.Reconcile.Jobs {
		j.closer = payment.NewCloser(s.Store, s.Stock, s.Results, cfg.Order.PayTimeout, s.Log.Named("closer"), s.Reg)
	}
	return j
}

// reconciler is the admin API's POST /admin/v1/reconcile (nil without a
// store).
func (j *jobs) reconciler() admin.Reconciler {
	if j.recon == nil {
		return nil
	}
	return j.recon.Run
}

// start runs the periodic jobs until stop.
func (j *jobs) start() {
	if j.recon == nil || !j.s.Cfg.Reconcile.Jobs {
		return
	}
	ctx, cancel := context.WithCancel(context.Background())
	j.cancel = cancel
	log := j.s.Log.Named("jobs")
	cfg := j.s.Cfg.Reconcile
	every := func(name string, d time.Duration, f func(ctx context.Context) error) {
		j.wg.Go(func() {
			t := time.NewTicker(d)
			defer t.Stop()
			for {
				if err := f(ctx); err != nil && ctx.Err() == nil {
					log.Warn("job failed; retried next period", zap.String("job", name), zap.Error(err))
				}
				select {
				case <-ctx.Done():
					return
				case <-t.C:
				}
			}
		})
	}
	bound := func(d time.Duration, f func(ctx context.Context) error) func(context.Context) error {
		return func(ctx context.Context) error {
			ctx, cancel := context.WithTimeout(ctx, d)
			defer cancel()
			return f(ctx)
		}
	}
	every("watch", cfg.WatchInterval, bound(10*time.Second, func(ctx context.Context) error {
		_, err := j.recon.Watch(ctx)
		return err
	}))
	// Route switches on-call closed stay closed when Redis loses them.
	every("routes", cfg.WatchInterval, bound(10*time.Second, func(ctx context.Context) error {
		restored, err := routeswitch.Restore(ctx, j.s.Shards.Default, j.s.Store.RouteSwitches)
		if restored {
			log.Warn("Redis lost the route switches; put back from the database")
		}
		return err
	}))
	every("sweep", cfg.SweepInterval, bound(time.Minute, func(ctx context.Context) error {
		_, err := j.recon.Sweep(ctx)
		return err
	}))
	every("reconcile", cfg.Interval, bound(5*time.Minute, func(ctx context.Context) error {
		if err := j.recon.Know(ctx); err != nil {
			return err
		}
		// The periodic pass costs what changed since the last one; the
		// full comparison (Run) is on demand and after each sale.
		_, err := j.recon.Pass(ctx, cfg.Repair)
		return err
	}))
	j.wg.Go(func() { j.closer.Run(ctx) })
}

// stop stops the periodic jobs and writes the queued request-log steps.
// The engine must be closed first (its last compensations log here).
func (j *jobs) stop() {
	if j.cancel != nil {
		j.cancel()
	}
	j.wg.Wait()
	if j.reqlog != nil {
		j.reqlog.Close()
	}
	if j.lag != nil {
		j.lag.close()
	}
}

// lazyLag connects its lag reader on first use (and again after a
// failure), so a process that starts before Kafka still gets one.
type lazyLag struct {
	brokers      []string
	group, topic string
	mu           sync.Mutex
	r            *lag.Reader
}

func (l *lazyLag) ConsumedThrough(ctx context.Context) (time.Time, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	r, err := l.reader()
	if err != nil {
		return time.Time{}, err
	}
	return r.ConsumedThrough(ctx)
}

// Sum is lag.Reader.Sum on the reader; after a failure the next call
// connects afresh (a broker that came back, a client that lost its
// metadata).
func (l *lazyLag) Sum(ctx context.Context) (lag.Offsets, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	r, err := l.reader()
	if err != nil {
		return lag.Offsets{}, err
	}
	o, err := r.Sum(ctx)
	if err != nil {
		r.Close()
		l.r = nil
	}
	return o, err
}

// reader connects the reader if it is not; l.mu held.
func (l *lazyLag) reader() (*lag.Reader, error) {
	if l.r == nil {
		r, err := lag.New(l.brokers, l.group, l.topic)
		if err != nil {
			return nil, err
		}
		l.r = r
	}
	return l.r, nil
}

func (l *lazyLag) close() {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.r != nil {
		l.r.Close()
		l.r = nil
	}
}
