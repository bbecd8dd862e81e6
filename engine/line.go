package engine

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/redis/rueidis"
	"go.uber.org/zap"

	"seckill/sale"
	"seckill/stock"
	"seckill/stock/results"
)

// ErrWaiting answers an attempt of a buyer who already waits in the SKU's
// line: the Waiting names that ticket.
var ErrWaiting = errors.New("the buyer already waits in this SKU's line")

// Waiting is a ticket in a SKU's line: where its attempt lies in the
// attempts topic (Partition, Offset: the broker's ack).
type Waiting struct {
	RequestNo string
	Partition int32
	Offset    int64
}

// Line appends purchase attempts of the SKUs in queue mode to their
// waiting line, the attempts topic (engine.queue.topic, keyed by SKU,
// acks=all), for the edge. An attempt is a sale.Message signed with the
// attempt keys (sale.AttemptSigning). Safe for concurrent use.
type Line struct {
	stock *stock.Stock
	prod  *Producer
	sign  *sale.Signer
	ids   *sale.RequestNos
	log   *zap.Logger
	res   *results.Store
}

// NewLine connects the attempts producer of cfg (engine.kafka's brokers
// and settings, engine.queue.topic).
func NewLine(cfg Config, st *stock.Stock, res *results.Store, log *zap.Logger) (*Line, error) {
	sign, err := sale.NewSigner(sale.AttemptSigning(cfg.Signing))
	if err != nil {
		return nil, err
	}
	k := cfg.Kafka
	k.Topic = cfg.Queue.Topic
	prod, err := NewProducer(k, log)
	if err != nil {
		return nil, err
	}
	return &Line{stock: st, prod: prod, sign: sign, ids: sale.NewRequestNos(cfg.Node), log: log, res: res}, nil
}

// Append puts r in its SKU's line: it records the buyer as waiting (one
// waiting ticket per buyer and SKU, across every edge: ErrWaiting names
// the one there is), produces the attempt and waits for the ack, then
// writes the WAITING result. Only a durable attempt is WAITING: when the
// broker refuses or is slow the buyer's record is removed, the ticket's
// result written FAIL BUSY (so an attempt that arrives after all is
// skipped by the drainer) and the answer is ErrBusy.
func (l *Line) Append(ctx context.Context, r *Request, now int64) (Waiting, error) {
	if !r.resolved() {
		return Waiting{}, errUnresolved
	}
	if r.Quantity < 1 {
		return Waiting{}, ErrBadQuantity
	}
	a, k := r.Activity, r.SKU
	rn := l.ids.Next(a.ID, k.ID)
	c := l.stock.Client(a.ID, k.ID)
	wk := sale.WaitingKey(a.ID, k.ID)
	user := strconv.FormatInt(r.UserID, 10)
	for try := 0; ; try++ {
		set, err := c.Do(ctx, c.B().Hsetnx().Key(wk).Field(user).Value(rn).Build()).AsBool()
		if err != nil {
			return Waiting{}, fmt.Errorf("%w: waiting record: %w", ErrBusy, err)
		}
		if set {
			break
		}
		held, err := c.Do(ctx, c.B().Hget().Key(wk).Field(user).Build()).ToString()
		if err != nil && !rueidis.IsRedisNil(err) {
			return Waiting{}, fmt.Errorf("%w: waiting record: %w", ErrBusy, err)
		}
		stale := held == ""
		if !stale {
			// A record whose ticket has ended is stale (its removal
			// failed): the buyer waits no more.
			e, err := l.res.Read(ctx, r.UserID, held)
			if err != nil && !errors.Is(err, results.ErrNotFound) {
				return Waiting{}, fmt.Errorf("%w: waiting ticket: %w", ErrBusy, err)
			}
			stale = e.State == sale.ResultSuccess || e.State == sale.ResultFail
			if errors.Is(err, results.ErrNotFound) && l.orphaned(held) {
				// Its Append died between the record and the result (an
				// edge killed): nobody was told WAITING for it, and no
				// drainer may serve it later — a buyer otherwise waits
				// with a ticket that never ends.
				if err := l.failOrphan(ctx, c, r.UserID, a.ID, k.ID, held); err != nil {
					return Waiting{}, fmt.Errorf("%w: waiting ticket: %w", ErrBusy, err)
				}
				stale = true
			}
		}
		if !stale {
			return Waiting{RequestNo: held}, ErrWaiting
		}
		if try > 0 {
			return Waiting{}, fmt.Errorf("%w: waiting record changed; try again", ErrBusy)
		}
		if held != "" {
			if err := c.Do(ctx, c.B().Hdel().Key(wk).Field(user).Build()).Error(); err != nil {
				return Waiting{}, fmt.Errorf("%w: waiting record: %w", ErrBusy, err)
			}
		}
	}
	m := sale.Message{RequestNo: rn, ActivityID: a.ID, SKUID: k.ID, UserID: r.UserID, Quantity: r.Quantity,
		UnitPrice: k.Price, AcceptedAt: now, TraceID: r.TraceID}
	if m.TraceID == "" {
		m.TraceID = rn
	}
	val := l.sign.AppendSigned(make([]byte, 0, 384), &m)
	key := strconv.AppendInt(make([]byte, 0, 20), k.ID, 10)
	part, off, err := l.prod.SendAt(ctx, key, val)
	if err != nil {
		l.unwait(c, wk, user, &m)
		return Waiting{}, fmt.Errorf("%w: append attempt: %w", ErrBusy, err)
	}
	// Where absent: the drainer may have decided the attempt already.
	v := sale.AppendResultValue(nil, sale.ResultWaiting, r.UserID, "", strconv.Itoa(int(part))+":"+strconv.FormatInt(off, 10))
	if err := l.resultIfNone(ctx, c, a.ID, k.ID, rn, v); err != nil {
		// The attempt is durable and will be drained: the buyer polls a
		// result the drainer writes.
		l.log.Warn("WAITING result not written", zap.String("requestNo", rn), zap.Error(err))
	}
	return Waiting{RequestNo: rn, Partition: part, Offset: off}, nil
}

