package lag

import (
	"context"
	"testing"

	"github.com/IBM/sarama"

	"seckill/internal/testenv"
)

// The monitor may sample before the consumer group exists (it starts
// first): every message is then lag, not an error, so the lag metric is on
// /metrics from the start. Then it follows the committed offsets.
func TestLagOfAGroupThatNeverJoined(t *testing.T) {
	k, r, prod := lagRig(t, "not-joined-yet")
	ctx := context.Background()
	if n, err := r.Total(ctx); err != nil || n != 0 {
		t.Fatalf("empty topic, no group: %d, %v; want 0", n, err)
	}
	for range 3 {
		if _, _, err := prod.SendMessage(&sarama.ProducerMessage{Topic: testenv.OrdersTopic, Value: sarama.StringEncoder("m")}); err != nil {
			t.Fatal(err)
		}
	}
	if ps, err := r.Partitions(ctx); err != nil || ps[0] != 3 {
		t.Fatalf("3 messages, no group: %v, %v; want partition 0 at 3", ps, err)
	}
	commitUpTo(t, k.Addrs, "not-joined-yet", 2)
	if n, err := r.Total(ctx); err != nil || n != 1 {
		t.Fatalf("2 of 3 committed: %d, %v; want 1", n, err)
	}
}

// lagRig is a broker with the orders topic, a Reader for group on it and a
// producer, all closed when the test ends.
func lagRig(t *testing.T, group string) (*testenv.Kafka, *Reader, sarama.SyncProducer) {
	t.Helper()
	k := testenv.StartKafka(t, 1)
	r, err := New(k.Addrs, group, testenv.OrdersTopic)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { r.Close() })
	cfg := sarama.NewConfig()
	cfg.Producer.Return.Successes = true
	prod, err := sarama.NewSyncProducer(k.Addrs, cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { prod.Close() })
	return k, r, prod
}

// Sum is what the edge's backlog guard samples: the topic's newest offsets
// and the group's committed ones, summed.
func TestSumFollowsNewestAndCommitted(t *testing.T) {
	k, r, prod := lagRig(t, "summed")
	ctx := context.Background()
	for range 5 {
		if _, _, err := prod.SendMessage(&sarama.ProducerMessage{Topic: testenv.OrdersTopic, Value: sarama.StringEncoder("m")}); err != nil {
			t.Fatal(err)
		}
	}
	if o, err := r.Sum(ctx); err != nil || o != (Offsets{Newest: 5, Committed: 0}) {
		t.Fatalf("5 messages, nothing committed: %+v, %v", o, err)
	}
	commitUpTo(t, k.Addrs, "summed", 4)
	if o, err := r.Sum(ctx); err != nil || o != (Offsets{Newest: 5, Committed: 4}) || o.Lag() != 1 {
		t.Fatalf("4 of 5 committed: %+v, %v", o, err)
	}
}
