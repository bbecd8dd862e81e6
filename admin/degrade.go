package admin

import (
	"github.com/valyala/fasthttp"

	"seckill/sale"
)

// DegradeView answers the degrade routes: an activity's degrade switches.
type DegradeView struct {
	ActivityID int64 `json:"activityId"`
	sale.Degrade
	// Reserved is the length of the activity's reserved list (who may
	// still buy under reservedOnly).
	Reserved int `json:"reserved"`
}

func degradeView(a *sale.Activity) DegradeView {
	return DegradeView{ActivityID: a.ID, Degrade: a.Degrade, Reserved: len(a.ReservedUsers)}
}

// setDegrade is PUT /admin/v1/activities/{id}/degrade with any of
// {"reservedOnly":bool,"pollAfterMs":0..60000,"paused":bool}: the
// activity's degrade switches (sale.Degrade), the ones named changed, the
// others kept. It follows the risk policy's path: the catalog entry every
// edge loads, an activity event so running edges follow within its
// delivery (at the latest their edge.refresh_interval), and the activity's
// row in the orders database, so an activity rebuilt from the database
// keeps them. The call is audit-logged like every admin call.
func (s *Server) setDegrade(ctx *fasthttp.RequestCtx) {
	id, ok := pathInt(ctx, "id")
	if !ok {
		return
	}
	var body DegradeChange
	if !decode(ctx, &body) {
		return
	}
	if body.ReservedOnly == nil && body.PollAfterMs == nil && body.Paused == nil {
		writeErr(ctx, fasthttp.StatusBadRequest, "BAD_REQUEST", "name at least one of reservedOnly, pollAfterMs, paused")
		return
	}
	if body.PollAfterMs != nil {
		if err := (sale.Degrade{PollAfterMs: *body.PollAfterMs}).Validate(); err != nil {
			writeErr(ctx, fasthttp.StatusBadRequest, "BAD_REQUEST", err.Error())
			return
		}
	}
	c, cancel := opCtx(ctx)
	defer cancel()
	a, ok := s.switchActivity(ctx, c, id, func(a *sale.Activity) {
		if body.ReservedOnly != nil {
			a.ReservedOnly = *body.ReservedOnly
		}
		if body.PollAfterMs != nil {
			a.PollAfterMs = *body.PollAfterMs
		}
		if body.Paused != nil {
			a.Paused = *body.Paused
		}
	})
	if !ok {
		return
	}
	if err := s.d.Store.SetDegrade(c, id, a.Degrade); err != nil {
		s.fail(ctx, err)
		return
	}
	writeJSON(ctx, fasthttp.StatusOK, degradeView(&a))
}

// listDegrade is GET /admin/v1/degrade: every activity's switches.
func (s *Server) listDegrade(ctx *fasthttp.RequestCtx) {
	c, cancel := opCtx(ctx)
	defer cancel()
	if err := s.d.Stock.Catalog().Load(c); err != nil {
		s.fail(ctx, err)
		return
	}
	out := []DegradeView{}
	for _, a := range s.d.Stock.Catalog().Activities() {
		out = append(out, degradeView(a))
	}
	writeJSON(ctx, fasthttp.StatusOK, out)
}
