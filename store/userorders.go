package store

import (
	"context"
	"fmt"
)

// A buyer's own orders ("my orders"), newest first, a page at a time.

// OrderCursor is where a page of a buyer's orders ends: the last order's
// creation time (unix ms) and id. The next page starts strictly after it
// in the order (created, id) descending, so orders created in the same
// millisecond are neither skipped nor repeated across pages. The zero
// cursor starts at the newest order.
type OrderCursor struct {
	CreatedMs int64
	ID        int64
}

// IsZero reports whether c is the start.
func (c OrderCursor) IsZero() bool { return c == OrderCursor{} }

// Cursor is the cursor that continues after o.
func (o Order) Cursor() OrderCursor { return OrderCursor{CreatedMs: o.Created.UnixMilli(), ID: o.ID} }

// userOrdersQuery reads by the index (user_id, created_ms, id): an equality
// on user_id, then a range on created_ms (the form both optimisers turn
// into an index range, unlike a row-value comparison), read backwards.
const (
	userOrdersFirst = `SELECT ` + orderColumns + ` FROM seckill_order WHERE user_id = ?
		ORDER BY created_ms DESC, id DESC LIMIT ?`
	userOrdersAfter = `SELECT ` + orderColumns + ` FROM seckill_order WHERE user_id = ?
		AND created_ms <= ? AND (created_ms < ? OR id < ?)
		ORDER BY created_ms DESC, id DESC LIMIT ?`
)

func (s *sqlStore) UserOrders(ctx context.Context, user int64, after OrderCursor, limit int) ([]Order, error) {
	if limit <= 0 {
		return nil, nil
	}
	q, args := userOrdersFirst, []any{user, limit}
	if !after.IsZero() {
		q, args = userOrdersAfter, []any{user, after.CreatedMs, after.CreatedMs, after.ID, limit}
	}
	rows, err := s.r.QueryContext(ctx, q, args...)
	if err != nil {
		return nil, fmt.Errorf("orders of user %d: %w", user, err)
	}
	defer rows.Close()
	out := make([]Order, 0, min(limit, 64))
	for rows.Next() {
		o, err := scanOrder(rows, "user_id", fmt.Sprint(user))
		if err != nil {
			return nil, fmt.Errorf("orders of user %d: %w", user, err)
		}
		out = append(out, o)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("orders of user %d: %w", user, err)
	}
	return out, nil
}
