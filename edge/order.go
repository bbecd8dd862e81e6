package edge

import (
	"context"
	"errors"
	"time"

	"github.com/valyala/fasthttp"

	"seckill/engine"
)

// order serves POST /api/v1/flash-sale/order and POST /api/seckill/submit
// (same body; seed-001 field names are the same names). It rejects,
// cheapest check first, everything that cannot succeed, and only then asks
// the engine (the address checks ran before routing, see admit.go).
// Nothing of ctx is kept after it returns: the token and requestId alias
// the request body and die with it.
func (s *Server) order(ctx *fasthttp.RequestCtx) {
	var o order
	user, ok := s.admitBody(ctx, &o)
	if !ok {
		return
	}
	// The trace id travels in the order message and the request log:
	// refused here, like a requestId, if it cannot be carried as it is.
	trace := ctx.Request.Header.Peek("X-Trace-Id")
	if !plainText(trace) {
		s.out.write(ctx, ansBadText)
		return
	}

	now := s.clock.at(ctx.Time())
	v, ok := s.views.resolve(o.ActivityID, o.SKUID, now)
	if ok {
		// Whatever the answer from here on, it is one of this SKU's
		// (skutally.go).
		defer v.tally.answered(ctx)
	}
	// now is an estimate of Redis time, good to ±slack; the occupy script
	// judges the window by Redis time itself. So the edge refuses only
	// what is outside the window by any time within the bound, and lets a
	// request within slack of the start or the end through for the script
	// to judge: the edge must never be stricter than the script. slack is
	// 0 when the edge's clock is server time (WithClock).
	slack := s.clock.slack()
	switch {
	case !ok:
		s.out.write(ctx, ansUnknownSKU)
		return
	case v.act.Paused:
		s.out.retry(ctx, ansPaused, s.cfg.Degrade.PausedRetryAfter)
		return
	case v.offline || now+slack < v.start && !s.prequeueOpen(&v, now+slack):
		s.out.write(ctx, ansNotOpen)
		v.tally.free(reasonNotOpen)
		return
	case now-slack >= v.end:
		s.out.write(ctx, ansEnded)
		v.tally.free(reasonEnded)
		return
	case s.flags.soldOutAt(o.SKUID, v.activity, ctx.Time()):
		s.out.write(ctx, ansSoldOut)
		v.tally.free(reasonSoldOut)
		return
	case v.act.ReservedOnly && !s.views.cat.Reserved(v.activity, user):
		s.out.write(ctx, ansReservedOnly)
		return
	}
	if !s.admit.userRate(ctx, user) {
		v.tally.free(reasonRateUser)
		return
	}
	if v.requireToken {
		if s.tokens.verifier == nil || len(o.Token) == 0 {
			s.out.write(ctx, ansTokenRequired)
			s.refused(ctx, &v, user, &o, ansTokenRequired, "")
			return
		}
		// A token that cannot be good costs no Redis call and no gate
		// capacity.
		if s.tokens.checker != nil && s.tokens.checker.Check(o.Token, user, v.act, o.SKUID, time.Unix(0, now)) != nil {
			s.out.write(ctx, ansTokenInvalid)
			s.refused(ctx, &v, user, &o, ansTokenInvalid, "the token's signature, buyer, activity or expiry is wrong")
			return
		}
	}
	// A buyer the engine just told holds a ticket passes the SKU's gate
	// without spending it (holders.go): their retries cannot starve the
	// fresh buyers the gate admits. The engine still answers them.
	_, holder := s.hold.held(v.activity, o.SKUID, user, now)
	if !s.admit.purchase(ctx, o.SKUID, holder) {
		// The backlog, the gate or its in-flight bound: all are counted
		// as the gate.
		v.tally.free(reasonGate)
		return
	}
	// The place purchase took is given back when the engine has answered
	// (or the token is refused): deferred, so a panic cannot leak it.
	defer s.admit.done(o.SKUID)
	// The risk check comes after the limits, so the service is asked at
	// the pace the gate lets through, and before the token is spent, so a
	// buyer refused (or answered 503) keeps a usable token.
	var (
		risked     time.Time
		riskRemark string
		riskWhy    = riskChecked
		riskQ      riskQuery
		ipBuf      [64]byte
		ip         []byte
	)
	if s.risk != nil {
		risked = time.Now()
		riskQ = riskQuery{user: user, activity: v.activity, sku: o.SKUID, quantity: o.Quantity, policy: v.act.RiskOnError}
		ip = s.admit.clientIP(ctx).AppendTo(ipBuf[:0])
		var ok bool
		if riskRemark, riskWhy, ok = s.risk.check(ctx, riskQ, ip); !ok {
			s.riskRefused(ctx, &v, user, &o)
			return
		}
	}
	// Spent only now, after the limits: a buyer sent away with 429 keeps
	// a usable token.
	var verified time.Time
	if v.requireToken {
		vctx, cancel := context.WithTimeout(s.bgCtx, s.cfg.TokenVerifyTimeout)
		err := s.tokens.verifier.Verify(vctx, o.Token, user, v.act, o.SKUID, time.Unix(0, now))
		cancel()
		if err != nil {
			if errors.Is(err, ErrTokenUnavailable) {
				s.out.write(ctx, ansCheckBusy)
				s.refused(ctx, &v, user, &o, ansCheckBusy, "the token store is unavailable")
			} else {
				s.out.write(ctx, ansTokenInvalid)
				s.refused(ctx, &v, user, &o, ansTokenInvalid, "the token was spent already or refused by the verifier")
			}
			return
		}
		verified = time.Now()
	}

	// The engine gets the resolution itself and does not look the SKU up
	// again.
	req := &engine.Request{Activity: v.act, SKU: v.sku, UserID: user, Quantity: o.Quantity}
	// engine.Request has no field for the client's idempotency key; it
	// travels as the trace id unless the gateway set one.
	if len(trace) > 0 && len(trace) <= maxRequestIDLen {
		req.TraceID = string(trace)
	} else if len(o.RequestID) > 0 {
		req.TraceID = string(o.RequestID)
	}
	var (
		t   engine.Ticket
		err error
	)
	queued := s.line != nil && v.sku.Queued()
	if queued {
		var w engine.Waiting
		w, err = s.enqueue(ctx, &v, req, now)
		if err == nil {
			t.RequestNo = w.RequestNo
		}
	} else {
		t, err = s.eng.Occupy(s.bgCtx, req)
	}
	if err == nil && riskRemark != "" && s.riskLog != nil && t.RequestNo != "" {
		// Only now is there a ticket whose story the check belongs to.
		s.riskLog.RiskPassed(t.RequestNo, risked, riskRemark)
	}
	if err == nil && riskWhy != riskChecked && t.RequestNo != "" {
		s.risk.fb.record(s.bgCtx, s.cfg.RedisTimeout, t.RequestNo, riskQ, ip, ctx.Request.Header.PeekBytes(headerDeviceID), riskWhy)
	}
	if err == nil && !verified.IsZero() && s.decisions != nil && t.RequestNo != "" {
		s.decisions.TokenVerified(t.RequestNo, verified)
	}
	if !queued {
		s.engineRefused(req, t, err)
	}
	if v.requireToken && s.tokens.refunder != nil && errors.Is(err, engine.ErrBusy) {
		// The token paid for nothing: give it back for the retry.
		rctx, cancel := context.WithTimeout(s.bgCtx, s.cfg.TokenRefundTimeout)
		s.tokens.refunder.Refund(rctx, o.Token)
		cancel()
	}
	if queued {
		// Answered by enqueue; the line decides the rest.
		return
	}
	if oc, _ := engineOutcome(err); oc == outcomeQueued || oc == outcomeDuplicate {
		s.hold.hold(v.activity, o.SKUID, user, t.RequestNo, now)
	}
	s.answer(ctx, o.SKUID, v.activity, t, err, now < v.start || now >= v.end)
}

