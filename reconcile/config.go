package reconcile

import (
	"errors"
	"time"
)

// Config is the reconcile section: the periodic jobs that keep the books
// (reconciler, orphan sweeper, Redis watcher).
type Config struct {
	// Jobs runs the periodic jobs (and the unpaid-order closer) in this
	// process. Several processes may run them side by side — every step
	// is idempotent and the database or a Redis script decides races —
	// but one per deployment is enough. Default true.
	Jobs bool `yaml:"jobs"`
	// Interval between two reconciliations (report, metric, log line per
	// drift). Default 1m.
	Interval time.Duration `yaml:"interval"`
	// Repair lets the periodic reconciliation apply the repairs that are
	// provably safe (see docs/operations-ledger.md); false only reports,
	// and repairs are run by `seckill reconcile --repair` or
	// POST /admin/v1/reconcile?repair=true. Default false.
	Repair bool `yaml:"repair"`
	// OrphanGrace is how old an occupancy must be before the sweeper may
	// release it (once Kafka proves its message cannot still come). It
	// must exceed engine.occupy_timeout + engine.kafka.send_timeout.
	// Default 30s.
	OrphanGrace time.Duration `yaml:"orphan_grace"`
	// SweepInterval between two orphan sweeps. Default 10s.
	SweepInterval time.Duration `yaml:"sweep_interval"`
	// WatchInterval between two checks that Redis still holds every SKU
	// of the database's open activities. Default 1s.
	WatchInterval time.Duration `yaml:"watch_interval"`
	// KeepAfterEnd is how long an ended activity's Redis keys are kept
	// after its end: the last pay deadline (order.pay_timeout) plus
	// order.redis_retention, set from those keys by the process (no key
	// of its own). Then the periodic pass reconciles each SKU in full and
	// expires its keys (DESIGN §5, key lifetimes). 0 keeps them. Default
	// 15m + 48h.
	KeepAfterEnd time.Duration `yaml:"-"`
}

// DefaultConfig returns the defaults named on each field.
func DefaultConfig() Config {
	return Config{Jobs: true, Interval: time.Minute, OrphanGrace: 30 * time.Second,
		SweepInterval: 10 * time.Second, WatchInterval: time.Second, KeepAfterEnd: 15*time.Minute + 48*time.Hour}
}

// Validate names the first bad key.
func (c *Config) Validate() error {
	switch {
	case c.Interval < time.Second:
		return errors.New("reconcile.interval must be at least 1s")
	case c.OrphanGrace < time.Second:
		return errors.New("reconcile.orphan_grace must be at least 1s")
	case c.SweepInterval < 100*time.Millisecond:
		return errors.New("reconcile.sweep_interval must be at least 100ms")
	case c.WatchInterval < 100*time.Millisecond:
		return errors.New("reconcile.watch_interval must be at least 100ms")
	}
	return nil
}
