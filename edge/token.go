package edge

import (
	"context"
	"time"

	"github.com/valyala/fasthttp"

	"seckill/sale"
)

// TokenVerifier checks a qualification token for activities that require
// one (DESIGN §4: the token's user must match the buyer) and spends it.
// token aliases the request body and must not be kept after Verify
// returns; ctx ends after edge.token_verify_timeout. An error wraps
// ErrTokenRefused (403 TOKEN_INVALID) or ErrTokenUnavailable (503 BUSY: a
// dependency failed, fail closed); any other error is a refusal too.
// Implementations must be safe for concurrent use and should not allocate
// on success.
type TokenVerifier interface {
	Verify(ctx context.Context, token []byte, user int64, a *sale.Activity, sku int64, now time.Time) error
}

// TokenRefunder may also be implemented by a TokenVerifier: Refund gives
// back a token Verify spent, for a purchase the engine then answered
// "busy" (503), so the buyer retries with the token they hold. ctx ends
// after edge.token_refund_timeout. Called on that error path only;
// failures are the refunder's to log.
type TokenRefunder interface {
	Refund(ctx context.Context, token []byte)
}

// TokenChecker may also be implemented by a TokenVerifier: Check judges a
// token without spending it and without I/O (signature, expiry, user,
// activity, SKU). The edge runs it before the rate limits, so that a forged
// token costs no Redis call and no admission-gate capacity, and it calls
// Verify — which spends the token — only for a request the limits let
// through: a buyer turned away with 429 keeps a usable token.
type TokenChecker interface {
	Check(token []byte, user int64, a *sale.Activity, sku int64, now time.Time) error
}

// TokenIssuer signs qualification tokens (POST /api/v1/flash-sale/token).
// Safe for concurrent use.
type TokenIssuer interface {
	Issue(activity, sku, user int64, now time.Time) (token string, expireAt time.Time, err error)
}

// tokens are the qualification-token hooks the process gave the edge
// (WithTokenVerifier, WithTokenIssuer); each may be nil.
type tokens struct {
	verifier TokenVerifier
	checker  TokenChecker  // verifier's, if it has one
	refunder TokenRefunder // verifier's, if it has one
	issuer   TokenIssuer
}

// WithTokenVerifier checks qualification tokens for activities that
// require one. Without it such activities answer 403 TOKEN_REQUIRED.
func WithTokenVerifier(v TokenVerifier) Option {
	return func(s *Server) {
		s.tokens.verifier = v
		s.tokens.checker, _ = v.(TokenChecker)
		s.tokens.refunder, _ = v.(TokenRefunder)
	}
}

// WithTokenIssuer serves POST /api/v1/flash-sale/token. Without it the
// route answers 503 for activities that require a token.
func WithTokenIssuer(i TokenIssuer) Option {
	return func(s *Server) { s.tokens.issuer = i }
}

// issueToken serves POST /api/v1/flash-sale/token, body
// {"activityId":7,"skuId":7001}: a qualification token for the buyer, only
// for an activity that requires one, only to a user on its reserved list,
// and only inside its window by server time. The answer is
// {"token":"…","expireAt":"RFC3339"}.
func (s *Server) issueToken(ctx *fasthttp.RequestCtx) {
	ctx.Response.Header.Set("Cache-Control", "no-store")
	var o order
	user, ok := s.admitBody(ctx, &o)
	if !ok {
		return
	}
	now := s.clock.at(ctx.Time())
	v, found := s.views.resolve(o.ActivityID, o.SKUID, now)
	switch {
	case !found:
		s.out.write(ctx, ansUnknownSKU)
		return
	case !v.requireToken:
		s.out.write(ctx, ansTokenNotOffered)
		return
	case v.act.Paused:
		s.out.retry(ctx, ansPaused, s.cfg.Degrade.PausedRetryAfter)
		return
	case v.offline || now < v.start:
		s.out.write(ctx, ansNotOpen)
		return
	case now >= v.end:
		s.out.write(ctx, ansEnded)
		return
	case !s.views.cat.Reserved(v.activity, user):
		s.out.write(ctx, ansNotReserved)
		return
	case s.flags.soldOutAt(o.SKUID, v.activity, ctx.Time()):
		s.out.write(ctx, ansSoldOut)
		return
	}
	if !s.admit.userRate(ctx, user) {
		return
	}
	if s.tokens.issuer == nil {
		s.warn.warn("edge cannot issue tokens: no issuer (token.keys)", errNoIssuer)
		s.out.write(ctx, ansTokenUnavailable)
		return
	}
	tok, exp, err := s.tokens.issuer.Issue(v.activity, o.SKUID, user, time.Unix(0, now))
	if err != nil {
		s.warn.warn("edge token issue failed", err)
		s.out.write(ctx, ansTokenUnavailable)
		return
	}
	var buf [512]byte
	b := append(buf[:0], `{"token":`...)
	b = appendJSONString(b, tok)
	b = append(b, `,"expireAt":`...)
	b = appendJSONString(b, exp.UTC().Format(time.RFC3339))
	b = append(b, '}')
	ctx.SetStatusCode(fasthttp.StatusOK)
	ctx.SetContentTypeBytes(contentTypeJSON)
	ctx.SetBody(b)
}
