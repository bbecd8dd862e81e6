// Package store is the orders database behind the consumer: activities and
// their items, orders, the request log and the stock snapshot that is the
// database's own last guard against overselling. One interface, two
// implementations with the same schema: MySQL 8 / MariaDB (production) and
// SQLite (the embedded default of `seckill dev`).
package store

import (
	"context"
	"fmt"
	"time"

	"seckill/sale"
)

// Store is the orders database. Implementations are safe for concurrent use.
type Store interface {
	// PutActivity creates or replaces an activity and its items (items no
	// longer listed are removed) and creates each SKU's stock snapshot if
	// absent (initial = available = stock, sold = 0). An existing snapshot
	// is never reset: it counts orders already made. The activity row keeps
	// its window, state, token requirement and re-buy switch
	// (RebuyAfterClose, stored as a.Rebuy()).
	PutActivity(ctx context.Context, a sale.Activity) error
	// SetDegrade writes an activity's degrade switches (and nothing else
	// of it: its reserved users are not rewritten); ErrNotFound: no such
	// activity. Activities reads them back, so a Redis rebuild keeps them.
	SetDegrade(ctx context.Context, activity int64, d sale.Degrade) error
	// SetMode writes one SKU's mode and drain rate (sale.SKU.Mode, Rate;
	// validated as ValidateMode does, without the SKU's buckets: the
	// caller checks those) and nothing else of it; ErrNotFound: the
	// activity does not sell the SKU. Activities reads them back, so a
	// Redis rebuild keeps them.
	SetMode(ctx context.Context, activity, sku int64, mode string, rate int64) error
	// PutRouteSwitch records on-call's switch of a buyer route (package
	// routeswitch); RouteSwitches reads every recorded one back (route
	// name -> open), from which a Redis that lost them is restored.
	PutRouteSwitch(ctx context.Context, name string, open bool) error
	RouteSwitches(ctx context.Context) (map[string]bool, error)
	// SaveBatch turns order messages into orders in one transaction (see
	// batch.go) and reports one Outcome per message, in order. An error
	// means the whole transaction rolled back and nothing changed; the
	// caller retries. Delivered adds the next request-log step of every
	// created order to the transaction.
	SaveBatch(ctx context.Context, msgs []sale.Message, opts ...SaveOption) ([]Outcome, error)
	// Snapshot returns the stock snapshot of (activity, sku) or ErrNotFound.
	Snapshot(ctx context.Context, activity, sku int64) (Snapshot, error)
	// CountOrders counts the orders of (activity, sku) that are not CLOSED
	// and the units they hold.
	CountOrders(ctx context.Context, activity, sku int64) (orders, units int64, err error)
	// Order returns the order numbered orderNo or ErrNotFound.
	Order(ctx context.Context, orderNo string) (Order, error)
	// OrderByRequest returns the order made from ticket requestNo or
	// ErrNotFound.
	OrderByRequest(ctx context.Context, requestNo string) (Order, error)
	// UserOrders lists user's orders (closed ones too), newest first —
	// created, then id, descending —, at most limit of them, starting
	// after the cursor (the zero cursor starts at the newest). Read by the
	// index (user_id, created_ms, id); limit <= 0 reads nothing.
	UserOrders(ctx context.Context, user int64, after OrderCursor, limit int) ([]Order, error)
	// LogRequest inserts e into the request log or, when its requestNo is
	// there already, updates status, order number, remark and update time;
	// and appends the state to the ticket's history.
	LogRequest(ctx context.Context, e LogEntry) error
	// LogRequests is LogRequest for many entries in one transaction, in
	// order (one ticket may appear several times: each entry is one step).
	LogRequests(ctx context.Context, es []LogEntry) error
	// AppendEvents adds steps to tickets' histories without touching
	// their request log rows (order lifecycle steps).
	AppendEvents(ctx context.Context, evs []Event) error
	// RequestEvents returns the history of requestNo, oldest first; empty
	// when there is none.
	RequestEvents(ctx context.Context, requestNo string) ([]Event, error)
	// RequestLog returns the request log entry of requestNo or ErrNotFound.
	RequestLog(ctx context.Context, requestNo string) (LogEntry, error)
	// UserRequests lists user's request log entries (of activity, or of
	// every activity when it is 0), newest first — created, then row id,
	// descending —, at most limit, starting after the cursor. next
	// continues the list; zero when this page is the last. Read by the
	// index (user_id, activity_id, created_ms).
	UserRequests(ctx context.Context, user, activity int64, after RequestCursor, limit int) (es []LogEntry, next RequestCursor, err error)
	// RequestHistories returns the histories of requestNos (each oldest
	// first), in one read per chunk of tickets.
	RequestHistories(ctx context.Context, requestNos []string) (map[string][]Event, error)
	// CountRejections adds each count to its (activity, sku, reason,
	// minute) counter, in one transaction.
	CountRejections(ctx context.Context, cs []RejectCount) error
	// Rejections lists activity's free-rejection counters from the minute
	// of since on, oldest first.
	Rejections(ctx context.Context, activity int64, since time.Time) ([]RejectCount, error)
	// Activities returns every activity with its items and reserved
	// users. Each SKU's Stock is its snapshot's initial stock (restocks
	// included), which is what a rebuild of Redis starts from.
	// RebuyAfterClose is what PutActivity last wrote: nil for the default
	// (re-buy allowed, also every row from before the column), a pointer
	// to false where the activity forbids buying again after a close.
	Activities(ctx context.Context) ([]sale.Activity, error)
	// Item returns one SKU of an activity as PutActivity last wrote it
	// (price, per-user limit, hot placement), or ErrNotFound.
	Item(ctx context.Context, activity, sku int64) (sale.SKU, error)
	// ConfirmPayment records a payment provider's confirmation p and marks
	// its order PAID, in one transaction: only when the order is
	// PENDING_PAYMENT and was created at or after createdSince (not past its
	// payment deadline) — the conditional update is where a race with
	// CloseOrder is decided — and its amount is p.Amount. A reference that
	// paid this order before is a replay (PaymentReplayed, nothing changes);
	// one that paid another order is ErrPaymentRefReused; an amount other
	// than the order's is ErrPaymentAmount (nothing is recorded for either);
	// an order that is CLOSED, past its deadline or PAID under another
	// reference is PaymentNotPayable (nothing recorded). ErrNotFound: no
	// such order. The order is returned as it stands afterwards.
	ConfirmPayment(ctx context.Context, p Payment, createdSince time.Time) (Order, PaymentResult, error)
	// ExpiredOrders lists at most limit PENDING_PAYMENT orders created
	// before t, oldest first.
	ExpiredOrders(ctx context.Context, t time.Time, limit int) ([]Order, error)
	// CloseOrder closes orderNo if it is still PENDING_PAYMENT and was
	// created before createdBefore: in one transaction the order becomes
	// CLOSED (no longer live), the snapshot gets its units back and a
	// durable release marker is written for the Redis half (see
	// PendingReleases). closed reports whether this call closed it; the
	// order is returned as it stands.
	CloseOrder(ctx context.Context, orderNo string, createdBefore time.Time) (o Order, closed bool, err error)
	// PendingReleases lists at most limit release markers whose Redis
	// release is not done, oldest first.
	PendingReleases(ctx context.Context, limit int) ([]Release, error)
	// ReleaseDone marks requestNo's release marker done.
	ReleaseDone(ctx context.Context, requestNo string) error
	// Ledger reads the snapshot and every order (closed ones too) of
	// (activity, sku) in one consistent read, for the reconciler.
	Ledger(ctx context.Context, activity, sku int64) (Snapshot, []OrderRef, error)
	// OrdersAfter appends to dst at most limit orders (closed ones too) of
	// every activity with an id above after, by id: the reconciler's
	// incremental audit pages through the orders made since its watermark
	// by the primary key, whatever number of orders came before.
	OrdersAfter(ctx context.Context, after int64, limit int, dst []OrderRow) ([]OrderRow, error)
	// RecountSnapshot sets the snapshot's sold to the units of the live
	// orders and available to initial − sold, under the snapshot's row lock
	// (the lock every order insert and close takes first), and returns it
	// before and after.
	RecountSnapshot(ctx context.Context, activity, sku int64) (before, after Snapshot, err error)
	// Restock raises the snapshot's initial and available stock of
	// (activity, sku) by n (the database's half of an on-call restock; the
	// Redis half follows it).
	Restock(ctx context.Context, activity, sku, n int64) error
	// QuarantinedLetters lists at most limit rows of seckill_dead_letter
	// (the dead letters the dead-letter topic refused; see DeadLettered),
	// oldest first.
	QuarantinedLetters(ctx context.Context, limit int) ([]DeadLetter, error)
	// Ping checks the database is reachable.
	Ping(ctx context.Context) error
	// Close closes the connections.
	Close() error
}

