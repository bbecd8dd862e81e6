package consumer

import (
	"errors"
	"time"

	"seckill/internal/kafkasec"
	"seckill/sale"
)

// Config is the consumer section.
type Config struct {
	Brokers  []string `yaml:"brokers"`
	Topic    string   `yaml:"topic"`
	DLQTopic string   `yaml:"dlq_topic"`
	Group    string   `yaml:"group"`
	// BatchSize is the most messages written in one transaction. Default 500.
	BatchSize int `yaml:"batch_size"`
	// MaxWait is the longest a partial batch waits for more messages.
	// Default 20ms.
	MaxWait time.Duration `yaml:"max_wait"`
	// Retries is how often a failing batch is retried (with backoff
	// starting at RetryBackoff, doubling) before it is handled message by
	// message. The same bound applies to Redis calls (claim, release,
	// result write) before the batch is left uncommitted for redelivery.
	// Defaults 3 and 100ms.
	Retries      int           `yaml:"retries"`
	RetryBackoff time.Duration `yaml:"retry_backoff"`
	// Timeout bounds one database transaction, one Redis call and one
	// dead-letter send. Default 5s.
	Timeout time.Duration `yaml:"timeout"`
	// DrainTimeout bounds how long Close waits for a batch in progress:
	// past it, a batch still retrying a dependency gives up uncommitted
	// (it is delivered again), so a stop never waits on a batch that
	// cannot complete. Default 10s.
	DrainTimeout time.Duration `yaml:"drain_timeout"`
	// SessionTimeout, HeartbeatInterval and RebalanceTimeout are the
	// consumer group's timings. Defaults 10s, 3s and 30s.
	SessionTimeout    time.Duration `yaml:"session_timeout"`
	HeartbeatInterval time.Duration `yaml:"heartbeat_interval"`
	RebalanceTimeout  time.Duration `yaml:"rebalance_timeout"`
	// RejoinBackoff is the wait before joining the group again after a
	// failed join or a session ended by a failing dependency. Default 2s.
	RejoinBackoff time.Duration `yaml:"rejoin_backoff"`
	// PriceTTL is how long the consumer keeps a SKU's row of the orders
	// database (its price and per-user limit, which orders are held to):
	// a price changed in the database prices the batches processed from
	// PriceTTL after the change on. 0 reads the row for every batch.
	// Default 5s.
	PriceTTL time.Duration `yaml:"price_ttl"`
	// InstanceID makes this process a static member of the group (Kafka's
	// group.instance.id, KIP-345): a consumer restarted with the same id
	// after a crash takes its partitions back at once, instead of waiting
	// until the broker gives up on its dead former self. Each consumer
	// process needs its own stable id (a pod or host name); two live
	// processes with one id fence each other. A static member does not
	// leave the group when it stops, so its partitions wait for it up to
	// SessionTimeout (set it to cover a restart). Letters, digits, '.',
	// '_' and '-', at most 249. Default empty: dynamic membership.
	InstanceID string `yaml:"instance_id"`
	// LagHigh, LagLow and LagInterval are the backlog backpressure the
	// edges apply (DESIGN §11): each edge samples the group's offsets
	// every LagInterval; once the lag needs more than LagHigh to drain at
	// the rate the group drains at when busy (measured over the last ten
	// samples), or has waited longer than LagHigh with nothing committed,
	// on five samples in a row, the edges admit only half the rate it
	// commits and answer the rest
	// 429 BACKLOG with a Retry-After of the drain time left; at most
	// LagLow, they admit everyone again. Defaults 30s, 10s and 1s; LagHigh 0 turns it off.
	LagHigh     time.Duration `yaml:"lag_high"`
	LagLow      time.Duration `yaml:"lag_low"`
	LagInterval time.Duration `yaml:"lag_interval"`
	// Signing holds the keys order messages are verified by: the
	// top-level order_signing section (SECKILL_ORDER_SIGNING_KEYS), the
	// engine's, copied here by the app. At least one key; a message no
	// listed key verifies is dead-lettered untouched.
	Signing sale.SigningConfig `yaml:"-"`
	// Security is consumer.tls (enabled, ca_file, cert_file, key_file,
	// server_name) and consumer.sasl (mechanism SCRAM-SHA-256 or
	// SCRAM-SHA-512, user, password — the password from
	// SECKILL_CONSUMER_SASL_PASSWORD), for the consumer group and the
	// dead-letter producer alike. Default: plaintext, no SASL.
	kafkasec.Security `yaml:",inline"`
}

