// Package app assembles the parts of a seckill process from the
// configuration: Redis shards, catalog, results, orders store, stock engine
// (in-process or a sidecar client), consumer, edge and admin listener. The
// cmd/seckill subcommands and the end-to-end tests build processes through
// it, so what the tests run is what ships.
package app

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"sync"
	"time"

	"github.com/fasthttp/router"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"github.com/redis/rueidis"
	"go.uber.org/zap"

	"seckill/admin"
	"seckill/blocklist"
	"seckill/catalog"
	"seckill/cmd/seckill/config"
	"seckill/consumer"
	"seckill/edge"
	"seckill/engine"
	"seckill/internal/lag"
	"seckill/internal/obs"
	"seckill/internal/shard"
	"seckill/internal/token"
	"seckill/monitor"
	"seckill/payment"
	"seckill/routeswitch"
	"seckill/sale"
	"seckill/stock"
	"seckill/stock/results"
	"seckill/store"
	"seckill/web"
)

// Roles selects the parts a process runs.
type Roles struct {
	Edge     bool // public listener (+ admin listener)
	Engine   bool // in-process engine (edge without cfg.Edge.Engine) or sidecar server
	Consumer bool
}

// System is one process's parts. Fields are nil for parts it does not run.
type System struct {
	Cfg      config.Config
	Log      *zap.Logger
	Reg      *prometheus.Registry
	Shards   *shard.Set
	Catalog  *catalog.Catalog
	Results  *results.Store
	Store    store.Store
	Stock    *stock.Stock
	Local    *engine.Local // the in-process engine
	Engine   engine.Engine // what the edge calls: Local or a sidecar client
	Consumer *consumer.Consumer
	Edge     *edge.Server
	Admin    *admin.Server
	Sidecar  *engine.Server
	// Line and Drainer are queue mode's (queue.go): nil when off.
	Line    *engine.Line
	Drainer *engine.Drainer
	Lag     *lag.Reader
	Tokens  *token.Tokens
	Monitor *monitor.Monitor
	// Payments starts and confirms payments (nil without a store); the
	// edge mounts payment.Handler on payment.PayPath (the buyer's intent)
	// and payment.CallbackHandler on payment.CallbackPath (the provider's
	// signed callback, the one way to PAID).
	Payments *payment.Service
	// Streams serves the result streams of the edge; StreamHub is its one
	// subscription to pushed results.
	Streams   *web.ResultEvents
	dbBound   *edge.DBBound // nil without an edge or with edge.db_reads_per_user 0
	StreamHub *web.ResultHub
	jobs      *jobs // bookkeeping jobs (jobs.go)
	// backlogLag is the edge's backlog backpressure's own lag reader
	// (consumer.lag_high), nil when off.
	backlogLag *lazyLag

	edgeHook func(sale.Event)
	hookMu   sync.RWMutex
	cancel   context.CancelFunc
	wg       sync.WaitGroup
	errs     chan error
}

// Option adjusts the parts (test seams).
type Option func(*options)

type options struct {
	engineOpts []engine.Option
	storeOpts  []store.Option
	edgeOpts   []edge.Option
}

// WithEngineOptions passes options to the in-process engine.
func WithEngineOptions(o ...engine.Option) Option {
	return func(x *options) { x.engineOpts = append(x.engineOpts, o...) }
}

// WithStoreOptions passes options to the store.
func WithStoreOptions(o ...store.Option) Option {
	return func(x *options) { x.storeOpts = append(x.storeOpts, o...) }
}

// WithEdgeOptions passes options to the edge.
func WithEdgeOptions(o ...edge.Option) Option {
	return func(x *options) { x.edgeOpts = append(x.edgeOpts, o...) }
}

