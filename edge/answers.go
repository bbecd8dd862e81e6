package edge

import (
	"errors"
	"net"
	"strconv"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/valyala/fasthttp"

	"seckill/engine"
	"seckill/internal/identity"
)

// This file is the one place that decides what a buyer is told: every fixed
// answer (status, code, message, pre-built body), the mapping of engine
// errors (by the outcome table of package stock) and of unreadable requests
// to them, and answers, which sends them. Fixed bodies are built once so the
// reject path allocates nothing.

// answer is one fixed response.
type answer struct {
	status int
	code   string
	reason int // index into reasons, for seckill_edge_rejections_total; -1: not a rejection
	body   []byte
}

func newAnswer(status int, code string, reason int, message string) *answer {
	return &answer{status: status, code: code, reason: reason, body: appendBody(nil, code, "", message)}
}

// Rejection reasons, the label values of seckill_edge_rejections_total. All
// are created at 0 when the server starts.
const (
	reasonRoute           = iota // no such route or method
	reasonTooLarge               // body over edge.max_body_bytes
	reasonBadHTTP                // request line or headers unreadable, too large or too slow
	reasonNoUser                 // X-User-Id missing
	reasonBadUser                // X-User-Id not a positive integer
	reasonBadRequest             // body not a valid order
	reasonUnknownSKU             // no activity sells the SKU (or not the one named)
	reasonNotOpen                // activity offline or not started
	reasonEnded                  // activity window closed
	reasonSoldOut                // local sold-out flag
	reasonTokenRequired          // activity requires a token, none given or none verifiable
	reasonTokenInvalid           // token verifier refused
	reasonBusy                   // a check before the engine could not be made (fail closed)
	reasonBlockedIP              // client address on the IP blocklist
	reasonBlockedUser            // X-User-Id on the user blocklist
	reasonRateIP                 // per-IP limit (edge.rate.ip_*)
	reasonRateUser               // per-user limit (edge.rate.user_*)
	reasonRateUserSKU            // per user × SKU window (edge.rate.user_sku_*), counted by the engine's occupy script
	reasonGate                   // per-SKU admission gate (edge.rate.gate_*)
	reasonInflight               // per-SKU bound on attempts in flight (edge.rate.sku_inflight)
	reasonNotReserved            // token asked for by a user not on the reserved list
	reasonTokenNotOffered        // token asked for an activity that requires none
	reasonRisk                   // the risk service (or its cached verdict) said deny
	reasonDoubledUser            // more than one X-User-Id header
	reasonUntrustedUser          // X-User-Id from a peer that is not a trusted proxy (edge.identity trusted_proxies)
	reasonBadUserSig             // X-User-Id signature missing, stale or wrong (edge.identity signed)
	reasonMediaType              // order or token body not application/json
	reasonBacklog                // the consumers' backlog shrank admission (backlog.go)
	reasonReservedOnly           // the activity serves its reserved users only (degrade), and this buyer is not one
	reasonPaused                 // the activity's intake is paused (degrade)
	reasonRouteClosed            // a non-core route on-call closed (orders, pay, events)
	reasonRiskLocal              // no risk verdict, and the local velocity rules refused (riskfallback.go)
	nReasons
)

