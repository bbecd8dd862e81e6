package lag

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/IBM/sarama"
)

// ConsumedThrough returns a time T such that every message appended to the
// topic before T has been consumed and committed by the group — the proof
// the orphan sweeper needs that no message for an old ticket is still on
// its way to the consumer. Per partition: the time the offsets were read
// when the group has committed everything (lag 0), else the timestamp of
// the first message it has not committed (the producer's clock). T is the
// earliest over the partitions. A group that never committed on a
// partition that has messages proves nothing (zero time).
//
// A broker may delete what every group has committed (seckill dev's
// embedded broker does, every few seconds): a commit read here can be
// overtaken by a newer one and the message at it deleted before it is
// read. The offsets are then read again, up to three times.
func (r *Reader) ConsumedThrough(ctx context.Context) (time.Time, error) {
	for attempt := 1; ; attempt++ {
		t, err := r.consumedThrough(ctx)
		if !errors.Is(err, errDeleted) || attempt == 3 {
			return t, err
		}
	}
}

// errDeleted means the message at a committed offset was deleted before
// it could be read: the group has committed past it since.
var errDeleted = errors.New("the message at the committed offset was deleted meanwhile")

func (r *Reader) consumedThrough(ctx context.Context) (time.Time, error) {
	// Read the clock before the offsets: a message appended before t0 is
	// below the newest offset read afterwards.
	t0 := time.Now()
	parts, err := r.client.Partitions(r.topic)
	if err != nil {
		return time.Time{}, fmt.Errorf("consumed-through partitions: %w", err)
	}
	committed, err := r.admin.ListConsumerGroupOffsets(r.group, map[string][]int32{r.topic: parts})
	if errors.Is(err, sarama.ErrGroupIDNotFound) {
		committed, err = &sarama.OffsetFetchResponse{}, nil // a group that never committed
	}
	if err != nil {
		return time.Time{}, fmt.Errorf("consumed-through offsets of %s: %w", r.group, err)
	}
	through := t0
	var cons sarama.Consumer
	defer func() {
		if cons != nil {
			cons.Close()
		}
	}()
	for _, p := range parts {
		newest, err := r.client.GetOffset(r.topic, p, sarama.OffsetNewest)
		if err != nil {
			return time.Time{}, fmt.Errorf("consumed-through newest offset %s/%d: %w", r.topic, p, err)
		}
		done := int64(-1)
		if b := committed.GetBlock(r.topic, p); b != nil && b.Err == sarama.ErrNoError {
			done = b.Offset
		}
		if done >= newest {
			continue
		}
		if done < 0 {
			oldest, err := r.client.GetOffset(r.topic, p, sarama.OffsetOldest)
			if err != nil {
				return time.Time{}, fmt.Errorf("consumed-through oldest offset %s/%d: %w", r.topic, p, err)
			}
			if oldest >= newest {
				continue // an empty partition
			}
			return time.Time{}, nil
		}
		if cons == nil {
			if cons, err = sarama.NewConsumerFromClient(r.client); err != nil {
				return time.Time{}, fmt.Errorf("consumed-through: %w", err)
			}
		}
		ts, err := timestampAt(ctx, cons, r.topic, p, done)
		if err != nil {
			return time.Time{}, err
		}
		if ts.Before(through) {
			through = ts
		}
	}
	return through, nil
}

// timestampAt reads the timestamp of the message at offset.
func timestampAt(ctx context.Context, cons sarama.Consumer, topic string, p int32, offset int64) (time.Time, error) {
	pc, err := cons.ConsumePartition(topic, p, offset)
	if errors.Is(err, sarama.ErrOffsetOutOfRange) {
		err = errDeleted // below the partition's first offset by now
	}
	if err != nil {
		return time.Time{}, fmt.Errorf("consumed-through read %s/%d@%d: %w", topic, p, offset, err)
	}
	defer pc.Close()
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	select {
	case m, ok := <-pc.Messages():
		if !ok {
			// The partition consumer gave up: an offset deleted between
			// ConsumePartition's check and the fetch ends it this way
			// (sarama reports the error only when Return.Errors is set).
			return time.Time{}, fmt.Errorf("consumed-through read %s/%d@%d: %w", topic, p, offset, errDeleted)
		}
		return m.Timestamp, nil
	case err := <-pc.Errors():
		return time.Time{}, fmt.Errorf("consumed-through read %s/%d@%d: %w", topic, p, offset, err)
	case <-ctx.Done():
		return time.Time{}, fmt.Errorf("consumed-through read %s/%d@%d: %w", topic, p, offset, ctx.Err())
	}
}
