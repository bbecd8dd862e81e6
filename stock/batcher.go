package stock

import (
	"context"
	"fmt"
	"sync"
	"time"

	"seckill/sale"
)

// maxInFlight bounds the script calls of one SKU in flight at once. A second
// call goes out only for a full batch: under a deep queue one call at a time
// caps a SKU at max_size per round trip, and buyers then wait out
// engine.occupy_timeout in the queue (503) while Redis idles between calls.
const maxInFlight = 4

// Batcher is group-commit occupy: it coalesces concurrent occupies of one
// SKU into one occupy_batch.lua call. A call goes out at once when none of
// that SKU is in flight, so an idle SKU adds no wait; occupies that arrive
// while one is in flight queue up and go out together as soon as it
// returns, at most MaxSize per call, so batches grow with load and shrink
// with it. Only when a full batch is waiting does another call go out beside
// the one in flight (at most maxInFlight). Each buyer gets exactly the
// answer of a single occupy (a script runs its buyers in arrival order and
// script calls are atomic). Safe for concurrent use.
type Batcher struct {
	stock   *Stock
	max     int
	timeout time.Duration
	queues  sync.Map // bucketKey -> *skuQueue
	calls   sync.Pool
	onBatch func(n int) // the size of each script call (metrics, tests)
}

// BatcherConfig is how the engine drives a Batcher.
type BatcherConfig struct {
	// MaxSize bounds the buyers of one script call (engine.batch.max_size),
	// clamped to 1..1024 (CheckBatchSize).
	MaxSize int
	// Timeout bounds each script call (engine.occupy_timeout): a batch is
	// not cut short by one buyer's context.
	Timeout time.Duration
	// OnBatch, if set, is told the size of each script call (metrics).
	OnBatch func(n int)
}

// NewBatcher returns a group commit over s, driven by the engine.
func (s *Stock) NewBatcher(cfg BatcherConfig) *Batcher {
	b := &Batcher{stock: s, max: min(max(cfg.MaxSize, 1), maxBatch), timeout: cfg.Timeout, onBatch: cfg.OnBatch}
	b.calls.New = func() any { return &occupyCall{done: make(chan struct{}, 1)} }
	return b
}

// bucketKey names one bucket of one SKU (sale.NoBucket: a SKU not split).
type bucketKey struct {
	activity, sku int64
	bucket        int
}

// occupyCall is one buyer waiting in a queue.
type occupyCall struct {
	ctx     context.Context
	expired <-chan struct{} // closed when the buyer stops waiting (nil: never, ctx alone)
	a       *sale.Activity
	sku     *sale.SKU
	x       Extras
	buyer   Buyer
	res     OccupyResult
	err     error
	done    chan struct{} // cap 1: the flusher never blocks on a gone caller
}

// skuQueue is one SKU's group commit. The goroutine that finds no call in
// flight (or a full batch waiting and fewer than maxInFlight calls out)
// sends a batch itself and hands what queued meanwhile to a flusher.
type skuQueue struct {
	keys   sale.SKUKeys
	bucket int

	mu       sync.Mutex
	pending  []*occupyCall
	spare    []*occupyCall
	inFlight int  // senders: callers sending a batch, flushers
	bufs     bool // a sender holds buf (the others allocate theirs)
	buf      sendBuf
}

// sendBuf is what one script call is built in.
type sendBuf struct {
	buyers []Buyer
	keys   []string
	args   []string
	out    []OccupyResult
}

// Occupy has Stock.OccupyWith's signature and answers (a batch goes out
// with the Extras of its first buyer). ctx bounds the caller's
// wait; a buyer whose ctx ends before its batch is sent is dropped from it
// (nothing occupied), one whose batch is already in flight gets the error
// while the script may still occupy for it — the orphan case of a timed-out
// single occupy.
func (b *Batcher) Occupy(ctx context.Context, a *sale.Activity, sku *sale.SKU, x Extras, user int64, requestNo string, q int64) (OccupyResult, error) {
	return b.OccupyWithin(ctx, nil, a, sku, x, user, requestNo, q)
}

