package devserver

import (
	"errors"
	"fmt"
	"math"
	"time"

	"github.com/twmb/franz-go/pkg/kfake"

	"go.uber.org/zap"
)

// The orders topic grows with every ticket, and a broker started again on
// its directory reads the log it keeps, so without trimming a restart
// takes longer the bigger the sale was. A record every consumer group has
// committed past is of no use any more: the consumer has written its order
// (or its failure) to the database and its result to Redis before it
// commits. Trim deletes exactly those records, never one a group still has
// to read.

// DefaultTrimInterval is how often `seckill dev` trims its broker's log.
const DefaultTrimInterval = 5 * time.Second

// ErrUnknownTopic means the broker has no such topic.
var ErrUnknownTopic = errors.New("embedded kafka: unknown topic")

// Trim deletes, in every partition of topic, the records that every one of
// groups has committed past: up to the lowest offset the groups committed
// there. A partition in which one of the groups has committed nothing (a
// group the broker does not know has committed nothing anywhere) is left
// whole, so a record no group has consumed is never deleted. Deleted records
// leave the disk a segment file at a time (KafkaConfig.SegmentBytes). Trim
// returns the new first offset of each partition it trimmed. Safe for
// concurrent use; not after Stop.
func (k *Kafka) Trim(topic string, groups []string) (map[int32]int64, error) {
	if len(groups) == 0 {
		return nil, errors.New("embedded kafka: trim needs at least one consumer group")
	}
	parts := k.Cluster.PartitionInfos(topic)
	if parts == nil {
		return nil, fmt.Errorf("%w %q", ErrUnknownTopic, topic)
	}
	// Committed offsets only move forward, so reading them before the
	// deletion can only delete less than they allow by then.
	// low is the lowest commit per partition; -1 where a group has none.
	low := make(map[int32]int64, len(parts))
	for _, pi := range parts {
		low[pi.Partition] = math.MaxInt64
	}
	for _, g := range groups {
		var commits map[int32]kfake.GroupCommit
		if info := k.Cluster.GroupInfo(g); info != nil {
			commits = info.Commits[topic]
		}
		for _, pi := range parts {
			c, ok := commits[pi.Partition]
			switch {
			case !ok || c.Offset < 0:
				low[pi.Partition] = -1
			case c.Offset < low[pi.Partition]:
				low[pi.Partition] = c.Offset
			}
		}
	}
	trimmed := map[int32]int64{}
	var errs []error
	for _, pi := range parts {
		to := low[pi.Partition]
		// A commit beyond the end of the log (the log lost its unsynced
		// tail in a crash the offsets survived) trims what there is.
		to = min(to, pi.HighWatermark)
		if to <= pi.LogStartOffset {
			continue
		}
		if err := k.Cluster.DeleteRecords(topic, pi.Partition, to); err != nil {
			errs = append(errs, fmt.Errorf("delete %s/%d below %d: %w", topic, pi.Partition, to, err))
			continue
		}
		trimmed[pi.Partition] = to
	}
	return trimmed, errors.Join(errs...)
}

// TrimConsumed trims topic for groups (Trim) every interval (<= 0:
// DefaultTrimInterval) until Stop, which trims once more before closing the
// broker. Failures are logged at warn and tried again next time. Calling
// it again replaces the previous schedule.
func (k *Kafka) TrimConsumed(topic string, groups []string, every time.Duration, log *zap.Logger) {
	if every <= 0 {
		every = DefaultTrimInterval
	}
	if log == nil {
		log = zap.NewNop()
	}
	t := &trimmer{k: k, topic: topic, groups: append([]string(nil), groups...), log: log,
		quit: make(chan struct{}), done: make(chan struct{})}
	k.mu.Lock()
	old := k.trim
	k.trim = t
	k.mu.Unlock()
	if old != nil {
		old.stop()
	}
	log.Info("trimming consumed records from the embedded broker's log",
		zap.String("topic", topic), zap.Strings("groups", groups), zap.Duration("every", every))
	go t.run(every)
}

// trimmer is TrimConsumed's schedule.
type trimmer struct {
	k          *Kafka
	topic      string
	groups     []string
	log        *zap.Logger
	quit, done chan struct{}
}

func (t *trimmer) run(every time.Duration) {
	defer close(t.done)
	tick := time.NewTicker(every)
	defer tick.Stop()
	for {
		select {
		case <-tick.C:
			t.once()
		case <-t.quit:
			t.once()
			return
		}
	}
}

func (t *trimmer) once() {
	trimmed, err := t.k.Trim(t.topic, t.groups)
	if err != nil {
		t.log.Warn("trimming the embedded broker's log", zap.String("topic", t.topic), zap.Error(err))
	}
	if len(trimmed) > 0 {
		t.log.Debug("trimmed consumed records", zap.String("topic", t.topic), zap.Any("firstOffsets", trimmed))
	}
}

// stop ends the schedule after a last trim and waits for it.
func (t *trimmer) stop() {
	close(t.quit)
	<-t.done
}
