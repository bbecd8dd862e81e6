package engine

import (
	"context"
	"fmt"
	"strconv"
	"sync"
	"time"

	"github.com/redis/rueidis"

	"seckill/internal/sale"
	"seckill/lua"
)

// maxBatch bounds engine.batch.max_size: 3 ARGV strings per buyer stay far
// below Lua's stack limit for unpack.
const maxBatch = 1024

// maxInFlight bounds the script calls of one SKU in flight at once. A second
// call goes out only for a full batch: under a deep queue one call at a time
// caps a SKU at max_size per round trip, and buyers then wait out
// engine.occupy_timeout in the queue (503) while Redis idles between calls.
const maxInFlight = 4

var occupyBatchScript = rueidis.NewLuaScript(lua.OccupyBatch)

// Buyer is one buyer of a batched occupy.
type Buyer struct {
	UserID    int64
	RequestNo string
	Quantity  int64
}

// OccupyBatch runs the batched occupy script (occupy_batch.lua) for buyers
// of one SKU, in order: each buyer's result is the one Occupy would have
// given it called once per buyer in that order. The results are appended
// to out. An error is a Redis failure and holds for every buyer. Like
// Occupy, a remaining stock of 0 publishes the sold-out event (once).
func (s *Stock) OccupyBatch(ctx context.Context, a *sale.Activity, sku *sale.SKU, buyers []Buyer, out []OccupyResult) ([]OccupyResult, error) {
	k := sale.KeysFor(a.ID, sku.ID)
	args := appendBatchArgs(make([]string, 0, 3*len(buyers)), buyers)
	return s.occupyBatch(ctx, a, sku, []string{k.Meta, k.Stock, k.Users, k.Sold, k.Closed, k.Qty}, buyers, args, out)
}

// appendBatchArgs appends the script's ARGV triples of buyers to args.
func appendBatchArgs(args []string, buyers []Buyer) []string {
	for _, b := range buyers {
		args = append(args, strconv.FormatInt(b.UserID, 10), b.RequestNo, strconv.FormatInt(b.Quantity, 10))
	}
	return args
}

// occupyBatch is OccupyBatch with the SKU's keys and the buyers' ARGV
// (appendBatchArgs) given.
func (s *Stock) occupyBatch(ctx context.Context, a *sale.Activity, sku *sale.SKU, keys []string, buyers []Buyer, args []string, out []OccupyResult) ([]OccupyResult, error) {
	if len(buyers) == 0 {
		return out, nil
	}
	vals, err := occupyBatchScript.Exec(ctx, s.shards.For(sku.Hot), keys, args).ToArray()
	if err != nil {
		return out, fmt.Errorf("occupy sku %d (batch of %d): %w", sku.ID, len(buyers), err)
	}
	if len(vals) != 3*len(buyers) {
		return out, fmt.Errorf("occupy sku %d: batch script answered %d values for %d buyers", sku.ID, len(vals), len(buyers))
	}
	soldOut := false
	for i := range buyers {
		var r OccupyResult
		if r.Code, err = vals[3*i].ToString(); err != nil {
			return out, fmt.Errorf("occupy sku %d: %w", sku.ID, err)
		}
		if r.Remaining, err = vals[3*i+1].AsInt64(); err != nil {
			return out, fmt.Errorf("occupy sku %d: %w", sku.ID, err)
		}
		switch r.Code {
		case CodeOK:
			r.Holder = buyers[i].RequestNo // the script echoes it; skip a copy
		case CodeDuplicate:
			r.Holder, _ = vals[3*i+2].ToString()
		}
		if r.Remaining == 0 && (r.Code == CodeOK || r.Code == CodeSoldOut) {
			soldOut = true
		}
		out = append(out, r)
	}
	if soldOut {
		s.publish(ctx, sale.Event{Kind: sale.EventSoldOut, Activity: a.ID, SKU: sku.ID})
	}
	return out, nil
}

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
	queues  sync.Map // skuKey -> *skuQueue
	calls   sync.Pool
	onBatch func(n int) // the size of each script call (metrics, tests)
}

