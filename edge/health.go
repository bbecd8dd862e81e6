package edge

import (
	"context"
	"fmt"

	"github.com/prometheus/client_golang/prometheus/promhttp"
	"github.com/valyala/fasthttp"
	"github.com/valyala/fasthttp/fasthttpadaptor"
)

// healthz answers 200 while the process serves at all.
func (s *Server) healthz(ctx *fasthttp.RequestCtx) { s.out.write(ctx, ansOK) }

// readyz answers 200 when the default Redis answers PING and every extra
// check passes, 503 naming the first failure otherwise (and while
// draining), so a balancer stops sending buyers to an edge that could only
// answer "busy".
func (s *Server) readyz(ctx *fasthttp.RequestCtx) {
	ctx.Response.Header.Set("Cache-Control", "no-store")
	if err := s.checkReady(); err != nil {
		ctx.SetStatusCode(fasthttp.StatusServiceUnavailable)
		ctx.SetContentTypeBytes(contentTypeJSON)
		ctx.SetBody(appendBody(nil, "NOT_READY", "", err.Error()))
		return
	}
	s.out.write(ctx, ansReady)
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
