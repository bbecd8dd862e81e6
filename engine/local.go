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

	"seckill/internal/results"
	"seckill/internal/sale"

	"seckill/stock"
)

// Local is the in-process engine. Safe for concurrent use.
type Local struct {
	cfg    Config
	stock  *stock.Stock
	occupy occupyFunc // stock.Occupy, or group commit (engine.batch)
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
// "before_produce"); a non-nil error aborts Occupy right there, as a crash
// of the engine would — nothing is compensated. Fault tests only.
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
	e.occupy = newOccupy(cfg, st, e.m)
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
	rn := e.ids.Next()

	octx, cancel := context.WithTimeout(ctx, e.cfg.OccupyTimeout)
	start := time.Now()
	res, err := e.occupy(octx, a, sku, r.UserID, rn, r.Quantity)
	cancel()
	lbl := &e.shardLbl[min(e.stock.Place(a.ID, sku)+1, len(e.shardLbl)-1)]
	lbl.lua.Observe(time.Since(start).Seconds())
	if err != nil {
		lbl.errors.Inc()
		e.m.occupy.WithLabelValues(stock.Busy.Label()).Inc()
		// The script may have run before the timeout hit: the occupancy,
		// if any, has no message and is left to the orphan sweeper.
		return t, fmt.Errorf("%w: %w", ErrBusy, err)
	}
	e.m.occupy.WithLabelValues(codeLabel(res.Code)).Inc()
	t.Remaining = res.Remaining
	if err := res.Err(); err != nil {
		if errors.Is(err, stock.ErrDuplicate) {
			t.RequestNo = res.Holder
		}
		return t, err
	}
	t.RequestNo = rn
	if err := e.queue(ctx, a, sku, r, rn); err != nil {
		return Ticket{Remaining: -1}, err
	}
	return t, nil
}

// queue records the QUEUING result, produces the message and waits for the
// ack; on failure it releases the occupancy and answers ErrBusy.
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
	// The QUEUING result goes first: the consumer may write SUCCESS as soon
	// as the message is acked, and must never be overwritten by QUEUING.
	wctx, cancel := context.WithTimeout(ctx, e.cfg.OccupyTimeout)
	err := e.res.Write(wctx, results.Entry{RequestNo: rn, Activity: a.ID, SKU: sku.ID, Owner: r.UserID, State: sale.ResultQueuing})
	cancel()
	if err != nil {
		return e.compensate(&m, fmt.Errorf("write queuing result: %w", err))
	}
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
	err = e.prod.Send(ctx, key, val)
	e.m.produce.Observe(time.Since(start).Seconds())
	if err == nil || !errors.Is(err, errSendTimeout) {
		// On a timeout Sarama may still hold val; only reuse it when the
		// send is finished one way or the other.
		*bp = val
		e.bufs.Put(bp)
	}
	if err != nil {
		e.m.produceErrs.Inc()
		return e.compensate(&m, fmt.Errorf("produce: %w", err))
	}
	return nil
}

// compensate releases the ticket's occupancy after a failed step. If the
// consumer already claimed it, the message did reach Kafka after all and the
// ticket stands.
func (e *Local) compensate(m *sale.Message, cause error) error {
	// A fresh context: the buyer's may be what expired.
	ctx, cancel := context.WithTimeout(context.Background(), 2*e.cfg.OccupyTimeout)
	defer cancel()
	e.record(m, StateCompensating, cause.Error())
	out, err := e.stock.Release(ctx, m, false)
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
	e.record(m, StateFailed, "compensated: "+out.String())
	fail := results.Entry{RequestNo: m.RequestNo, Activity: m.ActivityID, SKU: m.SKUID, Owner: m.UserID,
		State: sale.ResultFail, Code: sale.FailBusy}
	if err := e.res.Write(ctx, fail); err != nil {
		// The QUEUING write may have reached Redis although its answer did
		// not (a restart, a LOADING Redis): a result left QUEUING would
		// tell a released ticket is on its way forever. The ticket holds
		// nothing now and can never become an order (released or not
		// held: its claim fails), so FAIL is its end; keep trying.
		go e.writeFailLater(fail)
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
