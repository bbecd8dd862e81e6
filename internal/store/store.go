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

	"seckill/internal/sale"
)

// Store is the orders database. Implementations are safe for concurrent use.
type Store interface {
	// PutActivity creates or replaces an activity and its items (items no
	// longer listed are removed) and creates each SKU's stock snapshot if
	// absent (initial = available = stock, sold = 0). An existing snapshot
	// is never reset: it counts orders already made.
	PutActivity(ctx context.Context, a sale.Activity) error
	// SaveBatch turns order messages into orders in one transaction (see
	// batch.go) and reports one Outcome per message, in order. An error
	// means the whole transaction rolled back and nothing changed; the
	// caller retries.
	SaveBatch(ctx context.Context, msgs []sale.Message) ([]Outcome, error)
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
	// LogRequest inserts e into the request log or, when its requestNo is
	// there already, updates status, order number, remark and update time.
	LogRequest(ctx context.Context, e LogEntry) error
	// RequestLog returns the request log entry of requestNo or ErrNotFound.
	RequestLog(ctx context.Context, requestNo string) (LogEntry, error)
	// Restock raises the snapshot's initial and available stock of
	// (activity, sku) by n (the database's half of an on-call restock; the
	// Redis half follows it).
	Restock(ctx context.Context, activity, sku, n int64) error
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
	StatusInit          = "INIT"
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
	Created    time.Time  `json:"created"`
	Updated    time.Time  `json:"updated"`
}

// LogEntry is one row of seckill_request_log: the story of one ticket.
type LogEntry struct {
	RequestNo  string    `json:"requestNo"`
	ActivityID int64     `json:"activityId"`
	SKUID      int64     `json:"skuId"`
	UserID     int64     `json:"userId"`
	Quantity   int64     `json:"quantity"`
	Status     string    `json:"status"`
	OrderNo    string    `json:"orderNo"`
	TraceID    string    `json:"traceId"`
	Remark     string    `json:"remark"` // cut to 255 bytes
	Created    time.Time `json:"created"`
	Updated    time.Time `json:"updated"`
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
