// Package shard opens the Redis deployments of a sale: the default Redis
// (catalog, results, rate limits, events, ordinary SKUs) and the dedicated
// hot-SKU shards (SKUs flagged hot, placed by a stable rule or by the
// SKU's hotShard). Each is one rueidis client, which
// auto-pipelines concurrent commands onto shared connections.
package shard

import (
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/redis/rueidis"

	"seckill/internal/tlsclient"
)

// Redis addresses one Redis deployment. More than one address means a Redis
// Cluster (every SKU's keys share a hash tag, so scripts stay in one slot).
//
// Username and Password authenticate (AUTH): Password alone for a server
// with requirepass, both for an ACL user. Keep the password in the
// environment (SECKILL_REDIS_DEFAULT_PASSWORD, SECKILL_REDIS_HOT_PASSWORD),
// never in a committed file. TLS encrypts the connection and verifies the
// server (ca_file, server_name), with a client certificate (cert_file,
// key_file) where the server asks for one; in a cluster it applies to
// every node.
type Redis struct {
	Addrs    []string      `yaml:"addrs"`
	Username string        `yaml:"username"`
	Password string        `yaml:"password"`
	DB       int           `yaml:"db"`
	TLS      tlsclient.TLS `yaml:"tls"`
}

// authenticated reports whether r proves who the client is: a password
// (requirepass or an ACL user), or a TLS client certificate.
func (r Redis) authenticated() bool {
	return r.Password != "" || r.TLS.Enabled && r.TLS.CertFile != ""
}

// Config is the redis section of the configuration.
type Config struct {
	Default Redis `yaml:"default"`
	// Hot is the hot-SKU shards: one shard ({addrs: [...]}) or a list of
	// them (see HotShards for the placement rule). Empty, or one shard
	// with empty addrs: the hot SKUs live on default.
	Hot HotShards `yaml:"hot"`
	// Timeout bounds dialing and every blocking write; callers bound each
	// command with their own context too. Default 2s.
	Timeout time.Duration `yaml:"timeout"`
	// PipelineMultiplex is rueidis' 2^n connections per node. Default 2.
	PipelineMultiplex int `yaml:"pipeline_multiplex"`
	// WaitReplicas, when above 0, makes every occupy batch durable across
	// a failover: after the script, WAIT WaitReplicas WaitTimeout on the
	// same connection; a batch fewer replicas acknowledge in time is
	// given back and its buyers answered busy (stock.ErrNotReplicated).
	// Each batch then holds a connection of rueidis' blocking pool for
	// the round trip and the wait (no auto-pipelining with other
	// batches). Default 0: off.
	WaitReplicas int `yaml:"wait_replicas"`
	// WaitTimeout bounds the WAIT (whole milliseconds, at least 1ms; keep
	// it well under engine.occupy_timeout). Default 50ms.
	WaitTimeout time.Duration `yaml:"wait_timeout"`
	// Insecure lets `seckill edge`, `engine` and `consumer` use a Redis
	// without authentication (no password, no client certificate), which
	// they otherwise refuse at start (CheckAuth): anything that reaches
	// such a Redis can rewrite the stock. Set it on purpose only, where
	// nothing else can reach the servers. `seckill dev` never asks.
	// Default false.
	Insecure bool `yaml:"insecure"`
}

// DefaultConfig is one local Redis for everything.
func DefaultConfig() Config {
	return Config{Default: Redis{Addrs: []string{"127.0.0.1:6379"}}, Timeout: 2 * time.Second, PipelineMultiplex: 2,
		WaitTimeout: 50 * time.Millisecond}
}

// Validate names the first bad key.
func (c *Config) Validate() error {
	if len(c.Default.Addrs) == 0 {
		return errors.New("redis.default.addrs must name at least one address")
	}
	hot := c.Hot.Shards()
	for i, h := range hot {
		if len(h.Addrs) == 0 {
			return fmt.Errorf("redis.hot[%d].addrs must name at least one address", i)
		}
		for j := range i {
			if sameAddrs(h.Addrs, hot[j].Addrs) {
				return fmt.Errorf("redis.hot[%d] repeats redis.hot[%d]: each hot shard is a deployment of its own", i, j)
			}
		}
	}
	if err := c.Default.TLS.Validate("redis.default"); err != nil {
		return err
	}
	for i, h := range hot {
		if err := h.TLS.Validate(fmt.Sprintf("redis.hot[%d]", i)); err != nil {
			return err
		}
	}
	if c.Timeout <= 0 {
		return errors.New("redis.timeout must be positive")
	}
	if c.WaitReplicas < 0 {
		return errors.New("redis.wait_replicas must not be negative (0: off)")
	}
	if c.WaitReplicas > 0 && (c.WaitTimeout < time.Millisecond || c.WaitTimeout%time.Millisecond != 0) {
		return errors.New("redis.wait_timeout must be at least 1ms, in whole milliseconds")
	}
	if c.PipelineMultiplex < 0 || c.PipelineMultiplex > rueidis.MaxPipelineMultiplex {
		return fmt.Errorf("redis.pipeline_multiplex must be 0..%d", rueidis.MaxPipelineMultiplex)
	}
	return nil
}

// HotName names hot shard i in logs, metrics and the admin stock view:
// hot0, hot1, …
func HotName(i int) string { return "hot" + strconv.Itoa(i) }

// DefaultName names redis.default the same way.
const DefaultName = "default"

// CheckAuth is the start-up check of the production roles: every
// deployment must authenticate (a password, or a TLS client certificate)
// unless redis.insecure is set. The error names the key and its variable.
func (c *Config) CheckAuth() error {
	if c.Insecure {
		return nil
	}
	if !c.Default.authenticated() {
		return errors.New("redis.default has no password or client certificate: set SECKILL_REDIS_DEFAULT_PASSWORD (and redis.default.username for an ACL user), or redis.insecure: true to use an unauthenticated Redis on purpose")
	}
	for i, h := range c.Hot.Shards() {
		if sameAddrs(h.Addrs, c.Default.Addrs) || h.authenticated() {
			continue
		}
		return fmt.Errorf("redis.hot[%d] has no password or client certificate: set SECKILL_REDIS_HOT_PASSWORD (and SECKILL_REDIS_HOT_USERNAME for an ACL user), or redis.insecure: true to use an unauthenticated Redis on purpose", i)
	}
	return nil
}