var reasons = [nReasons]string{
	reasonRoute:           "route",
	reasonTooLarge:        "too_large",
	reasonBadHTTP:         "bad_http",
	reasonNoUser:          "no_user",
	reasonBadUser:         "bad_user",
	reasonBadRequest:      "bad_request",
	reasonUnknownSKU:      "unknown_sku",
	reasonNotOpen:         "not_open",
	reasonEnded:           "ended",
	reasonSoldOut:         "sold_out",
	reasonTokenRequired:   "token_required",
	reasonTokenInvalid:    "token_invalid",
	reasonBusy:            "busy",
	reasonBlockedIP:       "blocked_ip",
	reasonBlockedUser:     "blocked_user",
	reasonRateIP:          "rate_ip",
	reasonRateUser:        "rate_user",
	reasonRateUserSKU:     "rate_user_sku",
	reasonGate:            "gate",
	reasonInflight:        "inflight",
	reasonNotReserved:     "not_reserved",
	reasonTokenNotOffered: "token_not_offered",
	reasonRisk:            "risk",
	reasonDoubledUser:     "doubled_user",
	reasonUntrustedUser:   "untrusted_user",
	reasonBadUserSig:      "bad_user_sig",
	reasonMediaType:       "media_type",
	reasonBacklog:         "backlog",
	reasonReservedOnly:    "reserved_only",
	reasonPaused:          "paused",
	reasonRouteClosed:     "route_closed",
	reasonRiskLocal:       "risk_local",
}

// identityAnswers are the refusals of the identity check, by result.
var identityAnswers = [...]*answer{
	identity.Missing:   ansNoUser,
	identity.Malformed: ansBadUser,
	identity.Doubled:   ansDoubledUser,
	identity.Untrusted: ansUntrusted,
	identity.BadSig:    ansBadUserSig,
}

