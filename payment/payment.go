// Package payment is the order lifecycle after the consumer. A buyer starts
// a payment of a PENDING_PAYMENT order and reads its state (Intent, and
// Handler for the edge's POST /api/v1/flash-sale/orders/{orderNo}/pay); the
// order becomes PAID only through the payment provider's callback, signed
// with the provider's key over order number, amount and provider reference
// (Confirm, and CallbackHandler for POST /api/v1/payments/callback). The
// Closer closes the orders left unpaid past order.pay_timeout, giving their
// units back to the database snapshot and then to Redis exactly once (a
// durable marker between the two steps).
//
// Metrics (Closer):
//
//	seckill_payment_closed_total              orders closed unpaid
//	seckill_payment_releases_total{outcome}   Redis releases of closed orders: released, not_held, error
//	seckill_payment_releases_pending          release markers not done at the end of the last scan
package payment

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"strconv"
	"time"

	"go.uber.org/zap"

	"seckill/sale"
	"seckill/store"
)

// Service starts payments and confirms them. Safe for concurrent use.
type Service struct {
	st      store.Store
	key     []byte // the provider's HMAC key; nil refuses every callback
	timeout time.Duration
	log     *zap.Logger
	now     func() time.Time
}

// Option is a test seam.
type Option func(*options)

type options struct{ now func() time.Time }

// WithClock replaces time.Now.
func WithClock(now func() time.Time) Option { return func(o *options) { o.now = now } }

// New returns a Service over st; cfg holds the provider's key, payTimeout
// is order.pay_timeout, log receives the audit lines of every callback.
func New(st store.Store, cfg Config, payTimeout time.Duration, log *zap.Logger, opts ...Option) *Service {
	o := options{now: time.Now}
	for _, f := range opts {
		f(&o)
	}
	s := &Service{st: st, timeout: payTimeout, log: log, now: o.now}
	if cfg.ProviderKey != "" {
		s.key = []byte(cfg.ProviderKey)
	}
	return s
}

// Payment states an Intent reports.
const (
	StateAwaiting = "AWAITING_PAYMENT" // payable until ExpireAt, through the provider
	StatePaid     = "PAID"
	StateClosed   = "CLOSED"  // closed unpaid; its unit is on sale again
	StateExpired  = "EXPIRED" // the deadline passed; the closer is about to close it
)

// Intent is what the buyer's payment route answers: what the provider is
// asked to take, and the order's state.
type Intent struct {
	OrderNo  string
	Amount   sale.Cents
	State    string
	ExpireAt time.Time
}

// Intent starts (or reports) the payment of orderNo for its buyer user. It
// changes nothing: the order is paid only by Confirm. ErrNotFound for an
// order that is not user's; ErrBusy when the database fails.
func (s *Service) Intent(ctx context.Context, orderNo string, user int64) (Intent, error) {
	if !validOrderNo(orderNo) || user <= 0 {
		return Intent{}, ErrNotFound
	}
	o, err := s.st.Order(ctx, orderNo)
	switch {
	case errors.Is(err, store.ErrNotFound):
		return Intent{}, ErrNotFound
	case err != nil:
		return Intent{}, fmt.Errorf("%w: %v", ErrBusy, err)
	case o.UserID != user:
		return Intent{}, ErrNotFound
	}
	in := Intent{OrderNo: o.OrderNo, Amount: o.Amount, ExpireAt: o.Created.Add(s.timeout)}
	switch {
	case o.Status == store.OrderPaid:
		in.State = StatePaid
	case o.Status == store.OrderClosed:
		in.State = StateClosed
	case !s.now().Before(in.ExpireAt):
		in.State = StateExpired
	default:
		in.State = StateAwaiting
	}
	return in, nil
}

// Callback is the payment provider's confirmation that it took Amount for
// OrderNo under its reference ProviderRef; Signature is Sign's value over
// the three with the provider's key. Remote is the caller's address, for
// the audit log.
type Callback struct {
	OrderNo     string
	Amount      sale.Cents
	ProviderRef string
	Signature   string
	Remote      string
}

// Sign is the provider's signature of a callback: hex HMAC-SHA256 under key
// of "v1|orderNo|amount in cents|providerRef".
func Sign(key, orderNo string, amount sale.Cents, providerRef string) string {
	m := hmac.New(sha256.New, []byte(key))
	m.Write(signed(orderNo, amount, providerRef))
	return hex.EncodeToString(m.Sum(nil))
}

