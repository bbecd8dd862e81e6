package ready

import (
	"context"
	"fmt"
	"time"

	"github.com/IBM/sarama"
)

// Kafka checks that one of brokers answers metadata and that every topic
// exists with a leader for each of its partitions: what the producer and
// the consumer group need to start. It never creates a topic (even on a
// broker that would create one on first use). One check takes at most
// about twice the dial timeout (2s) when no broker answers.
func Kafka(brokers []string, topics ...string) func(context.Context) error {
	return func(ctx context.Context) error {
		cfg := sarama.NewConfig()
		cfg.ClientID = "seckill-start"
		cfg.Net.DialTimeout = 2 * time.Second
		cfg.Net.ReadTimeout = 2 * time.Second
		cfg.Net.WriteTimeout = 2 * time.Second
		cfg.Metadata.Retry.Max = 0
		cfg.Metadata.Full = false
		cfg.Metadata.AllowAutoTopicCreation = false
		if d, ok := ctx.Deadline(); ok {
			if left := time.Until(d); left < cfg.Net.DialTimeout {
				cfg.Net.DialTimeout = max(left, 100*time.Millisecond)
			}
		}
		c, err := sarama.NewClient(brokers, cfg)
		if err != nil {
			return fmt.Errorf("brokers %v: %w", brokers, err)
		}
		defer c.Close()
		if err := c.RefreshMetadata(topics...); err != nil {
			return fmt.Errorf("metadata of %v: %w", topics, err)
		}
		for _, t := range topics {
			all, err := c.Partitions(t)
			if err != nil {
				return fmt.Errorf("topic %s: %w", t, err)
			}
			if len(all) == 0 {
				return fmt.Errorf("topic %s has no partitions", t)
			}
			led, err := c.WritablePartitions(t)
			if err != nil {
				return fmt.Errorf("topic %s: %w", t, err)
			}
			if len(led) < len(all) {
				return fmt.Errorf("topic %s: %d of %d partitions have a leader", t, len(led), len(all))
			}
		}
		return nil
	}
}
