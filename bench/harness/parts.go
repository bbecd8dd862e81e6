package main

import (
	"cmp"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"time"

	"go.yaml.in/yaml/v3"

	"seckill/bench/benchkit"
)

// startParts runs the system as separate processes, so that a cost row can
// tell where the CPU goes: two redis-servers (default and hot shard, with
// the persistence seckill dev gives its own), `seckill broker`, `seckill
// edge` with the engine in-process, and `seckill consumer`, all with
// config and the addresses of this run from the environment. The orders
// database is SQLite, as in seckill dev. The bookkeeping jobs (orphan
// sweeper, Redis watcher, unpaid-order closer, reconciler) run in the
// consumer, so the edge's CPU is the request path (and the monitor, which
// every edge runs).
func startParts(out, bin, config string) (*system, error) {
	return startPartsWith(out, bin, config, partsOpts{})
}

// partsOpts change what startPartsWith runs the parts on (-slow: MariaDB
// and the broker behind fault proxies).
type partsOpts struct {
	// mysqlDSN, when set, is the orders database (a MySQL DSN naming its
	// database) instead of the SQLite file.
	mysqlDSN string
	// brokerListen and brokerAdvertise, when set: the broker listens on
	// brokerListen and names brokerAdvertise (a proxy to it) in metadata,
	// which the parts bootstrap from.
	brokerListen, brokerAdvertise string
}

func startPartsWith(out, bin, config string, po partsOpts) (*system, error) {
	s := newSystem(bin, filepath.Join(out, "parts-data"), benchActivity)
	s.mysqlDSN = po.mysqlDSN
	if err := os.MkdirAll(s.dir, 0o755); err != nil {
		return s, err
	}
	partitions, err := configPartitions(config)
	if err != nil {
		return s, err
	}
	redisDef, defAddr, err := benchkit.StartRedis(out, "parts-redis", filepath.Join(s.dir, "redis"))
	if err != nil {
		return s, err
	}
	s.procs = append(s.procs, redisDef)
	redisHot, hotAddr, err := benchkit.StartRedis(out, "parts-redis-hot", filepath.Join(s.dir, "redis-hot"))
	if err != nil {
		return s, err
	}
	s.procs = append(s.procs, redisHot)

	brokerAddr, listen := benchkit.FreeAddr(), []string{}
	if po.brokerListen != "" {
		brokerAddr, listen = po.brokerAdvertise, []string{"--advertise", po.brokerAdvertise}
	}
	brokerListen := cmp.Or(po.brokerListen, brokerAddr)
	broker, err := benchkit.Start(out, "parts-broker", bin, nil, append([]string{"broker", "--listen", brokerListen,
		"--data-dir", filepath.Join(s.dir, "broker"), "--partitions", strconv.Itoa(partitions)}, listen...)...)
	if err != nil {
		return s, err
	}
	s.procs = append(s.procs, broker)
	if err := benchkit.WaitPort(broker, brokerListen, 20*time.Second); err != nil {
		return s, err
	}
	store := []string{"SECKILL_STORE_DSN=" + filepath.Join(s.dir, "seckill.db")}
	if po.mysqlDSN != "" {
		store = []string{"SECKILL_STORE_DRIVER=mysql", "SECKILL_STORE_DSN=" + po.mysqlDSN}
	}

	env := append(store,
		"SECKILL_REDIS_DEFAULT_ADDRS="+defAddr,
		"SECKILL_REDIS_HOT_ADDRS="+hotAddr,
		"SECKILL_ENGINE_KAFKA_BROKERS="+brokerAddr,
		"SECKILL_CONSUMER_BROKERS="+brokerAddr,
		"SECKILL_ADMIN_TOKEN="+adminToken,
		// The parts are production processes: bench.yaml's public dev
		// secrets are refused there, so the harness brings its own.
		"SECKILL_TOKEN_KEYS=bench1:bench-harness-token-key-0123456789abcdef",
		"SECKILL_PAYMENT_PROVIDER_KEY=bench-harness-payment-key-0123456789abcdef",
		"SECKILL_ORDER_SIGNING_KEYS=bench1:bench-harness-order-signing-key-0123456789",
	)
	edge, err := benchkit.Start(out, "parts-edge", bin, append(env, "SECKILL_RECONCILE_JOBS=false"),
		"edge", "--config", config, "--listen", s.edge, "--admin-listen", s.admin)
	if err != nil {
		return s, err
	}
	s.p = edge
	s.procs = append(s.procs, edge)
	if err := benchkit.WaitPort(edge, s.edge, 60*time.Second); err != nil {
		return s, err
	}
	if err := benchkit.WaitPort(edge, s.admin, 10*time.Second); err != nil {
		return s, err
	}
	// The ports open first; the edge serves once its servers answer.
	if err := benchkit.WaitReady(edge, "http://"+s.edge+"/readyz", 60*time.Second); err != nil {
		return s, err
	}
	consumer, err := benchkit.Start(out, "parts-consumer", bin, append(env, "SECKILL_RECONCILE_JOBS=true"), "consumer", "--config", config)
	if err != nil {
		return s, err
	}
	s.procs = append(s.procs, consumer)
	s.watch = []watched{
		{role: roleServer, pid: edge.PID()},
		{role: roleBroker, pid: broker.PID()},
		{role: roleConsumer, pid: consumer.PID()},
		{role: roleRedisDef, pid: redisDef.PID(), redis: defAddr},
		{role: roleRedisHot, pid: redisHot.PID(), redis: hotAddr},
	}
	if err := s.preheat(); err != nil {
		return s, err
	}
	// The sold-out SKU's one ticket becomes an order only through the
	// consumer: once it has, the consumer is in its group and consuming.
	if _, err := s.waitDrained(time.Minute); err != nil {
		return s, fmt.Errorf("the consumer does not turn tickets into orders (see %s): %w", consumer.Log, err)
	}
	return s, nil
}

