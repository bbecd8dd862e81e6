package edge

import (
	"context"
	"errors"
	"time"

	"github.com/valyala/fasthttp"

	"seckill/internal/identity"
	"seckill/sale"
	"seckill/stock/results"
)

// Messages of result answers.
const (
	msgResultQueuing = "still queuing; poll again shortly"
	msgResultSuccess = "order created"
	msgResultFail    = "no order was made"
)

// result serves GET /api/v1/flash-sale/result/{requestNo} (and the seed's
// alias): the ticket's state. Only its owner may read it; anyone else gets
// the same 404 as for an unknown requestNo, so ticket numbers cannot be
// probed.
func (s *Server) result(ctx *fasthttp.RequestCtx) {
	// Per buyer and changing: never stored by a shared cache.
	ctx.Response.Header.Set("Cache-Control", "no-store")
	user, r := s.admit.ident.User(ctx)
	if r != identity.OK {
		s.out.write(ctx, identityAnswers[r])
		return
	}
	rn, _ := ctx.UserValue("requestNo").(string)
	if !validRequestNo(rn) {
		s.out.write(ctx, ansNotFound)
		return
	}
	rctx, cancel := context.WithTimeout(s.bgCtx, s.cfg.RedisTimeout)
	e, err := s.res.Read(rctx, user, rn)
	cancel()
	if errors.Is(err, results.ErrNotFound) && s.resultFallback != nil {
		// Redis lost the result (a restart without persistence) or it
		// expired: the database still knows how the ticket ended.
		rctx, cancel := context.WithTimeout(s.bgCtx, s.cfg.RedisTimeout)
		e, err = s.dbBound.Fallback(s.resultFallback)(rctx, user, rn)
		cancel()
	} else if err == nil && e.Claimed && s.resultFallback != nil {
		// QUEUING, claimed: the consumer is writing its order, or wrote
		// it and Redis lost the final result. Only an order answers it
		// (Entry.Ordered); anything else leaves it QUEUING.
		rctx, cancel := context.WithTimeout(s.bgCtx, s.cfg.RedisTimeout)
		if f, ferr := s.dbBound.FallbackInFlight(s.resultFallback)(rctx, user, rn); ferr == nil && f.Owner == user && f.Ordered() {
			e = f
		}
		cancel()
	}
	if err == nil && e.State == sale.ResultQueuing && e.Owner == user && s.resultSettle != nil {
		// A QUEUING that may have gone stale (settle decides, cheaply
		// for a young ticket); on error it stays QUEUING and the buyer
		// polls again.
		sctx, cancel := context.WithTimeout(s.bgCtx, 4*s.cfg.RedisTimeout)
		if settled, serr := s.resultSettle(sctx, e); serr == nil {
			e = settled
		}
		cancel()
	}
	switch {
	case errors.Is(err, results.ErrNotFound):
		s.out.write(ctx, ansNotFound)
		return
	case errors.Is(err, ErrDBReadsLimited):
		s.out.retry(ctx, ansRateUser, time.Second)
		return
	case err != nil:
		s.out.write(ctx, ansBusy)
		return
	case e.Owner != user:
		s.out.write(ctx, ansNotFound)
		return
	}
	var buf [256]byte
	b := append(buf[:0], `{"code":`...)
	switch e.State {
	case sale.ResultSuccess:
		b = appendJSONString(b, e.State)
		b = append(b, `,"requestNo":`...)
		b = appendJSONString(b, e.RequestNo)
		b = append(b, `,"orderNo":`...)
		b = appendJSONString(b, e.OrderNo)
		b = append(b, `,"message":`...)
		b = appendJSONString(b, msgResultSuccess)
	case sale.ResultFail:
		b = appendJSONString(b, e.State)
		b = append(b, `,"requestNo":`...)
		b = appendJSONString(b, e.RequestNo)
		b = append(b, `,"reason":`...)
		b = appendJSONString(b, e.Code)
		b = append(b, `,"message":`...)
		b = appendJSONString(b, msgResultFail)
	case sale.ResultWaiting:
		var poll time.Duration
		b, poll = s.appendWaitingResult(b, &e)
		setRetryAfter(ctx, poll)
	default:
		b = appendJSONString(b, sale.ResultQueuing)
		b = append(b, `,"requestNo":`...)
		b = appendJSONString(b, e.RequestNo)
		b = append(b, `,"message":`...)
		b = appendJSONString(b, msgResultQueuing)
		poll := s.pollAfter(e.Activity)
		b = appendPollField(b, poll)
		setRetryAfter(ctx, poll)
	}
	b = append(b, '}')
	ctx.SetStatusCode(fasthttp.StatusOK)
	ctx.SetContentTypeBytes(contentTypeJSON)
	ctx.SetBody(b)
}

// validRequestNo admits 1 to 64 characters of [0-9A-Za-z_.-] (a bucket's
// ticket is <activity>-<sku>.<bucket>-<id>): anything else cannot be a
// ticket and is answered without a Redis call.
func validRequestNo(s string) bool {
	if len(s) == 0 || len(s) > 64 {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !(c >= '0' && c <= '9' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c == '_' || c == '-' || c == '.') {
			return false
		}
	}
	return true
}

// ResultFallback finds a ticket's final result where Redis has none (the
// orders database): results.ErrNotFound when it knows nothing either.
type ResultFallback func(ctx context.Context, requestNo string) (results.Entry, error)

// WithResultFallback makes the result route ask fallback when Redis has no
// result for a ticket, so a buyer whose result Redis lost (a restart without
// persistence) still reads how the ticket ended. Only well-formed ticket
// numbers reach it.
func WithResultFallback(fallback ResultFallback) Option {
	return func(s *Server) { s.resultFallback = fallback }
}

// WithDBBound bounds the fallback's reads per user and remembers its
// misses (DBBound); the caller closes b.
func WithDBBound(b *DBBound) Option {
	return func(s *Server) { s.dbBound = b }
}

// ResultSettle ends a QUEUING result that went stale (reconcile.Settle):
// it returns the entry as it is when the ticket is young or its end cannot
// be told yet.
type ResultSettle func(ctx context.Context, e results.Entry) (results.Entry, error)

// WithResultSettle makes the result route hand every QUEUING answer of
// its owner to settle before it answers.
func WithResultSettle(settle ResultSettle) Option {
	return func(s *Server) { s.resultSettle = settle }
}
