package store

import (
	"cmp"
	"context"
	"database/sql"
	"errors"
	"fmt"
	"slices"
	"time"

	"seckill/sale"
)

// chunk bounds the rows of one multi-row statement, far below both
// databases' placeholder limits. A power of two (see stmts.go).
const chunk = 512

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
//     again. A batch of distinct buyers first tries without this read
//     (see below).
//  3. The rest take stock in message order while the locked snapshot has
//     enough; those that do not fit are SoldOut. The conditional
//     decrement (available >= n) still guards the database.
//  4. One insert that ignores duplicates writes the new orders; if it
//     inserted fewer rows than expected another writer won a race, and the
//     batch rolls back with ErrConflict (a retry sees the winner).
//  5. The request log gets ORDER_CREATED or FAILED for every ticket but
//     the Existing ones, whose entry was written with their order, and
//     the ticket's history gets STOCK_OCCUPIED (at the ticket's time),
//     MQ_QUEUED (when the engine built the message) and that state. With
//     Delivered, a created order's entry goes on to SUCCESS in the same
//     statement and its history gets that step after ORDER_CREATED. The
//     history steps are columns of the entry's row (story.go).
//
// Every multi-row statement runs at power-of-two sizes, prepared once per
// connection (stmts.go).
func (s *sqlStore) SaveBatch(ctx context.Context, msgs []sale.Message, opts ...SaveOption) ([]Outcome, error) {
	var opt saveOptions
	for _, o := range opts {
		o(&opt)
	}
	if len(msgs) == 0 {
		if len(opt.letters) == 0 {
			return nil, nil
		}
		err := s.inTx(ctx, func(tx *sql.Tx) error { return s.recordLetters(ctx, tx, opt.letters) })
		if err != nil {
			return nil, fmt.Errorf("save batch of 0: %w", err)
		}
		return nil, nil
	}
	b := newBatch(msgs)
	b.opt = opt
	s.prepare(ctx, &lockSnapshotSQL, 1)
	s.prepare(ctx, &takeStockSQL, 1)
	s.prepare(ctx, &ordersOfUsersSQL, len(msgs))
	s.prepare(ctx, &orderInsertSQL, len(msgs))
	s.prepare(ctx, &storyUpsertSQL, len(msgs))
	// A batch of distinct buyers is tried first as if none of them had an
	// order yet, the common case, where the lookup of the users' orders
	// (step 2) would only repeat the probes of the insert's unique keys.
	// That attempt stands only if every ticket is Created and the insert
	// wrote every row: then the lookup would have found nothing that
	// decides otherwise (a closed order of another requestNo blocks
	// nothing). Else it rolls back and the batch runs again with the
	// lookup.
	err := errNotFresh
	if b.distinct {
		err = s.inTx(ctx, func(tx *sql.Tx) error { return s.saveBatch(ctx, tx, b, true) })
	}
	if errors.Is(err, errNotFresh) {
		err = s.inTx(ctx, func(tx *sql.Tx) error { return s.saveBatch(ctx, tx, b, false) })
	}
	if err != nil {
		return nil, fmt.Errorf("save batch of %d: %w", len(msgs), err)
	}
	return b.out, nil
}

// errNotFresh fails saveBatch's fresh attempt: a ticket is not Created, or
// the insert skipped a row (an order of the batch exists already).
var errNotFresh = errors.New("not every ticket of the batch is a new order")

// saveBatch is one attempt of SaveBatch's transaction. fresh skips the
// lookup of existing orders and fails with errNotFresh, before it writes
// anything but the snapshot, unless every ticket becomes a new order.
func (s *sqlStore) saveBatch(ctx context.Context, tx *sql.Tx, b *batch, fresh bool) error {
	b.reset()
	if err := s.lockSnapshots(ctx, tx, b); err != nil {
		return err
	}
	if !fresh {
		if err := s.findExisting(ctx, tx, b); err != nil {
			return err
		}
	}
	b.decide()
	if fresh && len(b.created) != len(b.msgs) {
		return errNotFresh
	}
	if err := s.takeStock(ctx, tx, b); err != nil {
		return err
	}
	now := s.nowMs()
	if err := s.insertOrders(ctx, tx, b, now); err != nil {
		if fresh && errors.Is(err, ErrConflict) {
			return errNotFresh
		}
		return err
	}
	if err := s.logBatch(ctx, tx, b, now); err != nil {
		return err
	}
	if len(b.opt.letters) > 0 {
		if err := s.recordLetters(ctx, tx, b.opt.letters); err != nil {
			return err
		}
	}
	if s.opt.beforeCommit != nil {
		return s.opt.beforeCommit(ctx, b.msgs)
	}
	return nil
}

// SaveOption changes what SaveBatch records besides the orders.
type SaveOption func(*saveOptions)

type saveOptions struct {
	deliver bool
	remark  string
	letters []DeadLetter
	ids     []string
}

