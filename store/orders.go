package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"sort"
	"time"

	"seckill/sale"
)

// The order lifecycle after SaveBatch (payment, unpaid close, the release
// marker) and the reads the reconciler and the Redis rebuild need.

func (s *sqlStore) ConfirmPayment(ctx context.Context, p Payment, createdSince time.Time) (Order, PaymentResult, error) {
	var (
		o   Order
		out PaymentResult
	)
	err := s.inTx(ctx, func(tx *sql.Tx) error {
		var (
			paidOrder string
			paidCents int64
		)
		err := tx.QueryRowContext(ctx, `SELECT order_no, amount_cents FROM seckill_payment WHERE provider_ref = ?`,
			p.ProviderRef).Scan(&paidOrder, &paidCents)
		switch {
		case err == nil && paidOrder != p.OrderNo:
			return fmt.Errorf("reference %s: %w", p.ProviderRef, ErrPaymentRefReused)
		case err == nil && sale.Cents(paidCents) != p.Amount:
			return fmt.Errorf("reference %s: %w", p.ProviderRef, ErrPaymentAmount)
		case err == nil:
			out = PaymentReplayed
			o, err = scanOrder(tx.QueryRowContext(ctx, `SELECT `+orderColumns+` FROM seckill_order WHERE order_no = ?`,
				p.OrderNo), "order_no", p.OrderNo)
			return err
		case !errors.Is(err, sql.ErrNoRows):
			return err
		}
		if o, err = scanOrder(tx.QueryRowContext(ctx, `SELECT `+orderColumns+` FROM seckill_order WHERE order_no = ?`,
			p.OrderNo), "order_no", p.OrderNo); err != nil {
			return err
		}
		if o.Amount != p.Amount {
			return fmt.Errorf("order amount %s, paid %s: %w", o.Amount, p.Amount, ErrPaymentAmount)
		}
		now := s.nowMs()
		res, err := tx.ExecContext(ctx, `UPDATE seckill_order SET status = ?, updated_ms = ?
			WHERE order_no = ? AND status = ? AND created_ms >= ?`,
			OrderPaid, now, p.OrderNo, OrderPendingPayment, createdSince.UnixMilli())
		if err != nil {
			return err
		}
		n, err := res.RowsAffected()
		if err != nil {
			return err
		}
		if n == 0 {
			// Read again: a closer may have committed since the read above
			// (read committed), and the caller reports what stands.
			out = PaymentNotPayable
			o, err = scanOrder(tx.QueryRowContext(ctx, `SELECT `+orderColumns+` FROM seckill_order WHERE order_no = ?`,
				p.OrderNo), "order_no", p.OrderNo)
			return err
		}
		out, o.Status, o.Updated = PaymentApplied, OrderPaid, time.UnixMilli(now)
		// The reference's primary key makes a concurrent use of it for
		// another order fail here, undoing this update.
		if _, err := tx.ExecContext(ctx, `INSERT INTO seckill_payment (provider_ref, order_no, amount_cents, created_ms)
			VALUES (?, ?, ?, ?)`, p.ProviderRef, p.OrderNo, int64(p.Amount), now); err != nil {
			return err
		}
		return s.insertEvents(ctx, tx, []Event{{RequestNo: o.RequestNo, Status: EventOrderPaid, At: time.UnixMilli(now)}})
	})
	if err != nil {
		return Order{}, 0, fmt.Errorf("confirm payment of order %s: %w", p.OrderNo, err)
	}
	return o, out, nil
}

func (s *sqlStore) ExpiredOrders(ctx context.Context, t time.Time, limit int) ([]Order, error) {
	rows, err := s.r.QueryContext(ctx, `SELECT `+orderColumns+` FROM seckill_order
		WHERE status = ? AND created_ms < ? ORDER BY created_ms LIMIT ?`, OrderPendingPayment, t.UnixMilli(), limit)
	if err != nil {
		return nil, fmt.Errorf("expired orders: %w", err)
	}
	defer rows.Close()
	var out []Order
	for rows.Next() {
		o, err := scanOrder(rows, "status", OrderPendingPayment)
		if err != nil {
			return nil, fmt.Errorf("expired orders: %w", err)
		}
		out = append(out, o)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("expired orders: %w", err)
	}
	return out, nil
}

