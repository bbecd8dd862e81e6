package engine

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/zap"

	"seckill/internal/timeouts"
	"seckill/sale"
	"seckill/stock/results"

	"seckill/stock"
)

// Local is the in-process engine. Safe for concurrent use.
type Local struct {
	cfg    Config
	stock  *stock.Stock
	batch  *stock.Batcher               // group commit (engine.batch), or nil: stock.OccupyWith per buyer
	extras atomic.Pointer[stock.Extras] // result TTL and window of each call; SetWindow swaps it
	prod   *Producer
	sign   *sale.Signer
	res    *results.Store
	ids    *sale.RequestNos
	log    *zap.Logger
	m      *metrics
	now    func() time.Time
	fault  func(stage string) error
	reqlog RequestLog // nil: no request log (see reqlog.go)
	closed atomic.Bool
	bufs   sync.Pool
	// shardLbl[i] labels the occupy script of a SKU on shard i-1 (see New).
	shardLbl []shardLabels
	// occupyTimeout bounds a batched occupy (engine.occupy_timeout): one
	// timer per tick for every buyer, not a context and a timer each.
	occupyTimeout *timeouts.Shared
}

// shardLabels are one shard's children of the occupy script metrics.
type shardLabels struct {
	lua    prometheus.Observer
	errors prometheus.Counter
}

// Option is a test seam.
type Option func(*Local)

// WithClock replaces time.Now (accepted-at times).
func WithClock(now func() time.Time) Option { return func(e *Local) { e.now = now } }

// WithFault calls fn at named stages of Occupy ("after_occupy",
// "before_produce", and in a compensation "after_release", between the
// release and the FAIL result); a non-nil error aborts Occupy right there,
// as a crash of the engine would — nothing more is compensated. Fault
// tests only.
func WithFault(fn func(stage string) error) Option { return func(e *Local) { e.fault = fn } }

// New builds the in-process engine and connects its producer.
func New(cfg Config, st *stock.Stock, res *results.Store, log *zap.Logger, reg prometheus.Registerer, opts ...Option) (*Local, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	sign, err := sale.NewSigner(cfg.Signing)
	if err != nil {
		return nil, err
	}
	prod, err := NewProducer(cfg.Kafka, log)
	if err != nil {
		return nil, err
	}
	e := &Local{cfg: cfg, stock: st, prod: prod, sign: sign, res: res, ids: sale.NewRequestNos(cfg.Node), log: log, m: newMetrics(reg), now: time.Now}
	e.bufs.New = func() any { b := make([]byte, 0, 384); return &b } // a signed message is ~300 bytes
	e.batch = newBatcher(cfg, st, e.m)
	e.occupyTimeout = timeouts.New(cfg.OccupyTimeout)
	e.extras.Store(&stock.Extras{WindowLimit: cfg.Window.Limit, WindowPeriod: cfg.Window.Period})
	// The releases count a given-back ticket's attempt in the same window.
	st.SetWindow(cfg.Window.Limit, cfg.Window.Period)
	// One pair of children per shard index (-1 = default … the last hot
	// shard, then one for a SKU naming a shard not configured), so the
	// hot path picks its labels by index.
	shards := st.Shards()
	e.shardLbl = make([]shardLabels, shards.HotCount()+2)
	for i := range e.shardLbl {
		name := shards.Name(i - 1)
		e.shardLbl[i] = shardLabels{lua: e.m.lua.WithLabelValues(name), errors: e.m.luaErrors.WithLabelValues(name)}
	}
	for _, o := range opts {
		o(e)
	}
	return e, nil
}

// SetWindow changes the user × SKU window (edge.rate.user_sku_limit and
// user_sku_window) of every occupy that starts after it returns; a bad
// window is refused, naming its key, and of its Stock's releases, which
// count a given-back ticket's attempt in it (stock.Stock.SetWindow). Counts
// already made stand (they live in Redis); limit 0 turns the window off.
// Safe for concurrent use.
func (e *Local) SetWindow(w Window) error {
	c := e.cfg
	c.Window = w
	if err := c.Validate(); err != nil {
		return err
	}
	x := *e.extras.Load()
	x.WindowLimit, x.WindowPeriod = w.Limit, w.Period
	e.extras.Store(&x)
	e.stock.SetWindow(w.Limit, w.Period)
	return nil
}

// Stock returns the stock scripts the engine runs.
func (e *Local) Stock() *stock.Stock { return e.stock }