// New builds the parts of roles. On error everything opened is closed.
func New(cfg config.Config, log *zap.Logger, roles Roles, opts ...Option) (_ *System, err error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	// The engine signs order messages and the consumer verifies them
	// (order_signing): a process of either role without a key refuses to
	// start, before it dials anything, naming the setting.
	if roles.Engine && (!roles.Edge || cfg.Edge.Engine == "") || roles.Consumer {
		if err := cfg.OrderSigning.Required(); err != nil {
			return nil, err
		}
	}
	cfg.Engine.Signing, cfg.Consumer.Signing = cfg.OrderSigning, cfg.OrderSigning
	// The user × SKU window is edge.rate's setting, counted by the engine's
	// occupy script (in-process, or `seckill engine` reading the same file).
	cfg.Engine.Window = engine.Window{Limit: cfg.Edge.Rate.UserSKULimit, Period: cfg.Edge.Rate.UserSKUWindow}
	var o options
	for _, f := range opts {
		f(&o)
	}
	s := &System{Cfg: cfg, Log: log, Reg: obs.NewRegistry(), errs: make(chan error, 8)}
	defer func() {
		if err != nil {
			if s.jobs != nil {
				s.jobs.stop() // its request-log writer runs from New on
			}
			s.closeQueue()
			if s.Local != nil {
				s.Local.Close()
			}
			if s.Consumer != nil {
				s.Consumer.Close()
			}
			s.close()
		}
	}()
	if s.Shards, err = shard.Open(cfg.Redis); err != nil {
		return nil, err
	}
	s.Catalog = catalog.New(s.Shards.Default)
	// The store serves the consumer, the admin API and Preheat's rebuild of
	// stock from orders; a pure engine sidecar does without it.
	if roles.Consumer || roles.Edge || roles.Engine && cfg.Edge.Engine == "" {
		if s.Store, err = store.Open(cfg.Store, o.storeOpts...); err != nil {
			return nil, err
		}
	}
	// Every release counts a given-back ticket's attempt in the user × SKU
	// window (the consumer's and the sweeper's too); the engine sets the
	// same window again, and SIGHUP through it.
	stockOpts := []stock.Option{stock.WithEventHook(s.forwardEvent),
		stock.WithWindow(cfg.Engine.Window.Limit, cfg.Engine.Window.Period)}
	if s.Store != nil {
		st := s.Store
		stockOpts = append(stockOpts, stock.WithOrdered(func(ctx context.Context, a, k int64) (int64, error) {
			_, units, err := st.CountOrders(ctx, a, k)
			return units, err
		}))
	}
	s.Stock = stock.New(s.Shards, s.Catalog, stockOpts...)
	// A ticket's result lives on its SKU's shard (its requestNo names the
	// SKU); the final results' PUBLISH goes to the default Redis.
	s.Results = results.New(s.Shards.Default, s.Stock.BucketClient, cfg.Engine.ResultTTL)
	s.jobs = newJobs(s, roles, &o)
	ctx, cancel := context.WithTimeout(context.Background(), cfg.Redis.Timeout)
	lerr := s.Catalog.Load(ctx)
	cancel()
	if lerr != nil {
		log.Warn("catalog not loaded at start; the edge retries", zap.Error(lerr))
	}
	if s.Store != nil {
		// Activities Redis lost (a restart without persistence before this
		// process started) are known from the database all the same: their
		// buyers get "busy" until the watcher rebuilds them, not "unknown".
		ctx, cancel := context.WithTimeout(context.Background(), cfg.Store.BusyTimeout+cfg.Redis.Timeout)
		acts, err := s.Store.Activities(ctx)
		cancel()
		if err != nil {
			log.Warn("activities not read from the database at start", zap.Error(err))
		} else {
			s.Catalog.Remember(acts)
		}
	}

	inProcess := roles.Engine && (!roles.Edge || cfg.Edge.Engine == "")
	if inProcess {
		if s.Local, err = engine.New(cfg.Engine, s.Stock, s.Results, log.Named("engine"), s.Reg, o.engineOpts...); err != nil {
			return nil, err
		}
		s.Engine = s.Local
		if err = s.buildDrainer(log); err != nil {
			return nil, err
		}
		if !roles.Edge {
			if s.Sidecar, err = engine.NewServer(s.Local, s.Catalog, cfg.Engine, log.Named("sidecar")); err != nil {
				return nil, err
			}
		}
	}
	if roles.Edge && cfg.Edge.Engine != "" {
		cc, err := sidecarClientConfig(cfg)
		if err != nil {
			return nil, err
		}
		s.Engine = engine.NewClient(cfg.Edge.Engine, cc)
	}
	if roles.Consumer {
		if s.Consumer, err = consumer.New(cfg.Consumer, s.Store, s.Stock, s.Results, log.Named("consumer"), s.Reg); err != nil {
			return nil, err
		}
	}
	if roles.Edge {
		if s.Tokens, err = token.New(cfg.Token, s.Shards.Default); err != nil {
			return nil, err
		}
		eopts := []edge.Option{
			edge.WithGatherer(s.Reg),
			edge.WithReadiness(s.ready),
			edge.WithTokenVerifier(tokenVerifier{s.Tokens}),
		}
		if s.Tokens.CanIssue() {
			eopts = append(eopts, edge.WithTokenIssuer(s.Tokens))
		}
		if s.jobs.reqlog != nil {
			eopts = append(eopts, edge.WithRiskLog(s.jobs.reqlog), edge.WithDecisionLog(s.jobs.reqlog))
		}
		// One bound on the database reads a user's ids cause, shared by
		// the result route, the result stream and pay.
		if s.dbBound, err = edge.NewDBBound(&cfg.Edge); err != nil {
			return nil, err
		}
		eopts = append(eopts, edge.WithDBBound(s.dbBound))
		var fallback func(context.Context, int64, string) (results.Entry, error)
		if s.Store != nil {
			f := resultFromStore(s.Store)
			eopts = append(eopts, edge.WithResultFallback(f))
			fallback = s.dbBound.Fallback(f)
			if s.jobs.recon != nil {
				eopts = append(eopts, edge.WithResultSettle(s.jobs.recon.Settle))
			}
		}
		res, pay, stock, st, payTimeout := s.Results, s.Payments, s.Stock, s.Store, cfg.Order.PayTimeout
		eopts = append(eopts, edge.WithStockCheck(func(ctx context.Context, a, k int64) (bool, error) {
			n, err := stock.Counts(ctx, a, k)
			if err != nil || n.Remaining <= 0 {
				return err == nil, err
			}
			return stock.SoldOutMarked(ctx, a, k)
		}))
		// The routes mounted on the edge run the edge's identity check.
		ident, err := cfg.Edge.NewIdentity()
		if err != nil {
			return nil, err
		}
		s.StreamHub = web.NewResultHub(s.Shards.Default, log.Named("streams"))
		s.Streams = web.NewResultEvents(res, s.StreamHub, cfg.Edge.ResultStream, fallback)
		s.Streams.Identity = ident
		s.Streams.Log = log.Named("streams")
		streams, dbBound := s.Streams, s.dbBound
		s.Reg.MustRegister(prometheus.NewCounterFunc(prometheus.CounterOpts{Name: "seckill_result_stream_panics_total",
			Help: "Result streams whose writer panicked and was closed (the process lives)."},
			func() float64 { return float64(streams.Panics()) }))
		eopts = append(eopts, edge.WithGuardedRoutes(func(r *router.Router, guard edge.RouteGuard) {
			mountBuyerPages(r, guard, streams, st, payTimeout, ident)
			if pay != nil {
				r.POST(payment.PayPath, guard(routeswitch.Pay, dbBound.Guard(ident, payment.Handler(pay, 0))))
				// The provider's callback proves itself by its signature.
				r.POST(payment.CallbackPath, payment.CallbackHandler(pay, 0))
			}
		}))
		if c := cfg.Consumer; c.LagHigh > 0 {
			s.backlogLag = &lazyLag{brokers: c.Brokers, group: c.Group, topic: c.Topic}
			eopts = append(eopts, edge.WithBacklog(edge.Backlog{High: c.LagHigh, Low: c.LagLow, Every: c.LagInterval, Read: s.backlogLag.Sum}))
		}
		qopts, err := s.buildLine(log)
		if err != nil {
			return nil, err
		}
		eopts = append(eopts, qopts...)
		eopts = append(eopts, o.edgeOpts...)
		if s.Edge, err = edge.New(cfg.Edge, s.Engine, s.Catalog, s.Results, s.Shards.Default, log.Named("edge"), s.Reg, eopts...); err != nil {
			return nil, err
		}
		s.Streams.Position = s.Edge.WaitPosition
		s.hookMu.Lock()
		s.edgeHook = s.Edge.HandleEvent
		s.hookMu.Unlock()
		if l, lerr := lag.New(cfg.Consumer.Brokers, cfg.Consumer.Group, cfg.Consumer.Topic); lerr == nil {
			s.Lag = l
		} else {
			log.Warn("no consumer lag reader", zap.Error(lerr))
		}
		s.Monitor = monitor.New(s.Stock, s.Store, s.Lag, cfg.Metrics.SampleInterval, log.Named("monitor"), s.Reg, s.dependencies()...)
		s.Admin = admin.New(cfg.Admin.Token, admin.Deps{Stock: s.Stock, Store: s.Store, Results: s.Results, Lag: s.Lag, Reconcile: s.jobs.reconciler(),
			Blocklist: blocklist.NewStore(s.Shards.Default), BlocklistConfig: admin.BlocklistConfig{IPs: cfg.Edge.Blocklist.IPs, Users: cfg.Edge.Blocklist.Users}},
			log.Named("admin"))
		mountPages(s.Admin, s.Reg)
		// The edge's /readyz (naming what is not ready) and /metrics on the
		// admin listener: production keeps them off the public one
		// (edge.public_ops). /readyz is public there for the probes;
		// /metrics needs the token like every admin route.
		s.Edge.MountOps(s.Admin.Router())
		s.Admin.ServePublic("/readyz")
	}
	return s, nil
}