// Fixed answers.
var (
	ansNotFoundRoute = newAnswer(fasthttp.StatusNotFound, "NOT_FOUND", reasonRoute, "no such route")
	ansMethod        = newAnswer(fasthttp.StatusMethodNotAllowed, "METHOD_NOT_ALLOWED", reasonRoute, "method not allowed")
	ansTooLarge      = newAnswer(fasthttp.StatusRequestEntityTooLarge, "TOO_LARGE", reasonTooLarge, "request body too large")
	ansHeaderTooBig  = newAnswer(fasthttp.StatusRequestHeaderFieldsTooLarge, "BAD_REQUEST", reasonBadHTTP, "request headers too large")
	ansTimeout       = newAnswer(fasthttp.StatusRequestTimeout, "BAD_REQUEST", reasonBadHTTP, "request timeout")
	ansBadHTTP       = newAnswer(fasthttp.StatusBadRequest, "BAD_REQUEST", reasonBadHTTP, "malformed HTTP request")
	ansNoUser        = newAnswer(fasthttp.StatusUnauthorized, "UNAUTHORIZED", reasonNoUser, "X-User-Id header required")
	ansBadUser       = newAnswer(fasthttp.StatusBadRequest, "BAD_REQUEST", reasonBadUser, "X-User-Id must be a positive integer")
	ansDoubledUser   = newAnswer(identity.Doubled.Status(), identity.Doubled.Code(), reasonDoubledUser, identity.Doubled.Message())
	ansUntrusted     = newAnswer(identity.Untrusted.Status(), identity.Untrusted.Code(), reasonUntrustedUser, identity.Untrusted.Message())
	ansBadUserSig    = newAnswer(identity.BadSig.Status(), identity.BadSig.Code(), reasonBadUserSig, identity.BadSig.Message())
	ansUnknownSKU    = newAnswer(fasthttp.StatusNotFound, "UNKNOWN_SKU", reasonUnknownSKU, "no activity sells this sku")
	ansNotOpen       = newAnswer(statusTooEarly, "NOT_OPEN", reasonNotOpen, "the sale has not started")
	ansEnded         = newAnswer(fasthttp.StatusGone, "ENDED", reasonEnded, "the sale has ended")
	ansSoldOut       = newAnswer(fasthttp.StatusGone, "SOLD_OUT", reasonSoldOut, "sold out")
	ansTokenRequired = newAnswer(fasthttp.StatusForbidden, "TOKEN_REQUIRED", reasonTokenRequired, "this sale requires a qualification token")
	ansTokenInvalid  = newAnswer(fasthttp.StatusForbidden, "TOKEN_INVALID", reasonTokenInvalid, "qualification token refused")
	ansCheckBusy     = newAnswer(fasthttp.StatusServiceUnavailable, "BUSY", reasonBusy, "system busy, try again")
	// The risk check's deny; its reason stays with the risk service (a
	// buyer told why would learn how to get past it).
	ansRiskRejected = newAnswer(fasthttp.StatusForbidden, "RISK_REJECTED", reasonRisk, "this purchase was refused by the risk check")
	ansRiskLocal    = newAnswer(fasthttp.StatusForbidden, "RISK_REJECTED", reasonRiskLocal, "this purchase was refused by the risk check")

	// Who may come in, and how often. Every 429 also carries Retry-After.
	ansBlockedIP   = newAnswer(fasthttp.StatusForbidden, "BLOCKED", reasonBlockedIP, "requests from your network are refused")
	ansBlockedUser = newAnswer(fasthttp.StatusForbidden, "BLOCKED", reasonBlockedUser, "this account may not take part in flash sales")
	ansRateIP      = newAnswer(fasthttp.StatusTooManyRequests, "RATE_LIMITED", reasonRateIP, "too many requests from your network; retry after the number of seconds in Retry-After")
	ansRateUser    = newAnswer(fasthttp.StatusTooManyRequests, "RATE_LIMITED", reasonRateUser, msgRateUser)
	ansRateUserSKU = newAnswer(fasthttp.StatusTooManyRequests, "RATE_LIMITED", reasonRateUserSKU, "too many attempts on this item; retry after the number of seconds in Retry-After")
	ansGate        = newAnswer(fasthttp.StatusTooManyRequests, "RATE_LIMITED", reasonGate, "very high demand for this item; retry after the number of seconds in Retry-After")
	ansBacklog     = newAnswer(fasthttp.StatusTooManyRequests, "BACKLOG", reasonBacklog, "orders are being processed behind a backlog; retry after the number of seconds in Retry-After")
	ansInflight    = newAnswer(fasthttp.StatusTooManyRequests, "RATE_LIMITED", reasonInflight, "too many purchases of this item are being processed right now; retry after the number of seconds in Retry-After")

	// On-call's degrade switches (degrade.go). Each 503 carries Retry-After.
	ansReservedOnly = newAnswer(fasthttp.StatusForbidden, "RESERVED_ONLY", reasonReservedOnly, "this sale is open to its reserved users only right now")
	ansPaused       = newAnswer(fasthttp.StatusServiceUnavailable, "PAUSED", reasonPaused, "this sale is paused; retry after the number of seconds in Retry-After")
	ansRouteClosed  = newAnswer(fasthttp.StatusServiceUnavailable, "ROUTE_CLOSED", reasonRouteClosed, "this service is switched off for now; retry after the number of seconds in Retry-After")

	// Token issuing.
	ansTokenNotOffered  = newAnswer(fasthttp.StatusForbidden, "TOKEN_NOT_REQUIRED", reasonTokenNotOffered, "this sale needs no qualification token")
	ansNotReserved      = newAnswer(fasthttp.StatusForbidden, "NOT_RESERVED", reasonNotReserved, "you are not on the reserved list of this sale")
	ansTokenUnavailable = newAnswer(fasthttp.StatusServiceUnavailable, "BUSY", reasonBusy, "qualification tokens cannot be issued now, try again")

	// Parse failures, one body per message.
	ansMalformed   = newAnswer(fasthttp.StatusBadRequest, "BAD_REQUEST", reasonBadRequest, errMalformed.Error())
	ansDuplicate   = newAnswer(fasthttp.StatusBadRequest, "BAD_REQUEST", reasonBadRequest, errDuplicate.Error())
	ansMediaType   = newAnswer(fasthttp.StatusUnsupportedMediaType, "UNSUPPORTED_MEDIA_TYPE", reasonMediaType, "the body must be application/json")
	ansBadActivity = newAnswer(fasthttp.StatusBadRequest, "BAD_REQUEST", reasonBadRequest, errBadActivityID.Error())
	ansBadSKU      = newAnswer(fasthttp.StatusBadRequest, "BAD_REQUEST", reasonBadRequest, errBadSKUID.Error())
	ansBadQuantity = newAnswer(fasthttp.StatusBadRequest, "BAD_REQUEST", reasonBadRequest, errBadQuantity.Error())
	ansBadString   = newAnswer(fasthttp.StatusBadRequest, "BAD_REQUEST", reasonBadRequest, errBadString.Error())
	ansTooLong     = newAnswer(fasthttp.StatusBadRequest, "BAD_REQUEST", reasonBadRequest, errTooLong.Error())
	ansBadText     = newAnswer(fasthttp.StatusBadRequest, "BAD_REQUEST", reasonBadRequest, errBadText.Error())

	// Engine answers: not early rejections (reason -1); counted in
	// seckill_edge_engine_calls_total instead.
	ansEngNotOpen    = newAnswer(statusTooEarly, "NOT_OPEN", -1, "the sale has not started")
	ansEngEnded      = newAnswer(fasthttp.StatusGone, "ENDED", -1, "the sale has ended")
	ansRebalancing   = newAnswer(fasthttp.StatusTooManyRequests, "REBALANCING", -1, "this item's stock is being moved to serve you; retry after the number of seconds in Retry-After")
	ansEngSoldOut    = newAnswer(fasthttp.StatusGone, "SOLD_OUT", -1, "sold out")
	ansEngOverLimit  = newAnswer(fasthttp.StatusBadRequest, "OVER_LIMIT", -1, "quantity over the per-user limit")
	ansEngUnknownSKU = newAnswer(fasthttp.StatusNotFound, "UNKNOWN_SKU", -1, "no activity sells this sku")
	ansEngBusy       = newAnswer(fasthttp.StatusServiceUnavailable, "BUSY", -1, "system busy, try again")

	// Other routes.
	ansNotFound = newAnswer(fasthttp.StatusNotFound, "NOT_FOUND", -1, "not found")
	ansBusy     = newAnswer(fasthttp.StatusServiceUnavailable, "BUSY", -1, "system busy, try again")
	ansInternal = newAnswer(fasthttp.StatusInternalServerError, "INTERNAL", -1, "internal error")
	ansOK       = newAnswer(fasthttp.StatusOK, "OK", -1, "alive")
	ansReady    = newAnswer(fasthttp.StatusOK, "OK", -1, "ready")
	ansNotReady = newAnswer(fasthttp.StatusServiceUnavailable, "NOT_READY", -1, "not ready")
)

