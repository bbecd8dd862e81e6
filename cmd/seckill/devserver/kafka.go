package devserver

import (
	"errors"
	"fmt"
	"net"
	"os"
	"strconv"
	"sync"

	"github.com/twmb/franz-go/pkg/kfake"

	"seckill/sale"
)

// DefaultSegmentBytes is the size at which a persisted partition's log
// rolls over to a new segment file. Trimming (Kafka.Trim) removes a segment
// file only once every record in it is deleted, so the segment is the grain
// in which consumed records leave the disk: kfake's own default, 100 MiB
// per partition, would keep a whole sale's log on disk. 1 MiB is a few
// thousand orders.
const DefaultSegmentBytes = 1 << 20

// KafkaConfig shapes the embedded broker.
type KafkaConfig struct {
	// Dir persists the log, the consumer groups' offsets and the producer
	// state there, so a broker started again on it finds its messages;
	// empty: in memory only.
	Dir string
	// Listen is the host:port to serve the Kafka protocol on (and to
	// advertise in metadata). Empty: 127.0.0.1 and Port.
	Listen string
	// Port on 127.0.0.1 when Listen is empty; 0 picks a free one.
	Port int
	// Advertise, when set with Listen, is the host:port metadata names
	// instead of Listen: clients that bootstrap from it keep every
	// connection on it (a fault proxy in front of the broker). Empty:
	// Listen.
	Advertise string
	// Partitions of the orders, dead-letter and attempts topics. Default 4.
	Partitions int32
	// SegmentBytes is the log's segment size; 0: DefaultSegmentBytes.
	SegmentBytes int64
}

// Kafka is the embedded broker.
type Kafka struct {
	Addrs   []string
	Cluster *kfake.Cluster

	mu   sync.Mutex
	trim *trimmer // nil until TrimConsumed
}

// StartKafka runs kfake with the orders and dead-letter topics and queue
// mode's attempts topic (kfake does not create topics on first use, and an
// SKU switched to queue mode at run time needs its line at once).
func StartKafka(cfg KafkaConfig) (*Kafka, error) {
	if cfg.Partitions == 0 {
		cfg.Partitions = 4
	}
	if cfg.SegmentBytes == 0 {
		cfg.SegmentBytes = DefaultSegmentBytes
	}
	if cfg.SegmentBytes < 0 {
		return nil, errors.New("embedded kafka: negative segment size")
	}
	opts := []kfake.Opt{
		kfake.NumBrokers(1),
		kfake.SeedTopics(cfg.Partitions, sale.OrdersTopic, sale.DLQTopic, sale.AttemptsTopic),
		kfake.BrokerConfigs(map[string]string{"log.segment.bytes": strconv.FormatInt(cfg.SegmentBytes, 10)}),
	}
	switch {
	case cfg.Listen != "":
		if _, _, err := net.SplitHostPort(cfg.Listen); err != nil {
			return nil, fmt.Errorf("embedded kafka: listen %q: %w", cfg.Listen, err)
		}
		// kfake asks for 127.0.0.1:port; serve the address given instead
		// (and advertise it, or Advertise, in metadata: kfake names its
		// listener's Addr).
		opts = append(opts, kfake.ListenFn(func(network, _ string) (net.Listener, error) {
			ln, err := net.Listen(network, cfg.Listen)
			if err != nil || cfg.Advertise == "" {
				return ln, err
			}
			return advertised{ln, cfg.Advertise}, nil
		}))
	case cfg.Advertise != "":
		return nil, errors.New("embedded kafka: advertise needs listen")
	case cfg.Port != 0:
		opts = append(opts, kfake.Ports(cfg.Port))
	}
	if cfg.Dir != "" {
		if err := os.MkdirAll(cfg.Dir, 0o755); err != nil {
			return nil, err
		}
		opts = append(opts, kfake.DataDir(cfg.Dir))
	}
	c, err := kfake.NewCluster(opts...)
	if err != nil {
		return nil, fmt.Errorf("embedded kafka: %w", err)
	}
	return &Kafka{Addrs: c.ListenAddrs(), Cluster: c}, nil
}

// advertised is a listener whose Addr is another address: the one kfake
// puts in metadata.
type advertised struct {
	net.Listener
	addr string
}

func (a advertised) Addr() net.Addr { return advertAddr(a.addr) }

type advertAddr string

func (a advertAddr) Network() string { return "tcp" }
func (a advertAddr) String() string  { return string(a) }

// Stop ends the trimming (after one last pass, so a clean stop leaves only
// what no group has consumed) and closes the broker, which writes its
// snapshot: a broker started again on the directory then reads the
// snapshot instead of scanning the whole log.
func (k *Kafka) Stop() {
	k.mu.Lock()
	t := k.trim
	k.trim = nil
	k.mu.Unlock()
	if t != nil {
		t.stop()
	}
	k.Cluster.Close()
}