func signed(orderNo string, amount sale.Cents, ref string) []byte {
	b := append([]byte("v1|"), orderNo...)
	b = append(b, '|')
	b = strconv.AppendInt(b, int64(amount), 10)
	b = append(b, '|')
	return append(b, ref...)
}

// Confirm pays an order on the provider's signed word: the signature is
// checked (constant time) before anything is read, then the store records
// the reference and marks the order PAID in one transaction — the same
// conditional update as ever decides the race with the closer. The same
// callback again is an idempotent no-op (nil error, the order as it
// stands). Errors: ErrSignature (no key configured, malformed or forged),
// ErrNotFound, ErrAmount (not the order's amount, or a replay with another),
// ErrRefReused (the reference paid another order), ErrAlreadyPaid (paid
// under another reference), ErrClosed, ErrExpired, ErrBusy. Every callback
// is audit-logged: refused ones at warn with the reason.
func (s *Service) Confirm(ctx context.Context, cb Callback) (store.Order, error) {
	o, replay, err := s.confirm(ctx, cb)
	fields := []zap.Field{zap.String("orderNo", cb.OrderNo), zap.String("providerRef", cb.ProviderRef),
		zap.Int64("amountCents", int64(cb.Amount)), zap.String("remote", cb.Remote)}
	switch {
	case err != nil:
		s.log.Warn("payment callback refused", append(fields, zap.String("reason", reason(err)), zap.Error(err))...)
	case replay:
		s.log.Warn("payment callback replayed: already recorded, nothing changed", fields...)
	default:
		s.log.Info("payment confirmed: order paid", append(fields, zap.String("requestNo", o.RequestNo), zap.Int64("userId", o.UserID))...)
	}
	return o, err
}

func (s *Service) confirm(ctx context.Context, cb Callback) (store.Order, bool, error) {
	if s.key == nil {
		return store.Order{}, false, fmt.Errorf("%w: no payment.provider_key configured", ErrSignature)
	}
	if !validOrderNo(cb.OrderNo) || !validRef(cb.ProviderRef) || cb.Amount <= 0 {
		return store.Order{}, false, fmt.Errorf("%w: malformed callback", ErrSignature)
	}
	got, err := hex.DecodeString(cb.Signature)
	m := hmac.New(sha256.New, s.key)
	m.Write(signed(cb.OrderNo, cb.Amount, cb.ProviderRef))
	if err != nil || !hmac.Equal(got, m.Sum(nil)) {
		return store.Order{}, false, ErrSignature
	}
	o, res, err := s.st.ConfirmPayment(ctx, store.Payment{OrderNo: cb.OrderNo, ProviderRef: cb.ProviderRef, Amount: cb.Amount},
		s.now().Add(-s.timeout))
	switch {
	case errors.Is(err, store.ErrNotFound):
		return o, false, ErrNotFound
	case errors.Is(err, store.ErrPaymentAmount):
		return o, false, ErrAmount
	case errors.Is(err, store.ErrPaymentRefReused):
		return o, false, ErrRefReused
	case err != nil:
		return o, false, fmt.Errorf("%w: %v", ErrBusy, err)
	}
	switch {
	case res == store.PaymentApplied:
		return o, false, nil
	case res == store.PaymentReplayed:
		return o, true, nil
	case o.Status == store.OrderPaid:
		return o, false, ErrAlreadyPaid
	case o.Status == store.OrderClosed:
		return o, false, ErrClosed
	default:
		return o, false, ErrExpired
	}
}

// reason is the audit log's short name of a refusal.
func reason(err error) string {
	for _, r := range []struct {
		err  error
		name string
	}{{ErrSignature, "signature"}, {ErrNotFound, "not_found"}, {ErrAmount, "amount"}, {ErrRefReused, "reference_reused"},
		{ErrAlreadyPaid, "already_paid"}, {ErrClosed, "closed"}, {ErrExpired, "expired"}} {
		if errors.Is(err, r.err) {
			return r.name
		}
	}
	return "busy"
}

func validOrderNo(s string) bool { return s != "" && len(s) <= 80 && plain(s) }

// validRef: a provider reference of 1-64 characters of [A-Za-z0-9_.:-].
func validRef(s string) bool { return s != "" && len(s) <= 64 && plain(s) }

// plain: only [A-Za-z0-9_.:-], so "|" cannot shift the signed fields.
func plain(s string) bool {
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_' || c == '.' || c == ':' || c == '-') {
			return false
		}
	}
	return true
}
