package engine

import (
	"context"
	"crypto/rand"
	"fmt"
	"strconv"
	"time"

	"github.com/IBM/sarama"
	"github.com/redis/rueidis"
	"go.uber.org/zap"

	"seckill/sale"
)

// The pre-queue (sale.Activity.Prequeue, DESIGN §13): the attempts a SKU's
// line took before the activity's start are served in an order drawn at
// the start, then the rest of the line in order.
//
// When a claim meets the first pre-queued attempt of a SKU it waits until
// the start (and drawGrace, for the attempts the edges were still
// appending), then records the draw in sale.PrequeueKey — a seed from
// crypto/rand and the partition's high water mark as the cutoff, written
// once (HSETNX): a drainer that takes the partition over later reads it —
// reads the partition up to the cutoff, serves the SKU's pre-queued
// attempts below it in the order sale.Draw.Permute gives, and then the
// attempts it read past (other SKUs', later arrivals) in line order.
// The cutoff is at most engine.queue.prequeue_max attempts past the
// first pre-queued one, which bounds what the drainer holds: pre-queued
// attempts past it are served in line order after the drawn ones.
// Nothing is marked consumed until the whole pre-queue is served, so a
// drainer that dies mid-way leaves the partition to one that reads the
// same attempts, draws the same order from the recorded seed and skips
// the tickets already decided. Once served, the record says "done".
//
// While a SKU's pre-queue waits for its start, the other lines of its
// partition wait with it.

// drawGrace is how long after the start the draw waits, for the attempts
// taken just before it to reach the topic.
const drawGrace = time.Second

// prequeues is one claim's state of the pre-queues: the SKUs whose
// pre-queue is served (or none to serve), with the cutoff past which
// their attempts are in line order.
type prequeues struct {
	done map[skuKey]int64
}

// prequeueAt finds the first attempt of win that opens a pre-queue this
// claim has not served: its index and the attempt (-1 for none).
func (d *Drainer) prequeueAt(win []*sarama.ConsumerMessage, pq *prequeues) (int, attempt) {
	if !d.anyPrequeue() {
		// The common case: no activity has a pre-queue, and the window
		// decodes and verifies its attempts once, not here as well.
		return -1, attempt{}
	}
	for i, km := range win {
		at, why, _ := d.decode(km)
		if why != "" || !at.a.Prequeued(at.m.AcceptedAt) {
			continue
		}
		if _, ok := pq.done[skuKey{at.a.ID, at.k.ID}]; ok {
			continue
		}
		return i, at
	}
	return -1, attempt{}
}

// anyPrequeue reports whether an activity of the catalog has a pre-queue.
func (d *Drainer) anyPrequeue() bool {
	for _, a := range d.e.stock.Catalog().Activities() {
		if a.Prequeue > 0 {
			return true
		}
	}
	return false
}

