package testenv

import (
	"context"
	"sync/atomic"

	"github.com/redis/rueidis"
)

// Trips is a rueidis client that counts its round trips: each Do is one,
// each DoMulti (one pipeline) is one. Wrap a shard's client with
// CountTrips, pass the wrapper where the client goes, and read Count
// before and after the work. (A DoMulti on a Redis Cluster reaches every
// node it touches in parallel; it still counts one.)
type Trips struct {
	rueidis.Client
	n atomic.Int64
}

// CountTrips wraps c.
func CountTrips(c rueidis.Client) *Trips { return &Trips{Client: c} }

// Count returns the round trips so far.
func (t *Trips) Count() int64 { return t.n.Load() }

// Do counts one round trip.
func (t *Trips) Do(ctx context.Context, cmd rueidis.Completed) rueidis.RedisResult {
	t.n.Add(1)
	return t.Client.Do(ctx, cmd)
}

// DoMulti counts one round trip for a pipeline of any length (none for an
// empty one, which sends nothing).
func (t *Trips) DoMulti(ctx context.Context, cmds ...rueidis.Completed) []rueidis.RedisResult {
	if len(cmds) > 0 {
		t.n.Add(1)
	}
	return t.Client.DoMulti(ctx, cmds...)
}

// CountShardTrips wraps every client of a shard set with CountTrips through
// its Wrap method (shard.Set.Wrap; index -1 is the default Redis) and
// returns the default Redis' counter and the hot shards' (the last one
// wrapped: tests that count use one hot shard).
func CountShardTrips(wrap func(func(idx int, c rueidis.Client) rueidis.Client)) (def, hot *Trips) {
	wrap(func(idx int, c rueidis.Client) rueidis.Client {
		t := CountTrips(c)
		if idx < 0 {
			def = t
		} else {
			hot = t
		}
		return t
	})
	return def, hot
}
