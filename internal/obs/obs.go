// Package obs builds the logger and the metrics registry the parts are
// given: zap (JSON in production, console in development) and a Prometheus
// registry with the Go and process collectors.
package obs

import (
	"fmt"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
)

// LogConfig is the log section.
type LogConfig struct {
	Format string `yaml:"format"` // "json" or "console"
	Level  string `yaml:"level"`  // debug, info, warn, error
}

// NewLogger builds a zap logger from cfg.
func NewLogger(cfg LogConfig) (*zap.Logger, error) {
	var zc zap.Config
	switch cfg.Format {
	case "json", "":
		zc = zap.NewProductionConfig()
	case "console":
		zc = zap.NewDevelopmentConfig()
		zc.EncoderConfig.EncodeLevel = zapcore.CapitalColorLevelEncoder
	default:
		return nil, fmt.Errorf("log.format must be json or console")
	}
	if cfg.Level != "" {
		lvl, err := zapcore.ParseLevel(cfg.Level)
		if err != nil {
			return nil, fmt.Errorf("log.level: %w", err)
		}
		zc.Level = zap.NewAtomicLevelAt(lvl)
	}
	zc.DisableStacktrace = true
	return zc.Build()
}

// NewRegistry returns a registry with the Go runtime and process collectors.
func NewRegistry() *prometheus.Registry {
	r := prometheus.NewRegistry()
	r.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	return r
}
