package edge

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"net"
	"sync"
	"sync/atomic"
	"time"

	"github.com/fasthttp/router"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/redis/rueidis"
	"github.com/valyala/fasthttp"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"

	"seckill/blocklist"
	"seckill/catalog"
	"seckill/engine"
	"seckill/internal/deadlines"
	"seckill/stock/results"
)

// Server is the public HTTP endpoint. Build it with New, run it with Serve
// or ListenAndServe, stop it with Shutdown. Safe for concurrent use.
//
// It wires the parts that each hold one concern: admission (admit.go: who
// may come in and how often), the catalog views (views.go: what a SKU
// resolves to), the sold-out flags (soldout.go), the answers (answers.go:
// what a buyer is told) and the qualification-token hooks (token.go); the
// routes (order.go, result.go, activity.go, token.go, health.go) use them,
// and the background work (events.go, poll.go) keeps them fresh.
type Server struct {
	cfg   Config
	eng   engine.Engine
	res   *results.Store
	rdb   rueidis.Client
	log   *zap.Logger
	warn  *rareWarner
	m     *metrics
	clock *serverClock

	out    answers
	admit  *admission
	views  *views
	flags  *soldOutFlags
	hold   holders
	tokens tokens
	risk   *riskCheck // nil without edge.risk.url (risk.go)
	// routeSw are on-call's switches of the non-core routes (degrade.go).
	routeSw *routeSwitches

	riskLog RiskLog // RISK_PASSED into tickets' histories (risk.go)

	decisions DecisionLog // refusals, TOKEN_VERIFIED, free-rejection counts (decisions.go)

	ready          []func(context.Context) error
	gather         prometheus.Gatherer
	mounts         []func(*router.Router)
	resultFallback ResultFallback // answers for results Redis lost (result.go)
	backlogCfg     *Backlog       // WithBacklog; nil: no backlog backpressure
	dbBound        *DBBound       // bounds resultFallback per user (dbbound.go); nil: none
	resultSettle   ResultSettle   // ends stale QUEUING results (result.go)
	line           *line          // queue mode (queue.go); nil: every SKU direct

	subscribed     atomic.Bool
	subscribedOnce atomic.Bool

	srv      *fasthttp.Server
	handler  fasthttp.RequestHandler
	draining atomic.Bool
	lnMu     sync.Mutex // orders Serve against Shutdown
	lns      []net.Listener
	bgCtx    context.Context // lives until Shutdown; engine calls run under it
	bgCancel context.CancelFunc
	fleet    *fleet // this edge's heartbeat in the live edge set
	wg       sync.WaitGroup

	evMu   sync.RWMutex // guards closed against HandleEvent
	closed bool
	once   sync.Once
	err    error
}

// Option is a test seam.
type Option func(*Server)

// WithClock makes now the server clock itself: windows are judged by it
// and no offset to Redis TIME is sampled. Tests use it to stand before,
// inside or after a sale's window.
func WithClock(now func() time.Time) Option {
	return func(s *Server) { s.clock.local, s.clock.source, s.clock.injected = now, nil, true }
}

// WithTimeSource replaces Redis TIME as the reference the local clock's
// offset is sampled from (tests simulate a skewed edge with it).
func WithTimeSource(src func(context.Context) (time.Time, error)) Option {
	return func(s *Server) { s.clock.source = src }
}

// WithReadiness adds a check /readyz runs after the default Redis PING.
func WithReadiness(check func(context.Context) error) Option {
	return func(s *Server) { s.ready = append(s.ready, check) }
}

// WithRoutes lets the process mount more public routes on the edge's
// router (e.g. POST /api/v1/flash-sale/orders/{orderNo}/pay from the order
// package). mount runs once, in New, after the edge's own routes; a route
// that clashes with one already there makes New fail. Mounted
// routes are served behind the address checks (IP blocklist, per-IP
// limit) and the router's panic handler; they do their own user checks
// and metrics.
func WithRoutes(mount func(r *router.Router)) Option {
	return func(s *Server) { s.mounts = append(s.mounts, mount) }
}

// WithGatherer serves /metrics from g. By default /metrics serves the
// registerer given to New when it is also a Gatherer (a
// *prometheus.Registry), and is absent otherwise.
func WithGatherer(g prometheus.Gatherer) Option {
	return func(s *Server) { s.gather = g }
}