// orphaned says whether a waiting record's ticket rn, which has no
// result, is older than any Append still running can be: an Append writes
// the WAITING result (or removes its record) within the broker's ack
// timeout, so twice that is past every live one.
func (l *Line) orphaned(rn string) bool {
	at, ok := sale.RequestNoTime(rn)
	return ok && time.Since(at) > 2*l.prod.timeout.D()
}

// failOrphan ends an orphaned waiting ticket FAIL BUSY where it has no
// result yet (HSETNX): should its attempt have reached the topic after
// all, the drainer finds it decided and skips it.
func (l *Line) failOrphan(ctx context.Context, c rueidis.Client, user, activity, sku int64, rn string) error {
	v := sale.AppendResultValue(nil, sale.ResultFail, user, "", sale.FailBusy)
	if err := l.resultIfNone(ctx, c, activity, sku, rn, v); err != nil {
		return err
	}
	l.log.Warn("waiting ticket without an attempt ended FAIL BUSY", zap.String("requestNo", rn), zap.Int64("userId", user))
	return nil
}

// resultIfNone writes ticket rn's result value v (HSETNX) unless it has
// one, and renews the results hash's TTL.
func (l *Line) resultIfNone(ctx context.Context, c rueidis.Client, activity, sku int64, rn string, v []byte) error {
	rk := sale.ResultsKey(activity, sku)
	for _, r := range c.DoMulti(ctx, c.B().Hsetnx().Key(rk).Field(rn).Value(string(v)).Build(),
		c.B().Expire().Key(rk).Seconds(int64(l.res.TTL().Seconds())).Build()) {
		if err := r.Error(); err != nil {
			return err
		}
	}
	return nil
}

// unwait undoes a waiting record whose attempt is not durable, and writes
// the ticket FAIL BUSY: the attempt may still reach the topic late, and
// the drainer skips a ticket that has a final result.
func (l *Line) unwait(c rueidis.Client, wk, user string, m *sale.Message) {
	ctx, cancel := context.WithTimeout(context.Background(), l.prod.timeout.D())
	defer cancel()
	fail := results.Entry{RequestNo: m.RequestNo, Activity: m.ActivityID, SKU: m.SKUID, Owner: m.UserID,
		State: sale.ResultFail, Code: sale.FailBusy}
	err := l.res.Write(ctx, fail)
	if err == nil {
		err = c.Do(ctx, c.B().Hdel().Key(wk).Field(user).Build()).Error()
	}
	if err != nil {
		l.log.Error("waiting record of an attempt not appended left behind; the buyer waits until the drainer meets a later attempt",
			zap.String("requestNo", m.RequestNo), zap.Error(err))
	}
}

// Close flushes the producer.
func (l *Line) Close() error { return l.prod.Close() }
