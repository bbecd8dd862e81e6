package store

import (
	"context"
	"database/sql"
	"fmt"
	"time"
)

// Event is one step of a ticket's history (seckill_request_event): a state
// of DESIGN §3, or an order lifecycle step (ORDER_PAID, ORDER_CLOSED,
// STOCK_RELEASED), with the time it was reached.
type Event struct {
	RequestNo string    `json:"-"`
	Status    string    `json:"status"`
	Remark    string    `json:"remark,omitempty"`
	At        time.Time `json:"at"`
}

// History-only steps (the request log's status keeps its DESIGN §3 state).
const (
	EventOrderPaid     = "ORDER_PAID"     // the buyer paid
	EventOrderClosed   = "ORDER_CLOSED"   // closed unpaid; the unit went back to the snapshot
	EventStockReleased = "STOCK_RELEASED" // the closed order's unit went back to Redis
)

const eventCols = 4

// insertEvents appends evs to the history in chunks; a zero At is now.
func insertEvents(ctx context.Context, tx *sql.Tx, evs []Event) error {
	now := time.Now()
	for len(evs) > 0 {
		n := min(len(evs), chunk)
		args := make([]any, 0, n*eventCols)
		for _, e := range evs[:n] {
			at := e.At
			if at.IsZero() {
				at = now
			}
			args = append(args, e.RequestNo, e.Status, cut(e.Remark, maxRemark), at.UnixMilli())
		}
		if _, err := tx.ExecContext(ctx, `INSERT INTO seckill_request_event (request_no, status, remark, created_ms)
			VALUES `+marks(n, eventCols), args...); err != nil {
			return fmt.Errorf("append %d request events: %w", n, err)
		}
		evs = evs[n:]
	}
	return nil
}

// LogRequests upserts the entries and appends one history event per entry
// (at e.At, or now), in one transaction and in order.
func (s *sqlStore) LogRequests(ctx context.Context, es []LogEntry) error {
	if len(es) == 0 {
		return nil
	}
	now := s.nowMs()
	err := s.inTx(ctx, func(tx *sql.Tx) error {
		evs := make([]Event, 0, len(es))
		for _, e := range es {
			created := now
			if !e.Created.IsZero() {
				created = e.Created.UnixMilli()
			}
			if _, err := tx.ExecContext(ctx, `INSERT INTO seckill_request_log (`+logColumns+`)
				VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`+s.d.logUpsert,
				e.RequestNo, e.ActivityID, e.SKUID, e.UserID, e.Quantity, e.Status, e.OrderNo,
				cut(e.TraceID, maxTrace), cut(e.Remark, maxRemark), created, now); err != nil {
				return err
			}
			at := e.At
			if at.IsZero() {
				at = time.UnixMilli(now)
			}
			evs = append(evs, Event{RequestNo: e.RequestNo, Status: e.Status, Remark: e.Remark, At: at})
		}
		return insertEvents(ctx, tx, evs)
	})
	if err != nil {
		return fmt.Errorf("log %d requests (%s…): %w", len(es), es[0].RequestNo, err)
	}
	return nil
}

func (s *sqlStore) AppendEvents(ctx context.Context, evs []Event) error {
	if len(evs) == 0 {
		return nil
	}
	if err := s.inTx(ctx, func(tx *sql.Tx) error { return insertEvents(ctx, tx, evs) }); err != nil {
		return fmt.Errorf("append request events: %w", err)
	}
	return nil
}

func (s *sqlStore) RequestEvents(ctx context.Context, requestNo string) ([]Event, error) {
	rows, err := s.r.QueryContext(ctx, `SELECT status, remark, created_ms FROM seckill_request_event
		WHERE request_no = ? ORDER BY created_ms, id`, requestNo)
	if err != nil {
		return nil, fmt.Errorf("request events %s: %w", requestNo, err)
	}
	defer rows.Close()
	var out []Event
	for rows.Next() {
		e := Event{RequestNo: requestNo}
		var at int64
		if err := rows.Scan(&e.Status, &e.Remark, &at); err != nil {
			return nil, fmt.Errorf("request events %s: %w", requestNo, err)
		}
		e.At = time.UnixMilli(at)
		out = append(out, e)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("request events %s: %w", requestNo, err)
	}
	return out, nil
}
