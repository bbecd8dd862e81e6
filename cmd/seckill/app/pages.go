package app

import (
	"time"

	"github.com/fasthttp/router"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/valyala/fasthttp"

	"seckill/admin"
	"seckill/edge"
	"seckill/internal/identity"
	"seckill/routeswitch"
	"seckill/store"
	"seckill/web"
)

// mountPages puts the on-call page and the counters it reads on the admin
// listener. The page shell is public there (it holds no data); the counters
// need the token like every admin route.
func mountPages(a *admin.Server, g prometheus.Gatherer) {
	r := a.Router()
	r.GET("/admin/ui", web.OnCall)          // the page; its assets below
	r.GET("/admin/ui/{file:*}", web.OnCall) // uplot/… included
	r.GET("/admin/v1/counters", web.Counters(g))
	a.ServePublic("/admin/ui")
}

// mountBuyerPages puts the buyer page, the result stream and the buyer's
// orders on the public router. "My orders" is read from the orders
// database: without one (st nil) the route is not there.
// The result stream and the orders are routes on-call may close (guard).
func mountBuyerPages(r *router.Router, guard edge.RouteGuard, streams *web.ResultEvents, st store.Store, payTimeout time.Duration, ident *identity.Verifier) {
	r.GET("/", func(ctx *fasthttp.RequestCtx) { ctx.Redirect("/sale", fasthttp.StatusFound) })
	r.GET("/sale", web.Buyer) // the page; its assets below
	r.GET("/sale/{file}", web.Buyer)
	r.GET("/api/v1/flash-sale/result/{requestNo}/events", guard(routeswitch.Events, streams.Handle))
	if st != nil {
		r.GET(web.OrdersPath, guard(routeswitch.Orders, web.NewOrders(st, web.OrdersConfig{PayTimeout: payTimeout, Identity: ident}).Handle))
	}
}
