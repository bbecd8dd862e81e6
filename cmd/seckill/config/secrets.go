package config

import (
	"errors"
	"fmt"
	"net"

	"github.com/go-sql-driver/mysql"
)

// ShippedSecrets are the admin tokens and signing secrets this repository
// ships — configs/*.yaml, docker-compose.yml, the README and docs examples —
// and so are public. Outside `seckill dev` CheckSecrets refuses each of
// them wherever it is set. A secret added to a file in the repository
// belongs here (cmd/seckill/config's tests check configs/*.yaml against it).
var ShippedSecrets = []string{
	"dev-admin-token",                             // admin.token of configs/dev.yaml, bench.yaml; README, docs, bench/README
	"dev-token-secret-not-for-production",         // token.keys of configs/dev.yaml, bench.yaml
	"dev-payment-provider-key-not-for-production", // payment.provider_key of configs/dev.yaml, bench.yaml
	"dev-order-secret-not-for-production",         // order_signing.keys of configs/dev.yaml, bench.yaml
}

// MinSecretBytes is the shortest admin token or signing secret accepted
// outside `seckill dev`.
const MinSecretBytes = 32

// CheckSecrets is the start-up check of every process but `seckill dev`,
// made before any connection is dialled: admin.token (required when
// needAdmin: the process serves the admin API), every token.keys secret,
// order_signing.keys secret, edge.identity_keys secret,
// engine.sidecar_secret, edge.engine_secret and payment.provider_key that
// is set must be at least MinSecretBytes long and none of ShippedSecrets;
// token and order-signing key ids must not repeat. The message names the setting and its
// variable, never the value.
func (c *Config) CheckSecrets(needAdmin bool) error {
	if needAdmin && c.Admin.Token == "" {
		return errors.New("admin.token is empty: set SECKILL_ADMIN_TOKEN (the admin API refuses every call without it)")
	}
	type secret struct{ key, env, value string }
	list := []secret{
		{"admin.token", "SECKILL_ADMIN_TOKEN", c.Admin.Token},
		{"engine.sidecar_secret", "SECKILL_ENGINE_SIDECAR_SECRET", c.Engine.SidecarSecret},
		{"edge.engine_secret", "SECKILL_EDGE_ENGINE_SECRET", c.Edge.EngineSecret},
		{"payment.provider_key", "SECKILL_PAYMENT_PROVIDER_KEY", c.Payment.ProviderKey},
	}
	seen := map[string]int{}
	for i, k := range c.Token.Keys {
		if j, ok := seen[k.ID]; ok {
			return fmt.Errorf("token.keys[%d].id repeats token.keys[%d].id: every key id must be unique", i, j)
		}
		seen[k.ID] = i
		list = append(list, secret{fmt.Sprintf("token.keys[%d].secret", i), "SECKILL_TOKEN_KEYS", k.Secret})
	}
	seen = map[string]int{}
	for i, k := range c.OrderSigning.Keys {
		if j, ok := seen[k.ID]; ok {
			return fmt.Errorf("order_signing.keys[%d].id repeats order_signing.keys[%d].id: every key id must be unique", i, j)
		}
		seen[k.ID] = i
		list = append(list, secret{fmt.Sprintf("order_signing.keys[%d].secret", i), "SECKILL_ORDER_SIGNING_KEYS", k.Secret})
	}
	for i, k := range c.Edge.IdentityKeys {
		list = append(list, secret{fmt.Sprintf("edge.identity_keys[%d].secret", i), "SECKILL_EDGE_IDENTITY_KEYS", k.Secret})
	}
	for _, s := range list {
		if s.value == "" {
			continue
		}
		for _, pub := range ShippedSecrets {
			if s.value == pub {
				return fmt.Errorf("%s is a value this repository ships (public): set %s to %d or more random bytes, e.g. $(openssl rand -hex 32)", s.key, s.env, MinSecretBytes)
			}
		}
		if len(s.value) < MinSecretBytes {
			return fmt.Errorf("%s is %d bytes: at least %d are required outside seckill dev (set %s, e.g. $(openssl rand -hex 32))", s.key, len(s.value), MinSecretBytes, s.env)
		}
	}
	return nil
}

// ShippedDBPasswords are the database passwords this repository ships
// (prod.yaml's store.dsn, docker-compose's MYSQL_PASSWORD default).
var ShippedDBPasswords = []string{"seckill"}

// CheckStoreSecret is the start-up check of the processes that open the
// orders database (edge, consumer), outside `seckill dev`: a mysql
// store.dsn must not carry a password this repository ships, nor go
// without one to a database over the network (a unix socket or a
// loopback address may rely on the server's own authentication). The
// message names the setting, never the value.
func (c *Config) CheckStoreSecret() error {
	if c.Store.Driver != "mysql" {
		return nil
	}
	d, err := mysql.ParseDSN(c.Store.DSN)
	if err != nil {
		return errors.New("store.dsn is not a mysql DSN (user:password@tcp(host:3306)/seckill)")
	}
	for _, pub := range ShippedDBPasswords {
		if d.Passwd == pub {
			return errors.New("store.dsn carries a password this repository ships (public): set SECKILL_STORE_DSN with the database's own password")
		}
	}
	if d.Passwd == "" && d.Net != "unix" && !loopback(d.Addr) {
		return fmt.Errorf("store.dsn has no password for a database over the network (%s): set SECKILL_STORE_DSN with one", d.Addr)
	}
	return nil
}

func loopback(addr string) bool {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		host = addr
	}
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}
