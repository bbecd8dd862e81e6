package admin

import (
	"github.com/valyala/fasthttp"

	"seckill/sale"
)

// ModeView answers the mode routes: how the edges take one SKU's
// purchases (sale.ModeDirect or sale.ModeQueue) and the queue's drain pace
// (attempts per second, 0: as fast as the SKU's shard allows).
type ModeView struct {
	ActivityID int64  `json:"activityId"`
	SKUID      int64  `json:"skuId"`
	Mode       string `json:"mode"`
	Rate       int64  `json:"rate"`
}

func modeView(a *sale.Activity, k *sale.SKU) ModeView {
	m := k.Mode
	if m == "" {
		m = sale.ModeDirect
	}
	return ModeView{ActivityID: a.ID, SKUID: k.ID, Mode: m, Rate: k.Rate}
}

// setMode is PUT /admin/v1/skus/{sku}/mode {"mode":"queue"|"direct",
// "rate":N, "activityId":A}: the SKU's mode, live. rate (optional, kept
// when absent) paces the queue's drainer; activityId (optional, also a
// query parameter) picks the activity where more than one sells the SKU,
// else the one selling it now. It follows the degrade switches' path: the
// catalog entry every edge and drainer loads and an activity event that
// makes them reload it now — and the SKU's row in the orders database, so
// a SKU rebuilt from the database keeps its mode. Audit-logged like every
// admin call.
func (s *Server) setMode(ctx *fasthttp.RequestCtx) {
	sku, ok := pathInt(ctx, "sku")
	if !ok {
		return
	}
	var body ModeChange
	if !decode(ctx, &body) {
		return
	}
	if body.Mode == nil && body.Rate == nil {
		writeErr(ctx, fasthttp.StatusBadRequest, "BAD_REQUEST", "name mode (direct or queue), rate or both")
		return
	}
	a, err := s.resolveSKU(sku, max(body.ActivityID, queryInt(ctx, "activityId")))
	if err != nil {
		s.fail(ctx, err)
		return
	}
	check := sale.SKU{}
	if k := a.SKU(sku); k != nil {
		check = *k
	}
	if body.Mode != nil {
		check.Mode = *body.Mode
	}
	if body.Rate != nil {
		check.Rate = *body.Rate
	}
	if err := check.ValidateMode(); err != nil {
		writeErr(ctx, fasthttp.StatusBadRequest, "BAD_REQUEST", err.Error())
		return
	}
	c, cancel := opCtx(ctx)
	defer cancel()
	got, ok := s.switchActivity(ctx, c, a.ID, func(a *sale.Activity) {
		k := a.SKU(sku)
		if k == nil {
			return
		}
		if body.Mode != nil {
			k.Mode = *body.Mode
		}
		if body.Rate != nil {
			k.Rate = *body.Rate
		}
	})
	if !ok {
		return
	}
	k := got.SKU(sku)
	if k == nil {
		writeErr(ctx, fasthttp.StatusNotFound, "NOT_FOUND", "the activity no longer sells the sku")
		return
	}
	if err := s.d.Store.SetMode(c, got.ID, sku, k.Mode, k.Rate); err != nil {
		s.fail(ctx, err)
		return
	}
	writeJSON(ctx, fasthttp.StatusOK, modeView(&got, k))
}

// getMode is GET /admin/v1/skus/{sku}/mode[?activityId=A].
func (s *Server) getMode(ctx *fasthttp.RequestCtx) {
	sku, ok := pathInt(ctx, "sku")
	if !ok {
		return
	}
	a, err := s.resolveSKU(sku, queryInt(ctx, "activityId"))
	if err != nil {
		s.fail(ctx, err)
		return
	}
	writeJSON(ctx, fasthttp.StatusOK, modeView(a, a.SKU(sku)))
}

// listModes is GET /admin/v1/modes: every SKU's mode, for the on-call page.
func (s *Server) listModes(ctx *fasthttp.RequestCtx) {
	c, cancel := opCtx(ctx)
	defer cancel()
	if err := s.d.Stock.Catalog().Load(c); err != nil {
		s.fail(ctx, err)
		return
	}
	out := []ModeView{}
	for _, a := range s.d.Stock.Catalog().Activities() {
		for i := range a.SKUs {
			out = append(out, modeView(a, &a.SKUs[i]))
		}
	}
	writeJSON(ctx, fasthttp.StatusOK, out)
}