func (s *sqlStore) CloseOrder(ctx context.Context, orderNo string, createdBefore time.Time) (Order, bool, error) {
	o, err := s.Order(ctx, orderNo)
	if err != nil {
		return o, false, fmt.Errorf("close order: %w", err)
	}
	closed := false
	err = s.inTx(ctx, func(tx *sql.Tx) error {
		closed = false
		// The snapshot row first, as SaveBatch locks it: one lock order,
		// no deadlock with a batch of the same SKU.
		var avail int64
		if err := tx.QueryRowContext(ctx, `SELECT available FROM seckill_stock_snapshot
			WHERE activity_id = ? AND sku_id = ?`+s.d.forUpdate, o.ActivityID, o.SKUID).Scan(&avail); err != nil {
			if errors.Is(err, sql.ErrNoRows) {
				return fmt.Errorf("activity %d sku %d: %w", o.ActivityID, o.SKUID, ErrNoSnapshot)
			}
			return err
		}
		now := s.nowMs()
		// The race with PayOrder is decided here: whichever conditional
		// update comes second finds the status changed and does nothing.
		res, err := tx.ExecContext(ctx, `UPDATE seckill_order SET status = ?, live = NULL, updated_ms = ?
			WHERE order_no = ? AND status = ? AND created_ms < ?`,
			OrderClosed, now, orderNo, OrderPendingPayment, createdBefore.UnixMilli())
		if err != nil {
			return err
		}
		if n, err := res.RowsAffected(); err != nil || n != 1 {
			return err
		}
		if _, err := tx.ExecContext(ctx, `UPDATE seckill_stock_snapshot
			SET available = available + ?, sold = sold - ?, version = version + 1
			WHERE activity_id = ? AND sku_id = ?`, o.Quantity, o.Quantity, o.ActivityID, o.SKUID); err != nil {
			return err
		}
		if _, err := tx.ExecContext(ctx, `INSERT INTO seckill_release_pending
			(request_no, order_no, activity_id, sku_id, user_id, quantity, created_ms, done_ms)
			VALUES (?, ?, ?, ?, ?, ?, ?, 0)`,
			o.RequestNo, o.OrderNo, o.ActivityID, o.SKUID, o.UserID, o.Quantity, now); err != nil {
			return err
		}
		if err := s.insertEvents(ctx, tx, []Event{{RequestNo: o.RequestNo, Status: EventOrderClosed,
			Remark: "unpaid at the deadline; units back in the database snapshot", At: time.UnixMilli(now)}}); err != nil {
			return err
		}
		closed = true
		return nil
	})
	if err != nil {
		return o, false, fmt.Errorf("close order %s: %w", orderNo, err)
	}
	if o, err = s.Order(ctx, orderNo); err != nil {
		return o, closed, fmt.Errorf("close order: %w", err)
	}
	return o, closed, nil
}

func (s *sqlStore) PendingReleases(ctx context.Context, limit int) ([]Release, error) {
	rows, err := s.r.QueryContext(ctx, `SELECT request_no, order_no, activity_id, sku_id, user_id, quantity, created_ms
		FROM seckill_release_pending WHERE done_ms = 0 ORDER BY created_ms LIMIT ?`, limit)
	if err != nil {
		return nil, fmt.Errorf("pending releases: %w", err)
	}
	defer rows.Close()
	var out []Release
	for rows.Next() {
		var (
			r  Release
			ms int64
		)
		if err := rows.Scan(&r.RequestNo, &r.OrderNo, &r.ActivityID, &r.SKUID, &r.UserID, &r.Quantity, &ms); err != nil {
			return nil, fmt.Errorf("pending releases: %w", err)
		}
		r.Created = time.UnixMilli(ms)
		out = append(out, r)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("pending releases: %w", err)
	}
	return out, nil
}

func (s *sqlStore) ReleaseDone(ctx context.Context, requestNo string) error {
	err := s.inTx(ctx, func(tx *sql.Tx) error {
		now := s.nowMs()
		res, err := tx.ExecContext(ctx, `UPDATE seckill_release_pending SET done_ms = ? WHERE request_no = ? AND done_ms = 0`,
			now, requestNo)
		if err != nil {
			return err
		}
		if n, err := res.RowsAffected(); err != nil || n != 1 {
			return err // done before: nothing to add to the history
		}
		return s.insertEvents(ctx, tx, []Event{{RequestNo: requestNo, Status: EventStockReleased,
			Remark: "closed order's units back in Redis", At: time.UnixMilli(now)}})
	})
	if err != nil {
		return fmt.Errorf("release done %s: %w", requestNo, err)
	}
	return nil
}