// Answers of the buyer routes package web serves (the result stream, "my
// orders"), sent through the exported Answer (buyerapi.go). Not early
// rejections of a purchase (reason -1).
var (
	ansTooManyStreams = newAnswer(fasthttp.StatusTooManyRequests, "TOO_MANY_STREAMS", -1, "too many result streams open for this user; retry after the number of seconds in Retry-After")
	ansReadsLimited   = newAnswer(fasthttp.StatusTooManyRequests, "RATE_LIMITED", -1, msgRateUser)
	ansBadLimit       = newAnswer(fasthttp.StatusBadRequest, "BAD_REQUEST", -1, "limit must be a positive integer")
	ansBadCursor      = newAnswer(fasthttp.StatusBadRequest, "BAD_REQUEST", -1, "cursor is not one this server gave")
)

// Messages of answers built per request.
const (
	msgQueuing   = "queued; poll the result with the requestNo"
	msgDuplicate = "you already hold a ticket for this sku"
	msgRateUser  = "too many requests from your account; retry after the number of seconds in Retry-After"
)

// parseAnswer maps a parseOrder error to its 400.
func parseAnswer(err error) *answer {
	switch err {
	case errDuplicate:
		return ansDuplicate
	case errBadActivityID:
		return ansBadActivity
	case errBadSKUID:
		return ansBadSKU
	case errBadQuantity:
		return ansBadQuantity
	case errBadString:
		return ansBadString
	case errTooLong:
		return ansTooLong
	case errBadText:
		return ansBadText
	}
	return ansMalformed
}