// New builds the edge. rdb is the default Redis: events, server time and
// readiness. reg receives the metrics (nil: a private registry). New samples
// the server-time offset once and starts the background work (catalog
// refresh, events subscription, clock sync), which Shutdown stops.
func New(cfg Config, eng engine.Engine, cat *catalog.Catalog, res *results.Store, rdb rueidis.Client, log *zap.Logger, reg prometheus.Registerer, opts ...Option) (_ *Server, err error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if eng == nil || cat == nil || res == nil || rdb == nil || log == nil {
		return nil, errors.New("edge: engine, catalog, results, redis and logger are required")
	}
	if reg == nil {
		reg = prometheus.NewRegistry()
	}
	s := &Server{
		cfg: cfg, eng: eng, res: res, rdb: rdb, log: log, warn: &rareWarner{log: log},
		clock: &serverClock{local: time.Now, source: redisTime(rdb)},
		flags: &soldOutFlags{ttl: cfg.SoldOutTTL}, routeSw: newRouteSwitches(),
	}
	if g, ok := reg.(prometheus.Gatherer); ok {
		s.gather = g
	}
	for _, o := range opts {
		o(s)
	}
	if s.m, err = newMetrics(reg); err != nil {
		return nil, err
	}
	s.out = answers{rejections: &s.m.rejections}
	blockStore := blocklist.NewStore(rdb)
	blockUser := func(ctx context.Context, user int64) error { _, err := blockStore.AddUser(ctx, user); return err }
	if s.risk, err = newRiskCheck(cfg.Risk, s.out, s.m, s.warn, rdb, blockUser, log); err != nil {
		return nil, err
	}
	defer func() {
		if err != nil {
			s.risk.close()
		}
	}()
	s.bgCtx, s.bgCancel = context.WithCancel(context.Background())
	defer func() {
		if err != nil {
			s.bgCancel()
		}
	}()
	static, _ := blocklist.NewSet(cfg.Blocklist.IPs, cfg.Blocklist.Users) // Validate has parsed them
	block := newBlocklists(static, blockStore, s.m, s.warn)
	s.admit = newAdmission(&cfg, block, s.out, log)
	if s.backlogCfg != nil {
		s.admit.backlog = newBacklog(*s.backlogCfg, &s.admit.live, s.m, log, s.warn)
	}

	// fasthttp logs every broken client connection: at debug only, or a
	// flood of bad clients becomes a flood of log lines.
	httpLog, err := zap.NewStdLogAt(log.Named("fasthttp"), zapcore.DebugLevel)
	if err != nil {
		return nil, fmt.Errorf("edge fasthttp logger: %w", err)
	}
	if err = s.flags.open(); err != nil {
		return nil, err
	}
	s.hold.open(cfg.HoldersTTL, cfg.HoldersMax)
	tallies := newSKUTallies(s.m.skuPurchases, cat)
	tallies.sync() // the catalog's SKUs have their series from the start
	if s.views, err = newViews(cat, tallies, cfg.ViewTTL); err != nil {
		s.flags.close()
		return nil, err
	}
	if err = reg.Register(newSizes(s)); err != nil { // sizes.go
		s.flags.close()
		s.views.close()
		return nil, fmt.Errorf("edge metrics: %w", err)
	}
	if s.handler, err = s.routes(); err != nil {
		s.flags.close()
		s.views.close()
		return nil, err
	}
	s.srv = &fasthttp.Server{
		Handler:                      s.handler,
		ErrorHandler:                 s.out.httpError,
		Name:                         "seckill",
		NoDefaultServerHeader:        true,
		ReadTimeout:                  cfg.ReadTimeout,
		WriteTimeout:                 cfg.WriteTimeout,
		IdleTimeout:                  cfg.IdleTimeout,
		MaxRequestBodySize:           cfg.MaxBodyBytes,
		ReadBufferSize:               cfg.ReadBufferSize,
		Concurrency:                  cfg.MaxConns,
		MaxConnsPerIP:                cfg.MaxConnsPerIP,
		DisablePreParseMultipartForm: true,
		SecureErrorLogMessage:        true,
		CloseOnShutdown:              true,
		Logger:                       httpLog,
	}

	sctx, cancel := context.WithTimeout(s.bgCtx, cfg.RedisTimeout)
	if err := s.clock.sync(sctx); err != nil {
		log.Warn("edge clock sync failed at start; using the local clock", zap.Error(err))
	}
	cancel()
	// An edge that starts must not serve a blocked client for a refresh
	// interval: read the blocklist before the first request.
	sctx, cancel = context.WithTimeout(s.bgCtx, cfg.RedisTimeout)
	if err := block.load(sctx); err != nil {
		log.Warn("edge blocklist load failed at start; the configured entries apply, Redis' follow", zap.Error(err))
	}
	cancel()
	// Nor serve a route on-call closed.
	sctx, cancel = context.WithTimeout(s.bgCtx, cfg.RedisTimeout)
	if err := s.loadRoutes(sctx); err != nil {
		log.Warn("edge route switches load failed at start; every route open until Redis answers", zap.Error(err))
	}
	cancel()
	// Announce this edge before its first request, so it admits its share
	// of the gate from the start.
	s.fleet = &fleet{id: newEdgeID(), rdb: rdb, every: cfg.FleetHeartbeat, ttl: cfg.FleetTTL, timeout: cfg.RedisTimeout,
		onCount: s.admit.setLive, live: s.m.liveEdges, errs: s.m.heartbeats, log: log,
		maxEdges: cfg.FleetMaxEdges, over: s.m.fleetOver}
	s.fleet.start(s.bgCtx)
	if b := s.admit.backlog; b != nil {
		s.wg.Add(1)
		go func() { defer s.wg.Done(); b.run(s.bgCtx) }()
	}
	s.wg.Add(5)
	go s.subscribe(s.bgCtx)
	go s.poll(s.bgCtx, cfg.Degrade.RefreshInterval, s.routeSw.kick, false,
		"edge route switches load failed; keeping the last ones", "edge route switches load recovered", s.loadRoutes)
	go s.poll(s.bgCtx, cfg.RefreshInterval, s.views.kick, true,
		"edge catalog load failed; serving the last snapshot", "edge catalog load recovered", s.views.load)
	go s.poll(s.bgCtx, cfg.ClockSyncInterval, nil, false,
		"edge clock sync failed; keeping the last offset", "edge clock sync recovered", s.clock.sync)
	go s.poll(s.bgCtx, cfg.Blocklist.RefreshInterval, block.kick, false,
		"edge blocklist load failed; keeping the last one", "edge blocklist load recovered", block.load)
	if s.line != nil {
		s.wg.Add(1)
		go s.poll(s.bgCtx, queueProgressEvery, nil, true,
			"edge queue progress load failed; keeping the last positions", "edge queue progress load recovered",
			func(ctx context.Context) error { return s.line.load(ctx, s) })
	}
	if s.risk != nil {
		s.wg.Add(1)
		go s.risk.recheckLoop(s.bgCtx, cfg.RedisTimeout, s.wg.Done)
	}
	if s.decisions != nil {
		s.wg.Add(1)
		go s.flushLoop(s.bgCtx)
	}
	if s.hold.slots != nil {
		s.wg.Add(1)
		go func() {
			defer s.wg.Done()
			t := time.NewTicker(holdersSweepEvery)
			defer t.Stop()
			for {
				select {
				case <-s.bgCtx.Done():
					return
				case <-t.C:
					s.hold.sweep(s.clock.now())
				}
			}
		}()
	}
	if s.flags.check != nil {
		s.wg.Add(1)
		go func() {
			defer s.wg.Done()
			current := func(sku int64) (int64, bool) { return s.views.current(sku, s.clock.now()) }
			s.flags.recheck(s.bgCtx, cfg.RedisTimeout, current, log)
		}()
	}
	return s, nil
}

