package devserver

import (
	"testing"

	"seckill/sale"
)

// TestBrokerHasEveryTopicOfTheSale: the orders, dead-letter and attempts
// topics exist with the partitions asked for, before any client writes —
// kfake creates no topic on first use, and queue mode's edges refuse every
// attempt (503 BUSY) on a broker without the attempts topic.
func TestBrokerHasEveryTopicOfTheSale(t *testing.T) {
	k := startTestKafka(t, t.TempDir(), 3)
	defer k.Stop()
	c := saramaClient(t, k)
	defer c.Close()
	for _, topic := range []string{sale.OrdersTopic, sale.DLQTopic, sale.AttemptsTopic} {
		parts, err := c.Partitions(topic)
		if err != nil || len(parts) != 3 {
			t.Errorf("topic %s: partitions %v, %v; want 3", topic, parts, err)
		}
	}
}
