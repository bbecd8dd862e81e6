package engine

import (
	"context"
	"fmt"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	"go.uber.org/zap"

	"seckill/sale"
)

// Queue mode by itself (engine.queue.auto_latency, DESIGN §13): seed §16
// scenario 1's answer to a jittering shard is to turn its hot SKUs into a
// waiting line — answer at once, decide at the pace the shard keeps. The
// engine already times every occupy per shard (seckill_engine_lua_seconds)
// and counts its failures; AutoQueue reads those once a second — nothing
// on the buyer's path — and when at least half of a shard's occupies were
// slower than the threshold, or failed, for auto_for in a row, it puts
// every direct SKU of that shard selling now into queue mode, in the
// catalog every edge and drainer loads, and announces the change. Only the
// catalog: on-call keeps it (`seckill admin mode SKU queue`, which writes
// the database too) or switches back; nothing switches back by itself, so
// a shard that recovers does not flap the sale between modes.

const (
	// autoEvery is how often the shard timings are read.
	autoEvery = time.Second
	// autoMinOccupies is how many occupies a second a shard needs for a
	// reading: a trickle of slow ones is no degraded sale.
	autoMinOccupies = 10
	// autoSlowShare is the share of slow or failed occupies that makes a
	// second slow.
	autoSlowShare = 0.5
)

// autoQueue is AutoQueue's state: the last reading of each shard and how
// many seconds in a row it was slow. Its goroutine's own.
type autoQueue struct {
	e     *Local
	cfg   QueueConfig
	every time.Duration
	bound float64 // the histogram bound the threshold rounds down to, seconds
	last  []shardReading
	slow  []int
	log   *zap.Logger
}

// shardReading is one shard's cumulative occupy counts.
type shardReading struct {
	all, fast, failed uint64
}

// AutoQueue runs the switch to queue mode by itself until ctx ends, if
// cfg.AutoLatency is set (else it returns at once). The drainer of
// engine.queue serves the SKUs it switches.
func (e *Local) AutoQueue(ctx context.Context, cfg QueueConfig, log *zap.Logger) {
	if !cfg.Enabled || cfg.AutoLatency <= 0 {
		return
	}
	q := e.newAutoQueue(cfg, log)
	t := time.NewTicker(q.every)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			q.tick(ctx, time.Now())
		}
	}
}

func (e *Local) newAutoQueue(cfg QueueConfig, log *zap.Logger) *autoQueue {
	q := &autoQueue{e: e, cfg: cfg, every: autoEvery, log: log,
		last: make([]shardReading, len(e.shardLbl)), slow: make([]int, len(e.shardLbl))}
	for _, b := range luaBuckets {
		if b <= cfg.AutoLatency.Seconds() {
			q.bound = b
		}
	}
	for i := range q.last {
		q.last[i] = q.read(i)
	}
	return q
}

// read is shard index i's counts now.
func (q *autoQueue) read(i int) shardReading {
	var r shardReading
	var m dto.Metric
	if h, ok := q.e.shardLbl[i].lua.(prometheus.Metric); ok && h.Write(&m) == nil && m.Histogram != nil {
		r.all = m.Histogram.GetSampleCount()
		for _, b := range m.Histogram.GetBucket() {
			if b.GetUpperBound() == q.bound {
				r.fast = b.GetCumulativeCount()
			}
		}
	}
	m.Reset()
	if c, ok := q.e.shardLbl[i].errors.(prometheus.Metric); ok && c.Write(&m) == nil && m.Counter != nil {
		r.failed = uint64(m.Counter.GetValue())
	}
	return r
}

// tick takes one reading of every shard and switches the SKUs of those
// slow for long enough.
func (q *autoQueue) tick(ctx context.Context, now time.Time) {
	need := int((q.cfg.AutoFor + q.every - 1) / q.every)
	for i := range q.last {
		r := q.read(i)
		d := shardReading{all: r.all - q.last[i].all, fast: r.fast - q.last[i].fast, failed: r.failed - q.last[i].failed}
		q.last[i] = r
		// A failed occupy is timed too (seckill_engine_lua_seconds counts
		// every call), and one that timed out is slow as well: the slow
		// ones are at least the slow and at least the failed.
		slow := d.all - min(d.fast, d.all)
		if d.failed > slow {
			slow = d.failed
		}
		if d.all < autoMinOccupies || float64(slow) < autoSlowShare*float64(d.all) {
			q.slow[i] = 0
			continue
		}
		q.slow[i]++
		if q.slow[i] >= need {
			q.degrade(ctx, i-1, now, d, slow)
		}
	}
}

// degrade puts every direct SKU on shard index idx (-1: the default Redis)
// selling at now into queue mode.
func (q *autoQueue) degrade(ctx context.Context, idx int, now time.Time, d shardReading, slow uint64) {
	st := q.e.stock
	for _, a := range st.Catalog().Activities() {
		if now.Before(a.Start) || !now.Before(a.End) || a.State != sale.StateOnline {
			continue
		}
		var skus []int64
		for j := range a.SKUs {
			k := &a.SKUs[j]
			if !k.Queued() && !k.Split() && st.Place(a.ID, k) == idx {
				skus = append(skus, k.ID)
			}
		}
		if len(skus) == 0 {
			continue
		}
		_, err := st.Catalog().Update(ctx, a.ID, func(a *sale.Activity) {
			for _, id := range skus {
				if k := a.SKU(id); k != nil && !k.Queued() && !k.Split() {
					k.Mode, k.Rate = sale.ModeQueue, q.cfg.AutoRate
				}
			}
		})
		shard := st.Shards().Name(idx)
		if err != nil {
			q.log.Error("shard degraded; could not switch its SKUs to queue mode", zap.String("shard", shard),
				zap.Int64("activity", a.ID), zap.Int64s("skus", skus), zap.Error(err))
			continue
		}
		st.Publish(ctx, sale.Event{Kind: sale.EventActivity, Activity: a.ID})
		q.e.m.autoQueue.WithLabelValues(shard).Add(float64(len(skus)))
		q.log.Warn("shard degraded: its SKUs entered queue mode by themselves (on-call switches them back: seckill admin mode SKU direct)",
			zap.String("shard", shard), zap.Int64("activity", a.ID), zap.Int64s("skus", skus),
			zap.String("slow", fmt.Sprintf("%d of %d occupies over %v or failed, for %v", slow, d.all, q.cfg.AutoLatency, q.cfg.AutoFor)),
			zap.Int64("rate", q.cfg.AutoRate))
	}
}
