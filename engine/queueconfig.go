package engine

import (
	"errors"
	"time"

	"seckill/sale"
)

// QueueConfig is engine.queue: the waiting line of the SKUs on-call puts
// in queue mode (sale.ModeQueue). The edges append attempts to Topic (Line)
// and the engines drain it (Drainer), over the brokers of engine.kafka.
type QueueConfig struct {
	// Enabled runs the line: edges append the attempts of a SKU in queue
	// mode, engines run a drainer. Off, a SKU in queue mode is served
	// direct (and counted). Default off.
	Enabled bool `yaml:"enabled"`
	// Topic is the attempts topic, keyed by SKU. Default seckill.attempts.
	Topic string `yaml:"topic"`
	// Group is the drainers' consumer group: a partition whose drainer
	// dies is taken over by another engine. Default seckill-drainer.
	Group string `yaml:"group"`
	// Window is how many attempts of one partition are occupied at once
	// (in line order, group-committed like direct purchases). Default 64.
	Window int `yaml:"window"`
	// Progress is how often a drainer publishes how far it has drained
	// each partition (sale.DrainedKey), what positions and ETAs are
	// reckoned from. Default 100ms.
	Progress time.Duration `yaml:"progress"`
	// SessionTimeout bounds how long a dead drainer's partitions wait for
	// another engine. Default 6s.
	SessionTimeout time.Duration `yaml:"session_timeout"`
	// PrequeueMax bounds how many attempts of one partition a drainer
	// holds in memory to draw a pre-queue's order at the start (the
	// pre-queued attempts and whatever else the partition took before
	// the draw): attempts past the first PrequeueMax from the pre-queue's
	// first are served in line order after the drawn ones. Default
	// 500,000 (some 250 B each).
	PrequeueMax int `yaml:"prequeue_max"`
	// AutoLatency turns on the switch to queue mode by itself: once at
	// least half of a shard's occupies took longer than AutoLatency, or
	// failed, for AutoFor, every direct SKU on that shard selling now (one
	// ledger: not split into buckets) enters queue mode at AutoRate
	// attempts a second (0: as fast as the shard allows). Rounded down to
	// a bound of seckill_engine_lua_seconds' buckets (5ms, 10ms, 25ms,
	// 50ms, 100ms, 250ms, 500ms). 0 (the default): off.
	AutoLatency time.Duration `yaml:"auto_latency"`
	// AutoFor is how long a shard must be that slow. Default 3s.
	AutoFor time.Duration `yaml:"auto_for"`
	// AutoRate is the drain rate a SKU switched by itself gets.
	AutoRate int64 `yaml:"auto_rate"`
}

// DefaultQueueConfig returns the defaults named on each field.
func DefaultQueueConfig() QueueConfig {
	return QueueConfig{Topic: sale.AttemptsTopic, Group: "seckill-drainer", Window: 64,
		Progress: 100 * time.Millisecond, SessionTimeout: 6 * time.Second, PrequeueMax: 500_000,
		AutoFor: 3 * time.Second}
}

// Validate names the first bad key.
func (c *QueueConfig) Validate() error {
	switch {
	case !c.Enabled:
		return nil
	case c.Topic == "":
		return errors.New("engine.queue.topic must not be empty")
	case c.Group == "":
		return errors.New("engine.queue.group must not be empty")
	case c.Window < 1 || c.Window > 4096:
		return errors.New("engine.queue.window must be 1..4096")
	case c.PrequeueMax < 1 || c.PrequeueMax > 50_000_000:
		return errors.New("engine.queue.prequeue_max must be 1..50000000")
	case c.AutoLatency != 0 && (c.AutoLatency < 5*time.Millisecond || c.AutoLatency > 500*time.Millisecond):
		return errors.New("engine.queue.auto_latency must be 0 (off) or 5ms..500ms")
	case c.AutoLatency != 0 && c.AutoFor < autoEvery:
		return errors.New("engine.queue.auto_for must be at least 1s")
	case c.AutoRate < 0 || c.AutoRate > sale.MaxQueueRate:
		return errors.New("engine.queue.auto_rate must be 0..1000000")
	case c.Progress <= 0:
		return errors.New("engine.queue.progress must be positive")
	case c.SessionTimeout < 6*time.Second:
		return errors.New("engine.queue.session_timeout must be at least 6s (the brokers' group.min.session.timeout.ms)")
	}
	return nil
}