type skuKey struct{ activity, sku int64 }

// NewBatcher returns a Batcher over stock. timeout bounds each script call
// (engine.occupy_timeout): a batch is not cut short by one buyer's context.
func NewBatcher(stock *Stock, cfg BatchConfig, timeout time.Duration) *Batcher {
	b := &Batcher{stock: stock, max: min(max(cfg.MaxSize, 1), maxBatch), timeout: timeout}
	b.calls.New = func() any { return &occupyCall{done: make(chan struct{}, 1)} }
	return b
}

// occupyCall is one buyer waiting in a queue.
type occupyCall struct {
	ctx   context.Context
	a     *sale.Activity
	sku   *sale.SKU
	buyer Buyer
	res   OccupyResult
	err   error
	done  chan struct{} // cap 1: the flusher never blocks on a gone caller
}

// skuQueue is one SKU's group commit. The goroutine that finds no call in
// flight (or a full batch waiting and fewer than maxInFlight calls out)
// sends a batch itself and hands what queued meanwhile to a flusher.
type skuQueue struct {
	keys []string

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
	args   []string
	out    []OccupyResult
}

// Occupy has Stock.Occupy's signature and answers. ctx bounds the caller's
// wait; a buyer whose ctx ends before its batch is sent is dropped from it
// (nothing occupied), one whose batch is already in flight gets the error
// while the script may still occupy for it — the orphan case of a timed-out
// single occupy.
func (b *Batcher) Occupy(ctx context.Context, a *sale.Activity, sku *sale.SKU, user int64, requestNo string, q int64) (OccupyResult, error) {
	key := skuKey{a.ID, sku.ID}
	v, ok := b.queues.Load(key)
	if !ok {
		k := sale.KeysFor(a.ID, sku.ID)
		v, _ = b.queues.LoadOrStore(key, &skuQueue{keys: []string{k.Meta, k.Stock, k.Users, k.Sold, k.Closed, k.Qty}})
	}
	sq := v.(*skuQueue)
	c := b.calls.Get().(*occupyCall)
	c.ctx, c.a, c.sku, c.buyer = ctx, a, sku, Buyer{UserID: user, RequestNo: requestNo, Quantity: q}

	sq.mu.Lock()
	sq.pending = append(sq.pending, c)
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
	select {
	case <-c.done:
		return b.answer(c)
	case <-ctx.Done():
		select {
		case <-c.done: // answered meanwhile: an OK must not be dropped
			return b.answer(c)
		default:
		}
		// The flusher still holds c; it is not reused.
		return OccupyResult{}, fmt.Errorf("occupy sku %d: %w", sku.ID, ctx.Err())
	}
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
		if err := c.ctx.Err(); err != nil {
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
		buf.args = appendBatchArgs(buf.args, buf.buyers)
		ctx, cancel := context.WithTimeout(context.Background(), b.timeout)
		out, err := b.stock.occupyBatch(ctx, live[0].a, live[0].sku, sq.keys, buf.buyers, buf.args, buf.out)
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
			clear(buf.args)
			clear(buf.buyers)
			clear(out)
			sq.mu.Lock()
			sq.buf = sendBuf{buyers: buf.buyers[:0], args: buf.args[:0], out: out[:0]}
			sq.bufs = false
			sq.mu.Unlock()
		}
	}
	sq.give(batch)
}

// occupyFunc is Stock.Occupy's shape, which Batcher.Occupy shares.
type occupyFunc func(ctx context.Context, a *sale.Activity, sku *sale.SKU, user int64, requestNo string, q int64) (OccupyResult, error)

// newOccupy picks the engine's occupy: group commit when engine.batch is
// enabled (the default), else one script call per buyer.
func newOccupy(cfg Config, stock *Stock, m *metrics) occupyFunc {
	if !cfg.Batch.Enabled {
		return stock.Occupy
	}
	b := NewBatcher(stock, cfg.Batch, cfg.OccupyTimeout)
	b.onBatch = func(n int) { m.batch.Observe(float64(n)) }
	return b.Occupy
}
