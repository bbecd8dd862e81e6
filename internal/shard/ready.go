package shard

import (
	"context"
	"errors"
	"fmt"

	"github.com/redis/rueidis"

	"seckill/internal/ready"
)

// Dependencies are the deployments of cfg as start-up dependencies:
// "redis.default", and "redis.hot0", "redis.hot1", … for each hot shard
// that is a deployment of its own. Each is ready once it answers PING
// through a client built as Open builds it.
func Dependencies(cfg Config) []ready.Dependency {
	deps := []ready.Dependency{{Name: "redis.default", Check: func(ctx context.Context) error { return Check(ctx, cfg, cfg.Default) }}}
	for i, h := range cfg.Hot.Shards() {
		if sameAddrs(h.Addrs, cfg.Default.Addrs) {
			continue
		}
		deps = append(deps, ready.Dependency{Name: "redis." + HotName(i), Check: func(ctx context.Context) error { return Check(ctx, cfg, h) }})
	}
	return deps
}

// Check connects to r as Open does (password, database, timeouts) and
// sends PING: nil once r answers commands. While r is down it returns the
// dial error; while r loads its dataset from disk, its LOADING answer
// (IsLoading), which rueidis reports already when it connects. The client
// does not retry: one check is one attempt.
func Check(ctx context.Context, cfg Config, r Redis) error {
	o, err := clientOption(cfg, r)
	if err != nil {
		return fmt.Errorf("%v: %w", r.Addrs, err)
	}
	o.DisableRetry = true
	c, err := rueidis.NewClient(o)
	if err != nil {
		return fmt.Errorf("%v: %w", r.Addrs, err)
	}
	defer c.Close()
	if err := c.Do(ctx, c.B().Ping().Build()).Error(); err != nil {
		return fmt.Errorf("%v: %w", r.Addrs, err)
	}
	return nil
}

// IsLoading reports whether err is (or wraps) Redis's LOADING answer: the
// server restarted and is still reading its dataset from disk. It holds
// data, just not yet: callers answer busy and wait, they never treat the
// keys as lost.
func IsLoading(err error) bool {
	var re *rueidis.RedisError
	return errors.As(err, &re) && re.IsLoading()
}
