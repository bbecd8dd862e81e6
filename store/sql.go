package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strings"
	"time"

	"seckill/sale"
)

// sqlStore is both implementations: the shared SQL over a dialect. w takes
// every write and transaction, r every plain read (the same pool for MySQL).
type sqlStore struct {
	d     *dialect
	w     *sql.DB
	r     *sql.DB
	opt   options
	stmts stmtCache // the batch statements, prepared on w
}

func (s *sqlStore) migrate(ctx context.Context) error {
	for _, q := range s.d.schema {
		if _, err := s.w.ExecContext(ctx, q); err != nil {
			return fmt.Errorf("store %s migrate: %w", s.d.name, err)
		}
	}
	if err := s.migrateLive(ctx); err != nil {
		return fmt.Errorf("store %s migrate: %w", s.d.name, err)
	}
	if err := s.migrateHotShard(ctx); err != nil {
		return fmt.Errorf("store %s migrate: %w", s.d.name, err)
	}
	if err := s.migrateBuckets(ctx); err != nil {
		return fmt.Errorf("store %s migrate: %w", s.d.name, err)
	}
	if err := s.migrateRebuy(ctx); err != nil {
		return fmt.Errorf("store %s migrate: %w", s.d.name, err)
	}
	if err := s.migratePrequeue(ctx); err != nil {
		return fmt.Errorf("store %s migrate: %w", s.d.name, err)
	}
	if err := s.migrateMode(ctx); err != nil {
		return fmt.Errorf("store %s migrate: %w", s.d.name, err)
	}
	if err := s.migrateRiskOnError(ctx); err != nil {
		return fmt.Errorf("store %s migrate: %w", s.d.name, err)
	}
	if err := s.migrateDegrade(ctx); err != nil {
		return fmt.Errorf("store %s migrate: %w", s.d.name, err)
	}
	if err := s.migrateUserIndex(ctx); err != nil {
		return fmt.Errorf("store %s migrate: %w", s.d.name, err)
	}
	if err := s.migrateProduct(ctx); err != nil {
		return fmt.Errorf("store %s migrate: %w", s.d.name, err)
	}
	if err := s.migrateLogIndex(ctx); err != nil {
		return fmt.Errorf("store %s migrate: %w", s.d.name, err)
	}
	if err := s.migrateStory(ctx); err != nil {
		return fmt.Errorf("store %s migrate: %w", s.d.name, err)
	}
	return nil
}

func (s *sqlStore) nowMs() int64 { return s.opt.now().UnixMilli() }

func (s *sqlStore) SetDegrade(ctx context.Context, activity int64, d sale.Degrade) error {
	if err := d.Validate(); err != nil {
		return fmt.Errorf("set degrade of activity %d: %w", activity, err)
	}
	r, err := s.w.ExecContext(ctx, `UPDATE flash_sale_activity SET reserved_only = ?, poll_after_ms = ?, paused = ?,
		updated_ms = ? WHERE id = ?`, boolInt(d.ReservedOnly), d.PollAfterMs, boolInt(d.Paused), s.nowMs(), activity)
	if err != nil {
		return fmt.Errorf("set degrade of activity %d: %w", activity, err)
	}
	if n, err := r.RowsAffected(); err != nil {
		return fmt.Errorf("set degrade of activity %d: %w", activity, err)
	} else if n == 0 {
		return fmt.Errorf("set degrade of activity %d: %w", activity, ErrNotFound)
	}
	return nil
}

func (s *sqlStore) SetMode(ctx context.Context, activity, sku int64, mode string, rate int64) error {
	k := sale.SKU{ID: sku, Mode: mode, Rate: rate}
	if err := k.ValidateMode(); err != nil {
		return fmt.Errorf("set mode of activity %d sku %d: %w", activity, sku, err)
	}
	if _, err := s.w.ExecContext(ctx, `UPDATE flash_sale_item SET mode = ?, drain_rate = ? WHERE activity_id = ? AND sku_id = ?`,
		mode, rate, activity, sku); err != nil {
		return fmt.Errorf("set mode of activity %d sku %d: %w", activity, sku, err)
	}
	// MySQL counts the rows changed, not the rows found: a switch to the
	// mode the row has is 0 rows. Whether the SKU is there is asked.
	var n int
	if err := s.w.QueryRowContext(ctx, `SELECT COUNT(*) FROM flash_sale_item WHERE activity_id = ? AND sku_id = ?`,
		activity, sku).Scan(&n); err != nil {
		return fmt.Errorf("set mode of activity %d sku %d: %w", activity, sku, err)
	}
	if n == 0 {
		return fmt.Errorf("set mode of activity %d sku %d: %w", activity, sku, ErrNotFound)
	}
	return nil
}

