package edge

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"time"

	"github.com/redis/rueidis"
)

// clockSamples is how many TIME reads one sync takes. Sequential, not
// pipelined: each read then has its own send and receive time, and the
// quickest of them brackets the server's clock most tightly (a pipelined
// batch shares one send time, and its later replies wait behind the
// earlier ones). A handful of loopback or LAN round trips every
// ClockSyncInterval costs nothing.
const clockSamples = 6

// clockDriftSlack is added to the estimate's error bound for what the two
// clocks may drift apart until the next sync: 1ms covers 200ppm over the
// default 5s interval.
const clockDriftSlack = time.Millisecond

// serverClock is Redis server time as this edge estimates it: the local
// clock plus an offset sampled from Redis TIME. The occupy script judges a
// sale's window by Redis TIME, so an edge whose clock is skewed would
// otherwise let requests through before the start (to be refused by the
// script) or turn buyers away who would have been accepted.
type serverClock struct {
	local func() time.Time
	// injected says local is a test's clock (WithClock): at then reads it
	// instead of the request's arrival time.
	injected bool
	source   func(context.Context) (time.Time, error) // nil: local is already server time
	offset   atomic.Int64                             // nanoseconds to add to local
	// errBound is how far now() may be from server time, in nanoseconds:
	// half the round trip of the sample the offset came from, plus
	// clockDriftSlack. Zero until a sync succeeds, and always when local
	// is server time. It is stored apart from offset; a reader that sees
	// one sync's offset with another's bound is off by microseconds.
	errBound atomic.Int64
}

// now returns server time in unix nanoseconds. No allocation, no lock.
func (c *serverClock) now() int64 { return c.local().UnixNano() + c.offset.Load() }

// at returns server time in unix nanoseconds at the local time t: a
// request's arrival, fasthttp's RequestCtx.Time, which fasthttp reads for
// every request anyway. The request path reads no clock of its own (a
// clock read is a system call on some virtual machines). Where the local
// clock is a test's (WithClock), at is now.
func (c *serverClock) at(t time.Time) int64 {
	// A zero t is a RequestCtx fasthttp did not serve: read the clock.
	if c.injected || t.IsZero() {
		return c.now()
	}
	return t.UnixNano() + c.offset.Load()
}

// slack returns the estimate's error bound in nanoseconds (see errBound):
// server time is within now()±slack(). No allocation, no lock.
func (c *serverClock) slack() int64 { return c.errBound.Load() }

// clockSample is one read of the source: the local time the request was
// sent, its round trip, and the source's time, read somewhere within the
// round trip.
type clockSample struct {
	sent time.Time
	rtt  time.Duration
	ref  time.Time
}

// offset estimates the source's clock minus the local one, taking the
// source's read to be at the midpoint of the round trip. The true offset
// is within rtt/2 of it (in the clocks' resolution).
func (s clockSample) offset() time.Duration {
	return s.ref.Sub(s.sent.Add(s.rtt / 2))
}

// quickest returns the sample with the shortest round trip (the first of
// equals), whose midpoint is the tightest estimate: a sample delayed by
// load on either side (a descheduled edge, a busy Redis, a queue on the
// connection) has a long round trip and is passed over. Samples with a
// negative round trip (a local clock stepped back) are skipped.
func quickest(samples []clockSample) (clockSample, bool) {
	var best clockSample
	found := false
	for _, s := range samples {
		if s.rtt < 0 {
			continue
		}
		if !found || s.rtt < best.rtt {
			best, found = s, true
		}
	}
	return best, found
}

// sync reads the source clockSamples times and keeps the offset of the
// quickest read. Reads that fail are skipped; it fails only if none
// succeeded (the last offset is then kept). It does not allocate for the
// samples.
func (c *serverClock) sync(ctx context.Context) error {
	if c.source == nil {
		return nil
	}
	var buf [clockSamples]clockSample
	n := 0
	var err error
	for range clockSamples {
		t0 := c.local()
		ref, e := c.source(ctx)
		t1 := c.local()
		if e != nil {
			err = e
			if ctx.Err() != nil {
				break
			}
			continue
		}
		buf[n] = clockSample{sent: t0, rtt: t1.Sub(t0), ref: ref}
		n++
	}
	best, ok := quickest(buf[:n])
	if !ok {
		if err == nil {
			err = errors.New("clock sync: no sample with a usable round trip")
		}
		return err
	}
	c.offset.Store(int64(best.offset()))
	c.errBound.Store(int64((best.rtt+1)/2 + clockDriftSlack))
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