func (s *sqlStore) Ledger(ctx context.Context, activity, sku int64) (Snapshot, []OrderRef, error) {
	sn := Snapshot{ActivityID: activity, SKUID: sku}
	var refs []OrderRef
	tx, err := s.w.BeginTx(ctx, s.d.readTx)
	if err != nil {
		return sn, nil, fmt.Errorf("ledger activity %d sku %d: begin: %w", activity, sku, err)
	}
	defer tx.Rollback()
	err = tx.QueryRowContext(ctx, `SELECT initial, available, sold, version FROM seckill_stock_snapshot
		WHERE activity_id = ? AND sku_id = ?`, activity, sku).Scan(&sn.Initial, &sn.Available, &sn.Sold, &sn.Version)
	if errors.Is(err, sql.ErrNoRows) {
		return sn, nil, fmt.Errorf("ledger activity %d sku %d: %w", activity, sku, ErrNotFound)
	}
	if err != nil {
		return sn, nil, fmt.Errorf("ledger activity %d sku %d: %w", activity, sku, err)
	}
	rows, err := tx.QueryContext(ctx, `SELECT request_no, user_id, quantity, status, created_ms FROM seckill_order
		WHERE activity_id = ? AND sku_id = ?`, activity, sku)
	if err != nil {
		return sn, nil, fmt.Errorf("ledger activity %d sku %d: %w", activity, sku, err)
	}
	defer rows.Close()
	for rows.Next() {
		var (
			r  OrderRef
			ms int64
		)
		if err := rows.Scan(&r.RequestNo, &r.UserID, &r.Quantity, &r.Status, &ms); err != nil {
			return sn, nil, fmt.Errorf("ledger activity %d sku %d: %w", activity, sku, err)
		}
		r.Created = time.UnixMilli(ms)
		refs = append(refs, r)
	}
	if err := rows.Err(); err != nil {
		return sn, nil, fmt.Errorf("ledger activity %d sku %d: %w", activity, sku, err)
	}
	return sn, refs, nil
}

func (s *sqlStore) OrdersAfter(ctx context.Context, after int64, limit int, dst []OrderRow) ([]OrderRow, error) {
	if limit <= 0 {
		return dst, nil
	}
	// The primary pool: a replica behind the primary would let the
	// watermark pass orders it has not replayed yet.
	rows, err := s.w.QueryContext(ctx, `SELECT id, activity_id, sku_id, request_no, user_id, quantity, status, created_ms
		FROM seckill_order WHERE id > ? ORDER BY id LIMIT ?`, after, limit)
	if err != nil {
		return dst, fmt.Errorf("orders after %d: %w", after, err)
	}
	defer rows.Close()
	for rows.Next() {
		var (
			o  OrderRow
			ms int64
		)
		if err := rows.Scan(&o.ID, &o.ActivityID, &o.SKUID, &o.RequestNo, &o.UserID, &o.Quantity, &o.Status, &ms); err != nil {
			return dst, fmt.Errorf("orders after %d: %w", after, err)
		}
		o.Created = time.UnixMilli(ms)
		dst = append(dst, o)
	}
	if err := rows.Err(); err != nil {
		return dst, fmt.Errorf("orders after %d: %w", after, err)
	}
	return dst, nil
}

func (s *sqlStore) RecountSnapshot(ctx context.Context, activity, sku int64) (before, after Snapshot, err error) {
	err = s.inTx(ctx, func(tx *sql.Tx) error {
		before = Snapshot{ActivityID: activity, SKUID: sku}
		if err := tx.QueryRowContext(ctx, `SELECT initial, available, sold, version FROM seckill_stock_snapshot
			WHERE activity_id = ? AND sku_id = ?`+s.d.forUpdate, activity, sku).Scan(
			&before.Initial, &before.Available, &before.Sold, &before.Version); err != nil {
			if errors.Is(err, sql.ErrNoRows) {
				return ErrNotFound
			}
			return err
		}
		var units int64
		if err := tx.QueryRowContext(ctx, `SELECT COALESCE(SUM(quantity), 0) FROM seckill_order
			WHERE activity_id = ? AND sku_id = ? AND status <> ?`, activity, sku, OrderClosed).Scan(&units); err != nil {
			return err
		}
		after = before
		after.Sold, after.Available = units, before.Initial-units
		if after.Sold == before.Sold && after.Available == before.Available {
			return nil
		}
		after.Version++
		_, err := tx.ExecContext(ctx, `UPDATE seckill_stock_snapshot SET available = ?, sold = ?, version = ?
			WHERE activity_id = ? AND sku_id = ?`, after.Available, after.Sold, after.Version, activity, sku)
		return err
	})
	if err != nil {
		return before, after, fmt.Errorf("recount snapshot activity %d sku %d: %w", activity, sku, err)
	}
	return before, after, nil
}

