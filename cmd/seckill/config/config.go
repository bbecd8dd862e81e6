package config

import (
	"errors"
	"fmt"
	"time"

	"seckill/configs"
	"seckill/consumer"
	"seckill/edge"
	"seckill/engine"
	"seckill/internal/obs"
	"seckill/internal/shard"
	"seckill/internal/token"
	"seckill/payment"
	"seckill/reconcile"
	"seckill/sale"
	"seckill/store"
)

// Config is the whole configuration file. Each part's section is that
// part's own Config with its own defaults and validation.
type Config struct {
	Log      obs.LogConfig   `yaml:"log"`
	Redis    shard.Config    `yaml:"redis"`
	Engine   engine.Config   `yaml:"engine"`
	Edge     edge.Config     `yaml:"edge"`
	Consumer consumer.Config `yaml:"consumer"`
	Store    store.Config    `yaml:"store"`
	Token    token.Config    `yaml:"token"`
	// OrderSigning holds the keys of the order messages' HMAC: the engine
	// signs with the first, the consumer verifies with any (env
	// SECKILL_ORDER_SIGNING_KEYS=k2:<secret>,k1:<old>). Required by the
	// engine and consumer roles.
	OrderSigning sale.SigningConfig `yaml:"order_signing"`
	Admin        Admin              `yaml:"admin"`
	Order        Order              `yaml:"order"`
	Payment      payment.Config     `yaml:"payment"`
	Dev          Dev                `yaml:"dev"`
	Metrics      Metrics            `yaml:"metrics"`
	// Reconcile holds the bookkeeping jobs: reconciler, orphan sweeper,
	// Redis watcher (and whether this process runs them and the
	// unpaid-order closer).
	Reconcile reconcile.Config `yaml:"reconcile"`
	// StartTimeout bounds how long a starting process waits for its
	// servers (each Redis past LOADING, the broker with its topics, the
	// database) before it exits naming the one that never came. Default 2m.
	StartTimeout time.Duration `yaml:"start_timeout"`
	// GC tunes the Go garbage collector of every process.
	GC GC `yaml:"gc"`
}

// GC tunes the Go garbage collector. The environment's GOGC and GOMEMLIMIT,
// where set, win over these.
type GC struct {
	// Percent is GOGC: the heap may grow by this percentage of the live
	// heap before a collection. Default 200: the request path allocates a
	// few short-lived objects per buyer, and collecting half as often takes
	// GC work off the two cores a sale shares, and a collection's assists
	// out of its slowest requests, for a larger heap. 10 to 1000.
	Percent int `yaml:"percent"`
	// MemoryLimitMB is GOMEMLIMIT in MiB: near it the collector runs more
	// often whatever Percent says, so a larger Percent cannot take the
	// process past its memory. Default 0: no limit; set it below the
	// container's limit.
	MemoryLimitMB int64 `yaml:"memory_limit_mb"`
}

// Metrics configures the sampled gauges (package monitor).
type Metrics struct {
	// SampleInterval is how often per-SKU stock and consumer lag are
	// sampled. Default 1s.
	SampleInterval time.Duration `yaml:"sample_interval"`
	// Listen serves /metrics for `seckill consumer` and `seckill engine`,
	// which have no public listener (the edge serves /metrics on its own).
	// Empty: none.
	Listen string `yaml:"listen"`
}

// Admin is the on-call listener.
type Admin struct {
	// Listen is the admin listener. Default 127.0.0.1:8081; keep it off
	// the public network.
	Listen string `yaml:"listen"`
	// Token is the bearer token every admin call must carry. Required
	// outside dev.
	Token string `yaml:"token"`
}

// Order holds order lifecycle settings.
type Order struct {
	// PayTimeout closes an unpaid order after this long. Default 15m.
	PayTimeout time.Duration `yaml:"pay_timeout"`
	// RedisRetention is how long an ended activity's per-SKU Redis keys
	// (records, counters, results…) outlive its last pay deadline (end +
	// pay_timeout): then the reconciler compares them with the database
	// in full and expires them; the database answers for the sale from
	// then on. 0 keeps them for ever. Default 48h.
	RedisRetention time.Duration `yaml:"redis_retention"`
}

// Dev configures `seckill dev`, the all-in-one process.
type Dev struct {
	// DataDir holds the SQLite file, Redis' append-only files and the
	// broker's log. Default ./data.
	DataDir string `yaml:"data_dir"`
	// Demo preloads the demo activity (activity 1: SKU 1001 with 1,000
	// units, SKU 1002 with 50,000 hot units, open now for an hour).
	// Default true.
	Demo bool `yaml:"demo"`
	// KafkaPort is the embedded broker's port; 0 picks a free one.
	KafkaPort int `yaml:"kafka_port"`
	// Partitions of the orders topic on the embedded broker. Default 4.
	Partitions int `yaml:"partitions"`
	// RedisArgs are extra redis-server arguments for both dev Redis
	// servers, appended to dev's own (e.g. [--maxmemory, 2gb]). Empty by
	// default.
	RedisArgs []string `yaml:"redis_args"`
}

