package config

import (
	"os"
	"regexp"
	"strings"
	"testing"

	"seckill/internal/identity"
	"seckill/internal/token"
)

func strongSecret(c byte) string { return strings.Repeat(string(c), MinSecretBytes) }

func TestCheckSecretsRefusesPublicShortAndRepeatedSecrets(t *testing.T) {
	good := func() Config {
		c := Default()
		c.Admin.Token = strongSecret('a')
		c.Token.Keys = []token.Key{{ID: "k2", Secret: strongSecret('b')}, {ID: "k1", Secret: strongSecret('c')}}
		c.Engine.SidecarSecret = strongSecret('d')
		c.Payment.ProviderKey = strongSecret('e')
		c.Edge.IdentityKeys = []identity.Key{{ID: "g1", Secret: strongSecret('f')}}
		return c
	}
	if c := good(); c.CheckSecrets(true) != nil {
		t.Fatalf("good secrets refused: %v", c.CheckSecrets(true))
	}
	for _, tc := range []struct {
		name, key string
		set       func(*Config)
	}{
		{"no admin token where the admin API is served", "admin.token", func(c *Config) { c.Admin.Token = "" }},
		{"the dev admin token", "admin.token", func(c *Config) { c.Admin.Token = "dev-admin-token" }},
		{"an admin token of 31 bytes", "admin.token", func(c *Config) { c.Admin.Token = strings.Repeat("x", 31) }},
		{"the dev token secret", "token.keys[1].secret", func(c *Config) { c.Token.Keys[1].Secret = "dev-token-secret-not-for-production" }},
		{"a token secret of 16 bytes", "token.keys[0].secret", func(c *Config) { c.Token.Keys[0].Secret = strings.Repeat("x", 16) }},
		{"two token keys with one id", "token.keys[1].id", func(c *Config) { c.Token.Keys[1].ID = "k2" }},
		{"a short sidecar secret", "engine.sidecar_secret", func(c *Config) { c.Engine.SidecarSecret = "short" }},
		{"a short secret on the edge's side", "edge.engine_secret", func(c *Config) { c.Edge.EngineSecret = "short" }},
		{"the dev payment key", "payment.provider_key", func(c *Config) { c.Payment.ProviderKey = "dev-payment-provider-key-not-for-production" }},
		{"a shipped gateway identity secret", "edge.identity_keys[0].secret", func(c *Config) {
			c.Edge.IdentityKeys[0].Secret = "dev-order-secret-not-for-production"
		}},
		{"a short gateway identity secret", "edge.identity_keys[0].secret", func(c *Config) { c.Edge.IdentityKeys[0].Secret = "short" }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := good()
			tc.set(&c)
			err := c.CheckSecrets(true)
			if err == nil || !strings.Contains(err.Error(), tc.key) {
				t.Fatalf("CheckSecrets: %v, want a refusal naming %s", err, tc.key)
			}
			for _, s := range append(ShippedSecrets, strings.Repeat("x", 16), "short") {
				if strings.Contains(err.Error(), s) {
					t.Fatalf("the message shows the secret: %v", err)
				}
			}
		})
	}
	c := good()
	c.Admin.Token = ""
	if err := c.CheckSecrets(false); err != nil {
		t.Fatalf("a process without the admin API needs no admin token: %v", err)
	}
}

func TestCheckStoreSecretRefusesShippedAndMissingPasswords(t *testing.T) {
	for _, tc := range []struct {
		name, driver, dsn string
		refuse            bool
	}{
		{"prod.yaml's shipped password", "mysql", "seckill:seckill@tcp(mariadb:3306)/seckill?parseTime=true", true},
		{"no password over the network", "mysql", "seckill@tcp(mariadb:3306)/seckill", true},
		{"an empty password over the network", "mysql", "seckill:@tcp(10.0.0.5:3306)/seckill", true},
		{"not a DSN", "mysql", "seckill:pw@tcp(mariadb:3306", true},
		{"a real password", "mysql", "seckill:Real-Pa55word-here@tcp(mariadb:3306)/seckill", false},
		{"no password on loopback (the server's own auth)", "mysql", "root@tcp(127.0.0.1:3306)/seckill", false},
		{"no password over a unix socket", "mysql", "root@unix(/run/mysqld/mysqld.sock)/seckill", false},
		{"sqlite has no password", "sqlite", "seckill.db", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := Default()
			c.Store.Driver, c.Store.DSN = tc.driver, tc.dsn
			err := c.CheckStoreSecret()
			if tc.refuse != (err != nil) {
				t.Fatalf("CheckStoreSecret: %v", err)
			}
			if err != nil && (!strings.Contains(err.Error(), "store.dsn") || strings.Contains(err.Error(), ":seckill@")) {
				t.Fatalf("the refusal must name store.dsn and not show the password: %v", err)
			}
		})
	}
	if c := mustLoad(t, "../../../configs/prod.yaml"); c.CheckStoreSecret() == nil {
		t.Fatal("prod.yaml's store.dsn as shipped passes the production check")
	}
}

// TestEverySecretTheRepositoryShipsIsRefused: the admin tokens and signing
// secrets written in configs/*.yaml, docker-compose.yml, deploy/k8s and the docs are
// all in ShippedSecrets, so none of them can run a production process.
func TestEverySecretTheRepositoryShipsIsRefused(t *testing.T) {
	for _, path := range []string{devYAML, benchYAML} {
		c := mustLoad(t, path)
		if err := c.CheckSecrets(true); err == nil {
			t.Errorf("%s's secrets pass the production check", path)
		}
		for _, s := range append([]string{c.Admin.Token, c.Payment.ProviderKey, c.Engine.SidecarSecret}, keySecrets(c)...) {
			if s != "" && !shipped(s) {
				t.Errorf("%s ships a secret missing from ShippedSecrets", path)
			}
		}
	}
	// Examples in the prose: SECKILL_ADMIN_TOKEN=<value>, "Bearer <value>".
	example := regexp.MustCompile(`(?:SECKILL_ADMIN_TOKEN=|SECKILL_[A-Z_]*(?:SECRET|KEY|KEYS)=|Bearer )([A-Za-z0-9_\-:]+)`)
	for _, path := range []string{"../../../README.md", "../../../docs/operations-edge.md", "../../../docs/security.md",
		"../../../bench/README.md", "../../../docker-compose.yml", "../../../deploy/k8s/README.md", "../../../docs/SCALING.md"} {
		b, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range example.FindAllStringSubmatch(string(b), -1) {
			v := m[1]
			if i := strings.IndexByte(v, ':'); i >= 0 && strings.HasPrefix(m[0], "SECKILL_TOKEN_KEYS") {
				v = v[i+1:]
			}
			if len(v) < 8 || strings.HasPrefix(v, "$") {
				continue // a placeholder, not a value
			}
			if !shipped(v) {
				t.Errorf("%s shows a secret %q missing from ShippedSecrets", path, m[0])
			}
		}
	}
}

func keySecrets(c Config) []string {
	var out []string
	for _, k := range c.Token.Keys {
		out = append(out, k.Secret)
	}
	return out
}

func shipped(s string) bool {
	for _, p := range ShippedSecrets {
		if s == p {
			return true
		}
	}
	return false
}
