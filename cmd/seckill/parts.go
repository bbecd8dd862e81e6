package main

import (
	"fmt"
	"net"
	"time"

	"seckill/engine"
	"seckill/internal/app"
)

// runEdge is `seckill edge`: the public endpoint and the admin listener,
// with the engine in-process (default) or a sidecar (--engine).
func runEdge(args []string) error {
	fs, path := newFlags("edge")
	listenAddr := fs.String("listen", "", "public listener (edge.listen)")
	adminAddr := fs.String("admin-listen", "", "admin listener (admin.listen)")
	eng := fs.String("engine", "", "sidecar engine address, unix:///path.sock or tcp://host:port (edge.engine)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	cfg, log, err := loadConfig(*path)
	if err != nil {
		return err
	}
	defer log.Sync()
	if *listenAddr != "" {
		cfg.Edge.Listen = *listenAddr
	}
	if *adminAddr != "" {
		cfg.Admin.Listen = *adminAddr
	}
	if *eng != "" {
		cfg.Edge.Engine = *eng
	}
	if cfg.Admin.Token == "" {
		return fmt.Errorf("admin.token is empty: set SECKILL_ADMIN_TOKEN (the admin API refuses every call without it)")
	}
	sys, err := app.New(cfg, log, app.Roles{Edge: true, Engine: cfg.Edge.Engine == ""})
	if err != nil {
		return err
	}
	edgeLn, err := listen(cfg.Edge.Listen)
	if err != nil {
		return err
	}
	adminLn, err := listen(cfg.Admin.Listen)
	if err != nil {
		return err
	}
	return serveUntilSignal(sys, app.Listeners{Edge: edgeLn, Admin: adminLn}, 30*time.Second)
}

// runEngine is `seckill engine`: the stock engine as a sidecar.
func runEngine(args []string) error {
	fs, path := newFlags("engine")
	listenAddr := fs.String("listen", "", "unix:///path.sock or tcp://host:port (engine.listen)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	cfg, log, err := loadConfig(*path)
	if err != nil {
		return err
	}
	defer log.Sync()
	if *listenAddr != "" {
		cfg.Engine.Listen = *listenAddr
	}
	if cfg.Engine.Listen == "" {
		return fmt.Errorf("engine.listen (or --listen) is required")
	}
	sys, err := app.New(cfg, log, app.Roles{Engine: true})
	if err != nil {
		return err
	}
	ln, err := engine.Listen(cfg.Engine.Listen)
	if err != nil {
		return err
	}
	mln, err := metricsListener(cfg.Metrics.Listen)
	if err != nil {
		return err
	}
	return serveUntilSignal(sys, app.Listeners{Sidecar: ln, Metrics: mln}, 30*time.Second)
}

// runConsumer is `seckill consumer`.
func runConsumer(args []string) error {
	fs, path := newFlags("consumer")
	if err := fs.Parse(args); err != nil {
		return err
	}
	cfg, log, err := loadConfig(*path)
	if err != nil {
		return err
	}
	defer log.Sync()
	sys, err := app.New(cfg, log, app.Roles{Consumer: true})
	if err != nil {
		return err
	}
	mln, err := metricsListener(cfg.Metrics.Listen)
	if err != nil {
		return err
	}
	return serveUntilSignal(sys, app.Listeners{Metrics: mln}, 30*time.Second)
}

// metricsListener opens metrics.listen, if set.
func metricsListener(addr string) (net.Listener, error) {
	if addr == "" {
		return nil, nil
	}
	return listen(addr)
}