// OutcomeKind says what SaveBatch did with one message.
type OutcomeKind int

// Outcome kinds.
const (
	// Created: a new order was inserted and stock taken from the snapshot.
	Created OutcomeKind = iota + 1
	// Existing: the ticket's order exists already (a redelivery); nothing
	// changed.
	Existing
	// Duplicate: the user has an order for the SKU from another ticket
	// (OrderNo names it); no order was made for this ticket, whose
	// occupancy the caller releases.
	Duplicate
	// SoldOut: the snapshot had too little stock left; no order was made.
	SoldOut
)

var kindNames = [...]string{"", "created", "existing", "duplicate", "soldout"}

// String is the lower-case name, as used in metric labels.
func (k OutcomeKind) String() string {
	if k > 0 && int(k) < len(kindNames) {
		return kindNames[k]
	}
	return fmt.Sprintf("OutcomeKind(%d)", int(k))
}

// Outcome is SaveBatch's answer for one message.
type Outcome struct {
	RequestNo string
	Kind      OutcomeKind
	// OrderNo is the ticket's order (Created, Existing) or the order that
	// made this ticket a Duplicate; empty for SoldOut.
	OrderNo string
	// OrderStatus is the status of the order OrderNo names (PENDING_PAYMENT
	// for Created). A Duplicate of a CLOSED order means the user's one
	// order for the SKU was closed unpaid.
	OrderStatus string
}