// servePrequeue serves the pre-queue of first's SKU, rest starting with
// first's own message; it returns the attempts read ahead that are still
// to be served in line order. false: the session ended (nothing of the
// pre-queue was marked consumed).
func (d *Drainer) servePrequeue(ctx context.Context, sess sarama.ConsumerGroupSession, claim sarama.ConsumerGroupClaim,
	prog *progress, first attempt, rest []*sarama.ConsumerMessage, pq *prequeues) ([]*sarama.ConsumerMessage, bool) {
	a, k, part := first.a, first.k, claim.Partition()
	key := skuKey{a.ID, k.ID}
	if pq.done == nil {
		pq.done = map[skuKey]int64{}
	}
	if wait := time.Until(a.Start.Add(drawGrace)); wait > 0 {
		t := time.NewTimer(wait)
		select {
		case <-t.C:
		case <-ctx.Done():
			t.Stop()
			return nil, false
		}
	}
	c := d.e.stock.Client(a.ID, k.ID)
	pk := sale.PrequeueKey(a.ID, k.ID)
	// The broker's high water mark, not the claim's: the claim's is of
	// its last fetch, which stops while its buffer is full.
	var high int64
	for {
		var err error
		if high, err = d.kc.GetOffset(claim.Topic(), part, sarama.OffsetNewest); err == nil {
			break
		}
		if !d.backoff(ctx, err) {
			return nil, false
		}
	}
	// The cutoff: what the partition holds now, within PrequeueMax of the
	// first pre-queued attempt (what is read ahead is held in memory).
	cutoff := min(max(high, rest[len(rest)-1].Offset+1), rest[0].Offset+int64(d.cfg.PrequeueMax))
	draw, done, ok := d.draw(ctx, c, pk, part, cutoff)
	if !ok {
		return nil, false
	}
	if done || draw.Partition != part {
		if !done {
			d.log.Error("pre-queue drawn on another partition; its attempts here are served in line order",
				zap.Int64("activity", a.ID), zap.Int64("sku", k.ID), zap.Int32("partition", part), zap.Int32("drawnOn", draw.Partition))
		}
		pq.done[key] = draw.Cutoff
		return rest, true
	}
	msgs := claim.Messages()
	for rest[len(rest)-1].Offset < draw.Cutoff-1 {
		select {
		case m, ok := <-msgs:
			if !ok {
				return nil, false
			}
			rest = append(rest, m)
		case <-ctx.Done():
			return nil, false
		}
	}
	var offs []int64
	at := map[int64]*sarama.ConsumerMessage{}
	others := make([]*sarama.ConsumerMessage, 0, len(rest))
	for _, km := range rest {
		if km.Offset < draw.Cutoff {
			if t, why, _ := d.decode(km); why == "" && t.a.ID == a.ID && t.k.ID == k.ID && t.a.Prequeued(t.m.AcceptedAt) {
				offs = append(offs, km.Offset)
				at[km.Offset] = km
				continue
			}
		}
		others = append(others, km)
	}
	order := draw.Permute(offs)
	d.record(ctx, c, pk, "order", string(sale.AppendOrder(nil, order)))
	d.log.Info("pre-queue drawn", zap.Int64("activity", a.ID), zap.Int64("sku", k.ID), zap.String("draw", draw.String()),
		zap.Int("attempts", len(order)))
	win := make([]*sarama.ConsumerMessage, 0, d.cfg.Window)
	for i := 0; i < len(order); i += d.cfg.Window {
		win = win[:0]
		for _, o := range order[i:min(i+d.cfg.Window, len(order))] {
			win = append(win, at[o])
		}
		if !d.window(ctx, part, win) {
			return nil, false
		}
		prog.done(rest[0].Offset, len(win), time.Now())
	}
	next := rest[len(rest)-1].Offset + 1
	if len(others) > 0 {
		next = others[0].Offset
	}
	sess.MarkOffset(claim.Topic(), part, next, "")
	prog.done(next, 0, time.Now())
	d.record(ctx, c, pk, "done", strconv.Itoa(len(order)))
	pq.done[key] = draw.Cutoff
	return others, true
}

// draw reads the SKU's recorded draw, or records one (seed from
// crypto/rand, cutoff) when there is none; done: its pre-queue was served
// already. false: the session ended.
func (d *Drainer) draw(ctx context.Context, c rueidis.Client, pk string, part int32, cutoff int64) (sale.Draw, bool, bool) {
	for {
		dr, done, err := d.readDraw(ctx, c, pk, part, cutoff)
		if err == nil {
			return dr, done, true
		}
		if !d.backoff(ctx, err) {
			return dr, false, false
		}
	}
}

func (d *Drainer) readDraw(ctx context.Context, c rueidis.Client, pk string, part int32, cutoff int64) (sale.Draw, bool, error) {
	fresh := sale.Draw{Partition: part, Cutoff: cutoff}
	if _, err := rand.Read(fresh.Seed[:]); err != nil {
		return fresh, false, fmt.Errorf("pre-queue seed: %w", err)
	}
	ttl := int64(d.e.res.TTL().Seconds())
	rs := c.DoMulti(ctx, c.B().Hsetnx().Key(pk).Field("draw").Value(fresh.String()).Build(),
		c.B().Expire().Key(pk).Seconds(ttl).Build(),
		c.B().Hmget().Key(pk).Field("draw", "done").Build())
	for _, r := range rs {
		if err := r.Error(); err != nil {
			return fresh, false, fmt.Errorf("pre-queue draw %s: %w", pk, err)
		}
	}
	vs, err := rs[2].ToArray()
	if err != nil || len(vs) != 2 {
		return fresh, false, fmt.Errorf("pre-queue draw %s: %d fields, %v", pk, len(vs), err)
	}
	v, err := vs[0].ToString()
	if err != nil {
		return fresh, false, fmt.Errorf("pre-queue draw %s: %w", pk, err)
	}
	dr, err := sale.ParseDraw(v)
	if err != nil {
		// A record that cannot be read cannot be followed: the line
		// waits for on-call rather than serve another order.
		d.log.Error("pre-queue draw unreadable; the line waits", zap.String("key", pk), zap.Error(err))
		return dr, false, err
	}
	_, doneErr := vs[1].ToString()
	return dr, doneErr == nil, nil
}

// record writes field of the pre-queue's record (best effort: the order
// is derived again from the draw, "done" only spares the next drainer the
// read of a pre-queue all of whose tickets are decided).
func (d *Drainer) record(ctx context.Context, c rueidis.Client, pk, field, v string) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 2*d.e.cfg.OccupyTimeout)
	defer cancel()
	if err := c.Do(ctx, c.B().Hset().Key(pk).FieldValue().FieldValue(field, v).Build()).Error(); err != nil {
		d.log.Warn("pre-queue record not written", zap.String("key", pk), zap.String("field", field), zap.Error(err))
	}
}
