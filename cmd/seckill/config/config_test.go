package config

import (
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func TestEnvOverridesEveryKindOfKey(t *testing.T) {
	c := Default()
	env := map[string]string{
		"SECKILL_EDGE_LISTEN":         "0.0.0.0:9000",
		"SECKILL_ADMIN_TOKEN":         "s3cret",
		"SECKILL_ORDER_PAY_TIMEOUT":   "90s",
		"SECKILL_REDIS_DEFAULT_ADDRS": "a:1, b:2",
		"SECKILL_ENGINE_KAFKA_ACKS":   "leader",
		"SECKILL_CONSUMER_BATCH_SIZE": "64",
		"SECKILL_DEV_DEMO":            "false",
		"SECKILL_START_TIMEOUT":       "30s",
	}
	if err := ApplyEnv(&c, func(k string) (string, bool) { v, ok := env[k]; return v, ok }); err != nil {
		t.Fatal(err)
	}
	if c.Edge.Listen != "0.0.0.0:9000" || c.Admin.Token != "s3cret" || c.Order.PayTimeout != 90*time.Second ||
		len(c.Redis.Default.Addrs) != 2 || c.Redis.Default.Addrs[1] != "b:2" || c.Engine.Kafka.Acks != "leader" ||
		c.Consumer.BatchSize != 64 || c.Dev.Demo || c.StartTimeout != 30*time.Second {
		t.Fatalf("overrides not applied: %+v", c)
	}
}

// redis.hot is one shard or a list, so its addresses come from one
// variable: shards separated by ';', a shard's addresses by ','.
func TestHotShardsFromTheEnvironment(t *testing.T) {
	c := Default()
	env := map[string]string{"SECKILL_REDIS_HOT_ADDRS": "h0:6379;h1:6379", "SECKILL_REDIS_HOT_PASSWORD": "pw"}
	if err := ApplyEnv(&c, func(k string) (string, bool) { v, ok := env[k]; return v, ok }); err != nil {
		t.Fatal(err)
	}
	h := c.Redis.Hot.Shards()
	if len(h) != 2 || h[0].Addrs[0] != "h0:6379" || h[1].Addrs[0] != "h1:6379" || h[1].Password != "pw" {
		t.Fatalf("hot shards %+v", h)
	}
	names := strings.Join(EnvNames(&c), " ")
	for _, n := range []string{"SECKILL_REDIS_HOT_ADDRS", "SECKILL_REDIS_HOT_PASSWORD", "SECKILL_REDIS_HOT_DB"} {
		if !strings.Contains(names, n) {
			t.Errorf("EnvNames lacks %s", n)
		}
	}
}

func TestBadEnvValueNamesTheVariable(t *testing.T) {
	c := Default()
	err := ApplyEnv(&c, func(k string) (string, bool) { return "soon", k == "SECKILL_ORDER_PAY_TIMEOUT" })
	if err == nil || !contains(err.Error(), "SECKILL_ORDER_PAY_TIMEOUT") {
		t.Fatalf("error %v should name the variable", err)
	}
}

// Production signing keys come from the environment like every other
// secret: SECKILL_TOKEN_KEYS=id:secret,id:secret (newest first). A bad
// value names the variable but never shows the secret.
func TestTokenKeysFromTheEnvironment(t *testing.T) {
	c := Default()
	env := map[string]string{"SECKILL_TOKEN_KEYS": "k2:new-secret-0123456789abcdef, k1:old:secret-with-a-colon"}
	if err := ApplyEnv(&c, func(k string) (string, bool) { v, ok := env[k]; return v, ok }); err != nil {
		t.Fatal(err)
	}
	k := c.Token.Keys
	if len(k) != 2 || k[0].ID != "k2" || k[0].Secret != "new-secret-0123456789abcdef" || k[1].ID != "k1" || k[1].Secret != "old:secret-with-a-colon" {
		t.Fatalf("keys %+v", k)
	}
	for _, bad := range []string{"no-colon-secret-here", ":secret-without-id", "k3:"} {
		c := Default()
		err := ApplyEnv(&c, func(k string) (string, bool) { return bad, k == "SECKILL_TOKEN_KEYS" })
		if err == nil || !contains(err.Error(), "SECKILL_TOKEN_KEYS") || contains(err.Error(), "secret-") || contains(err.Error(), bad) {
			t.Fatalf("%q: error %v, want one naming the variable without its value", bad, err)
		}
	}
}

func TestShippedConfigsLoadAndValidate(t *testing.T) {
	files, _ := filepath.Glob("../../../configs/*.yaml")
	if len(files) < 3 {
		t.Fatalf("want dev.yaml, bench.yaml and prod.yaml in configs/, found %v", files)
	}
	// prod.yaml's gateway keys come from the environment only: without
	// them an edge must not start (it would believe nobody); the engine and
	// the consumer, which run no edge, need none.
	c, err := Load("../../../configs/prod.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Validate(); err != nil {
		t.Fatalf("prod.yaml's shape without gateway keys: %v", err)
	}
	if err := c.Edge.CheckIdentity(); err == nil || !contains(err.Error(), "edge.identity_keys") {
		t.Fatalf("prod.yaml's edge without gateway keys: %v, want an error naming edge.identity_keys", err)
	}
	t.Setenv("SECKILL_EDGE_IDENTITY_KEYS", "g1:"+strings.Repeat("k", 32))
	for _, f := range files {
		t.Run(filepath.Base(f), func(t *testing.T) {
			c, err := Load(f)
			if err != nil {
				t.Fatal(err)
			}
			if err := c.Validate(); err != nil {
				t.Fatal(err)
			}
		})
	}
}

func TestUnknownKeysAreRefused(t *testing.T) {
	p := filepath.Join(t.TempDir(), "c.yaml")
	os.WriteFile(p, []byte("edge:\n  lisen: x\n"), 0o644)
	if _, err := Load(p); err == nil {
		t.Fatal("a misspelt key must be an error")
	}
}

func contains(s, sub string) bool {
	for i := 0; i+len(sub) <= len(s); i++ {
		if s[i:i+len(sub)] == sub {
			return true
		}
	}
	return false
}

// TestLoopbackCrowdsAreLimitedPerUserOutsideProduction holds DESIGN §4:
// every load test comes from 127.0.0.1, so dev and bench must not limit
// that address as one client (nor cap its connections tightly), while
// production's defaults stay strict.
func TestLoopbackCrowdsAreLimitedPerUserOutsideProduction(t *testing.T) {
	loopback := netip.MustParseAddr("127.0.0.1")
	exempt := func(c Config) bool {
		for _, s := range c.Edge.Rate.IPExempt {
			if p, err := netip.ParsePrefix(s); err == nil && p.Contains(loopback) {
				return true
			}
		}
		return false
	}
	dev, err := DevDefaults()
	if err != nil {
		t.Fatal(err)
	}
	for f, c := range map[string]Config{"dev defaults (seckill dev without --config)": dev,
		"dev.yaml": mustLoad(t, "../../../configs/dev.yaml"), "bench.yaml": mustLoad(t, "../../../configs/bench.yaml")} {
		if c.Edge.Rate.IPPerSecond > 0 && !exempt(c) {
			t.Errorf("%s limits 127.0.0.1 as one client", f)
		}
		if c.Edge.MaxConnsPerIP != 0 && c.Edge.MaxConnsPerIP < 4096 {
			t.Errorf("%s: max_conns_per_ip %d is too tight for a local crowd", f, c.Edge.MaxConnsPerIP)
		}
		if c.Edge.Rate.UserPerSecond <= 0 {
			t.Errorf("%s: buyers must still be limited per user", f)
		}
	}
	for name, c := range map[string]Config{"defaults": Default(), "prod.yaml": mustLoad(t, "../../../configs/prod.yaml")} {
		r := c.Edge.Rate
		if exempt(c) || r.IPPerSecond <= 0 || r.UserPerSecond <= 0 || r.UserSKULimit <= 0 || r.GateK <= 0 || c.Edge.MaxConnsPerIP <= 0 {
			t.Errorf("%s: production limits must all be on and exempt nobody: %+v, max_conns_per_ip %d", name, r, c.Edge.MaxConnsPerIP)
		}
	}
}

func TestRateAndBlocklistKeysFromTheEnvironment(t *testing.T) {
	c := Default()
	env := map[string]string{
		"SECKILL_EDGE_RATE_IP_PER_SECOND":   "7.5",
		"SECKILL_EDGE_RATE_IP_EXEMPT":       "10.0.0.0/8, 192.0.2.1",
		"SECKILL_EDGE_RATE_USER_SKU_WINDOW": "30s",
		"SECKILL_EDGE_BLOCKLIST_USERS":      "1,2",
		"SECKILL_EDGE_TRUSTED_PROXIES":      "172.16.0.0/12",
		"SECKILL_EDGE_MAX_CONNS_PER_IP":     "64",
		"SECKILL_EDGE_RATE_SKU_INFLIGHT":    "512",
		"SECKILL_EDGE_RATE_GATE_EDGES":      "4",
		"SECKILL_EDGE_IDENTITY_KEYS":        "g2:" + strings.Repeat("n", 32) + ",g1:" + strings.Repeat("o", 32),
	}
	if err := ApplyEnv(&c, func(k string) (string, bool) { v, ok := env[k]; return v, ok }); err != nil {
		t.Fatal(err)
	}
	r := c.Edge.Rate
	if r.IPPerSecond != 7.5 || len(r.IPExempt) != 2 || r.IPExempt[1] != "192.0.2.1" || r.UserSKUWindow != 30*time.Second ||
		len(c.Edge.Blocklist.Users) != 2 || c.Edge.Blocklist.Users[1] != 2 || c.Edge.TrustedProxies[0] != "172.16.0.0/12" || c.Edge.MaxConnsPerIP != 64 ||
		r.SKUInflight != 512 || r.GateEdges != 4 || len(c.Edge.IdentityKeys) != 2 || c.Edge.IdentityKeys[1].ID != "g1" {
		t.Fatalf("overrides not applied: %+v", c.Edge)
	}
	if err := c.Validate(); err != nil {
		t.Fatal(err)
	}
}

func mustLoad(t *testing.T, path string) Config {
	t.Helper()
	c, err := Load(path)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func TestWaitTimeoutIsShorterThanTheOccupyBound(t *testing.T) {
	c := Default()
	c.Admin.Token = "t"
	c.Redis.WaitReplicas = 1
	if err := c.Validate(); err != nil {
		t.Fatalf("defaults with wait_replicas 1: %v", err)
	}
	c.Redis.WaitTimeout = c.Engine.OccupyTimeout
	if err := c.Validate(); err == nil || !contains(err.Error(), "redis.wait_timeout") {
		t.Fatalf("wait_timeout = occupy_timeout: %v", err)
	}
}

// TestGCKeysAreBoundedAndComeFromTheEnvironment: gc.percent defaults to
// 200 and is refused outside 10..1000, a negative memory limit is
// refused, and both come from SECKILL_GC_*.
func TestGCKeysAreBoundedAndComeFromTheEnvironment(t *testing.T) {
	c := Default()
	c.Admin.Token = "t"
	if c.GC.Percent != 200 || c.GC.MemoryLimitMB != 0 {
		t.Fatalf("defaults %+v, want percent 200 and no limit", c.GC)
	}
	for _, bad := range []GC{{Percent: 9}, {Percent: 1001}, {Percent: -1}, {Percent: 100, MemoryLimitMB: -1}} {
		c.GC = bad
		if err := c.Validate(); err == nil || !contains(err.Error(), "gc.") {
			t.Errorf("gc %+v: %v, want an error naming the gc key", bad, err)
		}
	}
	t.Setenv("SECKILL_GC_PERCENT", "400")
	t.Setenv("SECKILL_GC_MEMORY_LIMIT_MB", "512")
	c, err := Load("")
	if err != nil {
		t.Fatal(err)
	}
	if c.GC.Percent != 400 || c.GC.MemoryLimitMB != 512 {
		t.Fatalf("gc %+v, want the environment's 400 and 512", c.GC)
	}
}
