package payment

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"time"

	"github.com/valyala/fasthttp"

	"seckill/internal/identity"
	"seckill/sale"
)

// PayPath is the buyer's route Handler serves; {orderNo} is a router
// parameter.
const PayPath = "/api/v1/flash-sale/orders/{orderNo}/pay"

// CallbackPath is the payment provider's route CallbackHandler serves.
const CallbackPath = "/api/v1/payments/callback"

// Answer is the JSON body of every answer of both routes.
type Answer struct {
	// Code: PAYMENT_PENDING, PAID, NOT_FOUND, CLOSED, EXPIRED,
	// UNAUTHORIZED, BAD_REQUEST, BAD_SIGNATURE, AMOUNT_MISMATCH,
	// REFERENCE_REUSED, ALREADY_PAID, UNSUPPORTED_MEDIA_TYPE, BUSY.
	Code        string `json:"code"`
	OrderNo     string `json:"orderNo,omitempty"`
	State       string `json:"state,omitempty"` // the payment's state when known (Intent's states)
	Amount      string `json:"amount,omitempty"`
	AmountCents int64  `json:"amountCents,omitempty"`
	ExpireAt    string `json:"expireAt,omitempty"` // RFC 3339: pay before it
	Message     string `json:"message"`
}

// Handler serves POST PayPath for the edge (mount it on the public
// router): the buyer starts a payment and reads its state — the payment
// intent {orderNo, amount, state, expireAt} the provider's checkout takes.
// It never marks the order paid (only the provider's callback does). The
// buyer is the X-User-Id header, the order the {orderNo} parameter. 200
// PAYMENT_PENDING (state AWAITING_PAYMENT) or PAID, 401 without a user, 400
// for a malformed one, 404 for an order that is not the buyer's, 409 CLOSED
// or EXPIRED, 503 when the database fails. Each call is bounded by timeout
// (default 2s when 0).
func Handler(s *Service, timeout time.Duration) fasthttp.RequestHandler {
	if timeout <= 0 {
		timeout = 2 * time.Second
	}
	return func(ctx *fasthttp.RequestCtx) {
		ctx.Response.Header.Set("Cache-Control", "no-store")
		user, present, valid := identity.ParseUserID(ctx.Request.Header.Peek("X-User-Id"))
		if !present {
			answer(ctx, fasthttp.StatusUnauthorized, Answer{Code: "UNAUTHORIZED", Message: "X-User-Id header required"})
			return
		}
		if !valid {
			answer(ctx, fasthttp.StatusBadRequest, Answer{Code: "BAD_REQUEST", Message: "X-User-Id must be a positive integer"})
			return
		}
		orderNo, _ := ctx.UserValue("orderNo").(string)
		c, cancel := context.WithTimeout(context.Background(), timeout)
		in, err := s.Intent(c, orderNo, user)
		cancel()
		if errors.Is(err, ErrNotFound) {
			answer(ctx, fasthttp.StatusNotFound, Answer{Code: "NOT_FOUND", Message: "no such order"})
			return
		}
		if err != nil {
			answer(ctx, fasthttp.StatusServiceUnavailable, Answer{Code: "BUSY", Message: "system busy, try again"})
			return
		}
		a := Answer{OrderNo: in.OrderNo, State: in.State, Amount: in.Amount.String(), AmountCents: int64(in.Amount),
			ExpireAt: in.ExpireAt.UTC().Format(time.RFC3339)}
		switch in.State {
		case StateAwaiting:
			a.Code, a.Message = "PAYMENT_PENDING", "pay the amount through the payment provider before expireAt"
			answer(ctx, fasthttp.StatusOK, a)
		case StatePaid:
			a.Code, a.Message = "PAID", "order paid"
			answer(ctx, fasthttp.StatusOK, a)
		case StateClosed:
			a.Code, a.Message = "CLOSED", "the order was closed unpaid"
			answer(ctx, fasthttp.StatusConflict, a)
		default:
			a.Code, a.Message = "EXPIRED", "the payment deadline has passed"
			answer(ctx, fasthttp.StatusConflict, a)
		}
	}
}

