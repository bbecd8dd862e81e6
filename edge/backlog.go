package edge

import (
	"context"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/zap"

	"seckill/internal/lag"
)

// Backlog backpressure (DESIGN §11, seed §16 scenario 2): an edge that
// keeps answering QUEUING while the consumers fall behind only makes the
// wait for results longer. The edge samples the consumer group's offsets;
// when the lag needs more than High to drain (on backlogSustain samples in
// a row) at the rate the group drains
// at when busy (or has waited longer than High with nothing committed:
// lag.Drain), the admission gate for new purchases shrinks to a share of
// the rate the group commits (backlogAdmitShare, split among the live
// edges), so the backlog shrinks while the sale goes on at the pace the
// consumers keep, and every purchase past it is answered 429 BACKLOG with
// a Retry-After of the time the lag needs to come down to Low. Once the
// drain time is at most Low the gate opens again by itself. Results, the
// activity and every other route are not touched: buyers with a ticket
// keep polling.

// Backlog configures the backlog backpressure (WithBacklog); the app fills
// it from consumer.lag_high, consumer.lag_low and consumer.lag_interval.
type Backlog struct {
	// High: the gate shrinks once the lag needs more than High to drain.
	High time.Duration
	// Low: it opens again once the lag needs at most Low (< High).
	Low time.Duration
	// Every is the sampling interval.
	Every time.Duration
	// Read returns the consumer group's summed offsets.
	Read func(context.Context) (lag.Offsets, error)
}

const (
	// backlogWindow is how many samples the drain rate is measured over at
	// least; the window also spans backlogWindowHighs × High, so that a
	// group slowed to one commit every few seconds shows two commits in
	// it (the rate is measured between commits) at any sampling interval.
	backlogWindow      = 10
	backlogWindowHighs = 3
	backlogWindowMax   = 1000
	// backlogAdmitShare is the share of the measured drain rate the edges
	// together admit while the gate is shrunk: the backlog then drains
	// at least at the other half.
	backlogAdmitShare = 0.5
	// backlogStale is how many samples in a row may fail before the gate
	// opens again: an edge that cannot see the lag does not keep
	// refusing buyers on an old reading (the consumers are not on their
	// path, and a broker that is really away fails the purchase anyway).
	backlogStale = 3
	// backlogSustain is how many samples in a row the drain time must be
	// over High before the gate shrinks: a consumer that comes back from
	// a failed batch drains slowly for a moment (message by message, one
	// partition after the other) before it finds its pace again, and one
	// slow reading must not turn buyers away.
	backlogSustain = 5
	// backlogRetryMax bounds the Retry-After of 429 BACKLOG: a buyer told
	// to come back in more than a minute has left the sale.
	backlogRetryMax = time.Minute
)

// WithBacklog turns the backlog backpressure on (b.High > 0).
func WithBacklog(b Backlog) Option {
	return func(s *Server) {
		if b.High > 0 && b.Read != nil && b.Every > 0 {
			s.backlogCfg = &b
		}
	}
}

// backlog is the guard's state: written by its sampler, read by purchases
// with atomic loads only. Safe for concurrent use.
type backlog struct {
	cfg   Backlog
	live  *atomic.Int64 // the live edge count (admission.live)
	drain *lag.Drain    // the sampler's own
	log   *zap.Logger
	warn  *rareWarner

	over     int // samples in a row over High; the sampler's own
	shedding atomic.Bool
	interval atomic.Int64 // nanoseconds between admitted purchases while shedding; 0: none admitted
	retry    atomic.Int64 // Retry-After while shedding, nanoseconds
	tat      atomic.Int64 // the rate limiter's theoretical arrival time (GCRA), unix nanos

	seconds, rate, shed prometheus.Gauge
}

func newBacklog(cfg Backlog, live *atomic.Int64, m *metrics, log *zap.Logger, warn *rareWarner) *backlog {
	return &backlog{cfg: cfg, live: live, drain: lag.NewDrain(backlogSamples(cfg)), log: log, warn: warn,
		seconds: m.backlogSeconds, rate: m.backlogRate, shed: m.backlogShedding}
}

