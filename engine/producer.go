package engine

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/IBM/sarama"
	"go.uber.org/zap"

	"seckill/internal/timeouts"
)

// Producer sends order messages and waits for each one's ack. It wraps a
// Sarama AsyncProducer, so concurrent sends share batches; each Send blocks
// only its caller. Safe for concurrent use.
type Producer struct {
	ap      sarama.AsyncProducer
	topic   string
	timeout *timeouts.Shared // engine.kafka.send_timeout, one timer per tick for every send
	log     *zap.Logger
	wg      sync.WaitGroup
}

// ack carries one message's outcome from the dispatcher to its sender, and
// the message itself, allocated together. It is never reused: Sarama may
// still read a message after handing it back (a partition producer whose
// broker died re-dispatches what it held), so a pooled message would be
// written under it.
type ack struct {
	ch       chan error
	msg      sarama.ProducerMessage
	key, val sarama.ByteEncoder // behind msg.Key and msg.Value (as pointers: no boxing)
	part     int32              // where the broker put it, set before a nil on ch
	off      int64
}

// SaramaConfig builds the producer configuration: acks=all with the
// idempotent producer (one in-flight request per broker keeps order and
// makes broker-side retries safe), batches shaped by FlushFrequency and
// FlushMessages, and secured by k's TLS and SASL settings.
func SaramaConfig(k KafkaConfig, clientID string) (*sarama.Config, error) {
	c := sarama.NewConfig()
	c.ClientID = clientID
	c.Producer.Return.Successes = true
	c.Producer.Return.Errors = true
	c.Producer.Partitioner = sarama.NewHashPartitioner
	c.Producer.Retry.Max = max(k.RetryMax, 1)
	c.Producer.Retry.Backoff = 50 * time.Millisecond
	c.Producer.Timeout = k.SendTimeout
	c.Producer.Flush.Frequency = k.FlushFrequency
	c.Producer.Flush.Messages = k.FlushMessages
	c.Producer.Flush.MaxMessages = 0
	if k.Acks == "leader" {
		c.Producer.RequiredAcks = sarama.WaitForLocal
	} else {
		c.Producer.RequiredAcks = sarama.WaitForAll
		c.Producer.Idempotent = true
		c.Net.MaxOpenRequests = 1
	}
	c.Net.DialTimeout = 2 * time.Second
	c.Net.ReadTimeout = k.SendTimeout + time.Second
	c.Net.WriteTimeout = k.SendTimeout
	c.Metadata.Retry.Max = 2
	c.Metadata.Retry.Backoff = 100 * time.Millisecond
	if err := k.Security.Apply(c); err != nil {
		return nil, fmt.Errorf("engine.kafka: %w", err)
	}
	return c, nil
}

// NewProducer connects to the brokers.
func NewProducer(k KafkaConfig, log *zap.Logger) (*Producer, error) {
	sc, err := SaramaConfig(k, "seckill-engine")
	if err != nil {
		return nil, err
	}
	ap, err := sarama.NewAsyncProducer(k.Brokers, sc)
	if err != nil {
		return nil, fmt.Errorf("kafka producer %v: %w", k.Brokers, err)
	}
	p := &Producer{ap: ap, topic: k.Topic, timeout: timeouts.New(k.SendTimeout), log: log}
	p.wg.Add(2)
	go func() {
		defer p.wg.Done()
		for m := range ap.Successes() {
			a := m.Metadata.(*ack)
			a.part, a.off = m.Partition, m.Offset
			a.ch <- nil
		}
	}()
	go func() {
		defer p.wg.Done()
		for e := range ap.Errors() {
			e.Msg.Metadata.(*ack).ch <- e.Err
		}
	}()
	return p, nil
}

// errSendTimeout is returned when the ack does not come within the timeout.
var errSendTimeout = errors.New("kafka ack timed out")

// errInFlight marks a Send that gave up (timeout or ctx) after Sarama took
// the message: Sarama may still read its key and value, so their buffers
// must not be reused.
var errInFlight = errors.New("message still in flight")

// Send produces value under key and waits for the broker's ack, at most the
// configured send timeout (and up to 1/64 of it more: the sends of one
// tick share one timer) or ctx. An error means the message may not be
// durable; it may still arrive later, which the consumer's claim step makes
// harmless once the caller has released the ticket. An error that is
// errInFlight leaves key and value with Sarama: the caller must not reuse
// them.
func (p *Producer) Send(ctx context.Context, key, value []byte) error {
	_, _, err := p.SendAt(ctx, key, value)
	return err
}

// SendAt is Send that also tells where the broker put the message: its
// partition and offset.
func (p *Producer) SendAt(ctx context.Context, key, value []byte) (int32, int64, error) {
	a := &ack{ch: make(chan error, 1), key: key, val: value}
	a.msg = sarama.ProducerMessage{Topic: p.topic, Key: &a.key, Value: &a.val, Metadata: a}
	expired := p.timeout.After()
	select {
	case p.ap.Input() <- &a.msg:
	case <-expired:
		return 0, 0, errSendTimeout
	case <-ctx.Done():
		return 0, 0, ctx.Err()
	}
	select {
	case err := <-a.ch:
		if err != nil {
			// Returned in error, the message may still be read by a
			// partition producer that re-dispatches it: its buffers
			// stay with it.
			return 0, 0, fmt.Errorf("%w (%w)", err, errInFlight)
		}
		return a.part, a.off, nil
	case <-expired:
		// a stays with the in-flight message; the dispatcher's late
		// answer lands in its buffered channel and is collected by GC.
		return 0, 0, fmt.Errorf("%w (%w)", errSendTimeout, errInFlight)
	case <-ctx.Done():
		return 0, 0, fmt.Errorf("%w (%w)", ctx.Err(), errInFlight)
	}
}

// Close flushes buffered messages, waits for their acks and closes.
func (p *Producer) Close() error {
	p.ap.AsyncClose()
	p.wg.Wait()
	return nil
}
