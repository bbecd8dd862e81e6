package devserver

import (
	"testing"

	"github.com/IBM/sarama"

	"seckill/sale"
)

// Every topic a part of seckill dev writes to exists from the start:
// kfake creates none on first use.
func TestKafkaHasEveryTopicFromTheStart(t *testing.T) {
	k := startTestKafka(t, t.TempDir(), 2)
	defer k.Stop()
	c := saramaClient(t, k)
	defer c.Close()
	p, err := sarama.NewSyncProducerFromClient(c)
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	for _, topic := range []string{sale.OrdersTopic, sale.DLQTopic, sale.AttemptsTopic} {
		if _, _, err := p.SendMessage(&sarama.ProducerMessage{Topic: topic, Partition: 1, Value: sarama.StringEncoder("x")}); err != nil {
			t.Errorf("produce to %s: %v", topic, err)
		}
	}
}
