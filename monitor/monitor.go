// Package monitor publishes the sale's state as Prometheus gauges, sampled
// periodically from Redis, the orders database and Kafka: per SKU the
// remaining, occupied and ordered units and the time it sold out, and the
// consumer lag per partition, and whether each dependency (the Redis
// deployments, the store) answers. Series exist from the first scrape for
// every SKU in the catalog and every dependency (value 0 until the first
// sample).
//
//	seckill_sku_remaining_units{activity,sku}    Redis remaining stock
//	seckill_sku_occupied_units{activity,sku}     units held by tickets not (yet) ordered
//	seckill_sku_ordered_units{activity,sku}      units in live orders (the database's stock snapshot)
//	seckill_sku_initial_units{activity,sku}      initial stock (raised by restocks)
//	seckill_sku_sold_out_timestamp_seconds{activity,sku}  when remaining first reached 0 (0: not sold out)
//	seckill_consumer_lag_messages{partition}     newest offset − committed offset of the consumer group
//	seckill_monitor_errors_total{source}         failed samples (redis, store, kafka)
//	seckill_dependency_up{dep}                   1 while the dependency answers a ping, 0 otherwise (redis.default, redis.hot0, redis.hot1, …, store)
package monitor

import (
	"context"
	"strconv"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/zap"

	"seckill/internal/lag"
	"seckill/sale"
	"seckill/stock"
	"seckill/store"
)

// Dependency is something the process needs, pinged at every sample:
// seckill_dependency_up{dep=Name} is 1 while Ping succeeds, 0 otherwise.
type Dependency struct {
	Name string // e.g. "redis.default", "redis.hot0", "store"
	Ping func(context.Context) error
}

// Monitor samples every Interval. Safe for concurrent use.
type Monitor struct {
	stock *stock.Stock
	st    store.Store // may be nil: ordered/occupied are then not sampled
	lag   *lag.Reader // may be nil
	log   *zap.Logger
	every time.Duration
	now   func() time.Time

	remaining, occupied, ordered, initial, soldAt *prometheus.GaugeVec
	lagG                                          *prometheus.GaugeVec
	errs                                          *prometheus.CounterVec
	deps                                          []Dependency
	up                                            *prometheus.GaugeVec

	mu      sync.Mutex
	soldOut map[[2]int64]bool
	down    map[string]bool // dependencies whose last ping failed
}

// New registers the gauges on reg; deps are pinged at every sample.
func New(stock *stock.Stock, st store.Store, l *lag.Reader, every time.Duration, log *zap.Logger, reg prometheus.Registerer, deps ...Dependency) *Monitor {
	labels := []string{"activity", "sku"}
	g := func(name, help string) *prometheus.GaugeVec {
		return prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: name, Help: help}, labels)
	}
	m := &Monitor{
		stock: stock, st: st, lag: l, log: log, every: every, now: time.Now,
		remaining: g("seckill_sku_remaining_units", "Remaining stock in Redis."),
		occupied:  g("seckill_sku_occupied_units", "Units held by tickets that are not (yet) orders."),
		ordered:   g("seckill_sku_ordered_units", "Units in live orders in the database."),
		initial:   g("seckill_sku_initial_units", "Initial stock of the SKU (raised by restocks)."),
		soldAt:    g("seckill_sku_sold_out_timestamp_seconds", "Unix time the SKU's remaining stock first reached 0; 0 while it has stock."),
		lagG: prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "seckill_consumer_lag_messages",
			Help: "Messages of the orders topic not yet committed by the consumer group."}, []string{"partition"}),
		errs: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "seckill_monitor_errors_total",
			Help: "Samples that failed, by source."}, []string{"source"}),
		deps: deps,
		up: prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "seckill_dependency_up",
			Help: "1 while the dependency answered the last sample's ping, 0 otherwise."}, []string{"dep"}),
		soldOut: map[[2]int64]bool{}, down: map[string]bool{},
	}
	for _, s := range []string{"redis", "store", "kafka"} {
		m.errs.WithLabelValues(s)
	}
	for _, d := range deps {
		m.up.WithLabelValues(d.Name)
	}
	if reg != nil {
		reg.MustRegister(m.remaining, m.occupied, m.ordered, m.initial, m.soldAt, m.lagG, m.errs, m.up)
	}
	m.declare()
	return m
}

// declare creates the series of every SKU in the catalog at 0.
func (m *Monitor) declare() {
	for _, a := range m.stock.Catalog().Activities() {
		for _, k := range a.SKUs {
			l := []string{strconv.FormatInt(a.ID, 10), strconv.FormatInt(k.ID, 10)}
			for _, v := range []*prometheus.GaugeVec{m.remaining, m.occupied, m.ordered, m.initial, m.soldAt} {
				v.WithLabelValues(l...)
			}
		}
	}
}