// Outcomes of engine calls, the label values of
// seckill_edge_engine_calls_total. All are created at 0.
const (
	outcomeQueued = iota
	outcomeNotOpen
	outcomeEnded
	outcomeSoldOut
	outcomeDuplicate
	outcomeOverLimit
	outcomeRateLimited
	outcomeUnknownSKU
	outcomeBusy
	nOutcomes
)

var outcomes = [nOutcomes]string{
	outcomeQueued:      "queued",
	outcomeNotOpen:     "not_open",
	outcomeEnded:       "ended",
	outcomeSoldOut:     "sold_out",
	outcomeDuplicate:   "duplicate",
	outcomeOverLimit:   "over_limit",
	outcomeRateLimited: "rate_limited",
	outcomeUnknownSKU:  "unknown_sku",
	outcomeBusy:        "busy",
}

// engineOutcome maps an Occupy error (wrapped sentinels, classified by the
// ledger's outcome table) to its outcome and fixed answer. Duplicate has no
// fixed answer: its body names the held ticket. Anything else (busy, Redis
// lost the SKU, an error no sentinel matches) is busy: fail closed, never a
// guess of success.
func engineOutcome(err error) (int, *answer) {
	switch engine.OutcomeOf(err) {
	case engine.OK:
		return outcomeQueued, nil
	case engine.SoldOut:
		return outcomeSoldOut, ansEngSoldOut
	case engine.Duplicate:
		return outcomeDuplicate, nil
	case engine.NotOpen:
		return outcomeNotOpen, ansEngNotOpen
	case engine.Ended:
		return outcomeEnded, ansEngEnded
	case engine.OverLimit:
		return outcomeOverLimit, ansEngOverLimit
	case engine.Rebalancing:
		// The buyer's bucket is empty while others hold stock: a 429 with
		// the engine's short Retry-After, never a sold-out.
		return outcomeRateLimited, ansRebalancing
	case engine.RateLimited:
		// Also an early rejection (rate_user_sku), as when the edge
		// counted the window itself: it sends a 429 with Retry-After.
		return outcomeRateLimited, ansRateUserSKU
	case engine.UnknownSKU:
		return outcomeUnknownSKU, ansEngUnknownSKU
	}
	return outcomeBusy, ansEngBusy
}

// appendBody appends {"code":…,"requestNo":…,"message":…}; an empty
// requestNo is left out.
func appendBody(dst []byte, code, requestNo, message string) []byte {
	dst = append(dst, `{"code":`...)
	dst = appendJSONString(dst, code)
	if requestNo != "" {
		dst = append(dst, `,"requestNo":`...)
		dst = appendJSONString(dst, requestNo)
	}
	dst = append(dst, `,"message":`...)
	dst = appendJSONString(dst, message)
	return append(dst, '}')
}

// appendJSONString appends s quoted, escaping what JSON requires (and <, >,
// & so a body is inert if a browser ever sniffs it).
func appendJSONString(dst []byte, s string) []byte {
	const hex = "0123456789abcdef"
	dst = append(dst, '"')
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case c == '"' || c == '\\':
			dst = append(dst, '\\', c)
		case c < 0x20 || c == '<' || c == '>' || c == '&':
			dst = append(dst, '\\', 'u', '0', '0', hex[c>>4], hex[c&0xf])
		default:
			dst = append(dst, c)
		}
	}
	return append(dst, '"')
}

// statusLabel is the status label of seckill_edge_requests_total.
func statusLabel(code int) string { return strconv.Itoa(code) }

// statusTooEarly is 425 (RFC 8470), which DESIGN §4 uses for "not started";
// fasthttp has no constant for it.
const statusTooEarly = 425

var (
	contentTypeJSON  = []byte("application/json")
	tooEarlyText     = []byte("Too Early")
	headerRetryAfter = []byte("Retry-After")
)

