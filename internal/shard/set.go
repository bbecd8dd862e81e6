package shard

import (
	"context"
	"fmt"
	"time"

	"github.com/redis/rueidis"
)

// Set is the opened deployments: Default, and each hot shard. A hot shard
// configured with default's addresses is the Default client. Safe for
// concurrent use.
type Set struct {
	Default rueidis.Client
	hot     []rueidis.Client // the hot shards, in configuration order
	apart   []bool           // hot[i] is a client of its own (not Default)
	missing rueidis.Client   // answers every command with ErrNoShard
	wait    Wait
}

// Wait is redis.wait_replicas and redis.wait_timeout: the replicas that
// must acknowledge an occupy batch, 0 for none.
type Wait struct {
	Replicas int
	Timeout  time.Duration
}

// Wait returns the occupy batch's replication requirement.
func (s *Set) Wait() Wait { return s.wait }

// Open connects to every configured deployment.
func Open(cfg Config) (*Set, error) {
	def, err := open(cfg, cfg.Default)
	if err != nil {
		return nil, fmt.Errorf("redis.default: %w", err)
	}
	s := &Set{Default: def, missing: refused{b: def}, wait: Wait{Replicas: cfg.WaitReplicas, Timeout: cfg.WaitTimeout}}
	for i, h := range cfg.Hot.Shards() {
		if sameAddrs(h.Addrs, cfg.Default.Addrs) {
			s.hot, s.apart = append(s.hot, def), append(s.apart, false)
			continue
		}
		c, err := open(cfg, h)
		if err != nil {
			s.Close()
			return nil, fmt.Errorf("redis.hot[%d]: %w", i, err)
		}
		s.hot, s.apart = append(s.hot, c), append(s.apart, true)
	}
	return s, nil
}

func open(cfg Config, r Redis) (rueidis.Client, error) {
	o, err := clientOption(cfg, r)
	if err != nil {
		return nil, err
	}
	return rueidis.NewClient(o)
}

// clientOption is how every client of r is built (Open, Check): the TLS
// files are read here, so a missing one fails at start.
func clientOption(cfg Config, r Redis) (rueidis.ClientOption, error) {
	tc, err := r.TLS.Config("redis")
	if err != nil {
		return rueidis.ClientOption{}, err
	}
	return rueidis.ClientOption{
		InitAddress:       r.Addrs,
		Username:          r.Username,
		Password:          r.Password,
		SelectDB:          r.DB,
		TLSConfig:         tc,
		DisableCache:      true,
		ConnWriteTimeout:  cfg.Timeout,
		Dialer:            netDialer(cfg.Timeout),
		PipelineMultiplex: cfg.PipelineMultiplex,
		RetryDelay:        retryDelay,
	}, nil
}

// Place is the shard that holds a SKU's keys: -1 for redis.default, i for
// hot shard i. A hot SKU lives on hot shard hotShard when it names one
// (hotShard ≥ 0), else on HotIndex(activity, sku, HotCount()); a hot SKU
// lives on default while no hot shard is configured. ok is false when
// the SKU names a hot shard this configuration lacks: the caller must
// refuse the SKU, never guess another shard.
func (s *Set) Place(activity, sku int64, hot bool, hotShard int) (idx int, ok bool) {
	switch {
	case !hot:
		return -1, true
	case hotShard >= 0:
		return hotShard, hotShard < len(s.hot)
	case len(s.hot) == 0:
		return -1, true
	}
	return HotIndex(activity, sku, len(s.hot)), true
}

// Client is the client of shard idx as Place answers it; for a shard this
// configuration lacks, a client that answers every command with
// ErrNoShard (so a SKU that names one fails closed wherever it is used).
func (s *Set) Client(idx int) rueidis.Client {
	switch {
	case idx < 0:
		return s.Default
	case idx < len(s.hot):
		return s.hot[idx]
	}
	return s.missing
}

// Name names shard idx: "default", "hot0", "hot1", … A hot shard that is
// the default deployment is named "default": metrics and the admin view
// say where the keys are.
func (s *Set) Name(idx int) string {
	switch {
	case idx < 0:
		return DefaultName
	case idx < len(s.hot):
		if !s.apart[idx] {
			return DefaultName
		}
		return HotName(idx)
	}
	return "missing"
}

// HotCount is the number of configured hot shards (0: hot SKUs live on
// default).
func (s *Set) HotCount() int { return len(s.hot) }

// Apart reports whether shard idx is a deployment of its own (not
// redis.default).
func (s *Set) Apart(idx int) bool { return idx >= 0 && idx < len(s.hot) && s.apart[idx] }

// Ping checks every deployment within ctx.
func (s *Set) Ping(ctx context.Context) error {
	if err := s.Default.Do(ctx, s.Default.B().Ping().Build()).Error(); err != nil {
		return fmt.Errorf("redis default: %w", err)
	}
	for i, c := range s.hot {
		if !s.apart[i] {
			continue
		}
		if err := c.Do(ctx, c.B().Ping().Build()).Error(); err != nil {
			return fmt.Errorf("redis %s: %w", HotName(i), err)
		}
	}
	return nil
}

// Close closes every client.
func (s *Set) Close() {
	s.Default.Close()
	for i, c := range s.hot {
		if s.apart[i] {
			c.Close()
		}
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

// Wrap replaces every client c by f(idx, c), idx as Place answers it (-1
// for default). A test seam (round-trip counters); call it before use.
func (s *Set) Wrap(f func(idx int, c rueidis.Client) rueidis.Client) {
	def := s.Default
	s.Default = f(-1, def)
	for i, c := range s.hot {
		if s.apart[i] {
			s.hot[i] = f(i, c)
		} else {
			s.hot[i] = s.Default
		}
	}
}
