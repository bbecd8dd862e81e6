package testenv

import (
	"testing"

	"github.com/twmb/franz-go/pkg/kfake"
)

// Kafka is an embedded Kafka-protocol broker (kfake) on loopback.
type Kafka struct {
	Addrs   []string
	Cluster *kfake.Cluster
}

// StartKafka starts a one-broker kfake cluster with the orders,
// dead-letter and attempts topics created (kfake does not create topics on first use),
// closed when the test ends.
func StartKafka(t testing.TB, partitions int32) *Kafka {
	t.Helper()
	c, err := kfake.NewCluster(
		kfake.NumBrokers(1),
		kfake.SeedTopics(partitions, OrdersTopic, DLQTopic, AttemptsTopic),
	)
	if err != nil {
		t.Fatalf("kfake: %v", err)
	}
	t.Cleanup(c.Close)
	return &Kafka{Addrs: c.ListenAddrs(), Cluster: c}
}

// The topics as DESIGN §6 names them, written here rather than imported so
// that testenv knows no sale (and a renamed topic fails the tests).
const (
	OrdersTopic = "seckill.orders"
	DLQTopic    = "seckill.orders.dlq"
	// AttemptsTopic is queue mode's waiting line (DESIGN §13).
	AttemptsTopic = "seckill.attempts"
)