// backlogSamples is the drain window in samples for cfg.
func backlogSamples(cfg Backlog) int {
	n := backlogWindow
	if cfg.Every > 0 {
		n = max(n, int(backlogWindowHighs*cfg.High/cfg.Every)+1)
	}
	return min(n, backlogWindowMax)
}

// allow admits one purchase; false with the Retry-After to send. Lock-free:
// while the gate is open it is one atomic load.
func (b *backlog) allow() (bool, time.Duration) {
	if !b.shedding.Load() {
		return true, 0
	}
	retry := time.Duration(b.retry.Load())
	iv := b.interval.Load()
	if iv <= 0 {
		return false, retry
	}
	// GCRA with a burst of one second of the admitted rate.
	now := time.Now().UnixNano()
	for {
		tat := b.tat.Load()
		next := max(tat, now) + iv
		if next-now > int64(time.Second)+iv {
			return false, retry
		}
		if b.tat.CompareAndSwap(tat, next) {
			return true, 0
		}
	}
}

// run samples every cfg.Every until ctx ends.
func (b *backlog) run(ctx context.Context) {
	t := time.NewTicker(b.cfg.Every)
	defer t.Stop()
	fails := 0
	for {
		rctx, cancel := context.WithTimeout(ctx, b.cfg.Every)
		off, err := b.cfg.Read(rctx)
		cancel()
		switch {
		case ctx.Err() != nil:
			return
		case err != nil:
			fails++
			b.warn.warn("edge backlog: consumer offsets unreadable", err)
			if fails == backlogStale && b.shedding.Load() {
				b.log.Warn("edge backlog: offsets unreadable for several samples; admitting purchases again", zap.Int("samples", fails))
				b.set(false, lag.Estimate{})
			}
		default:
			fails = 0
			b.observe(time.Now(), off)
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// observe takes one sample and decides.
func (b *backlog) observe(now time.Time, off lag.Offsets) {
	e := b.drain.Observe(now, off)
	b.seconds.Set(e.Seconds)
	b.rate.Set(e.Rate)
	on := b.shedding.Load()
	if e.Seconds > b.cfg.High.Seconds() {
		b.over++
	} else {
		b.over = 0
	}
	switch {
	case !on && b.over >= backlogSustain:
		b.log.Warn("edge backlog: the consumers fall behind; shrinking admission to the drain rate",
			zap.Int64("lag", e.Lag), zap.Float64("drainPerSecond", e.Rate), zap.Float64("committingPerSecond", e.Committing), zap.Float64("drainSeconds", e.Seconds),
			zap.Duration("lagHigh", b.cfg.High))
		b.set(true, e)
	case on && e.Seconds <= b.cfg.Low.Seconds():
		b.log.Info("edge backlog: drained below consumer.lag_low; admitting purchases again",
			zap.Int64("lag", e.Lag), zap.Float64("drainSeconds", e.Seconds), zap.Duration("lagLow", b.cfg.Low))
		b.set(false, e)
	case on:
		b.set(true, e)
	}
}

// set publishes the gate: the admitted rate and Retry-After from e while
// on.
func (b *backlog) set(on bool, e lag.Estimate) {
	if on {
		b.retry.Store(int64(backlogRetry(e.Seconds, b.cfg.Low)))
		var iv int64
		// A share of what the group commits now, not of what it could:
		// a stalled group admits nothing.
		if admit := backlogAdmitShare * e.Committing / float64(max(b.live.Load(), 1)); admit > 0 {
			iv = int64(float64(time.Second) / admit)
		}
		b.interval.Store(iv)
	}
	if b.shedding.Swap(on) != on {
		b.tat.Store(0)
	}
	if on {
		b.shed.Set(1)
	} else {
		b.shed.Set(0)
	}
}

// backlogRetry is how long the lag needs to come down to low (seconds −
// low), at least a second and at most backlogRetryMax.
func backlogRetry(seconds float64, low time.Duration) time.Duration {
	d := time.Duration((seconds - low.Seconds()) * float64(time.Second))
	return min(max(d, time.Second), backlogRetryMax)
}
