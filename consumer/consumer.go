// Package consumer turns queue tickets into orders: a Sarama consumer group
// on the orders topic drains messages in batches, claims each ticket in
// Redis, writes the batch to the orders database in one transaction,
// compensates (releases) tickets that got no order, writes every result
// back to Redis and only then commits the offsets. Messages it cannot
// process go to the dead-letter topic with their reason — bounded when too
// big, quarantined in the orders database when the topic refuses them
// (dlq.go) — so no message can stop a partition.
//
// Metrics are listed in metrics.go.
package consumer

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/IBM/sarama"
	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/zap"

	"seckill/sale"
	"seckill/stock"
	"seckill/stock/results"
	"seckill/store"
)

// Consumer runs the consumer group. Run and Close may be called from
// different goroutines.
type Consumer struct {
	cfg   Config
	st    store.Store
	stock *stock.Stock
	res   *results.Store
	log   *zap.Logger
	m     *metrics
	group sarama.ConsumerGroup
	dlq   sarama.SyncProducer
	// dlqMax is the dead-letter producer's Producer.MaxMessageBytes: a
	// letter bigger than that goes bounded (sendDLQ).
	dlqMax int
	sign   *sale.Signer
	// prices is the orders database's catalog as the consumer last read
	// it (price.go).
	prices *prices
	// drain is the context batches run under: not ended by a session's
	// end (a batch in progress completes) but DrainTimeout after Close
	// began, so a stop never waits on a batch that cannot complete.
	drain     context.Context
	drainStop context.CancelFunc

	mu      sync.Mutex
	closed  bool
	stop    chan struct{}
	runs    sync.WaitGroup
	errLoop sync.WaitGroup
}

// New connects the consumer group and the dead-letter producer to the
// brokers; consuming starts with Run.
func New(cfg Config, st store.Store, stock *stock.Stock, res *results.Store, log *zap.Logger, reg prometheus.Registerer) (*Consumer, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if log == nil {
		log = zap.NewNop()
	}
	sign, err := sale.NewSigner(cfg.Signing)
	if err != nil {
		return nil, err
	}
	gc, err := groupConfig(cfg)
	if err != nil {
		return nil, err
	}
	dc, err := dlqConfig(cfg)
	if err != nil {
		return nil, err
	}
	group, err := sarama.NewConsumerGroup(cfg.Brokers, cfg.Group, gc)
	if err != nil {
		return nil, fmt.Errorf("consumer group %s on %v: %w", cfg.Group, cfg.Brokers, err)
	}
	dlq, err := sarama.NewSyncProducer(cfg.Brokers, dc)
	if err != nil {
		group.Close()
		return nil, fmt.Errorf("dead-letter producer on %v: %w", cfg.Brokers, err)
	}
	c := &Consumer{cfg: cfg, st: st, stock: stock, res: res, log: log, m: newMetrics(reg),
		group: group, dlq: dlq, dlqMax: dc.Producer.MaxMessageBytes, sign: sign, stop: make(chan struct{}),
		prices: newPrices(st, cfg.PriceTTL)}
	c.drain, c.drainStop = context.WithCancel(context.Background())
	c.errLoop.Add(1)
	go func() {
		defer c.errLoop.Done()
		for err := range group.Errors() {
			c.log.Warn("consumer group", zap.Error(err))
		}
	}()
	return c, nil
}

// groupConfig: offsets start at the oldest message of a new group and are
// committed only by hand, after a batch's transaction and result writes.
func groupConfig(cfg Config) (*sarama.Config, error) {
	c := sarama.NewConfig()
	c.ClientID = "seckill-consumer"
	c.Consumer.Offsets.Initial = sarama.OffsetOldest
	c.Consumer.Offsets.AutoCommit.Enable = false
	c.Consumer.Return.Errors = true
	c.Consumer.Group.Session.Timeout = cfg.SessionTimeout
	c.Consumer.Group.Heartbeat.Interval = cfg.HeartbeatInterval
	c.Consumer.Group.Rebalance.Timeout = cfg.RebalanceTimeout
	c.Consumer.Group.Rebalance.Retry.Backoff = cfg.RejoinBackoff
	if cfg.InstanceID != "" {
		c.Consumer.Group.InstanceId = cfg.InstanceID // needs Version >= 2.3: the default is 2.8
	}
	c.Consumer.MaxWaitTime = 100 * time.Millisecond
	c.ChannelBufferSize = max(256, cfg.BatchSize)
	c.Net.DialTimeout = 2 * time.Second
	c.Metadata.Retry.Backoff = 100 * time.Millisecond
	if err := cfg.Security.Apply(c); err != nil {
		return nil, fmt.Errorf("consumer: %w", err)
	}
	return c, nil
}