// forwardEvent hands the engine's events to the in-process edge at once.
func (s *System) forwardEvent(e sale.Event) {
	s.hookMu.RLock()
	h, m := s.edgeHook, s.Monitor
	s.hookMu.RUnlock()
	if h != nil {
		h(e)
	}
	if m != nil {
		m.HandleEvent(e)
	}
	if d := s.Drainer; d != nil {
		d.HandleEvent(e)
	}
	if e.Kind == sale.EventActivity && s.jobs != nil && s.jobs.recon != nil {
		if a, ok := s.Catalog.Activity(e.Activity); ok {
			s.jobs.recon.KnowActivity(a)
		}
	}
}

// ready is the edge's readiness beyond its own Redis check: every
// dependency (in sidecar mode nothing more: the circuit breaker answers for
// the engine).
func (s *System) ready(ctx context.Context) error {
	for _, d := range s.dependencies() {
		if err := d.Ping(ctx); err != nil {
			return &edge.NotReady{Check: d.Name, Err: err}
		}
	}
	return nil
}

// dependencies are the Redis deployments and the store: what readiness
// checks and what the monitor reports as seckill_dependency_up{dep}.
func (s *System) dependencies() []monitor.Dependency {
	ping := func(c rueidis.Client) func(context.Context) error {
		return func(ctx context.Context) error { return c.Do(ctx, c.B().Ping().Build()).Error() }
	}
	deps := []monitor.Dependency{{Name: "redis.default", Ping: ping(s.Shards.Default)}}
	for i := range s.Shards.HotCount() {
		if s.Shards.Apart(i) {
			deps = append(deps, monitor.Dependency{Name: "redis." + shard.HotName(i), Ping: ping(s.Shards.Client(i))})
		}
	}
	if s.Store != nil {
		deps = append(deps, monitor.Dependency{Name: "store", Ping: s.Store.Ping})
	}
	return deps
}

