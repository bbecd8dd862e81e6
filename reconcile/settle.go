package reconcile

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"go.uber.org/zap"

	"seckill/sale"
	"seckill/stock/results"
	"seckill/store"
)

// Settle resolves a result that went stale: a ticket that reads QUEUING
// (in Redis, or from the request log's COMPENSATING or in-flight rows where
// Redis has lost it) although it is older than reconcile.orphan_grace and
// Kafka proves its message consumed (lag.ConsumedThrough) — a failover
// that lost the final result but kept QUEUING, a compensation that Redis
// restarted empty before its FAIL was written. The orders database and
// the ledger decide the true end, which is written to Redis (so the next
// read is plain) and to the request log:
//
//   - an order: SUCCESS with its number (FAIL CLOSED once closed unpaid);
//   - no order and no occupancy in Redis: FAIL RELEASED — the consumer
//     has passed the ticket, so no order can come;
//   - no order but the occupancy still held: left QUEUING, for the orphan
//     sweeper (unclaimed) or the consumer (claimed) to end.
//
// A young ticket costs nothing (its number holds its time). At most
// settleConcurrency settle at once; past that, and whenever Kafka or the
// database cannot tell, the entry is returned as it is (QUEUING: the
// buyer polls again). The consumed-through time is asked of Kafka at most
// once per settleThroughTTL.
func (r *Reconciler) Settle(ctx context.Context, e results.Entry) (results.Entry, error) {
	if e.State != sale.ResultQueuing {
		return e, nil
	}
	at, ok := sale.RequestNoTime(e.RequestNo)
	now := r.now()
	if !ok || !at.Add(r.cfg.OrphanGrace).Before(now) || e.Activity <= 0 || e.SKU <= 0 || e.Owner <= 0 {
		return e, nil
	}
	s := r.settleState()
	select {
	case s.sem <- struct{}{}:
		defer func() { <-s.sem }()
	default:
		r.m.settled.WithLabelValues("shed").Inc()
		return e, nil
	}
	through, err := s.through(ctx, r)
	if err != nil {
		return e, fmt.Errorf("settle %s: %w", e.RequestNo, err)
	}
	if !r.stale(e.RequestNo, now, through) {
		return e, nil
	}
	end := e
	log := store.LogEntry{RequestNo: e.RequestNo, ActivityID: e.Activity, SKUID: e.SKU, UserID: e.Owner, Quantity: 1}
	o, err := r.st.OrderByRequest(ctx, e.RequestNo)
	switch {
	case err == nil:
		end.State, end.OrderNo, end.Code = sale.ResultSuccess, o.OrderNo, ""
		if o.Status == store.OrderClosed {
			end.State, end.Code = sale.ResultFail, sale.FailClosed
		}
		log.Quantity, log.Status, log.OrderNo = o.Quantity, store.StatusSuccess, o.OrderNo
		log.Remark = "settled: the order exists; the result Redis held was stale"
	case errors.Is(err, store.ErrNotFound):
		// Not while this process' sweeper runs: it may be releasing this
		// very ticket and about to write its end (the buyer polls again).
		// A sweeper in another process can still race it: the end is the
		// same FAIL RELEASED, its history then has FAILED twice.
		if !r.sweepMu.TryLock() {
			return e, nil
		}
		defer r.sweepMu.Unlock()
		holder, _, herr := r.stock.Holder(ctx, e.Activity, e.SKU, e.Owner)
		if herr != nil {
			return e, fmt.Errorf("settle %s: %w", e.RequestNo, herr)
		}
		if holder == e.RequestNo {
			// Still holding stock: the sweeper or the consumer ends it.
			return e, nil
		}
		end.State, end.OrderNo, end.Code = sale.ResultFail, "", sale.FailReleased
		log.Status = store.StatusFailed
		log.Remark = "settled: no order and no stock held after the consumer passed the ticket"
		if l, lerr := r.st.RequestLog(ctx, e.RequestNo); lerr == nil {
			log.Quantity, log.TraceID = l.Quantity, l.TraceID
		}
	default:
		return e, fmt.Errorf("settle %s: %w", e.RequestNo, err)
	}
	// The sweeper, the closer or the consumer may have written the end
	// meanwhile: theirs stands, and nothing is written twice.
	if cur, err := r.res.Read(ctx, e.Owner, e.RequestNo); err == nil && cur.State != sale.ResultQueuing {
		return cur, nil
	}
	if err := r.res.Write(ctx, end); err != nil {
		// The answer is known; the next read settles again.
		r.m.settled.WithLabelValues("unwritten").Inc()
	}
	if l, err := r.st.RequestLog(ctx, e.RequestNo); err != nil || l.Status != log.Status {
		if err := r.st.LogRequest(ctx, log); err != nil {
			r.log.Warn("settled ticket's request log not written", zap.String("requestNo", e.RequestNo), zap.Error(err))
		}
	}
	r.m.settled.WithLabelValues(end.State).Inc()
	return end, nil
}

// Settle's bounds.
const (
	settleConcurrency = 8
	settleThroughTTL  = time.Second
)

type settle struct {
	sem chan struct{}
	mu  sync.Mutex
	at  time.Time // when val was read
	val time.Time // the last consumed-through time
}

func (r *Reconciler) settleState() *settle {
	r.settleOnce.Do(func() { r.settling = &settle{sem: make(chan struct{}, settleConcurrency)} })
	return r.settling
}

// through is the consumed-through time, read at most once per
// settleThroughTTL.
func (s *settle) through(ctx context.Context, r *Reconciler) (time.Time, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.at.IsZero() && time.Since(s.at) < settleThroughTTL {
		return s.val, nil
	}
	t, err := r.consumedThrough(ctx)
	if err != nil {
		return time.Time{}, err
	}
	s.at, s.val = time.Now(), t
	return t, nil
}
