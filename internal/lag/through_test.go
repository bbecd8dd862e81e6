package lag

import (
	"context"
	"testing"
	"time"

	"github.com/IBM/sarama"

	"github.com/twmb/franz-go/pkg/kmsg"
	"seckill/internal/testenv"
)

func TestConsumedThroughFollowsTheCommittedOffsets(t *testing.T) {
	k, r, prod := lagRig(t, "g")
	ctx := context.Background()
	if at, err := r.ConsumedThrough(ctx); err != nil || time.Since(at) > time.Minute {
		t.Fatalf("empty topic: %v, %v; want about now", at, err)
	}
	stamps := []time.Time{time.Now().Add(-3 * time.Minute), time.Now().Add(-2 * time.Minute), time.Now().Add(-time.Minute)}
	for _, ts := range stamps {
		if _, _, err := prod.SendMessage(&sarama.ProducerMessage{Topic: testenv.OrdersTopic, Value: sarama.StringEncoder("m"), Timestamp: ts}); err != nil {
			t.Fatal(err)
		}
	}
	if at, err := r.ConsumedThrough(ctx); err != nil || !at.IsZero() {
		t.Fatalf("nothing committed: %v, %v; want the zero time", at, err)
	}
	commit := func(upto int64) { commitUpTo(t, k.Addrs, "g", upto) }
	commit(1)
	if at, err := r.ConsumedThrough(ctx); err != nil || at.UnixMilli() != stamps[1].UnixMilli() {
		t.Fatalf("one consumed: %v, %v; want the second message's time %v", at, err, stamps[1])
	}
	commit(3)
	if at, err := r.ConsumedThrough(ctx); err != nil || time.Since(at) > time.Minute {
		t.Fatalf("all consumed: %v, %v; want about now", at, err)
	}
}

// TestConsumedThroughRereadsWhenTheCommitWasOvertaken: the offsets read
// name a commit that a newer one has overtaken, and the broker has deleted
// the messages below the newer one (seckill dev's embedded broker trims
// what its group has committed) before the message at the old commit is
// read. ConsumedThrough reads the offsets again and answers from the new
// commit — it neither fails nor reads a message that is gone.
func TestConsumedThroughRereadsWhenTheCommitWasOvertaken(t *testing.T) {
	k, r, prod := lagRig(t, "g")
	for range 3 {
		if _, _, err := prod.SendMessage(&sarama.ProducerMessage{Topic: testenv.OrdersTopic, Value: sarama.StringEncoder("m")}); err != nil {
			t.Fatal(err)
		}
	}
	commitUpTo(t, k.Addrs, "g", 3)
	if err := k.Cluster.DeleteRecords(testenv.OrdersTopic, 0, 3); err != nil {
		t.Fatal(err)
	}
	// The group's offsets as they were a moment ago: 1, once.
	stale := 0
	k.Cluster.ControlKey(int16(kmsg.OffsetFetch), func(req kmsg.Request) (kmsg.Response, error, bool) {
		stale++
		of := req.(*kmsg.OffsetFetchRequest)
		resp := of.ResponseKind().(*kmsg.OffsetFetchResponse)
		resp.Version = of.Version
		p := kmsg.NewOffsetFetchResponseTopicPartition()
		p.Partition, p.Offset = 0, 1
		rt := kmsg.NewOffsetFetchResponseTopic()
		rt.Topic, rt.Partitions = testenv.OrdersTopic, []kmsg.OffsetFetchResponseTopicPartition{p}
		resp.Topics = []kmsg.OffsetFetchResponseTopic{rt}
		if of.Version >= 8 {
			gp := kmsg.NewOffsetFetchResponseGroupTopicPartition()
			gp.Partition, gp.Offset = 0, 1
			gt := kmsg.NewOffsetFetchResponseGroupTopic()
			gt.Topic, gt.Partitions = testenv.OrdersTopic, []kmsg.OffsetFetchResponseGroupTopicPartition{gp}
			g := kmsg.NewOffsetFetchResponseGroup()
			g.Group, g.Topics = "g", []kmsg.OffsetFetchResponseGroupTopic{gt}
			resp.Groups = []kmsg.OffsetFetchResponseGroup{g}
		}
		return resp, nil, true
	})
	at, err := r.ConsumedThrough(context.Background())
	if err != nil || time.Since(at) > time.Minute {
		t.Fatalf("ConsumedThrough: %v, %v; want about now (everything is committed)", at, err)
	}
	if stale != 1 {
		t.Fatalf("the stale offsets were answered %d times, want 1: the test did not test the overtaken commit", stale)
	}
}

// commitUpTo joins group, consumes the orders topic's partition 0 and
// commits the offsets below upto.
func commitUpTo(t *testing.T, addrs []string, group string, upto int64) {
	t.Helper()
	cfg := sarama.NewConfig()
	cfg.Consumer.Offsets.Initial = sarama.OffsetOldest
	cfg.Consumer.Offsets.AutoCommit.Enable = false
	cfg.Consumer.Group.Session.Timeout = 6 * time.Second
	cfg.Consumer.Group.Heartbeat.Interval = time.Second
	g, err := sarama.NewConsumerGroup(addrs, group, cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer g.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	h := &marker{upto: upto, done: cancel}
	if err := g.Consume(ctx, []string{testenv.OrdersTopic}, h); err != nil && ctx.Err() == nil {
		t.Fatal(err)
	}
	if !h.reached {
		t.Fatalf("did not reach offset %d", upto)
	}
}

type marker struct {
	upto    int64
	done    func()
	reached bool
}

func (m *marker) Setup(sarama.ConsumerGroupSession) error   { return nil }
func (m *marker) Cleanup(sarama.ConsumerGroupSession) error { return nil }
func (m *marker) ConsumeClaim(sess sarama.ConsumerGroupSession, c sarama.ConsumerGroupClaim) error {
	if c.InitialOffset() >= m.upto {
		m.reached = true
		m.done()
		return nil
	}
	for km := range c.Messages() {
		sess.MarkMessage(km, "")
		if km.Offset+1 >= m.upto {
			sess.Commit()
			m.reached = true
			m.done()
			return nil
		}
	}
	return nil
}
