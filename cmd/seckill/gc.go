package main

import (
	"os"
	"runtime/debug"
	"strconv"

	"go.uber.org/zap"

	"seckill/cmd/seckill/config"
)

// applyGC sets the garbage collector from cfg (config.GC), leaving what
// the environment's GOGC and GOMEMLIMIT set: the runtime read them at
// start, and an operator who exports them means them.
func applyGC(cfg config.GC, log *zap.Logger) {
	percent, ok := os.LookupEnv("GOGC")
	if !ok {
		debug.SetGCPercent(cfg.Percent)
		percent = strconv.Itoa(cfg.Percent)
	}
	if _, ok := os.LookupEnv("GOMEMLIMIT"); !ok && cfg.MemoryLimitMB > 0 {
		debug.SetMemoryLimit(cfg.MemoryLimitMB << 20)
	}
	// A negative limit reads the current one without changing it.
	log.Debug("garbage collector", zap.String("percent", percent), zap.Int64("memoryLimit", debug.SetMemoryLimit(-1)))
}