// callbackBody is the provider's JSON: signature = Sign(key, orderNo,
// amountCents, providerRef).
type callbackBody struct {
	OrderNo     string `json:"orderNo"`
	AmountCents int64  `json:"amountCents"`
	ProviderRef string `json:"providerRef"`
	Signature   string `json:"signature"`
}

// CallbackHandler serves POST CallbackPath, the payment provider's
// confirmation (application/json, callbackBody). 200 PAID (also for the
// same callback again: idempotent), 415 for another content type, 400 for
// a malformed body, 401 BAD_SIGNATURE, 404 NOT_FOUND, 409 AMOUNT_MISMATCH,
// REFERENCE_REUSED, ALREADY_PAID, CLOSED or EXPIRED (the provider refunds),
// 503 BUSY (retry). Every call is audit-logged by Confirm.
func CallbackHandler(s *Service, timeout time.Duration) fasthttp.RequestHandler {
	if timeout <= 0 {
		timeout = 2 * time.Second
	}
	return func(ctx *fasthttp.RequestCtx) {
		ctx.Response.Header.Set("Cache-Control", "no-store")
		if ct, _, _ := bytes.Cut(ctx.Request.Header.ContentType(), []byte(";")); !bytes.EqualFold(bytes.TrimSpace(ct), []byte("application/json")) {
			answer(ctx, fasthttp.StatusUnsupportedMediaType, Answer{Code: "UNSUPPORTED_MEDIA_TYPE", Message: "application/json required"})
			return
		}
		var b callbackBody
		dec := json.NewDecoder(bytes.NewReader(ctx.PostBody()))
		dec.DisallowUnknownFields()
		if err := dec.Decode(&b); err != nil {
			answer(ctx, fasthttp.StatusBadRequest, Answer{Code: "BAD_REQUEST", Message: "body: want {orderNo, amountCents, providerRef, signature}"})
			return
		}
		c, cancel := context.WithTimeout(context.Background(), timeout)
		o, err := s.Confirm(c, Callback{OrderNo: b.OrderNo, Amount: sale.Cents(b.AmountCents), ProviderRef: b.ProviderRef,
			Signature: b.Signature, Remote: ctx.RemoteIP().String()})
		cancel()
		a := Answer{OrderNo: b.OrderNo}
		for _, m := range []struct {
			err    error
			status int
			code   string
		}{
			{nil, fasthttp.StatusOK, "PAID"},
			{ErrSignature, fasthttp.StatusUnauthorized, "BAD_SIGNATURE"},
			{ErrNotFound, fasthttp.StatusNotFound, "NOT_FOUND"},
			{ErrAmount, fasthttp.StatusConflict, "AMOUNT_MISMATCH"},
			{ErrRefReused, fasthttp.StatusConflict, "REFERENCE_REUSED"},
			{ErrAlreadyPaid, fasthttp.StatusConflict, "ALREADY_PAID"},
			{ErrClosed, fasthttp.StatusConflict, "CLOSED"},
			{ErrExpired, fasthttp.StatusConflict, "EXPIRED"},
		} {
			if err == m.err || m.err != nil && errors.Is(err, m.err) {
				a.Code, a.Message = m.code, "payment "+m.code
				if err == nil {
					a.State, a.Message = StatePaid, "order paid"
					a.Amount, a.AmountCents = o.Amount.String(), int64(o.Amount)
				}
				answer(ctx, m.status, a)
				return
			}
		}
		answer(ctx, fasthttp.StatusServiceUnavailable, Answer{Code: "BUSY", Message: "system busy, try again"})
	}
}

func answer(ctx *fasthttp.RequestCtx, status int, a Answer) {
	b, _ := json.Marshal(a)
	ctx.SetStatusCode(status)
	ctx.SetContentType("application/json")
	ctx.SetBody(b)
}
