// Package lag measures a consumer group's lag on a topic: per partition, the
// newest offset minus the group's committed offset (messages not yet
// committed as orders). Shutdown uses it to drain in-flight tickets; the
// admin API and metrics report it.
package lag

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/IBM/sarama"
)

// Reader reads lag. Safe for concurrent use.
type Reader struct {
	client sarama.Client
	admin  sarama.ClusterAdmin
	group  string
	topic  string
}

// New connects to brokers.
func New(brokers []string, group, topic string) (*Reader, error) {
	cfg := sarama.NewConfig()
	cfg.ClientID = "seckill-lag"
	cfg.Net.DialTimeout = 2 * time.Second
	cfg.Metadata.Retry.Max = 1
	c, err := sarama.NewClient(brokers, cfg)
	if err != nil {
		return nil, fmt.Errorf("lag client: %w", err)
	}
	a, err := sarama.NewClusterAdminFromClient(c)
	if err != nil {
		c.Close()
		return nil, fmt.Errorf("lag admin: %w", err)
	}
	return &Reader{client: c, admin: a, group: group, topic: topic}, nil
}

// Partitions returns the lag of every partition. A partition the group has
// never committed counts from the oldest offset.
func (r *Reader) Partitions(ctx context.Context) (map[int32]int64, error) {
	ps, err := r.offsets(ctx)
	if err != nil {
		return nil, err
	}
	out := make(map[int32]int64, len(ps))
	for p, o := range ps {
		out[p] = o.Lag()
	}
	return out, nil
}

// Offsets are a partition's (or a topic's, summed) newest offset and the
// group's committed one (the oldest offset where it never committed).
type Offsets struct {
	Newest, Committed int64
}

// Lag is Newest − Committed, never below zero.
func (o Offsets) Lag() int64 { return max(o.Newest-o.Committed, 0) }

// Sum returns the offsets summed over the partitions: the lag of the
// whole topic, and a committed count whose growth is the group's drain.
func (r *Reader) Sum(ctx context.Context) (Offsets, error) {
	ps, err := r.offsets(ctx)
	if err != nil {
		return Offsets{}, err
	}
	var sum Offsets
	for _, o := range ps {
		sum.Newest += o.Newest
		sum.Committed += min(o.Committed, o.Newest)
	}
	return sum, nil
}

func (r *Reader) offsets(ctx context.Context) (map[int32]Offsets, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	parts, err := r.client.Partitions(r.topic)
	if err != nil {
		return nil, fmt.Errorf("lag partitions: %w", err)
	}
	committed, err := r.admin.ListConsumerGroupOffsets(r.group, map[string][]int32{r.topic: parts})
	if errors.Is(err, sarama.ErrGroupIDNotFound) {
		// The group has not joined yet (the consumer starts after the
		// monitor): it has committed nothing, so everything is lag.
		committed, err = &sarama.OffsetFetchResponse{}, nil
	}
	if err != nil {
		return nil, fmt.Errorf("lag offsets of %s: %w", r.group, err)
	}
	out := make(map[int32]Offsets, len(parts))
	for _, p := range parts {
		newest, err := r.client.GetOffset(r.topic, p, sarama.OffsetNewest)
		if err != nil {
			return nil, fmt.Errorf("lag newest offset %s/%d: %w", r.topic, p, err)
		}
		done := int64(-1)
		if b := committed.GetBlock(r.topic, p); b != nil && b.Err == sarama.ErrNoError {
			done = b.Offset
		}
		if done < 0 {
			oldest, err := r.client.GetOffset(r.topic, p, sarama.OffsetOldest)
			if err != nil {
				return nil, fmt.Errorf("lag oldest offset %s/%d: %w", r.topic, p, err)
			}
			done = oldest
		}
		out[p] = Offsets{Newest: newest, Committed: done}
	}
	return out, nil
}

// Total returns the summed lag.
func (r *Reader) Total(ctx context.Context) (int64, error) {
	ps, err := r.Partitions(ctx)
	if err != nil {
		return 0, err
	}
	var n int64
	for _, v := range ps {
		n += v
	}
	return n, nil
}

// WaitZero polls until the lag is zero or ctx ends.
func (r *Reader) WaitZero(ctx context.Context, every time.Duration) error {
	for {
		n, err := r.Total(ctx)
		if err == nil && n == 0 {
			return nil
		}
		select {
		case <-ctx.Done():
			if err != nil {
				return fmt.Errorf("drain: %w (last error: %v)", ctx.Err(), err)
			}
			return fmt.Errorf("drain: %w with %d messages left", ctx.Err(), n)
		case <-time.After(every):
		}
	}
}

// Close closes the connections.
func (r *Reader) Close() error { return r.admin.Close() }