// Run samples until ctx ends.
func (m *Monitor) Run(ctx context.Context) {
	t := time.NewTicker(m.every)
	defer t.Stop()
	for {
		m.Sample(ctx)
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// Sample takes one sample now.
func (m *Monitor) Sample(ctx context.Context) {
	ctx, cancel := context.WithTimeout(ctx, m.every+time.Second)
	defer cancel()
	m.ping(ctx)
	m.declare()
	for _, a := range m.stock.Catalog().Activities() {
		for _, k := range a.SKUs {
			l := []string{strconv.FormatInt(a.ID, 10), strconv.FormatInt(k.ID, 10)}
			n, err := m.stock.Counts(ctx, a.ID, k.ID)
			if err != nil {
				m.errs.WithLabelValues("redis").Inc()
				continue
			}
			m.remaining.WithLabelValues(l...).Set(float64(n.Remaining))
			m.initial.WithLabelValues(l...).Set(float64(n.Initial))
			m.markSoldOut(a.ID, k.ID, n.Remaining <= 0 && n.Initial > 0, l)
			if m.st == nil {
				continue
			}
			// The snapshot's sold is the ordered units, kept in the orders'
			// own transactions: one row to read, where counting the orders
			// of a big sale every second costs the database real work. The
			// reconciler checks the two agree.
			snap, err := m.st.Snapshot(ctx, a.ID, k.ID)
			if err != nil {
				m.errs.WithLabelValues("store").Inc()
				continue
			}
			units := snap.Sold
			m.ordered.WithLabelValues(l...).Set(float64(units))
			m.occupied.WithLabelValues(l...).Set(float64(max(n.Sold-units, 0)))
		}
	}
	if m.lag != nil {
		ps, err := m.lag.Partitions(ctx)
		if err != nil {
			m.errs.WithLabelValues("kafka").Inc()
			return
		}
		for p, v := range ps {
			m.lagG.WithLabelValues(strconv.Itoa(int(p))).Set(float64(v))
		}
	}
}

// ping sets seckill_dependency_up for every dependency, pinging them in
// parallel so that one that hangs does not delay the others' verdict. A
// change of state is logged once, not every sample.
func (m *Monitor) ping(ctx context.Context) {
	ctx, cancel := context.WithTimeout(ctx, m.every)
	defer cancel()
	var wg sync.WaitGroup
	for _, d := range m.deps {
		wg.Go(func() {
			err := d.Ping(ctx)
			m.mu.Lock()
			defer m.mu.Unlock()
			switch {
			case err != nil && !m.down[d.Name]:
				m.down[d.Name] = true
				m.log.Warn("dependency down", zap.String("dep", d.Name), zap.Error(err))
			case err == nil && m.down[d.Name]:
				delete(m.down, d.Name)
				m.log.Info("dependency up again", zap.String("dep", d.Name))
			}
			if err != nil {
				m.up.WithLabelValues(d.Name).Set(0)
			} else {
				m.up.WithLabelValues(d.Name).Set(1)
			}
		})
	}
	wg.Wait()
}

// markSoldOut records the first sample that saw the SKU sold out; a SKU
// with stock again clears it.
func (m *Monitor) markSoldOut(a, k int64, out bool, l []string) {
	m.markSoldOutAt(a, k, out, l, m.now())
}

func (m *Monitor) markSoldOutAt(a, k int64, out bool, l []string, at time.Time) {
	m.mu.Lock()
	defer m.mu.Unlock()
	key := [2]int64{a, k}
	switch {
	case out && !m.soldOut[key]:
		m.soldOut[key] = true
		m.soldAt.WithLabelValues(l...).Set(float64(at.UnixMilli()) / 1000)
	case !out && m.soldOut[key]:
		delete(m.soldOut, key)
		m.soldAt.WithLabelValues(l...).Set(0)
	}
}

// HandleEvent records sold-out times as the stock ledger publishes them, more
// precisely than a sample can.
func (m *Monitor) HandleEvent(e sale.Event) {
	if e.SKU == 0 {
		return
	}
	l := []string{strconv.FormatInt(e.Activity, 10), strconv.FormatInt(e.SKU, 10)}
	switch e.Kind {
	case sale.EventSoldOut:
		m.markSoldOutAt(e.Activity, e.SKU, true, l, time.Unix(0, e.At))
	case sale.EventAvailable:
		m.markSoldOutAt(e.Activity, e.SKU, false, l, time.Time{})
	}
}
