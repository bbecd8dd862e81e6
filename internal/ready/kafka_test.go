package ready

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/IBM/sarama"
	"github.com/twmb/franz-go/pkg/kfake"

	"seckill/internal/testenv"
)

// TestKafkaWaitsForBrokerAndTopics: no broker on the port yet, then a
// broker without the topics, then the topics: the check answers "not
// ready" with the reason until the last step, and a Waiter started before
// the broker returns once it is all there.
func TestKafkaWaitsForBrokerAndTopics(t *testing.T) {
	port := testenv.FreePort(t)
	addr := "127.0.0.1:" + itoa(port)
	check := Kafka([]string{addr}, "orders", "orders.dlq")
	ctx := context.Background()
	if err := check(ctx); err == nil {
		t.Fatal("ready without a broker")
	}

	done := make(chan error, 1)
	go func() {
		done <- Waiter{Timeout: 30 * time.Second, MaxPause: 100 * time.Millisecond}.Wait(ctx, Dependency{Name: "kafka", Check: check})
	}()
	time.Sleep(300 * time.Millisecond)
	c, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.Ports(port))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	time.Sleep(300 * time.Millisecond)
	err = check(ctx)
	if err == nil || !strings.Contains(err.Error(), "orders") {
		t.Fatalf("a broker without the topics: %v, want the missing topic named", err)
	}
	select {
	case err := <-done:
		t.Fatalf("the wait ended before the topics existed: %v", err)
	default:
	}

	admin, err := sarama.NewClusterAdmin([]string{addr}, sarama.NewConfig())
	if err != nil {
		t.Fatal(err)
	}
	defer admin.Close()
	if err := admin.CreateTopic("orders", &sarama.TopicDetail{NumPartitions: 4, ReplicationFactor: 1}, false); err != nil {
		t.Fatal(err)
	}
	time.Sleep(300 * time.Millisecond)
	if err := check(ctx); err == nil || !strings.Contains(err.Error(), "orders.dlq") {
		t.Fatalf("one topic of two: %v, want orders.dlq named", err)
	}
	if err := admin.CreateTopic("orders.dlq", &sarama.TopicDetail{NumPartitions: 1, ReplicationFactor: 1}, false); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("Wait: %v", err)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("the wait did not end once the topics existed")
	}
	if err := check(ctx); err != nil {
		t.Fatalf("check once ready: %v", err)
	}
}