// Occupy implements Engine. It occupies for r's Activity and SKU as the
// edge resolved them, without looking them up again.
func (e *Local) Occupy(ctx context.Context, r *Request) (Ticket, error) {
	if e.closed.Load() {
		return Ticket{Remaining: -1}, fmt.Errorf("%w: engine is shutting down", ErrBusy)
	}
	if !r.resolved() {
		return Ticket{Remaining: -1}, errUnresolved
	}
	if r.Quantity < 1 {
		return Ticket{Remaining: -1}, ErrBadQuantity
	}
	a, sku := r.Activity, r.SKU
	t := Ticket{Remaining: -1}
	rn := r.RequestNo
	if rn == "" {
		rn = e.ids.NextIn(a.ID, sku.ID, sku.BucketOf(r.UserID))
	}

	start := time.Now()
	// One script call is all the Redis work of an accepted buyer: it counts
	// the window, takes the stock and writes the buyer's record (read as
	// its QUEUING result).
	x := *e.extras.Load()
	x.Queued = r.Queued
	if r.Place != "" {
		// A drained attempt is one request of its buyer, which the line
		// may occupy again (retried after a busy answer, redelivered after
		// a drainer died): counted each time it would spend the buyer's
		// window and end the place in line RATE_LIMITED. One place per
		// buyer and SKU at a time (409 WAITING) bounds the buyer instead.
		x.WindowLimit = 0
	}
	res, err := e.occupy(ctx, a, sku, x, r.UserID, rn, r.Quantity)
	lbl := &e.shardLbl[min(e.stock.PlaceIn(a.ID, sku, sku.BucketOf(r.UserID))+1, len(e.shardLbl)-1)]
	lbl.lua.Observe(time.Since(start).Seconds())
	if err != nil {
		lbl.errors.Inc()
		e.m.occupyBy[stock.Busy].Inc()
		// The script may have run before the timeout hit: the occupancy,
		// if any, has no message and is left to the orphan sweeper.
		return t, fmt.Errorf("%w: %w", ErrBusy, err)
	}
	e.m.occupied(res.Code)
	t.Remaining = res.Remaining
	if err := res.Err(); err != nil {
		switch {
		case errors.Is(err, stock.ErrDuplicate):
			t.RequestNo = res.Holder
		case errors.Is(err, stock.ErrRateLimited):
			t.RetryAfter = res.RetryAfter
		}
		return t, err
	}
	t.RequestNo = rn
	if err := e.queue(ctx, a, sku, r, rn); err != nil {
		return Ticket{Remaining: -1}, err
	}
	return t, nil
}

// occupy runs one buyer's occupy within engine.occupy_timeout: in a group
// commit batch, bounded by the tick's shared timeout (up to 1/64 of it
// more), else one script call under a context of its own.
func (e *Local) occupy(ctx context.Context, a *sale.Activity, sku *sale.SKU, x stock.Extras, user int64, rn string, q int64) (stock.OccupyResult, error) {
	if e.batch != nil {
		return e.batch.OccupyWithin(ctx, e.occupyTimeout.After(), a, sku, x, user, rn, q)
	}
	octx, cancel := context.WithTimeout(ctx, e.cfg.OccupyTimeout)
	defer cancel()
	return e.stock.OccupyWith(octx, a, sku, x, user, rn, q)
}

// queue produces the message of a ticket the occupy script accepted (and
// wrote QUEUING for) and waits for the ack; on failure it releases the
// occupancy, writes FAIL and answers ErrBusy.
func (e *Local) queue(ctx context.Context, a *sale.Activity, sku *sale.SKU, r *Request, rn string) error {
	if e.fault != nil {
		if err := e.fault("after_occupy"); err != nil {
			return fmt.Errorf("%w: fault after occupy: %w", ErrBusy, err)
		}
	}
	m := sale.Message{
		RequestNo: rn, ActivityID: a.ID, SKUID: sku.ID, UserID: r.UserID, Quantity: r.Quantity,
		UnitPrice: sku.Price, AcceptedAt: e.now().UnixMilli(), TraceID: r.TraceID,
	}
	if m.TraceID == "" {
		m.TraceID = rn
	}
	// The buyer's record, read as QUEUING, is written already by the
	// occupy script, before the message exists: nothing here writes a
	// result the consumer's SUCCESS could race.
	if e.fault != nil {
		if err := e.fault("before_produce"); err != nil {
			return fmt.Errorf("%w: fault before produce: %w", ErrBusy, err)
		}
	}
	bp := e.bufs.Get().(*[]byte)
	val := e.sign.AppendSigned((*bp)[:0], &m)
	var keyBuf [20]byte
	key := strconv.AppendInt(keyBuf[:0], r.UserID, 10)
	start := time.Now()
	err := e.prod.Send(ctx, key, val)
	e.m.produce.Observe(time.Since(start).Seconds())
	if err == nil || !errors.Is(err, errInFlight) {
		// Past a timeout or a cancelled ctx Sarama may still hold val;
		// only reuse it when the send is finished one way or the other.
		*bp = val
		e.bufs.Put(bp)
	}
	if err != nil {
		e.m.produceErrs.Inc()
		return e.compensate(&m, r.Place, fmt.Errorf("produce: %w", err))
	}
	return nil
}

