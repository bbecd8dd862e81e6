package consumer

import (
	"errors"
	"time"
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
	// message. Defaults 3 and 100ms.
	Retries      int           `yaml:"retries"`
	RetryBackoff time.Duration `yaml:"retry_backoff"`
}

// DefaultConfig returns the defaults named on each field.
func DefaultConfig() Config {
	return Config{
		Brokers:      []string{"127.0.0.1:9092"},
		Topic:        "seckill.orders",
		DLQTopic:     "seckill.orders.dlq",
		Group:        "seckill-consumer",
		BatchSize:    500,
		MaxWait:      20 * time.Millisecond,
		Retries:      3,
		RetryBackoff: 100 * time.Millisecond,
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
	}
	return nil
}