// Preheat writes an activity to the database (activity, items, snapshot)
// and then into Redis.
func (s *System) Preheat(ctx context.Context, a sale.Activity) error {
	if err := a.Validate(); err != nil {
		return err
	}
	if s.Store != nil {
		if err := s.Store.PutActivity(ctx, a); err != nil {
			return err
		}
	}
	return s.Stock.Preheat(ctx, a)
}

// Listeners are where Start serves; nil skips that listener.
type Listeners struct {
	Edge    net.Listener
	Admin   net.Listener
	Sidecar net.Listener
	// Metrics serves /metrics for processes without an edge (the consumer,
	// the engine sidecar); the edge serves /metrics itself.
	Metrics net.Listener
}

// Start runs the parts in the background. Errors of a part that stops on
// its own arrive on Errors.
func (s *System) Start(l Listeners) {
	ctx, cancel := context.WithCancel(context.Background())
	s.cancel = cancel
	run := func(name string, f func() error) {
		s.wg.Add(1)
		go func() {
			defer s.wg.Done()
			if err := f(); err != nil && ctx.Err() == nil {
				select {
				case s.errs <- fmt.Errorf("%s: %w", name, err):
				default:
				}
			}
		}()
	}
	if s.Consumer != nil {
		run("consumer", func() error { return s.Consumer.Run(ctx) })
	}
	if s.Edge != nil && l.Edge != nil {
		run("edge", func() error { return s.Edge.Serve(l.Edge) })
	}
	if s.StreamHub != nil {
		run("result streams", func() error { s.StreamHub.Run(ctx); return nil })
	}
	if s.Admin != nil && l.Admin != nil {
		run("admin", func() error { return s.Admin.Serve(l.Admin) })
	}
	if d := s.Drainer; d != nil {
		run("drainer", func() error { return d.Run(ctx) })
		if q := s.Cfg.Engine.Queue; q.AutoLatency > 0 {
			run("auto queue", func() error { s.Local.AutoQueue(ctx, q, s.Log.Named("autoqueue")); return nil })
		}
	}
	if s.Sidecar != nil && l.Sidecar != nil {
		run("engine sidecar", func() error { return s.Sidecar.Serve(l.Sidecar) })
	}
	if s.Monitor != nil {
		run("monitor", func() error { s.Monitor.Run(ctx); return nil })
	}
	if s.Edge == nil {
		// The edge refreshes the shared catalog; a process without one (the
		// engine sidecar, the consumer) keeps its own copy fresh, so an
		// activity created after it started sells at once.
		run("catalog refresh", func() error { s.refreshCatalog(ctx); return nil })
	}
	if l.Metrics != nil {
		srv := &http.Server{Handler: s.metricsMux(), ReadHeaderTimeout: 5 * time.Second}
		run("metrics", func() error {
			if err := srv.Serve(l.Metrics); !errors.Is(err, http.ErrServerClosed) {
				return err
			}
			return nil
		})
		go func() { <-ctx.Done(); _ = srv.Close() }()
	}
	s.jobs.start()
}

