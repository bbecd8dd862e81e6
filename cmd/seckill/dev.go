package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"seckill/cmd/seckill/app"
	"seckill/cmd/seckill/config"
	"seckill/cmd/seckill/devserver"
	"seckill/internal/shard"
	"seckill/sale"
)

// runDev is `seckill dev`: the whole system in one process.
func runDev(args []string) (err error) {
	fs, path := newFlags("dev")
	listenAddr := fs.String("listen", "", "public listener (default 127.0.0.1:8080)")
	adminAddr := fs.String("admin-listen", "", "admin listener (default 127.0.0.1:8081)")
	dataDir := fs.String("data-dir", "", "data directory (default ./data)")
	pprofAddr := fs.String("pprof", "", "serve net/http/pprof on this loopback address (off by default)")
	cfg, log, err := parseAndLoad(fs, path, args, config.LoadDev)
	if err != nil {
		return err
	}
	defer log.Sync()
	if err := servePprof(*pprofAddr, log); err != nil {
		return err
	}
	override(&cfg.Edge.Listen, *listenAddr)
	override(&cfg.Admin.Listen, *adminAddr)
	override(&cfg.Dev.DataDir, *dataDir)
	dir, err := filepath.Abs(cfg.Dev.DataDir)
	if err != nil {
		return err
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	if err := cfg.Validate(); err != nil {
		return err
	}

	// The listeners open first: while the embedded servers start and load
	// their files (a large append-only file takes a while), /healthz
	// answers and /readyz says what dev waits for.
	edgeLn, err := listen(cfg.Edge.Listen)
	if err != nil {
		return err
	}
	defer func() {
		if err != nil {
			edgeLn.Close()
		}
	}()
	adminLn, err := listen(cfg.Admin.Listen)
	if err != nil {
		return err
	}
	defer func() {
		if err != nil {
			adminLn.Close()
		}
	}()
	start := startProbe(edgeLn, adminLn)
	defer start.handover()
	start.status.Set("embedded servers")

	redisDef, err := devserver.StartRedis(filepath.Join(dir, "redis"), 0, cfg.Dev.RedisArgs...)
	if err != nil {
		return err
	}
	defer redisDef.Stop()
	redisHot, err := devserver.StartRedis(filepath.Join(dir, "redis-hot"), 0, cfg.Dev.RedisArgs...)
	if err != nil {
		return err
	}
	defer redisHot.Stop()
	kafka, err := devserver.StartKafka(devserver.KafkaConfig{
		Dir: filepath.Join(dir, "kafka"), Port: cfg.Dev.KafkaPort, Partitions: int32(cfg.Dev.Partitions)})
	if err != nil {
		return err
	}
	// Deferred before the system is built, so it runs after the system's
	// shutdown: the consumer has committed what it drained, and Stop's last
	// trim leaves only what it has not.
	defer kafka.Stop()
	// The broker's log keeps only what the consumer group has not
	// committed, so a restart reads it in a time that does not grow with
	// the sale.
	kafka.TrimConsumed(cfg.Consumer.Topic, []string{cfg.Consumer.Group}, devserver.DefaultTrimInterval, log)

	cfg.Redis.Default.Addrs = []string{redisDef.Addr}
	cfg.Redis.Hot = shard.HotShards{{Addrs: []string{redisHot.Addr}}}
	cfg.Engine.Kafka.Brokers = kafka.Addrs
	cfg.Consumer.Brokers = kafka.Addrs
	if cfg.Store.Driver == "sqlite" && !filepath.IsAbs(cfg.Store.DSN) {
		cfg.Store.DSN = filepath.Join(dir, filepath.Base(cfg.Store.DSN))
	}
	if cfg.Admin.Token == "" {
		cfg.Admin.Token = "dev-admin-token"
	}

	roles := app.Roles{Edge: true, Engine: true, Consumer: true}
	up := announce(log, partsLine("dev", cfg, roles, named("public", edgeLn.Addr().String(), "admin", adminLn.Addr().String())))
	ok, err := start.wait(cfg, log, dependencies(cfg, roles))
	if !ok {
		if err == nil {
			edgeLn.Close()
			adminLn.Close()
		}
		return err
	}
	sys, err := app.New(cfg, log, roles)
	if err != nil {
		start.handover()
		return err
	}
	if cfg.Dev.Demo {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		err = sys.Preheat(ctx, DemoActivity(time.Now()))
		cancel()
		if err != nil {
			start.handover()
			sys.Shutdown(context.Background())
			return fmt.Errorf("preload demo activity: %w", err)
		}
	}
	start.handover()
	pub, adm := edgeLn.Addr().String(), adminLn.Addr().String()
	fmt.Printf(`
seckill dev is up (data in %s)
  buyer API   http://%s/api/v1/flash-sale/order        (POST {"skuId":1001,"quantity":1}, header X-User-Id)
  activity    http://%s/api/v1/flash-sale/activities/1
  metrics     http://%s/metrics
  admin API   http://%s/admin/v1/activities/1/stock   (Authorization: Bearer %s)
  redis       %s (default), %s (hot shard); kafka %s

  load it:    wrk -t2 -c256 -d10s -s bench/flash_sale_unique.lua http://%s/api/v1/flash-sale/order
  seed script wrk -t2 -c64 -d5s -s bench/flash_sale.lua http://%s/api/v1/flash-sale/order
  then:       SECKILL_ADMIN_ADDR=http://%s SECKILL_ADMIN_TOKEN=%s ./bin/seckill admin stock 1

Ctrl-C drains in-flight tickets into orders and stops.
`, dir, pub, pub, pub, adm, cfg.Admin.Token, redisDef.Addr, redisHot.Addr, kafka.Addrs[0], pub, pub, adm, cfg.Admin.Token)
	return serveUntilSignal(sys, app.Listeners{Edge: edgeLn, Admin: adminLn}, 30*time.Second, rateReloader(sys, config.LoadDev, *path), up)
}

// DemoActivity is the preloaded sale of `seckill dev`: activity 1, open from
// now for one hour, no token; SKU 1001 (1,000 units, 1 per user, 99.00) and
// SKU 1002 (50,000 units, hot shard).
func DemoActivity(now time.Time) sale.Activity {
	return sale.Activity{
		ID: 1, Start: now.Add(-time.Second).Truncate(time.Second), End: now.Add(time.Hour).Truncate(time.Second),
		State: sale.StateOnline,
		SKUs: []sale.SKU{
			{ID: 1001, Stock: 1000, Price: 9900, LimitPerUser: 1},
			{ID: 1002, Stock: 50000, Price: 9900, LimitPerUser: 1, Hot: true},
		},
	}
}