// Handler returns the request handler (every route), for tests and for
// callers that run their own fasthttp.Server.
func (s *Server) Handler() fasthttp.RequestHandler { return s.handler }

// Serve answers requests on ln until Shutdown, then returns nil. After
// Shutdown it returns ErrClosed at once.
func (s *Server) Serve(ln net.Listener) error {
	s.lnMu.Lock()
	if s.draining.Load() {
		s.lnMu.Unlock()
		return ErrClosed
	}
	// fasthttp moves each connection's idle, read and write deadlines for
	// every request; swept deadlines make that an atomic store each
	// (internal/deadlines), firing up to a twentieth of the shortest
	// timeout late (at most 100 ms).
	ln = deadlines.Wrap(ln, sweepTick(s.cfg))
	s.lns = append(s.lns, ln)
	s.lnMu.Unlock()
	return s.srv.Serve(ln)
}

// sweepTick is how often the public listener's deadlines are looked at.
func sweepTick(cfg Config) time.Duration {
	d := min(cfg.ReadTimeout, cfg.WriteTimeout, cfg.IdleTimeout) / 20
	return min(max(d, time.Millisecond), 100*time.Millisecond)
}

// ListenAndServe answers requests on cfg.Listen until Shutdown.
func (s *Server) ListenAndServe() error {
	ln, err := net.Listen("tcp", s.cfg.Listen)
	if err != nil {
		return fmt.Errorf("edge listen %s: %w", s.cfg.Listen, err)
	}
	return s.Serve(ln)
}

