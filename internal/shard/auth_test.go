package shard

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"seckill/internal/testenv"
)

// roundTrip opens cfg as the processes do and writes and reads a key on
// the default deployment.
func roundTrip(ctx context.Context, cfg Config) error {
	if err := Check(ctx, cfg, cfg.Default); err != nil {
		return err
	}
	s, err := Open(cfg)
	if err != nil {
		return err
	}
	defer s.Close()
	c := s.Default
	if err := c.Do(ctx, c.B().Set().Key("sk:auth-test").Value("1").Build()).Error(); err != nil {
		return err
	}
	v, err := c.Do(ctx, c.B().Get().Key("sk:auth-test").Build()).ToString()
	if err != nil {
		return err
	}
	if v != "1" {
		return fmt.Errorf("read back %q", v)
	}
	return nil
}

func testConfig(addr string) Config {
	cfg := DefaultConfig()
	cfg.Default.Addrs = []string{addr}
	cfg.Timeout = 2 * time.Second
	return cfg
}

func TestRequirepassAndACLUsersAuthenticate(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	const pass = "a-requirepass-secret-0123456789abcdef"
	rp := testenv.StartRedis(t, testenv.WithRedisPassword(pass))
	acl := testenv.StartRedis(t, testenv.WithRedisACL("user edge on >edge-secret-0123456789abcdef ~sk:* +@all"))
	for _, tc := range []struct {
		name           string
		addr           string
		user, password string
		want           string // "" = works; else part of the error
	}{
		{"requirepass with its password", rp.Addr, "", pass, ""},
		{"requirepass without a password", rp.Addr, "", "", "NOAUTH"},
		{"requirepass with a wrong password", rp.Addr, "", "wrong", "WRONGPASS"},
		{"an ACL user with its password", acl.Addr, "edge", "edge-secret-0123456789abcdef", ""},
		{"an ACL user with a wrong password", acl.Addr, "edge", "wrong", "WRONGPASS"},
		{"the disabled default user", acl.Addr, "", "", "NOAUTH"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := testConfig(tc.addr)
			cfg.Default.Username, cfg.Default.Password = tc.user, tc.password
			err := roundTrip(ctx, cfg)
			if tc.want == "" && err != nil || tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)) {
				t.Fatalf("%v, want %q", err, tc.want)
			}
		})
	}
}

func TestTLSRedisIsReachedOnlyOverVerifiedTLS(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	const pass = "a-tls-redis-secret-0123456789abcdef"
	mutual := testenv.StartRedis(t, testenv.WithRedisTLS(true), testenv.WithRedisPassword(pass))
	other := testenv.StartRedis(t, testenv.WithRedisTLS(false)) // another CA
	x := mutual.TLS
	for _, tc := range []struct {
		name string
		set  func(r *Redis)
		want string
	}{
		{"TLS with the CA and a client certificate", func(r *Redis) {
			r.TLS.Enabled, r.TLS.CAFile, r.TLS.CertFile, r.TLS.KeyFile = true, x.CAFile, x.CertFile, x.KeyFile
		}, ""},
		{"TLS naming the certificate's server name", func(r *Redis) {
			r.TLS.Enabled, r.TLS.CAFile, r.TLS.CertFile, r.TLS.KeyFile, r.TLS.ServerName = true, x.CAFile, x.CertFile, x.KeyFile, "localhost"
		}, ""},
		{"a name the certificate does not carry", func(r *Redis) {
			r.TLS.Enabled, r.TLS.CAFile, r.TLS.CertFile, r.TLS.KeyFile, r.TLS.ServerName = true, x.CAFile, x.CertFile, x.KeyFile, "redis.example"
		}, "certificate"},
		{"plaintext to a TLS port", func(r *Redis) {}, "refused"},
		{"TLS without a client certificate", func(r *Redis) { r.TLS.Enabled, r.TLS.CAFile = true, x.CAFile }, "refused"},
		{"TLS trusting another CA", func(r *Redis) {
			r.TLS.Enabled, r.TLS.CAFile, r.TLS.CertFile, r.TLS.KeyFile = true, other.TLS.CAFile, x.CertFile, x.KeyFile
		}, "certificate"},
		{"a CA file that does not exist", func(r *Redis) { r.TLS.Enabled, r.TLS.CAFile = true, x.CAFile+".missing" }, "ca_file"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := testConfig(mutual.Addr)
			cfg.Default.Password = pass
			tc.set(&cfg.Default)
			err := roundTrip(ctx, cfg)
			switch {
			case tc.want == "" && err != nil:
				t.Fatal(err)
			case tc.want == "refused" && err == nil: // however the server says it
				t.Fatal("connected")
			case tc.want != "" && tc.want != "refused" && (err == nil || !strings.Contains(err.Error(), tc.want)):
				t.Fatalf("%v, want %q", err, tc.want)
			}
		})
	}
}

