package consumer

import (
	"strconv"

	"github.com/IBM/sarama"
)

// Headers of a dead-lettered message. The value and key are the original
// bytes, so a message can be replayed once its cause is fixed.
const (
	HeaderReason    = "x-seckill-reason"
	HeaderTopic     = "x-seckill-topic"
	HeaderPartition = "x-seckill-partition"
	HeaderOffset    = "x-seckill-offset"
)

// deadLetter is one message on its way to the dead-letter topic.
type deadLetter struct {
	km     *sarama.ConsumerMessage
	reason string
}

// sendDLQ produces the letters and waits for acks=all.
func (c *Consumer) sendDLQ(letters []deadLetter) error {
	if len(letters) == 0 {
		return nil
	}
	pms := make([]*sarama.ProducerMessage, len(letters))
	for i, l := range letters {
		pm := &sarama.ProducerMessage{
			Topic: c.cfg.DLQTopic,
			Value: sarama.ByteEncoder(l.km.Value),
			Headers: []sarama.RecordHeader{
				{Key: []byte(HeaderReason), Value: []byte(l.reason)},
				{Key: []byte(HeaderTopic), Value: []byte(l.km.Topic)},
				{Key: []byte(HeaderPartition), Value: strconv.AppendInt(nil, int64(l.km.Partition), 10)},
				{Key: []byte(HeaderOffset), Value: strconv.AppendInt(nil, l.km.Offset, 10)},
			},
		}
		if l.km.Key != nil {
			pm.Key = sarama.ByteEncoder(l.km.Key)
		}
		pms[i] = pm
	}
	return c.dlq.SendMessages(pms)
}
