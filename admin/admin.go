// Package admin is the on-call API (DESIGN §4), served on its own listener
// next to the edge: create and preheat activities, switch them online or
// offline, mark SKUs sold out, restock, read stock / occupancy / orders /
// drift and a ticket's story, run reconciliation, read consumer lag, keep
// the IP and user blocklists, switch an activity's risk policy and its
// degrade switches, and open or close the non-core buyer routes.
// Every call needs "Authorization: Bearer <admin.token>" (compared in
// constant time) and is audit-logged, allowed or not.
package admin

import (
	"bytes"
	"context"
	"crypto/subtle"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"strconv"
	"strings"
	"time"

	"github.com/fasthttp/router"
	"github.com/valyala/fasthttp"
	"go.uber.org/zap"

	"seckill/blocklist"
	"seckill/internal/lag"
	"seckill/reconcile"
	"seckill/sale"
	"seckill/stock"
	"seckill/stock/results"
	"seckill/store"
)

// Reconciler runs a reconciliation and answers its report
// (reconcile.Reconciler.Run).
type Reconciler func(ctx context.Context, repair bool) (reconcile.Report, error)

// Deps are what the admin API drives.
type Deps struct {
	Stock   *stock.Stock
	Store   store.Store
	Results *results.Store
	// Lag is optional: without it /admin/v1/lag answers 503.
	Lag *lag.Reader
	// Reconcile is optional: without it /admin/v1/reconcile answers 503.
	Reconcile Reconciler
	// Blocklist is optional: without it the blocklist routes answer 503.
	Blocklist *blocklist.Store
	// BlocklistConfig are the entries of the configuration
	// (edge.blocklist), which the API lists but cannot remove.
	BlocklistConfig BlocklistConfig
	// Extra routes may be added by the caller through Server.Router
	// before Serve.
}

// BlocklistConfig is edge.blocklist as the admin API reports it.
type BlocklistConfig struct {
	IPs   []string `json:"ips"`
	Users []int64  `json:"users"`
}

// Server is the admin listener. Safe for concurrent use.
type Server struct {
	token []byte
	d     Deps
	log   *zap.Logger
	r     *router.Router
	srv   *fasthttp.Server
	now   func() time.Time
	// public path prefixes skip the token: static page shells only, which
	// hold no data (every data call they make carries the token).
	public []string
}

// New returns the admin server. An empty token refuses every call (fail
// closed) — set admin.token.
func New(token string, d Deps, log *zap.Logger) *Server {
	s := &Server{token: []byte(token), d: d, log: log, r: router.New(), now: time.Now}
	// A handler that panics answers 500 and is logged; the listener and the
	// process live on (the audit line follows as for every call).
	s.r.PanicHandler = func(ctx *fasthttp.RequestCtx, v any) {
		s.log.Error("admin handler panicked", zap.String("method", string(ctx.Method())),
			zap.String("path", string(ctx.Path())), zap.Any("panic", v), zap.StackSkip("stack", 1))
		ctx.ResetBody()
		writeErr(ctx, fasthttp.StatusInternalServerError, "INTERNAL", "internal error")
	}
	s.r.POST("/admin/v1/activities", s.createActivity)
	s.r.GET("/admin/v1/activities", s.listActivities)
	s.r.PUT("/admin/v1/activities/{id}/state", s.setState)
	s.r.PUT("/admin/v1/activities/{id}/risk", s.setRisk)
	s.r.GET("/admin/v1/risk/unchecked", s.unchecked)
	s.r.PUT("/admin/v1/activities/{id}/degrade", s.setDegrade)
	s.r.GET("/admin/v1/degrade", s.listDegrade)
	s.r.GET("/admin/v1/activities/{id}/stock", s.stock)
	s.r.PUT("/admin/v1/skus/{sku}/soldout", s.soldOut)
	s.r.POST("/admin/v1/skus/{sku}/restock", s.restock)
	s.r.PUT("/admin/v1/skus/{sku}/mode", s.setMode)
	s.r.GET("/admin/v1/skus/{sku}/mode", s.getMode)
	s.r.GET("/admin/v1/modes", s.listModes)
	s.r.GET("/admin/v1/skus/{sku}/prequeue", s.getPrequeue)
	s.r.GET("/admin/v1/requests/{requestNo}", s.request)
	s.r.GET("/admin/v1/users/{id}/requests", s.userRequests)
	s.r.POST("/admin/v1/reconcile", s.reconcile)
	s.r.GET("/admin/v1/lag", s.lag)
	s.r.GET("/admin/v1/routes", s.listRoutes)
	s.r.PUT("/admin/v1/routes/{name}", s.setRoute)
	s.r.GET("/admin/v1/blocklist", s.listBlocklist)
	s.r.PUT("/admin/v1/blocklist/ips/{ip:*}", s.blockIP)
	s.r.DELETE("/admin/v1/blocklist/ips/{ip:*}", s.unblockIP)
	s.r.PUT("/admin/v1/blocklist/users/{id}", s.blockUser)
	s.r.DELETE("/admin/v1/blocklist/users/{id}", s.unblockUser)
	s.srv = &fasthttp.Server{
		Handler:               s.handle,
		Name:                  "seckill-admin",
		ReadTimeout:           10 * time.Second,
		WriteTimeout:          30 * time.Second,
		IdleTimeout:           time.Minute,
		MaxRequestBodySize:    1 << 20,
		NoDefaultServerHeader: true,
	}
	return s
}

// Router exposes the router so the process can add routes (they get the
// same authentication and audit log).
func (s *Server) Router() *router.Router { return s.r }

// Serve serves ln until Shutdown.
func (s *Server) Serve(ln net.Listener) error { return s.srv.Serve(ln) }

