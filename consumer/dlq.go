package consumer

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"strconv"

	"github.com/IBM/sarama"
	"go.uber.org/zap"

	"seckill/sale"
	"seckill/store"
)

// Headers of a dead-lettered message. The value and key are the original
// bytes, so a message can be replayed once its cause is fixed — unless the
// letter is bounded: a message too big to be dead-lettered as it is
// (beyond the dead-letter producer's Producer.MaxMessageBytes once the
// headers are added) keeps its first store.MaxDeadLetterPayload bytes,
// and HeaderSize and HeaderDigest name the whole.
const (
	HeaderReason    = "x-seckill-reason"
	HeaderTopic     = "x-seckill-topic"
	HeaderPartition = "x-seckill-partition"
	HeaderOffset    = "x-seckill-offset"
	HeaderSize      = "x-seckill-size"   // bounded letters: the value's length
	HeaderDigest    = "x-seckill-sha256" // bounded letters: the value's hex SHA-256
)

// maxReason bounds a letter's reason header.
const maxReason = 1 << 10

// deadLetter is one message on its way to the dead-letter topic.
type deadLetter struct {
	km     *sarama.ConsumerMessage
	reason string
	// requestNo is the ticket the message names when it decoded to one
	// in the engine's form — signed or not, so an attribution only: its
	// history records the letter, nothing else of the ticket changes.
	requestNo string
}

// letter is a dead letter for message km that names ticket m (if it
// decoded).
func letter(km *sarama.ConsumerMessage, m *sale.Message, reason string) deadLetter {
	l := deadLetter{km: km, reason: reason}
	if m != nil {
		if _, _, _, ok := sale.ParseRequestNo(m.RequestNo); ok {
			l.requestNo = m.RequestNo
		}
	}
	return l
}

// sendDLQ produces the letters and waits for acks=all. It never fails: a
// letter too big to send as it is goes bounded, and every letter the
// dead-letter topic refuses (a missing topic, an ACL, a broker error after
// the producer's retries, a message the broker finds too large) comes back
// Quarantined, for the orders database to keep in the batch's
// transaction (store.DeadLettered). The result holds every letter that
// names a ticket (its history records it) and every quarantined one.
func (c *Consumer) sendDLQ(letters []deadLetter) []store.DeadLetter {
	if len(letters) == 0 {
		return nil
	}
	pms := make([]*sarama.ProducerMessage, len(letters))
	bounded := 0
	for i, l := range letters {
		pm := &sarama.ProducerMessage{
			Topic: c.cfg.DLQTopic,
			Value: sarama.ByteEncoder(l.km.Value),
			Headers: []sarama.RecordHeader{
				{Key: []byte(HeaderReason), Value: []byte(cutString(l.reason, maxReason))},
				{Key: []byte(HeaderTopic), Value: []byte(l.km.Topic)},
				{Key: []byte(HeaderPartition), Value: strconv.AppendInt(nil, int64(l.km.Partition), 10)},
				{Key: []byte(HeaderOffset), Value: strconv.AppendInt(nil, l.km.Offset, 10)},
			},
			Metadata: i,
		}
		if l.km.Key != nil {
			pm.Key = sarama.ByteEncoder(l.km.Key)
		}
		if pm.ByteSize(2) > c.dlqMax {
			bounded++
			sum := sha256.Sum256(l.km.Value)
			pm.Value = sarama.ByteEncoder(l.km.Value[:min(len(l.km.Value), store.MaxDeadLetterPayload)])
			if l.km.Key != nil {
				pm.Key = sarama.ByteEncoder(l.km.Key[:min(len(l.km.Key), store.MaxDeadLetterKey)])
			}
			pm.Headers = append(pm.Headers,
				sarama.RecordHeader{Key: []byte(HeaderSize), Value: strconv.AppendInt(nil, int64(len(l.km.Value)), 10)},
				sarama.RecordHeader{Key: []byte(HeaderDigest), Value: hex.AppendEncode(nil, sum[:])})
		}
		pms[i] = pm
	}
	refused := make([]bool, len(letters))
	if err := c.dlq.SendMessages(pms); err != nil {
		var pes sarama.ProducerErrors
		if errors.As(err, &pes) {
			for _, pe := range pes {
				if i, ok := pe.Msg.Metadata.(int); ok && i >= 0 && i < len(refused) {
					refused[i] = true
				}
			}
		} else {
			for i := range refused {
				refused[i] = true
			}
		}
		c.log.Error("dead-letter topic refused letters; quarantining them in the orders database",
			zap.String("topic", c.cfg.DLQTopic), zap.Error(err))
	}
	var out []store.DeadLetter
	sent := 0
	for i, l := range letters {
		if !refused[i] {
			sent++
			if l.requestNo == "" {
				continue
			}
		}
		sum := sha256.Sum256(l.km.Value)
		out = append(out, store.DeadLetter{Topic: l.km.Topic, Partition: l.km.Partition, Offset: l.km.Offset,
			Key: l.km.Key, Payload: l.km.Value, Size: int64(len(l.km.Value)), Digest: hex.EncodeToString(sum[:]),
			Reason: l.reason, RequestNo: l.requestNo, Quarantined: refused[i]})
	}
	c.m.letters.WithLabelValues(letterSent).Add(float64(sent))
	c.m.letters.WithLabelValues(letterBounded).Add(float64(bounded))
	c.m.letters.WithLabelValues(letterQuarantined).Add(float64(len(letters) - sent))
	return out
}

// cutString is s cut to at most n bytes.
func cutString(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n]
}
