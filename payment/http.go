package payment

import (
	"context"
	"encoding/json"
	"errors"
	"strconv"
	"time"

	"github.com/valyala/fasthttp"
)

// PayPath is the route Handler serves; {orderNo} is a router parameter.
const PayPath = "/api/v1/flash-sale/orders/{orderNo}/pay"

// Answer is the JSON body of every pay answer.
type Answer struct {
	Code    string `json:"code"` // PAID, NOT_FOUND, CLOSED, EXPIRED, UNAUTHORIZED, BAD_REQUEST, BUSY
	OrderNo string `json:"orderNo,omitempty"`
	Status  string `json:"status,omitempty"` // the order's status when known
	Amount  string `json:"amount,omitempty"`
	Message string `json:"message"`
}

// Handler serves POST PayPath for the edge (mount it on the public
// router): the buyer is the X-User-Id header, the order the {orderNo}
// parameter. 200 PAID (also for an order paid before), 401 without a user,
// 400 for a malformed one, 404 for an order that is not the buyer's, 409
// CLOSED or EXPIRED past the deadline, 503 when the database fails. Each
// call is bounded by timeout (default 2s when 0).
func Handler(s *Service, timeout time.Duration) fasthttp.RequestHandler {
	if timeout <= 0 {
		timeout = 2 * time.Second
	}
	return func(ctx *fasthttp.RequestCtx) {
		ctx.Response.Header.Set("Cache-Control", "no-store")
		h := ctx.Request.Header.Peek("X-User-Id")
		if len(h) == 0 {
			answer(ctx, fasthttp.StatusUnauthorized, Answer{Code: "UNAUTHORIZED", Message: "X-User-Id header required"})
			return
		}
		user, err := strconv.ParseInt(string(h), 10, 64)
		if err != nil || user <= 0 {
			answer(ctx, fasthttp.StatusBadRequest, Answer{Code: "BAD_REQUEST", Message: "X-User-Id must be a positive integer"})
			return
		}
		orderNo, _ := ctx.UserValue("orderNo").(string)
		c, cancel := context.WithTimeout(context.Background(), timeout)
		o, err := s.Pay(c, orderNo, user)
		cancel()
		a := Answer{OrderNo: orderNo, Status: o.Status}
		if o.OrderNo != "" {
			a.Amount = o.Amount.String()
		}
		switch {
		case err == nil:
			a.Code, a.Message = "PAID", "order paid"
			answer(ctx, fasthttp.StatusOK, a)
		case errors.Is(err, ErrNotFound):
			answer(ctx, fasthttp.StatusNotFound, Answer{Code: "NOT_FOUND", Message: "no such order"})
		case errors.Is(err, ErrClosed):
			a.Code, a.Message = "CLOSED", "the order was closed unpaid"
			answer(ctx, fasthttp.StatusConflict, a)
		case errors.Is(err, ErrExpired):
			a.Code, a.Message = "EXPIRED", "the payment deadline has passed"
			answer(ctx, fasthttp.StatusConflict, a)
		default:
			answer(ctx, fasthttp.StatusServiceUnavailable, Answer{Code: "BUSY", Message: "system busy, try again"})
		}
	}
}

func answer(ctx *fasthttp.RequestCtx, status int, a Answer) {
	b, _ := json.Marshal(a)
	ctx.SetStatusCode(status)
	ctx.SetContentType("application/json")
	ctx.SetBody(b)
}
