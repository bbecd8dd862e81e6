// Package shard opens the Redis deployments of a sale: the default Redis
// (catalog, results, rate limits, events, ordinary SKUs) and the dedicated
// hot-SKU shard (SKUs flagged hot). Each is one rueidis client, which
// auto-pipelines concurrent commands onto shared connections.
package shard

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/redis/rueidis"
)

// Redis addresses one Redis deployment. More than one address means a Redis
// Cluster (every SKU's keys share a hash tag, so scripts stay in one slot).
type Redis struct {
	Addrs    []string `yaml:"addrs"`
	Password string   `yaml:"password"`
	DB       int      `yaml:"db"`
}

// Config is the redis section of the configuration.
type Config struct {
	Default Redis `yaml:"default"`
	// Hot is the hot-SKU shard; empty Addrs means "same as default".
	Hot Redis `yaml:"hot"`
	// Timeout bounds dialing and every blocking write; callers bound each
	// command with their own context too. Default 2s.
	Timeout time.Duration `yaml:"timeout"`
	// PipelineMultiplex is rueidis' 2^n connections per node. Default 2.
	PipelineMultiplex int `yaml:"pipeline_multiplex"`
}

// DefaultConfig is one local Redis for everything.
func DefaultConfig() Config {
	return Config{Default: Redis{Addrs: []string{"127.0.0.1:6379"}}, Timeout: 2 * time.Second, PipelineMultiplex: 2}
}

// Validate names the first bad key.
func (c *Config) Validate() error {
	if len(c.Default.Addrs) == 0 {
		return errors.New("redis.default.addrs must name at least one address")
	}
	if c.Timeout <= 0 {
		return errors.New("redis.timeout must be positive")
	}
	if c.PipelineMultiplex < 0 || c.PipelineMultiplex > rueidis.MaxPipelineMultiplex {
		return fmt.Errorf("redis.pipeline_multiplex must be 0..%d", rueidis.MaxPipelineMultiplex)
	}
	return nil
}

// Set is the opened deployments. Hot is the same client as Default when no
// hot shard is configured. Safe for concurrent use.
type Set struct {
	Default rueidis.Client
	Hot     rueidis.Client
	sepHot  bool
}

// Open connects to every configured deployment.
func Open(cfg Config) (*Set, error) {
	def, err := open(cfg, cfg.Default)
	if err != nil {
		return nil, fmt.Errorf("redis.default: %w", err)
	}
	s := &Set{Default: def, Hot: def}
	if len(cfg.Hot.Addrs) > 0 && !sameAddrs(cfg.Hot.Addrs, cfg.Default.Addrs) {
		hot, err := open(cfg, cfg.Hot)
		if err != nil {
			def.Close()
			return nil, fmt.Errorf("redis.hot: %w", err)
		}
		s.Hot, s.sepHot = hot, true
	}
	return s, nil
}

func open(cfg Config, r Redis) (rueidis.Client, error) {
	return rueidis.NewClient(clientOption(cfg, r))
}

func clientOption(cfg Config, r Redis) rueidis.ClientOption {
	return rueidis.ClientOption{
		InitAddress:       r.Addrs,
		Password:          r.Password,
		SelectDB:          r.DB,
		DisableCache:      true,
		ConnWriteTimeout:  cfg.Timeout,
		Dialer:            netDialer(cfg.Timeout),
		PipelineMultiplex: cfg.PipelineMultiplex,
	}
}

// For returns the client that owns a SKU's keys.
func (s *Set) For(hot bool) rueidis.Client {
	if hot {
		return s.Hot
	}
	return s.Default
}

// HotApart reports whether the hot-SKU shard is a deployment of its own
// (otherwise Hot is the default Redis).
func (s *Set) HotApart() bool { return s.sepHot }

// Ping checks every deployment within ctx.
func (s *Set) Ping(ctx context.Context) error {
	if err := s.Default.Do(ctx, s.Default.B().Ping().Build()).Error(); err != nil {
		return fmt.Errorf("redis default: %w", err)
	}
	if s.sepHot {
		if err := s.Hot.Do(ctx, s.Hot.B().Ping().Build()).Error(); err != nil {
			return fmt.Errorf("redis hot: %w", err)
		}
	}
	return nil
}

// Close closes every client.
func (s *Set) Close() {
	s.Default.Close()
	if s.sepHot {
		s.Hot.Close()
	}
}

func sameAddrs(a, b []string) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}