// answer tells the buyer the engine's outcome and learns from it.
// borderline says the edge let the request through only by its clock's
// slack: the engine's "not open" or "ended" is then expected, not a sign
// of a stale catalog.
func (s *Server) answer(ctx *fasthttp.RequestCtx, sku, activity int64, t engine.Ticket, err error, borderline bool) {
	outcome, a := engineOutcome(err)
	s.m.engineCalls[outcome].Inc()
	if t.Remaining >= 0 {
		// The admission gate follows the stock the engine saw.
		s.admit.observe(sku, t.Remaining)
	}
	switch outcome {
	case outcomeQueued:
		if t.Remaining == 0 {
			s.flags.raise(sku, activity)
		}
		s.out.queuing(ctx, t.RequestNo, s.pollAfter(activity))
		return
	case outcomeDuplicate:
		s.out.ticket(ctx, fasthttp.StatusConflict, "DUPLICATE", t.RequestNo, msgDuplicate)
		return
	case outcomeRateLimited:
		// Retry-After from the window's own expiry, as the script saw it.
		s.out.retry(ctx, a, t.RetryAfter)
		return
	case outcomeSoldOut:
		// Remaining > 0 means only that this quantity did not fit: others
		// can still buy.
		if t.Remaining <= 0 {
			s.flags.raise(sku, activity)
		}
	case outcomeNotOpen, outcomeEnded, outcomeUnknownSKU:
		// The engine judged by Redis: our catalog is probably stale
		// (unless the edge's own clock left it to the engine).
		if !borderline || outcome == outcomeUnknownSKU {
			s.views.reloadSoon()
		}
	case outcomeBusy:
		if !errors.Is(err, engine.ErrBusy) {
			s.warn.warn("edge maps an unknown engine error to busy", err)
		}
	}
	s.out.write(ctx, a)
}

