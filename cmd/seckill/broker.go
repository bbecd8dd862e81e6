package main

import (
	"errors"
	"flag"
	"fmt"
	"net"
	"os"
	"os/signal"
	"syscall"

	"github.com/twmb/franz-go/pkg/kfake"
	"go.uber.org/zap"

	"seckill/cmd/seckill/config"
	"seckill/internal/obs"
	"seckill/internal/sale"
)

// runBroker is `seckill broker`: the embedded Kafka-protocol broker (kfake)
// as a process of its own, with the orders and dead-letter topics created.
// With --data-dir the log, offsets and groups persist there, so a broker
// stopped and started again finds its messages; without it everything is
// lost on exit. The fault-injection suite (e2e/chaos) stops and restarts it
// under load. It is a test and dev tool, not a production Kafka.
func runBroker(args []string) error {
	fs := flag.NewFlagSet("broker", flag.ContinueOnError)
	listenAddr := fs.String("listen", "127.0.0.1:9092", "host:port to serve the Kafka protocol on")
	dataDir := fs.String("data-dir", "", "persist the log here (a restart keeps it); empty: in memory only")
	partitions := fs.Int("partitions", 4, "partitions of the orders and dead-letter topics")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *partitions <= 0 || *partitions > 1024 {
		return errors.New("--partitions must be 1..1024")
	}
	if _, _, err := net.SplitHostPort(*listenAddr); err != nil {
		return fmt.Errorf("--listen %q: %w", *listenAddr, err)
	}
	log, err := obs.NewLogger(config.Default().Log)
	if err != nil {
		return err
	}
	defer log.Sync()
	up := announce(log, startLine{role: "broker", listeners: named("kafka", *listenAddr)})
	opts := []kfake.Opt{
		kfake.NumBrokers(1),
		kfake.SeedTopics(int32(*partitions), sale.OrdersTopic, sale.DLQTopic),
		// kfake asks for 127.0.0.1:port; serve the address given instead
		// (and advertise it in metadata).
		kfake.ListenFn(func(network, _ string) (net.Listener, error) { return net.Listen(network, *listenAddr) }),
	}
	if *dataDir != "" {
		if err := os.MkdirAll(*dataDir, 0o755); err != nil {
			return err
		}
		opts = append(opts, kfake.DataDir(*dataDir))
	}
	c, err := kfake.NewCluster(opts...)
	if err != nil {
		return fmt.Errorf("broker on %s: %w", *listenAddr, err)
	}
	up.ready(zap.Strings("listeners", c.ListenAddrs()), zap.String("dataDir", *dataDir), zap.Int("partitions", *partitions),
		zap.Strings("topics", []string{sale.OrdersTopic, sale.DLQTopic}))
	// Scripts and the chaos harness wait for this line.
	fmt.Printf("seckill broker listening on %s (topics %s, %s; %d partitions; data %q)\n",
		c.ListenAddrs()[0], sale.OrdersTopic, sale.DLQTopic, *partitions, *dataDir)
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, syscall.SIGINT, syscall.SIGTERM)
	<-sig
	signal.Stop(sig)
	// Close flushes the persisted log before returning.
	c.Close()
	return nil
}