func dlqConfig(cfg Config) (*sarama.Config, error) {
	c := sarama.NewConfig()
	c.ClientID = "seckill-consumer-dlq"
	c.Producer.RequiredAcks = sarama.WaitForAll
	c.Producer.Return.Successes = true
	c.Producer.Retry.Max = 3
	c.Producer.Retry.Backoff = 50 * time.Millisecond
	c.Producer.Timeout = cfg.Timeout
	c.Producer.Partitioner = sarama.NewHashPartitioner
	c.Net.DialTimeout = 2 * time.Second
	c.Metadata.Retry.Backoff = 100 * time.Millisecond
	if err := cfg.Security.Apply(c); err != nil {
		return nil, fmt.Errorf("consumer: %w", err)
	}
	return c, nil
}

// Run consumes until ctx is done or Close is called, joining the group
// again after every rebalance or failed session. It returns nil when
// stopped, ErrClosed after Close.
func (c *Consumer) Run(ctx context.Context) error {
	c.mu.Lock()
	if c.closed {
		c.mu.Unlock()
		return ErrClosed
	}
	c.runs.Add(1)
	c.mu.Unlock()
	defer c.runs.Done()

	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	go func() {
		select {
		case <-c.stop:
			cancel()
		case <-ctx.Done():
		}
	}()
	h := &handler{c: c}
	for ctx.Err() == nil {
		err := c.group.Consume(ctx, []string{c.cfg.Topic}, h)
		if errors.Is(err, sarama.ErrClosedConsumerGroup) || ctx.Err() != nil {
			break
		}
		failed := h.takeErr()
		if err == nil && failed == nil {
			continue // a rebalance ended the session
		}
		c.log.Warn("consumer session ended; joining again", zap.Error(errors.Join(err, failed)),
			zap.Duration("backoff", c.cfg.RejoinBackoff))
		select {
		case <-ctx.Done():
		case <-time.After(c.cfg.RejoinBackoff):
		}
	}
	return nil
}

// Close stops Run, lets a batch in progress complete (its transaction,
// compensations, result writes and offset commit) for at most
// DrainTimeout — a batch still retrying a dependency then gives up
// uncommitted, to be delivered again —, then leaves the group and closes
// the dead-letter producer. The store, stock and results stores stay
// open: they belong to the caller.
func (c *Consumer) Close() error {
	c.mu.Lock()
	if c.closed {
		c.mu.Unlock()
		return nil
	}
	c.closed = true
	close(c.stop)
	c.mu.Unlock()
	bound := time.AfterFunc(c.cfg.DrainTimeout, c.drainStop)
	c.runs.Wait()
	bound.Stop()
	c.drainStop()
	err := c.group.Close()
	c.errLoop.Wait()
	if e := c.dlq.Close(); err == nil {
		err = e
	}
	return err
}

// handler is the sarama.ConsumerGroupHandler: one ConsumeClaim goroutine
// per partition, each collecting and processing its own batches.
type handler struct {
	c   *Consumer
	mu  sync.Mutex
	err error // why a claim ended the session
}

func (h *handler) Setup(sarama.ConsumerGroupSession) error   { return nil }
func (h *handler) Cleanup(sarama.ConsumerGroupSession) error { return nil }

func (h *handler) takeErr() error {
	h.mu.Lock()
	defer h.mu.Unlock()
	err := h.err
	h.err = nil
	return err
}

// ConsumeClaim collects up to BatchSize messages, waiting at most MaxWait
// after the first, and processes them. When the session ends the batch in
// hand is still processed (drain), then it returns.
func (h *handler) ConsumeClaim(sess sarama.ConsumerGroupSession, claim sarama.ConsumerGroupClaim) error {
	c := h.c
	msgs := claim.Messages()
	done := sess.Context().Done()
	batch := make([]*sarama.ConsumerMessage, 0, c.cfg.BatchSize)
	timer := time.NewTimer(c.cfg.MaxWait)
	timer.Stop()
	defer timer.Stop()
	for {
		select {
		case km, ok := <-msgs:
			if !ok {
				return nil
			}
			batch = append(batch, km)
		case <-done:
			return nil
		}
		timer.Reset(c.cfg.MaxWait)
		open, ending := true, false
	collect:
		for len(batch) < c.cfg.BatchSize {
			select {
			case km, ok := <-msgs:
				if !ok {
					open = false
					break collect
				}
				batch = append(batch, km)
			case <-timer.C:
				break collect
			case <-done:
				ending = true
				break collect
			}
		}
		timer.Stop()
		// The batch runs to its end even when the session is ending:
		// stopping halfway would leave claimed tickets without results.
		// Only Close's drain bound ends it early (uncommitted).
		if err := c.process(c.drain, sess, batch); err != nil {
			c.log.Error("batch left uncommitted", zap.String("topic", claim.Topic()),
				zap.Int32("partition", claim.Partition()), zap.Int("size", len(batch)), zap.Error(err))
			h.mu.Lock()
			h.err = err
			h.mu.Unlock()
			return err // ends the session: the batch is delivered again
		}
		batch = batch[:0]
		if !open || ending {
			return nil
		}
	}
}
