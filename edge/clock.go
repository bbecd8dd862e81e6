package edge

import (
	"context"
	"fmt"
	"sync/atomic"
	"time"

	"github.com/redis/rueidis"
)

// serverClock is Redis server time as this edge estimates it: the local
// clock plus an offset sampled from Redis TIME. The occupy script judges a
// sale's window by Redis TIME, so an edge whose clock is skewed would
// otherwise let requests through before the start (to be refused by the
// script) or turn buyers away who would have been accepted.
type serverClock struct {
	local  func() time.Time
	source func(context.Context) (time.Time, error) // nil: local is already server time
	offset atomic.Int64                             // nanoseconds to add to local
}

// now returns server time in unix nanoseconds. No allocation.
func (c *serverClock) now() int64 { return c.local().UnixNano() + c.offset.Load() }

// sync samples the source once, halving the round trip as the estimate of
// when the source read its clock.
func (c *serverClock) sync(ctx context.Context) error {
	if c.source == nil {
		return nil
	}
	t0 := c.local()
	ref, err := c.source(ctx)
	if err != nil {
		return err
	}
	t1 := c.local()
	mid := t0.Add(t1.Sub(t0) / 2)
	c.offset.Store(ref.Sub(mid).Nanoseconds())
	return nil
}

// redisTime reads TIME from rdb.
func redisTime(rdb rueidis.Client) func(context.Context) (time.Time, error) {
	return func(ctx context.Context) (time.Time, error) {
		v, err := rdb.Do(ctx, rdb.B().Time().Build()).AsIntSlice()
		if err != nil {
			return time.Time{}, fmt.Errorf("redis TIME: %w", err)
		}
		if len(v) != 2 {
			return time.Time{}, fmt.Errorf("redis TIME: %d values", len(v))
		}
		return time.Unix(v[0], v[1]*1000), nil
	}
}
