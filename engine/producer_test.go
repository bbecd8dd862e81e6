package engine

import (
	"context"
	"errors"
	"testing"
	"time"

	"go.uber.org/zap/zaptest"

	"seckill/internal/testenv"
)

// TestSendThatGivesUpInFlightSaysSo: a Send that stops waiting after
// Sarama took the message — its timeout passed, or its ctx ended — says
// errInFlight, so the engine does not reuse the message's buffer while
// Sarama may still read it; one answered by the broker does not.
func TestSendThatGivesUpInFlightSaysSo(t *testing.T) {
	k := testenv.StartKafka(t, 1)
	cfg := DefaultConfig().Kafka
	cfg.Brokers = k.Addrs
	cfg.SendTimeout = 300 * time.Millisecond
	p, err := NewProducer(cfg, zaptest.NewLogger(t))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.Close() })
	if err := p.Send(context.Background(), []byte("1"), []byte("acked")); err != nil {
		t.Fatalf("send to a live broker: %v", err)
	}
	k.Cluster.Close()
	start := time.Now()
	err = p.Send(context.Background(), []byte("2"), []byte("timed out"))
	if !errors.Is(err, errSendTimeout) || !errors.Is(err, errInFlight) {
		t.Fatalf("send to a gone broker: %v, want a timeout in flight", err)
	}
	if took := time.Since(start); took < cfg.SendTimeout || took > cfg.SendTimeout+time.Second {
		t.Fatalf("the timeout took %v, want about %v", took, cfg.SendTimeout)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	err = p.Send(ctx, []byte("3"), []byte("cancelled"))
	if !errors.Is(err, context.DeadlineExceeded) || !errors.Is(err, errInFlight) {
		t.Fatalf("send with an ended ctx: %v, want the ctx's error in flight", err)
	}
}
