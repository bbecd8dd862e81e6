package main

import (
	"errors"
	"flag"
	"fmt"
	"net"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"go.uber.org/zap"

	"seckill/cmd/seckill/config"
	"seckill/cmd/seckill/devserver"
	"seckill/internal/obs"
	"seckill/sale"
)

// runBroker is `seckill broker`: the embedded Kafka-protocol broker (kfake)
// as a process of its own, with the orders and dead-letter topics created.
// With --data-dir the log, offsets and groups persist there, so a broker
// stopped and started again finds its messages; without it everything is
// lost on exit. With --trim-groups it deletes, every --trim-interval, the
// orders it holds that every group named has committed, so its log (and
// its restart) stays as short as the consumers' lag. The fault-injection
// suite (e2e/chaos) stops and restarts it under load. It is a test and dev
// tool, not a production Kafka.
func runBroker(args []string) error {
	fs := flag.NewFlagSet("broker", flag.ContinueOnError)
	listenAddr := fs.String("listen", "127.0.0.1:9092", "host:port to serve the Kafka protocol on")
	dataDir := fs.String("data-dir", "", "persist the log here (a restart keeps it); empty: in memory only")
	advertise := fs.String("advertise", "", "host:port to name in metadata instead of --listen (a proxy in front of the broker); empty: --listen")
	partitions := fs.Int("partitions", 4, "partitions of the orders and dead-letter topics")
	trimGroups := fs.String("trim-groups", "", "comma-separated consumer groups: delete the orders every one of them has committed (empty: keep every order)")
	trimEvery := fs.Duration("trim-interval", devserver.DefaultTrimInterval, "how often to delete what the --trim-groups have committed")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *advertise != "" {
		if _, _, err := net.SplitHostPort(*advertise); err != nil {
			return fmt.Errorf("--advertise %q: %w", *advertise, err)
		}
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
	var groups []string
	for _, g := range strings.Split(*trimGroups, ",") {
		if g = strings.TrimSpace(g); g != "" {
			groups = append(groups, g)
		}
	}
	if len(groups) > 0 && *trimEvery <= 0 {
		return errors.New("--trim-interval must be positive")
	}
	k, err := devserver.StartKafka(devserver.KafkaConfig{Dir: *dataDir, Listen: *listenAddr, Advertise: *advertise, Partitions: int32(*partitions)})
	if err != nil {
		return fmt.Errorf("broker on %s: %w", *listenAddr, err)
	}
	if len(groups) > 0 {
		k.TrimConsumed(sale.OrdersTopic, groups, *trimEvery, log)
	}
	up.ready(zap.Strings("listeners", k.Addrs), zap.String("dataDir", *dataDir), zap.Int("partitions", *partitions),
		zap.Strings("topics", []string{sale.OrdersTopic, sale.DLQTopic, sale.AttemptsTopic}), zap.Strings("trimGroups", groups))
	// Scripts and the chaos harness wait for this line.
	fmt.Printf("seckill broker listening on %s (topics %s, %s; %d partitions; data %q; trim %s)\n",
		k.Addrs[0], sale.OrdersTopic, sale.DLQTopic, *partitions, *dataDir, trimNote(groups, *trimEvery))
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, syscall.SIGINT, syscall.SIGTERM)
	<-sig
	signal.Stop(sig)
	// Stop trims a last time and flushes the persisted log before returning.
	k.Stop()
	return nil
}

func trimNote(groups []string, every time.Duration) string {
	if len(groups) == 0 {
		return "off"
	}
	return fmt.Sprintf("what %s committed, every %v", strings.Join(groups, ", "), every)
}