// Order statuses.
const (
	OrderPendingPayment = "PENDING_PAYMENT"
	OrderPaid           = "PAID"
	OrderClosed         = "CLOSED"
)

// Request log statuses: the states of DESIGN §3.
const (
	StatusTokenVerified = "TOKEN_VERIFIED"
	StatusRiskPassed    = "RISK_PASSED"
	StatusStockOccupied = "STOCK_OCCUPIED"
	StatusMQQueued      = "MQ_QUEUED"
	StatusOrderCreated  = "ORDER_CREATED"
	StatusSuccess       = "SUCCESS"
	StatusRejected      = "REJECTED"
	StatusFailed        = "FAILED"
	StatusCompensating  = "COMPENSATING"
)

// SourceSeckill is the source of every order the flash sale makes (the
// column's default).
const SourceSeckill = "SECKILL"

// Snapshot is the database's stock of one SKU of one activity.
type Snapshot struct {
	ActivityID int64
	SKUID      int64
	Initial    int64
	Available  int64
	Sold       int64
	Version    int64
}

// Order is one row of seckill_order.
type Order struct {
	ID         int64      `json:"id"`
	OrderNo    string     `json:"orderNo"`
	RequestNo  string     `json:"requestNo"`
	ActivityID int64      `json:"activityId"`
	SKUID      int64      `json:"skuId"`
	UserID     int64      `json:"userId"`
	Quantity   int64      `json:"quantity"`
	UnitPrice  sale.Cents `json:"unitPrice"`
	Amount     sale.Cents `json:"amount"`
	Status     string     `json:"status"`
	TraceID    string     `json:"traceId"`
	// Source is the channel the order came from (seed 001 §8.1):
	// SourceSeckill for every order this system makes.
	Source  string    `json:"source"`
	Created time.Time `json:"created"`
	Updated time.Time `json:"updated"`
}

