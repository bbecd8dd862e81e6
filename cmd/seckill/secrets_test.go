package main

import (
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"seckill/internal/testenv"
)

// clearSeckillEnv unsets every SECKILL_ variable for the test.
func clearSeckillEnv(t *testing.T) {
	t.Helper()
	for _, kv := range os.Environ() {
		if k, _, _ := strings.Cut(kv, "="); strings.HasPrefix(k, "SECKILL_") {
			t.Setenv(k, "")
			os.Unsetenv(k)
		}
	}
}

// runBounded runs a subcommand that must refuse at once: before any
// listener or dial (prod.yaml names hosts that do not exist here, so a
// process that went on would wait out start_timeout).
func runBounded(t *testing.T, run func([]string) error, args ...string) error {
	t.Helper()
	done := make(chan error, 1)
	go func() { done <- run(args) }()
	select {
	case err := <-done:
		return err
	case <-time.After(10 * time.Second):
		t.Fatal("the process did not refuse at start: it went on to dial its servers")
		return nil
	}
}

func TestProductionRefusesShippedAndShortSecretsAtStart(t *testing.T) {
	strong := strings.Repeat("7", 64)
	for _, c := range []struct {
		name, key string
		env       map[string]string
	}{
		{"the public dev admin token", "admin.token", map[string]string{"SECKILL_ADMIN_TOKEN": "dev-admin-token"}},
		{"a short admin token", "admin.token", map[string]string{"SECKILL_ADMIN_TOKEN": "only-twenty-bytes-xx"}},
		{"the public dev token secret", "token.keys[0].secret", map[string]string{"SECKILL_ADMIN_TOKEN": strong,
			"SECKILL_TOKEN_KEYS": "k1:dev-token-secret-not-for-production"}},
		{"a short token secret", "token.keys[0].secret", map[string]string{"SECKILL_ADMIN_TOKEN": strong,
			"SECKILL_TOKEN_KEYS": "k1:0123456789abcdef"}},
		{"a repeated token key id", "token.keys[1].id", map[string]string{"SECKILL_ADMIN_TOKEN": strong,
			"SECKILL_TOKEN_KEYS": "k1:" + strong + ",k1:" + strong + "x"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			clearSeckillEnv(t)
			for k, v := range c.env {
				t.Setenv(k, v)
			}
			// Listeners on free loopback ports: a refusal must come before them.
			pub := fmt.Sprintf("127.0.0.1:%d", testenv.FreePort(t))
			adm := fmt.Sprintf("127.0.0.1:%d", testenv.FreePort(t))
			err := runBounded(t, runEdge, "--config", "../../configs/prod.yaml", "--listen", pub, "--admin-listen", adm)
			if err == nil || !strings.Contains(err.Error(), c.key) {
				t.Fatalf("seckill edge: %v, want a refusal naming %s", err, c.key)
			}
			for _, v := range c.env {
				if strings.Contains(err.Error(), v) {
					t.Fatalf("the refusal shows the secret: %v", err)
				}
			}
		})
	}
}

func TestATCPEngineWithoutClientAuthenticationRefusesToStart(t *testing.T) {
	clearSeckillEnv(t)
	addr := fmt.Sprintf("tcp://127.0.0.1:%d", testenv.FreePort(t))
	err := runBounded(t, runEngine, "--config", "../../configs/prod.yaml", "--listen", addr)
	if err == nil || !strings.Contains(err.Error(), "engine.sidecar_tls_cert") || !strings.Contains(err.Error(), "engine.sidecar_secret") {
		t.Fatalf("seckill engine on tcp without TLS or a secret: %v, want a refusal naming the keys", err)
	}
	// A good secret without TLS would cross the network in clear.
	t.Setenv("SECKILL_ENGINE_SIDECAR_SECRET", strings.Repeat("s", 40))
	err = runBounded(t, runEngine, "--config", "../../configs/prod.yaml", "--listen", addr)
	if err == nil || !strings.Contains(err.Error(), "engine.sidecar_tls_cert") {
		t.Fatalf("seckill engine on tcp with a secret and no TLS: %v, want a refusal naming engine.sidecar_tls_cert", err)
	}
	t.Setenv("SECKILL_ENGINE_SIDECAR_SECRET", "too-short")
	err = runBounded(t, runEngine, "--config", "../../configs/prod.yaml", "--listen", "unix://"+t.TempDir()+"/e.sock")
	if err == nil || !strings.Contains(err.Error(), "engine.sidecar_secret is 9 bytes") {
		t.Fatalf("seckill engine with a short secret: %v", err)
	}
}

// TestProductionRefusesAnUnauthenticatedRedisAtStart: `seckill edge`,
// `engine` and `consumer` with prod.yaml (no Redis password) refuse at
// start, before any listener or dial, naming the key that lacks one;
// with the default's password set, the hot shard's is still missing.
func TestProductionRefusesAnUnauthenticatedRedisAtStart(t *testing.T) {
	strong := strings.Repeat("7", 64)
	sock := "unix://" + t.TempDir() + "/engine.sock"
	starts := []struct {
		name string
		run  func([]string) error
		args func() []string
	}{
		{"edge", runEdge, func() []string {
			return []string{"--config", "../../configs/prod.yaml", "--listen", fmt.Sprintf("127.0.0.1:%d", testenv.FreePort(t)),
				"--admin-listen", fmt.Sprintf("127.0.0.1:%d", testenv.FreePort(t))}
		}},
		{"engine", runEngine, func() []string { return []string{"--config", "../../configs/prod.yaml", "--listen", sock} }},
		{"consumer", runConsumer, func() []string { return []string{"--config", "../../configs/prod.yaml"} }},
	}
	for _, c := range []struct {
		name, want string
		env        map[string]string
	}{
		{"no password at all", "redis.default has no password", nil},
		{"the hot shard without one", "redis.hot[0] has no password", map[string]string{"SECKILL_REDIS_DEFAULT_USERNAME": "edge",
			"SECKILL_REDIS_DEFAULT_PASSWORD": strong}},
		{"insecure false spelled out", "redis.default has no password", map[string]string{"SECKILL_REDIS_INSECURE": "false"}},
	} {
		for _, s := range starts {
			t.Run(s.name+": "+c.name, func(t *testing.T) {
				clearSeckillEnv(t)
				t.Setenv("SECKILL_ADMIN_TOKEN", strong)
				t.Setenv("SECKILL_ORDER_SIGNING_KEYS", "k1:"+strong)
				// A database password of the operator's own, so that the
				// refusal is the Redis one.
				t.Setenv("SECKILL_STORE_DSN", "seckill:"+strong+"@tcp(127.0.0.1:1)/seckill?parseTime=true")
				for k, v := range c.env {
					t.Setenv(k, v)
				}
				err := runBounded(t, s.run, s.args()...)
				if err == nil || !strings.Contains(err.Error(), c.want) || !strings.Contains(err.Error(), "redis.insecure") {
					t.Fatalf("seckill %s: %v, want a refusal naming %q and redis.insecure", s.name, err, c.want)
				}
				if strings.Contains(err.Error(), strong) {
					t.Fatalf("the refusal shows the secret: %v", err)
				}
			})
		}
	}
}