// MessageIDs names the Kafka message of each of SaveBatch's messages, in
// order (ids[i] is msgs[i]'s), for the request log's message_id; a missing
// or empty one leaves the column as it is.
func MessageIDs(ids []string) SaveOption {
	return func(o *saveOptions) { o.ids = ids }
}

// messageID is message i's id (MessageIDs), cut to the column.
func (b *batch) messageID(i int) string {
	if i < len(b.opt.ids) {
		return cut(b.opt.ids[i], maxMessageID)
	}
	return ""
}

// Delivered makes SaveBatch record, in its transaction, the step after a
// created order: the request log entry goes on to SUCCESS with remark and
// the ticket's history gets SUCCESS after ORDER_CREATED. For a caller that
// writes every created order's result before it acknowledges the batch
// (the consumer commits offsets only after the result write; a result lost
// in between is written again by the redelivery, which finds the order).
func Delivered(remark string) SaveOption {
	return func(o *saveOptions) { o.deliver, o.remark = true, remark }
}

// batch is one SaveBatch's working state.
type batch struct {
	opt  saveOptions
	msgs []sale.Message
	out  []Outcome
	// lead[i] is the index of the message whose outcome i follows: i itself
	// for the first ticket of a user on a SKU, else the first ticket.
	lead []int
	same []bool // same[i]: a repeat of lead[i]'s requestNo
	// distinct: every message leads (no repeated requestNo, one ticket
	// per user and SKU).
	distinct bool
	skus     []skuKey
	users    map[skuKey][]int64
	// Filled inside the transaction.
	avail    map[skuKey]int64
	existing map[userKey]existingOrder // live orders of the batch's users
	byReq    map[string]existingOrder  // orders (closed too) of the batch's tickets
	taken    map[skuKey]int64
	created  []int
	boxes    []boxed // see box
}