// metricsMux is the metrics listener of a process without an edge:
// /metrics (and any other path, as before), plus /healthz (200 while it
// serves) and /readyz (Redis and the store answer), the probes the
// start-up probe answered while the process waited for its servers.
func (s *System) metricsMux() http.Handler {
	mux := http.NewServeMux()
	mux.Handle("/", promhttp.HandlerFor(s.Reg, promhttp.HandlerOpts{}))
	mux.HandleFunc("/healthz", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte(`{"code":"OK","message":"alive"}`))
	})
	mux.HandleFunc("/readyz", func(w http.ResponseWriter, r *http.Request) {
		ctx, cancel := context.WithTimeout(r.Context(), s.Cfg.Redis.Timeout)
		defer cancel()
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set("Cache-Control", "no-store")
		if err := s.ready(ctx); err != nil {
			s.Log.Warn("not ready", zap.String("check", edge.ReadyCheck(err)), zap.Error(err))
			w.WriteHeader(http.StatusServiceUnavailable)
			b, _ := json.Marshal(map[string]string{"code": "NOT_READY", "message": edge.NotReadyMessage(err)})
			_, _ = w.Write(b)
			return
		}
		_, _ = w.Write([]byte(`{"code":"OK","message":"ready"}`))
	})
	return mux
}

