package web

import (
	"context"
	"encoding/base64"
	"encoding/binary"
	"encoding/json"
	"strconv"
	"time"

	"github.com/valyala/fasthttp"

	"seckill/edge"
	"seckill/internal/identity"
	"seckill/internal/ratelimit"
	"seckill/store"
)

// OrdersPath is the buyer's "my orders" route on the public listener.
const OrdersPath = "/api/v1/flash-sale/orders"

// Page sizes of Orders: ?limit= defaults to DefaultOrdersLimit and is cut
// to MaxOrdersLimit.
const (
	DefaultOrdersLimit = 20
	MaxOrdersLimit     = 50
)

// OrderLister reads a buyer's orders newest first (store.Store does).
type OrderLister interface {
	UserOrders(ctx context.Context, user int64, after store.OrderCursor, limit int) ([]store.Order, error)
}

// Orders serves GET /api/v1/flash-sale/orders: the caller's orders
// (X-User-Id, parsed as the purchase route parses it), newest first, a page
// at a time, from the orders database. Nobody sees another buyer's orders:
// the query is by the caller's id, and the cursor only says where in that
// list to go on. Answers:
//
//	200 {"orders":[…],"next":"…"}  next only when there are more
//	400 BAD_REQUEST                 malformed X-User-Id, cursor or limit
//	401 UNAUTHORIZED                no X-User-Id
//	429 RATE_LIMITED                over the per-user limit, with Retry-After
//	503 BUSY                        the database did not answer
//
// Build it with NewOrders. Safe for concurrent use.
type Orders struct {
	st         OrderLister
	payTimeout time.Duration
	timeout    time.Duration
	limit      *ratelimit.Local
	identity   *identity.Verifier
}

// OrdersConfig are the knobs of Orders; zero fields take the defaults.
type OrdersConfig struct {
	// PayTimeout is order.pay_timeout: an order's pay deadline is its
	// creation time plus this. Required.
	PayTimeout time.Duration
	// PerSecond and Burst limit each buyer's reads (in process, per edge):
	// the list comes from the database, which a reload loop must not
	// reach at will. Default 2 per second, burst 5.
	PerSecond float64
	Burst     int
	// MaxUsers bounds the limiter's memory. Default 100,000.
	MaxUsers int
	// Timeout bounds one database read. Default 2s.
	Timeout time.Duration
	// Now is the limiter's clock (a test seam). Default time.Now.
	Now func() time.Time
	// Identity is the X-User-Id check (edge.identity); nil checks as mode
	// any.
	Identity *identity.Verifier
}

// NewOrders returns the handler over st.
func NewOrders(st OrderLister, c OrdersConfig) *Orders {
	if c.PerSecond <= 0 {
		c.PerSecond = 2
	}
	if c.Burst <= 0 {
		c.Burst = 5
	}
	if c.MaxUsers <= 0 {
		c.MaxUsers = 100_000
	}
	if c.Timeout <= 0 {
		c.Timeout = 2 * time.Second
	}
	return &Orders{st: st, payTimeout: c.PayTimeout, timeout: c.Timeout, identity: c.Identity,
		limit: ratelimit.NewLocal(c.PerSecond, c.Burst, c.MaxUsers, c.Now)}
}

// OrderView is one order as the buyer sees it.
type OrderView struct {
	OrderNo     string    `json:"orderNo"`
	RequestNo   string    `json:"requestNo"`
	ActivityID  int64     `json:"activityId"`
	SKUID       int64     `json:"skuId"`
	Quantity    int64     `json:"quantity"`
	Amount      string    `json:"amount"` // "99.00"
	State       string    `json:"state"`  // PENDING_PAYMENT, PAID, CLOSED
	Created     time.Time `json:"created"`
	PayDeadline time.Time `json:"payDeadline"`
}

// OrdersPage is the answer of Orders.
type OrdersPage struct {
	Orders []OrderView `json:"orders"`
	// Next continues the list (?cursor=Next); empty on the last page.
	Next string `json:"next,omitempty"`
}

// Handle is the fasthttp handler.
func (h *Orders) Handle(ctx *fasthttp.RequestCtx) {
	ctx.Response.Header.Set("Cache-Control", "no-store")
	user, r := h.identity.User(ctx)
	if r != identity.OK {
		edge.IdentityAnswer(r).Write(ctx)
		return
	}
	if ok, wait := h.limit.Allow(uint64(user)); !ok {
		edge.AnswerReadsLimited.Retry(ctx, wait)
		return
	}
	args := ctx.QueryArgs()
	limit := DefaultOrdersLimit
	if v := args.Peek("limit"); v != nil {
		n, err := strconv.Atoi(string(v))
		if err != nil || n <= 0 {
			edge.AnswerBadLimit.Write(ctx)
			return
		}
		limit = min(n, MaxOrdersLimit)
	}
	var after store.OrderCursor
	if v := args.Peek("cursor"); v != nil {
		var ok bool
		if after, ok = decodeCursor(v); !ok {
			edge.AnswerBadCursor.Write(ctx)
			return
		}
	}
	c, cancel := context.WithTimeout(context.Background(), h.timeout)
	os, err := h.st.UserOrders(c, user, after, limit+1) // one more: is there a next page?
	cancel()
	if err != nil {
		edge.AnswerBusy.Retry(ctx, time.Second)
		return
	}
	page := OrdersPage{Orders: make([]OrderView, 0, min(len(os), limit))}
	if len(os) > limit {
		os = os[:limit]
		page.Next = encodeCursor(os[limit-1].Cursor())
	}
	for _, o := range os {
		page.Orders = append(page.Orders, OrderView{OrderNo: o.OrderNo, RequestNo: o.RequestNo,
			ActivityID: o.ActivityID, SKUID: o.SKUID, Quantity: o.Quantity, Amount: o.Amount.String(),
			State: o.Status, Created: o.Created.UTC(), PayDeadline: o.Created.Add(h.payTimeout).UTC()})
	}
	b, _ := json.Marshal(page)
	ctx.SetContentType("application/json")
	ctx.SetBody(b)
}

// The cursor is opaque to the buyer: a version byte, then the last order's
// creation time (unix ms) and id, big-endian, in unpadded base64url (23
// characters). Only the canonical spelling of a cursor with both fields
// positive is accepted.
const (
	cursorVersion = 1
	cursorBytes   = 17
)

var cursorEncoding = base64.RawURLEncoding.Strict()

func encodeCursor(c store.OrderCursor) string {
	var b [cursorBytes]byte
	b[0] = cursorVersion
	binary.BigEndian.PutUint64(b[1:9], uint64(c.CreatedMs))
	binary.BigEndian.PutUint64(b[9:], uint64(c.ID))
	return cursorEncoding.EncodeToString(b[:])
}

func decodeCursor(s []byte) (store.OrderCursor, bool) {
	var b [cursorBytes]byte
	if cursorEncoding.EncodedLen(cursorBytes) != len(s) {
		return store.OrderCursor{}, false
	}
	if n, err := cursorEncoding.Decode(b[:], s); err != nil || n != cursorBytes || b[0] != cursorVersion {
		return store.OrderCursor{}, false
	}
	c := store.OrderCursor{CreatedMs: int64(binary.BigEndian.Uint64(b[1:9])), ID: int64(binary.BigEndian.Uint64(b[9:]))}
	if c.CreatedMs <= 0 || c.ID <= 0 {
		return store.OrderCursor{}, false
	}
	return c, true
}
