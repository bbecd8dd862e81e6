package devserver

import (
	"fmt"
	"os"

	"github.com/twmb/franz-go/pkg/kfake"

	"seckill/internal/sale"
)

// Kafka is the embedded broker.
type Kafka struct {
	Addrs   []string
	Cluster *kfake.Cluster
}

// StartKafka runs kfake on 127.0.0.1:port (0 picks a free port) with the
// orders and dead-letter topics (kfake does not create topics on first use),
// persisted in dir when dir is not empty.
func StartKafka(dir string, port int, partitions int32) (*Kafka, error) {
	opts := []kfake.Opt{kfake.NumBrokers(1), kfake.SeedTopics(partitions, sale.OrdersTopic, sale.DLQTopic)}
	if port != 0 {
		opts = append(opts, kfake.Ports(port))
	}
	if dir != "" {
		if err := os.MkdirAll(dir, 0o755); err != nil {
			return nil, err
		}
		opts = append(opts, kfake.DataDir(dir))
	}
	c, err := kfake.NewCluster(opts...)
	if err != nil {
		return nil, fmt.Errorf("embedded kafka: %w", err)
	}
	return &Kafka{Addrs: c.ListenAddrs(), Cluster: c}, nil
}

// Stop closes the broker.
func (k *Kafka) Stop() { k.Cluster.Close() }
