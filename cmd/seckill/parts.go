package main

import (
	"fmt"
	"net"
	"time"

	"seckill/cmd/seckill/app"
	"seckill/cmd/seckill/config"
	"seckill/engine"
)

// runEdge is `seckill edge`: the public endpoint and the admin listener,
// with the engine in-process (default) or a sidecar (--engine).
func runEdge(args []string) error {
	fs, path := newFlags("edge")
	listenAddr := fs.String("listen", "", "public listener (edge.listen)")
	adminAddr := fs.String("admin-listen", "", "admin listener (admin.listen)")
	eng := fs.String("engine", "", "sidecar engine address, unix:///path.sock or tcp://host:port (edge.engine)")
	cfg, log, err := parseAndLoad(fs, path, args, config.Load)
	if err != nil {
		return err
	}
	defer log.Sync()
	override(&cfg.Edge.Listen, *listenAddr)
	override(&cfg.Admin.Listen, *adminAddr)
	override(&cfg.Edge.Engine, *eng)
	if err := cfg.Validate(); err != nil {
		return err
	}
	// Before any listener opens or connection is dialled.
	if err := cfg.CheckSecrets(true); err != nil {
		return err
	}
	if err := cfg.CheckStoreSecret(); err != nil {
		return err
	}
	if err := cfg.Redis.CheckAuth(); err != nil {
		return err
	}
	if err := cfg.Edge.CheckIdentity(); err != nil {
		return err
	}
	// The listeners open first: while the process waits for its servers
	// they answer /healthz (alive) and /readyz (not yet).
	var l app.Listeners
	if l.Edge, err = listen(cfg.Edge.Listen); err != nil {
		return err
	}
	if l.Admin, err = listen(cfg.Admin.Listen); err != nil {
		l.Edge.Close()
		return err
	}
	roles := app.Roles{Edge: true, Engine: cfg.Edge.Engine == ""}
	up := announce(log, partsLine("edge", cfg, roles, named("public", addrOf(l.Edge), "admin", addrOf(l.Admin))))
	start := startProbe(l.Edge, l.Admin)
	defer start.handover()
	if ok, err := start.wait(cfg, log, dependencies(cfg, roles)); !ok {
		closeListeners(l)
		return err
	}
	sys, err := app.New(cfg, log, roles)
	if err != nil {
		start.handover()
		closeListeners(l)
		return err
	}
	start.handover()
	return serveUntilSignal(sys, l, 30*time.Second, rateReloader(sys, config.Load, *path), up)
}

// runEngine is `seckill engine`: the stock engine as a sidecar.
func runEngine(args []string) error {
	fs, path := newFlags("engine")
	listenAddr := fs.String("listen", "", "unix:///path.sock or tcp://host:port (engine.listen)")
	cfg, log, err := parseAndLoad(fs, path, args, config.Load)
	if err != nil {
		return err
	}
	defer log.Sync()
	override(&cfg.Engine.Listen, *listenAddr)
	if cfg.Engine.Listen == "" {
		return fmt.Errorf("engine.listen (or --listen) is required")
	}
	if err := cfg.Validate(); err != nil {
		return err
	}
	if err := cfg.CheckSecrets(false); err != nil {
		return err
	}
	if err := cfg.Redis.CheckAuth(); err != nil {
		return err
	}
	// The metrics listener answers /healthz and /readyz from the start; the
	// sidecar socket opens only once the engine can serve, so an edge's
	// calls meanwhile fail at once (its breaker answers busy) instead of
	// waiting in the socket's backlog.
	roles := app.Roles{Engine: true}
	metrics, err := metricsListener(cfg.Metrics.Listen)
	if err != nil {
		return err
	}
	up := announce(log, partsLine("engine", cfg, roles, named("sidecar", cfg.Engine.Listen, "metrics", addrOf(metrics))))
	start := startProbe(metrics)
	defer start.handover()
	if ok, err := start.wait(cfg, log, dependencies(cfg, roles)); !ok {
		closeListeners(app.Listeners{Metrics: metrics})
		return err
	}
	sys, err := app.New(cfg, log, roles)
	if err != nil {
		start.handover()
		closeListeners(app.Listeners{Metrics: metrics})
		return err
	}
	start.handover()
	return startServing(sys, func() (l app.Listeners, err error) {
		l.Metrics = metrics
		if l.Sidecar, err = engine.Listen(cfg.Engine.Listen); err != nil {
			closeListeners(l)
		}
		return l, err
	}, nil, up)
}

// runConsumer is `seckill consumer`.
func runConsumer(args []string) error {
	fs, path := newFlags("consumer")
	cfg, log, err := parseAndLoad(fs, path, args, config.Load)
	if err != nil {
		return err
	}
	defer log.Sync()
	if err := cfg.Validate(); err != nil {
		return err
	}
	if err := cfg.CheckSecrets(false); err != nil {
		return err
	}
	if err := cfg.CheckStoreSecret(); err != nil {
		return err
	}
	if err := cfg.Redis.CheckAuth(); err != nil {
		return err
	}
	roles := app.Roles{Consumer: true}
	l := app.Listeners{}
	if l.Metrics, err = metricsListener(cfg.Metrics.Listen); err != nil {
		return err
	}
	up := announce(log, partsLine("consumer", cfg, roles, named("metrics", addrOf(l.Metrics))))
	start := startProbe(l.Metrics)
	defer start.handover()
	if ok, err := start.wait(cfg, log, dependencies(cfg, roles)); !ok {
		closeListeners(l)
		return err
	}
	sys, err := app.New(cfg, log, roles)
	if err != nil {
		start.handover()
		closeListeners(l)
		return err
	}
	start.handover()
	return serveUntilSignal(sys, l, 30*time.Second, nil, up)
}

// metricsListener opens metrics.listen, if set.
func metricsListener(addr string) (net.Listener, error) {
	if addr == "" {
		return nil, nil
	}
	return listen(addr)
}