// DefaultConfig returns the defaults named on each field.
func DefaultConfig() Config {
	return Config{
		Brokers:           []string{"127.0.0.1:9092"},
		Topic:             "seckill.orders",
		DLQTopic:          "seckill.orders.dlq",
		Group:             "seckill-consumer",
		BatchSize:         500,
		MaxWait:           20 * time.Millisecond,
		Retries:           3,
		RetryBackoff:      100 * time.Millisecond,
		Timeout:           5 * time.Second,
		DrainTimeout:      10 * time.Second,
		SessionTimeout:    10 * time.Second,
		HeartbeatInterval: 3 * time.Second,
		RebalanceTimeout:  30 * time.Second,
		RejoinBackoff:     2 * time.Second,
		LagHigh:           30 * time.Second,
		LagLow:            10 * time.Second,
		LagInterval:       time.Second,
		PriceTTL:          5 * time.Second,
	}
}

// Validate names the first bad key.
func (c *Config) Validate() error {
	switch {
	case len(c.Brokers) == 0:
		return errors.New("consumer.brokers must name at least one broker")
	case c.Topic == "" || c.DLQTopic == "":
		return errors.New("consumer.topic and consumer.dlq_topic must not be empty")
	case c.Group == "":
		return errors.New("consumer.group must not be empty")
	case c.BatchSize <= 0:
		return errors.New("consumer.batch_size must be positive")
	case c.MaxWait <= 0:
		return errors.New("consumer.max_wait must be positive")
	case c.Retries < 0:
		return errors.New("consumer.retries must not be negative")
	case c.RetryBackoff <= 0:
		return errors.New("consumer.retry_backoff must be positive")
	case c.Timeout <= 0:
		return errors.New("consumer.timeout must be positive")
	case c.DrainTimeout <= 0:
		return errors.New("consumer.drain_timeout must be positive")
	case c.SessionTimeout <= 0:
		return errors.New("consumer.session_timeout must be positive")
	case c.HeartbeatInterval <= 0 || c.HeartbeatInterval >= c.SessionTimeout:
		return errors.New("consumer.heartbeat_interval must be positive and below consumer.session_timeout")
	case c.RebalanceTimeout <= 0:
		return errors.New("consumer.rebalance_timeout must be positive")
	case c.RejoinBackoff <= 0:
		return errors.New("consumer.rejoin_backoff must be positive")
	case c.LagHigh < 0:
		return errors.New("consumer.lag_high must not be negative (0 turns the backlog backpressure off)")
	case c.LagHigh > 0 && (c.LagLow < 0 || c.LagLow >= c.LagHigh):
		return errors.New("consumer.lag_low must be at least 0 and below consumer.lag_high")
	case c.LagHigh > 0 && c.LagInterval <= 0:
		return errors.New("consumer.lag_interval must be positive")
	case c.PriceTTL < 0:
		return errors.New("consumer.price_ttl must not be negative (0: read for every batch)")
	case !validInstanceID(c.InstanceID):
		return errors.New("consumer.instance_id: letters, digits, '.', '_' and '-' only, at most 249")
	}
	return c.Security.Validate("consumer")
}

// validInstanceID: Kafka's rule for group.instance.id (empty: none).
func validInstanceID(id string) bool {
	if len(id) > 249 || id == "." || id == ".." {
		return false
	}
	for i := 0; i < len(id); i++ {
		c := id[i]
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '.' || c == '_' || c == '-') {
			return false
		}
	}
	return true
}