// Shutdown stops the listener and waits for calls in flight.
func (s *Server) Shutdown(ctx context.Context) error { return s.srv.ShutdownWithContext(ctx) }

// Handler is the authenticated, audited handler (for tests and for
// mounting extra listeners).
func (s *Server) Handler() fasthttp.RequestHandler { return s.handle }

// ServePublic lets GET and HEAD requests for the path p and the paths under
// it (p + "/…") through without the token — a path, not a string prefix:
// p + "X" needs the token. Use it only for static assets that hold no data.
func (s *Server) ServePublic(p string) { s.public = append(s.public, strings.TrimSuffix(p, "/")) }

// isPublic: path is a public path or lies under one.
func (s *Server) isPublic(path []byte) bool {
	for _, p := range s.public {
		if bytes.HasPrefix(path, []byte(p)) && (len(path) == len(p) || path[len(p)] == '/') {
			return true
		}
	}
	return false
}

func (s *Server) handle(ctx *fasthttp.RequestCtx) {
	if (ctx.IsGet() || ctx.IsHead()) && s.isPublic(ctx.Path()) {
		s.r.Handler(ctx)
		return
	}
	start := time.Now()
	allowed := s.authorized(ctx)
	if allowed {
		s.r.Handler(ctx)
	} else {
		ctx.Response.Header.Set("WWW-Authenticate", `Bearer realm="seckill-admin"`)
		writeErr(ctx, fasthttp.StatusUnauthorized, "UNAUTHORIZED", "missing or wrong admin token")
	}
	// The audit log: every call, allowed or not. Admin traffic is rare, so
	// an info line per call is affordable here (never on the public path).
	s.log.Info("admin call",
		zap.String("method", string(ctx.Method())), zap.String("path", string(ctx.Path())),
		zap.String("remote", ctx.RemoteIP().String()), zap.Bool("authorized", allowed),
		zap.Int("status", ctx.Response.StatusCode()), zap.Duration("took", time.Since(start)),
		zap.ByteString("body", truncate(ctx.PostBody(), 512)))
}

func (s *Server) authorized(ctx *fasthttp.RequestCtx) bool {
	if len(s.token) == 0 {
		return false
	}
	h := ctx.Request.Header.Peek(fasthttp.HeaderAuthorization)
	const p = "Bearer "
	if len(h) <= len(p) || string(h[:len(p)]) != p {
		return false
	}
	return subtle.ConstantTimeCompare(h[len(p):], s.token) == 1
}

func truncate(b []byte, n int) []byte {
	if len(b) > n {
		return b[:n]
	}
	return b
}

func writeJSON(ctx *fasthttp.RequestCtx, status int, v any) {
	b, err := json.Marshal(v)
	if err != nil {
		writeErr(ctx, fasthttp.StatusInternalServerError, "INTERNAL", err.Error())
		return
	}
	ctx.SetStatusCode(status)
	ctx.SetContentType("application/json")
	ctx.SetBody(b)
}

// Error is every error answer of the admin API: a status other than 2xx
// with {"code":…,"message":…}. Codes: BAD_REQUEST (400), UNAUTHORIZED
// (401), NOT_FOUND (404), BUSY (503: a dependency failed), UNAVAILABLE
// (503: the process lacks the dependency), INTERNAL (500).
type Error struct {
	Code    string `json:"code"`
	Message string `json:"message"`
}

func writeErr(ctx *fasthttp.RequestCtx, status int, code, msg string) {
	b, _ := json.Marshal(Error{Code: code, Message: msg})
	ctx.SetStatusCode(status)
	ctx.SetContentType("application/json")
	ctx.SetBody(b)
}

func pathInt(ctx *fasthttp.RequestCtx, name string) (int64, bool) {
	v, _ := ctx.UserValue(name).(string)
	n, err := strconv.ParseInt(v, 10, 64)
	if err != nil || n <= 0 {
		writeErr(ctx, fasthttp.StatusBadRequest, "BAD_REQUEST", name+" must be a positive integer")
		return 0, false
	}
	return n, true
}

func decode(ctx *fasthttp.RequestCtx, v any) bool {
	dec := json.NewDecoder(bytesReader(ctx.PostBody()))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		writeErr(ctx, fasthttp.StatusBadRequest, "BAD_REQUEST", "body: "+err.Error())
		return false
	}
	return true
}

func opCtx(_ *fasthttp.RequestCtx) (context.Context, context.CancelFunc) {
	return context.WithTimeout(context.Background(), 10*time.Second)
}

func (s *Server) fail(ctx *fasthttp.RequestCtx, err error) {
	switch {
	case errors.Is(err, stock.ErrUnknownSKU), errors.Is(err, store.ErrNotFound), errors.Is(err, results.ErrNotFound):
		writeErr(ctx, fasthttp.StatusNotFound, "NOT_FOUND", err.Error())
	case errors.Is(err, stock.ErrBucketsChanged):
		writeErr(ctx, fasthttp.StatusConflict, "CONFLICT", err.Error())
	default:
		writeErr(ctx, fasthttp.StatusServiceUnavailable, "BUSY", err.Error())
	}
}

// resolveSKU finds the activity of a SKU: the one named by ?activityId= or
// the body, else the SKU's current activity.
func (s *Server) resolveSKU(sku, activity int64) (*sale.Activity, error) {
	cat := s.d.Stock.Catalog()
	if activity > 0 {
		a, _, ok := cat.Lookup(activity, sku)
		if !ok {
			return nil, fmt.Errorf("activity %d does not sell sku %d: %w", activity, sku, stock.ErrUnknownSKU)
		}
		return a, nil
	}
	a, _, ok := cat.Current(sku, s.now())
	if !ok {
		return nil, fmt.Errorf("no activity sells sku %d: %w", sku, stock.ErrUnknownSKU)
	}
	return a, nil
}
