package main

import (
	"context"
	"errors"
	"net"
	"os"
	"os/signal"
	"slices"
	"syscall"

	"go.uber.org/zap"

	"seckill/cmd/seckill/app"
	"seckill/cmd/seckill/config"
	"seckill/internal/ready"
	"seckill/internal/shard"
)

// dependencies are the servers a process running roles uses, named as its
// logs and its start timeout name them: every Redis deployment, the broker
// with the topics its producer or consumer group needs, and the orders
// database when it is MySQL (SQLite is a local file: nothing to wait for).
// The choices follow app.New's.
func dependencies(cfg config.Config, roles app.Roles) []ready.Dependency {
	deps := shard.Dependencies(cfg.Redis)
	type need struct {
		brokers []string
		topics  []string
	}
	var needs []need
	add := func(brokers []string, topics ...string) {
		for i := range needs {
			if slices.Equal(needs[i].brokers, brokers) {
				for _, t := range topics {
					if !slices.Contains(needs[i].topics, t) {
						needs[i].topics = append(needs[i].topics, t)
					}
				}
				return
			}
		}
		needs = append(needs, need{brokers, topics})
	}
	if roles.Engine && (!roles.Edge || cfg.Edge.Engine == "") {
		add(cfg.Engine.Kafka.Brokers, cfg.Engine.Kafka.Topic)
	}
	if roles.Consumer {
		add(cfg.Consumer.Brokers, cfg.Consumer.Topic, cfg.Consumer.DLQTopic)
	}
	for i, n := range needs {
		name := "kafka"
		if i > 0 {
			name = "kafka.consumer" // the consumer's brokers differ from the engine's
		}
		deps = append(deps, ready.Dependency{Name: name, Check: ready.Kafka(n.brokers, n.topics...)})
	}
	if (roles.Consumer || roles.Edge || roles.Engine && cfg.Edge.Engine == "") && cfg.Store.Driver == "mysql" {
		deps = append(deps, databaseDependency(cfg))
	}
	return deps
}

func databaseDependency(cfg config.Config) ready.Dependency {
	return ready.Dependency{Name: "database", Check: ready.SQL("mysql", cfg.Store.DSN)}
}

// starting is a process between opening its listeners and building its
// parts: the start-up probe answers on its HTTP listeners (alive, not
// ready, busy) and SIGINT/SIGTERM end the wait.
type starting struct {
	status *ready.Status
	probe  *ready.Probe
	ctx    context.Context
	stop   context.CancelFunc
}

// startProbe serves the start-up probe on the listeners given (nil ones
// skipped) until handover, and captures SIGINT/SIGTERM until wait ends.
func startProbe(lns ...net.Listener) *starting {
	s := &starting{status: &ready.Status{}}
	s.ctx, s.stop = signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	s.probe = ready.Serve(s.status, lns...)
	return s
}

// wait waits for deps, at most cfg.StartTimeout. ok false means the
// process must not go on: err says why (the dependencies that never came),
// or is nil when a signal stopped it; the probe has then stopped. With ok
// the probe goes on answering (not ready) while the process builds its
// parts, until handover; signals act as usual again.
func (s *starting) wait(cfg config.Config, log *zap.Logger, deps []ready.Dependency) (ok bool, err error) {
	defer s.stop()
	err = ready.Waiter{Timeout: cfg.StartTimeout, Log: log.Named("start"), Status: s.status}.Wait(s.ctx, deps...)
	if err != nil {
		s.handover()
	}
	if errors.Is(err, ready.ErrInterrupted) {
		log.Info("stopped while starting", zap.Error(err))
		return false, nil
	}
	return err == nil, err
}

// handover stops the probe, leaving its listeners open for the process's
// own servers, and the signal capture (idempotent).
func (s *starting) handover() {
	s.probe.Stop()
	s.stop()
}

// closeListeners closes every listener of l that is open.
func closeListeners(l app.Listeners) {
	for _, ln := range []net.Listener{l.Edge, l.Admin, l.Sidecar, l.Metrics} {
		if ln != nil {
			ln.Close()
		}
	}
}
