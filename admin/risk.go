package admin

import (
	"context"
	"errors"

	"github.com/valyala/fasthttp"

	"seckill/catalog"
	"seckill/internal/riskaudit"
	"seckill/sale"
)

// RiskAnswer answers PUT /admin/v1/activities/{id}/risk: the activity's
// policy on a risk-service timeout or error (sale.RiskAllow, sale.RiskDeny).
type RiskAnswer struct {
	ActivityID int64  `json:"activityId"`
	OnError    string `json:"onError"`
}

// setRisk is PUT /admin/v1/activities/{id}/risk {"onError":"allow"|"deny"}:
// the activity's risk policy — what every edge does with a purchase when
// the risk service (edge.risk.url) times out or fails: allow (degrade
// open) or deny (503 BUSY). It is kept where the activity's state is, in
// the catalog entry every edge loads, and announced by an activity event,
// so running edges follow within the event's delivery (at the latest their
// edge.refresh_interval), and written to the activity's row in the orders
// database (flash_sale_activity.risk_on_error) as the state switch is, so
// an activity rebuilt from the database after Redis lost its catalog keeps
// the policy on-call chose.
func (s *Server) setRisk(ctx *fasthttp.RequestCtx) {
	id, ok := pathInt(ctx, "id")
	if !ok {
		return
	}
	var body RiskChange
	if !decode(ctx, &body) {
		return
	}
	if body.OnError != sale.RiskAllow && body.OnError != sale.RiskDeny {
		writeErr(ctx, fasthttp.StatusBadRequest, "BAD_REQUEST", "onError must be allow or deny")
		return
	}
	c, cancel := opCtx(ctx)
	defer cancel()
	a, ok := s.switchActivity(ctx, c, id, func(a *sale.Activity) { a.RiskOnError = body.OnError })
	if !ok {
		return
	}
	if err := s.d.Store.PutActivity(c, a); err != nil {
		s.fail(ctx, err)
		return
	}
	writeJSON(ctx, fasthttp.StatusOK, RiskAnswer{ActivityID: id, OnError: a.RiskOnError})
}

// switchActivity applies a live switch to activity id the way every
// switch goes: the catalog entry every edge loads (catalog.Update), then
// the activity event that makes the edges reload it now. On false the
// answer is written (404 for an unknown activity).
func (s *Server) switchActivity(ctx *fasthttp.RequestCtx, c context.Context, id int64, change func(*sale.Activity)) (sale.Activity, bool) {
	a, err := s.d.Stock.Catalog().Update(c, id, change)
	if errors.Is(err, catalog.ErrUnknownActivity) {
		writeErr(ctx, fasthttp.StatusNotFound, "NOT_FOUND", err.Error())
		return a, false
	}
	if err != nil {
		s.fail(ctx, err)
		return a, false
	}
	s.d.Stock.Publish(c, sale.Event{Kind: sale.EventActivity, Activity: id})
	return a, true
}

// UncheckedView answers GET /admin/v1/risk/unchecked.
type UncheckedView struct {
	// Total is every record kept (riskaudit.Retention), whatever its state.
	Total   int64              `json:"total"`
	Records []riskaudit.Record `json:"records"`
}

// unchecked is GET /admin/v1/risk/unchecked[?state=pending|allow|deny][&limit=N]:
// the purchases that got a ticket without a risk verdict (the edges' risk
// fallback), oldest first, at most limit (default 100, at most 10000).
func (s *Server) unchecked(ctx *fasthttp.RequestCtx) {
	state := string(ctx.QueryArgs().Peek("state"))
	switch state {
	case "", riskaudit.Pending, riskaudit.Allowed, riskaudit.Denied:
	default:
		writeErr(ctx, fasthttp.StatusBadRequest, "BAD_REQUEST", "state must be pending, allow or deny")
		return
	}
	limit := 100
	if ctx.QueryArgs().Has("limit") {
		n := queryInt(ctx, "limit")
		if n < 1 || n > 10_000 {
			writeErr(ctx, fasthttp.StatusBadRequest, "BAD_REQUEST", "limit must be 1..10000")
			return
		}
		limit = int(n)
	}
	c, cancel := opCtx(ctx)
	defer cancel()
	recs, total, err := riskaudit.List(c, s.d.Stock.Shards().Default, state, limit)
	if err != nil {
		s.fail(ctx, err)
		return
	}
	if recs == nil {
		recs = []riskaudit.Record{}
	}
	writeJSON(ctx, fasthttp.StatusOK, UncheckedView{Total: total, Records: recs})
}