func (s *sqlStore) PutActivity(ctx context.Context, a sale.Activity) error {
	if err := a.Validate(); err != nil {
		return fmt.Errorf("put activity: %w", err)
	}
	err := s.inTx(ctx, func(tx *sql.Tx) error {
		now := s.nowMs()
		if _, err := tx.ExecContext(ctx, `INSERT INTO flash_sale_activity
			(id, start_ms, end_ms, state, require_token, rebuy_after_close, risk_on_error,
			reserved_only, poll_after_ms, paused, prequeue_min, updated_ms)
			VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`+s.d.activityUpsert,
			a.ID, a.Start.UnixMilli(), a.End.UnixMilli(), a.State, boolInt(a.RequireToken), boolInt(a.Rebuy()),
			a.RiskOnError, boolInt(a.ReservedOnly), a.PollAfterMs, boolInt(a.Paused), a.Prequeue, now); err != nil {
			return err
		}
		if _, err := tx.ExecContext(ctx, `DELETE FROM flash_sale_reserved_user WHERE activity_id = ?`, a.ID); err != nil {
			return err
		}
		for rest := a.ReservedUsers; len(rest) > 0; {
			n := min(len(rest), chunk)
			args := make([]any, 0, 2*n)
			for _, u := range rest[:n] {
				args = append(args, a.ID, u)
			}
			if _, err := tx.ExecContext(ctx, s.d.insertIgnore+` flash_sale_reserved_user (activity_id, user_id)
				VALUES `+marks(n, 2), args...); err != nil {
				return err
			}
			rest = rest[n:]
		}
		keep := make([]any, 0, len(a.SKUs)+1)
		keep = append(keep, a.ID)
		for _, k := range a.SKUs {
			keep = append(keep, k.ID)
		}
		if _, err := tx.ExecContext(ctx, `DELETE FROM flash_sale_item WHERE activity_id = ? AND sku_id NOT IN (`+
			marks(len(a.SKUs), 1)+`)`, keep...); err != nil {
			return err
		}
		for _, k := range a.SKUs {
			if _, err := tx.ExecContext(ctx, `INSERT INTO flash_sale_item
				(activity_id, sku_id, price_cents, stock, limit_per_user, hot, hot_shard, title, original_price_cents, buckets, hot_shards,
				mode, drain_rate)
				VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`+s.d.itemUpsert,
				a.ID, k.ID, int64(k.Price), k.Stock, k.LimitPerUser, boolInt(k.Hot), k.HotShard, k.Title,
				int64(k.OriginalPrice), k.Buckets, sale.FormatShards(k.HotShards), k.Mode, k.Rate); err != nil {
				return err
			}
			// The snapshot counts orders made; a replace must not
			// hand that stock out a second time.
			if _, err := tx.ExecContext(ctx, s.d.insertIgnore+` seckill_stock_snapshot
				(activity_id, sku_id, initial, available, sold, version) VALUES (?, ?, ?, ?, 0, 0)`,
				a.ID, k.ID, k.Stock, k.Stock); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("put activity %d: %w", a.ID, err)
	}
	return nil
}

// inTx runs f in a write transaction and commits it, or rolls back when f
// fails.
func (s *sqlStore) inTx(ctx context.Context, f func(tx *sql.Tx) error) error {
	tx, err := s.w.BeginTx(ctx, s.d.txOptions)
	if err != nil {
		return fmt.Errorf("begin: %w", err)
	}
	if err := f(tx); err != nil {
		_ = tx.Rollback()
		return err
	}
	if err := tx.Commit(); err != nil {
		return fmt.Errorf("commit: %w", err)
	}
	return nil
}

func (s *sqlStore) Snapshot(ctx context.Context, activity, sku int64) (Snapshot, error) {
	sn := Snapshot{ActivityID: activity, SKUID: sku}
	err := s.r.QueryRowContext(ctx, `SELECT initial, available, sold, version FROM seckill_stock_snapshot
		WHERE activity_id = ? AND sku_id = ?`, activity, sku).Scan(&sn.Initial, &sn.Available, &sn.Sold, &sn.Version)
	if errors.Is(err, sql.ErrNoRows) {
		return sn, fmt.Errorf("snapshot activity %d sku %d: %w", activity, sku, ErrNotFound)
	}
	if err != nil {
		return sn, fmt.Errorf("snapshot activity %d sku %d: %w", activity, sku, err)
	}
	return sn, nil
}

func (s *sqlStore) CountOrders(ctx context.Context, activity, sku int64) (orders, units int64, err error) {
	err = s.r.QueryRowContext(ctx, `SELECT COUNT(*), COALESCE(SUM(quantity), 0) FROM seckill_order
		WHERE activity_id = ? AND sku_id = ? AND status <> ?`, activity, sku, OrderClosed).Scan(&orders, &units)
	if err != nil {
		return 0, 0, fmt.Errorf("count orders activity %d sku %d: %w", activity, sku, err)
	}
	return orders, units, nil
}

const orderColumns = `id, order_no, request_no, activity_id, sku_id, user_id, quantity,
	unit_price_cents, amount_cents, status, trace_id, created_ms, updated_ms, source`

func (s *sqlStore) Order(ctx context.Context, orderNo string) (Order, error) {
	return s.order(ctx, "order_no", orderNo)
}

func (s *sqlStore) OrderByRequest(ctx context.Context, requestNo string) (Order, error) {
	return s.order(ctx, "request_no", requestNo)
}

func (s *sqlStore) order(ctx context.Context, col, v string) (Order, error) {
	return scanOrder(s.r.QueryRowContext(ctx, `SELECT `+orderColumns+` FROM seckill_order WHERE `+col+` = ?`, v), col, v)
}

// scanOrder reads one row of orderColumns.
func scanOrder(row interface{ Scan(...any) error }, col, v string) (Order, error) {
	var (
		o                Order
		price, amount    int64
		created, updated int64
	)
	err := row.Scan(&o.ID, &o.OrderNo, &o.RequestNo, &o.ActivityID, &o.SKUID, &o.UserID, &o.Quantity,
		&price, &amount, &o.Status, &o.TraceID, &created, &updated, &o.Source)
	if errors.Is(err, sql.ErrNoRows) {
		return o, fmt.Errorf("order %s %s: %w", col, v, ErrNotFound)
	}
	if err != nil {
		return o, fmt.Errorf("order %s %s: %w", col, v, err)
	}
	o.UnitPrice, o.Amount = sale.Cents(price), sale.Cents(amount)
	o.Created, o.Updated = time.UnixMilli(created), time.UnixMilli(updated)
	return o, nil
}

const logColumns = `request_no, activity_id, sku_id, user_id, quantity, status, order_no, trace_id,
	remark, created_ms, updated_ms, message_id`

func (s *sqlStore) LogRequest(ctx context.Context, e LogEntry) error {
	return s.LogRequests(ctx, []LogEntry{e})
}

func (s *sqlStore) RequestLog(ctx context.Context, requestNo string) (LogEntry, error) {
	e, err := scanLog(s.r.QueryRowContext(ctx, `SELECT `+logColumns+` FROM seckill_request_log WHERE request_no = ?`,
		requestNo))
	if errors.Is(err, sql.ErrNoRows) {
		return e, fmt.Errorf("request log %s: %w", requestNo, ErrNotFound)
	}
	if err != nil {
		return e, fmt.Errorf("request log %s: %w", requestNo, err)
	}
	return e, nil
}

// scanLog reads one row of logColumns.
func scanLog(row interface{ Scan(...any) error }) (LogEntry, error) {
	var (
		e                LogEntry
		created, updated int64
	)
	if err := row.Scan(&e.RequestNo, &e.ActivityID, &e.SKUID, &e.UserID, &e.Quantity, &e.Status, &e.OrderNo,
		&e.TraceID, &e.Remark, &created, &updated, &e.MessageID); err != nil {
		return e, err
	}
	e.Created, e.Updated = time.UnixMilli(created), time.UnixMilli(updated)
	return e, nil
}

func (s *sqlStore) Ping(ctx context.Context) error {
	if err := s.w.PingContext(ctx); err != nil {
		return fmt.Errorf("store %s ping: %w", s.d.name, err)
	}
	if s.r != s.w {
		if err := s.r.PingContext(ctx); err != nil {
			return fmt.Errorf("store %s ping: %w", s.d.name, err)
		}
	}
	return nil
}

func (s *sqlStore) Close() error {
	s.stmts.closeAll()
	err := s.w.Close()
	if s.r != s.w {
		if e := s.r.Close(); err == nil {
			err = e
		}
	}
	return err
}

// Column widths the MySQL schema enforces (strict mode refuses longer
// values); free text is cut to fit rather than failing a batch.
const (
	maxTrace     = 128
	maxRemark    = 255
	maxMessageID = 64
)

func cut(s string, n int) string {
	if len(s) <= n {
		return s
	}
	// Do not split a UTF-8 sequence.
	for n > 0 && n < len(s) && s[n]&0xC0 == 0x80 {
		n--
	}
	return s[:n]
}

// marks returns n row groups of "(?, …)" with cols placeholders each,
// comma-separated; for cols 1, "?, ?, …".
func marks(n, cols int) string {
	if cols == 1 {
		return strings.TrimSuffix(strings.Repeat("?, ", n), ", ")
	}
	row := "(" + marks(cols, 1) + ")"
	return strings.TrimSuffix(strings.Repeat(row+", ", n), ", ")
}

func boolInt(b bool) int {
	if b {
		return 1
	}
	return 0
}

func (s *sqlStore) Restock(ctx context.Context, activity, sku, n int64) error {
	if n <= 0 {
		return fmt.Errorf("restock: units must be positive")
	}
	res, err := s.w.ExecContext(ctx, `UPDATE seckill_stock_snapshot
		SET initial = initial + ?, available = available + ?, version = version + 1
		WHERE activity_id = ? AND sku_id = ?`, n, n, activity, sku)
	if err != nil {
		return fmt.Errorf("restock activity %d sku %d: %w", activity, sku, err)
	}
	if k, err := res.RowsAffected(); err == nil && k == 0 {
		return fmt.Errorf("restock activity %d sku %d: %w", activity, sku, ErrNotFound)
	}
	return nil
}