func TestCheckAuthRefusesAnUnauthenticatedRedis(t *testing.T) {
	for _, tc := range []struct {
		name string
		set  func(c *Config)
		want string
	}{
		{"nothing set", func(c *Config) {}, "redis.default has no password"},
		{"a username alone", func(c *Config) { c.Default.Username = "edge" }, "redis.default has no password"},
		{"TLS without a client certificate", func(c *Config) { c.Default.TLS.Enabled = true }, "redis.default has no password"},
		{"a password", func(c *Config) { c.Default.Password = "p" }, ""},
		{"a client certificate", func(c *Config) {
			c.Default.TLS.Enabled, c.Default.TLS.CertFile, c.Default.TLS.KeyFile = true, "c.pem", "k.pem"
		}, ""},
		{"a hot shard without", func(c *Config) {
			c.Default.Password = "p"
			c.Hot = HotShards{{Addrs: []string{"h:1"}, Password: "q"}, {Addrs: []string{"h:2"}}}
		}, "redis.hot[1] has no password"},
		{"a hot shard that is the default", func(c *Config) {
			c.Default.Password = "p"
			c.Hot = HotShards{{Addrs: c.Default.Addrs}}
		}, ""},
		{"insecure on purpose", func(c *Config) { c.Insecure = true; c.Hot = HotShards{{Addrs: []string{"h:1"}}} }, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := DefaultConfig()
			tc.set(&c)
			err := c.CheckAuth()
			if tc.want == "" && err != nil || tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want) || !strings.Contains(err.Error(), "redis.insecure")) {
				t.Fatalf("%v, want %q", err, tc.want)
			}
		})
	}
}

func TestHotShardsTakeUsernameTLSAndTheirEnvironment(t *testing.T) {
	c := decodeRedis(t, "hot:\n  - addrs: [h:1]\n    username: engine\n    tls: {enabled: true, ca_file: /ca.pem}\n  - addrs: [h:2]\n")
	if err := c.Validate(); err != nil {
		t.Fatal(err)
	}
	if h := c.Hot[0]; h.Username != "engine" || !h.TLS.Enabled || h.TLS.CAFile != "/ca.pem" {
		t.Fatalf("shard 0 %+v", h)
	}
	env := map[string]string{"SECKILL_REDIS_HOT_USERNAME": "consumer", "SECKILL_REDIS_HOT_PASSWORD": "s3cret"}
	if err := c.Hot.ApplyEnv("SECKILL_REDIS_HOT", func(k string) (string, bool) { v, ok := env[k]; return v, ok }); err != nil {
		t.Fatal(err)
	}
	for i, h := range c.Hot {
		if h.Username != "consumer" || h.Password != "s3cret" {
			t.Fatalf("shard %d %+v", i, h)
		}
	}
	if !c.Hot[0].TLS.Enabled {
		t.Fatal("the environment dropped shard 0's TLS")
	}
	bad := decodeRedis(t, "default: {addrs: [a:1], tls: {ca_file: /ca.pem}}")
	if err := bad.Validate(); err == nil || !strings.Contains(err.Error(), "redis.default.tls") {
		t.Fatalf("TLS files without tls.enabled: %v", err)
	}
}
