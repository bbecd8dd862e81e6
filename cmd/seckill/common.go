package main

import (
	"context"
	"flag"
	"fmt"
	"net"
	"os"
	"os/signal"
	"syscall"
	"time"

	"go.uber.org/zap"

	"seckill/cmd/seckill/app"
	"seckill/cmd/seckill/config"
	"seckill/internal/obs"
)

// loader reads a --config file (may be empty) over a command's defaults
// and applies the environment: config.Load (production defaults) for the
// parts, config.LoadDev (the dev defaults, configs/dev.yaml) for dev.
type loader func(path string) (config.Config, error)

// loadConfig reads --config and the environment with load; fs's own flags
// are applied by the caller afterwards (flags win over both).
func loadConfig(load loader, path string) (config.Config, *zap.Logger, error) {
	cfg, err := load(path)
	if err != nil {
		return cfg, nil, err
	}
	log, err := obs.NewLogger(cfg.Log)
	if err != nil {
		return cfg, nil, err
	}
	applyGC(cfg.GC, log)
	return cfg, log, nil
}

func newFlags(name string) (*flag.FlagSet, *string) {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	path := fs.String("config", "", "YAML configuration file")
	return fs, path
}

// parseAndLoad parses a subcommand's flags and loads the configuration its
// --config names with load; the caller applies its own flags over the
// result.
func parseAndLoad(fs *flag.FlagSet, path *string, args []string, load loader) (config.Config, *zap.Logger, error) {
	if err := fs.Parse(args); err != nil {
		return config.Config{}, nil, err
	}
	return loadConfig(load, *path)
}

// override sets *dst to v when the flag was given.
func override(dst *string, v string) {
	if v != "" {
		*dst = v
	}
}

// startServing opens the listeners and serves sys on them until a signal.
// If a listener cannot be opened, sys is shut down. reload, if not nil,
// runs on SIGHUP; up logs the ready line.
func startServing(sys *app.System, open func() (app.Listeners, error), reload func() error, up *startup) error {
	l, err := open()
	if err != nil {
		_ = sys.Shutdown(context.Background())
		return err
	}
	return serveUntilSignal(sys, l, 30*time.Second, reload, up)
}

// serveUntilSignal runs sys until SIGINT/SIGTERM or a part fails, then shuts
// it down within grace. With reload, SIGHUP runs it (a failure is logged and
// changes nothing); without, SIGHUP is logged and ignored, so a `pkill -HUP
// seckill` meant for the edges does not stop an engine or a consumer.
// up logs the ready line once the parts serve.
func serveUntilSignal(sys *app.System, l app.Listeners, grace time.Duration, reload func() error, up *startup) error {
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, syscall.SIGINT, syscall.SIGTERM, syscall.SIGHUP)
	defer signal.Stop(sig)
	sys.Start(l)
	up.ready()
	var runErr error
wait:
	for {
		select {
		case s := <-sig:
			if s == syscall.SIGHUP {
				if reload == nil {
					sys.Log.Info("SIGHUP: nothing to reload in this process; it keeps running (edge.rate reloads in seckill edge and seckill dev)")
					continue
				}
				if err := reload(); err != nil {
					sys.Log.Error("SIGHUP: reload refused; the settings in force stay", zap.Error(err))
				}
				continue
			}
			sys.Log.Info("shutting down", zap.String("signal", s.String()))
		case runErr = <-sys.Errors():
			sys.Log.Error("a part stopped", zap.Error(runErr))
		}
		break wait
	}
	ctx, cancel := context.WithTimeout(context.Background(), grace)
	defer cancel()
	if err := sys.Shutdown(ctx); err != nil {
		sys.Log.Warn("shutdown", zap.Error(err))
	}
	sys.Log.Info("stopped")
	return runErr
}

func listen(addr string) (net.Listener, error) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("listen %s: %w", addr, err)
	}
	return ln, nil
}
