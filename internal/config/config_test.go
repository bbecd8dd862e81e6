package config

import (
	"os"
	"path/filepath"
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
	}
	if err := ApplyEnv(&c, func(k string) (string, bool) { v, ok := env[k]; return v, ok }); err != nil {
		t.Fatal(err)
	}
	if c.Edge.Listen != "0.0.0.0:9000" || c.Admin.Token != "s3cret" || c.Order.PayTimeout != 90*time.Second ||
		len(c.Redis.Default.Addrs) != 2 || c.Redis.Default.Addrs[1] != "b:2" || c.Engine.Kafka.Acks != "leader" ||
		c.Consumer.BatchSize != 64 || c.Dev.Demo {
		t.Fatalf("overrides not applied: %+v", c)
	}
}

func TestBadEnvValueNamesTheVariable(t *testing.T) {
	c := Default()
	err := ApplyEnv(&c, func(k string) (string, bool) { return "soon", k == "SECKILL_ORDER_PAY_TIMEOUT" })
	if err == nil || !contains(err.Error(), "SECKILL_ORDER_PAY_TIMEOUT") {
		t.Fatalf("error %v should name the variable", err)
	}
}

func TestShippedConfigsLoadAndValidate(t *testing.T) {
	files, _ := filepath.Glob("../../configs/*.yaml")
	if len(files) < 3 {
		t.Fatalf("want dev.yaml, bench.yaml and prod.yaml in configs/, found %v", files)
	}
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
