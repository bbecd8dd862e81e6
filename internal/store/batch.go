package store

import (
	"cmp"
	"context"
	"database/sql"
	"fmt"
	"slices"
	"time"

	"seckill/internal/sale"
)

// chunk bounds the rows of one multi-row statement, far below both
// databases' placeholder limits.
const chunk = 500

type skuKey struct{ activity, sku int64 }

type userKey struct {
	skuKey
	user int64
}

type existingOrder struct {
	orderNo, requestNo, status string
}

// SaveBatch writes msgs in one transaction (DESIGN §7):
//
//  1. Within the batch, a repeated requestNo counts once (the repeats get
//     the first's outcome) and of several tickets of one user on one SKU
//     the first wins; the others become Duplicates of its order (or share
//     its SoldOut).
//  2. The stock snapshot rows of the batch's SKUs are locked in key order
//     (no deadlock between batches), then the users' existing orders are
//     read: one with the same requestNo is Existing (even if it was closed
//     since), a live one with another requestNo is Duplicate. Neither
//     changes stock. A closed order blocks nothing: its buyer may order
//     again.
//  3. The rest take stock in message order while the locked snapshot has
//     enough; those that do not fit are SoldOut. The conditional
//     decrement (available >= n) still guards the database.
//  4. One insert that ignores duplicates writes the new orders; if it
//     inserted fewer rows than expected another writer won a race, and the
//     batch rolls back with ErrConflict (a retry sees the winner).
//  5. The request log gets ORDER_CREATED or FAILED for every ticket but
//     the Existing ones, whose entry was written with their order, and
//     the ticket's history gets STOCK_OCCUPIED (at the ticket's time),
//     MQ_QUEUED (when the engine built the message) and that state.
func (s *sqlStore) SaveBatch(ctx context.Context, msgs []sale.Message) ([]Outcome, error) {
	if len(msgs) == 0 {
		return nil, nil
	}
	b := newBatch(msgs)
	err := s.inTx(ctx, func(tx *sql.Tx) error {
		b.reset()
		if err := s.lockSnapshots(ctx, tx, b); err != nil {
			return err
		}
		if err := s.findExisting(ctx, tx, b); err != nil {
			return err
		}
		b.decide()
		if err := s.takeStock(ctx, tx, b); err != nil {
			return err
		}
		now := s.nowMs()
		if err := s.insertOrders(ctx, tx, b, now); err != nil {
			return err
		}
		if err := s.logBatch(ctx, tx, b, now); err != nil {
			return err
		}
		if s.opt.beforeCommit != nil {
			return s.opt.beforeCommit(ctx, msgs)
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("save batch of %d: %w", len(msgs), err)
	}
	return b.out, nil
}

// batch is one SaveBatch's working state.
type batch struct {
	msgs []sale.Message
	out  []Outcome
	// lead[i] is the index of the message whose outcome i follows: i itself
	// for the first ticket of a user on a SKU, else the first ticket.
	lead  []int
	same  []bool // same[i]: a repeat of lead[i]'s requestNo
	skus  []skuKey
	users map[skuKey][]int64
	// Filled inside the transaction.
	avail    map[skuKey]int64
	existing map[userKey]existingOrder // live orders of the batch's users
	byReq    map[string]existingOrder  // orders (closed too) of the batch's tickets
	taken    map[skuKey]int64
	created  []int
}

func newBatch(msgs []sale.Message) *batch {
	b := &batch{
		msgs:  msgs,
		out:   make([]Outcome, len(msgs)),
		lead:  make([]int, len(msgs)),
		same:  make([]bool, len(msgs)),
		users: map[skuKey][]int64{},
	}
	byReq := make(map[string]int, len(msgs))
	byUser := make(map[userKey]int, len(msgs))
	for i := range msgs {
		m := &msgs[i]
		if j, ok := byReq[m.RequestNo]; ok {
			b.lead[i], b.same[i] = j, true
			continue
		}
		byReq[m.RequestNo] = i
		k := userKey{skuKey{m.ActivityID, m.SKUID}, m.UserID}
		if j, ok := byUser[k]; ok {
			b.lead[i] = j
			continue
		}
		byUser[k] = i
		b.lead[i] = i
		if _, ok := b.users[k.skuKey]; !ok {
			b.skus = append(b.skus, k.skuKey)
		}
		b.users[k.skuKey] = append(b.users[k.skuKey], k.user)
	}
	slices.SortFunc(b.skus, func(x, y skuKey) int {
		return cmp.Or(cmp.Compare(x.activity, y.activity), cmp.Compare(x.sku, y.sku))
	})
	return b
}

// reset clears what a previous attempt of the transaction filled in.
func (b *batch) reset() {
	clear(b.out)
	b.avail = make(map[skuKey]int64, len(b.skus))
	b.existing = map[userKey]existingOrder{}
	b.byReq = map[string]existingOrder{}
	b.taken = map[skuKey]int64{}
	b.created = b.created[:0]
}

func (s *sqlStore) lockSnapshots(ctx context.Context, tx *sql.Tx, b *batch) error {
	for _, k := range b.skus {
		var avail int64
		err := tx.QueryRowContext(ctx, `SELECT available FROM seckill_stock_snapshot
			WHERE activity_id = ? AND sku_id = ?`+s.d.forUpdate, k.activity, k.sku).Scan(&avail)
		if err == sql.ErrNoRows {
			return fmt.Errorf("activity %d sku %d: %w", k.activity, k.sku, ErrNoSnapshot)
		}
		if err != nil {
			return fmt.Errorf("lock snapshot activity %d sku %d: %w", k.activity, k.sku, err)
		}
		b.avail[k] = avail
	}
	return nil
}

func (s *sqlStore) findExisting(ctx context.Context, tx *sql.Tx, b *batch) error {
	for _, k := range b.skus {
		users := b.users[k]
		for len(users) > 0 {
			n := min(len(users), chunk)
			args := make([]any, 0, n+2)
			args = append(args, k.activity, k.sku)
			for _, u := range users[:n] {
				args = append(args, u)
			}
			rows, err := tx.QueryContext(ctx, `SELECT user_id, order_no, request_no, status FROM seckill_order
				WHERE activity_id = ? AND sku_id = ? AND user_id IN (`+marks(n, 1)+`)`, args...)
			if err != nil {
				return fmt.Errorf("find orders activity %d sku %d: %w", k.activity, k.sku, err)
			}
			for rows.Next() {
				var (
					u int64
					o existingOrder
				)
				if err := rows.Scan(&u, &o.orderNo, &o.requestNo, &o.status); err != nil {
					rows.Close()
					return fmt.Errorf("find orders activity %d sku %d: %w", k.activity, k.sku, err)
				}
				if o.status != OrderClosed {
					b.existing[userKey{k, u}] = o
				}
				b.byReq[o.requestNo] = o
			}
			err = rows.Err()
			rows.Close()
			if err != nil {
				return fmt.Errorf("find orders activity %d sku %d: %w", k.activity, k.sku, err)
			}
			users = users[n:]
		}
	}
	return nil
}

// decide gives every message its outcome from the existing orders and the
// locked stock, in message order. An order created here counts as existing
// for the messages after it.
func (b *batch) decide() {
	for i := range b.msgs {
		m := &b.msgs[i]
		if b.same[i] {
			b.out[i] = b.out[b.lead[i]]
			continue
		}
		k := userKey{skuKey{m.ActivityID, m.SKUID}, m.UserID}
		if e, ok := b.byReq[m.RequestNo]; ok {
			b.out[i] = Outcome{RequestNo: m.RequestNo, Kind: Existing, OrderNo: e.orderNo, OrderStatus: e.status}
			continue
		}
		if e, ok := b.existing[k]; ok {
			b.out[i] = Outcome{RequestNo: m.RequestNo, Kind: Duplicate, OrderNo: e.orderNo, OrderStatus: e.status}
			continue
		}
		if j := b.lead[i]; j != i && b.out[j].Kind == SoldOut {
			// The user's first ticket did not fit: neither do the others.
			b.out[i] = Outcome{RequestNo: m.RequestNo, Kind: SoldOut}
			continue
		}
		if b.avail[k.skuKey] < m.Quantity {
			b.out[i] = Outcome{RequestNo: m.RequestNo, Kind: SoldOut}
			continue
		}
		b.avail[k.skuKey] -= m.Quantity
		b.taken[k.skuKey] += m.Quantity
		b.created = append(b.created, i)
		b.out[i] = Outcome{RequestNo: m.RequestNo, Kind: Created, OrderNo: sale.OrderNo(m.RequestNo),
			OrderStatus: OrderPendingPayment}
		b.existing[k] = existingOrder{orderNo: b.out[i].OrderNo, requestNo: m.RequestNo, status: OrderPendingPayment}
	}
}

func (s *sqlStore) takeStock(ctx context.Context, tx *sql.Tx, b *batch) error {
	for _, k := range b.skus {
		n := b.taken[k]
		if n == 0 {
			continue
		}
		res, err := tx.ExecContext(ctx, `UPDATE seckill_stock_snapshot
			SET available = available - ?, sold = sold + ?, version = version + 1
			WHERE activity_id = ? AND sku_id = ? AND available >= ?`, n, n, k.activity, k.sku, n)
		if err != nil {
			return fmt.Errorf("take %d from snapshot activity %d sku %d: %w", n, k.activity, k.sku, err)
		}
		if c, err := res.RowsAffected(); err != nil || c != 1 {
			return fmt.Errorf("take %d from snapshot activity %d sku %d: %w", n, k.activity, k.sku, ErrStockGuard)
		}
	}
	return nil
}

const orderInsertCols = 13

func (s *sqlStore) insertOrders(ctx context.Context, tx *sql.Tx, b *batch, now int64) error {
	for rest := b.created; len(rest) > 0; {
		n := min(len(rest), chunk)
		args := make([]any, 0, n*orderInsertCols)
		for _, i := range rest[:n] {
			m := &b.msgs[i]
			args = append(args, b.out[i].OrderNo, m.RequestNo, m.ActivityID, m.SKUID, m.UserID, m.Quantity,
				int64(m.UnitPrice), int64(m.UnitPrice)*m.Quantity, OrderPendingPayment, cut(m.TraceID, maxTrace),
				now, now, 1)
		}
		res, err := tx.ExecContext(ctx, s.d.insertIgnore+` seckill_order (order_no, request_no, activity_id,
			sku_id, user_id, quantity, unit_price_cents, amount_cents, status, trace_id, created_ms, updated_ms, live)
			VALUES `+marks(n, orderInsertCols), args...)
		if err != nil {
			return fmt.Errorf("insert %d orders: %w", n, err)
		}
		c, err := res.RowsAffected()
		if err != nil {
			return fmt.Errorf("insert %d orders: %w", n, err)
		}
		if c != int64(n) {
			return fmt.Errorf("inserted %d of %d orders: %w", c, n, ErrConflict)
		}
		rest = rest[n:]
	}
	return nil
}

const logInsertCols = 11

func (s *sqlStore) logBatch(ctx context.Context, tx *sql.Tx, b *batch, now int64) error {
	idx := make([]int, 0, len(b.msgs))
	for i := range b.msgs {
		// A redelivered ticket's log row was written with its order;
		// rewriting it could move a later state back.
		if !b.same[i] && b.out[i].Kind != Existing {
			idx = append(idx, i)
		}
	}
	for len(idx) > 0 {
		n := min(len(idx), chunk)
		args := make([]any, 0, n*logInsertCols)
		for _, i := range idx[:n] {
			m, o := &b.msgs[i], &b.out[i]
			status, remark := logFor(o)
			args = append(args, m.RequestNo, m.ActivityID, m.SKUID, m.UserID, m.Quantity, status, o.OrderNo,
				cut(m.TraceID, maxTrace), cut(remark, maxRemark), now, now)
		}
		if _, err := tx.ExecContext(ctx, `INSERT INTO seckill_request_log (`+logColumns+`) VALUES `+
			marks(n, logInsertCols)+s.d.logUpsert, args...); err != nil {
			return fmt.Errorf("log %d requests: %w", n, err)
		}
		evs := make([]Event, 0, 3*n)
		for _, i := range idx[:n] {
			m, o := &b.msgs[i], &b.out[i]
			status, remark := logFor(o)
			occupied, ok := sale.RequestNoTime(m.RequestNo)
			if !ok {
				occupied = time.UnixMilli(m.AcceptedAt)
			}
			evs = append(evs,
				Event{RequestNo: m.RequestNo, Status: StatusStockOccupied, At: occupied},
				Event{RequestNo: m.RequestNo, Status: StatusMQQueued, At: time.UnixMilli(m.AcceptedAt)},
				Event{RequestNo: m.RequestNo, Status: status, Remark: remark, At: time.UnixMilli(now)})
		}
		if err := insertEvents(ctx, tx, evs); err != nil {
			return err
		}
		idx = idx[n:]
	}
	return nil
}

// logFor is the request-log status and remark of an outcome.
func logFor(o *Outcome) (status, remark string) {
	switch o.Kind {
	case Created:
		return StatusOrderCreated, ""
	case Duplicate:
		return StatusFailed, "duplicate: the user already has order " + o.OrderNo + " (" + o.OrderStatus + ")"
	default:
		return StatusFailed, "sold out in the database snapshot"
	}
}
