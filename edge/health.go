package edge

import (
	"context"
	"fmt"

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
// listener the 503 body is generic (no internal error text reaches a
// client); the reason goes to the log, and the admin listener's /readyz
// (MountOps) names it.
func (s *Server) readyz(ctx *fasthttp.RequestCtx) { s.answerReady(ctx, false) }

func (s *Server) readyzDetailed(ctx *fasthttp.RequestCtx) { s.answerReady(ctx, true) }

func (s *Server) answerReady(ctx *fasthttp.RequestCtx, detail bool) {
	ctx.Response.Header.Set("Cache-Control", "no-store")
	if err := s.checkReady(); err != nil {
		if !detail {
			s.warn.warn("edge not ready", err)
			s.out.write(ctx, ansNotReady)
			return
		}
		ctx.SetStatusCode(fasthttp.StatusServiceUnavailable)
		ctx.SetContentTypeBytes(contentTypeJSON)
		ctx.SetBody(appendBody(nil, "NOT_READY", "", err.Error()))
		return
	}
	s.out.write(ctx, ansReady)
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
		return fmt.Errorf("shutting down")
	}
	ctx, cancel := context.WithTimeout(s.bgCtx, s.cfg.RedisTimeout)
	defer cancel()
	if err := s.rdb.Do(ctx, s.rdb.B().Ping().Build()).Error(); err != nil {
		return fmt.Errorf("redis default: %w", err)
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