// admitBody runs the checks every body-carrying buyer route starts with: the
// body size, the user (header, blocklist), and the body's parse into o. On
// false the answer is written. The per-user limit comes later
// (admission.userRate), after the checks that need no state of the user's.
func (s *Server) admitBody(ctx *fasthttp.RequestCtx, o *order) (int64, bool) {
	// fasthttp refuses a body over MaxRequestBodySize before reading it;
	// this covers handlers run under another server.
	if ctx.Request.Header.ContentLength() > s.cfg.MaxBodyBytes || len(ctx.Request.Body()) > s.cfg.MaxBodyBytes {
		s.out.write(ctx, ansTooLarge)
		return 0, false
	}
	user, ok := s.admit.user(ctx)
	if !ok {
		return 0, false
	}
	// Only JSON: a cross-site HTML form (text/plain,
	// application/x-www-form-urlencoded, multipart) must not be read as an
	// order.
	if !jsonContentType(ctx.Request.Header.ContentType()) {
		s.out.write(ctx, ansMediaType)
		return 0, false
	}
	if err := parseOrder(ctx.Request.Body(), o); err != nil {
		s.out.write(ctx, parseAnswer(err))
		return 0, false
	}
	return user, true
}

// jsonContentType reports a Content-Type of application/json (any case),
// with or without parameters ("application/json; charset=utf-8"). It does
// not allocate.
func jsonContentType(ct []byte) bool {
	const want = "application/json"
	if len(ct) < len(want) {
		return false
	}
	for i := 0; i < len(want); i++ {
		c := ct[i]
		if 'A' <= c && c <= 'Z' {
			c += 'a' - 'A'
		}
		if c != want[i] {
			return false
		}
	}
	rest := ct[len(want):]
	for len(rest) > 0 && (rest[0] == ' ' || rest[0] == '\t') {
		rest = rest[1:]
	}
	return len(rest) == 0 || rest[0] == ';'
}