func (s *sqlStore) Activities(ctx context.Context) ([]sale.Activity, error) {
	byID := map[int64]*sale.Activity{}
	var ids []int64
	rows, err := s.r.QueryContext(ctx, `SELECT id, start_ms, end_ms, state, require_token, rebuy_after_close,
		risk_on_error, reserved_only, poll_after_ms, paused, prequeue_min FROM flash_sale_activity`)
	if err != nil {
		return nil, fmt.Errorf("activities: %w", err)
	}
	for rows.Next() {
		var (
			a           sale.Activity
			start, end  int64
			tok, rebuy  int
			only, pause int
		)
		if err := rows.Scan(&a.ID, &start, &end, &a.State, &tok, &rebuy, &a.RiskOnError, &only, &a.PollAfterMs, &pause, &a.Prequeue); err != nil {
			rows.Close()
			return nil, fmt.Errorf("activities: %w", err)
		}
		a.Start, a.End, a.RequireToken = time.UnixMilli(start), time.UnixMilli(end), tok != 0
		a.ReservedOnly, a.Paused = only != 0, pause != 0
		if rebuy == 0 {
			// The default (re-buy allowed) stays absent, as in the
			// activity's JSON; only false is spelled out.
			no := false
			a.RebuyAfterClose = &no
		}
		byID[a.ID] = &a
		ids = append(ids, a.ID)
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("activities: %w", err)
	}
	rows, err = s.r.QueryContext(ctx, `SELECT i.activity_id, i.sku_id, i.price_cents, COALESCE(n.initial, i.stock),
		i.limit_per_user, i.hot, i.hot_shard, i.title, i.original_price_cents, i.buckets, i.hot_shards, i.mode, i.drain_rate
		FROM flash_sale_item i LEFT JOIN seckill_stock_snapshot n
		ON n.activity_id = i.activity_id AND n.sku_id = i.sku_id ORDER BY i.activity_id, i.sku_id`)
	if err != nil {
		return nil, fmt.Errorf("activity items: %w", err)
	}
	for rows.Next() {
		var (
			act   int64
			k     sale.SKU
			price int64
			hot   int
			shard sql.NullInt32
			orig  int64
			pins  string
		)
		if err := rows.Scan(&act, &k.ID, &price, &k.Stock, &k.LimitPerUser, &hot, &shard, &k.Title, &orig, &k.Buckets, &pins, &k.Mode, &k.Rate); err != nil {
			rows.Close()
			return nil, fmt.Errorf("activity items: %w", err)
		}
		k.Price, k.Hot, k.OriginalPrice = sale.Cents(price), hot != 0, sale.Cents(orig)
		if k.HotShards, err = sale.ParseShards(pins); err != nil {
			rows.Close()
			return nil, fmt.Errorf("activity %d item %d: hot_shards: %w", act, k.ID, err)
		}
		if shard.Valid {
			n := int(shard.Int32)
			k.HotShard = &n
		}
		if a := byID[act]; a != nil {
			a.SKUs = append(a.SKUs, k)
		}
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("activity items: %w", err)
	}
	rows, err = s.r.QueryContext(ctx, `SELECT activity_id, user_id FROM flash_sale_reserved_user ORDER BY activity_id, user_id`)
	if err != nil {
		return nil, fmt.Errorf("reserved users: %w", err)
	}
	for rows.Next() {
		var act, u int64
		if err := rows.Scan(&act, &u); err != nil {
			rows.Close()
			return nil, fmt.Errorf("reserved users: %w", err)
		}
		if a := byID[act]; a != nil {
			a.ReservedUsers = append(a.ReservedUsers, u)
		}
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("reserved users: %w", err)
	}
	sort.Slice(ids, func(i, j int) bool { return ids[i] < ids[j] })
	out := make([]sale.Activity, 0, len(ids))
	for _, id := range ids {
		out = append(out, *byID[id])
	}
	return out, nil
}