// OccupyWithin is Occupy bounded by expired as well as ctx: a buyer stops
// waiting when either ends (context.DeadlineExceeded for expired), and is
// dropped from a batch not sent by then. The in-process engine passes a
// channel shared by the buyers of one tick (internal/timeouts), not a
// context and a timer per buyer.
func (b *Batcher) OccupyWithin(ctx context.Context, expired <-chan struct{}, a *sale.Activity, sku *sale.SKU, x Extras, user int64, requestNo string, q int64) (OccupyResult, error) {
	// One queue per bucket (the buyer's, sale.SKU.BucketOf): a batch is one
	// script call on one sub-ledger.
	bk := sku.BucketOf(user)
	key := bucketKey{a.ID, sku.ID, bk}
	v, ok := b.queues.Load(key)
	if !ok {
		v, _ = b.queues.LoadOrStore(key, &skuQueue{keys: sale.KeysIn(a.ID, sku.ID, bk), bucket: bk})
	}
	sq := v.(*skuQueue)
	c := b.calls.Get().(*occupyCall)
	c.ctx, c.expired, c.a, c.sku, c.x, c.buyer = ctx, expired, a, sku, x, Buyer{UserID: user, RequestNo: requestNo, Quantity: q}

	sq.mu.Lock()
	sq.pending = append(sq.pending, c)
	if x.Queued != nil {
		x.Queued()
	}
	if sq.inFlight == 0 || len(sq.pending) >= b.max && sq.inFlight < maxInFlight {
		// No call in flight, or a full batch waiting: this caller sends at
		// once, then hands any occupies that queued meanwhile to a flusher
		// goroutine, so its own answer waits for one script call only.
		sq.inFlight++
		batch := sq.take(b.max)
		sq.mu.Unlock()
		b.run(sq, batch)
		if sq.more() {
			go b.flush(sq)
		}
	} else {
		sq.mu.Unlock()
	}
	var err error
	select {
	case <-c.done:
		return b.answer(c)
	case <-ctx.Done():
		err = ctx.Err()
	case <-expired:
		err = context.DeadlineExceeded
	}
	select {
	case <-c.done: // answered meanwhile: an OK must not be dropped
		return b.answer(c)
	default:
	}
	// The flusher still holds c; it is not reused.
	return OccupyResult{}, fmt.Errorf("occupy sku %d: %w", sku.ID, err)
}

// gone is why c's buyer stopped waiting, or nil.
func (c *occupyCall) gone() error {
	select {
	case <-c.expired:
		return context.DeadlineExceeded
	default:
	}
	return c.ctx.Err()
}

// answer takes c's outcome and recycles c.
func (b *Batcher) answer(c *occupyCall) (OccupyResult, error) {
	r, err := c.res, c.err
	*c = occupyCall{done: c.done}
	b.calls.Put(c)
	return r, err
}

// flush sends batches until the queue is empty.
func (b *Batcher) flush(sq *skuQueue) {
	for {
		sq.mu.Lock()
		batch := sq.take(b.max)
		if len(batch) == 0 {
			sq.inFlight--
			sq.mu.Unlock()
			return
		}
		sq.mu.Unlock()
		b.run(sq, batch)
	}
}

// take removes up to limit calls from pending. Call with mu held. The batch
// slice stays the flusher's until give.
func (sq *skuQueue) take(limit int) []*occupyCall {
	if len(sq.pending) <= limit {
		batch := sq.pending
		sq.pending, sq.spare = sq.spare[:0], nil
		return batch
	}
	batch := append(sq.spare[:0], sq.pending[:limit]...)
	n := copy(sq.pending, sq.pending[limit:])
	clear(sq.pending[n:])
	sq.pending, sq.spare = sq.pending[:n], nil
	return batch
}

// more reports whether occupies are waiting, for a sender that finished its
// batch: if so it stays a sender (as a flusher), else it is done.
func (sq *skuQueue) more() bool {
	sq.mu.Lock()
	defer sq.mu.Unlock()
	if len(sq.pending) == 0 {
		sq.inFlight--
		return false
	}
	return true
}

// give returns a finished batch's slice for reuse.
func (sq *skuQueue) give(batch []*occupyCall) {
	clear(batch)
	sq.mu.Lock()
	if sq.spare == nil {
		sq.spare = batch[:0]
	}
	sq.mu.Unlock()
}

// run sends one batch and answers its callers.
func (b *Batcher) run(sq *skuQueue, batch []*occupyCall) {
	live := batch[:0]
	for _, c := range batch {
		if err := c.gone(); err != nil {
			c.err = fmt.Errorf("occupy sku %d: %w", c.sku.ID, err)
			c.done <- struct{}{}
			continue
		}
		live = append(live, c)
	}
	if len(live) > 0 {
		// The usual single sender reuses the queue's buffers; a sender
		// beside it (a full batch under a deep queue) builds its own.
		var buf sendBuf
		sq.mu.Lock()
		own := !sq.bufs
		if own {
			sq.bufs, buf = true, sq.buf
		}
		sq.mu.Unlock()
		for _, c := range live {
			buf.buyers = append(buf.buyers, c.buyer)
		}
		if b.onBatch != nil {
			b.onBatch(len(live))
		}
		first := live[0]
		now := time.Now()
		buf.keys = appendBatchKeys(buf.keys, &sq.keys, first.x, now)
		buf.args = appendBatchArgs(buf.args, first.a.ID, first.sku.ID, first.x, now, buf.buyers)
		ctx, cancel := context.WithTimeout(context.Background(), b.timeout)
		out, err := b.stock.occupyBatchArgs(ctx, first.a, first.sku, sq.bucket, first.x, sq.bucket >= 0, buf.keys, buf.buyers, buf.args, buf.out)
		cancel()
		for i, c := range live {
			if err != nil {
				c.err = err
			} else {
				c.res = out[i]
			}
			c.done <- struct{}{}
		}
		if own {
			clear(buf.keys)
			clear(buf.args)
			clear(buf.buyers)
			clear(out)
			sq.mu.Lock()
			sq.buf = sendBuf{buyers: buf.buyers[:0], keys: buf.keys[:0], args: buf.args[:0], out: out[:0]}
			sq.bufs = false
			sq.mu.Unlock()
		}
	}
	sq.give(batch)
}
