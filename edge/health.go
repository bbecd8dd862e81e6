package edge

import (
	"context"
	"errors"

	"github.com/fasthttp/router"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"github.com/valyala/fasthttp"
	"github.com/valyala/fasthttp/fasthttpadaptor"
)

// healthz answers 200 while the process serves at all.
func (s *Server) healthz(ctx *fasthttp.RequestCtx) { s.out.write(ctx, ansOK) }

// readyz answers 200 when the default Redis answers PING and every extra
// check passes, 503 otherwise (and while draining), so a balancer stops
// sending buyers to an edge that could only answer "busy". On the public
// listener the 503 body is generic; the admin listener's /readyz
// (MountOps) names the failing check (ReadyCheck). No error text reaches
// either body: addresses, DSNs and driver messages go to the log only.
func (s *Server) readyz(ctx *fasthttp.RequestCtx) { s.answerReady(ctx, false) }

func (s *Server) readyzDetailed(ctx *fasthttp.RequestCtx) { s.answerReady(ctx, true) }

func (s *Server) answerReady(ctx *fasthttp.RequestCtx, detail bool) {
	ctx.Response.Header.Set("Cache-Control", "no-store")
	if err := s.checkReady(); err != nil {
		s.warn.warn("edge not ready", err)
		if !detail {
			s.out.write(ctx, ansNotReady)
			return
		}
		ctx.SetStatusCode(fasthttp.StatusServiceUnavailable)
		ctx.SetContentTypeBytes(contentTypeJSON)
		ctx.SetBody(appendBody(nil, "NOT_READY", "", NotReadyMessage(err)))
		return
	}
	s.out.write(ctx, ansReady)
}

// NotReady is a failed readiness check: Check names it (redis.default,
// redis.hot0, store, draining), Err is the cause, for the log only.
type NotReady struct {
	Check string
	Err   error
}

func (e *NotReady) Error() string { return e.Check + ": " + e.Err.Error() }
func (e *NotReady) Unwrap() error { return e.Err }

// ReadyCheck is the name of the failed check err reports ("dependency"
// when it names none).
func ReadyCheck(err error) string {
	if n, ok := errors.AsType[*NotReady](err); ok {
		return n.Check
	}
	return "dependency"
}

// NotReadyMessage is what a /readyz body says of err: the check's name and
// a generic reason, never the error's text.
func NotReadyMessage(err error) string {
	return "not ready: " + ReadyCheck(err) + " is not answering (the cause is in the log)"
}

// MountOps puts GET /readyz (naming what is not ready) and GET /metrics
// (when the edge has a registry to serve) on r: the admin or a metrics
// listener, where production serves them (edge.public_ops false).
func (s *Server) MountOps(r *router.Router) {
	r.GET("/readyz", s.readyzDetailed)
	if s.gather != nil {
		r.GET("/metrics", s.metricsHandler())
	}
}

func (s *Server) checkReady() error {
	if s.draining.Load() {
		return &NotReady{Check: "draining", Err: errors.New("shutting down")}
	}
	ctx, cancel := context.WithTimeout(s.bgCtx, s.cfg.RedisTimeout)
	defer cancel()
	if err := s.rdb.Do(ctx, s.rdb.B().Ping().Build()).Error(); err != nil {
		return &NotReady{Check: "redis.default", Err: err}
	}
	for _, check := range s.ready {
		if err := check(ctx); err != nil {
			return err
		}
	}
	return nil
}

// metricsHandler serves the injected registry in the Prometheus text
// format.
func (s *Server) metricsHandler() fasthttp.RequestHandler {
	return fasthttpadaptor.NewFastHTTPHandler(promhttp.HandlerFor(s.gather, promhttp.HandlerOpts{}))
}