// Payment is a payment provider's confirmation that it took Amount for
// OrderNo, under its own reference ProviderRef.
type Payment struct {
	OrderNo     string
	ProviderRef string
	Amount      sale.Cents
}

// PaymentResult is what ConfirmPayment did.
type PaymentResult int

// Results of ConfirmPayment.
const (
	// PaymentApplied: this call paid the order.
	PaymentApplied PaymentResult = iota
	// PaymentReplayed: the reference paid this order before; nothing changed.
	PaymentReplayed
	// PaymentNotPayable: the order is CLOSED, past its deadline, or PAID
	// under another reference; nothing was recorded.
	PaymentNotPayable
)

// OrderRef is the part of an order the reconciler compares with Redis.
type OrderRef struct {
	RequestNo string
	UserID    int64
	Quantity  int64
	Status    string
	Created   time.Time
}

// Live reports whether the order holds stock (it is not CLOSED).
func (o OrderRef) Live() bool { return o.Status != OrderClosed }

// OrderRow is an order as OrdersAfter reads it: its id (the watermark),
// activity and SKU, and the part the reconciler compares with Redis.
type OrderRow struct {
	ID         int64
	ActivityID int64
	SKUID      int64
	OrderRef
}

// Release is a durable marker of a closed order whose unit must go back to
// Redis: written in the transaction that closes the order, marked done
// once Redis released the ticket.
type Release struct {
	RequestNo  string
	OrderNo    string
	ActivityID int64
	SKUID      int64
	UserID     int64
	Quantity   int64
	Created    time.Time
}

// Message is the order message the release is bound to (Stock.Release
// takes one).
func (r Release) Message() sale.Message {
	return sale.Message{RequestNo: r.RequestNo, ActivityID: r.ActivityID, SKUID: r.SKUID, UserID: r.UserID,
		Quantity: r.Quantity}
}

// LogEntry is one row of seckill_request_log: the story of one ticket.
type LogEntry struct {
	RequestNo  string `json:"requestNo"`
	ActivityID int64  `json:"activityId"`
	SKUID      int64  `json:"skuId"`
	UserID     int64  `json:"userId"`
	Quantity   int64  `json:"quantity"`
	Status     string `json:"status"`
	OrderNo    string `json:"orderNo"`
	TraceID    string `json:"traceId"`
	Remark     string `json:"remark"` // cut to 255 bytes
	// MessageID names the Kafka message the ticket's order was made from
	// ("partition/offset"), once the consumer has seen it; empty before,
	// and for an attempt that never had a message.
	MessageID string    `json:"messageId,omitempty"`
	Created   time.Time `json:"created"`
	Updated   time.Time `json:"updated"`
	// At is when the state was reached, for the ticket's history (zero:
	// now). Not stored in the log row itself.
	At time.Time `json:"-"`
}

// Option changes how Open builds the store. Options are test seams.
type Option func(*options)

type options struct {
	beforeCommit func(ctx context.Context, msgs []sale.Message) error
	now          func() time.Time
}

// WithBeforeCommit runs f inside every SaveBatch transaction just before
// COMMIT; an error from f rolls the transaction back for real and SaveBatch
// returns it. Tests use it to make a batch fail.
func WithBeforeCommit(f func(ctx context.Context, msgs []sale.Message) error) Option {
	return func(o *options) { o.beforeCommit = f }
}

// WithClock sets the clock that stamps created/updated times.
func WithClock(now func() time.Time) Option {
	return func(o *options) { o.now = now }
}

// Open validates cfg, connects with the configured driver and creates the
// schema if it is missing.
func Open(cfg Config, opts ...Option) (Store, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	o := options{now: time.Now}
	for _, f := range opts {
		f(&o)
	}
	var (
		s   *sqlStore
		err error
	)
	switch cfg.Driver {
	case "mysql":
		s, err = openMySQL(cfg)
	default:
		s, err = openSQLite(cfg)
	}
	if err != nil {
		return nil, err
	}
	s.opt = o
	ctx, cancel := context.WithTimeout(context.Background(), cfg.migrateTimeout())
	defer cancel()
	if err := s.migrate(ctx); err != nil {
		s.Close()
		return nil, err
	}
	return s, nil
}
