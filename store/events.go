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

var eventInsertSQL = shape{per: eventCols, sql: func(_ *dialect, n int) string {
	return `INSERT INTO seckill_request_event (request_no, status, remark, created_ms) VALUES ` + marks(n, eventCols)
}}

// insertEvents appends evs to the history; a zero At is now.
func (s *sqlStore) insertEvents(ctx context.Context, tx *sql.Tx, evs []Event) error {
	now := time.Now()
	args := make([]any, 0, len(evs)*eventCols)
	for _, e := range evs {
		at := e.At
		if at.IsZero() {
			at = now
		}
		args = append(args, e.RequestNo, e.Status, cut(e.Remark, maxRemark), at.UnixMilli())
	}
	if _, err := s.execRows(ctx, tx, &eventInsertSQL, args); err != nil {
		return fmt.Errorf("append %d request events: %w", len(evs), err)
	}
	return nil
}

// LogRequests upserts the entries and appends one history event per entry
// (at e.At, or now), in one transaction and in order: multi-row
// statements, whose rows both databases apply in order (a later step of
// one ticket updates the row its earlier step inserted).
func (s *sqlStore) LogRequests(ctx context.Context, es []LogEntry) error {
	if len(es) == 0 {
		return nil
	}
	s.prepare(ctx, &logUpsertSQL, len(es))
	s.prepare(ctx, &eventInsertSQL, len(es))
	now := s.nowMs()
	nowA := any(now)
	rows := make([]any, 0, len(es)*logInsertCols)
	evs := make([]any, 0, len(es)*eventCols)
	for i := range es {
		e := &es[i]
		created := nowA
		if !e.Created.IsZero() {
			created = e.Created.UnixMilli()
		}
		at := nowA
		if !e.At.IsZero() {
			at = e.At.UnixMilli()
		}
		rn, remark := any(e.RequestNo), any(cut(e.Remark, maxRemark))
		rows = append(rows, rn, e.ActivityID, e.SKUID, e.UserID, e.Quantity, e.Status, e.OrderNo,
			cut(e.TraceID, maxTrace), remark, created, nowA, cut(e.MessageID, maxMessageID))
		evs = append(evs, rn, e.Status, remark, at)
	}
	err := s.inTx(ctx, func(tx *sql.Tx) error {
		if _, err := s.execRows(ctx, tx, &logUpsertSQL, rows); err != nil {
			return err
		}
		_, err := s.execRows(ctx, tx, &eventInsertSQL, evs)
		return err
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
	if err := s.inTx(ctx, func(tx *sql.Tx) error { return s.insertEvents(ctx, tx, evs) }); err != nil {
		return fmt.Errorf("append request events: %w", err)
	}
	return nil
}

func (s *sqlStore) RequestEvents(ctx context.Context, requestNo string) ([]Event, error) {
	st, err := s.stories(ctx, []any{requestNo})
	if err != nil {
		return nil, fmt.Errorf("request events %s: %w", requestNo, err)
	}
	evs, err := s.eventRows(ctx, requestNo)
	if err != nil {
		return nil, err
	}
	return tell(st[requestNo], evs), nil
}

// eventRows are requestNo's rows of seckill_request_event, oldest first.
func (s *sqlStore) eventRows(ctx context.Context, requestNo string) ([]Event, error) {
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
