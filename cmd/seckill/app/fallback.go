package app

import (
	"context"
	"errors"
	"time"

	"seckill/edge"
	"seckill/sale"
	"seckill/stock/results"
	"seckill/store"
)

// resultFromStore reads how a ticket ended from the orders database, for
// the edge's result route when Redis has no result: its order (SUCCESS, or
// FAIL CLOSED once closed unpaid), else its request log (FAIL when it
// failed, QUEUING while it is on its way). Only numbers that are ticket
// numbers of this system — not from the future — reach the database.
func resultFromStore(st store.Store) edge.ResultFallback {
	return func(ctx context.Context, rn string) (results.Entry, error) {
		at, ok := sale.RequestNoTime(rn)
		if !ok || at.After(time.Now().Add(time.Minute)) {
			return results.Entry{}, results.ErrNotFound
		}
		o, err := st.OrderByRequest(ctx, rn)
		switch {
		case err == nil:
			e := results.Entry{RequestNo: rn, Activity: o.ActivityID, SKU: o.SKUID, Owner: o.UserID,
				State: sale.ResultSuccess, OrderNo: o.OrderNo}
			if o.Status == store.OrderClosed {
				e.State, e.Code = sale.ResultFail, sale.FailClosed
			}
			return e, nil
		case !errors.Is(err, store.ErrNotFound):
			return results.Entry{}, err
		}
		l, err := st.RequestLog(ctx, rn)
		if errors.Is(err, store.ErrNotFound) {
			return results.Entry{}, results.ErrNotFound
		}
		if err != nil {
			return results.Entry{}, err
		}
		e := results.Entry{RequestNo: rn, Activity: l.ActivityID, SKU: l.SKUID, Owner: l.UserID, State: sale.ResultQueuing}
		if l.Status == store.StatusFailed || l.Status == store.StatusRejected {
			// Every failure after an occupancy gave its stock back.
			e.State, e.Code = sale.ResultFail, sale.FailReleased
		}
		return e, nil
	}
}
