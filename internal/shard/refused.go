package shard

import (
	"context"
	"errors"
	"time"

	"github.com/redis/rueidis"
)

// ErrNoShard: a SKU names a hot shard (hotShard) this process's redis.hot
// does not have. Every command for the SKU fails with it, so the SKU is
// refused (busy) rather than read or written on another shard.
var ErrNoShard = errors.New("the SKU names a hot shard redis.hot does not configure")

// refused is the client of a shard that does not exist: every command
// fails with ErrNoShard. b lends its command builder (a builder only
// formats commands).
type refused struct{ b rueidis.Client }

func (r refused) B() rueidis.Builder { return r.b.B() }

func (refused) Do(context.Context, rueidis.Completed) rueidis.RedisResult {
	return rueidis.NewErrorResult(ErrNoShard)
}

func (refused) DoMulti(_ context.Context, multi ...rueidis.Completed) []rueidis.RedisResult {
	out := make([]rueidis.RedisResult, len(multi))
	for i := range out {
		out[i] = rueidis.NewErrorResult(ErrNoShard)
	}
	return out
}

func (refused) DoCache(context.Context, rueidis.Cacheable, time.Duration) rueidis.RedisResult {
	return rueidis.NewErrorResult(ErrNoShard)
}

func (refused) DoMultiCache(_ context.Context, multi ...rueidis.CacheableTTL) []rueidis.RedisResult {
	out := make([]rueidis.RedisResult, len(multi))
	for i := range out {
		out[i] = rueidis.NewErrorResult(ErrNoShard)
	}
	return out
}

// DoStream and DoMultiStream cannot carry an error in a value built
// outside rueidis; nothing in this module streams.
func (refused) DoStream(context.Context, rueidis.Completed) rueidis.RedisResultStream {
	panic("shard: DoStream on a SKU whose hot shard is not configured")
}

func (refused) DoMultiStream(context.Context, ...rueidis.Completed) rueidis.MultiRedisResultStream {
	panic("shard: DoMultiStream on a SKU whose hot shard is not configured")
}

func (refused) Receive(context.Context, rueidis.Completed, func(rueidis.PubSubMessage)) error {
	return ErrNoShard
}

func (refused) Dedicated(func(rueidis.DedicatedClient) error) error { return ErrNoShard }

func (refused) Dedicate() (rueidis.DedicatedClient, func()) {
	panic("shard: Dedicate on a SKU whose hot shard is not configured")
}

func (refused) Nodes() map[string]rueidis.Client { return nil }

func (refused) Mode() rueidis.ClientMode { return rueidis.ClientModeStandalone }

func (refused) Close() {}
