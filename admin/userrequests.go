package admin

import (
	"strconv"
	"strings"

	"github.com/valyala/fasthttp"

	"seckill/store"
)

// Support's lookup (GET /admin/v1/users/{id}/requests?activity=&cursor=&limit=):
// every attempt and ticket of one buyer the request log holds — tickets,
// refused attempts, their orders and histories —, newest first, a page at
// a time. It answers "why was user 42 blocked in activity 7" and "I was
// accepted but have no order". A ticket the consumer has not reached yet
// has no row (its story is in Redis: GET /admin/v1/requests/{requestNo}).

// Page sizes of the lookup.
const (
	defaultRequestsPage = 20
	maxRequestsPage     = 100
)

// UserRequests is the lookup's answer.
type UserRequests struct {
	UserID     int64         `json:"userId"`
	ActivityID int64         `json:"activityId,omitempty"` // 0: every activity
	Requests   []UserRequest `json:"requests"`
	// Next is the cursor of the next page; empty on the last one.
	Next string `json:"next,omitempty"`
}

// UserRequest is one attempt or ticket of the buyer.
type UserRequest struct {
	store.LogEntry
	// Outcome is the entry in one word: SUCCESS (an order), REJECTED
	// (refused before a ticket), FAILED (a ticket that ended without an
	// order), COMPENSATING, or QUEUING (on its way).
	Outcome string `json:"outcome"`
	// Reason is why it was refused or failed (the remark's code, such as
	// SOLD_OUT or DUPLICATE); empty for the others.
	Reason string `json:"reason,omitempty"`
	// Order is the ticket's order as it stands (PAID, CLOSED, …).
	Order   *store.Order  `json:"order,omitempty"`
	History []store.Event `json:"history,omitempty"`
}

// outcomeOf reads a request-log entry in one word.
func outcomeOf(e *store.LogEntry) (outcome, reason string) {
	switch e.Status {
	case store.StatusSuccess, store.StatusOrderCreated:
		return "SUCCESS", ""
	case store.StatusRejected:
		code, _, _ := strings.Cut(e.Remark, ":")
		code, _, _ = strings.Cut(code, " ")
		return "REJECTED", code
	case store.StatusFailed:
		return "FAILED", e.Remark
	case store.StatusCompensating:
		return "COMPENSATING", e.Remark
	}
	return "QUEUING", ""
}

func (s *Server) userRequests(ctx *fasthttp.RequestCtx) {
	user, ok := pathInt(ctx, "id")
	if !ok {
		return
	}
	q := ctx.QueryArgs()
	var activity int64
	if v := q.Peek("activity"); len(v) > 0 {
		n, err := strconv.ParseInt(string(v), 10, 64)
		if err != nil || n <= 0 {
			writeErr(ctx, fasthttp.StatusBadRequest, "BAD_REQUEST", "activity must be a positive integer")
			return
		}
		activity = n
	}
	limit := defaultRequestsPage
	if v := q.Peek("limit"); len(v) > 0 {
		n, err := strconv.Atoi(string(v))
		if err != nil || n <= 0 || n > maxRequestsPage {
			writeErr(ctx, fasthttp.StatusBadRequest, "BAD_REQUEST", "limit must be 1 to "+strconv.Itoa(maxRequestsPage))
			return
		}
		limit = n
	}
	cur, err := store.ParseRequestCursor(string(q.Peek("cursor")))
	if err != nil {
		writeErr(ctx, fasthttp.StatusBadRequest, "BAD_REQUEST", err.Error())
		return
	}
	c, cancel := opCtx(ctx)
	defer cancel()
	es, next, err := s.d.Store.UserRequests(c, user, activity, cur, limit)
	if err != nil {
		s.fail(ctx, err)
		return
	}
	rns := make([]string, len(es))
	for i := range es {
		rns[i] = es[i].RequestNo
	}
	hist, err := s.d.Store.RequestHistories(c, rns)
	if err != nil {
		s.fail(ctx, err)
		return
	}
	out := UserRequests{UserID: user, ActivityID: activity, Requests: make([]UserRequest, 0, len(es)), Next: next.String()}
	for i := range es {
		r := UserRequest{LogEntry: es[i], History: hist[es[i].RequestNo]}
		r.Outcome, r.Reason = outcomeOf(&r.LogEntry)
		if r.OrderNo != "" {
			// At most one read per entry of the page (limit bounds it).
			if o, err := s.d.Store.Order(c, r.OrderNo); err == nil {
				r.Order = &o
			}
		}
		out.Requests = append(out.Requests, r)
	}
	writeJSON(ctx, fasthttp.StatusOK, out)
}
