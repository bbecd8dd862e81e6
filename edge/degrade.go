package edge

import (
	"context"
	"sync/atomic"
	"time"

	"github.com/fasthttp/router"
	"github.com/valyala/fasthttp"

	"seckill/routeswitch"
)

// On-call's degrade switches at the edge (seed 001 §11.6, §16).
//
// Per activity (sale.Degrade, in the catalog entry, so they arrive with
// the activity event and every catalog load): reservedOnly answers a
// buyer not on the reserved list 403 RESERVED_ONLY; paused answers every
// purchase and token 503 PAUSED with Retry-After edge.degrade.paused_retry_after;
// pollAfterMs is what QUEUING answers and queuing results tell the buyer
// to wait before polling again (edge.degrade.poll_after when unset). Each
// is judged from the local catalog snapshot: no dependency is asked.
//
// Per route (package routeswitch, a Redis hash re-read on every "routes"
// event, after a re-subscription and every edge.degrade.refresh_interval):
// the non-core buyer routes — orders, pay, events — closed by on-call
// answer 503 ROUTE_CLOSED with Retry-After edge.degrade.closed_retry_after
// at once, before their handler runs. A failed read keeps the last
// switches.

// pollAfter is how long a buyer of activity should wait between polls.
func (s *Server) pollAfter(activity int64) time.Duration {
	if a, ok := s.views.cat.Activity(activity); ok && a.PollAfterMs > 0 {
		return time.Duration(a.PollAfterMs) * time.Millisecond
	}
	return s.cfg.Degrade.PollAfter
}

// routeSwitches is the switches in force. Safe for concurrent use; a
// lookup is one atomic load.
type routeSwitches struct {
	closed atomic.Uint32 // a routeswitch.State
	kick   chan struct{}
}

func newRouteSwitches() *routeSwitches { return &routeSwitches{kick: make(chan struct{}, 1)} }

func (r *routeSwitches) state() routeswitch.State { return routeswitch.State(r.closed.Load()) }

// reload asks the loader for a read now; requests coalesce.
func (r *routeSwitches) reload() {
	select {
	case r.kick <- struct{}{}:
	default:
	}
}

// loadRoutes is the loader's step.
func (s *Server) loadRoutes(ctx context.Context) error {
	st, _, err := routeswitch.Load(ctx, s.rdb)
	if err != nil {
		return err
	}
	s.routeSw.closed.Store(uint32(st))
	return nil
}

// RouteGuard wraps the handler of a switchable route (routeswitch.Names):
// while on-call has the route closed, the request is answered 503
// ROUTE_CLOSED with Retry-After and h does not run. A name that cannot be
// switched panics (a wiring mistake, caught when the routes are mounted).
type RouteGuard func(name string, h fasthttp.RequestHandler) fasthttp.RequestHandler

// WithGuardedRoutes is WithRoutes for routes on-call may switch off:
// mount gets the guard to wrap each of them with.
func WithGuardedRoutes(mount func(r *router.Router, guard RouteGuard)) Option {
	return func(s *Server) {
		s.mounts = append(s.mounts, func(r *router.Router) { mount(r, s.guardRoute) })
	}
}

func (s *Server) guardRoute(name string, h fasthttp.RequestHandler) fasthttp.RequestHandler {
	i := routeswitch.Index(name)
	if i < 0 {
		panic("edge: route " + name + " cannot be switched")
	}
	return func(ctx *fasthttp.RequestCtx) {
		if !s.routeSw.state().Open(i) {
			s.out.retry(ctx, ansRouteClosed, s.cfg.Degrade.ClosedRetryAfter)
			return
		}
		h(ctx)
	}
}
