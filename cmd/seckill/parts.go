package main

import (
	"fmt"
	"net"

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
	if cfg.Admin.Token == "" {
		return fmt.Errorf("admin.token is empty: set SECKILL_ADMIN_TOKEN (the admin API refuses every call without it)")
	}
	sys, err := app.New(cfg, log, app.Roles{Edge: true, Engine: cfg.Edge.Engine == ""})
	if err != nil {
		return err
	}
	return startServing(sys, func() (l app.Listeners, err error) {
		if l.Edge, err = listen(cfg.Edge.Listen); err != nil {
			return l, err
		}
		if l.Admin, err = listen(cfg.Admin.Listen); err != nil {
			l.Edge.Close()
		}
		return l, err
	}, rateReloader(sys, config.Load, *path))
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
	sys, err := app.New(cfg, log, app.Roles{Engine: true})
	if err != nil {
		return err
	}
	return startServing(sys, func() (l app.Listeners, err error) {
		if l.Sidecar, err = engine.Listen(cfg.Engine.Listen); err != nil {
			return l, err
		}
		if l.Metrics, err = metricsListener(cfg.Metrics.Listen); err != nil {
			l.Sidecar.Close()
		}
		return l, err
	}, nil)
}

// runConsumer is `seckill consumer`.
func runConsumer(args []string) error {
	fs, path := newFlags("consumer")
	cfg, log, err := parseAndLoad(fs, path, args, config.Load)
	if err != nil {
		return err
	}
	defer log.Sync()
	sys, err := app.New(cfg, log, app.Roles{Consumer: true})
	if err != nil {
		return err
	}
	return startServing(sys, func() (l app.Listeners, err error) {
		l.Metrics, err = metricsListener(cfg.Metrics.Listen)
		return l, err
	}, nil)
}

// metricsListener opens metrics.listen, if set.
func metricsListener(addr string) (net.Listener, error) {
	if addr == "" {
		return nil, nil
	}
	return listen(addr)
}