// refreshCatalog reloads the catalog every edge.refresh_interval until ctx
// ends.
func (s *System) refreshCatalog(ctx context.Context) {
	t := time.NewTicker(s.Cfg.Edge.RefreshInterval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		lctx, cancel := context.WithTimeout(ctx, s.Cfg.Redis.Timeout)
		if err := s.Catalog.Load(lctx); err != nil && ctx.Err() == nil {
			s.Log.Debug("catalog refresh failed; retried next period", zap.Error(err))
		}
		cancel()
	}
}

// Errors reports parts that stopped on their own.
func (s *System) Errors() <-chan error { return s.errs }

// Shutdown stops in order: the edge stops taking requests, the engine
// flushes its producer (every accepted ticket is in Kafka or released), the
// consumer drains what is queued into orders (bounded by ctx), then every
// connection closes.
func (s *System) Shutdown(ctx context.Context) error {
	var errs []error
	if s.Streams != nil {
		s.Streams.Close() // open streams end now, not after their max_wait
	}
	if s.Edge != nil {
		errs = append(errs, s.Edge.Shutdown(ctx))
	}
	if s.Admin != nil {
		errs = append(errs, s.Admin.Shutdown(ctx))
	}
	if s.Sidecar != nil {
		errs = append(errs, s.Sidecar.Shutdown(ctx))
	}
	errs = append(errs, s.closeQueue()...)
	if s.Local != nil {
		errs = append(errs, s.Local.Close())
	}
	if s.Consumer != nil && s.Local != nil {
		// In-flight tickets become orders before we go.
		if err := s.drain(ctx); err != nil {
			s.Log.Warn("shutdown: consumer did not drain", zap.Error(err))
			errs = append(errs, err)
		}
	}
	if s.cancel != nil {
		s.cancel()
	}
	if s.Consumer != nil {
		errs = append(errs, s.Consumer.Close())
	}
	s.wg.Wait()
	s.jobs.stop()
	s.close()
	return errors.Join(errs...)
}

func (s *System) drain(ctx context.Context) error {
	l := s.Lag
	if l == nil {
		var err error
		if l, err = lag.New(s.Cfg.Consumer.Brokers, s.Cfg.Consumer.Group, s.Cfg.Consumer.Topic); err != nil {
			return err
		}
		defer l.Close()
	}
	return l.WaitZero(ctx, 50*time.Millisecond)
}

func (s *System) close() {
	if s.backlogLag != nil {
		s.backlogLag.close()
	}
	s.dbBound.Close()
	if s.Lag != nil {
		s.Lag.Close()
	}
	if s.Store != nil {
		s.Store.Close()
	}
	if s.Shards != nil {
		s.Shards.Close()
	}
}

// sidecarClientConfig is the edge's side of the sidecar's trust: the
// secret (edge.engine_secret, else engine.sidecar_secret) and, with
// engine.sidecar_tls_ca, TLS verified against that CA, presenting
// edge.engine_tls_cert when set.
func sidecarClientConfig(cfg config.Config) (engine.ClientConfig, error) {
	cc := engine.ClientConfig{Secret: cfg.Edge.EngineSecret}
	if cc.Secret == "" {
		cc.Secret = cfg.Engine.SidecarSecret
	}
	var err error
	cc.TLS, err = engine.ClientTLS(cfg.Engine.SidecarTLSCA, cfg.Edge.EngineTLSCert, cfg.Edge.EngineTLSKey)
	return cc, err
}