// Default returns every section's defaults.
func Default() Config {
	return Config{
		Log:      obs.LogConfig{Format: "json", Level: "info"},
		Redis:    shard.DefaultConfig(),
		Engine:   engine.DefaultConfig(),
		Edge:     edge.DefaultConfig(),
		Consumer: consumer.DefaultConfig(),
		Store:    store.DefaultConfig(),
		Token:    token.DefaultConfig(),
		Admin:    Admin{Listen: "127.0.0.1:8081"},
		Order:    Order{PayTimeout: 15 * time.Minute, RedisRetention: 48 * time.Hour},
		Payment:  payment.DefaultConfig(),
		Dev:      Dev{DataDir: "data", Demo: true, Partitions: 4},
		Metrics:  Metrics{SampleInterval: time.Second},

		Reconcile:    reconcile.DefaultConfig(),
		StartTimeout: 2 * time.Minute,
		GC:           GC{Percent: 200},
	}
}

// DevDefaults returns the defaults of `seckill dev`: configs/dev.yaml (built into
// the binary) read over Default. They differ from production where one
// machine and a local crowd need it: 127.0.0.1 exempt from the per-address
// limits (every local buyer shares it) and limited per user instead, dev
// token keys and admin token, the demo sale, console logs.
func DevDefaults() (Config, error) {
	c := Default()
	if err := Decode(configs.Dev, &c); err != nil {
		return c, fmt.Errorf("config: built-in configs/dev.yaml: %w", err)
	}
	return c, nil
}

// Load reads path (may be empty) over the defaults and applies SECKILL_*
// environment overrides.
func Load(path string) (Config, error) {
	c := Default()
	if err := LoadFile(path, &c); err != nil {
		return c, err
	}
	return c, nil
}

// LoadDev is Load for `seckill dev`: path (may be empty) is read over the
// dev defaults (DevDefaults) instead of the production ones, so a key a file
// leaves out keeps its dev value, and no file at all runs configs/dev.yaml.
func LoadDev(path string) (Config, error) {
	c, err := DevDefaults()
	if err != nil {
		return c, err
	}
	if err := LoadFile(path, &c); err != nil {
		return c, err
	}
	return c, nil
}

// ReconcileConfig is the reconcile section with what it takes from the
// order section: an ended activity's keys are kept until its last pay
// deadline plus order.redis_retention (0: kept for ever).
func (c *Config) ReconcileConfig() reconcile.Config {
	r := c.Reconcile
	r.KeepAfterEnd = 0
	if c.Order.RedisRetention > 0 {
		r.KeepAfterEnd = c.Order.PayTimeout + c.Order.RedisRetention
	}
	return r
}

// Validate checks every section.
func (c *Config) Validate() error {
	for _, v := range []interface{ Validate() error }{&c.Redis, &c.Engine, &c.Edge, &c.Consumer, &c.Store, &c.Token, &c.OrderSigning, &c.Payment, &c.Reconcile} {
		if err := v.Validate(); err != nil {
			return err
		}
	}
	if c.Admin.Listen == "" {
		return errors.New("admin.listen must not be empty")
	}
	if c.Order.PayTimeout < time.Second {
		return errors.New("order.pay_timeout must be at least 1s")
	}
	if c.Order.RedisRetention < 0 {
		return errors.New("order.redis_retention must not be negative")
	}
	if c.Metrics.SampleInterval < 100*time.Millisecond {
		return errors.New("metrics.sample_interval must be at least 100ms")
	}
	if c.StartTimeout <= 0 {
		return errors.New("start_timeout must be positive")
	}
	if c.GC.Percent < 10 || c.GC.Percent > 1000 {
		return errors.New("gc.percent must be between 10 and 1000")
	}
	if c.GC.MemoryLimitMB < 0 {
		return errors.New("gc.memory_limit_mb must not be negative")
	}
	if c.Dev.Partitions <= 0 {
		return errors.New("dev.partitions must be positive")
	}
	// A WAIT as long as the occupy's own bound would turn every slow
	// acknowledgement into a timeout (the occupancy left to the sweeper)
	// instead of a batch given back at once.
	if c.Redis.WaitReplicas > 0 && c.Redis.WaitTimeout >= c.Engine.OccupyTimeout {
		return errors.New("redis.wait_timeout must be shorter than engine.occupy_timeout")
	}
	// An occupancy younger than this may still have its message in flight.
	if c.Reconcile.OrphanGrace <= c.Engine.OccupyTimeout+c.Engine.Kafka.SendTimeout {
		return errors.New("reconcile.orphan_grace must exceed engine.occupy_timeout + engine.kafka.send_timeout")
	}
	return nil
}
