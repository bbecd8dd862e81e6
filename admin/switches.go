package admin

import (
	"github.com/valyala/fasthttp"

	"seckill/routeswitch"
)

// RouteView is one line of the route switches: a non-core buyer route
// on-call can close (package routeswitch).
type RouteView struct {
	Name string `json:"name"`
	Open bool   `json:"open"`
}

func routeViews(st routeswitch.State) []RouteView {
	out := make([]RouteView, 0, len(routeswitch.Names))
	for i, n := range routeswitch.Names {
		out = append(out, RouteView{Name: n, Open: st.Open(i)})
	}
	return out
}

// listRoutes is GET /admin/v1/routes: every switchable route, open or not.
func (s *Server) listRoutes(ctx *fasthttp.RequestCtx) {
	c, cancel := opCtx(ctx)
	defer cancel()
	st, _, err := routeswitch.Load(c, s.d.Stock.Shards().Default)
	if err != nil {
		s.fail(ctx, err)
		return
	}
	writeJSON(ctx, fasthttp.StatusOK, routeViews(st))
}

// setRoute is PUT /admin/v1/routes/{name} {"open":bool}: opens or closes
// one of the non-core buyer routes (orders, pay, events) on every edge.
// The database first (where a Redis that lost the switches is restored
// from, routeswitch.Restore), then the Redis hash every edge reads and
// the "routes" event that makes them read it now. Audit-logged like every
// admin call. Answers every route's switch.
func (s *Server) setRoute(ctx *fasthttp.RequestCtx) {
	name, _ := ctx.UserValue("name").(string)
	i := routeswitch.Index(name)
	if i < 0 {
		writeErr(ctx, fasthttp.StatusNotFound, "NOT_FOUND", "no switchable route "+name+" (orders, pay, events)")
		return
	}
	var body RouteChange
	if !decode(ctx, &body) {
		return
	}
	if body.Open == nil {
		writeErr(ctx, fasthttp.StatusBadRequest, "BAD_REQUEST", "open (true or false) is required")
		return
	}
	c, cancel := opCtx(ctx)
	defer cancel()
	if err := s.d.Store.PutRouteSwitch(c, name, *body.Open); err != nil {
		s.fail(ctx, err)
		return
	}
	rdb := s.d.Stock.Shards().Default
	st, _, err := routeswitch.Load(c, rdb)
	if err != nil {
		s.fail(ctx, err)
		return
	}
	st = st.With(i, *body.Open)
	if err := routeswitch.Put(c, rdb, st); err != nil {
		s.fail(ctx, err)
		return
	}
	writeJSON(ctx, fasthttp.StatusOK, routeViews(st))
}