// configPartitions is dev.partitions of the configuration file: the
// partitions seckill dev gives its embedded broker, so the separate broker
// gets as many.
func configPartitions(path string) (int, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return 0, err
	}
	var c struct {
		Dev struct {
			Partitions int `yaml:"partitions"`
		} `yaml:"dev"`
	}
	if err := yaml.Unmarshal(b, &c); err != nil {
		return 0, fmt.Errorf("%s: %w", path, err)
	}
	if c.Dev.Partitions <= 0 {
		return 4, nil // config.Default's dev.partitions
	}
	return c.Dev.Partitions, nil
}

// runParts is (f): the parts as separate processes under the accept load
// of (a), measured from the start of the wrk run until every ticket is an
// order, then checked like the system.
func (r *report) runParts(out, bin string, o options, std func(string, ...string) benchkit.Load) error {
	logf("(f) starting the parts as processes: seckill broker, edge, consumer --config %s", o.partsConfig())
	sys, err := startParts(out, bin, o.partsConfig())
	if err != nil {
		sys.stop()
		return fmt.Errorf("(f) parts: %w", err)
	}
	defer sys.stop()
	key := skuKey{benchActivity, acceptSKU}
	logf("(f) accept on the parts: wrk -c%d %v on SKU %d", o.conns, o.dur, acceptSKU)
	m := measure(sys.watch)
	if r.parts, err = benchkit.RunWrk(out, "f-parts", std(sys.orderURL(), fmt.Sprint(acceptSKU), "5000000000000")); err != nil {
		return err
	}
	sys.accepted[key] += r.parts.Codes["200"]
	sys.unseen[key] += r.parts.Unanswered()
	logf("(f) done; waiting for the consumer to drain the backlog")
	if _, err := sys.waitDrained(5 * time.Minute); err != nil {
		return fmt.Errorf("(f) parts: %w", err)
	}
	r.partsCost = m.done("(f) accept, parts as processes", "seckill edge (engine in-process), seckill broker, seckill consumer (with the bookkeeping jobs), "+
		"two redis-servers; SQLite", r.parts.Codes["200"])
	r.partsRun = true
	r.partsCheck = sys.check()
	return nil
}