func newBatch(msgs []sale.Message) *batch {
	b := &batch{
		msgs:  msgs,
		out:   make([]Outcome, len(msgs)),
		lead:  make([]int, len(msgs)),
		same:  make([]bool, len(msgs)),
		users: map[skuKey][]int64{},
		// distinct until a message follows another
		distinct: true,
	}
	byReq := make(map[string]int, len(msgs))
	byUser := make(map[userKey]int, len(msgs))
	for i := range msgs {
		m := &msgs[i]
		if j, ok := byReq[m.RequestNo]; ok {
			b.lead[i], b.same[i], b.distinct = j, true, false
			continue
		}
		byReq[m.RequestNo] = i
		k := userKey{skuKey{m.ActivityID, m.SKUID}, m.UserID}
		if j, ok := byUser[k]; ok {
			b.lead[i], b.distinct = j, false
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
	for i := range b.boxes {
		b.boxes[i].orderNo = nil // the outcomes may change
	}
}

var (
	lockSnapshotSQL = shape{per: 2, sql: func(d *dialect, _ int) string {
		return `SELECT available FROM seckill_stock_snapshot WHERE activity_id = ? AND sku_id = ?` + d.forUpdate
	}}
	takeStockSQL = shape{per: 5, sql: func(*dialect, int) string {
		return `UPDATE seckill_stock_snapshot SET available = available - ?, sold = sold + ?, version = version + 1
			WHERE activity_id = ? AND sku_id = ? AND available >= ?`
	}}
	// ordersOfUsersSQL has 2 placeholders (activity, SKU) before its n
	// users.
	ordersOfUsersSQL = shape{per: 1, sql: func(_ *dialect, n int) string {
		return `SELECT user_id, order_no, request_no, status FROM seckill_order
			WHERE activity_id = ? AND sku_id = ? AND user_id IN (` + marks(n, 1) + `)`
	}}
	orderInsertSQL = shape{per: orderInsertCols, sql: func(d *dialect, n int) string {
		return d.insertIgnore + ` seckill_order (order_no, request_no, activity_id, sku_id, user_id, quantity,
			unit_price_cents, amount_cents, status, trace_id, created_ms, updated_ms, live)
			VALUES ` + marks(n, orderInsertCols)
	}}
	logUpsertSQL = shape{per: logInsertCols, sql: func(d *dialect, n int) string {
		return `INSERT INTO seckill_request_log (` + logColumns + `) VALUES ` + marks(n, logInsertCols) + d.logUpsert
	}}
)

func (s *sqlStore) lockSnapshots(ctx context.Context, tx *sql.Tx, b *batch) error {
	st, err := s.txStmt(ctx, tx, &lockSnapshotSQL, 1)
	if err != nil {
		return fmt.Errorf("lock snapshots: %w", err)
	}
	for _, k := range b.skus {
		var avail int64
		err := st.QueryRowContext(ctx, k.activity, k.sku).Scan(&avail)
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
	var args []any
	for _, k := range b.skus {
		users := b.users[k]
		for len(users) > 0 {
			n := rowsOf(len(users))
			args = append(args[:0], k.activity, k.sku)
			for _, u := range users[:n] {
				args = append(args, u)
			}
			st, err := s.txStmt(ctx, tx, &ordersOfUsersSQL, n)
			if err != nil {
				return fmt.Errorf("find orders activity %d sku %d: %w", k.activity, k.sku, err)
			}
			rows, err := st.QueryContext(ctx, args...)
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
		st, err := s.txStmt(ctx, tx, &takeStockSQL, 1)
		if err != nil {
			return fmt.Errorf("take %d from snapshot activity %d sku %d: %w", n, k.activity, k.sku, err)
		}
		res, err := st.ExecContext(ctx, n, n, k.activity, k.sku, n)
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

// insertOrders writes the created orders in one multi-row statement.
func (s *sqlStore) insertOrders(ctx context.Context, tx *sql.Tx, b *batch, now int64) error {
	if len(b.created) == 0 {
		return nil
	}
	nowA := any(now)
	args := make([]any, 0, len(b.created)*orderInsertCols)
	for _, i := range b.created {
		m, x := &b.msgs[i], b.box(i)
		args = append(args, x.orderNo, x.rn, x.activity, x.sku, x.user, m.Quantity,
			int64(m.UnitPrice), int64(m.UnitPrice)*m.Quantity, OrderPendingPayment, x.trace,
			nowA, nowA, 1)
	}
	c, err := s.execRows(ctx, tx, &orderInsertSQL, args)
	if err != nil {
		return fmt.Errorf("insert %d orders: %w", len(b.created), err)
	}
	if c != int64(len(b.created)) {
		return fmt.Errorf("inserted %d of %d orders: %w", c, len(b.created), ErrConflict)
	}
	return nil
}

const logInsertCols = 12

// logBatch writes the request log entries of the batch with their stories
// (step 5 of SaveBatch; story.go): one multi-row upsert, no history rows.
func (s *sqlStore) logBatch(ctx context.Context, tx *sql.Tx, b *batch, now int64) error {
	n := 0
	for i := range b.msgs {
		// A redelivered ticket's log row was written with its order;
		// rewriting it could move a later state back.
		if !b.same[i] && b.out[i].Kind != Existing {
			n++
		}
	}
	if n == 0 {
		return nil
	}
	nowA, successA, deliveredA := any(now), any(StatusSuccess), any(cut(b.opt.remark, maxRemark))
	createdA, createdDeliveredA := any(StatusOrderCreated), any(StatusOrderCreated+" "+StatusSuccess)
	args := make([]any, 0, n*storyInsertCols)
	for i := range b.msgs {
		if b.same[i] || b.out[i].Kind == Existing {
			continue
		}
		m, o, x := &b.msgs[i], &b.out[i], b.box(i)
		var status, remark, steps any // each boxed once: a value may go into two columns
		switch {
		case b.opt.deliver && o.Kind == Created:
			status, remark, steps = successA, deliveredA, createdDeliveredA
		case o.Kind == Created:
			status, remark, steps = createdA, "", createdA
		default:
			st, rk := logFor(o)
			status, remark = st, cut(rk, maxRemark)
			steps = status
		}
		occupied, ok := sale.RequestNoTime(m.RequestNo)
		if !ok {
			occupied = time.UnixMilli(m.AcceptedAt)
		}
		queued := m.AcceptedAt
		if queued <= 0 {
			// The story is told only of rows with a queued time.
			queued = occupied.UnixMilli()
		}
		// The row is created as of the ticket's acceptance, so a buyer's
		// story (UserRequests) reads in the order things happened.
		args = append(args, x.rn, x.activity, x.sku, x.user, m.Quantity, status, x.orderNo,
			x.trace, remark, occupied.UnixMilli(), nowA, b.messageID(i),
			queued, nowA, steps, remark)
	}
	if _, err := s.execRows(ctx, tx, &storyUpsertSQL, args); err != nil {
		return fmt.Errorf("log %d requests: %w", n, err)
	}
	return nil
}

// boxed are a ticket's values that go into several rows, boxed once:
// boxing each use would allocate each time.
type boxed struct {
	rn, trace, orderNo, activity, sku, user any
}

// box returns ticket i's boxed values.
func (b *batch) box(i int) *boxed {
	if b.boxes == nil {
		b.boxes = make([]boxed, len(b.msgs))
	}
	x := &b.boxes[i]
	if x.rn == nil {
		m := &b.msgs[i]
		x.rn, x.trace = m.RequestNo, cut(m.TraceID, maxTrace)
		x.activity, x.sku, x.user = m.ActivityID, m.SKUID, m.UserID
	}
	if x.orderNo == nil {
		x.orderNo = b.out[i].OrderNo
	}
	return x
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