// answers sends answers and counts the early rejections among them
// (seckill_edge_rejections_total). Nothing it sends allocates but a
// ticket's body. A value; copies count on the same counters.
type answers struct{ rejections *[nReasons]prometheus.Counter }

// write sends a fixed answer without copying its body, and counts it when
// it is an early rejection. No allocation.
func (w answers) write(ctx *fasthttp.RequestCtx, a *answer) {
	send(ctx, a)
	if a.reason >= 0 {
		w.rejections[a.reason].Inc()
	}
}

// send sends a fixed answer without copying its body. No allocation.
func send(ctx *fasthttp.RequestCtx, a *answer) {
	ctx.SetStatusCode(a.status)
	if a.status == statusTooEarly {
		// fasthttp knows no reason phrase for 425.
		ctx.Response.Header.SetStatusMessage(tooEarlyText)
	}
	ctx.SetContentTypeBytes(contentTypeJSON)
	ctx.Response.SetBodyRaw(a.body)
}

// retry sends a (429 or 503) answer with Retry-After: wait rounded up to whole seconds, at
// least 1 (RFC 9110 has no smaller unit, and "0" invites an immediate retry
// storm). No allocation.
func (w answers) retry(ctx *fasthttp.RequestCtx, a *answer, wait time.Duration) {
	w.write(ctx, a)
	setRetryAfter(ctx, wait)
}

// setRetryAfter sets Retry-After: wait rounded up to whole seconds, at
// least 1. No allocation.
func setRetryAfter(ctx *fasthttp.RequestCtx, wait time.Duration) {
	secs := int64((wait + time.Second - 1) / time.Second)
	if secs < 1 {
		secs = 1
	}
	var buf [20]byte
	ctx.Response.Header.SetCanonical(headerRetryAfter, strconv.AppendInt(buf[:0], secs, 10))
}

// ticket answers with a requestNo.
func (w answers) ticket(ctx *fasthttp.RequestCtx, status int, code, requestNo, message string) {
	var buf [192]byte
	ctx.SetStatusCode(status)
	ctx.SetContentTypeBytes(contentTypeJSON)
	ctx.SetBody(appendBody(buf[:0], code, requestNo, message))
}

// queuing answers QUEUING with the ticket's requestNo and when to poll:
// "pollAfterMs" in the body and Retry-After (whole seconds) in the header.
func (w answers) queuing(ctx *fasthttp.RequestCtx, requestNo string, poll time.Duration) {
	var buf [224]byte
	ctx.SetStatusCode(fasthttp.StatusOK)
	ctx.SetContentTypeBytes(contentTypeJSON)
	b := appendBody(buf[:0], "QUEUING", requestNo, msgQueuing)
	ctx.SetBody(appendPollAfter(b, poll))
	setRetryAfter(ctx, poll)
}

// appendPollAfter puts the poll field before the closing brace of the
// JSON object b.
func appendPollAfter(b []byte, poll time.Duration) []byte {
	return append(appendPollField(b[:len(b)-1], poll), '}')
}

// appendPollField appends ,"pollAfterMs":N (whole milliseconds).
func appendPollField(b []byte, poll time.Duration) []byte {
	b = append(b, `,"pollAfterMs":`...)
	return strconv.AppendInt(b, poll.Milliseconds(), 10)
}

// httpError answers what fasthttp could not read as a request: a body over
// MaxRequestBodySize (refused from its Content-Length, before it is read),
// oversized headers, a timeout, or garbage.
func (w answers) httpError(ctx *fasthttp.RequestCtx, err error) {
	var small *fasthttp.ErrSmallBuffer
	var ne net.Error
	switch {
	case errors.Is(err, fasthttp.ErrBodyTooLarge):
		w.write(ctx, ansTooLarge)
	case errors.As(err, &small):
		w.write(ctx, ansHeaderTooBig)
	case errors.As(err, &ne) && ne.Timeout():
		w.write(ctx, ansTimeout)
	default:
		w.write(ctx, ansBadHTTP)
	}
}