// compensate releases the ticket's occupancy after a failed step. If the
// consumer already claimed it, the message did reach Kafka after all and the
// ticket stands.
//
// place is a drained attempt's place in its line ("" for a buyer's own
// request): its result goes back to WAITING there, not FAIL BUSY, because
// the drainer, not the buyer, retries it — a redelivery after the drainer's
// session ended must find it undecided. Its request log gets no step: the
// story goes on with the retry, and a COMPENSATING row would stay open
// for good when the retry is refused (the drainer writes a refusal's FAIL
// to the result only).
func (e *Local) compensate(m *sale.Message, place string, cause error) error {
	// A fresh context: the buyer's may be what expired.
	ctx, cancel := context.WithTimeout(context.Background(), 2*e.cfg.OccupyTimeout)
	defer cancel()
	if place == "" {
		e.record(m, StateCompensating, cause.Error())
	}
	// The release counts the ticket's attempt in the user × SKU window
	// (Stock.SetWindow), which the occupy script did not store: a buyer
	// whose every ticket is given back (a broker refusing each message)
	// is RATE_LIMITED past the limit instead of retrying without end. A
	// drained attempt is not the buyer's (its occupy counts nothing).
	var out stock.ReleaseOutcome
	var err error
	if place == "" {
		out, err = e.stock.Release(ctx, m, false)
	} else {
		out, err = e.stock.ReleaseUncounted(ctx, m)
	}
	if err != nil {
		e.m.releases.WithLabelValues("error").Inc()
		e.log.Error("release after failure failed; left to the orphan sweeper",
			zap.String("requestNo", m.RequestNo), zap.String("traceId", m.TraceID),
			zap.Int64("activityId", m.ActivityID), zap.Int64("skuId", m.SKUID), zap.Int64("userId", m.UserID),
			zap.NamedError("cause", cause), zap.Error(err))
		return fmt.Errorf("%w: %w", ErrBusy, cause)
	}
	e.m.releases.WithLabelValues(out.String()).Inc()
	if out == stock.Claimed {
		return nil
	}
	if place == "" {
		e.record(m, StateFailed, "compensated: "+out.String())
	}
	if e.fault != nil {
		if err := e.fault("after_release"); err != nil {
			return fmt.Errorf("%w: fault after release: %w", ErrBusy, err)
		}
	}
	fail := results.Entry{RequestNo: m.RequestNo, Activity: m.ActivityID, SKU: m.SKUID, Owner: m.UserID,
		State: sale.ResultFail, Code: sale.FailBusy}
	if place != "" {
		fail.State, fail.Code = sale.ResultWaiting, place
	}
	if err := e.res.Write(ctx, fail); err != nil {
		// Released, the ticket has no record to read as QUEUING: without
		// FAIL the buyer would poll a ticket not found. It holds nothing
		// now and can never become an order (released or not held: its
		// claim fails), so FAIL is its end; keep trying (the SKU's shard
		// may be restarting or LOADING).
		// A drained attempt's retry writes its own result: a late WAITING
		// could overwrite it.
		if place == "" {
			go e.writeFailLater(fail)
		}
	}
	e.log.Warn("ticket released after failure",
		zap.String("requestNo", m.RequestNo), zap.String("traceId", m.TraceID),
		zap.Int64("activityId", m.ActivityID), zap.Int64("skuId", m.SKUID), zap.Int64("userId", m.UserID),
		zap.Stringer("release", out), zap.Error(cause))
	return fmt.Errorf("%w: %w", ErrBusy, cause)
}

// failRetryFor bounds writeFailLater: long enough for a Redis restart on a
// large append-only file; past it the result read falls back to the
// request log, which says FAILED.
const failRetryFor = 2 * time.Minute

// writeFailLater writes a compensated ticket's FAIL result once Redis
// answers again, backing off from 100ms to 2s, for at most failRetryFor.
func (e *Local) writeFailLater(fail results.Entry) {
	deadline := time.Now().Add(failRetryFor)
	for wait := 100 * time.Millisecond; ; wait = min(2*wait, 2*time.Second) {
		time.Sleep(wait)
		ctx, cancel := context.WithTimeout(context.Background(), e.cfg.OccupyTimeout)
		err := e.res.Write(ctx, fail)
		cancel()
		if err == nil {
			return
		}
		if time.Now().After(deadline) {
			e.log.Error("FAIL result of a released ticket not written; its result may read QUEUING until it expires",
				zap.String("requestNo", fail.RequestNo), zap.Error(err))
			return
		}
	}
}

// Close stops taking purchases and flushes the producer: every message
// already handed to it is acked (or failed and released) before Close
// returns. Stop the edge first.
func (e *Local) Close() error {
	if e.closed.Swap(true) {
		return nil
	}
	return e.prod.Close()
}