// Shutdown stops accepting, lets in-flight requests finish within ctx
// (readyz answers 503 meanwhile), then stops the background work. Calling
// it again returns the first result.
func (s *Server) Shutdown(ctx context.Context) error {
	s.once.Do(func() {
		s.lnMu.Lock()
		s.draining.Store(true)
		s.lnMu.Unlock()
		// Leave the live edges first: the others take this edge's share
		// of the gate at their next heartbeat, while it drains.
		s.fleet.leave(ctx)
		err := s.srv.ShutdownWithContext(ctx)
		// fasthttp closes only the listeners its Serve has registered; one
		// handed to our Serve a moment ago may not be yet, and must not
		// start serving now.
		for _, ln := range s.lns {
			_ = ln.Close()
		}
		s.bgCancel()
		s.wg.Wait()
		if err != nil {
			// Handlers may still be running: leave the caches open (a
			// ristretto Set on a closed cache panics) to the collector.
			s.err = fmt.Errorf("edge shutdown: %w", err)
			return
		}
		s.evMu.Lock()
		s.closed = true
		s.flags.close()
		s.views.close()
		s.risk.close()
		s.evMu.Unlock()
	})
	return s.err
}

// routes builds the router (DESIGN §4) and puts the address checks in
// front of it.
func (s *Server) routes() (_ fasthttp.RequestHandler, err error) {
	r := router.New()
	r.RedirectTrailingSlash = false
	r.RedirectFixedPath = false
	r.HandleOPTIONS = false
	r.NotFound = s.instrument(routeNone, func(ctx *fasthttp.RequestCtx) { s.out.write(ctx, ansNotFoundRoute) })
	r.MethodNotAllowed = s.instrument(routeNone, func(ctx *fasthttp.RequestCtx) { s.out.write(ctx, ansMethod) })

	r.POST("/api/v1/flash-sale/order", s.instrument(routeOrder, s.order))
	r.POST("/api/seckill/submit", s.instrument(routeSubmit, s.order))
	r.GET("/api/v1/flash-sale/result/{requestNo}", s.instrument(routeResult, s.result))
	r.GET("/api/seckill/result/{requestNo}", s.instrument(routeResult, s.result))
	r.GET("/api/v1/flash-sale/activities/{id}", s.instrument(routeActivity, s.activity))
	r.POST("/api/v1/flash-sale/token", s.instrument(routeToken, s.issueToken))
	r.GET("/healthz", s.instrument(routeHealthz, s.healthz))
	if s.cfg.PublicOps {
		r.GET("/readyz", s.instrument(routeReadyz, s.readyz))
		if s.gather != nil {
			r.GET("/metrics", s.instrument(routeMetrics, s.metricsHandler()))
		}
	}
	defer func() {
		// The router panics on a route that clashes with one it has.
		if v := recover(); v != nil {
			err = fmt.Errorf("edge: mounting routes: %v", v)
		}
	}()
	for _, mount := range s.mounts {
		mount(r)
	}
	return func(ctx *fasthttp.RequestCtx) {
		// One recovery for everything a request runs, the address checks
		// before routing included: a panic is a 500 and a log line, and the
		// process (and the connection) go on.
		defer func() {
			if v := recover(); v != nil {
				s.log.Error("edge handler panic", zap.Any("panic", v), zap.ByteString("method", ctx.Method()),
					zap.ByteString("path", ctx.Path()), zap.Stack("stack"))
				ctx.Response.Reset()
				s.out.write(ctx, ansInternal)
			}
		}()
		// Timed from the request's arrival (RequestCtx.Time, read by
		// fasthttp already): no clock read of our own before the answer.
		if !s.opsPath(ctx.Path()) && !s.admit.addr(ctx) {
			s.m.observe(routeGuard, ctx.Response.StatusCode(), time.Since(ctx.Time()))
			return
		}
		r.Handler(ctx)
	}, nil
}

// instrument counts and times every answer of a route, and writes the
// sampled access log: one request in edge.access_log_every gets an info
// line (never every request: at tens of thousands per second a log line
// each would cost more than the answer). The time is from the request's
// arrival (RequestCtx.Time): the address checks and routing count in it,
// and it costs one clock read, at the end.
func (s *Server) instrument(route int, h fasthttp.RequestHandler) fasthttp.RequestHandler {
	return func(ctx *fasthttp.RequestCtx) {
		h(ctx)
		took := time.Since(ctx.Time())
		s.m.observe(route, ctx.Response.StatusCode(), took)
		if n := s.cfg.AccessLogEvery; n > 0 && rand.Uint32N(uint32(n)) == 0 {
			s.log.Info("access (sampled)", zap.ByteString("method", ctx.Method()), zap.ByteString("path", ctx.Path()),
				zap.Int("status", ctx.Response.StatusCode()), zap.Duration("took", took),
				zap.ByteString("userId", ctx.Request.Header.Peek("X-User-Id")), zap.String("remote", ctx.RemoteIP().String()),
				zap.ByteString("answer", ctx.Response.Body()))
		}
	}
}
